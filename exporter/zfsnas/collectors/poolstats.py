"""Collector `poolstats`: pool state and I/O counters from the per-pool kstats.

Owns `zfs_pool_state{pool,state}` (from `<pool>/state`), the `<pool>/iostats` counters (trim since
2.0, ARC and direct I/O since 2.3) and, on OpenZFS before 2.1, the `<pool>/io` counters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ..exposition import Families, Family, FieldLayout
from ..sources.kstat import IOSTATS
from .base import Collector, Report

POOL_STATES = ("ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "REMOVED", "UNAVAIL", "SUSPENDED")

_IO = {
    "nread": ("counter", "zfs_pool_read_bytes_total", "Bytes read from the pool (io kstat, OpenZFS < 2.1).", 1),
    "nwritten": ("counter", "zfs_pool_written_bytes_total", "Bytes written to the pool (io kstat, OpenZFS < 2.1).", 1),
    "reads": ("counter", "zfs_pool_reads_total", "Read operations (io kstat, OpenZFS < 2.1).", 1),
    "writes": ("counter", "zfs_pool_writes_total", "Write operations (io kstat, OpenZFS < 2.1).", 1),
    "wtime": ("counter", "zfs_pool_wait_time_seconds_total", "Time with I/O waiting (io kstat).", 1e-9),
    "wlentime": ("counter", "zfs_pool_wait_length_time_seconds_total", "Wait queue length x time (io kstat).", 1e-9),
    "rtime": ("counter", "zfs_pool_run_time_seconds_total", "Time with I/O running (io kstat).", 1e-9),
    "rlentime": ("counter", "zfs_pool_run_length_time_seconds_total", "Run queue length x time (io kstat).", 1e-9),
    "wcnt": ("gauge", "zfs_pool_wait_queue_length", "I/Os waiting (io kstat).", 1),
    "rcnt": ("gauge", "zfs_pool_run_queue_length", "I/Os running (io kstat).", 1),
}

_BYTES_OF = re.compile(r"^(?P<what>.+)_bytes_(?P<how>[a-z]+)$")      # trim_bytes_written
_EXTENTS_OF = re.compile(r"^(?P<what>.+)_extents_(?P<how>[a-z]+)$")  # trim_extents_written


@functools.lru_cache(maxsize=512)
def iostats_metric(field: str) -> tuple[str, str]:
    if match := _BYTES_OF.match(field):
        return f"zfs_pool_{match['what']}_{match['how']}_bytes_total", f"Bytes (iostats {field})."
    if match := _EXTENTS_OF.match(field):
        return f"zfs_pool_{match['what']}_{match['how']}_extents_total", f"Extents (iostats {field})."
    if field.endswith("_bytes"):
        return f"zfs_pool_{field}_total", f"Bytes (iostats {field})."
    return f"zfs_pool_{field.removesuffix('_count')}_total", f"Operations (iostats {field})."


@functools.lru_cache(maxsize=64)
def _states(state: str) -> tuple[str, ...]:
    return tuple(sorted({*POOL_STATES, state}))


@functools.lru_cache(maxsize=8)
def _iostats_layout(fields_of: tuple[tuple[str, tuple[str, ...]], ...]) -> FieldLayout:
    """The iostats counters of every pool, (pool, its field names) in pool order, laid out once:
    the same pools have the same fields on every read."""
    return FieldLayout(((*iostats_metric(field), "counter", ("pool",)), (pool,), 1)
                  for pool, fields in fields_of for field in fields)


class PoolstatsCollector(Collector):
    name = "poolstats"
    description = "pool state and I/O counters from pool kstats"

    def collect(self, report: Report) -> Iterable[Family]:
        kstat, families, ios = self.ctx.kstat, Families(), Families()
        iostats: list[tuple[str, dict[str, int]]] = []
        pools = self.list_pools(report)
        for pool in pools:
            with report.guard(f"pool {pool} state"):
                state = self.ctx.pool_state(pool)
                samples = families.family("gauge", "zfs_pool_state",
                                          "1 for the pool's current state (from the state kstat), 0 for the others.",
                                          ("pool", "state")).samples
                samples.extend(("", (pool, known), 1 if known == state else 0) for known in _states(state))
            with report.guard(f"pool {pool} iostats"):
                named = kstat.optional_named(IOSTATS, pool)
                if named and named.values:
                    iostats.append((pool, named.values))
            with report.guard(f"pool {pool} io"):
                for field, value in (kstat.pool_io(pool) or {}).items():
                    if field in _IO:
                        kind, name, help_text, scale = _IO[field]
                        ios.add(kind, name, help_text, {"pool": pool}, value * scale)
        if iostats:  # after every pool's state, before the io counters
            layout = _iostats_layout(tuple((pool, tuple(values)) for pool, values in iostats))
            families.add_fields(layout, [value for _, values in iostats for value in values.values()])
        families.extend(ios)
        return families
