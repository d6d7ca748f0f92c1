"""Parses `zpool iostat -HpPvw` (latency histograms) and `zpool iostat -HpPvq` (queue depths).

Owns the scripted output format of OpenZFS 2.x (checked against zpool_main.c of 2.1 and 2.3):
- `-w`: for every vdev an empty line, the vdev name on its own line, then one row per
  power-of-two bucket: the bucket's upper bound in ns (2^(j+1)-1), then tab-separated counts
  since pool import for total_wait read/write, disk_wait read/write, syncq_wait read/write,
  asyncq_wait read/write, scrub, trim and, from 2.2, rebuild.
- `-q`: one line per vdev: name, the six default columns (alloc, free, read/write ops and
  bytes), then pending and active I/Os for sync read/write, async read/write, scrub, trim and,
  from 2.2, rebuild. Log and cache sections are introduced by an empty line.
Both walk each pool from its root vdev (named like the pool) down, in `zpool status` order;
with `-P` leaves are full paths, interior vdevs `raidz2-0`, `mirror-1`. A name that is not a
path, a number (a missing device's guid) or a vdev type is a pool: pool names may not start
with a vdev type name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .model import Dropped, plain_count

LATENCY_HISTOGRAMS = ("zpool", "iostat", "-HpPvw")
QUEUE_DEPTHS = ("zpool", "iostat", "-HpPvq")

# (type, io) of each -w column, in print order; 2.1 stops after trim.
LATENCY_COLUMNS = (("total_wait", "read"), ("total_wait", "write"), ("disk_wait", "read"), ("disk_wait", "write"),
                   ("syncq_wait", "read"), ("syncq_wait", "write"), ("asyncq_wait", "read"),
                   ("asyncq_wait", "write"), ("scrub", ""), ("trim", ""), ("rebuild", ""))
QUEUE_CLASSES = ("sync_read", "sync_write", "async_read", "async_write", "scrub", "trim", "rebuild")
_DEFAULT_COLUMNS = 6
_VDEV_TYPE = re.compile(r"^(mirror|raidz|draid|spare|replacing|indirect)")


@dataclass
class VdevLatency:
    pool: str
    vdev: str
    # (type, io) -> [(upper bound in ns, count in that bucket)], in bucket order
    histograms: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)


@dataclass(frozen=True)
class VdevQueues:
    pool: str
    vdev: str
    pending: dict[str, int]
    active: dict[str, int]


def is_pool_name(name: str, known_pools: set[str] | None = None) -> bool:
    """Known pools (from zpool status) are pools; so is any name a vdev cannot have (a pool imported since)."""
    if known_pools and name in known_pools:
        return True
    return bool(name) and name[0].isalpha() and "/" not in name and not _VDEV_TYPE.match(name)


def parse_latency_histograms(text: str, known_pools: set[str] | None = None,
                             dropped: Dropped | None = None) -> list[VdevLatency]:
    """`zpool iostat -HpPvw`; a bucket row that is not all counts is left out and counted in `dropped`."""
    dropped = Dropped() if dropped is None else dropped
    out: list[VdevLatency] = []
    pool = ""
    current: VdevLatency | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            current = None
            continue
        fields = line.split("\t")
        if len(fields) == 1 or current is None:
            name = fields[0].strip()
            if is_pool_name(name, known_pools):
                pool = name
            current = VdevLatency(pool, name)
            out.append(current)
            continue
        counts = _counts(fields, dropped, f"zpool iostat -w line {number}")
        if counts is None:
            continue
        bound, counts = counts[0], counts[1:]
        for column, count in zip(LATENCY_COLUMNS, counts):
            current.histograms.setdefault(column, []).append((bound, count))
    return out


def parse_queue_depths(text: str, known_pools: set[str] | None = None,
                       dropped: Dropped | None = None) -> list[VdevQueues]:
    """`zpool iostat -HpPvq`; a line of another width or with a field that is not a count is left
    out and counted in `dropped`."""
    dropped = Dropped() if dropped is None else dropped
    out = []
    pool = ""
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("\t")
        if len(fields) < 2:
            continue
        name, values = fields[0], fields[1:]
        if len(values) - _DEFAULT_COLUMNS in (10, 12, 14):
            values = values[_DEFAULT_COLUMNS:]
        elif len(values) not in (10, 12, 14):
            dropped.add("malformed", f"zpool iostat -q line {number}: {len(values)} columns for {name[:60]!r}, "
                                     "expected 10, 12 or 14 queue columns")
            continue
        if is_pool_name(name, known_pools):
            pool = name
        numbers = _counts(values, dropped, f"zpool iostat -q line {number}")
        if numbers is None:
            continue
        classes = QUEUE_CLASSES[:len(numbers) // 2]
        out.append(VdevQueues(pool, name, dict(zip(classes, numbers[0::2])), dict(zip(classes, numbers[1::2]))))
    return out


def _counts(fields: list[str], dropped: Dropped, where: str) -> list[int] | None:
    """Every field as a count, or None (the line counted as dropped) when one is not."""
    if all(f.isdigit() and f.isascii() for f in fields):
        return [int(f) for f in fields]
    bad = Dropped()
    for text in fields:
        plain_count(text, bad, where)
    reason, example = next(iter(bad.examples.items())) if bad else ("not_a_number", f"{where}: an empty field")
    dropped.add(reason, example)
    return None
