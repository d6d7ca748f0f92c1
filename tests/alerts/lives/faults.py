"""The kinds of life: healthy ones that force an ordinary part that once misled an alert, and sick
ones, each a fault with the alerts that must (or may) name it. Every kind says which tiers it lives
in and, where it is one, which item of issue 37 it shows (`defect`).

A fault changes the NAS's timelines (nas.py) before its series are written, and adds `Expect`s:
the alert that must fire, from its documented delay (model.DELAYS) plus the scale's slack until the
fault ends, and the alerts that may (the same fault seen from another side). Everything else a
sick life raises is as much a violation as in a healthy one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .model import DAY, DELAYS, HOUR, MINUTE, THRESHOLDS
from .nas import REMOTE, Dataset, Disk, Nas, Pool, Scan, Steps, Vdev, at
from .series import subtract


@dataclass(frozen=True)
class Kind:
    name: str
    tiers: tuple[str, ...]
    make: Callable[[Nas], None]
    sick: bool
    defect: str = ""                       # the item of issue 37 it shows
    topologies: tuple[str, ...] = ("stack", "agent", "central")


KINDS: dict[str, Kind] = {}
POOL_FORGOTTEN = 35 * DAY   # pool:zfs_pool_last_seen:timestamp_seconds remembers a pool that long


def kind(name: str, tiers: tuple[str, ...], sick: bool = True, defect: str = "",
         topologies: tuple[str, ...] = ("stack", "agent", "central")):
    def register(make: Callable[[Nas], None]) -> Callable[[Nas], None]:
        KINDS[name] = Kind(name, tiers, make, sick, defect, topologies)
        return make
    return register


def expect(nas: Nas, alert: str, start: float, end: float | None = None, resolve: float = 0.0,
           must: bool = True, episodes: int = 1, delay: float | None = None) -> None:
    nas.expect(alert, start, end, resolve, must, episodes, delay)


def splice(steps: Steps, t0: float, t1: float, value: float | None) -> Steps:
    """`steps` with `value` from t0 to t1, and what it was after t1."""
    after = at(steps, t1)
    kept = [(t, v) for t, v in steps if t < t0 or t >= t1]
    kept.append((t0, value))
    if not any(t == t1 for t, _ in kept):
        kept.append((t1, after))
    return sorted(kept, key=lambda s: s[0])


def window(nas: Nas, low: float, high: float, length: tuple[float, float], on: bool = True) -> tuple[float, float]:
    """A fault's start (within low..high of the horizon) and end, inside one on-period when `on`."""
    rng = nas.rng
    for _ in range(200):
        start = rng.uniform(low * nas.H, high * nas.H)
        end = start + rng.uniform(*length)
        if not on or any(a <= start and end <= b for a, b in nas.on):
            return start, min(end, nas.H)
    longest = max(nas.on, key=lambda s: s[1] - s[0])
    return longest[0] + 60, min(longest[1], longest[0] + 60 + length[0])


def main_pool(nas: Nas) -> Pool:
    """A pool imported from start to end: the fault's. A NAS whose only pool was re-created gets one."""
    found = next((p for p in nas.pools if p.name != "usb-backup" and p.imported == [(0.0, nas.H)]), None)
    if found is None:
        found = nas.make_pool("main", [(0.0, nas.H)], nas.rng.uniform(0.05, 0.6))
        nas.pools.append(found)
        nas.scrubs(found)
    return found


def leaves(pool: Pool) -> list[Vdev]:
    return [v for v in pool.vdevs if v.errors]


def disk_of(nas: Nas, media: tuple[str, ...] = ("hdd", "ssd", "nvme")) -> Disk:
    found = [d for d in nas.disks if d.media in media]
    if found:
        return nas.rng.choice(found)
    pool = main_pool(nas)
    vdev = leaves(pool)[0]
    disk = Disk(f"sd{len(nas.disks) + 10}", f"SN{nas.life.index:05d}X{len(nas.disks)}", media[0], pool.name, vdev.guid,
                nas.daily_temperature(38 if media[0] == "hdd" else 45), None, [(0.0, 1.0)], [(0.0, 0.0)], [(0.0, 0.0)],
                [(0.0, 0.0)] if media[0] == "nvme" else [])
    disk.busy = [(0.0, 0.1)]
    nas.disks.append(disk)
    return disk


def power_off(nas: Nas, start: float, end: float) -> None:
    nas.on = subtract(nas.on, [(start, end)])
    nas.boots = sorted({*nas.boots, *(a for a, _ in nas.on if a > 0)})
    nas.exporter_starts = sorted({*nas.exporter_starts, *(a for a, _ in nas.on)})


# --- healthy kinds: an ordinary part, forced -----------------------------------------------------

@kind("healthy", ("minutes", "days", "weeks"), sick=False)
def healthy(nas: Nas) -> None:
    pass


@kind("nvme_within_limit", ("minutes",), sick=False, defect="10: NVMe temperature ignores the drive's own limit")
def nvme_within_limit(nas: Nas) -> None:
    disk = disk_of(nas, ("nvme",))
    disk.media, disk.limit = "nvme", float(nas.rng.choice((80, 82, 84, 85)))
    disk.temperature = nas.daily_temperature(nas.rng.uniform(72, disk.limit - 6))
    disk.critical_warning = disk.critical_warning or [(0.0, 0.0)]
    nas.part(f"NVMe {disk.device} runs at {at(disk.temperature, 0):.0f} °C, its own limit {disk.limit:.0f} °C")


