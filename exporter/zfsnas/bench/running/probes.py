"""System probes around a job: CPU from /proc/stat (FreeBSD: `sysctl kern.cp_time`), per-disk bytes from /proc/diskstats (whole
disks: the names under /sys/block, less loop/ram/zvol/dm devices), and the write-throttle
counters of the `dmu_tx` kstat, as deltas between two snapshots.

Owns reading and subtracting those files (under --path.procfs/--path.sysfs); on FreeBSD the caller
hands in a `sysctl` function, this module runs no command itself. CPU is kept as seconds of
user, system, iowait and idle time summed over all CPUs (the 8-disk study's finding is in the
user/system split), the busy ratio is derived from them.
The diskstats line format is `sources.diskstats`'s business.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...sources.diskstats import SECTOR_BYTES, parse_diskstats
from ...sources.kstat import parse_named_kstat

_VIRTUAL = ("loop", "ram", "zram", "zd", "dm-", "md", "sr", "nbd")


@dataclass(frozen=True)
class CpuTimes:
    """Seconds since boot summed over all CPUs. `other` is busy time that is neither user nor
    system (Linux: steal)."""

    user: float
    system: float
    iowait: float
    idle: float
    other: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    cpu: CpuTimes
    disks: dict[str, tuple[int, int]]     # name -> (bytes read, bytes written)
    dmu_tx: dict[str, int]


@dataclass(frozen=True)
class Deltas:
    cpu_user_seconds: float
    cpu_system_seconds: float
    cpu_iowait_seconds: float
    cpu_idle_seconds: float
    cpu_busy_ratio: float       # (all - idle - iowait) / all
    cpu_iowait_ratio: float
    disks: dict[str, dict[str, int]]
    dmu_tx: dict[str, int]

    def figures(self) -> dict:
        """The store's result fields of these deltas."""
        return {k: getattr(self, k) for k in ("cpu_user_seconds", "cpu_system_seconds", "cpu_iowait_seconds",
                                              "cpu_idle_seconds", "cpu_busy_ratio", "cpu_iowait_ratio",
                                              "disks", "dmu_tx")}


def parse_cpu(text: str, hz: int = 100) -> CpuTimes:
    """/proc/stat's `cpu` line (user nice system idle iowait irq softirq steal, in USER_HZ ticks)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            t = [int(v) for v in line.split()[1:9]] + [0] * 8
            user, nice, system, idle, iowait, irq, softirq, steal = t[:8]
            return CpuTimes((user + nice) / hz, (system + irq + softirq) / hz, iowait / hz, idle / hz, steal / hz)
    raise ValueError("/proc/stat has no cpu line")


def parse_cp_time(text: str, stathz: int) -> CpuTimes:
    """FreeBSD `sysctl -n kern.cp_time`: user nice sys intr idle, in stathz ticks (no iowait there)."""
    values = [int(v) for v in text.split()]
    if len(values) < 5:
        raise ValueError(f"kern.cp_time has {len(values)} fields, expected 5")
    user, nice, system, intr, idle = values[:5]
    return CpuTimes((user + nice) / stathz, (system + intr) / stathz, 0.0, idle / stathz)


def parse_stathz(text: str) -> int:
    """FreeBSD `sysctl -n kern.clockrate`: `{ hz = 1000, tick = 1000, profhz = 8128, stathz = 127 }`."""
    match = re.search(r"stathz\s*=\s*(\d+)", text)
    if not match:
        raise ValueError(f"kern.clockrate has no stathz: {text.strip()[:80]!r}")
    return int(match[1])


def disk_bytes(text: str, whole_disks: set[str] | None = None) -> dict[str, tuple[int, int]]:
    """name -> (bytes read, bytes written); `whole_disks` (from /sys/block) leaves partitions out."""
    return {d.device: (d.sectors_read * SECTOR_BYTES, d.sectors_written * SECTOR_BYTES)
            for d in parse_diskstats(text)
            if not d.device.startswith(_VIRTUAL) and (whole_disks is None or d.device in whole_disks)}


def snapshot(procfs: str | Path = "/proc", sysfs: str | Path = "/sys",
             sysctl: Callable[[str], str] | None = None) -> Snapshot:
    """`sysctl` (name -> `sysctl -n` output) is given on FreeBSD, where there is no /proc/stat."""
    procfs = Path(procfs)
    if sysctl is not None:
        cpu = parse_cp_time(sysctl("kern.cp_time"), parse_stathz(sysctl("kern.clockrate")))
    else:
        cpu = parse_cpu((procfs / "stat").read_text(), os.sysconf("SC_CLK_TCK"))
    try:
        whole = {p.name for p in (Path(sysfs) / "block").iterdir()}
    except OSError:
        whole = None
    try:
        disks = disk_bytes((procfs / "diskstats").read_text(), whole)
    except OSError:
        disks = {}
    try:
        dmu_tx = parse_named_kstat((procfs / "spl/kstat/zfs/dmu_tx").read_text(), "dmu_tx").values
    except (OSError, ValueError):
        dmu_tx = {}
    return Snapshot(cpu, disks, dmu_tx)


def deltas(before: Snapshot, after: Snapshot) -> Deltas:
    a, b = before.cpu, after.cpu
    user, system, iowait, idle, other = (b.user - a.user, b.system - a.system, b.iowait - a.iowait,
                                         b.idle - a.idle, b.other - a.other)
    total = (user + system + iowait + idle + other) or 1
    disks = {}
    for name, (read, written) in after.disks.items():
        r0, w0 = before.disks.get(name, (read, written))
        if read - r0 or written - w0:
            disks[name] = {"read_bytes": read - r0, "written_bytes": written - w0}
    throttle = {k: v - before.dmu_tx.get(k, 0) for k, v in after.dmu_tx.items() if v - before.dmu_tx.get(k, 0)}
    return Deltas(round(user, 2), round(system, 2), round(iowait, 2), round(idle, 2),
                  (total - idle - iowait) / total, iowait / total, disks, throttle)
