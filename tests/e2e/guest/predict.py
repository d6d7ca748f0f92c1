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

Race (only when the phase runs alone, ZFSNAS_E2E_ONLY=predict: it takes a quarter of an hour of
TCG time): the fits-copy shape (copy; lz4, zstd-fast, zstd-1, zstd-3 at 1M) on the same corpus,
zfs_dirty_data_max lowered to 4 MiB so that the buffer fills early in a copy, run in full with 3
repeats and with --until-decided, each with its own database (copied to the results: the host
asks `recommend` of each); their wall times are recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from pathlib import Path

import corpusgen

POOL = "zpredict"
IMAGE = Path("/dev/shm/zpredict.img")
SPACE_CORPUS = Path("/dev/shm/zfsnas-predict-corpus")
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

    def race(self) -> None:
        """Only when the phase runs alone (ZFSNAS_E2E_ONLY=predict): under TCG each cell's create, sync
        and destroy cost tens of seconds, and a full run of 12 cells is a quarter of an hour."""
        if "predict" not in (self.config.get("only") or []):
            self.record["race_skipped"] = "the race runs when the predict phase runs alone (ZFSNAS_E2E_ONLY=predict)"
            return
        matrix = self.s.SHARE / "guest" / "predict-race.toml"
        jobs = self.s.SHARE / "benchmark-jobs"
        original = Path(DIRTY).read_text().strip()
        dirty = int(self.config.get("race_dirty_mib", 4)) << 20
        Path(DIRTY).write_text(str(dirty))
        self.record["race_setup"] = {"corpus_bytes": self.record["space_corpus"]["bytes"], "zfs_dirty_data_max": dirty,
                                     "original": original}
        try:
            self.run(["zfs", "create", "-o", "mountpoint=/zpredict/racing", f"{POOL}/racing"])
            self.run(["zfsnas-bench", "init", f"{POOL}/racing", "--yes"])
            for kind, extra in (("full", []), ("race", ["--until-decided", "--budget", "30m"])):
                db = Path(f"/var/lib/zfsnas/race-{kind}.sqlite")
                db.parent.mkdir(parents=True, exist_ok=True)
                argv = ["zfsnas-bench", "run", str(matrix), "--dataset", f"{POOL}/racing", "--db", str(db),
                        "--jobs-dir", str(jobs), "--corpus", str(SPACE_CORPUS), *extra]
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


def run_all(scenario) -> None:
    phase = Phase(scenario)
    try:
        subprocess_run = scenario.run
        subprocess_run(["truncate", "-s", "1G", str(IMAGE)])
        subprocess_run(["zpool", "create", "-f", "-o", "ashift=12", "-O", "mountpoint=none", POOL, str(IMAGE)])
        phase.record["pool"] = scenario.run(["zpool", "get", "-Hp", "-o", "property,value", "ashift", POOL]).stdout
        phase.timed("space", phase.space)
        phase.timed("race", phase.race)
    finally:
        shutil.rmtree(SPACE_CORPUS, ignore_errors=True)
        scenario.run(["zpool", "destroy", POOL], check=False)
        if IMAGE.exists():
            os.remove(IMAGE)
        (phase.out / "record.json").write_text(json.dumps(phase.record, indent=1))
