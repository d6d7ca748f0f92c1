"""One ordinary home NAS over one tier's horizon, composed from parts drawn from a seeded random
generator: where Prometheus runs (`stack` on the NAS, an `agent` sending to a central store with
its `nas` label, a `central` Prometheus scraping the NAS over the network), nightly power-offs at
any hour and of any length, reboots and exporter restarts (counters reset, the txg ring read
again, series born late), missed scrapes, relabels, pools (always imported, USB pools imported
weekly, pools re-created under the same name) with their scrub schedules (Debian's cron, TrueNAS's
task, pauses, resilvers), snapshot schedules from hourly to weekly, disks (HDD, SSD, NVMe; standby),
the ARC (busy days, idle nights, a cold cache after each boot), the host, benchmark runs. The state
is kept as timelines on the pools, disks and datasets; `emit` turns them into series at the end,
so that a fault (faults.py) can change any of them first.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from .model import DAY, DELAYS, HOUR, MINUTE, THRESHOLDS, Expect, Exporter, Life, Target
from .series import Intervals, Series, clip, counter, gauge, restrict, subtract, union

Steps = list[tuple[float, float | None]]   # (time, value) held until the next; None: absent
TIB = 2 ** 40
POOL_NAMES = ("tank", "data", "media", "backup", "fast", "vault", "photos", "archive", "scratch", "vm")
STATES = ("ONLINE", "DEGRADED", "FAULTED", "SUSPENDED")
COLLECTORS = ("arc", "txg", "poolstats", "pools", "datasets", "disks", "smart")
SOURCES = ("zpool_list", "zpool_status", "zfs_datasets", "zfs_snapshots", "smartctl")
SNAPSHOT_PERIODS = (HOUR, 4 * HOUR, DAY, DAY, 7 * DAY)
TXG_HISTORY = 100
BRIDGE = 10 * MINUTE   # the rules' last_over_time(...[10m]) over the exporter's gauges
# Series the exporter serves from a background source, by name prefix: after every start they are
# missing until that source's first refresh (zpool runs after the first scrape is answered, the
# snapshot listing and smartctl take longer). The kstat collectors answer at once.
SOURCES_OF = (("zfs_disk_smart", "smart"), ("zfs_dataset_newest_snapshot", "snapshots"), ("zfs_dataset_", "datasets"),
              ("zfs_bench_", "bench"), ("zfs_pool_size", "pools"), ("zfs_pool_allocated", "pools"),
              ("zfs_pool_free", "pools"), ("zfs_pool_scan", "pools"), ("zfs_pool_data_errors", "pools"),
              ("zfs_pool_events", "pools"), ("zfs_vdev_", "pools"))
REMOTE = ("agent", "central")
# Counters of whole events the alerts compare with 0 (a fraction would be float noise of ours)
WHOLE_COUNTS = {"zfs_pool_txgs_synced_total", "zfs_pool_txg_sync_seconds_bucket", "zfs_pool_events_total",
                "zfs_pool_txg_dirty_ratio_count"}


def at(steps: Steps, t: float) -> float | None:
    value = None
    for when, v in steps:
        if when <= t:
            value = v
    return value


def longest_gap(whens: list[float], gaps: list[float], t: float) -> float | None:
    """What dataset:zfs_dataset_snapshot_gap_seconds:max35d holds at `t`, of the gaps between
    snapshots seen at the sorted `whens`: the longest in the 35 days to `t` when they are two at
    least, else the one it last held (the last two), else nothing."""
    end, start = bisect.bisect_right(whens, t), bisect.bisect_right(whens, t - 35 * DAY)
    if end - start >= 2:
        return max(gaps[start:end])
    return max(gaps[end - 2:end]) if end >= 2 else None


def sampled(steps: Steps, times: list[float]) -> list[float | None]:
    """`at(steps, t)` for every t of the sorted `times`, in one sweep (an hourly timeline of 56 days
    read at each of its own steps is quadratic one by one)."""
    ordered = sorted(steps, key=lambda s: s[0])
    out: list[float | None] = []
    value, n = None, 0
    for t in times:
        while n < len(ordered) and ordered[n][0] <= t:
            value = ordered[n][1]
            n += 1
        out.append(value)
    return out


@dataclass
class Vdev:
    name: str
    guid: str
    role: str
    parent: str
    state: Steps
    errors: dict[str, Steps] = field(default_factory=dict)


@dataclass
class Disk:
    device: str
    serial: str
    media: str                       # hdd, ssd, nvme
    pool: str
    vdev_guid: str
    temperature: Steps
    limit: float | None = None       # the drive's own limit, where it reports one
    healthy: Steps = field(default_factory=list)
    pending: Steps = field(default_factory=list)
    reallocated: Steps = field(default_factory=list)
    critical_warning: Steps = field(default_factory=list)
    standby: Intervals = field(default_factory=list)
    busy: list[tuple[float, float]] = field(default_factory=list)   # (time, busy share) steps

    @property
    def protocol(self) -> str:
        return "NVMe" if self.media == "nvme" else "ATA"


@dataclass
class Scan:
    """What `zpool status` says of the pool's latest scan from time `t` on."""

    t: float
    function: str                    # scrub, resilver, none
    state: str                       # scanning, paused, finished, canceled, none
    start: float | None = None
    end: float | None = None
    errors: float = 0.0
    repaired: float = 0.0


@dataclass
class Pool:
    name: str
    size: float
    allocated: list[tuple[float, float, float]]   # (time, bytes, bytes per second) pieces
    imported: Intervals
    state: Steps
    scans: list[Scan]
    txg_rate: list[tuple[float, float]]
    write_rate: list[tuple[float, float]]
    history_length: Steps
    vdevs: list[Vdev]
    data_errors: Steps
    events: dict[str, list[tuple[float, float]]] = field(default_factory=dict)   # class -> rate steps
    slow_txgs: list[tuple[float, float]] = field(default_factory=list)           # >60 s txgs per second
    dirty: list[tuple[float, float]] = field(default_factory=list)   # dirty data of its txgs / dirty_data_max
    capability: float = 0.0             # bytes per second it writes when it sets the pace
    expected: bool = False              # named in --pools.expected
    born: float = 0.0                   # created (a re-created pool: again at this time)


@dataclass
class Dataset:
    pool: str
    name: str
    newest: Steps                        # newest snapshot creation time, as the exporter serves it
    used: Steps = field(default_factory=list)
    quota: float | None = None
    key_loaded: Steps = field(default_factory=list)


