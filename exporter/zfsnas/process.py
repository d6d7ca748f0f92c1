"""The exporter's own process metrics (`process_*`, as prometheus_client and Go exporters name them).

Read from the real /proc/self (not --path.procfs); where that is missing (FreeBSD without
linprocfs) the CPU time and the file limit still come from the os and resource modules.
"""

from __future__ import annotations

import os
import resource

from .exposition import Families, FieldLayout
from .sources.model import SourceError, read_bounded

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = resource.getpagesize()
_start_time: float | None = None   # process_start_time_seconds never changes: /proc/stat is read once

# (name, help, kind) of each family, in page order; laid out once (FieldLayout): a scrape fills in
# six numbers instead of building and rendering six families
CPU = ("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter")
FROM_PROC = (("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge"),
             ("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge"),
             ("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge"),
             ("process_open_fds", "Number of open file descriptors.", "gauge"))
MAX_FDS = ("process_max_fds", "Maximum number of open file descriptors.", "gauge")
_LAYOUTS: dict[bool, FieldLayout] = {}


def _layout(with_proc: bool) -> FieldLayout:
    """The families' layout with or without what /proc/self gives (FreeBSD without linprocfs)."""
    layout = _LAYOUTS.get(with_proc)
    if layout is None:
        specs = (CPU, *(FROM_PROC if with_proc else ()), MAX_FDS)
        layout = _LAYOUTS[with_proc] = FieldLayout(((name, help_text, kind, ()), (), 1) for name, help_text, kind in specs)
    return layout


def process_families() -> Families:
    families = Families()
    times = os.times()
    numbers: list[float] = [times.user + times.system]
    try:
        stat = read_bounded("/proc/self/stat", 4096, "ascii")
        fields = stat[stat.rindex(")") + 2:].split()
        numbers += [int(fields[20]), int(fields[21]) * _PAGE,
                    _start_time if _start_time is not None else _read_start_time(fields), len(os.listdir("/proc/self/fd"))]
    except (OSError, SourceError, ValueError, IndexError, StopIteration):
        numbers = numbers[:1]
    numbers.append(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    families.add_fields(_layout(len(numbers) > 2), numbers)
    return families


def _read_start_time(fields: list[str]) -> float:
    global _start_time
    with open("/proc/stat") as stat:
        boot = next(int(line.split()[1]) for line in stat if line.startswith("btime"))
    _start_time = boot + int(fields[19]) / _TICKS
    return _start_time
