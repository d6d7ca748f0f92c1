#!/usr/bin/env python3
"""The end-to-end scenario, run inside the QEMU guest (python3 scenario.py <share>).

Builds pools like our users' from the disks the host attached (config.json on the share), starts
the exporter from the project wheel, changes the pools step by step and, at each moment, captures
into <share>/results/<moment>/ as close together in time as possible:
  commands/*.txt      zfs get -Hp all, zpool list -Hp, zpool status -gP/-P/-p, zpool iostat ...
  metrics.txt         the exporter's /metrics, scraped once every background source had refreshed
                      after the commands ran
  tree/               /proc/spl/kstat/zfs and /sys/module/zfs read right after that scrape
                      (same layout as tests/fixtures/linux-zfs-*; `--path.procfs tree/proc`)
  tree_before/        the kstats read right before the scrape (counters lie in between)
  udev/export-db.txt  udevadm info --export-db (every disk and partition)
  times.json          when each part was taken
The write moment also records anon_size samples (kstat and served) while a file is written.
The host's pytest (tests/e2e/test_*.py) compares these; this script only asserts what it needs to
go on. Every wait is a budget of nominal seconds spent at the guest's pace (guest/pace.py: a busy
host stretches it). Standard library only: it runs on the guest's python3 before anything else is trusted.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

from pace import PACE, Budget, Stopwatch, run_bounded, wait_process

SHARE = Path(sys.argv[1] if len(sys.argv) > 1 else "/mnt/share")
RESULTS = SHARE / "results"
CONFIG = json.loads((SHARE / "config.json").read_text())
PORT = CONFIG["port"]
T0 = time.time()
MiB = 1 << 20
BENCH_DB = "/var/lib/zfsnas/bench.sqlite"
# The phases beyond the core moments this run has (the harness's tier for this flavour: TIERS there)
RUN = set(CONFIG.get("phases", ("unit", "bench_config", "client", "smart", "capture_roundtrip", "failures",
                                "predict", "container")))
EXPECTED_POOLS = "tank,fast,lab,backup"   # --pools.expected; backup: a USB pool never imported (failures.py)

# name, compression, recordsize, what is written (compressible corpus / random bytes)
DATASETS = [
    ("tank/lz4", "lz4", "128K", "corpus"),
    ("tank/zstd-fast", "zstd-fast", "128K", "corpus"),
    ("tank/zstd-1", "zstd-1", "128K", "corpus"),
    ("tank/zstd-3", "zstd-3", "128K", "corpus"),
    ("tank/rs256k", "zstd-1", "256K", "corpus"),
    ("tank/rs512k", "lz4", "512K", "corpus"),
    ("tank/rs1m", "zstd-3", "1M", "corpus"),
    ("tank/random", "lz4", "1M", "random"),
    ("fast/db", "lz4", "128K", "random"),
    ("fast/nocomp", "off", "1M", None),
]
DATA_BYTES = int(CONFIG.get("data_mib", 8)) * MiB
WRITE_BYTES = int(CONFIG.get("write_mib", 192)) * MiB

COMMANDS = {
    "zfs_get.txt": ["zfs", "get", "-Hp", "all"],
    "zfs_list.txt": ["zfs", "list", "-Hp", "-t", "all", "-o", "name,used,avail,refer,written,compressratio,type"],
    "zpool_list.txt": ["zpool", "list", "-Hp"],
    "zpool_list_v.txt": ["zpool", "list", "-Hpv"],
    "zpool_get.txt": ["zpool", "get", "-Hp", "all"],
    "zpool_status_gP.txt": ["zpool", "status", "-gP"],
    "zpool_status_P.txt": ["zpool", "status", "-P"],
    "zpool_status_p.txt": ["zpool", "status", "-p"],
    "zpool_status_gPp.txt": ["zpool", "status", "-gPp"],
    "zpool_iostat_w.txt": ["zpool", "iostat", "-Hpvw"],
    "zpool_iostat_q.txt": ["zpool", "iostat", "-Hpvq"],
}


def log(msg: str) -> None:
    print(f"{time.time() - T0:8.2f} {msg}", flush=True)


def run(argv: list[str], check: bool = True, seconds: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`argv` to its end, its output captured; with `seconds`, killed once it has run that many nominal
    seconds at the guest's pace (returncode None: a hang guard, not a deadline of a busy host)."""
    started = time.time()
    if seconds is None:
        proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    else:
        proc = run_bounded(argv, seconds, **kwargs)
    log(f"$ {' '.join(argv)} -> {proc.returncode} ({time.time() - started:.2f} s)")
    if check and proc.returncode != 0:
        log(proc.stdout + proc.stderr)
        raise RuntimeError(f"command failed: {argv}: {proc.stderr.strip()}")
    return proc


def metrics(port: int | None = None) -> str:
    # generous: under TCG on a busy host a scrape during a heavy write has been seen to take > 60 s
    with urllib.request.urlopen(f"http://127.0.0.1:{port or PORT}/metrics", timeout=300 * PACE.slowness()) as response:
        return response.read().decode()


def source_ages(text: str) -> dict[str, float]:
    ages = {}
    for line in text.splitlines():
        if line.startswith("zfs_exporter_source_age_seconds{"):
            labels, _, val = line.rpartition(" ")
            name = labels.split('source="', 1)[1].split('"', 1)[0]
            ages[name] = float(val)
    return ages


