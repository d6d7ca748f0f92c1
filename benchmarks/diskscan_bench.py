#!/usr/bin/env python3
"""How long the exporter's first scan of 4,000 disks takes, alone and while being scraped back to back.

    .venv/bin/python benchmarks/diskscan_bench.py [--disks N] [--reps N] [--old]

Writes a synthetic block device tree in the formats of tests/fixtures/linux-disks (written by us,
generate_disk_fixtures.py has the layouts): per disk `sys/block/<disk>/{dev,queue/rotational,
device/{model,vpd_pg80,wwid}}`, one ZFS partition `<disk>1/{dev,partition}`, udev database entries
`b<major>:<minor>` for the disk and its partition, and a 20-field /proc/diskstats line for each.
Then starts the real exporter (default collectors, kstat fixture 2.3.2, `zfs`/`zpool` answered by
the test stand-in) on that tree and reads how long the first `block_devices` refresh took from its
debug log, in two modes, alternating, `--reps` times: idle (nobody scrapes), and scraped back to
back by one client. Prints the medians and busy / idle.
`--old` runs the exporter as it was before issue 17 (the scan in a thread of the exporter process,
the default 5 ms GIL switch interval) for the "before" figures.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KSTAT = ROOT / "tests/fixtures/linux-zfs-2.3.2"
COMMANDS = ROOT / "tests/fixtures/commands"
sys.path.insert(0, str(ROOT / "benchmarks"))
from refresh_bench import free_port, get, stop  # noqa: E402

REFRESHED = re.compile(r"source block_devices refreshed in ([0-9.]+)s")
# The exporter as it was: everything in threads of one process, at CPython's 5 ms switch interval.
OLD = ("import sys; from zfsnas import cli; from zfsnas.collectors import disks; cli.SWITCH_INTERVAL = 0.005; "
       "disks.DisksCollector.scan_in_child = False; sys.exit(cli.main())")


def disk_name(n: int) -> str:
    """sda .. sdz, sdaa .. sdzz, sdaaa ..., as the kernel names SCSI disks."""
    letters = ""
    n += 1
    while n:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return "sd" + letters


def udev_entry(props: dict[str, str], links: list[str], initialized: int) -> str:
    return "".join([*(f"S:{link}\n" for link in links), f"I:{initialized}\n", "L:0\n", "V:1\n",
                    *(f"E:{k}={v}\n" for k, v in props.items()), "G:systemd\n", "Q:systemd\n"])


def build_tree(out: Path, disks: int) -> None:
    """`out/{sys,udev/data,proc}`: `disks` ATA disks, each with one ZFS partition in pool tank."""
    shutil.copytree(KSTAT / "proc", out / "proc")
    block, udev = out / "sys" / "block", out / "udev" / "data"
    udev.mkdir(parents=True)
    stats = []
    for n in range(disks):
        name, major, minor = disk_name(n), 8 + n // 16, (n % 16) * 16
        serial = f"WD-WCC7K{n:07d}"
        base = block / name
        (base / "device").mkdir(parents=True)
        (base / "queue").mkdir()
        (base / f"{name}1").mkdir()
        (base / "dev").write_text(f"{major}:{minor}\n")
        (base / "queue" / "rotational").write_text("1\n")
        (base / "device" / "model").write_text("WDC WD40EFRX-68N\n")
        (base / "device" / "vpd_pg80").write_bytes(bytes([0, 0x80, 0, len(serial)]) + serial.encode())
        (base / "device" / "wwid").write_text(f"t10.ATA     WDC WD40EFRX-68N32N0                    {serial}\n")
        (base / f"{name}1" / "dev").write_text(f"{major}:{minor + 1}\n")
        (base / f"{name}1" / "partition").write_text("1\n")
        by_id = f"disk/by-id/ata-WDC_WD40EFRX-68N32N0_{serial}"
        (udev / f"b{major}:{minor}").write_text(udev_entry(
            {"ID_BUS": "ata", "ID_MODEL": "WDC_WD40EFRX-68N32N0", "ID_SERIAL": f"WDC_WD40EFRX-68N32N0_{serial}",
             "ID_SERIAL_SHORT": serial, "ID_WWN": f"0x50014ee2b{n:07x}", "ID_PART_TABLE_TYPE": "gpt"},
            [by_id, f"disk/by-id/wwn-0x50014ee2b{n:07x}"], 5_000_000 + n))
        (udev / f"b{major}:{minor + 1}").write_text(udev_entry(
            {"ID_FS_TYPE": "zfs_member", "ID_FS_LABEL": "tank", "ID_FS_UUID_SUB": str(10**18 + n)},
            [f"{by_id}-part1"], 5_000_000 + n))
        counters = " ".join(str(1000 * n + k) for k in range(17))
        stats += [f"{major:4d} {minor:7d} {name} {counters}", f"{major:4d} {minor + 1:7d} {name}1 {counters}"]
    (out / "proc" / "diskstats").write_text("\n".join(stats) + "\n")


def first_scan(tree: Path, scraped: bool, old: bool) -> tuple[float, int]:
    """Seconds the exporter's first block device scan took (from its log), and the scrapes served meanwhile."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    head = [sys.executable, "-c", OLD] if old else [str(Path(sys.executable).with_name("zfsnas-exporter"))]
    standin = shlex.join([sys.executable, str(COMMANDS / "standin.py"), str(COMMANDS / "zfs-2.3")])
    argv = [*head, f"--web.listen-address=127.0.0.1:{port}", "--path.procfs", str(tree / "proc"),
            "--path.sysfs", str(tree / "sys"), "--path.udev.data", str(tree / "udev" / "data"),
            "--zfs.command-prefix", standin, "--log.level", "debug"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: list[float] = []

    def watch_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if match := REFRESHED.search(line):
                found.append(float(match.group(1)))
                return

    watcher = threading.Thread(target=watch_log, daemon=True)
    watcher.start()
    scrapes = 0
    try:
        while not found:
            if scraped:
                try:
                    get(url)
                    scrapes += 1
                except OSError:
                    time.sleep(0.01)  # not listening yet
            else:
                watcher.join(0.1)
            if proc.poll() is not None:
                raise SystemExit(f"exporter exited: {argv}")
    finally:
        stop(proc)
    return found[0], scrapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disks", type=int, default=4000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--old", action="store_true", help="the exporter as it was before issue 17")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        started = time.perf_counter()
        build_tree(tree, args.disks)
        print(f"# {args.disks} disks written in {time.perf_counter() - started:.1f} s; "
              f"{'old' if args.old else 'current'} exporter; {args.reps} repetitions, alternating")
        idle, busy, scrapes = [], [], []
        for _ in range(args.reps):
            idle.append(first_scan(tree, False, args.old)[0])
            seconds, served = first_scan(tree, True, args.old)
            busy.append(seconds)
            scrapes.append(served)
        print(f"first scan idle:                  {statistics.median(idle):7.2f} s  [{min(idle):.2f}..{max(idle):.2f}]")
        print(f"first scan, scraped back to back: {statistics.median(busy):7.2f} s  [{min(busy):.2f}..{max(busy):.2f}]"
              f"  ({statistics.median(scrapes):.0f} scrapes served meanwhile)")
        print(f"busy / idle: {statistics.median(busy) / statistics.median(idle):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
