"""Reads and parses Linux `/proc/diskstats` into one `DiskStats` per block device.

Owns the line format: 14 fields (kernel < 4.18), 18 (discard counters, 4.18+) or 20 (flush
counters, 5.5+). Sectors are always 512 bytes whatever the device's sector size; times are in
milliseconds. Counters the running kernel lacks are None, so collectors leave them out rather
than serve zeros. `read_diskstats` reads the file under a procfs root (bounded; None where there
is none); which devices to keep is the caller's choice (its `keep` filter), not this module's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from .model import SourceError, read_bounded

SECTOR_BYTES = 512


class DiskStats(NamedTuple):  # not a dataclass (nor pathlib below): each costs milliseconds of every start
    major: int
    minor: int
    device: str
    reads: int
    reads_merged: int
    sectors_read: int
    read_ms: int
    writes: int
    writes_merged: int
    sectors_written: int
    write_ms: int
    in_progress: int
    io_ms: int
    weighted_io_ms: int
    discards: int | None = None
    discards_merged: int | None = None
    sectors_discarded: int | None = None
    discard_ms: int | None = None
    flushes: int | None = None
    flush_ms: int | None = None


# DiskStats' fields after the device name, in the file's column order.
_COUNTERS = ("reads", "reads_merged", "sectors_read", "read_ms", "writes", "writes_merged", "sectors_written",
             "write_ms", "in_progress", "io_ms", "weighted_io_ms", "discards", "discards_merged",
             "sectors_discarded", "discard_ms", "flushes", "flush_ms")


def parse_diskstats(text: str, keep: Callable[[str], bool] | None = None) -> list[DiskStats]:
    """Every well-formed line (of the devices `keep` accepts: the others are not converted at all);
    a line of another length is skipped, not guessed at."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) not in (14, 18, 20) or (keep is not None and not keep(fields[2])):
            continue
        try:
            numbers = [int(f) for f in fields[3:]]
            major, minor = int(fields[0]), int(fields[1])
        except ValueError:
            continue
        out.append(DiskStats(major, minor, fields[2], *numbers))  # fields in _COUNTERS order
    return out


def read_diskstats(procfs: str | os.PathLike[str] = "/proc",
                   keep: Callable[[str], bool] | None = None) -> list[DiskStats] | None:
    """The parsed file (the devices `keep` accepts); None where there is none (FreeBSD, a procfs
    tree without disks)."""
    path = os.path.join(procfs, "diskstats")
    try:
        return parse_diskstats(read_bounded(path, encoding="ascii"), keep)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from None
