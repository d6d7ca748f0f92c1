"""Collector `vdevlatency` (off by default): per-vdev latency histograms and queue depths.

Owns `zfs_vdev_latency_seconds{pool,vdev,type,io}` (a histogram; `type` total_wait, disk_wait,
syncq_wait, asyncq_wait with io read/write, and scrub, trim, rebuild with io ""), and
`zfs_vdev_queue_pending{pool,vdev,class}` / `zfs_vdev_queue_active{...}`. Values come from
`zpool iostat -HpPvw` and `-HpPvq`, which take the pool configuration lock, so they run in the
background every `--vdevlatency.refresh-interval` seconds (source `zpool_iostat`), never on the
scrape path; the refresh also renders the families' text (11 histograms of 38 buckets per vdev),
so a scrape only copies it. Histogram counts run since pool import: `rate()` of the buckets gives the heatmap.
There is no `_sum`: zpool reports only bucket counts. Vdev names are those of `zpool status -P`
(root vdev named like the pool, `raidz2-0`, full paths of leaves), as in the `pools` collector.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..exposition import Families, Family
from ..settings import Settings, interval
from ..sources.model import Dropped, SourceError
from .base import RefreshingCollector, Report

if TYPE_CHECKING:
    from ..sources.zpool_iostat import VdevLatency, VdevQueues

NS = 1e-9


class VdevLatencySettings(Settings):
    namespace = "vdevlatency"
    refresh_interval: float = interval("--vdevlatency.refresh-interval", 60.0, "runs of zpool iostat -w/-q")


class VdevLatencyCollector(RefreshingCollector[VdevLatencySettings]):
    name = "vdevlatency"
    description = "per-vdev latency histograms and queue depths from zpool iostat -w/-q"
    programs = ("zpool",)
    default_enabled = False

    def setup(self) -> None:
        self.refresher = self.add_refresher("zpool_iostat", self._fetch, self.settings.refresh_interval,
                                            wait_for_start=True)

    def _known_pools(self) -> set[str] | None:
        """The pools of the `pools` collector's last `zpool status`, None when it is not known."""
        return {v.pool for v in self.ctx.vdevs() if v.pool} or None

    def _read(self) -> tuple[list[VdevLatency], list[VdevQueues]]:
        from ..sources.zpool_iostat import (  # in the refresh thread, not at start-up
            LATENCY_HISTOGRAMS,
            QUEUE_DEPTHS,
            parse_latency_histograms,
            parse_queue_depths,
        )

        run = self.ctx.commands.run
        pools = self._known_pools()
        dropped = Dropped()
        try:
            latency = parse_latency_histograms(run(list(LATENCY_HISTOGRAMS)), pools, dropped)
        except SourceError as exc:
            if str(exc).endswith("no pools available"):  # zpool's exit status 1 with nothing imported
                return [], []
            raise
        queues = parse_queue_depths(run(list(QUEUE_DEPTHS)), pools, dropped)
        self.refresher.count_dropped(dropped)
        return latency, queues

    def _fetch(self) -> list[Family]:
        """Thousands of bucket samples that change once a refresh: built and rendered here, in the
        refresh thread, so a scrape only copies their text."""
        return self._families(*self._read()).frozen()

    def collect(self, report: Report) -> Iterable[Family]:
        families = self.current(self.refresher, report)  # never runs zpool on the scrape path once started
        return families or []

    @staticmethod
    def _families(latency: list[VdevLatency], queues: list[VdevQueues]) -> Families:
        families = Families()
        for vdev in latency:
            for (kind, io), buckets in vdev.histograms.items():
                cumulative, total = [], 0
                for bound_ns, count in buckets:
                    total += count
                    cumulative.append((bound_ns * NS, total))
                cumulative.append((math.inf, total))
                families.histogram("zfs_vdev_latency_seconds",
                                   "Latency of the vdev's I/Os since pool import, by queue stage (zpool iostat -w).",
                                   {"pool": vdev.pool, "vdev": vdev.vdev, "type": kind, "io": io}, cumulative, None)
        for queue in queues:
            for cls, value in queue.pending.items():
                families.gauge("zfs_vdev_queue_pending", "I/Os waiting in the vdev's queue, by class (zpool iostat -q).",
                               {"pool": queue.pool, "vdev": queue.vdev, "class": cls}, value)
            for cls, value in queue.active.items():
                families.gauge("zfs_vdev_queue_active", "I/Os issued to the vdev's disks, by class (zpool iostat -q).",
                               {"pool": queue.pool, "vdev": queue.vdev, "class": cls}, value)
        return families

