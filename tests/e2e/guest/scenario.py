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
go on. Standard library only: it runs on the guest's python3 before anything else is trusted.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

SHARE = Path(sys.argv[1] if len(sys.argv) > 1 else "/mnt/share")
RESULTS = SHARE / "results"
CONFIG = json.loads((SHARE / "config.json").read_text())
PORT = CONFIG["port"]
T0 = time.time()
MiB = 1 << 20
BENCH_DB = "/var/lib/zfsnas/bench.sqlite"
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


def run(argv: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    started = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    log(f"$ {' '.join(argv)} -> {proc.returncode} ({time.time() - started:.2f} s)")
    if check and proc.returncode:
        log(proc.stdout + proc.stderr)
        raise RuntimeError(f"command failed: {argv}: {proc.stderr.strip()}")
    return proc


def metrics() -> str:
    # generous: under TCG on a busy host a scrape during a heavy write has been seen to take > 60 s
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=300) as response:
        return response.read().decode()


def source_ages(text: str) -> dict[str, float]:
    ages = {}
    for line in text.splitlines():
        if line.startswith("zfs_exporter_source_age_seconds{"):
            labels, _, val = line.rpartition(" ")
            name = labels.split('source="', 1)[1].split('"', 1)[0]
            ages[name] = float(val)
    return ages


# Sources that did not refresh within a capture's wait: not waited for again. smartctl reads the
# disks every --smart.interval (10 minutes): smart_phase waits for an exporter of its own instead.
SLOW_SOURCES: set[str] = {"smartctl"}


def fresh_metrics(since: float, timeout: float = 20) -> tuple[str, float]:
    """A scrape in which every background source last refreshed after `since`."""
    deadline = time.time() + timeout
    while True:
        scraped = time.time()
        text = metrics()
        stale = {s: a for s, a in source_ages(text).items() if scraped - a < since and s not in SLOW_SOURCES}
        if not stale or time.time() > deadline:
            if stale:
                log(f"sources not refreshed within {timeout} s, not waited for again: {stale}")
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
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            metrics()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("exporter exited; see exporter.log")
            time.sleep(0.3)
    raise RuntimeError("exporter did not answer within 60 s")


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
    run(["udevadm", "settle", "--timeout=60"])
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
        proc = run(argv, check=False, env={**os.environ, "ZFSNAS_BENCH_DB": BENCH_DB}, timeout=900)
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
        proc = run(argv, check=False, timeout=600)
        ended = time.time()
        if name == "root":  # the one compared with the live exporter (others: with their own live render)
            after, _ = fresh_metrics(ended, timeout=30)
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


def smart_served(port: int, since: float, timeout: float = 60) -> str:
    """That exporter's /metrics once its smartctl source has read every disk after `since`."""
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
                text = response.read().decode()
            scraped = time.time()
            age = source_ages(text).get("smartctl")
            if age is not None and scraped - age > since and "zfs_disk_smart_state{" in text:
                return text
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError(f"no SMART read after {since:.0f} within {timeout:.0f} s")
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
        mark = time.time()
        (out / "metrics.txt").write_text(smart_served(port, mark))
        record["first_read_seconds"] = round(time.time() - mark, 2)
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
        exporter.terminate()
        exporter.wait(20)
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
        proc = run(["zfsnas-bench", *argv, "--db", BENCH_DB], check=False, env=env, timeout=900)
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
    deadline = time.time() + 120
    while DIRTY_PARAMETER.read_text().strip() != str(48 * MiB) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1)  # fio is writing now
    proc.kill()
    proc.wait()
    record["dirty_after_kill"] = DIRTY_PARAMETER.read_text().strip()
    # fio runs under the runner's watchdog (zfsnas.bench.fiowatch): it dies with the runner
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
    deadline = time.time() + seconds
    while True:
        alive = []
        for pid in os.listdir("/proc"):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if pid.isdigit() and cmdline and os.path.basename(cmdline[0].decode()) == "fio":
                alive.append(" ".join(c.decode() for c in cmdline if c))
        if not alive or time.time() >= deadline:
            return alive
        time.sleep(0.2)


# --- the stack's exporter container on live ZFS (host side: tests/e2e/container.py) --------------

CONTAINER_SOURCES = ("zpool_list", "zpool_status", "zfs_datasets", "zpool_iostat", "block_devices")  # block_devices: the serials


def container_metrics(timeout: float, want_success: bool) -> str:
    """The container exporter's /metrics once every source in CONTAINER_SOURCES has refreshed (and,
    with want_success, succeeded), or what it serves at the timeout."""
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:9923/metrics", timeout=10) as response:
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