class Nas:
    def __init__(self, life: Life, rng: random.Random, exporter: Exporter):
        self.life, self.rng, self.exporter = life, rng, exporter
        self.H = float(life.horizon)
        self.tier = life.tier.name
        self.on: Intervals = [(0.0, self.H)]
        self.boots: list[float] = []              # power-on times after an off (kernel counters reset)
        self.exporter_starts: list[float] = []    # every exporter (re)start: its counters start again
        self.exporter_down: Intervals = []
        self.node_down: Intervals = []
        self.pools: list[Pool] = []
        self.disks: list[Disk] = []
        self.datasets: list[Dataset] = []
        self.collector_failing: dict[str, Intervals] = {}
        self.source_failing: dict[str, Intervals] = {}
        self.smart_unavailable: Intervals = []
        self.arc: dict[str, Steps | list] = {}
        self.host: dict[str, Steps] = {}
        self.relabel_at: float | None = None
        self.relabel_kind = ""
        self.bench: list[tuple[float, float]] = []   # (time, throughput) of each run
        self.remote_lag: Steps = [(0.0, 5.0)]
        self.has_node = True
        self.has_smart = life.tier.name != "weeks"
        self.has_arc = life.tier.name != "weeks"
        self.has_l2arc = False
        self.extra: list[tuple[str, Series]] = []

    # --- parts -------------------------------------------------------------------------------

    def part(self, text: str) -> None:
        self.life.parts.append(text)

    def slack(self) -> float:
        """What the scale adds to any delay: two evaluation steps and two samples (a `for` counts
        from the first evaluation that saw the condition), and a minute."""
        return 2 * self.life.tier.evaluation + 2 * self.life.interval + MINUTE

    def expect(self, alert: str, start: float, end: float | None = None, resolve: float = 0.0,
               must: bool = True, episodes: int = 1, delay: float | None = None) -> None:
        end = self.H if end is None else min(end, self.H)
        delay = DELAYS[alert] if delay is None else delay
        # + BRIDGE: a gauge that goes away (a vdev state, a pool) is read for 10 more minutes
        self.life.expects.append(Expect(alert, start, end, delay + self.slack(), resolve + BRIDGE + self.slack(),
                                        must, episodes))

    def calm(self, start: float, end: float) -> None:
        """No exporter restart from start to end: a fault of the exporter itself is its own story."""
        self.exporter_down = [(a, b) for a, b in self.exporter_down if b < start - 600 or a > end + 600]
        self.exporter_starts = [s for s in self.exporter_starts
                                if not (start - 600 <= s <= end + 600) or any(a == s for a, _ in self.on)]

    def compose(self) -> None:
        rng = self.rng
        self.has_node = rng.random() < 0.85
        self.power()
        self.pools_part()
        self.datasets_part()
        if self.has_smart:
            self.disks_part()
        if self.has_arc:
            self.arc_part()
        self.host_part()
        if self.tier == "days" and rng.random() < 0.3:
            self.bench_part()
        if self.tier != "minutes" and rng.random() < 0.25:
            self.relabel_part()

    def power(self) -> None:
        """Nightly power-offs at any hour and of any length, reboots, exporter restarts, missed scrapes."""
        rng, H = self.rng, self.H
        offs: Intervals = []
        if self.tier != "minutes" and rng.random() < 0.35:
            start_hour, length = rng.uniform(0, 24), rng.uniform(1, 14) * HOUR
            day = 0
            while day * DAY < H:
                begin = day * DAY + start_hour * HOUR
                if rng.random() < 0.9:  # some nights it stays on
                    offs.append((begin, begin + length))
                day += 1
            self.part(f"off nightly from {start_hour:.1f} h UTC for {length / HOUR:.1f} h")
            if self.life.topology in REMOTE:
                self.part("nightly_off_remote")
        if self.tier == "weeks" and rng.random() < 0.08:
            begin = rng.uniform(10 * DAY, H - 20 * DAY)
            length = rng.uniform(3, 12) * DAY
            offs.append((begin, begin + length))
            self.part(f"vacation: off from day {begin / DAY:.1f} for {length / DAY:.1f} days")
            self.part("vacation")
        reboots = rng.randint(0, 2) if self.tier != "minutes" else int(rng.random() < 0.2)
        for _ in range(reboots):
            begin = rng.uniform(0.1 * H, 0.9 * H)
            offs.append((begin, begin + rng.uniform(60, 600)))
        if reboots:
            self.part(f"{reboots} reboot(s)")
        self.on = subtract([(0.0, H)], union(clip(offs, 0, H)))
        self.boots = [a for a, _ in self.on if a > 0]
        self.exporter_starts = [a for a, _ in self.on]
        restarts = rng.randint(0, {"minutes": 2, "days": 4, "weeks": 6}[self.tier])
        for _ in range(restarts):
            t = rng.uniform(0.05 * H, 0.95 * H)
            if any(a < t < b - 120 for a, b in self.on):
                gap = rng.uniform(2, 45)
                self.exporter_down.append((t, t + gap))
                self.exporter_starts.append(t + gap)
        self.exporter_starts.sort()
        if restarts:
            self.part(f"{restarts} exporter restart(s)")

    def relabel_part(self) -> None:
        self.relabel_at = self.rng.uniform(0.2 * self.H, 0.6 * self.H)
        if self.life.topology == "agent" and self.rng.random() < 0.5:
            self.relabel_kind = "nas_added"
            self.part(f"the nas label added at day {self.relabel_at / DAY:.2f}")
        else:
            self.relabel_kind = "instance"
            self.part(f"instance relabelled at day {self.relabel_at / DAY:.2f}")

    def make_pool(self, name: str, imported: Intervals, fill: float, born: float = 0.0) -> Pool:
        rng = self.rng
        size = rng.choice((1, 2, 4, 8, 12, 16, 24)) * TIB
        used = size * fill
        room = max(0.0, THRESHOLDS["pool_capacity_warning"] - 0.03 - fill) * size   # stays under the warning
        growth = min(size * rng.uniform(0, 0.002) / DAY, room / (self.H - born + 1))   # a slow, steady fill
        disks = rng.choice((1, 2, 2, 3, 4))
        top = Vdev("mirror-0" if disks > 1 else f"{name}-d0", self.guid(), "data", name, [(born, "ONLINE")])
        vdevs = [top]
        if disks > 1:
            for d in range(disks):
                vdevs.append(Vdev(f"{name}-d{d}", self.guid(), "data", "mirror-0", [(born, "ONLINE")]))
        for vdev in vdevs:
            if vdev.parent != name or disks == 1:
                vdev.errors = {"read": [(born, 0.0)], "checksum": [(born, 0.0)]}
        # By the hour: idle (a txg every 5 s), light writes, or a copy the pool cannot keep up with
        # (its txgs carry dirty data past half the throttle point, at the pool's own pace +-15 %).
        capability = rng.uniform(1e8, 8e8)
        write, txgs, dirty = [], [], []
        for h in range(int((self.H - born) / HOUR) + 1):
            t, roll = born + h * HOUR, rng.random()
            if roll < 0.1:
                write.append((t, capability * rng.uniform(0.85, 1.1)))
                txgs.append((t, 0.5))
                dirty.append((t, rng.uniform(0.4, 0.9)))
            elif roll < 0.35:
                write.append((t, rng.uniform(1e5, 2e7)))
                txgs.append((t, 0.2))
                dirty.append((t, rng.uniform(0.01, 0.2)))
            else:
                write.append((t, 2e4))
                txgs.append((t, 0.2))
                dirty.append((t, 0.005))
        pool = Pool(name, size, [(born, used, growth)], imported, [(born, "ONLINE")],
                    [Scan(born, "none", "none")], txgs, write,
                    [(born, float(TXG_HISTORY))], vdevs, [(born, 0.0)], born=born)
        pool.events = {"delay": [(born, 0.0)], "deadman": [(born, 0.0)]}
        pool.dirty, pool.capability = dirty, capability
        return pool

    def guid(self) -> str:
        return str(self.rng.randrange(10 ** 17, 10 ** 19))

    def pools_part(self) -> None:
        rng = self.rng
        count = rng.choices((1, 2, 3, 4, 10), (45, 30, 15, 8, 2))[0]
        names = list(POOL_NAMES[:count])
        for name in names:
            pool = self.make_pool(name, [(0.0, self.H)], rng.uniform(0.05, 0.75))
            self.pools.append(pool)
            self.scrubs(pool)
        if self.tier == "weeks" and rng.random() < 0.3:
            self.usb_pool()
        if self.tier == "weeks" and rng.random() < 0.15:
            self.recreated_pool()
        if count > 4:
            self.part(f"{count} pools")

    def usb_pool(self, first_length: float | None = None, first: float | None = None) -> None:
        """A USB backup pool: a first run (the first full backup: hours, or days), then a few hours every week."""
        rng, H = self.rng, self.H
        runs: Intervals = []
        first = rng.uniform(0, 10 * DAY) if first is None else first
        first_length = rng.choice((3 * HOUR, 1 * DAY, 3 * DAY, 4.5 * DAY)) if first_length is None else first_length
        runs.append((first, first + first_length))
        weekday_offset = rng.uniform(0, 7 * DAY)
        week = math.ceil((first + first_length) / (7 * DAY))
        while week * 7 * DAY + weekday_offset < H:
            begin = week * 7 * DAY + weekday_offset
            if begin > first + first_length:
                # at least two of the scale's evaluations: at the weeks scale (every 2 h) a shorter run
                # can fall between them, unseen, and the pool looks away for two weeks (seed 37 L432)
                length = max(rng.uniform(1, 6) * HOUR, 2 * self.life.tier.evaluation)
                # plugged in for a run while the NAS is on for all of it: the week's slot, or the next
                # time it is on long enough (a run the schedule put across a nightly power-off went
                # unseen, and the pool looked away for weeks: seed 38 L574)
                begin = next((max(a + 10 * MINUTE, begin) for a, b in self.on
                              if b > begin + 10 * MINUTE and b - max(a + 10 * MINUTE, begin) >= length), H)
                if begin < H and begin > runs[-1][1]:   # a holiday moves several weeks' runs to one
                    runs.append((begin, begin + length))
            week += 1
        pool = self.make_pool("usb-backup", runs, rng.uniform(0.2, 0.7), born=first)
        # scrubbed during its first run and every fourth week, however short that week's run (a
        # fourth-week run of under 2 hours unscrubbed left 8 weeks between scrubs: overdue, truly)
        for n, (a, b) in enumerate(runs):
            if n % 4 == 0:
                end = a + min(b - a - 900, rng.uniform(1, 3) * HOUR)
                pool.scans += [Scan(a + 300, "scrub", "scanning", a + 300), Scan(end, "scrub", "finished", a + 300, end)]
        self.pools.append(pool)
        self.part(f"USB pool: first run {first_length / HOUR:.0f} h from day {first / DAY:.1f}, then weekly")

    def recreated_pool(self) -> None:
        """A pool destroyed and created again under the same name (a layout change)."""
        pool = self.pools[-1]
        t = self.rng.uniform(10 * DAY, 40 * DAY)
        gap = self.rng.uniform(10 * MINUTE, 2 * DAY)
        new = self.make_pool(pool.name, [(t + gap, self.H)], self.rng.uniform(0.05, 0.3), born=t + gap)
        pool.imported = [(0.0, t)]
        self.pools.append(new)
        self.scrubs(new, new_pool=True)
        self.part(f"pool {pool.name} re-created on day {t / DAY:.1f} after {gap / HOUR:.1f} h")

    def scrubs(self, pool: Pool, new_pool: bool = False) -> None:
        """Debian's cron (second Sunday of the month, 00:24), TrueNAS's task (a check every Sunday
        00:00, scrubbing when the last scrub ended 35 days ago) or a weekly scrub, kept from 70 days
        before the horizon (so that what zpool status shows at its start is what the schedule left);
        long scrubs paused in the daytime (`zpool scrub -p`) on some NAS; a resilver now and then,
        after which the scrub that fell due during it runs."""
        rng, H = self.rng, self.H
        schedule = rng.choice(("debian", "truenas", "truenas", "weekly"))
        hours = rng.uniform(2, 30) if rng.random() < 0.8 else rng.uniform(30, 70)
        paused = rng.random() < 0.25
        begin = pool.born if new_pool else -70 * DAY
        last_end = None if new_pool else begin - rng.uniform(0, 30) * DAY
        resilver = None
        if self.tier == "weeks" and rng.random() < 0.15:
            at_ = rng.uniform(0.2 * H, 0.8 * H)
            resilver = (at_, at_ + rng.uniform(1, 3) * DAY)
        scans: list[Scan] = [Scan(begin, "none", "none")] if new_pool else [
            Scan(begin, "scrub", "finished", last_end - hours * HOUR, last_end)]
        free = begin   # no scrub starts before the last scan ended
        day = math.floor(begin / DAY)
        while day * DAY < H:
            t, weekday = day * DAY, (day + 3) % 7   # day 0, 1 January 1970, was a Thursday
            start = None
            if weekday == 6:
                if schedule == "debian" and 8 <= day % 30.44 < 15:
                    start = t + 24 * MINUTE
                elif schedule == "truenas" and (last_end is None or t - last_end >= 35 * DAY):
                    start = t
                elif schedule == "weekly":
                    start = t + 2 * HOUR
            day += 1
            if start is None or start < max(free, pool.born + HOUR if new_pool else begin):
                continue
            if resilver is not None and resilver[0] < start + hours * HOUR:
                r0, r1 = resilver
                scans += [Scan(r0, "resilver", "scanning", r0), Scan(r1, "resilver", "finished", r0, r1)]
                self.part(f"{pool.name}: resilver on day {r0 / DAY:.1f} for {(r1 - r0) / DAY:.1f} days")
                start, resilver = max(start, r1 + HOUR), None
            end = self.run_scrub(scans, start, hours * HOUR, paused)
            free = last_end = end
        if resilver is not None and resilver[0] > free:
            r0, r1 = resilver
            scans += [Scan(r0, "resilver", "scanning", r0), Scan(r1, "resilver", "finished", r0, r1)]
        scans.sort(key=lambda scan: scan.t)
        before = [scan for scan in scans if scan.t <= pool.born]
        after = [scan for scan in scans if scan.t > pool.born]
        first = before[-1] if before else scans[0]
        pool.scans = [Scan(pool.born, first.function, first.state, first.start, first.end), *after]
        self.part(f"{pool.name}: scrubs {schedule}{' paused by day' if paused else ''}, {hours:.0f} h each")

    @staticmethod
    def run_scrub(scans: list[Scan], start: float, length: float, paused: bool) -> float:
        """A scrub from `start` taking `length` seconds of scanning, paused 08:00-23:00 if `paused`; its end."""
        t, left = start, length
        scans.append(Scan(t, "scrub", "scanning", start))
        while left > 0:
            hour = (t % DAY) / HOUR
            if paused and 8 <= hour < 23:
                resume = t - t % DAY + 23 * HOUR
                scans += [Scan(t, "scrub", "paused", start), Scan(resume, "scrub", "scanning", start)]
                t = resume
                continue
            night_end = t - t % DAY + (8 * HOUR if hour < 8 else DAY + 8 * HOUR)
            step = min(left, night_end - t) if paused else left
            t += step
            left -= step
        scans.append(Scan(t, "scrub", "finished", start, t))
        return t

    def datasets_part(self) -> None:
        rng, H = self.rng, self.H
        for pool in self.pools:
            if pool.name == "usb-backup" or rng.random() < 0.3:
                continue
            for n in range(rng.choice((1, 1, 2))):
                period = rng.choice(SNAPSHOT_PERIODS)
                self.datasets.append(Dataset(pool.name, f"{pool.name}/ds{n}", self.snapshot_times(period, 0.0, H),
                                             key_loaded=[(0.0, 1.0)] if rng.random() < 0.1 else []))
                self.part(f"{pool.name}/ds{n}: snapshots every {period / HOUR:g} h")

    def snapshot_times(self, period: float, start: float, end: float, catch_up: bool | None = None) -> Steps:
        """The newest snapshot's creation time as the exporter serves it: taken on the schedule while
        the NAS is on (a cron job; a systemd timer with Persistent= takes a missed one at boot),
        seen at the next snapshot listing (every 900 s)."""
        rng = self.rng
        catch_up = rng.random() < 0.5 if catch_up is None else catch_up
        phase = rng.uniform(0, min(period, DAY))
        taken = [-rng.uniform(0, period) - 1.0]
        t = math.floor(start / period) * period + phase
        while t < end:
            if t >= start:
                if self.is_on(t):
                    taken.append(t)
                elif catch_up:
                    boot = next((a for a, _ in self.on if a > t), None)
                    if boot is not None and boot < end and boot + 120 not in taken and boot + 120 > taken[-1]:
                        taken.append(boot + 120)
            t += period
        steps: Steps = [(start, taken[0])]
        for when in taken[1:]:
            steps.append((when + rng.uniform(0, 900), when))
        return sorted(steps, key=lambda s: s[0])

    def downs_told(self) -> None:
        """A NAS that a remote store watches is down while it is off, as far as that store can tell:
        every power-off the life has (its reboots, and those a kind adds) may be told (a nightly
        one, or a holiday, is off on purpose: SKIPS)."""
        if self.life.topology in REMOTE:
            for a, b in subtract([(0.0, self.H)], self.on):
                for alert in ("ZfsHostDown", "ZfsExporterDown", "ZfsExporterAbsent"):
                    self.expect(alert, a, b, must=False)

    def snapshots_told(self) -> None:
        """Where ZfsDatasetSnapshotsStopped may fire on a schedule that the life's own power-offs
        made irregular (a daily cron slot that falls while the NAS is off most nights): once the
        newest snapshot is older than the rule allows (snapshot_gap_factor times the longest gap
        between snapshots seen in 35 days, for a dataset with two such gaps, remembered after; never
        under snapshot_max_age_days), snapshots have stopped as far as the schedule shows, which is
        true until the next one is seen. Followed hour by hour, as the rule learns it."""
        max_age, factor = THRESHOLDS["snapshot_max_age_days"] * DAY, THRESHOLDS["snapshot_gap_factor"]
        for dataset in self.datasets:
            if any(v is not None and v > t + HOUR for t, v in dataset.newest):
                continue   # a snapshot dated ahead hides the others: its own kind says what is told
            seen: list[tuple[float, float]] = []    # (served, created) of each new snapshot
            for t, created in sorted(dataset.newest):
                if created is not None and (not seen or created > seen[-1][1]):
                    seen.append((t, created))
            whens = [t for t, _ in seen[1:]]
            gaps = [created - before for (_, created), (_, before) in zip(seen[1:], seen)]
            for n, (_served, created) in enumerate(seen):
                until = seen[n + 1][0] if n + 1 < len(seen) else self.H
                t = created + max_age   # never before snapshot_max_age_days
                while t < until:
                    most = longest_gap(whens, gaps, t)
                    if most is not None and t - created > max(max_age, factor * most):
                        self.expect("ZfsDatasetSnapshotsStopped", t, until, must=False)
                        break
                    t += HOUR

    def is_on(self, t: float) -> bool:
        return any(a <= t < b for a, b in self.on)

    def disks_part(self) -> None:
        rng = self.rng
        n = 0
        for pool in self.pools:
            if pool.name == "usb-backup":
                continue
            leaves = [v for v in pool.vdevs if v.errors]
            media = rng.choices(("hdd", "ssd", "nvme"), (6, 2, 2))[0]
            for vdev in leaves:
                if len(self.disks) >= 8:
                    break
                base = {"hdd": rng.uniform(28, 44), "ssd": rng.uniform(28, 50), "nvme": rng.uniform(35, 60)}[media]
                limit = None
                if media == "nvme" and rng.random() < 0.6:
                    limit = float(rng.choice((70, 75, 80, 82, 84, 85)))
                    if rng.random() < 0.3 and limit >= 80:  # runs warm, well within its own limit
                        base = rng.uniform(71, limit - 5)
                        self.part(f"NVMe at {base:.0f} °C within its limit {limit:.0f} °C")
                elif media == "hdd" and rng.random() < 0.3:
                    limit = float(rng.choice((55, 60, 65)))
                device = f"nvme{n}n1" if media == "nvme" else f"sd{chr(97 + n)}"
                disk = Disk(device, f"SN{self.life.index:05d}{n:02d}", media, pool.name, vdev.guid,
                            self.daily_temperature(base), limit, [(0.0, 1.0)],
                            [(0.0, float(rng.choice((0, 0, 0, 8))))], [(0.0, float(rng.choice((0, 0, 0, 24))))],
                            [(0.0, 0.0)] if media == "nvme" else [])
                disk.busy = [(0.0, rng.uniform(0.01, 0.3))]
                if media == "hdd" and rng.random() < 0.3:
                    disk.standby = self.nightly(rng.uniform(0, 24), rng.uniform(2, 8) * HOUR)
                self.disks.append(disk)
                n += 1

    def daily_temperature(self, base: float) -> Steps:
        """Warmer by day, a little: hourly steps of whole degrees."""
        rng = self.rng
        return [(h * HOUR, float(round(base + 2 * math.sin(2 * math.pi * h / 24) + rng.uniform(-0.5, 0.5))))
                for h in range(int(self.H / HOUR) + 1)]

    def nightly(self, start_hour: float, length: float) -> Intervals:
        return clip([(d * DAY + start_hour * HOUR, d * DAY + start_hour * HOUR + length)
                     for d in range(int(self.H / DAY) + 1)], 0, self.H)

    def arc_part(self) -> None:
        """Reads per second by the hour (busy evenings, idle nights) and the hit ratio; after every
        boot the cache is cold: the ratio climbs back over an hour or two of heavy reads."""
        rng = self.rng
        size = rng.choice((4, 8, 16, 32, 64)) * 2 ** 30
        reads: list[tuple[float, float]] = []
        ratio: list[tuple[float, float]] = []
        base_ratio = rng.uniform(0.85, 0.99)
        for h in range(int(self.H / HOUR) + 1):
            hour = h % 24
            busy = rng.uniform(100, 3000) if 17 <= hour < 23 else rng.uniform(0, 80)
            reads.append((h * HOUR, busy))
            ratio.append((h * HOUR, min(0.999, base_ratio + rng.uniform(-0.03, 0.01))))
        warm_ups = [(boot, rng.uniform(0.5, 2.5) * HOUR) for boot in [0.0, *self.boots]]
        inside = union((boot, boot + length) for boot, length in warm_ups)
        reads = [(t, v) for t, v in reads if not any(a <= t <= b for a, b in inside)]
        ratio = [(t, v) for t, v in ratio if not any(a <= t <= b for a, b in inside)]
        for boot, length in warm_ups:
            for k in range(6):
                t = boot + k * length / 6
                reads.append((t, rng.uniform(300, 2000)))
                ratio.append((t, 0.15 + (base_ratio - 0.15) * k / 6))
            reads.append((boot + length, rng.uniform(0, 80)))
            ratio.append((boot + length, base_ratio))
        reads.sort()
        ratio.sort()
        self.arc = {"reads": reads, "ratio": ratio, "size": [(0.0, float(size))], "target": [(0.0, float(size))],
                    "min": [(0.0, float(size // 8))], "no_grow": [(0.0, 0.0)], "available": [(0.0, 2.0 * 2 ** 30)],
                    "memory_throttle": [(0.0, 0.0)], "delay": [(0.0, 0.0)], "over_max": [(0.0, 0.0)],
                    "l2arc_header": [(0.0, float(size) * 0.01)]}
        self.has_l2arc = rng.random() < 0.2
        self.part("cold ARC at start and after each boot, warm in " + ", ".join(f"{w / HOUR:.1f} h" for _, w in warm_ups[:3]))

    def host_part(self) -> None:
        rng = self.rng
        self.host = {"avail": [(0.0, rng.uniform(0.3, 0.8))], "offset": [(0.0, rng.uniform(-0.002, 0.002))],
                     "sync": [(0.0, 1.0)], "maxerror": [(0.0, 0.1)], "fd": [(0.0, rng.uniform(0.01, 0.2))]}

    def bench_part(self) -> None:
        rng = self.rng
        median = rng.uniform(1e8, 1e9)
        t = rng.uniform(0, 6 * HOUR)
        while t < self.H:
            if self.is_on(t):
                self.bench.append((t, median * rng.uniform(0.95, 1.05)))
            t += rng.choice((12, 24)) * HOUR
        self.part(f"{len(self.bench)} benchmark runs")

    # --- series ------------------------------------------------------------------------------

    def targets(self) -> None:
        life, H = self.life, self.H
        ident = life.id
        if life.topology == "agent":
            before = {"nas": ident, "instance": "nas"}
        else:
            before = {"instance": f"{ident}-nas"}
        epochs = [(0.0, H, before)]
        if self.relabel_at is not None:
            if self.relabel_kind == "nas_added":
                before = {"instance": f"{ident}-nas"}
                after = {"nas": ident, "instance": f"{ident}-nas"}
            elif life.topology == "agent":
                after = {"nas": ident, "instance": "attic"}
            else:
                after = {"instance": f"{ident}-attic"}
            epochs = [(0.0, self.relabel_at, before), (self.relabel_at, H, after)]
        scraped = [(0.0, H)] if life.topology == "central" else list(self.on)
        exporter_answered = subtract(list(self.on), union(self.exporter_down))
        jobs = {"zfsnas": Target("zfsnas", epochs, scraped, exporter_answered)}
        if self.has_node:
            jobs["node"] = Target("node", epochs, scraped, subtract(list(self.on), union(self.node_down)))
        if life.topology == "agent":
            jobs["prometheus"] = Target("prometheus", epochs, list(self.on), list(self.on))
        # scrapes that failed (a timeout): up 0 and stale markers for one grid point. Two of them
        # within two evaluation steps of the scale would read as one outage between them to its
        # evaluator (the days', every 15 minutes: `up == 0` for 5m fired on two failures 16 minutes
        # apart), where Prometheus, every 15 s, sees two single failures: kept further apart.
        per_day = {"minutes": 4, "days": 4, "weeks": 0}[self.tier]
        apart = 2 * life.tier.evaluation
        for job in jobs.values():
            count = self.rng.randint(0, int(per_day * H / DAY))
            for _ in range(count):
                t = self.rng.uniform(0, H)
                k = round(t / life.interval)
                if (any(a + 600 < t < b - 600 for a, b in job.answered)
                        and all(abs(k - m) * life.interval > apart for m in job.missed)):
                    job.missed.add(k)
        life.targets = jobs
        if life.topology == "stack":  # its Prometheus is off with the NAS: nothing is judged then, nor just after
            life.quiet = union((a, b + 15 * MINUTE) for a, b in subtract([(0.0, H)], self.on))

    def warm_ups(self) -> dict[str, Intervals]:
        """After each exporter start, how long each background source serves nothing."""
        interval, rng = self.life.interval, self.rng
        out: dict[str, Intervals] = {}
        for start in self.exporter_starts:
            first = math.ceil(start / interval) * interval   # the first scrape after the start
            for source, extra in (("pools", 1.0), ("bench", 1.0), ("datasets", rng.uniform(2, 60)),
                                  ("snapshots", rng.uniform(5, 300)), ("smart", rng.uniform(10, 90))):
                out.setdefault(source, []).append((start, first + extra))
        return {source: union(spans) for source, spans in out.items()}

    def emit(self) -> None:
        self.targets()
        self.downs_told()
        self.snapshots_told()
        z = self.life.series
        H = self.H
        warm = self.warm_ups()
        self.life.warming = union(span for spans in warm.values() for span in spans)

        def add(name: str, labels: dict[str, str], series: Series | None = None, job: str = "zfsnas") -> Series:
            made = series or Series(name, labels)
            source = next((src for prefix, src in SOURCES_OF if name.startswith(prefix)), None)
            if source and job == "zfsnas":
                made = keep(made, subtract([(0.0, H)], warm.get(source, [])))
            made.name, made.labels = name, labels
            made.integer = name in WHOLE_COUNTS
            z.append((job, made))
            return made

        success = {c: [(0.0, 1.0)] for c in COLLECTORS}
        for name, spans in self.collector_failing.items():
            success[name] = steps_of(spans, 0.0, 1.0)
        if self.smart_unavailable and self.exporter.smart_unavailable_visible:
            success["smart"] = steps_of(self.smart_unavailable, 0.0, 1.0)
        if not self.has_smart:
            del success["smart"], success["disks"]
        if not self.has_arc:
            del success["arc"]
        for collector, steps in success.items():
            add("zfs_exporter_collector_success", {"collector": collector}, gauge("", {}, steps, H))
        for source in SOURCES:
            if source == "smartctl" and not self.has_smart:
                continue
            failing = self.source_failing.get(source, [])
            add("zfs_exporter_source_success", {"source": source}, gauge("", {}, steps_of(failing, 0.0, 1.0), H))
            add("zfs_exporter_source_age_seconds", {"source": source}, source_age(failing, H,
                                                                                  {"zfs_snapshots": 450}.get(source, 30)))
        if self.smart_unavailable and self.exporter.smart_unavailable_visible:
            series = Series("", {})
            for a, b in self.smart_unavailable:
                series.add(a, b, 1.0)
            add("zfs_disk_smart_unavailable", {"reason": "permission_denied"}, series)
        add("zfs_module_parameter", {"name": "zfs_txg_history"}, gauge("", {}, [(0.0, float(TXG_HISTORY))], H))
        for pool in self.pools:
            self.emit_pool(pool, add)
        for dataset in self.datasets:
            labels = {"pool": dataset.pool, "dataset": dataset.name}
            # a listing that fails serves its last good values: frozen while it does
            add("zfs_dataset_newest_snapshot_timestamp_seconds", labels,
                freeze(gauge("", {}, dataset.newest, H), self.source_failing.get("zfs_snapshots", [])))
            if dataset.quota:
                add("zfs_dataset_used_bytes", labels, gauge("", {}, dataset.used, H))
                add("zfs_dataset_quota_bytes", labels, gauge("", {}, [(0.0, dataset.quota)], H))
            if dataset.key_loaded:
                add("zfs_dataset_key_loaded", labels, gauge("", {}, dataset.key_loaded, H))
        if self.has_smart:
            for disk in self.disks:
                self.emit_disk(disk, add)
        if self.has_arc:
            self.emit_arc(add)
        if self.has_node:
            self.emit_host(add)
        if self.bench:
            self.emit_bench(add)
        if self.life.topology == "agent":
            add("prometheus_remote_storage_highest_timestamp_in_seconds", {},
                Series("", {}).add(0, H, 0, 1), job="prometheus")
            lagging = Series("", {})
            for (t0, lag), (t1, _) in zip(self.remote_lag, [*self.remote_lag[1:], (H, None)]):
                if lag is not None and lag >= 0:
                    lagging.add(t0, t1, t0 - lag, 1.0)
                elif lag is not None:   # stalled: the sent timestamp stops where it was
                    lagging.add(t0, t1, t0 + lag, 0.0)
            add("prometheus_remote_storage_queue_highest_sent_timestamp_seconds",
                {"remote_name": "central", "url": "http://store.lan/api/v1/write"}, lagging, job="prometheus")
        z.extend(self.extra)

    def emit_pool(self, pool: Pool, add) -> None:
        H, labels = self.H, {"pool": pool.name}
        present = clip(pool.imported, pool.born, H)

        def only_imported(series: Series) -> Series:
            return restrict(series, sorted(present))

        def g(name: str, extra: dict[str, str], steps: Steps) -> None:
            add(name, {**labels, **extra}, only_imported(gauge("", {}, steps, H)))

        for state in STATES:
            g("zfs_pool_state", {"state": state}, [(t, 1.0 if s == state else 0.0) for t, s in pool.state])
        g("zfs_pool_size_bytes", {}, [(pool.born, pool.size)])
        allocated, free = Series("", {}), Series("", {})
        for (t0, v, slope), (t1, _, _) in zip(pool.allocated, [*pool.allocated[1:], (H, 0, 0)]):
            allocated.add(t0, t1, v, slope)
            free.add(t0, t1, pool.size - v, -slope)
        add("zfs_pool_allocated_bytes", labels, only_imported(allocated))
        add("zfs_pool_free_bytes", labels, only_imported(free))
        for function, state in sorted({(scan.function, scan.state) for scan in pool.scans}):
            g("zfs_pool_scan_info", {"function": function, "state": state},
              [(scan.t, 1.0 if (scan.function, scan.state) == (function, state) else None) for scan in pool.scans])
        for function in sorted({scan.function for scan in pool.scans} - {"none"}):
            mine = [(scan, scan.function == function) for scan in pool.scans]
            g("zfs_pool_scan_start_timestamp_seconds", {"function": function},
              [(scan.t, scan.start if own else None) for scan, own in mine])
            g("zfs_pool_scan_end_timestamp_seconds", {"function": function},
              [(scan.t, scan.end if own else None) for scan, own in mine])
            g("zfs_pool_scan_errors", {"function": function},
              [(scan.t, scan.errors if own and scan.end is not None else None) for scan, own in mine])
            g("zfs_pool_scan_repaired_bytes", {"function": function},
              [(scan.t, scan.repaired if own and scan.end is not None else None) for scan, own in mine])
        g("zfs_pool_data_errors", {}, pool.data_errors)
        g("zfs_pool_txg_history_length", {}, pool.history_length)
        starts = [s for s in self.exporter_starts if s >= pool.born]
        imports = [a for a, _ in present if a > pool.born]
        resets = self.exporter_resets(pool, sorted({*starts, *imports}))
        marks = sorted({t for t, _ in pool.txg_rate} | {t for t, _ in pool.dirty})
        dirty_sum = [(t, (txgs or 0.0) * (dirty or 0.0))
                     for t, txgs, dirty in zip(marks, sampled(pool.txg_rate, marks), sampled(pool.dirty, marks))]
        for name, rates in (("zfs_pool_txgs_synced_total", pool.txg_rate),
                            ("zfs_pool_txg_written_bytes_total", pool.write_rate),
                            ("zfs_pool_txg_dirty_ratio_count", pool.txg_rate),
                            ("zfs_pool_txg_dirty_ratio_sum", dirty_sum)):
            add(name, labels, only_imported(counter("", {}, rates, H, resets[name], start=pool.born)))
        marks = sorted({t for t, _ in pool.txg_rate} | {t for t, _ in pool.slow_txgs})
        for le, slow in (("60.0", 1.0), ("+Inf", 0.0)):
            steps = [(t, (txgs or 0.0) - slow * (slower or 0.0))
                     for t, txgs, slower in zip(marks, sampled(pool.txg_rate, marks), sampled(pool.slow_txgs, marks))]
            add("zfs_pool_txg_sync_seconds_bucket", {**labels, "le": le},
                only_imported(counter("", {}, steps, H, resets["zfs_pool_txgs_synced_total"], start=pool.born)))
        for event_class, rates in pool.events.items():
            series = counter("", {}, rates, H, [(s, 0.0) for s in starts], start=pool.born)
            if not self.exporter.events_born_at_zero:
                series = born_at_first_count(series)
            add("zfs_pool_events_total", {**labels, "class": event_class}, only_imported(series))
        if pool.expected:
            add("zfs_pool_expected_imported", labels, gauge("", {}, steps_of(present, 1.0, 0.0), H))
        for vdev in pool.vdevs:
            v = {"pool": pool.name, "vdev": vdev.name, "vdev_guid": vdev.guid, "role": vdev.role}
            for state in sorted({s for _, s in vdev.state if s}):
                add("zfs_vdev_state", {**v, "parent": vdev.parent, "state": state},
                    only_imported(gauge("", {}, [(t, 1.0 if s == state else None) for t, s in vdev.state], H)))
            for kind, steps in vdev.errors.items():
                add("zfs_vdev_errors", {**v, "type": kind}, only_imported(gauge("", {}, steps, H)))

    def exporter_resets(self, pool: Pool, starts: list[float]) -> dict[str, list[tuple[float, float]]]:
        """Where each txg counter starts again at an exporter (re)start or an import: 0, or (the
        exporter before issue 37) the txgs its ring still holds and their bytes."""
        out: dict[str, list[tuple[float, float]]] = {}
        for name in ("zfs_pool_txgs_synced_total", "zfs_pool_txg_written_bytes_total",
                     "zfs_pool_txg_dirty_ratio_count", "zfs_pool_txg_dirty_ratio_sum"):
            points = []
            for s in starts:
                value = 0.0
                if not self.exporter.txg_ring_is_zero and s in self.exporter_starts:
                    txgs = at(pool.txg_rate, s) or 0.0
                    ring = float(TXG_HISTORY) if txgs > 0 else 0.0
                    seconds = ring / txgs if txgs else 0.0
                    value = {"zfs_pool_txgs_synced_total": ring,
                             "zfs_pool_txg_written_bytes_total": (at(pool.write_rate, s) or 0.0) * seconds,
                             "zfs_pool_txg_dirty_ratio_count": ring,
                             "zfs_pool_txg_dirty_ratio_sum": ring * (at(pool.dirty, s) or 0.0)}[name]
                points.append((s, value))
            out[name] = points
        return out

    def emit_disk(self, disk: Disk, add) -> None:
        H = self.H
        join = {"device": disk.device, "serial": disk.serial, "pool": disk.pool, "vdev_guid": disk.vdev_guid}
        readable = subtract([(0.0, H)], union(self.smart_unavailable))

        def smart(name: str, extra: dict[str, str], steps: Steps, frozen: bool = True) -> None:
            series = gauge("", {}, steps, H)
            if frozen and disk.standby:   # asleep: the value of the read before it slept stays
                series = freeze(series, disk.standby)
            add(name, {**join, **extra}, keep(series, readable))

        add("zfs_disk_info", {"device": disk.device, "serial": disk.serial, "rotational": "1" if disk.media == "hdd" else "0",
                              "pool": disk.pool, "vdev_guid": disk.vdev_guid}, gauge("", {}, [(0.0, 1.0)], H))
        busy = counter("", {}, disk.busy, H, [(b, 0.0) for b in self.boots])
        add("zfs_disk_io_time_seconds_total", {"device": disk.device}, busy)
        standby = steps_of(disk.standby, 1.0, 0.0)
        smart("zfs_disk_smart_state", {"state": "standby"}, standby, frozen=False)
        smart("zfs_disk_smart_state", {"state": "ok"}, [(t, 1.0 - (v or 0.0)) for t, v in standby], frozen=False)
        smart("zfs_disk_smart_info", {"protocol": disk.protocol, "device_type": "nvme" if disk.media == "nvme" else "sat",
                                      "model": "M", "firmware": "1", "media": "hdd" if disk.media == "hdd" else "ssd"},
              [(0.0, 1.0)], frozen=False)
        smart("zfs_disk_smart_healthy", {}, disk.healthy)
        smart("zfs_disk_smart_temperature_celsius", {}, disk.temperature)
        if disk.limit is not None:
            smart("zfs_disk_smart_temperature_limit_celsius", {}, [(0.0, disk.limit)])
        if disk.media == "nvme":
            smart("zfs_disk_smart_nvme_critical_warning", {}, disk.critical_warning)
            smart("zfs_disk_smart_nvme_available_spare_ratio", {}, [(0.0, 1.0)])
            smart("zfs_disk_smart_nvme_available_spare_threshold_ratio", {}, [(0.0, 0.1)])
            smart("zfs_disk_smart_nvme_endurance_used_ratio", {}, [(0.0, 0.05)])
        else:
            smart("zfs_disk_smart_pending_sectors", {}, disk.pending)
            smart("zfs_disk_smart_reallocated_sectors", {}, disk.reallocated)

    def arc_counters(self) -> tuple[Series, Series]:
        """zfs_arc_hits_total and zfs_arc_misses_total as the exporter serves them, from each change
        of the ARC's reads or hit ratio on, counted from 0 again at each boot."""
        reads, ratio = self.arc["reads"], self.arc["ratio"]
        marks = sorted({t for t, _ in reads} | {t for t, _ in ratio})
        pairs = [(t, r or 0.0, q or 0.0) for t, r, q in zip(marks, sampled(reads, marks), sampled(ratio, marks))]
        boots = [(b, 0.0) for b in self.boots]
        return (counter("", {}, [(t, r * q) for t, r, q in pairs], self.H, boots),
                counter("", {}, [(t, r * (1 - q)) for t, r, q in pairs], self.H, boots))

    def arc_warming(self, times: Iterable[float]) -> bool:
        """Whether instance:zfs_arc_warming:bool holds at any of `times`, as documented: the hit
        counter (since the last boot) was under a tenth of its count at `t` 6 hours before (a counter
        begun within them was nothing). The ARC warms with reads, not with time: after an idle start
        that lasts longer than the life's own warm-up. Half an hour more for the rules' steps and
        samples."""
        hits = self.arc_counters()[0]
        starts = [p.start for p in hits.pieces]

        def count(t: float) -> float:
            return hits.pieces[max(0, bisect.bisect_right(starts, t) - 1)].at(t)

        for t in times:
            boot = max(b for b in [0.0, *self.boots] if b <= t)
            then = t - 6.5 * HOUR
            if then < boot or count(then) * 10 < count(t):
                return True
        return False

    def emit_arc(self, add) -> None:
        H, arc = self.H, self.arc
        hits, misses = self.arc_counters()
        boots = [(b, 0.0) for b in self.boots]
        add("zfs_arc_hits_total", {}, hits)
        add("zfs_arc_misses_total", {}, misses)
        for name, key in (("zfs_arc_size_bytes", "size"), ("zfs_arc_target_size_bytes", "target"),
                          ("zfs_arc_min_size_bytes", "min"), ("zfs_arc_no_grow", "no_grow"),
                          ("zfs_arc_memory_available_bytes", "available")):
            add(name, {}, gauge("", {}, arc[key], H))
        if self.has_l2arc:
            add("zfs_l2arc_header_bytes", {}, gauge("", {}, arc["l2arc_header"], H))
        add("zfs_arc_memory_throttle_total", {}, counter("", {}, arc["memory_throttle"], H, boots))
        add("zfs_dmu_tx_dirty_delay_total", {}, counter("", {}, arc["delay"], H, boots))
        add("zfs_dmu_tx_dirty_over_max_total", {}, counter("", {}, arc["over_max"], H, boots))
        add("zfs_arc_anon_size_bytes", {}, gauge("", {}, [(0.0, 2e5)], H))
        add("zfs_dirty_data_max_bytes", {}, gauge("", {}, [(0.0, 4e9)], H))
        add("zfs_dirty_data_delay_min_ratio", {}, gauge("", {}, [(0.0, 0.6)], H))

    def emit_host(self, add) -> None:
        H, host = self.H, self.host
        fs = {"device": "/dev/sda2", "fstype": "ext4", "mountpoint": "/"}
        add("node_filesystem_size_bytes", fs, gauge("", {}, [(0.0, 1e11)], H), job="node")
        add("node_filesystem_avail_bytes", fs, gauge("", {}, [(t, v * 1e11) for t, v in host["avail"]], H), job="node")
        add("node_filesystem_readonly", fs, gauge("", {}, [(0.0, 0.0)], H), job="node")
        add("node_timex_offset_seconds", {}, gauge("", {}, host["offset"], H), job="node")
        add("node_timex_sync_status", {}, gauge("", {}, host["sync"], H), job="node")
        add("node_timex_maxerror_seconds", {}, gauge("", {}, host["maxerror"], H), job="node")
        add("node_filefd_maximum", {}, gauge("", {}, [(0.0, 1e6)], H), job="node")
        add("node_filefd_allocated", {}, gauge("", {}, [(t, v * 1e6) for t, v in host["fd"]], H), job="node")
        add("node_boot_time_seconds", {}, gauge("", {}, [(a, a - 30) for a, _ in self.on], H), job="node")

    def emit_bench(self, add) -> None:
        H = self.H
        config = {"matrix": "m", "workload": "seqwrite", "config": "c1", "compression": "lz4", "recordsize": "1M",
                  "encryption": "off", "size": "4G", "pool": self.pools[0].name}
        throughput, previous, last, runs, running = [], [], [], [], Series("", {})
        for n, (t, value) in enumerate(self.bench):
            earlier = [v for _, v in self.bench[:n]]
            throughput.append((t + 300, value))
            previous.append((t + 300, sorted(earlier)[len(earlier) // 2] if earlier else None))
            last.append((t + 300, t + 300))
            runs.append((t + 300, float(n + 1)))
            running.add(t, t + 300, 1.0)
        add("zfs_bench_throughput_bytes_per_second", config, gauge("", {}, throughput, H))
        add("zfs_bench_throughput_previous_median_bytes_per_second", config, gauge("", {}, previous, H))
        add("zfs_bench_last_run_timestamp_seconds", config, gauge("", {}, last, H))
        add("zfs_bench_runs_total", config, gauge("", {}, runs, H))


def steps_of(spans: Intervals, inside: float, outside: float) -> Steps:
    steps: Steps = [(0.0, outside)]
    for a, b in union(spans):
        steps += [(a, inside), (b, outside)]
    return steps


def source_age(failing: Intervals, H: float, typical: float) -> Series:
    series = Series("", {})
    t = 0.0
    for a, b in union(failing):
        series.add(t, a, typical)
        series.add(a, b, typical, 1.0)   # no refresh since `a`: the age grows
        t = b
    series.add(t, H, typical)
    return series


def keep(series: Series, spans: Intervals) -> Series:
    return restrict(series, spans)


def freeze(series: Series, spans: Intervals) -> Series:
    """While in `spans` the value stays what it was when each span began."""
    out = Series(series.name, series.labels)
    holes = union(spans)
    for piece in series.pieces:
        for a, b in clip(subtract([(piece.start, piece.end)], holes), piece.start, piece.end):
            out.add(a, b, piece.at(a), piece.slope)
    for a, b in holes:
        value = None
        for piece in series.pieces:
            if piece.start <= a < piece.end or piece.end == a:
                value = piece.at(a)
        if value is not None:
            out.add(a, b, value)
    out.pieces.sort(key=lambda p: p.start)
    return out


def born_at_first_count(series: Series) -> Series:
    """The exporter before issue 37: an event counter appears at its first count, not at 0 (and,
    after a restart, again at its first count)."""
    out = Series(series.name, series.labels)
    for piece in series.pieces:
        if piece.slope <= 0:
            if piece.value >= 1:
                out.add(piece.start, piece.end, piece.value)
            continue
        first = piece.start + max(0.0, (1 - piece.value) / piece.slope)
        if first < piece.end:
            out.add(first, piece.end, piece.at(first), piece.slope)
    return out