@kind("cold_cache", ("days",), sick=False, defect="10: ARC collapse after every boot's cold cache")
def cold_cache(nas: Nas) -> None:
    t = nas.rng.uniform(0.4, 0.8) * nas.H
    power_off(nas, t, t + nas.rng.uniform(5, 40) * MINUTE)
    nas.arc_part()   # the warm-up after this boot too
    nas.part(f"a reboot on day {t / DAY:.2f}: the ARC starts cold")


@kind("restarts_under_load", ("days",), sick=False, defect="8: an exporter restart re-counts the txg ring")
def restarts_under_load(nas: Nas) -> None:
    pool = main_pool(nas)
    busy = [t for t, rate in pool.write_rate if rate >= 1e8 and t > 2 * HOUR and nas.is_on(t + 30 * MINUTE)]
    if not busy:
        t = nas.rng.uniform(0.3, 0.7) * nas.H
        t -= t % HOUR
        pool.write_rate = splice(pool.write_rate, t, t + HOUR, pool.capability)
        pool.txg_rate = splice(pool.txg_rate, t, t + HOUR, 0.5)
        pool.dirty = splice(pool.dirty, t, t + HOUR, 0.6)
        busy = [t]
    for t in nas.rng.sample(busy, min(3, len(busy))):
        restart = t + nas.rng.uniform(5, 50) * MINUTE
        nas.exporter_down.append((restart, restart + nas.rng.uniform(2, 20)))
        nas.exporter_starts = sorted({*nas.exporter_starts, restart + 20})
    nas.part(f"exporter restarted while {pool.name} writes")


@kind("relabel", ("days", "weeks"), sick=False, defect="6: ZfsHostDown for 7 days after a relabel")
def relabel(nas: Nas) -> None:
    if nas.relabel_at is None:
        nas.relabel_part()


@kind("recreated_pool", ("weeks",), sick=False, defect="3: memory rules never forget (a re-created pool)")
def recreated_pool(nas: Nas) -> None:
    pool = main_pool(nas)
    last = max((s.end for s in pool.scans if s.end is not None), default=0.0)
    t = max(last, 0.0) + nas.rng.uniform(25, 40) * DAY
    t = min(t, 45 * DAY)
    gap = nas.rng.uniform(10 * MINUTE, 6 * HOUR)
    new = nas.make_pool(pool.name, [(t + gap, nas.H)], 0.05, born=t + gap)
    pool.imported = [(0.0, t)]
    nas.pools.append(new)
    nas.scrubs(new, new_pool=True)
    nas.datasets = [d for d in nas.datasets if d.pool != pool.name]
    nas.part(f"pool {pool.name} destroyed on day {t / DAY:.1f} and created again {gap / HOUR:.1f} h later")


@kind("usb_long_first_run", ("weeks",), sick=False, defect="7: ZfsPoolMissing pages after a USB pool's long first run")
def usb_long_first_run(nas: Nas) -> None:
    nas.pools = [p for p in nas.pools if p.name != "usb-backup"]
    nas.usb_pool(first_length=nas.rng.uniform(3, 5.5) * DAY)


@kind("scrub_paused_when_due", ("weeks",), sick=False, defect="9: ScrubOverdue during a paused scrub")
def scrub_paused_when_due(nas: Nas) -> None:
    """A scrub that takes days, paused by day, begun the day the pool falls due."""
    pool = main_pool(nas)
    threshold = THRESHOLDS["scrub_max_age_days"] * DAY
    last_end = -nas.rng.uniform(20, 30) * DAY
    start = last_end + threshold - nas.rng.uniform(2, 20) * HOUR
    pool.scans = [Scan(0.0, "scrub", "finished", last_end - 10 * HOUR, last_end)]
    t, days = start, nas.rng.randint(2, 4)
    pool.scans.append(Scan(t, "scrub", "scanning", start))
    for _ in range(days):
        day_start = t - t % DAY
        pause, resume = day_start + DAY + 8 * HOUR, day_start + DAY + 23 * HOUR
        pool.scans += [Scan(pause, "scrub", "paused", start), Scan(resume, "scrub", "scanning", start)]
        t = resume
    end = t + 5 * HOUR
    pool.scans.append(Scan(end, "scrub", "finished", start, end))
    for s in (end + 30 * DAY,):
        if s < nas.H:
            pool.scans += [Scan(s, "scrub", "scanning", s), Scan(s + 10 * HOUR, "scrub", "finished", s, s + 10 * HOUR)]
    nas.part(f"{pool.name}: a scrub paused by day (zpool scrub -p) from day {start / DAY:.1f} to {end / DAY:.1f}, begun when due")


@kind("resilver_when_due", ("weeks",), sick=False, defect="9: ScrubOverdue in the middle of a 3-day resilver")
def resilver_when_due(nas: Nas) -> None:
    pool = main_pool(nas)
    threshold = THRESHOLDS["scrub_max_age_days"] * DAY
    last_end = -nas.rng.uniform(20, 30) * DAY
    start = last_end + threshold - nas.rng.uniform(1, 2) * DAY
    length = nas.rng.uniform(2.5, 3.5) * DAY
    scrub = start + length + nas.rng.uniform(1, 10) * HOUR
    pool.scans = [Scan(0.0, "scrub", "finished", last_end - 10 * HOUR, last_end),
                  Scan(start, "resilver", "scanning", start), Scan(start + length, "resilver", "finished", start, start + length),
                  Scan(scrub, "scrub", "scanning", scrub), Scan(scrub + 12 * HOUR, "scrub", "finished", scrub, scrub + 12 * HOUR)]
    # between the resilver's end and the scrub's start the pool is overdue, truly (a resilver is no
    # scrub): told then, never during the resilver
    expect(nas, "ZfsPoolScrubOverdue", start + length, scrub, must=False)
    nas.part(f"{pool.name}: a resilver from day {start / DAY:.1f} for {length / DAY:.1f} days "
             "as its scrub fell due, scrubbed after")


