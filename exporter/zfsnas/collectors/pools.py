"""Collector `pools`: pool space and health, the vdev tree with its errors, scrubs and resilvers.

Owns `zfs_pool_{size,allocated,free}_bytes`, `zfs_pool_{fragmentation,capacity}_ratio` (0..1),
`zfs_pool_dedup_ratio` (multiplier), `zfs_pool_health{pool,state}` (one series per state, 1 on the
current one), `zfs_vdev_state{pool,vdev,vdev_guid,role,parent,state}` (1, one series per vdev),
`zfs_vdev_errors{pool,vdev,vdev_guid,role,type}` (gauges: `zpool clear` resets them),
`zfs_pool_scan_*{pool,function}` for the latest scrub/resilver (progress, issue rate, time
remaining), `zfs_pool_expansion_*{pool,vdev}` for a RAID-Z expansion, `zfs_pool_data_errors{pool}`,
`zfs_vdev_{size,allocated,free}_bytes` and `zfs_vdev_{fragmentation,capacity}_ratio{pool,vdev,role}`
(from `zpool list -v`), `zfs_pool_expected_imported{pool}` (`--pools.expected`) and
`zfs_pool_events_total{pool,class}` (`zpool events -f`).

The commands run in the background (sources `zpool_list` and `zpool_status`, every
`--pools.refresh-interval` seconds; `zpool_status` runs `zpool list -v` for the vdevs' space
after the two `zpool status`, and serves the tree without it if that one fails: a capture made
before it existed, say), never on the scrape path; each refresh also builds and
renders its families (`Families.frozen`), so a scrape copies their text. Health stays fresh: every
scrape reads each pool's `state` kstat (a small file), and when a state changed, or a pool came or
went, it asks both sources for a refresh at once and waits for it at most `FRESH_WAIT`
seconds (a hung `zpool` is then reported by its source, not waited for); the events follower
(source `zpool_events`, a long-lived `zpool events -fvH`) asks for one too when an event can change
a vdev's state or errors. The `zpool_status` refresher is set as `Context.zpool_status`; its value is
a `sources.zpool.ZpoolStatus` (a `list[VdevStatus]` with `.pools`), which `disks` and `vdevlatency`
read through `Context.vdevs()`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..exposition import Families, Family
from ..refresh import BackgroundRefresher, Follower, RenderedOnce
from ..settings import Settings, flag, interval
from ..sources.model import Dropped
from .base import RefreshingCollector, Report, log, one_line
from .filters import PoolFilter

if TYPE_CHECKING:
    import threading

    from ..refresh import Source
    from ..sources.zpool import Pool, PoolStatus, VdevSpace, ZpoolStatus
    from ..sources.zpool_events import EventCounts, EventReader
    from .base import Context

FRESH_WAIT = 2.0   # seconds a scrape that saw a pool's state change waits for the zpool sources to follow it
# Seconds at least between the starts of two refreshes a source does for events: a failing disk
# can report thousands of checksum or I/O errors a second, and the zpool commands share one turn
# with every other zfs/zpool command of the exporter. (A scrape's ask after a state change is urgent.)
EVENT_REFRESH_GAP = 5.0

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
    ("rate", "zfs_pool_scan_rate_bytes_per_second", "Issue rate of the running scan as zpool prints it (this pass)."),
    ("remaining", "zfs_pool_scan_remaining_seconds", "Seconds the running scan still needs at its rate, as zpool "
     "estimated it at the last refresh (none below 10 MB/s)."),
)
# (Expansion attribute, metric, help) of a RAID-Z expansion (zpool attach to a raidz vdev, OpenZFS 2.3+).
EXPANSION = (
    ("start", "zfs_pool_expansion_start_timestamp_seconds", "When the RAID-Z expansion started, Unix time."),
    ("end", "zfs_pool_expansion_end_timestamp_seconds", "When the RAID-Z expansion finished, Unix time."),
    ("copied", "zfs_pool_expansion_copied_bytes", "Bytes the RAID-Z expansion has reflowed (progress = copied / total)."),
    ("total", "zfs_pool_expansion_total_bytes", "Bytes the running RAID-Z expansion has to reflow."),
    ("rate", "zfs_pool_expansion_rate_bytes_per_second", "Reflow rate of the running RAID-Z expansion."),
    ("remaining", "zfs_pool_expansion_remaining_seconds", "Seconds the running RAID-Z expansion still needs at "
     "its rate, as zpool estimated it at the last refresh."),
)
# (VdevSpace attribute, metric, help) from `zpool list -v`; only where zpool prints a figure.
VDEV_SPACE = (
    ("size", "zfs_vdev_size_bytes", "Size of the vdev (zpool list -v size; for a disk its partition's size)."),
    ("allocated", "zfs_vdev_allocated_bytes", "Space allocated on a top-level vdev or cache device (zpool list -v alloc)."),
    ("free", "zfs_vdev_free_bytes", "Free space of a top-level vdev or cache device (zpool list -v free)."),
    ("fragmentation", "zfs_vdev_fragmentation_ratio", "Free-space fragmentation of a top-level vdev, 0..1."),
    ("capacity", "zfs_vdev_capacity_ratio", "Share of a top-level vdev or cache device allocated, 0..1."),
)
ERROR_TYPES = (("read", "read_errors"), ("write", "write_errors"), ("checksum", "checksum_errors"))
# Event classes served at 0 for every imported pool while events are followed: the ones alerts and
# dashboards take increase() of (errors, slow I/O). A counter born at its first count gives
# increase() nothing for that event (issue 37: ZfsPoolSlowIO missed the first burst of delays).
ZERO_EVENT_CLASSES = ("checksum", "io", "delay", "deadman")


class PoolsSettings(Settings):
    namespace = "pools"
    refresh_interval: float = interval("--pools.refresh-interval", 60.0, "`zpool list` / `zpool status` runs")
    # `--pool.expected` is the spelling issue 28 asked for: an alias.
    expected: list[str] | None = flag("--pools.expected", "--pool.expected", action="append",
                                      metavar="POOL[,POOL...]",
                                      help="pools that should be imported (repeatable, or comma-separated): "
                                           "zfs_pool_expected_imported{pool} is 0 while one is not (alert ZfsPoolMissing)")
    events: bool = flag("--pools.events", action=argparse.BooleanOptionalAction, default=True,
                        help="follow `zpool events -f`: zfs_pool_events_total{pool,class} and an early "
                             "refresh on a vdev's state change (default on)")


class PoolsCollector(RefreshingCollector[PoolsSettings]):
    name = "pools"
    description = "pool space and health, vdev states and errors, scrub/resilver status (zpool, in the background)"
    programs = ("zpool",)

    shared_settings = (PoolFilter,)

    def setup(self) -> None:
        self.expected = expected_pools(self.settings.expected)
        interval = self.settings.refresh_interval
        # zpool runs after the exporter's first answer (refresh.START): that answer comes sooner
        gap = min(EVENT_REFRESH_GAP, interval)
        self.pool_list = self.add_refresher("zpool_list", self._read_list, interval, wait_for_start=True, min_gap=gap)
        self.status = self.add_refresher("zpool_status", self._read_status, interval, wait_for_start=True, min_gap=gap)
        self._rendered = RenderedOnce(4)  # the families of the last values of either source
        self._space_said: str | None = None   # why the vdevs' space was last left out (said once)
        self._states: dict[str, str] | None = None  # each pool's state kstat at the last scrape
        self.events: Follower | None = None
        # made by the follower's thread when it first runs (its module is not imported at start)
        self.event_counts: EventCounts | None = None
        self._event_reader: EventReader | None = None
        if self.settings.events:
            self.events = Follower("zpool_events", self._follow_events, self._event_line, wait_for_start=True)

    def _read_list(self) -> list[Pool]:
        from ..sources.zpool import read_pools  # in the refresh thread, not at start-up

        dropped = Dropped()
        pools = read_pools(self.ctx.commands.run, dropped)
        self.pool_list.count_dropped(dropped)
        self._families_of(pools, self._list_families)
        return pools

    def _read_status(self) -> ZpoolStatus:
        from ..sources.model import Explained, SourceError
        from ..sources.zpool import read_status, read_vdev_space

        dropped = Dropped()
        status = read_status(self.ctx.commands.run, dropped)
        self.status.count_dropped(dropped)
        try:
            status.vdev_space = read_vdev_space(self.ctx.commands.run)
            self._space_said = None
        except SourceError as exc:   # the tree is served all the same; why not its space is said once
            reason = one_line(exc)
            if reason != self._space_said and not isinstance(exc, Explained) and not self.status.stopping:
                log.warning("pools: the vdevs' space is left out: %s", reason)
            self._space_said = reason
        self._families_of(status, self._status_families)
        return status

    def _follow_events(self, stop: threading.Event) -> Iterable[str]:
        from ..sources.zpool_events import FOLLOW_EVENTS, MAX_LINES_PER_SECOND, EventCounts, EventReader

        if self.events is not None:     # an event storm costs a bounded share of a core
            self.events.lines_per_second = MAX_LINES_PER_SECOND
        if self.event_counts is None:
            self.event_counts = EventCounts()
        self._event_reader = EventReader()  # a block cut short by the last run's end is forgotten
        self.event_counts.started()
        return self.ctx.commands.follow(FOLLOW_EVENTS, stop)

    def _event_line(self, line: str) -> None:
        from ..sources.model import Dropped
        from ..sources.zpool_events import changes_health

        assert self._event_reader is not None and self.event_counts is not None  # made by _follow_events
        event = self._event_reader.feed(line)
        if self._event_reader.left_out and self.events is not None:   # a line that did not read: counted, skipped
            self.events.count_dropped(self._event_reader.left_out)
            self._event_reader.left_out = Dropped()
        if event is not None and self.event_counts.add(event) and changes_health(event):
            for source in self._zpool_sources():
                source.request()

    def _families_of(self, value: Any, build: Callable[[Any, Families], None]) -> list[Family]:
        """The rendered families of one source's value: made by its refresh (before the value is
        published) or, for a value the scrape sees first, then; the last four values of either source
        are kept (for each, the published one and the one its refresh is about to publish)."""

        def render() -> list[Family]:
            built = Families()
            build(value, built)
            return built.frozen()

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
                self._expansion(families, pool_status)
        self._vdev_space(status.vdev_space or (), families)

    def _vdev_space(self, vdevs: Iterable[VdevSpace], families: Families) -> None:
        for vdev in vdevs:
            if self._selected(vdev.pool):
                labels = {"pool": vdev.pool, "vdev": vdev.name, "role": vdev.role}
                for attr, name, documentation in VDEV_SPACE:
                    if (number := getattr(vdev, attr)) is not None:
                        families.gauge(name, documentation, labels, number)

    def offer(self, ctx: Context) -> None:
        ctx.zpool_status = self.status  # pool membership for disks and smart, pool names for vdevlatency

    def start(self) -> None:
        if self.events is not None:   # not among the sources before the start (it runs only then)
            self.events.explained_while = self.status.explained_while
        super().start()

    def _zpool_sources(self) -> tuple[BackgroundRefresher, ...]:
        return (self.pool_list, self.status)

    def sources(self) -> Sequence[Source]:
        # the events follower runs only in a started exporter (not in a one-shot render: capture, tests)
        follower = (self.events,) if self.events is not None and self._started else ()
        return (*self._zpool_sources(), *follower)

    def _selected(self, pool: str) -> bool:
        return self.ctx.pool_filter.selected(pool)

    def collect(self, report: Report) -> Iterable[Family]:
        out: list[Family] = []
        imported = self._follow_states(report)
        pools = self.current(self.pool_list, report)
        if pools is not None:
            out.extend(self._families_of(pools, self._list_families))
        status = self.current(self.status, report)
        if status is not None:
            out.extend(self._families_of(status, self._status_families))
        families = Families()
        if imported is not None:
            for pool in self.expected:
                families.gauge("zfs_pool_expected_imported", "1 if the pool named in --pools.expected is imported "
                               "(it has kstats), 0 if not.", {"pool": pool}, 1 if pool in imported else 0)
        if self.event_counts is not None:
            counts = self.event_counts.counts.copy()
            for pool in imported or ():  # born at 0, so that increase() sees the first event of a class
                for event_class in ZERO_EVENT_CLASSES:
                    counts.setdefault((pool, event_class), 0)
            for (pool, event_class), count in sorted(counts.items()):
                if self._selected(pool) or not pool:
                    families.counter("zfs_pool_events_total", "ZFS events seen since the exporter started "
                                     "(zpool events), by pool and class without its *.fs.zfs. prefix.",
                                     {"pool": pool, "class": event_class}, count)
        return [*out, *families]

    def _follow_states(self, report: Report) -> set[str] | None:
        """Each pool's `state` kstat, read every scrape; when one changed or a pool came or went
        since the last scrape, the zpool sources refresh now and this scrape waits for them (at
        most FRESH_WAIT seconds). Returns the pools with kstats (None if they could not be read)."""
        pools = None
        with report.guard("listing pools"):
            pools = self.ctx.pools()
        if pools is None:
            return None
        states = {}
        for pool in pools:
            try:
                states[pool] = self.ctx.pool_state(pool)   # read once per scrape, poolstats serves the same
            except Exception:  # exported since it was listed: gone, as the next listing will say
                continue
        changed = self._states is not None and states != self._states
        self._states = states
        if changed and self._started:
            asks = [(source, source.request(urgent=True)) for source in self._zpool_sources()]
            deadline = time.monotonic() + FRESH_WAIT
            for source, ask in asks:
                source.wait_for(ask, max(0.0, deadline - time.monotonic()))
        return set(states)

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

    def _expansion(self, families: Families, status: PoolStatus) -> None:
        expansion = status.expansion
        if expansion is None:
            return
        families.gauge("zfs_pool_expansion_info", "The latest RAID-Z expansion of the pool: its vdev and state "
                       "(expanding, paused, finished).",
                       {"pool": status.name, "vdev": expansion.vdev,
                        "state": "paused" if expansion.paused else expansion.state}, 1)
        labels = {"pool": status.name, "vdev": expansion.vdev}
        for attr, name, documentation in EXPANSION:
            if (number := getattr(expansion, attr)) is not None:
                families.gauge(name, documentation, labels, number)

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


def expected_pools(values: list[str] | None) -> tuple[str, ...]:
    """`--pools.expected tank,backup --pools.expected usb`: the pool names, in order, once each."""
    names: dict[str, None] = {}
    for value in values or ():
        for name in value.split(","):
            if name.strip():
                names[name.strip()] = None
    return tuple(names)
