"""Issue 40 in the guest: real on-disk sizes for `zfsnas-bench predict` to be checked against, and a
full run against a race (`run --until-decided`) of the fits-copy shape. Results in results/predict/
(record.json, the race's databases); tests/e2e/test_predict.py compares them on the host.

Space: a corpus of mixed compressibility (corpusgen.py, seed 40: text, FITS-like images, random
bytes, sparse files, tiny files) generated in /dev/shm, copied (every byte written, as a copy does:
`zfsnas.bench.running.copy.copy_corpus`) into a new filesystem per compression x recordsize on a pool of
its own (a file vdev in /dev/shm, ashift 12), `zpool sync`, then `zfs get used` and friends, the
filesystem destroyed; the empty filesystem's `used` too. `predict` itself runs on the host over the
same bytes (the guest's wheel is installed without dependencies: no lz4, no zstandard; the
manifest of sha256 proves the host's corpus is the guest's).

Costs: what a cell pays besides its copy, one command at a time (`zfs create`, `get`, `set`,
`destroy`, a quiet `zpool sync`, a Python start, `zfsnas-bench --version`).

Race: the fits-copy shape (copy; lz4, zstd-fast, zstd-1, zstd-3 at 1M) on a corpus of the same
kind, 96 MiB (seed 41), with zfs_dirty_data_max lowered to 4 MiB: the corpus is 24 buffers, as a
real corpus is many times the buffer (the FITS study's 69 GB against a few GB), so a full copy is
mostly the pool's sustained pace and a racing copy can stop after two or three buffers. Run in full
with 3 repeats and with --until-decided, each with its own database (copied to the results: the
host asks `recommend` of each, and reads each cell's copy, sync and fixed seconds from them);
their wall times are recorded. Under TCG it takes about a quarter of an hour.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import traceback
from pathlib import Path

import corpusgen

POOL = "zpredict"
IMAGE = Path("/dev/shm/zpredict.img")
SPACE_CORPUS = Path("/dev/shm/zfsnas-predict-corpus")
RACE_CORPUS = Path("/dev/shm/zfsnas-race-corpus")
COMPRESSIONS = ("off", "lz4", "gzip-9", "zstd-1", "zstd-3", "zstd-fast-10")
RECORDSIZES = ("128K", "512K", "1M")
SPACE_PROPERTIES = "used,logicalused,referenced,logicalreferenced,compressratio,usedbydataset"
DIRTY = "/sys/module/zfs/parameters/zfs_dirty_data_max"


class Phase:
    def __init__(self, scenario):
        self.s = scenario
        self.out = scenario.RESULTS / "predict"
        self.out.mkdir(exist_ok=True)
        self.config = scenario.CONFIG
        self.record: dict = {"zfs_version": Path("/sys/module/zfs/version").read_text().strip(), "timeline": {}}

    def run(self, argv: list[str], check: bool = True, timeout: float = 1800) -> str:
        proc = self.s.run(argv, check=check, timeout=timeout)
        return proc.stdout

    def props(self, dataset: str) -> dict[str, str]:
        out = self.run(["zfs", "get", "-Hp", "-o", "property,value", SPACE_PROPERTIES, dataset])
        return dict(line.split("\t", 1) for line in out.strip().splitlines())

    def sync(self) -> None:
        # twice: the second sync writes what the first one's metadata dirtied (space maps aside)
        self.run(["zpool", "sync", POOL])
        self.run(["zpool", "sync", POOL])

    def space(self) -> None:
        """Every combination's filesystem made first, the corpus copied into each, one sync, then
        their `used` (under TCG a create, a sync and a destroy each cost seconds)."""
        size = int(self.config.get("predict_mib", 24)) << 20
        started = time.time()
        corpusgen.generate(SPACE_CORPUS, size, seed=40)
        self.record["space_corpus"] = {"bytes": size, "seed": 40, "manifest": corpusgen.manifest(SPACE_CORPUS),
                                       "generate_seconds": round(time.time() - started, 1)}
        from zfsnas.bench.running.copy import copy_corpus

        self.run(["zfs", "create", "-o", "mountpoint=/zpredict/empty", f"{POOL}/empty"])
        datasets = {}
        for compression in COMPRESSIONS:
            for recordsize in RECORDSIZES:
                name = f"{compression}-{recordsize}"
                self.run(["zfs", "create", "-o", f"compression={compression}", "-o", f"recordsize={recordsize}",
                          "-o", f"mountpoint=/zpredict/{name}", f"{POOL}/{name}"])
                mark = time.time()
                copy_corpus(SPACE_CORPUS, f"/zpredict/{name}/corpus")
                datasets[name] = (compression, recordsize, round(time.time() - mark, 2))
        self.sync()
        self.record["empty"] = self.props(f"{POOL}/empty")
        measured = []
        for name, (compression, recordsize, seconds) in datasets.items():
            props = self.props(f"{POOL}/{name}")
            measured.append({"compression": compression, "recordsize": recordsize, "copy_seconds": seconds, **props})
            self.s.log(f"predict space: {compression} {recordsize}: used {props['used']}")
        self.record["space"] = measured
        for name in [*datasets, "empty"]:
            self.run(["zfs", "destroy", f"{POOL}/{name}"])

    def costs(self) -> None:
        """What a cell pays besides its copy, measured one command at a time: `zfs create` (with the
        properties and mark a cell's child gets), `zfs get`, `zfs set`, `zpool sync` of a quiet pool,
        `zfs destroy`; a Python start, an import of the benchmark runner, `zfsnas-bench --version`."""
        timings: dict[str, list[float]] = {}

        def timed(name: str, argv: list[str]) -> None:
            mark = time.time()
            self.run(argv)
            timings.setdefault(name, []).append(round(time.time() - mark, 2))

        for i in range(3):
            child = f"{POOL}/cost{i}"
            timed("zfs create", ["zfs", "create", "-o", "compression=zstd-3", "-o", "recordsize=1M",
                                 "-o", f"org.zfsnas:bench-run=cost{i}", "-o", f"mountpoint=/zpredict/cost{i}", child])
            timed("zfs get", ["zfs", "get", "-Hp", "-o", "property,value", SPACE_PROPERTIES, child])
            timed("zfs set", ["zfs", "set", "compression=lz4", child])
            timed("zpool sync (quiet)", ["zpool", "sync", POOL])
            timed("zfs destroy", ["zfs", "destroy", child])
            timed("python3 start", ["python3", "-c", "pass"])
            timed("import the runner", ["python3", "-c", "import zfsnas.bench.cli"])
            timed("zfsnas-bench --version", ["zfsnas-bench", "--version"])
        self.record["costs"] = timings
        for name, values in timings.items():
            self.s.log(f"predict costs: {name}: {values} s")

    def race(self) -> None:
        """The fits-copy shape in full (3 repeats) and raced, on the race corpus; each run's wall time."""
        matrix = self.s.SHARE / "guest" / "predict-race.toml"
        jobs = self.s.SHARE / "benchmark-jobs"
        size = int(self.config.get("race_mib", 96)) << 20
        mark = time.time()
        corpusgen.generate(RACE_CORPUS, size, seed=41)
        self.record["race_corpus"] = {"bytes": size, "seed": 41, "generate_seconds": round(time.time() - mark, 1)}
        original = Path(DIRTY).read_text().strip()
        dirty = int(self.config.get("race_dirty_mib", 4)) << 20
        Path(DIRTY).write_text(str(dirty))
        self.record["race_setup"] = {"corpus_bytes": size, "zfs_dirty_data_max": dirty, "original": original}
        try:
            self.run(["zfs", "create", "-o", "mountpoint=/zpredict/racing", f"{POOL}/racing"])
            self.run(["zfsnas-bench", "init", f"{POOL}/racing", "--yes"])
            for kind, extra in (("full", []), ("race", ["--until-decided", "--budget", "30m"])):
                db = Path(f"/var/lib/zfsnas/race-{kind}.sqlite")
                db.parent.mkdir(parents=True, exist_ok=True)
                argv = ["zfsnas-bench", "run", str(matrix), "--dataset", f"{POOL}/racing", "--db", str(db),
                        "--jobs-dir", str(jobs), "--corpus", str(RACE_CORPUS), *extra]
                mark = time.time()
                proc = self.s.run(argv, check=False, timeout=3600)
                seconds = time.time() - mark
                self.record[kind] = {"argv": argv, "rc": proc.returncode, "seconds": round(seconds, 1),
                                     "stdout": proc.stdout[-8000:], "stderr": proc.stderr[-8000:]}
                self.s.log(f"race {kind}: exit {proc.returncode} in {seconds:.0f} s")
                if db.exists():
                    shutil.copy(db, self.out / db.name)
        finally:
            Path(DIRTY).write_text(original)

    def timed(self, name: str, step) -> None:
        mark = time.time()
        try:
            step()
        except Exception:
            self.record[f"{name}_error"] = traceback.format_exc()
            self.s.log(f"predict phase, {name} failed:\n{traceback.format_exc()}")
        self.record["timeline"][f"{name}_seconds"] = round(time.time() - mark, 1)
        (self.out / "record.json").write_text(json.dumps(self.record, indent=1))


def exporters() -> list[int]:
    """The scenario's exporter processes: paused through the phase however it was started (the scenario
    pauses it around the phase, but not when the phase runs alone), so that its refreshes take none of
    the guest's CPU while copies are timed."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.name.isdigit() and any(a.endswith(b"zfsnas-exporter") for a in argv[:2]):
            pids.append(int(entry.name))
    return pids


def run_all(scenario) -> None:
    phase = Phase(scenario)
    paused = exporters()
    for pid in paused:
        os.kill(pid, signal.SIGSTOP)
    phase.record["exporters_paused"] = paused
    try:
        subprocess_run = scenario.run
        subprocess_run(["truncate", "-s", "1G", str(IMAGE)])
        subprocess_run(["zpool", "create", "-f", "-o", "ashift=12", "-O", "mountpoint=none", POOL, str(IMAGE)])
        phase.record["pool"] = scenario.run(["zpool", "get", "-Hp", "-o", "property,value", "ashift", POOL]).stdout
        phase.timed("space", phase.space)
        phase.timed("costs", phase.costs)
        phase.timed("race", phase.race)
    finally:
        shutil.rmtree(SPACE_CORPUS, ignore_errors=True)
        shutil.rmtree(RACE_CORPUS, ignore_errors=True)
        scenario.run(["zpool", "destroy", POOL], check=False)
        if IMAGE.exists():
            os.remove(IMAGE)
        (phase.out / "record.json").write_text(json.dumps(phase.record, indent=1))
        for pid in paused:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