def docker_debs(debs: Path) -> list[str]:
    """The .debs docker.io needs on this guest: its dependencies resolved against what is installed
    (names and what they provide), the first alternative otherwise; the host resolved them against
    an empty system, so most are here already. An installed package too old for a versioned
    dependency (the guest image was built before the host's apt lists moved on) is upgraded from
    the carried .debs, whose own dependencies are then resolved too."""
    installed: dict[str, str] = {}
    for line in run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${Provides}\n"]).stdout.splitlines():
        name, version, *provides = line.replace(",", " ").split()
        installed[name] = version
        for virtual in provides:
            installed.setdefault(virtual.split("(")[0], "")
    available = {deb.name.split("_")[0]: deb for deb in debs.glob("*.deb")}

    def satisfied(alternative: str, chosen: dict) -> bool:
        name, _, constraint = alternative.partition("(")
        name = name.split(":")[0].strip()
        if name in chosen:
            return True
        if name not in installed:
            return False
        if not constraint or not installed[name]:
            return True
        op, version = constraint.split(")")[0].split()
        key = (installed[name], op, version)
        if key not in compared:
            compared[key] = run(["dpkg", "--compare-versions", *key], check=False).returncode == 0
        return compared[key]

    compared: dict[tuple[str, str, str], bool] = {}

    chosen: dict[str, Path] = {}
    todo = ["docker.io"]
    while todo:
        name = todo.pop()
        if name in chosen:
            continue
        chosen[name] = available[name]
        fields = run(["dpkg-deb", "-f", str(available[name]), "Pre-Depends", "Depends"]).stdout
        for dep in " ".join(line.split(":", 1)[-1] for line in fields.splitlines()).split(","):
            alternatives = [alt.strip() for alt in dep.split("|") if alt.strip()]
            if alternatives and not any(satisfied(alt, chosen) for alt in alternatives):
                names = [alt.split("(")[0].split(":")[0].strip() for alt in alternatives]
                todo.append(next(n for n in names if n in available))
    return sorted(str(deb) for deb in chosen.values())


def record_error(out: Path, what: str) -> None:
    """Append what failed, its traceback and dockerd's last words to container/error.txt, which
    the host's test prints (the scenario log stays in the guest's results, out of CI's sight)."""
    dockerd = out / "dockerd.log"
    tail = dockerd.read_text(errors="replace").splitlines()[-15:] if dockerd.exists() else []
    with open(out / "error.txt", "a") as f:
        f.write(f"{what} failed at {time.time() - T0:.0f} s:\n{traceback.format_exc()}")
        f.write("dockerd.log, last lines:\n" + "\n".join(tail) + "\n\n")


