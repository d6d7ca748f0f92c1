"""The exporter's own process metrics (`process_*`, as prometheus_client and Go exporters name them).

Read from the real /proc/self (not --path.procfs); where that is missing (FreeBSD without
linprocfs) the CPU time and the file limit still come from the os and resource modules.
"""

from __future__ import annotations

import os
import resource

from .exposition import Families
from .sources.model import SourceError, read_bounded

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = resource.getpagesize()
_start_time: float | None = None   # process_start_time_seconds never changes: /proc/stat is read once


def process_families() -> Families:
    families = Families()
    times = os.times()
    families.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", {},
                     times.user + times.system)
    try:
        stat = read_bounded("/proc/self/stat", 4096, "ascii")
        fields = stat[stat.rindex(")") + 2:].split()
        families.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {}, int(fields[20]))
        families.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {}, int(fields[21]) * _PAGE)
        families.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", {},
                       _start_time if _start_time is not None else _read_start_time(fields))
        families.gauge("process_open_fds", "Number of open file descriptors.", {}, len(os.listdir("/proc/self/fd")))
    except (OSError, SourceError, ValueError, IndexError, StopIteration):
        pass
    families.gauge("process_max_fds", "Maximum number of open file descriptors.", {},
                   resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    return families


def _read_start_time(fields: list[str]) -> float:
    global _start_time
    with open("/proc/stat") as stat:
        boot = next(int(line.split()[1]) for line in stat if line.startswith("btime"))
    _start_time = boot + int(fields[19]) / _TICKS
    return _start_time