@kind("snapshots_night_off", ("weeks",), sick=False, defect="2: SnapshotsStopped and a NAS off at 00:00 or 12:00 UTC")
def snapshots_night_off(nas: Nas) -> None:
    night_off(nas)
    if not nas.datasets:
        pool = main_pool(nas)
        nas.datasets.append(Dataset(pool.name, f"{pool.name}/ds9", []))
    for dataset in nas.datasets:
        dataset.newest = nas.snapshot_times(nas.rng.choice((HOUR, DAY)), 0.0, nas.H, catch_up=True)


def night_off(nas: Nas) -> None:
    """Off every night across 00:00 UTC (a European NAS) or 12:00 UTC (01:00-07:00 on the US west coast)."""
    around = nas.rng.choice((0, 12))
    start = (around - nas.rng.uniform(1, 4)) % 24
    length = nas.rng.uniform(6, 9) * HOUR
    offs = [(d * DAY + start * HOUR, d * DAY + start * HOUR + length) for d in range(-1, int(nas.H / DAY) + 1)]
    for begin, end in offs:
        if end > 0:
            power_off(nas, max(begin, 0.0), min(end, nas.H))
    nas.part(f"off every night from {start:.1f} h UTC for {length / HOUR:.1f} h (across {around:02d}:00 UTC)")
    if nas.life.topology in REMOTE and "nightly_off_remote" not in nas.life.parts:
        nas.part("nightly_off_remote")


# --- sick kinds: a fault and the alert that names it ----------------------------------------------