def container_phase() -> dict:
    """Docker carried in through the share (debs and the saved exporter image), dockerd with its data
    on tmpfs and no networking of its own (the exporter uses the host's), then the exporter container
    run with docker-compose.yml's settings and with two privileges taken away in turn. Each run's
    /metrics goes to results/container/<variant>.txt."""
    src = SHARE / "container"
    out = RESULTS / "container"
    out.mkdir(exist_ok=True)
    spec = json.loads((src / "run.json").read_text())
    timings = {}
    mark = time.time()
    run(["dpkg", "-i", *docker_debs(src / "debs")], env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    timings["install_seconds"] = time.time() - mark
    mark = time.time()
    if not os.path.ismount("/sys/fs/cgroup"):
        run(["mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup"])
    run(["modprobe", "overlay"], check=False)
    dockerd_log = open(out / "dockerd.log", "wb")
    dockerd = subprocess.Popen(["dockerd", "--data-root=/tmp/docker", "--iptables=false", "--bridge=none"],
                               stdout=dockerd_log, stderr=dockerd_log)
    try:
        deadline = time.time() + 300   # seconds here; minutes have been seen under TCG on a busy host
        while run(["docker", "info"], check=False).returncode:
            if time.time() > deadline or dockerd.poll() is not None:
                raise RuntimeError("dockerd did not start; see container/dockerd.log")
            time.sleep(1)
        timings["dockerd_seconds"] = time.time() - mark
        mark = time.time()
        run(["docker", "load", "-i", str(src / "exporter.tar")])
        timings["load_seconds"] = time.time() - mark
        for variant, args in spec["variants"].items():
            mark = time.time()
            name = f"zfsnas-{variant.replace('_', '-')}"
            try:   # one variant failing must not cost the others their record
                run(["docker", "run", "-d", f"--name={name}", *args, spec["image"], *spec["command"]])
                text = container_metrics(180 if variant == "compose" else 90, want_success=variant == "compose")
                (out / f"{variant}.txt").write_text(text)
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
        terminate(dockerd, 30)
        dockerd_log.close()
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
    """SIGTERM, then SIGKILL after `seconds`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.time() + seconds
    while not path.exists() and time.time() < deadline:
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
        deadline = time.time() + 120
        while not port_open(445):
            if smbd.poll() is not None or time.time() > deadline:
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
            stdout, stderr = watch.communicate(timeout=700)
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


def stop_exporter(exporter: subprocess.Popen) -> float:
    """SIGTERM, as `docker stop` sends; the seconds until the exporter exited (killed after 20 s:
    the host's test then says so, and the container step still gets port 9923)."""
    mark = time.time()
    exporter.terminate()
    try:
        exporter.wait(20)
    except subprocess.TimeoutExpired:
        log("exporter still running 20 s after SIGTERM: killed")
        exporter.kill()
        exporter.wait()
    return time.time() - mark


def optional_phase(name: str, phase) -> float:
    """Run a late phase whose failure its own host test reports (the moments before it stay valid);
    returns its seconds."""
    mark = time.time()
    try:
        phase()
    except Exception:
        log(f"{name} failed:\n{traceback.format_exc()}")
    return time.time() - mark


def failures_phase() -> None:
    """Issue 28's failure states, in guest/failures.py (results/failures/; tests/e2e/test_failures.py)."""
    import failures

    failures.run_all(sys.modules[__name__])


def predict_phase() -> None:
    """Issue 40's space and racing figures, in guest/predict.py (results/predict/; tests/e2e/test_predict.py)."""
    import predict

    predict.run_all(sys.modules[__name__])


PHASES = {"client": client_phase, "bench": bench_phase, "capture": capture_roundtrip, "failures": failures_phase,
          "predict": predict_phase}


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    timeline = {"uptime_at_start": float(Path("/proc/uptime").read_text().split()[0])}
    status = 0
    exporter = None
    try:
        mark = time.time()
        exporter = start_exporter()
        timeline["exporter_start_seconds"] = time.time() - mark
        mark = time.time()
        paths = create_pools()
        (RESULTS / "disk_paths.json").write_text(json.dumps(paths, indent=1))
        expect = create_datasets()
        (RESULTS / "expect.json").write_text(json.dumps(expect, indent=1))
        timeline["pools_and_data_seconds"] = time.time() - mark
        if CONFIG.get("only"):   # a developer's shortcut (harness ZFSNAS_E2E_ONLY): these phases alone
            for name in CONFIG["only"]:
                timeline[f"{name}_seconds"] = optional_phase(f"{name} phase", PHASES[name])
            capture("bench", udev=False)
            return status
        capture("steady")
        mark = time.time()
        capture("before_write", udev=False)
        write_phase()
        capture("after_write", udev=False)
        timeline["write_seconds"] = time.time() - mark
        mark = time.time()
        run(["zpool", "scrub", "tank"])
        run(["zpool", "scrub", "fast"])
        run(["zpool", "wait", "-t", "scrub", "tank"])
        run(["zpool", "wait", "-t", "scrub", "fast"])
        capture("scrubbed", udev=False)
        timeline["scrub_seconds"] = time.time() - mark
        mark = time.time()
        try:
            bench_phase()
        except Exception:
            log(f"bench phase failed:\n{traceback.format_exc()}")
        try:
            if (RESULTS / "bench" / "record.json").exists() and json.loads(
                    (RESULTS / "bench" / "record.json").read_text()).get("run", {}).get("rc") == 0:
                bench_config_phase()
        except Exception:
            log(f"bench configuration phase failed:\n{traceback.format_exc()}")
        if CONFIG.get("client"):
            timeline["client_seconds"] = optional_phase("client phase", client_phase)
        capture("bench", udev=False)
        timeline["bench_seconds"] = time.time() - mark
        victim = next(d for d in CONFIG["disks"] if d["pool"] == "tank" and d["role"] == "data")
        tank_status = run(["zpool", "status", "-P", "tank"]).stdout
        vdev = next(line.split()[0] for line in tank_status.splitlines()
                    if line.split() and line.split()[0].startswith(paths[victim["serial"]]))
        victim["vdev"] = vdev
        run(["zpool", "offline", "tank", vdev])
        (RESULTS / "offlined.json").write_text(json.dumps(victim))
        capture("degraded")
        # keep serving until the host's Prometheus has scraped the degraded pool (the harness
        # drops a file on the share when it has), at most linger_seconds
        deadline = time.time() + float(CONFIG.get("linger_seconds", 60))
        while not (SHARE / "host-saw-degraded").exists() and time.time() < deadline:
            time.sleep(1)
        timeline["host_saw_degraded"] = (SHARE / "host-saw-degraded").exists()
        timeline["smart_seconds"] = optional_phase("smart", smart_phase)
        # Last, so that on a slow host it can only cut itself short, never the moments before it.
        timeline["capture_roundtrip_seconds"] = optional_phase("capture round trip", capture_roundtrip)
        timeline["failures_seconds"] = optional_phase("failures phase", failures_phase)
        timeline["predict_seconds"] = optional_phase("predict phase", predict_phase)
        if (SHARE / "container" / "run.json").exists():   # the stack's exporter container (port 9923 too)
            timeline["exporter_stop_seconds"] = stop_exporter(exporter)
            exporter = None
            timeline["container_seconds"] = optional_phase("container phase", container_phase)
    except Exception:
        log(traceback.format_exc())
        status = 1
    finally:
        timeline["scenario_seconds"] = time.time() - T0
        timeline["uptime_at_end"] = float(Path("/proc/uptime").read_text().split()[0])
        (RESULTS / "timeline.json").write_text(json.dumps(timeline, indent=1))
        if exporter:
            stop_exporter(exporter)
    log(f"scenario done, status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
