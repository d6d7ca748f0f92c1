"""Collector `txg`: the write path. Txgs per pool, tx-assign latency, write-throttle counters.

Owns `zfs_pool_txg*`, `zfs_pool_tx_assign_seconds`, `zfs_dmu_tx_*_total`,
`zfs_dirty_data_max_bytes` and `zfs_dirty_data_delay_min_ratio`.
The txg history ring only holds the last `zfs_txg_history` txgs, so counters are accumulated
here from the txgs that synced since the previous scrape (`TxgAccumulator`): none is counted
twice, and txgs that fell out of the ring unseen are counted in `zfs_pool_txgs_missed_total`.
The ring the first scrape finds synced before the exporter started: it is the counters' zero, not
counted (counted, an exporter restart read as a burst of up to `zfs_txg_history` txgs and their
bytes, doubling the pools' write and txg rates for 5 minutes: issue 37). A pool imported later
starts a ring of its own, every txg of it new: that ring is counted.
"""

from __future__ import annotations

import bisect
import copy
import functools
import logging
import operator
from collections.abc import Iterable, Sequence

from ..exposition import Families, Family, FieldLayout
from ..sources.kstat import DMU_TX, DMU_TX_ASSIGN, Txg, histogram_buckets
from .base import Collector, Report

log = logging.getLogger("zfsnas")

SYNC_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DIRTY_RATIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# tx-assign buckets published: 2**10 ns (1 us) .. 2**36 ns (69 s); lower ones fold into the first.
TX_ASSIGN_POWERS = range(10, 37)
_TXG_NUMBER = operator.attrgetter("txg")


class Histogram:
    """A cumulative histogram with fixed upper bounds, fed one observation at a time."""

    def __init__(self, bounds: Sequence[float]):
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[float, int]]:
        running, out = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            out.append((bound, running))
        return out


def dirty_ratio_bounds(delay_min_dirty_percent: int | None) -> tuple[float, ...]:
    """The default buckets plus the point where ZFS starts delaying writes."""
    bounds = set(DIRTY_RATIO_BUCKETS)
    if delay_min_dirty_percent is not None and 0 < delay_min_dirty_percent <= 100:
        bounds.add(delay_min_dirty_percent / 100)
    return tuple(sorted(bounds))


class TxgAccumulator:
    """Counters of one pool's synced txgs, built across scrapes from the history ring."""

    def __init__(self, pool: str, ratio_bounds: Sequence[float], count_first_ring: bool = True):
        self.pool = pool
        self.count_first_ring = count_first_ring  # False: the first ring read is the zero, not counted
        self.last_txg: int | None = None
        self.synced = 0
        self.written_bytes = 0
        self.dirty_bytes = 0
        self.missed = 0
        self.last_dirty_bytes: int | None = None
        self.sync_seconds = Histogram(SYNC_BUCKETS)
        self.dirty_ratio = Histogram(ratio_bounds)

    def update(self, txgs: Iterable[Txg], dirty_data_max: int | None) -> None:
        ring = sorted(txgs, key=_TXG_NUMBER)
        if self.last_txg is not None and ring and ring[-1].txg < self.last_txg:
            log.info("pool %s: txg numbers went back from %d to %d (pool re-created); starting over",
                     self.pool, self.last_txg, ring[-1].txg)
            self.last_txg = None
        # Only the txgs after the last one counted are looked at: most of the ring was seen before.
        start = 0 if self.last_txg is None else bisect.bisect_right(ring, self.last_txg, key=_TXG_NUMBER)
        new = [t for t in ring[start:] if t.committed]
        if not new:
            return
        if self.last_txg is None and not self.count_first_ring:
            self.count_first_ring = True  # only this first ring: after a re-created pool's, count again
            self.last_txg, self.last_dirty_bytes = new[-1].txg, new[-1].ndirty
            return
        if self.last_txg is not None and new[0].txg > self.last_txg + 1:
            lost = new[0].txg - self.last_txg - 1
            self.missed += lost
            log.warning("pool %s: %d txg(s) fell out of the txg history between scrapes; "
                        "raise zfs_txg_history or scrape more often", self.pool, lost)
        for txg in new:
            self.synced += 1
            self.written_bytes += txg.nwritten
            self.dirty_bytes += txg.ndirty
            self.sync_seconds.observe(txg.stime / 1e9)
            if dirty_data_max:
                self.dirty_ratio.observe(txg.ndirty / dirty_data_max)
        self.last_txg = new[-1].txg
        self.last_dirty_bytes = new[-1].ndirty


# (bound in ns, the same in seconds) of each published tx-assign bucket
_TX_ASSIGN_BOUNDS = tuple((2 ** power, 2 ** power / 1e9) for power in TX_ASSIGN_POWERS)


def tx_assign_buckets(raw: list[tuple[int, int]]) -> list[tuple[float, int]]:
    """Cumulative (seconds, count) buckets at fixed bounds from the kstat's power-of-two rows."""
    out, running, index, size = [], 0, 0, len(raw)
    for bound, seconds in _TX_ASSIGN_BOUNDS:
        while index < size and raw[index][0] <= bound:
            running += raw[index][1]
            index += 1
        out.append((seconds, running))
    out.append((float("inf"), running + sum(count for _, count in raw[index:])))
    return out