@kind("pool_faulted", ("minutes",), defect="10: a FAULTED pool pages twice")
def pool_faulted(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.5, (40 * MINUTE, 4 * HOUR))
    state = nas.rng.choice(("FAULTED", "SUSPENDED"))
    pool.state = splice(pool.state, start, end, state)
    pool.txg_rate = splice(pool.txg_rate, start, end, 0.0)   # nothing syncs
    for vdev in leaves(pool):
        vdev.state = splice(vdev.state, start, end, "FAULTED" if state == "FAULTED" else "ONLINE")
    expect(nas, "ZfsPoolNotOnline", start, end)
    expect(nas, "ZfsVdevNotOnline", start, end, must=False)
    nas.part(f"{pool.name} {state} from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("disk_removed", ("minutes",))
def disk_removed(nas: Nas) -> None:
    pool = main_pool(nas)
    if len(leaves(pool)) < 2:
        pool = nas.make_pool("mirror", [(0.0, nas.H)], 0.3)
        while len(leaves(pool)) < 2:
            pool = nas.make_pool("mirror", [(0.0, nas.H)], 0.3)
        nas.pools.append(pool)
    vdev = nas.rng.choice([v for v in leaves(pool)])
    start, end = window(nas, 0.1, 0.6, (30 * MINUTE, 5 * HOUR))
    vdev.state = splice(vdev.state, start, end, nas.rng.choice(("REMOVED", "UNAVAIL")))
    pool.state = splice(pool.state, start, end, "DEGRADED")
    top = pool.vdevs[0]
    top.state = splice(top.state, start, end, "DEGRADED")
    expect(nas, "ZfsPoolNotOnline", start, end)
    expect(nas, "ZfsVdevNotOnline", start, end)
    nas.part(f"{vdev.name} of {pool.name} gone from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("cache_faulted", ("minutes",))
def cache_faulted(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.6, (20 * MINUTE, 5 * HOUR))
    cache = Vdev(f"{pool.name}-cache0", nas.guid(), "cache", "cache", splice([(0.0, "ONLINE")], start, end, "FAULTED"))
    pool.vdevs.append(cache)
    expect(nas, "ZfsVdevNotOnline", start, end)
    nas.part(f"the cache device of {pool.name} FAULTED from {start / HOUR:.2f} h (the pool stays ONLINE)")


@kind("slow_io", ("minutes",), defect="5: ZfsPoolSlowIO misses the first burst of delay events")
def slow_io(nas: Nas) -> None:
    pool = main_pool(nas)
    start = window(nas, 0.2, 0.7, (30 * MINUTE, 31 * MINUTE))[0]
    burst = nas.rng.uniform(2, 30)
    events = nas.rng.randint(1, 40)
    pool.events["delay"] = splice(splice(pool.events["delay"], start, start + burst, events / burst),
                                  start + burst, nas.H, 0.0)
    expect(nas, "ZfsPoolSlowIO", start, start + burst, resolve=15 * MINUTE)
    nas.part(f"{events} delay events on {pool.name} at {start / HOUR:.2f} h within {burst:.0f} s")


@kind("txg_stall", ("minutes",))
def txg_stall(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.5, (30 * MINUTE, 3 * HOUR))
    pool.txg_rate = splice(pool.txg_rate, start, end, 0.0)
    pool.write_rate = splice(pool.write_rate, start, end, 0.0)
    expect(nas, "ZfsPoolTxgSyncStalled", start, end)
    nas.part(f"txg sync of {pool.name} hangs from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("txg_slow", ("minutes",))
def txg_slow(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.6, (3 * MINUTE, 20 * MINUTE))
    pool.slow_txgs = [(0.0, 0.0), (start, 1 / 70), (end, 0.0)]
    pool.txg_rate = splice(pool.txg_rate, start, end, 1 / 70)
    expect(nas, "ZfsPoolTxgSyncSlow", start, end, resolve=15 * MINUTE)
    nas.part(f"txgs of {pool.name} take 70 s from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("vdev_errors", ("minutes",))
def vdev_errors(nas: Nas) -> None:
    pool = main_pool(nas)
    vdev = nas.rng.choice(leaves(pool))
    start, end = window(nas, 0.1, 0.6, (20 * MINUTE, 4 * HOUR))
    kind_ = nas.rng.choice(("read", "checksum"))
    vdev.errors[kind_] = splice(vdev.errors[kind_], start, end, float(nas.rng.randint(1, 50)))
    expect(nas, "ZfsVdevErrors", start, end)
    nas.part(f"{kind_} errors on {vdev.name} from {start / HOUR:.2f} h until zpool clear at {end / HOUR:.2f} h")


@kind("data_errors", ("minutes",))
def data_errors(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.6, (20 * MINUTE, 4 * HOUR))
    pool.data_errors = splice(pool.data_errors, start, end, float(nas.rng.randint(1, 9)))
    expect(nas, "ZfsPoolDataErrors", start, end)
    nas.part(f"permanent errors in {pool.name} from {start / HOUR:.2f} h")


@kind("scrub_errors", ("minutes",))
def scrub_errors(nas: Nas) -> None:
    pool = main_pool(nas)
    start = window(nas, 0.1, 0.4, (2 * HOUR, 3 * HOUR))[0]
    end = start + nas.rng.uniform(20, 90) * MINUTE
    errors, repaired = ((float(nas.rng.randint(1, 9)), 0.0) if nas.rng.random() < 0.5
                        else (0.0, float(nas.rng.randint(4096, 10**9))))
    pool.scans = [s for s in pool.scans if s.t < start] + [Scan(start, "scrub", "scanning", start),
                                                          Scan(end, "scrub", "finished", start, end, errors, repaired)]
    expect(nas, "ZfsPoolScrubFoundErrors", end, None)
    nas.part(f"a scrub of {pool.name} ends at {end / HOUR:.2f} h with {errors:.0f} errors, {repaired:.0f} B repaired")


@kind("capacity_critical", ("minutes",))
def capacity_critical(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.5, (1 * HOUR, 5 * HOUR))
    fill = pool.size * nas.rng.uniform(0.91, 0.97)
    before = pool.allocated[0][1]
    pool.allocated = [(0.0, before, 0.0), (start, fill, 0.0), (end, before, 0.0)]
    expect(nas, "ZfsPoolCapacityCritical", start, end)
    expect(nas, "ZfsPoolCapacityHigh", start, end, must=False)
    nas.part(f"{pool.name} {fill / pool.size:.0%} full from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("quota_full", ("minutes",))
def quota_full(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.5, (1 * HOUR, 5 * HOUR))
    quota = 1e12
    nas.datasets.append(Dataset(pool.name, f"{pool.name}/homes", [(0.0, None)],
                                splice([(0.0, 0.5 * quota)], start, end, 0.95 * quota), quota))
    expect(nas, "ZfsDatasetQuotaNearlyFull", start, end)
    nas.part(f"{pool.name}/homes at 95 % of its quota from {start / HOUR:.2f} h")


@kind("read_only", ("minutes",))
def read_only(nas: Nas) -> None:
    pool = main_pool(nas)
    start = window(nas, 0.1, 0.5, (1 * HOUR, 2 * HOUR))[0]
    old = list(pool.imported)
    pool.imported = subtract(old, [(start - 120, start)])    # exported, imported again read-only
    pool.history_length = splice(pool.history_length, start, nas.H, 0.0)
    pool.txg_rate = splice(pool.txg_rate, start, nas.H, 0.0)
    pool.write_rate = splice(pool.write_rate, start, nas.H, 0.0)
    expect(nas, "ZfsPoolReadOnly", start, None)
    nas.part(f"{pool.name} imported read-only at {start / HOUR:.2f} h")


@kind("dataset_locked", ("minutes",))
def dataset_locked(nas: Nas) -> None:
    pool = main_pool(nas)
    start, end = window(nas, 0.1, 0.5, (30 * MINUTE, 5 * HOUR))
    nas.datasets.append(Dataset(pool.name, f"{pool.name}/secret", [(0.0, None)],
                                key_loaded=splice([(0.0, 1.0)], start, end, 0.0)))
    expect(nas, "ZfsDatasetLocked", start, end)
    nas.part(f"{pool.name}/secret locked from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("disk_hot", ("minutes",))
def disk_hot(nas: Nas) -> None:
    disk = disk_of(nas, ("hdd",))
    disk.standby = []
    start, end = window(nas, 0.1, 0.4, (1.5 * HOUR, 4 * HOUR))
    disk.temperature = splice(disk.temperature, start, end, float(nas.rng.randint(53, 60)))
    if disk.limit is not None and disk.limit <= 60:
        disk.limit = 65.0
    expect(nas, "ZfsDiskTemperatureHigh", start, end)
    nas.part(f"{disk.device} (HDD) at {at(disk.temperature, start):.0f} °C from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("smart_failed", ("minutes",))
def smart_failed(nas: Nas) -> None:
    disk = disk_of(nas, ("hdd", "ssd"))
    disk.standby = []
    start = window(nas, 0.1, 0.6, (1 * HOUR, 2 * HOUR))[0]
    disk.healthy = splice(disk.healthy, start, nas.H, 0.0)
    expect(nas, "ZfsDiskSmartFailed", start, None)
    nas.part(f"{disk.device} fails its SMART health check from {start / HOUR:.2f} h")


@kind("nvme_critical", ("minutes",))
def nvme_critical(nas: Nas) -> None:
    disk = disk_of(nas, ("nvme",))
    start, end = window(nas, 0.1, 0.6, (1 * HOUR, 4 * HOUR))
    disk.critical_warning = splice(disk.critical_warning or [(0.0, 0.0)], start, end, float(nas.rng.choice((1, 4, 8))))
    disk.healthy = splice(disk.healthy, start, end, 0.0)
    expect(nas, "ZfsNvmeCriticalWarning", start, end)
    nas.part(f"NVMe {disk.device} raises a critical warning from {start / HOUR:.2f} h")


@kind("sectors_growing", ("minutes", "days"))
def sectors_growing(nas: Nas) -> None:
    disk = disk_of(nas, ("hdd", "ssd"))
    disk.standby = []
    start = window(nas, 0.1, 0.5, (1 * HOUR, 2 * HOUR))[0]
    base = at(disk.pending, 0) or 0.0
    disk.pending = [(0.0, base), (start, base + 8), (start + nas.rng.uniform(0.5, 3) * HOUR, base + 24)]
    last = disk.pending[-1][0]
    expect(nas, "ZfsDiskSectorsGrowing", start, last, resolve=DAY)
    nas.part(f"pending sectors of {disk.device} grow from {start / HOUR:.2f} h")


@kind("smart_unavailable", ("minutes",), defect="1: SMART silently off on the one-command stack")
def smart_unavailable(nas: Nas) -> None:
    start = 0.0 if nas.rng.random() < 0.5 else window(nas, 0.1, 0.4, (1 * HOUR, 2 * HOUR))[0]
    nas.smart_unavailable = [(start + 30, nas.H)]
    disk_of(nas)
    expect(nas, "ZfsDiskSmartUnavailable", start, None)
    nas.part("SMART cannot be read (the container without raw disk access) " +
             ("from the start" if not start else f"from {start / HOUR:.2f} h"))


@kind("exporter_down", ("minutes",))
def exporter_down(nas: Nas) -> None:
    start, end = window(nas, 0.1, 0.6, (15 * MINUTE, 2 * HOUR))
    nas.calm(start, end)
    nas.exporter_down.append((start, end))
    nas.exporter_starts = sorted({*nas.exporter_starts, end})
    expect(nas, "ZfsExporterDown", start, end)
    nas.part(f"the exporter stopped from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("collector_failing", ("minutes",))
def collector_failing(nas: Nas) -> None:
    collector = nas.rng.choice(("pools", "datasets", "txg", "poolstats"))
    start, end = window(nas, 0.1, 0.6, (15 * MINUTE, 3 * HOUR))
    nas.calm(start, end)
    nas.collector_failing[collector] = [(start, end)]
    expect(nas, "ZfsExporterCollectorFailing", start, end)
    nas.part(f"collector {collector} failing from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("host_down", ("minutes",), topologies=("agent", "central"))
def host_down(nas: Nas) -> None:
    start, end = window(nas, 0.1, 0.6, (20 * MINUTE, 2 * HOUR))
    power_off(nas, start, end)
    expect(nas, "ZfsHostDown" if nas.has_node else "ZfsExporterDown", start, end)
    if not nas.has_node:
        expect(nas, "ZfsExporterAbsent", start, end, must=False)
    nas.part(f"the NAS crashed at {start / HOUR:.2f} h and came back at {end / HOUR:.2f} h")


@kind("host_fs_full", ("minutes",))
def host_fs_full(nas: Nas) -> None:
    nas.has_node = True
    start, end = window(nas, 0.1, 0.4, (1 * HOUR, 4 * HOUR))
    nas.host["avail"] = splice(nas.host["avail"], start, end, nas.rng.uniform(0.01, 0.045))
    expect(nas, "ZfsHostFilesystemAlmostFull", start, end, delay=15 * MINUTE)
    expect(nas, "ZfsHostFilesystemFillingUp", start, end, must=False)   # the fall itself: filling fast
    nas.part(f"/ almost full from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("clock_skew", ("minutes",))
def clock_skew(nas: Nas) -> None:
    nas.has_node = True
    start, end = window(nas, 0.1, 0.5, (30 * MINUTE, 3 * HOUR))
    nas.host["offset"] = splice(nas.host["offset"], start, end, nas.rng.choice((-1, 1)) * nas.rng.uniform(0.1, 5))
    expect(nas, "ZfsHostClockSkew", start, end)
    nas.part(f"the clock off from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("fd_exhausted", ("minutes",))
def fd_exhausted(nas: Nas) -> None:
    nas.has_node = True
    start, end = window(nas, 0.1, 0.5, (30 * MINUTE, 3 * HOUR))
    nas.host["fd"] = splice(nas.host["fd"], start, end, nas.rng.uniform(0.85, 0.99))
    expect(nas, "ZfsHostFileDescriptorsExhausted", start, end)
    nas.part(f"file handles nearly all used from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("remote_write_stalled", ("minutes",), topologies=("agent",))
def remote_write_stalled(nas: Nas) -> None:
    start, end = window(nas, 0.1, 0.5, (30 * MINUTE, 3 * HOUR))
    nas.remote_lag = [(0.0, 5.0), (start, -(start - 5.0)), (end, 5.0)]
    expect(nas, "ZfsRemoteWriteStalled", start, end, delay=300 + 10 * MINUTE)
    nas.part(f"remote_write stalled from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("arc_squeezed", ("minutes",))
def arc_squeezed(nas: Nas) -> None:
    start, end = window(nas, 0.1, 0.5, (1 * HOUR, 3 * HOUR))
    low = nas.arc["min"][0][1]
    nas.arc["target"] = splice(nas.arc["target"], start, end, low)
    nas.arc["no_grow"] = splice(nas.arc["no_grow"], start, end, 1.0)
    expect(nas, "ZfsArcSqueezed", start, end)
    nas.part(f"the ARC squeezed to its minimum from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("memory_throttle", ("minutes",))
def memory_throttle(nas: Nas) -> None:
    start, end = window(nas, 0.1, 0.5, (40 * MINUTE, 3 * HOUR))
    nas.arc["memory_throttle"] = splice(nas.arc["memory_throttle"], start, end, nas.rng.uniform(0.05, 2))
    expect(nas, "ZfsArcMemoryThrottle", start, end, resolve=10 * MINUTE)
    nas.part(f"the ARC throttles writes for memory from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("write_throttle", ("minutes",))
def write_throttle(nas: Nas) -> None:
    start, end = window(nas, 0.1, 0.5, (40 * MINUTE, 3 * HOUR))
    nas.arc["delay"] = splice(nas.arc["delay"], start, end, nas.rng.uniform(3, 50))
    nas.arc["over_max"] = splice(nas.arc["over_max"], start, end, nas.rng.uniform(0.05, 1))
    expect(nas, "ZfsWriteThrottleDelaying", start, end, resolve=5 * MINUTE)
    nas.part(f"writers blocked by the throttle from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("disk_saturated", ("minutes",))
def disk_saturated(nas: Nas) -> None:
    pool = nas.make_pool("spin", [(0.0, nas.H)], 0.4)
    while len(leaves(pool)) < 3:
        pool = nas.make_pool("spin", [(0.0, nas.H)], 0.4)
    nas.pools.append(pool)
    disks = []
    for n, vdev in enumerate(leaves(pool)):
        disk = Disk(f"sdq{n}", f"SP{nas.life.index:05d}{n}", "hdd", pool.name, vdev.guid, nas.daily_temperature(36), None,
                    [(0.0, 1.0)], [(0.0, 0.0)], [(0.0, 0.0)])
        disk.busy = [(0.0, 0.2)]
        disks.append(disk)
    nas.disks.extend(disks)
    start, end = window(nas, 0.1, 0.5, (40 * MINUTE, 3 * HOUR))
    slow = nas.rng.choice(disks)
    slow.busy = splice(slow.busy, start, end, 0.99)
    expect(nas, "ZfsDiskSaturated", start, end, resolve=5 * MINUTE)
    nas.part(f"{slow.device} of {pool.name} busy 99 % from {start / HOUR:.2f} h to {end / HOUR:.2f} h")


@kind("l2arc_headers", ("minutes",))
def l2arc_headers(nas: Nas) -> None:
    nas.has_l2arc = True
    start, end = window(nas, 0.1, 0.5, (1 * HOUR, 3 * HOUR))
    size = nas.arc["size"][0][1]
    nas.arc["l2arc_header"] = splice(nas.arc["l2arc_header"], start, end, size * nas.rng.uniform(0.12, 0.3))
    expect(nas, "ZfsL2arcHeaderRamHigh", start, end)
    nas.part(f"L2ARC headers take much of the ARC from {start / HOUR:.2f} h")


@kind("capacity_at_threshold", ("days",), defect="10: capacity at exactly 80 % fires at noon, resolves at midnight")
def capacity_at_threshold(nas: Nas) -> None:
    """A pool that hovers at the warning threshold: a little over it by day, a little under by night."""
    pool = main_pool(nas)
    line = THRESHOLDS["pool_capacity_warning"]
    pieces = []
    for h in range(int(nas.H / HOUR) + 1):
        hour = h % 24
        share = line + (0.0015 if 9 <= hour < 21 else -0.0015)
        pieces.append((h * HOUR, pool.size * share, 0.0))
    pool.allocated = pieces
    expect(nas, "ZfsPoolCapacityHigh", 0.0, None, must=False)
    nas.part(f"{pool.name} at {line:.0%} +-0.15 %, over by day, under by night")


@kind("arc_collapse", ("days",))
def arc_collapse(nas: Nas) -> None:
    """The working set changed: reads the ARC served now go to the disks, for hours."""
    # not while the rule takes the ARC for warming up after a boot (its counter, not a time: the
    # runbook's entry), which an idle start stretches past the cache's own warm-up
    before = dict(nas.arc)
    for _ in range(100):
        start, end = window(nas, 0.45, 0.8, (1.5 * HOUR, 4 * HOUR))
        nas.arc["reads"] = splice(before["reads"], start, end, nas.rng.uniform(400, 2000))
        nas.arc["ratio"] = splice(before["ratio"], start, end, nas.rng.uniform(0.1, 0.45))
        if not nas.arc_warming(range(int(start), int(end) + 1, 15 * MINUTE)):
            break
    expect(nas, "ZfsArcHitRatioCollapsed", start, end, resolve=5 * MINUTE)
    nas.part(f"ARC hit ratio collapsed from day {start / DAY:.2f} to {end / DAY:.2f}")


@kind("bench_regression", ("days",))
def bench_regression(nas: Nas) -> None:
    if not nas.bench:
        nas.bench_part()
    while len(nas.bench) < 5:
        nas.bench.append((nas.bench[-1][0] + 6 * HOUR, nas.bench[-1][1]))
    median = sorted(v for _, v in nas.bench)[len(nas.bench) // 2]
    at_run = nas.rng.randint(4, len(nas.bench) - 1)
    t, _ = nas.bench[at_run]
    nas.bench = nas.bench[:at_run] + [(t, median * nas.rng.uniform(0.4, 0.8))]
    start = t + 300
    expect(nas, "ZfsBenchThroughputRegression", start, start + THRESHOLDS["bench_regression_max_age_days"] * DAY)
    nas.part(f"benchmark run {at_run + 1} on day {t / DAY:.2f} regressed")


@kind("throughput_degraded", ("days",))
def throughput_degraded(nas: Nas) -> None:
    pool = main_pool(nas)
    start = nas.rng.uniform(0.5, 0.7) * nas.H
    start -= start % HOUR
    loaded = 0
    for t in range(int(start), int(nas.H), HOUR):
        if loaded < 3 and nas.is_on(t) and nas.is_on(t + HOUR) and nas.rng.random() < 0.3:
            pool.write_rate = splice(pool.write_rate, t, t + HOUR, pool.capability * nas.rng.uniform(0.2, 0.4))
            pool.txg_rate = splice(pool.txg_rate, t, t + HOUR, 0.5)
            pool.dirty = splice(pool.dirty, t, t + HOUR, nas.rng.uniform(0.5, 0.9))
            expect(nas, "ZfsPoolWriteThroughputDegraded", t, t + HOUR, resolve=5 * MINUTE)
            loaded += 1
    if not loaded:
        t = int(start)
        power_off(nas, t - 1, t)   # keep the kind: a loaded hour right after
        pool.write_rate = splice(pool.write_rate, t, t + HOUR, pool.capability * 0.3)
        pool.txg_rate = splice(pool.txg_rate, t, t + HOUR, 0.5)
        pool.dirty = splice(pool.dirty, t, t + HOUR, 0.7)
        expect(nas, "ZfsPoolWriteThroughputDegraded", t, t + HOUR, resolve=5 * MINUTE)
    nas.part(f"{pool.name} writes at a third of its pace under load from day {start / DAY:.2f}")


@kind("scrub_stopped", ("weeks",))
def scrub_stopped(nas: Nas) -> None:
    pool = main_pool(nas)
    threshold = THRESHOLDS["scrub_max_age_days"] * DAY
    last_end = -nas.rng.uniform(0, 8) * DAY
    pool.scans = [Scan(0.0, "scrub", "finished", last_end - 8 * HOUR, last_end)]
    expect(nas, "ZfsPoolScrubOverdue", last_end + threshold, None)
    nas.part(f"{pool.name}: no scrub after the one ending on day {last_end / DAY:.1f} (the cron job is gone)")


@kind("snapshots_stopped", ("weeks",), defect="2: SnapshotsStopped never fires on a NAS off at 00:00 or 12:00 UTC")
def snapshots_stopped(nas: Nas) -> None:
    if nas.rng.random() < 0.6:
        night_off(nas)
    pool = main_pool(nas)
    period = nas.rng.choice((HOUR, DAY, DAY, 7 * DAY))
    stop = nas.rng.uniform(36, 42) * DAY
    newest = nas.snapshot_times(period, 0.0, stop, catch_up=True)
    dataset = Dataset(pool.name, f"{pool.name}/docs", newest)
    nas.datasets.append(dataset)
    taken = sorted({v for _, v in newest if v is not None and v >= 0})
    seen = [t for t, v in newest if v is not None and v >= 0]
    gaps = [b - a for a, b in zip(taken, taken[1:]) if b >= stop - 35 * DAY]
    allowed = max(THRESHOLDS["snapshot_max_age_days"] * DAY,
                  THRESHOLDS["snapshot_gap_factor"] * max(gaps) if len(gaps) >= 2 else 0.0)
    last = taken[-1]
    expect(nas, "ZfsDatasetSnapshotsStopped", last, None, delay=allowed + DELAYS["ZfsDatasetSnapshotsStopped"])
    nas.part(f"{dataset.name}: snapshots every {period / HOUR:g} h until day {stop / DAY:.1f} "
             f"(last on day {last / DAY:.2f}, seen {seen[-1] / DAY:.2f}), then none")


@kind("pool_missing", ("weeks",))
def pool_missing(nas: Nas) -> None:
    pool = main_pool(nas)
    t = nas.rng.uniform(12, 45) * DAY
    back = t + nas.rng.uniform(1, 5) * DAY if nas.rng.random() < 0.5 else nas.H
    power_off(nas, t, t + nas.rng.uniform(2, 10) * MINUTE)
    pool.imported = subtract(pool.imported, [(t, back)])
    boot = next(a for a, _ in nas.on if a >= t)
    # a pool not seen for 35 days is forgotten (docs/runbook.md#zfspoolmissing): told until then
    # (from the last evaluation that saw it, up to one before it went)
    forgotten = t + POOL_FORGOTTEN - nas.life.tier.evaluation
    expect(nas, "ZfsPoolMissing", boot, min(back, forgotten), resolve=2 * HOUR if forgotten < back else 0.0)
    nas.part(f"{pool.name} not imported after the reboot on day {t / DAY:.1f}" +
             (f" until day {back / DAY:.1f}" if back < nas.H else ""))


@kind("usb_forgotten", ("weeks",), defect="7: a weekly backup pool forgotten for weeks is never noticed")
def usb_forgotten(nas: Nas) -> None:
    nas.pools = [p for p in nas.pools if p.name != "usb-backup"]
    nas.usb_pool(first_length=nas.rng.uniform(2, 8) * HOUR, first=nas.rng.uniform(0, 3) * DAY)
    pool = nas.pools[-1]
    stop = nas.rng.uniform(26, 34) * DAY
    pool.imported = [(a, b) for a, b in pool.imported if b < stop]
    last = pool.imported[-1][1]
    gaps = [b[0] - a[1] for a, b in zip(pool.imported, pool.imported[1:])]
    expect(nas, "ZfsPoolMissing", last, min(nas.H, last + POOL_FORGOTTEN - nas.life.tier.evaluation), resolve=2 * HOUR,
           delay=1.5 * max(gaps) + DELAYS["ZfsPoolMissing"] + HOUR)
    nas.part(f"the weekly USB pool not imported after day {last / DAY:.1f} (gaps up to {max(gaps) / DAY:.1f} days)")


@kind("snapshot_future", ("weeks",), defect="4: one hour of a clock a year ahead blinds SnapshotsStopped",
      topologies=("central",))
def snapshot_future(nas: Nas) -> None:
    """The NAS's clock set a year ahead for an hour (a central Prometheus keeps the right time): a
    snapshot taken then is dated a year ahead, and stays the newest until someone destroys it."""
    pool = main_pool(nas)
    t = nas.rng.uniform(10, 30) * DAY
    destroyed = t + nas.rng.uniform(2, 15) * DAY
    newest = nas.snapshot_times(HOUR, 0.0, nas.H, catch_up=True)
    ahead = [(when, (value + 365 * DAY if t <= when < t + HOUR + 900 else value)) for when, value in newest]
    future = max((v for w, v in ahead if v is not None and t <= w < t + HOUR + 900), default=t + 365 * DAY)
    fixed = []
    for when, value in ahead:
        if value is None:
            fixed.append((when, value))
        elif t <= when < destroyed:
            fixed.append((when, max(value, future)))   # max(creation): the future one stays the newest
        else:
            fixed.append((when, value))
    nas.datasets.append(Dataset(pool.name, f"{pool.name}/home", fixed))
    nas.has_node = True
    nas.host["offset"] = splice(nas.host["offset"], t, t + HOUR, 365 * DAY)
    expect(nas, "ZfsDatasetSnapshotInFuture", t, destroyed)
    expect(nas, "ZfsHostClockSkew", t, t + HOUR, must=False)
    nas.part(f"the clock a year ahead for an hour on day {t / DAY:.1f}; "
             f"the snapshot then taken destroyed on day {destroyed / DAY:.1f}")


@kind("listing_frozen", ("weeks",), defect="4: SnapshotsStopped trusts the frozen values of a listing that times out")
def listing_frozen(nas: Nas) -> None:
    if not nas.datasets:
        pool = main_pool(nas)
        nas.datasets.append(Dataset(pool.name, f"{pool.name}/ds9", nas.snapshot_times(HOUR, 0.0, nas.H)))
    start = nas.rng.uniform(10, 40) * DAY
    end = min(nas.H, start + nas.rng.uniform(2.5, 8) * DAY)
    nas.calm(start, end)
    nas.source_failing["zfs_snapshots"] = [(start, end)]
    nas.collector_failing["datasets"] = [(start, end)]
    expect(nas, "ZfsExporterSourceFailing", start, end)
    expect(nas, "ZfsExporterSourceStale", start, end)
    expect(nas, "ZfsExporterCollectorFailing", start, end, must=False)
    nas.part(f"the snapshot listing times out from day {start / DAY:.1f} to {end / DAY:.1f} (200,000 snapshots)")


@kind("fill_up", ("weeks",))
def fill_up(nas: Nas) -> None:
    pool = main_pool(nas)
    start = nas.rng.uniform(3, 25) * DAY
    rate = pool.size * nas.rng.uniform(0.02, 0.05) / DAY
    begin = pool.size * nas.rng.uniform(0.5, 0.6)
    full_at = start + (0.98 * pool.size - begin) / rate
    pool.allocated = [(0.0, begin, 0.0), (start, begin, rate), (full_at, 0.98 * pool.size, 0.0)]
    days_left = [(t, (pool.size - (begin + rate * (t - start))) / rate) for t in range(int(start), int(full_at), HOUR)]
    forecast = next((t for t, left in days_left if left < THRESHOLDS["pool_full_forecast_days"] * DAY * 0.9
                     and t > start + 3.2 * DAY), None)
    if forecast is not None:
        expect(nas, "ZfsPoolFullForecast", forecast, full_at)
    expect(nas, "ZfsPoolFullForecast", start, None, must=False)
    high = start + (THRESHOLDS["pool_capacity_warning"] * pool.size - begin) / rate
    critical = start + (THRESHOLDS["pool_capacity_critical"] * pool.size - begin) / rate
    expect(nas, "ZfsPoolCapacityHigh", high, None, must=high + HOUR < nas.H)
    expect(nas, "ZfsPoolCapacityCritical", critical, None, must=critical + HOUR < nas.H)
    nas.part(f"{pool.name} fills {rate * DAY / pool.size:.1%} a day from day {start / DAY:.1f}")


@kind("host_gone", ("weeks",), topologies=("agent",))
def host_gone(nas: Nas) -> None:
    start = nas.rng.uniform(10, 40) * DAY
    end = start + nas.rng.uniform(0.5, 5) * DAY
    power_off(nas, start, end)
    if nas.has_node:
        expect(nas, "ZfsHostDown", start, end)
        expect(nas, "ZfsExporterAbsent", start, end, must=False)
    else:
        expect(nas, "ZfsExporterAbsent", start, end)
    nas.part(f"the NAS stops sending on day {start / DAY:.1f} until day {end / DAY:.1f}")


def kinds_for(tier: str, sick: bool) -> list[Kind]:
    return [k for k in KINDS.values() if tier in k.tiers and k.sick == sick]


def sorted_kinds() -> list[Kind]:
    return sorted(KINDS.values(), key=lambda k: (not k.sick, k.name))


def defects() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k in KINDS.values():
        if k.defect:
            out.setdefault(k.defect.split(":")[0], []).append(k.name)
    return out

