"""Collector `pools`: pool space and health, the vdev tree with its errors, scrubs and resilvers.

Owns `zfs_pool_{size,allocated,free}_bytes`, `zfs_pool_{fragmentation,capacity}_ratio` (0..1),
`zfs_pool_dedup_ratio` (multiplier), `zfs_pool_health{pool,state}` (one series per state, 1 on the
current one), `zfs_vdev_state{pool,vdev,vdev_guid,role,parent,state}` (1, one series per vdev),
`zfs_vdev_errors{pool,vdev,vdev_guid,role,type}` (gauges: `zpool clear` resets them),
`zfs_pool_scan_*{pool,function}` for the latest scrub/resilver and `zfs_pool_data_errors{pool}`.

Both commands run in the background (sources `zpool_list` and `zpool_status`, every
`--pools.refresh-interval` seconds), never on the scrape path; each refresh also builds and renders
its families (`refresh.frozen`), so a scrape copies their text. The `zpool_status` refresher is
set as `Context.zpool_status`; its value is a `sources.zpool.ZpoolStatus` (a `list[VdevStatus]`
with `.pools`), which `disks` and `vdevlatency` read through `Context.vdevs()`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..exposition import Families, Family, FrozenFamily
from ..refresh import BackgroundRefresher, RenderedOnce, frozen
from ..sources.model import Dropped
from .base import Context, RefreshingCollector, Report
from .datasets import compile_pattern, name_selected

if TYPE_CHECKING:
    from ..sources.zpool import Pool, PoolStatus, ZpoolStatus

SPACE = (
    ("size", "zfs_pool_size_bytes", "Total size of the pool (zpool list size)."),
    ("allocated", "zfs_pool_allocated_bytes", "Space allocated in the pool (zpool list alloc)."),
    ("free", "zfs_pool_free_bytes", "Free space in the pool (zpool list free)."),
    ("fragmentation", "zfs_pool_fragmentation_ratio", "Free-space fragmentation, 0..1 (zpool list frag)."),
    ("capacity", "zfs_pool_capacity_ratio", "Share of the pool allocated, 0..1 (zpool list cap)."),
    ("dedup", "zfs_pool_dedup_ratio", "Deduplication ratio as ZFS prints it (1.37 means 1.37x)."),
)
# (Scan attribute, metric, help); each served only when the scan line says it.
SCAN = (
    ("start", "zfs_pool_scan_start_timestamp_seconds", "When the latest scan (scrub or resilver) started, Unix time."),
    ("end", "zfs_pool_scan_end_timestamp_seconds", "When the latest scan finished or was canceled, Unix time."),
    ("examined", "zfs_pool_scan_examined_bytes", "Bytes the running scan has examined (scanned)."),
    ("issued", "zfs_pool_scan_issued_bytes", "Bytes the running scan has issued I/O for (progress = issued / total)."),
    ("total", "zfs_pool_scan_total_bytes", "Bytes the running scan has to examine."),
    ("processed", "zfs_pool_scan_repaired_bytes", "Bytes repaired by the scrub or resilvered by the resilver."),
    ("errors", "zfs_pool_scan_errors", "Errors the finished scan found."),
)
ERROR_TYPES = (("read", "read_errors"), ("write", "write_errors"), ("checksum", "checksum_errors"))


class PoolsCollector(RefreshingCollector):
    name = "pools"
    description = "pool space and health, vdev states and errors, scrub/resilver status (zpool, in the background)"
    programs = ("zpool",)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--pools.refresh-interval", dest="pools_refresh_interval", type=float, default=60.0,
                            help="seconds between `zpool list` / `zpool status` runs (default 60)")
        # `--pool.include` / `--pool.exclude` are the spellings of the first releases, kept as aliases.
        parser.add_argument("--pools.include", "--pool.include", dest="pools_include", default=None,
                            help="regular expression on the whole pool name: only these pools (pools and datasets)")
        parser.add_argument("--pools.exclude", "--pool.exclude", dest="pools_exclude", default=None,
                            help="regular expression on the whole pool name: leave these pools out (pools and datasets)")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        args = ctx.args
        self.include = compile_pattern(getattr(args, "pools_include", None), "--pools.include")
        self.exclude = compile_pattern(getattr(args, "pools_exclude", None), "--pools.exclude")
        interval = getattr(args, "pools_refresh_interval", 60.0)
        # zpool runs after the exporter's first answer (refresh.START): that answer comes sooner
        self.pool_list = BackgroundRefresher("zpool_list", self._read_list, interval, wait_for_start=True)
        self.status = BackgroundRefresher("zpool_status", self._read_status, interval, wait_for_start=True)
        self._rendered = RenderedOnce(4)  # the families of the last values of either source
        ctx.zpool_status = self.status

    def _read_list(self) -> list[Pool]:
        from ..sources.zpool import read_pools  # in the refresh thread, not at start-up

        dropped = Dropped()
        pools = read_pools(self.ctx.commands.run, dropped)
        self.pool_list.count_dropped(dropped)
        self._families_of(pools, self._list_families)
        return pools

    def _read_status(self) -> ZpoolStatus:
        from ..sources.zpool import read_status

        dropped = Dropped()
        status = read_status(self.ctx.commands.run, dropped)
        self.status.count_dropped(dropped)
        self._families_of(status, self._status_families)
        return status

    def _families_of(self, value: Any, build: Callable[[Any, Families], None]) -> list[FrozenFamily]:
        """The rendered families of one source's value: made by its refresh (before the value is
        published) or, for a value the scrape sees first, then; the last four values of either source
        are kept (for each, the published one and the one its refresh is about to publish)."""

        def render() -> list[FrozenFamily]:
            built = Families()
            build(value, built)
            return frozen(built)

        return self._rendered.get((value,), render)

    def _list_families(self, pools: list[Pool], families: Families) -> None:
        for pool in pools:
            if self._selected(pool.name):
                self._pool(families, pool)

    def _status_families(self, status: ZpoolStatus, families: Families) -> None:
        for pool_status in status.pools:
            if self._selected(pool_status.name):
                self._vdevs(families, pool_status)
                self._scans(families, pool_status)

    def sources(self) -> Sequence[BackgroundRefresher]:
        return (self.pool_list, self.status)

    def _selected(self, pool: str) -> bool:
        return name_selected(pool, self.include, self.exclude)

    def collect(self, report: Report) -> Iterable[Family]:
        out: list[Family] = []
        pools = self.current(self.pool_list, report)
        if pools is not None:
            out.extend(self._families_of(pools, self._list_families))
        status = self.current(self.status, report)
        if status is not None:
            out.extend(self._families_of(status, self._status_families))
        return out

    def _pool(self, families: Families, pool: Pool) -> None:
        from ..sources.zpool import HEALTH_STATES

        labels = {"pool": pool.name}
        for attr, name, documentation in SPACE:
            if (number := getattr(pool, attr)) is not None:
                families.gauge(name, documentation, labels, number)
        states = HEALTH_STATES if pool.health in HEALTH_STATES else (*HEALTH_STATES, pool.health)
        for state in states:
            families.gauge("zfs_pool_health", "Pool health from zpool list: 1 on the current state, 0 on the others.",
                           {"pool": pool.name, "state": state}, 1 if state == pool.health else 0)

    def _vdevs(self, families: Families, status: PoolStatus) -> None:
        for vdev in status.vdevs:
            families.gauge("zfs_vdev_state", "1 for every vdev, its state as zpool status prints it in `state`.",
                           {"pool": vdev.pool, "vdev": vdev.name, "vdev_guid": vdev.guid, "role": vdev.role,
                            "parent": vdev.parent, "state": vdev.state}, 1)
            for kind, attr in ERROR_TYPES:
                count = getattr(vdev, attr)
                if count >= 0:
                    families.gauge("zfs_vdev_errors", "I/O errors of the vdev since import or `zpool clear`.",
                                   {"pool": vdev.pool, "vdev": vdev.name, "vdev_guid": vdev.guid, "role": vdev.role,
                                    "type": kind}, count)
        if status.data_errors is not None:
            families.gauge("zfs_pool_data_errors", "Permanent data errors (zpool status: N data errors).",
                           {"pool": status.name}, status.data_errors)

    def _scans(self, families: Families, status: PoolStatus) -> None:
        seen = set()
        for scan in status.scans:
            if scan.function in seen:  # a sequential resilver of several vdevs: the first is shown
                continue
            seen.add(scan.function)
            families.gauge("zfs_pool_scan_info", "The latest scan of the pool: function (scrub, resilver, none) "
                           "and state (finished, canceled, scanning, paused, none).",
                           {"pool": status.name, "function": scan.function, "state": scan.state}, 1)
            labels = {"pool": status.name, "function": scan.function}
            for attr, name, documentation in SCAN:
                if (number := getattr(scan, attr)) is not None:
                    families.gauge(name, documentation, labels, number)