@functools.lru_cache(maxsize=8)
def _dmu_tx_layout(fields: tuple[str, ...]) -> FieldLayout:
    """A counter per dmu_tx field (the same fields on every read), laid out once."""
    return FieldLayout(((f"zfs_{field}_total", f"Transaction assignment events (dmu_tx {field}).", "counter", ()), (), 1)
                       for field in fields)


class TxgCollector(Collector):
    name = "txg"
    description = "txgs, dirty data, tx-assign latency and write-throttle counters"

    def setup(self) -> None:
        self.accumulators: dict[str, TxgAccumulator] = {}
        self._history_off_logged: set[str] = set()
        self._collected = False  # after the first scrape a new pool's ring is all new: counted

    def continue_from(self, earlier: Collector) -> None:
        """The txgs counted so far carry over, so a replay's next snapshot counts only the txgs that
        synced since (each snapshot counting its whole ring would show the same count twice)."""
        if isinstance(earlier, TxgCollector):
            self.accumulators = copy.deepcopy(earlier.accumulators)
            self._collected = earlier._collected

    def collect(self, report: Report) -> Iterable[Family]:
        kstat = self.ctx.kstat
        families = Families()
        dirty_max = delay_percent = None
        with report.guard("dirty data tunables"):
            dirty_max = kstat.dirty_data_max()
            delay_percent = kstat.delay_min_dirty_percent()
        if dirty_max is not None:
            families.gauge("zfs_dirty_data_max_bytes", "Dirty data limit per pool (zfs_dirty_data_max).", {}, dirty_max)
        if delay_percent is not None:
            families.gauge("zfs_dirty_data_delay_min_ratio",
                           "Share of zfs_dirty_data_max at which ZFS starts delaying writes "
                           "(zfs_delay_min_dirty_percent / 100).", {}, delay_percent / 100)
        with report.guard("dmu_tx"):
            values = kstat.named(DMU_TX).values
            families.add_fields(_dmu_tx_layout(tuple(values)), list(values.values()))
        pools = self.list_pools(report)
        for pool in pools:
            with report.guard(f"pool {pool} txgs"):
                self._pool(pool, kstat.txgs(pool), dirty_max, delay_percent, families)
            with report.guard(f"pool {pool} dmu_tx_assign"):
                named = kstat.optional_named(DMU_TX_ASSIGN, pool)
                if named is not None:
                    buckets = tx_assign_buckets(histogram_buckets(named, f"{pool}/dmu_tx_assign"))
                    families.histogram("zfs_pool_tx_assign_seconds",
                                       "Time to assign a transaction to a txg, including throttle delays "
                                       "(no _sum: the kstat keeps only bucket counts).",
                                       {"pool": pool}, buckets, None)
        for gone in set(self.accumulators) - set(pools):
            del self.accumulators[gone]
        self._collected = True
        return families

    def _pool(self, pool: str, txgs: list[Txg], dirty_max: int | None, delay_percent: int | None,
              families: Families) -> None:
        acc = self.accumulators.get(pool)
        if acc is None:
            acc = self.accumulators[pool] = TxgAccumulator(pool, dirty_ratio_bounds(delay_percent),
                                                           count_first_ring=self._collected)
        if not txgs and pool not in self._history_off_logged:
            log.warning("pool %s: the txg history is empty (zfs_txg_history=0?); txg metrics stay at zero", pool)
            self._history_off_logged.add(pool)
        acc.update(txgs, dirty_max)
        labels = {"pool": pool}
        families.counter("zfs_pool_txgs_synced_total", "Txgs synced, counted from the txg history.", labels, acc.synced)
        families.counter("zfs_pool_txg_written_bytes_total", "Bytes written by synced txgs (txgs nwritten).",
                         labels, acc.written_bytes)
        families.counter("zfs_pool_txg_dirty_bytes_total", "Dirty bytes of synced txgs (txgs ndirty).",
                         labels, acc.dirty_bytes)
        families.counter("zfs_pool_txgs_missed_total",
                         "Txgs that left the txg history before a scrape saw them.", labels, acc.missed)
        families.gauge("zfs_pool_txg_history_length", "Txgs currently held in the txg history ring.", labels, len(txgs))
        if acc.last_dirty_bytes is not None:
            families.gauge("zfs_pool_txg_last_dirty_bytes", "Dirty bytes of the newest synced txg.",
                           labels, acc.last_dirty_bytes)
        families.histogram("zfs_pool_txg_sync_seconds", "Time each txg spent syncing (txgs stime).",
                           labels, acc.sync_seconds.cumulative(), acc.sync_seconds.total)
        if dirty_max:
            families.histogram("zfs_pool_txg_dirty_ratio",
                               "Each synced txg's dirty bytes over zfs_dirty_data_max; the delay point "
                               "(zfs_delay_min_dirty_percent) is a bucket bound.",
                               labels, acc.dirty_ratio.cumulative(), acc.dirty_ratio.total)