def source_success(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("zfs_exporter_source_success{"):
            labels, _, val = line.rpartition(" ")
            out[labels.split('source="', 1)[1].split('"', 1)[0]] = float(val)
    return out


# Sources a capture does not wait for: smartctl reads the disks every --smart.interval (10 minutes;
# smart_phase waits for an exporter of its own instead), the block devices are rescanned every
# minute and kept current between rescans by udev events. Sources that did not refresh within a
# capture's budget join them (said in the log).
SLOW_SOURCES: set[str] = {"smartctl", "block_devices"}


def fresh_metrics(since: float, seconds: float = 60) -> tuple[str, float]:
    """A scrape in which every background source last refreshed after `since`, or failed (waiting
    would not help), within `seconds` nominal seconds (guest/pace.py)."""
    budget = Budget(seconds)
    while True:
        scraped = time.time()
        text = metrics()
        failed = {s for s, ok in source_success(text).items() if not ok}
        stale = {s: a for s, a in source_ages(text).items()
                 if scraped - a < since and s not in SLOW_SOURCES and s not in failed}
        if not stale or budget.spent():
            if stale:
                log(f"sources not refreshed within {budget.describe()}, not waited for again: {stale}")
                SLOW_SOURCES.update(stale)
            return text, scraped
        time.sleep(0.3)


def copy_tree(dest: Path, parameters: bool = True) -> None:
    """/proc/spl/kstat/zfs (and /sys/module/zfs/{version,parameters}) in the fixtures' layout."""
    roots = [Path("/proc/spl/kstat/zfs")] + ([Path("/sys/module/zfs/parameters")] if parameters else [])
    for src_root in roots:
        for dirpath, _, files in os.walk(src_root):
            for name in files:
                src = Path(dirpath) / name
                out = dest / str(src).lstrip("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                try:
                    out.write_bytes(src.read_bytes())
                except OSError:
                    pass
    if parameters:
        version = dest / "sys/module/zfs/version"
        version.write_bytes(Path("/sys/module/zfs/version").read_bytes())


def settle_pools() -> None:
    """Before the guest and the exporter read a moment's values: what ZFS frees in the background
    after a `zfs destroy` (the bench phase's scratch datasets) freed (`zpool wait -t free`), and
    every dirty txg synced. (`zpool list` ALLOC kept falling for seconds after the bench phase:
    34 MB between the exporter's read and the guest's.)"""
    pools = run(["zpool", "list", "-H", "-o", "name"], check=False).stdout.split()
    for pool in pools:
        run(["zpool", "wait", "-t", "free", pool], check=False)
    if pools:
        run(["zpool", "sync"], check=False)


def block_devices() -> list[str]:
    names = []
    for entry in sorted(Path("/sys/class/block").iterdir()):
        if entry.name.startswith(("sd", "vd")):
            names.append(entry.name)
    return names


def capture(name: str, udev: bool = True) -> Path:
    """Small files straight to the share; the trees (hundreds of files: slow over 9p) built in
    /tmp and written to the share as one capture.tar (tests/e2e/conftest.py unpacks it)."""
    out = RESULTS / name
    (out / "commands").mkdir(parents=True, exist_ok=True)
    local = Path("/tmp/capture") / name
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(parents=True)
    settle_pools()
    times: dict[str, float] = {"commands_start": time.time()}
    for filename, argv in COMMANDS.items():
        proc = run(argv, check=False)
        (out / "commands" / filename).write_text(proc.stdout)
        if proc.returncode:
            (out / "commands" / (filename + ".stderr")).write_text(f"exit {proc.returncode}\n{proc.stderr}")
    times["commands_end"] = time.time()
    text, scraped = fresh_metrics(times["commands_end"])
    times["sources_fresh"] = scraped
    copy_tree(local / "tree_before", parameters=False)
    times["tree_before"] = time.time()
    text = metrics()
    times["metrics"] = time.time()
    copy_tree(local / "tree")
    times["tree"] = time.time()
    (out / "metrics.txt").write_text(text)
    if udev:
        (local / "udev").mkdir()
        (local / "udev" / "export-db.txt").write_text(run(["udevadm", "info", "--export-db"]).stdout)
    with tarfile.open(out / "capture.tar", "w") as tar:
        for part in sorted(local.iterdir()):
            tar.add(part, arcname=part.name)
    shutil.rmtree(local)
    times["end"] = time.time()
    (out / "times.json").write_text(json.dumps(times, indent=1))
    log(f"captured {name} in {times['end'] - times['commands_start']:.1f} s "
        f"(metrics {times['metrics'] - times['commands_end']:.1f} s after the commands)")
    return out


def disk_path(disk: dict) -> str:
    """The disk's /dev/disk/by-id link as a user would pick it: ata-/scsi-/virtio- (not wwn-).

    SAS disks with a WWN are named by it (scsi-3<wwn>), SATA and virtio disks by serial.
    """
    keys = [disk["serial"]] + ([disk["wwn"].removeprefix("0x")] if disk.get("wwn") else [])
    for key in keys:
        for link in sorted(Path("/dev/disk/by-id").iterdir()):
            if key in link.name and "-part" not in link.name and not link.name.startswith("wwn-"):
                return str(link)
    raise RuntimeError(f"no /dev/disk/by-id link for {keys}: {sorted(os.listdir('/dev/disk/by-id'))}")


def start_exporter() -> subprocess.Popen:
    helptext = run(["zfsnas-exporter", "--help"]).stdout
    argv = ["zfsnas-exporter", f"--web.listen-address=0.0.0.0:{PORT}"]
    optional = [("--collector.vdevlatency", None), ("--datasets.refresh-interval", "5"),
                ("--datasets.snapshot-interval", "5"), ("--pools.refresh-interval", "5"),
                ("--vdevlatency.refresh-interval", "5"), ("--bench.db", BENCH_DB),
                ("--pools.expected", EXPECTED_POOLS)]
    for flag, val in optional:
        if flag in helptext:
            argv.append(flag if val is None else f"{flag}={val}")
    log(f"exporter: {' '.join(argv)}")
    logfile = open(RESULTS / "exporter.log", "wb")
    proc = subprocess.Popen(argv, stdout=logfile, stderr=logfile)
    answering(proc, PORT, 60, "exporter.log")
    return proc


def answering(proc: subprocess.Popen | None, port: int, seconds: float, log_name: str) -> str:
    """The first /metrics answer on `port` once it listens, within `seconds` nominal seconds; an
    exit of `proc` (when given) ends the wait at once."""
    budget = Budget(seconds)
    while True:
        try:
            return metrics(port)
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"exporter exited ({proc.returncode}); see {log_name}") from None
            if budget.spent():
                raise RuntimeError(f"nothing answered on port {port} within {budget.describe()}; see {log_name}") from None
            time.sleep(0.3)


def create_pools() -> dict:
    disks = CONFIG["disks"]
    paths = {d["serial"]: disk_path(d) for d in disks}

    def members(pool, role):
        return [paths[d["serial"]] for d in disks if d["pool"] == pool and d["role"] == role]

    tank = ["zpool", "create", "-f", "-O", "atime=off", "tank", "raidz2", *members("tank", "data")]
    tank += ["cache", *members("tank", "cache"), "spare", *members("tank", "spare")]
    run(tank)
    fast = ["zpool", "create", "-f", "-O", "atime=off", "fast"]
    mirrors: dict[str, list[str]] = {}
    for d in disks:
        if d["pool"] == "fast":
            mirrors.setdefault(d["group"], []).append(paths[d["serial"]])
    for group in sorted(mirrors):
        fast += ["mirror", *mirrors[group]]
    run(fast)
    # partitions show their ZFS labels only after a change event
    run(["udevadm", "trigger", "--action=change", "--subsystem-match=block"])
    run(["udevadm", "settle", f"--timeout={int(120 * PACE.slowness())}"])   # a hang guard: the queue empties at the guest's pace
    return paths


def corpus(size: int) -> bytes:
    """Real text (Python sources of the guest): compressible, like documents on a NAS."""
    chunks, total = [], 0
    for path in sorted(Path("/usr/lib").glob("python3*/**/*.py")):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= size:
            break
    return b"".join(chunks)[:size]


def write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def create_datasets() -> dict:
    text = corpus(DATA_BYTES)
    random = os.urandom(DATA_BYTES)
    expect = {}
    for name, compression, recordsize, content in DATASETS:
        run(["zfs", "create", "-o", f"compression={compression}", "-o", f"recordsize={recordsize}", name])
        if content:
            write_file(f"/{name}/data.bin", text if content == "corpus" else random)
            expect[name] = {"compression": compression, "recordsize": recordsize, "content": content,
                            "written_bytes": DATA_BYTES}
    run(["zpool", "sync"])
    run(["zfs", "snapshot", "-r", "tank@e2e-1"])
    with open("/tank/lz4/data.bin", "ab") as f:
        f.write(text[: 2 * MiB])
    expect["tank/lz4"]["written_bytes"] += 2 * MiB
    run(["zfs", "snapshot", "tank/lz4@e2e-2"])
    run(["zfs", "snapshot", "fast/db@e2e-1"])
    run(["zpool", "sync"])
    return expect


def arcstat(field: str) -> int:
    for line in Path("/proc/spl/kstat/zfs/arcstats").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == field:
            return int(parts[2])
    raise KeyError(field)


def served(text: str, metric: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(metric + " "):
            return float(line.split()[1])
    return None


def write_phase() -> None:
    """Write WRITE_BYTES into fast/nocomp while sampling anon_size from kstat and /metrics."""
    samples = []
    done = threading.Event()

    def writer():
        block = b"\xa5" * MiB
        with open("/fast/nocomp/big.bin", "wb") as f:
            for _ in range(WRITE_BYTES // MiB):
                f.write(block)
        done.set()

    for _ in range(3):
        samples.append({"phase": "rest", "t": time.time(), "kstat": arcstat("anon_size"),
                        "served": served(metrics(), "zfs_arc_anon_size_bytes")})
        time.sleep(0.2)
    started = time.time()
    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():
        k = arcstat("anon_size")
        scrape_start = time.time()
        text = metrics()
        samples.append({"phase": "write", "t": time.time(), "scrape_seconds": time.time() - scrape_start,
                        "kstat": k, "kstat_after": arcstat("anon_size"),
                        "served": served(text, "zfs_arc_anon_size_bytes")})
    thread.join()
    write_seconds = time.time() - started
    run(["zpool", "sync", "fast"])
    (RESULTS / "write").mkdir(exist_ok=True)
    (RESULTS / "write" / "anon_samples.json").write_text(json.dumps(
        {"write_bytes": WRITE_BYTES, "write_seconds": write_seconds, "samples": samples}, indent=1))
    log(f"write of {WRITE_BYTES // MiB} MiB in {write_seconds:.1f} s, {len(samples)} anon samples, "
        f"max served {max((s['served'] or 0) for s in samples)}")


def bench_phase() -> None:
    """zfsnas-bench on a scratch dataset: a smoke matrix, its cleanup, its refusal elsewhere."""
    out = RESULTS / "bench"
    out.mkdir(exist_ok=True)
    record = {"present": shutil.which("zfsnas-bench") is not None}
    jobs = SHARE / "benchmark-jobs"
    matrix = SHARE / "guest" / "bench-e2e.toml"
    record["matrix_present"] = (jobs / "write-size.fio").exists()
    if not record["present"] or not record["matrix_present"]:
        (out / "record.json").write_text(json.dumps(record, indent=1))
        log(f"bench skipped: {record}")
        return
    os.makedirs(os.path.dirname(BENCH_DB), exist_ok=True)
    run(["zfs", "create", "fast/scratch"])
    steps = {
        "init": ["zfsnas-bench", "init", "fast/scratch", "--yes"],
        "plan": ["zfsnas-bench", "plan", str(matrix), "--dataset", "fast/scratch", "--jobs-dir", str(jobs)],
        "run": ["zfsnas-bench", "run", str(matrix), "--dataset", "fast/scratch", "--db", BENCH_DB,
                "--jobs-dir", str(jobs)],
        "list_datasets": ["zfs", "list", "-H", "-o", "name", "-r", "-t", "all", "fast/scratch"],
        "refuse": ["zfsnas-bench", "run", str(matrix), "--dataset", "tank/lz4", "--db", BENCH_DB,
                   "--jobs-dir", str(jobs)],
        "list_after_refuse": ["zfs", "list", "-H", "-o", "name", "-r", "-t", "all", "tank/lz4"],
        "list": ["zfsnas-bench", "list", "--db", BENCH_DB],
    }
    for step, argv in steps.items():
        started = time.time()
        proc = run(argv, check=False, env={**os.environ, "ZFSNAS_BENCH_DB": BENCH_DB}, seconds=900)
        record[step] = {"argv": argv, "rc": proc.returncode, "stdout": proc.stdout[-20000:],
                        "stderr": proc.stderr[-20000:], "seconds": round(time.time() - started, 2)}
    if os.path.exists(BENCH_DB):
        shutil.copy(BENCH_DB, out / "bench.sqlite")
    (out / "record.json").write_text(json.dumps(record, indent=1))


# --- issue 15: `zfsnas-exporter capture` on live ZFS, replayed on the host (tests/e2e/test_capture.py) ---

CAPTURE_RUNS = {  # name: (as the unprivileged user, --anonymize, extra flags)
    "root": (False, False, ["--interval", "5"]),  # two snapshots: counters with a before and after
    "root-anonymized": (False, True, []),
    "user": (True, False, []),
    "user-anonymized": (True, True, []),
}


def capture_roundtrip() -> None:
    """`zfsnas-exporter capture` as root and as `nobody`, with and without --anonymize, into
    <share>/results/capture_roundtrip/; the root one between two scrapes of the live exporter
    (live_before, and live_after once every background source refreshed after the capture)."""
    out = RESULTS / "capture_roundtrip"
    out.mkdir(exist_ok=True)
    local = Path("/tmp/capture-roundtrip")
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(mode=0o777)
    local.chmod(0o777)
    record: dict = {}
    for name, (unprivileged, anonymize, extra) in CAPTURE_RUNS.items():
        archive = local / f"{name}.tar.gz"
        argv = ["zfsnas-exporter", "capture", str(archive), f"--capture.metrics-url=http://127.0.0.1:{PORT}/metrics",
                f"--bench.db={BENCH_DB}", f"--pools.expected={EXPECTED_POOLS}", *extra] + (["--anonymize"] if anonymize else [])
        if unprivileged:
            argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv]
        if name == "root":
            (out / f"{name}.live_before.txt").write_text(metrics())
        started = time.time()
        proc = run(argv, check=False, seconds=600)
        ended = time.time()
        if name == "root":  # the one compared with the live exporter (others: with their own live render)
            after, _ = fresh_metrics(ended)
            (out / f"{name}.live_after.txt").write_text(after)
        record[name] = {"argv": argv, "rc": proc.returncode, "stderr": proc.stderr[-5000:],
                        "seconds": round(ended - started, 2)}
        if archive.exists():
            shutil.copy(archive, out / archive.name)
        log(f"capture {name}: exit {proc.returncode} in {ended - started:.1f} s")
    (out / "record.json").write_text(json.dumps(record, indent=1))
    shutil.rmtree(local, ignore_errors=True)


# --- issue 29: SMART of the pool members (tests/e2e/test_smart.py) ---

SMART_PORT_OFFSET = 2  # a second exporter of its own, reading SMART every few seconds, beside the scenario's


def smart_served(port: int, since: float, seconds: float = 60) -> str:
    """That exporter's /metrics once its smartctl source has read every disk after `since` (within
    `seconds` nominal seconds)."""
    budget = Budget(seconds)
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60 * PACE.slowness()) as response:
                text = response.read().decode()
            scraped = time.time()
            age = source_ages(text).get("smartctl")
            if age is not None and scraped - age > since and "zfs_disk_smart_state{" in text:
                return text
        except OSError:
            pass
        if budget.spent():
            raise RuntimeError(f"no SMART read after {since:.0f} within {budget.describe()}")
        time.sleep(0.3)


def smart_phase() -> None:
    """smartctl's own view of four disks (two SATA, one SAS, one virtio) beside what an exporter of
    their own serves of them, a short self-test on a SATA disk first (QEMU's AHCI disk logs it at
    once), then the standby check: `hdparm -y` on the other SATA disk, its power state before and
    after the exporter's next read. Four disks, not all: each smartctl takes most of a second
    under TCG (the scenario's own exporter read every disk at its start, in the steady moment).
    Into <share>/results/smart/: smartctl/<device>.json (`smartctl --json=c --all`, the plain
    command a user runs), metrics.txt, metrics_standby.txt, record.json."""
    out = RESULTS / "smart"
    (out / "smartctl").mkdir(parents=True, exist_ok=True)

    def device(disk: dict) -> str:
        return os.path.basename(os.path.realpath(disk_path(disk)))

    sata = [d for d in CONFIG["disks"] if d["bus"] == "sata"]
    others = [next(d for d in CONFIG["disks"] if d["bus"] == bus) for bus in ("scsi", "virtio")]
    tested, sleeper = device(sata[0]), device(sata[-1])
    devices = [tested, sleeper, *map(device, others)]
    record: dict = {"devices": devices, "self_test_device": tested, "standby_device": sleeper,
                    "self_test": run(["smartctl", "-t", "short", f"/dev/{tested}"], check=False).returncode}
    port = PORT + SMART_PORT_OFFSET
    argv = ["zfsnas-exporter", f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
            "--collector.disks", "--collector.pools", "--collector.smart", "--smart.interval=1",
            f"--disks.device-exclude=^(?!(?:{'|'.join(devices)})$)"]
    logfile = open(out / "exporter.log", "wb")
    exporter = subprocess.Popen(argv, stdout=logfile, stderr=logfile)
    try:
        mark, watch = time.time(), Stopwatch()
        (out / "metrics.txt").write_text(smart_served(port, mark))
        record["first_read_seconds"] = watch.wall()
        record["first_read_nominal_seconds"] = watch.nominal()
        for name in devices:
            proc = run(["smartctl", "--json=c", "--all", f"/dev/{name}"], check=False)
            (out / "smartctl" / f"{name}.json").write_text(proc.stdout)
        record["power_before"] = run(["hdparm", "-C", f"/dev/{sleeper}"], check=False).stdout.strip()
        record["standby_command"] = run(["hdparm", "-y", f"/dev/{sleeper}"], check=False).returncode
        record["power_after_standby"] = run(["hdparm", "-C", f"/dev/{sleeper}"], check=False).stdout.strip()
        mark = time.time()
        (out / "metrics_standby.txt").write_text(smart_served(port, mark))
        record["power_after_read"] = run(["hdparm", "-C", f"/dev/{sleeper}"], check=False).stdout.strip()
    finally:
        terminate(exporter, 20)
        logfile.close()
        (out / "record.json").write_text(json.dumps(record, indent=1))


DIRTY_PARAMETER = Path("/sys/module/zfs/parameters/zfs_dirty_data_max")


def bench_config_phase() -> None:
    """zfsnas-bench configurations on live ZFS (after bench_phase made fast/scratch): a
    zfs_dirty_data_max sweep, a run SIGKILLed mid-cell then `zfsnas-bench restore`, and the
    CrystalDiskMark 4K-write effect on 4K vs 16K volblocksize zvols. Results in bench/config.json."""
    out = RESULTS / "bench"
    record: dict = {"dirty_before": DIRTY_PARAMETER.read_text().strip()}
    jobs, guest = SHARE / "benchmark-jobs", SHARE / "guest"
    env = {**os.environ, "ZFSNAS_BENCH_DB": BENCH_DB}

    def bench(step: str, *argv: str) -> None:
        started = time.time()
        proc = run(["zfsnas-bench", *argv, "--db", BENCH_DB], check=False, env=env, seconds=900)
        record[step] = {"argv": list(argv), "rc": proc.returncode, "stdout": proc.stdout[-20000:],
                        "stderr": proc.stderr[-20000:], "seconds": round(time.time() - started, 2)}

    started = time.time()
    bench("dirty_run", "run", str(guest / "bench-dirty.toml"), "--dataset", "fast/scratch", "--jobs-dir", str(jobs),
          "--allow-parameters")
    record["dirty_after_sweep"] = DIRTY_PARAMETER.read_text().strip()
    # A run killed mid-cell: the parameter stays changed until `zfsnas-bench restore`.
    proc = subprocess.Popen(["zfsnas-bench", "run", str(guest / "bench-kill.toml"), "--dataset", "fast/scratch",
                             "--jobs-dir", str(jobs), "--allow-parameters", "--db", BENCH_DB],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    budget = Budget(120)
    while DIRTY_PARAMETER.read_text().strip() != str(48 * MiB) and not budget.spent() and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1)  # fio is writing now
    proc.kill()
    proc.wait()
    record["dirty_after_kill"] = DIRTY_PARAMETER.read_text().strip()
    # fio runs under the runner's watchdog (zfsnas.bench.running.fiowatch): it dies with the runner
    record["fio_after_kill"] = fio_processes_after(5.0)
    bench("restore", "restore")
    record["dirty_after_restore"] = DIRTY_PARAMETER.read_text().strip()
    bench("cdm_run", "run", str(guest / "bench-cdm.toml"), "--dataset", "fast/scratch", "--jobs-dir", str(jobs))
    record["seconds"] = round(time.time() - started, 2)
    if os.path.exists(BENCH_DB):
        shutil.copy(BENCH_DB, out / "bench.sqlite")
    (out / "config.json").write_text(json.dumps(record, indent=1))


def fio_processes_after(seconds: float) -> list[str]:
    """The command lines of fio processes still alive once none is left or `seconds` passed."""
    budget = Budget(seconds)
    while True:
        alive = []
        for pid in os.listdir("/proc"):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if pid.isdigit() and cmdline and os.path.basename(cmdline[0].decode()) == "fio":
                alive.append(" ".join(c.decode() for c in cmdline if c))
        if not alive or budget.spent():
            return alive
        time.sleep(0.2)


# --- the stack's exporter container on live ZFS (host side: tests/e2e/container.py) --------------

CONTAINER_SOURCES = ("zpool_list", "zpool_status", "zfs_datasets", "zpool_iostat", "block_devices")  # block_devices: the serials


def container_metrics(seconds: float, want_success: bool) -> str:
    """The container exporter's /metrics once every source in CONTAINER_SOURCES has refreshed (and,
    with want_success, succeeded), or what it serves when `seconds` nominal seconds are spent."""
    budget = Budget(seconds)
    text = ""
    while not budget.spent():
        try:
            with urllib.request.urlopen("http://127.0.0.1:9923/metrics", timeout=10 * PACE.slowness()) as response:
                text = response.read().decode()
        except (OSError, http.client.HTTPException):   # not listening yet, or a cut answer: ask again
            time.sleep(1)
            continue
        states = {}
        for line in text.splitlines():
            if line.startswith("zfs_exporter_source_success{"):
                states[line.split('source="')[1].split('"')[0]] = line.rsplit(None, 1)[1]
        if all(s in states for s in CONTAINER_SOURCES) and (
                not want_success or all(states[s] == "1" for s in CONTAINER_SOURCES)):
            return text
        time.sleep(1)
    return text


def record_error(out: Path, what: str) -> None:
    """Append what failed, its traceback and dockerd's last words to container/error.txt, which
    the host's test prints (the scenario log stays in the guest's results, out of CI's sight)."""
    journal = run(["journalctl", "--no-pager", "-n", "15", "-u", "docker", "-u", "containerd"], check=False).stdout
    tail = journal.splitlines()[-15:]
    with open(out / "error.txt", "a") as f:
        f.write(f"{what} failed at {time.time() - T0:.0f} s:\n{traceback.format_exc()}")
        f.write("dockerd's journal, last lines:\n" + "\n".join(tail) + "\n\n")


DOCKER_DAEMON = {"data-root": "/tmp/docker",   # tmpfs: faster than the qcow2 root under TCG
                 "iptables": False, "bridge": "none"}   # the stack uses the host's network only


def container_phase() -> dict:
    """The stack's exporter on live ZFS as TrueNAS SCALE runs a custom app: Docker (in the image)
    started by systemd, the saved exporter image loaded, and docker-compose.yml brought up as it is
    (`docker-compose up -d --no-build zfsnas-exporter`, the image and the Grafana password set as a
    user sets them); then the service's settings as `docker run` with two privileges taken away in
    turn. Each run's /metrics goes to results/container/<variant>.txt."""
    src = SHARE / "container"
    out = RESULTS / "container"
    out.mkdir(exist_ok=True)
    spec = json.loads((src / "run.json").read_text())
    timings = {}
    mark = time.time()
    Path("/etc/docker").mkdir(exist_ok=True)
    Path("/etc/docker/daemon.json").write_text(json.dumps(DOCKER_DAEMON))
    run(["systemctl", "start", "docker"], seconds=600)
    try:
        budget = Budget(300)
        while run(["docker", "info"], check=False).returncode:
            if budget.spent():
                raise RuntimeError(f"dockerd did not answer within {budget.describe()}")
            time.sleep(1)
        timings["dockerd_seconds"] = time.time() - mark
        mark = time.time()
        run(["docker", "load", "-i", str(src / "exporter.tar")], seconds=900)
        timings["load_seconds"] = time.time() - mark
        compose = Path("/tmp/zfsnas-compose")
        shutil.copytree(src / "compose", compose, dirs_exist_ok=True)
        env = {**os.environ, **spec["compose_env"]}
        mark = time.time()
        try:
            run(["docker-compose", "up", "-d", "--no-build", "zfsnas-exporter"], cwd=compose, env=env, seconds=600)
            (out / "compose.txt").write_text(container_metrics(180, want_success=True))
        except Exception:
            record_error(out, "docker-compose up")
        (out / "compose.log").write_text(run(["docker-compose", "logs", "--no-color"], check=False, cwd=compose,
                                             env=env).stdout)
        (out / "compose.ps").write_text(run(["docker-compose", "ps"], check=False, cwd=compose, env=env).stdout)
        run(["docker-compose", "down"], check=False, cwd=compose, env=env, seconds=300)
        timings["compose_seconds"] = time.time() - mark
        log(f"container compose: served in {timings['compose_seconds']:.0f} s")
        for variant, args in spec["variants"].items():
            mark = time.time()
            name = f"zfsnas-{variant.replace('_', '-')}"
            try:   # one variant failing must not cost the others their record
                run(["docker", "run", "-d", f"--name={name}", *args, spec["image"], *spec["command"]])
                (out / f"{variant}.txt").write_text(container_metrics(90, want_success=False))
            except Exception:
                record_error(out, f"variant {variant}")
            (out / f"{variant}.log").write_text(run(["docker", "logs", name], check=False).stderr)
            run(["docker", "rm", "-f", name], check=False)
            timings[f"{variant}_seconds"] = time.time() - mark
            log(f"container {variant}: served in {timings[f'{variant}_seconds']:.0f} s")
    except Exception:
        record_error(out, "container step")
        raise
    finally:
        run(["systemctl", "stop", "docker", "docker.socket", "containerd"], check=False, seconds=300)
        (out / "dockerd.log").write_text(run(["journalctl", "--no-pager", "-u", "docker", "-u", "containerd"],
                                             check=False).stdout)
    (out / "timings.json").write_text(json.dumps(timings, indent=1))
    return timings


# --- issue 27: experiments run from a client (tests/e2e/test_client.py) -------------------------------

# dataset, share name, compression: the same files copied into each over SMB by the host's smbclient
SMB_SHARES = [("tank/smb-lz4", "lz4", "lz4"), ("tank/smb-zstd", "zstd", "zstd-3")]
SMB_CONF = """[global]
   server role = standalone server
   map to guest = Bad User
   guest account = nobody
   disable netbios = yes
   smb ports = 445
   server min protocol = SMB2
   load printers = no
   printing = bsd
   printcap name = /dev/null
   disable spoolss = yes
   log file = /tmp/samba-%m.log
   # no DOS attributes or extended attributes: fewer metadata writes per file, so the open and close
   # around the copy (in smbclient's time, not in the dataset's) stay short under TCG
   store dos attributes = no
   ea support = no
"""


def terminate(proc: subprocess.Popen, seconds: float) -> None:
    """SIGTERM, then SIGKILL after `seconds` nominal seconds; reaped either way."""
    proc.terminate()
    if wait_process(proc, seconds) is None:
        proc.kill()
        proc.wait()


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for(path: Path, seconds: float) -> bool:
    budget = Budget(seconds)
    while not path.exists() and not budget.spent():
        time.sleep(0.2)
    return path.exists()


def client_phase() -> None:
    """Samba serves two datasets (lz4, zstd-3); for each, `zfsnas-bench watch --until-idle` runs while
    the host's smbclient copies the same files into it through the forwarded port (the harness
    answers the request files on the share); then `zfsnas-bench import fio` of a fio JSON made here.
    Results in results/client/ (record.json, fio.json) and the bench database."""
    out = RESULTS / "client"
    out.mkdir(exist_ok=True)
    exchange = SHARE / "client"
    record: dict = {"shares": {}}
    conf = SMB_CONF + "".join(f"[{share}]\n   path = /{dataset}\n   read only = no\n   guest ok = yes\n"
                              f"   force user = root\n" for dataset, share, _c in SMB_SHARES)
    Path("/etc/samba").mkdir(exist_ok=True)
    Path("/etc/samba/smb.conf").write_text(conf)
    for dataset, _share, compression in SMB_SHARES:
        run(["zfs", "create", "-o", f"compression={compression}", "-o", "recordsize=1M", dataset])
        os.chmod(f"/{dataset}", 0o777)
    for directory in ("/run/samba", "/var/lib/samba/private", "/var/cache/samba", "/var/log/samba"):
        os.makedirs(directory, exist_ok=True)
    # --no-process-group in a session of its own: smbd signals its whole process group when it stops
    smbd = subprocess.Popen(["smbd", "--foreground", "--no-process-group", "--debug-stdout", "-s",
                             "/etc/samba/smb.conf"], start_new_session=True, stdout=open(out / "smbd.log", "wb"),
                            stderr=subprocess.STDOUT)
    env = {**os.environ, "ZFSNAS_BENCH_DB": BENCH_DB}
    try:
        budget = Budget(120)
        while not port_open(445):
            if smbd.poll() is not None or budget.spent():
                raise RuntimeError(f"smbd did not listen on 445 (exit {smbd.poll()}): see client/smbd.log")
            time.sleep(0.3)
        for n, (dataset, share, compression) in enumerate(SMB_SHARES, 1):
            # --until-idle 10: under TCG a zstd txg sync can starve smbd for seconds mid-copy
            argv = ["zfsnas-bench", "watch", "--dataset", dataset, "--until-idle", "10", "--duration", "600",
                    "--matrix", "smb-copy", "--workload", "fits-copy", "--label", "FITS over SMB",
                    "--set", "protocol=smb", "--set", "client=smbclient", "--db", BENCH_DB]
            if CONFIG.get("grafana_url"):
                argv += ["--grafana-url", CONFIG["grafana_url"]]
            env["ZFSNAS_GRAFANA_TOKEN"] = CONFIG.get("grafana_token", "")
            started = time.time()
            watch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            # the watch reads its baseline first, then says so: only then may the client start
            seen = ""
            while "start the client now" not in seen and watch.poll() is None:
                line = watch.stderr.readline() if watch.stderr else ""
                seen += line
                if not line:
                    break
            (exchange / f"request-{n}.json").write_text(json.dumps({"share": share, "n": n}))
            done = wait_for(exchange / f"done-{n}.json", 600)
            stdout, stderr = watch.communicate(timeout=700 * PACE.slowness())
            props = run(["zfs", "get", "-Hp", "-o", "property,value", "compressratio,used,logicalused,written",
                         dataset]).stdout
            record["shares"][share] = {
                "dataset": dataset, "compression": compression, "rc": watch.returncode, "stdout": stdout,
                "stderr": seen + stderr, "seconds": round(time.time() - started, 2), "client_done": done,
                "client": json.loads((exchange / f"done-{n}.json").read_text()) if done else None,
                "zfs_get": dict(line.split("\t") for line in props.splitlines()),
                "files": sorted(os.listdir(f"/{dataset}"))}
            log(f"client copy into {dataset}: watch exit {watch.returncode}: {stdout.strip()}")
    finally:
        terminate(smbd, 10)
    fio_json = Path("/tmp/e2e-fio.json")
    run(["fio", "--name=client-seq-write", "--rw=write", "--bs=128k", "--size=16M", "--directory=/tank/smb-lz4",
         "--output-format=json", f"--output={fio_json}", "--name=client-rand-read", "--rw=randread", "--bs=4k",
         "--size=16M", "--runtime=2", "--time_based"])
    shutil.copy(fio_json, out / "fio.json")
    proc = run(["zfsnas-bench", "import", "fio", str(fio_json), "--dataset", "tank/smb-lz4", "--matrix", "fio-import",
                "--set", "client=guest", "--db", BENCH_DB], check=False, env=env)
    record["import_fio"] = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    (out / "record.json").write_text(json.dumps(record, indent=1))
    (RESULTS / "bench").mkdir(exist_ok=True)
    shutil.copy(BENCH_DB, RESULTS / "bench" / "bench.sqlite")     # with the watched and imported results


def stop_exporter(exporter: subprocess.Popen) -> dict[str, float]:
    """SIGTERM, as `docker stop` sends; the seconds until the exporter exited, wall-clock and
    nominal (guest/pace.py; killed after 20 nominal seconds: the host's test then says so)."""
    watch = Stopwatch()
    exporter.terminate()
    if wait_process(exporter, 20) is None:
        log("exporter still running 20 nominal s after SIGTERM: killed")
        exporter.kill()
        exporter.wait()
    return {"seconds": watch.wall(), "nominal_seconds": watch.nominal()}


class Timeline(dict):
    """When each part of the scenario took how long (wall-clock and nominal seconds: guest/pace.py),
    written to results/timeline.json at every change: a guest cut short still leaves what it did."""

    def __setitem__(self, key: str, value) -> None:
        super().__setitem__(key, value)
        (RESULTS / "timeline.json").write_text(json.dumps({**self, "pace": PACE.history}, indent=1))

    def phase(self, name: str, action, optional: bool = True):
        """Run `action`, record `<name>_seconds` and `<name>_nominal_seconds`; an optional phase's
        failure is logged (its own host test reports it: the moments before it stay valid)."""
        watch = Stopwatch()
        try:
            return action()
        except Exception:
            if not optional:
                raise
            log(f"{name.replace('_', ' ')} failed:\n{traceback.format_exc()}")
        finally:
            self[f"{name}_seconds"] = watch.wall()
            self[f"{name}_nominal_seconds"] = watch.nominal()


class Paused:
    """The scenario's exporter stopped (SIGSTOP) while a phase that neither reads it nor changes what
    it serves runs (the unit phase has an exporter of its own; predict works on a pool of its own
    and only `zfs get`s it). Under TCG the guest's time is the host's CPU time, and that exporter's
    refreshes every 5 s plus the host Prometheus's scrapes (1-2 s of CPU each) took about one of
    the guest's two vCPUs: paused, those phases run at the speed the rest of the guest allows.
    The host Prometheus's scrapes meanwhile fail (`up` 0), which no test reads as a fault."""

    def __init__(self, exporter: subprocess.Popen | None):
        self.exporter = exporter

    def __enter__(self) -> None:
        if self.exporter is not None and self.exporter.poll() is None:
            os.kill(self.exporter.pid, signal.SIGSTOP)
            log("scenario exporter paused (SIGSTOP)")

    def __exit__(self, *exc) -> None:
        if self.exporter is not None and self.exporter.poll() is None:
            os.kill(self.exporter.pid, signal.SIGCONT)
            log("scenario exporter resumed (SIGCONT)")


def failures_phase() -> None:
    """Issue 28's failure states, in guest/failures.py (results/failures/; tests/e2e/test_failures.py)."""
    import failures

    failures.run_all(sys.modules[__name__])


def predict_phase() -> None:
    """Issue 40's space and racing figures, in guest/predict.py (results/predict/; tests/e2e/test_predict.py)."""
    import predict

    predict.run_all(sys.modules[__name__])


TIMELINE = Timeline()


def unit_phase() -> None:
    """The shipped systemd unit under the guest's systemd (guest/unit.py; tests/e2e/test_unit.py)."""
    import unit

    unit.run(sys.modules[__name__])


PHASES = {"client": client_phase, "bench": bench_phase, "capture": capture_roundtrip, "failures": failures_phase,
          "predict": predict_phase, "container": container_phase, "unit": unit_phase}


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    PACE.start()
    timeline = TIMELINE
    timeline["uptime_at_start"] = float(Path("/proc/uptime").read_text().split()[0])
    status = 0
    exporter = None
    try:
        exporter = timeline.phase("exporter_start", start_exporter, optional=False)
        paths = timeline.phase("pools_and_data", create_pools, optional=False)
        (RESULTS / "disk_paths.json").write_text(json.dumps(paths, indent=1))
        expect = timeline.phase("datasets", create_datasets, optional=False)
        (RESULTS / "expect.json").write_text(json.dumps(expect, indent=1))
        if CONFIG.get("only"):   # a developer's shortcut (harness ZFSNAS_E2E_ONLY): these phases alone
            for name in CONFIG["only"]:
                timeline.phase(name, PHASES[name])
            capture("bench", udev=False)
            return status
        capture("steady")
        if "unit" in RUN:
            with Paused(exporter):
                timeline.phase("unit", unit_phase)
        timeline.phase("write", lambda: (capture("before_write", udev=False), write_phase(),
                                         capture("after_write", udev=False)), optional=False)
        timeline.phase("scrub", scrub_both, optional=False)
        timeline.phase("bench", bench_phases, optional=False)
        victim = next(d for d in CONFIG["disks"] if d["pool"] == "tank" and d["role"] == "data")
        tank_status = run(["zpool", "status", "-P", "tank"]).stdout
        vdev = next(line.split()[0] for line in tank_status.splitlines()
                    if line.split() and line.split()[0].startswith(paths[victim["serial"]]))
        victim["vdev"] = vdev
        run(["zpool", "offline", "tank", vdev])
        (RESULTS / "offlined.json").write_text(json.dumps(victim))
        capture("degraded")
        # keep serving until the host's Prometheus has scraped the degraded pool (the harness
        # drops a file on the share when it has), at most linger_seconds (nominal)
        budget = Budget(float(CONFIG.get("linger_seconds", 60)))
        while not (SHARE / "host-saw-degraded").exists() and not budget.spent():
            time.sleep(1)
        timeline["host_saw_degraded"] = (SHARE / "host-saw-degraded").exists()
        if "smart" in RUN:
            timeline.phase("smart", smart_phase)
        # Late, so that on a slow host they can only cut themselves short, never the moments before.
        if "capture_roundtrip" in RUN:
            timeline.phase("capture_roundtrip", capture_roundtrip)
        if "failures" in RUN:
            timeline.phase("failures", failures_phase)
        if "predict" in RUN:
            with Paused(exporter):
                timeline.phase("predict", predict_phase)
        if "container" in RUN and (SHARE / "container" / "run.json").exists():   # the stack's exporter container
            timeline["exporter_stop"] = stop_exporter(exporter)
            exporter = None
            timeline.phase("container", container_phase)
    except Exception:
        log(traceback.format_exc())
        status = 1
    finally:
        timeline["scenario_seconds"] = time.time() - T0
        timeline["uptime_at_end"] = float(Path("/proc/uptime").read_text().split()[0])
        if exporter:
            stop_exporter(exporter)
    log(f"scenario done, status {status}")
    return status


def scrub_both() -> None:
    run(["zpool", "scrub", "tank"])
    run(["zpool", "scrub", "fast"])
    run(["zpool", "wait", "-t", "scrub", "tank"])
    run(["zpool", "wait", "-t", "scrub", "fast"])
    capture("scrubbed", udev=False)


def bench_phases() -> None:
    """zfsnas-bench on live ZFS, its configuration experiments where the first run worked, the
    client's copies (2.3); each failure logged (test_bench.py and test_client.py report it)."""
    try:
        bench_phase()
    except Exception:
        log(f"bench phase failed:\n{traceback.format_exc()}")
    try:
        if "bench_config" in RUN and (RESULTS / "bench" / "record.json").exists() and json.loads(
                (RESULTS / "bench" / "record.json").read_text()).get("run", {}).get("rc") == 0:
            bench_config_phase()
    except Exception:
        log(f"bench configuration phase failed:\n{traceback.format_exc()}")
    if CONFIG.get("client") and "client" in RUN:
        TIMELINE.phase("client", client_phase)
    capture("bench", udev=False)


if __name__ == "__main__":
    sys.exit(main())
