"""System probes around a job: CPU from /proc/stat, per-disk bytes from /proc/diskstats (whole
disks: the names under /sys/block, less loop/ram/zvol/dm devices), and the write-throttle
counters of the `dmu_tx` kstat, as deltas between two snapshots.

Owns reading and subtracting those files (under --path.procfs/--path.sysfs); it runs no command.
The diskstats line format is `sources.diskstats`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..sources.diskstats import SECTOR_BYTES, parse_diskstats as parse_diskstats_lines
from ..sources.kstat import parse_named_kstat

_VIRTUAL = ("loop", "ram", "zram", "zd", "dm-", "md", "sr", "nbd")


@dataclass(frozen=True)
class Snapshot:
    cpu: tuple[int, ...]                  # user nice system idle iowait irq softirq steal
    disks: dict[str, tuple[int, int]]     # name -> (bytes read, bytes written)
    dmu_tx: dict[str, int]


@dataclass(frozen=True)
class Deltas:
    cpu_busy_ratio: float
    cpu_iowait_ratio: float
    disks: dict[str, dict[str, int]]
    dmu_tx: dict[str, int]


def parse_cpu(text: str) -> tuple[int, ...]:
    for line in text.splitlines():
        if line.startswith("cpu "):
            return tuple(int(v) for v in line.split()[1:9])
    raise ValueError("/proc/stat has no cpu line")


def parse_diskstats(text: str, whole_disks: set[str] | None = None) -> dict[str, tuple[int, int]]:
    """name -> (bytes read, bytes written); `whole_disks` (from /sys/block) leaves partitions out."""
    return {d.device: (d.sectors_read * SECTOR_BYTES, d.sectors_written * SECTOR_BYTES)
            for d in parse_diskstats_lines(text)
            if not d.device.startswith(_VIRTUAL) and (whole_disks is None or d.device in whole_disks)}


def snapshot(procfs: str | Path = "/proc", sysfs: str | Path = "/sys") -> Snapshot:
    procfs = Path(procfs)
    cpu = parse_cpu((procfs / "stat").read_text())
    try:
        whole = {p.name for p in (Path(sysfs) / "block").iterdir()}
    except OSError:
        whole = None
    try:
        disks = parse_diskstats((procfs / "diskstats").read_text(), whole)
    except OSError:
        disks = {}
    try:
        dmu_tx = parse_named_kstat((procfs / "spl/kstat/zfs/dmu_tx").read_text(), "dmu_tx").values
    except (OSError, ValueError):
        dmu_tx = {}
    return Snapshot(cpu, disks, dmu_tx)


def deltas(before: Snapshot, after: Snapshot) -> Deltas:
    diff = [b - a for a, b in zip(before.cpu, after.cpu)]
    total = sum(diff) or 1
    idle, iowait = diff[3], diff[4]
    disks = {}
    for name, (read, written) in after.disks.items():
        r0, w0 = before.disks.get(name, (read, written))
        if read - r0 or written - w0:
            disks[name] = {"read_bytes": read - r0, "written_bytes": written - w0}
    throttle = {k: v - before.dmu_tx.get(k, 0) for k, v in after.dmu_tx.items() if v - before.dmu_tx.get(k, 0)}
    return Deltas((total - idle - iowait) / total, iowait / total, disks, throttle)
