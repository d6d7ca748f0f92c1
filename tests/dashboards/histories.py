"""Seeded NAS histories with tuning changes, for the Changes view and the Overview's disk row.

A history is a NAS (one `instance`) with 1 or 2 pools, a few datasets, disks, ARC and CPUs, living
through *segments* of constant behaviour, and *changes* (a module parameter, several at once, a
dataset property, a change and its revert) at segment ends. Each series the exporter (and
node_exporter) would serve is a function of time: counters grow at the segment's rates, the dataset
sizes move at the refresh of `zfs list`, the parameters and properties step at their changes. So a
history is rendered for promtool (`input_series` sampled at a scrape interval) and served live over
HTTP to a real Prometheus (`exposition(t)`), in minutes of any length (60 s; 1 s in the live test).

Each change carries what the history was built with on either side: per signal of the Changes view,
the value, or None where the window holds too little activity (the behaviour's numbers, never
computed by a query). Windows are placed inside segments with margins, activity is clearly above or
below the minimum, so the expectation does not depend on where scrapes and evaluations fall.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field, replace

GiB = 1 << 30
DELAY_MIN = 0.6                      # zfs_delay_min_dirty_percent 60
QUEUED_RATIO, IDLE_RATIO = 0.72, 0.03  # dirty data per txg over zfs_dirty_data_max: queued / at rest
PARAMETERS = {"zfs_dirty_data_max": 4 * GiB, "zfs_txg_timeout": 5, "zfs_vdev_async_write_max_active": 10,
              "zfs_arc_max": 0, "zfs_delay_min_dirty_percent": 60}
TUNINGS = [("zfs_dirty_data_max", 16 * GiB), ("zfs_txg_timeout", 10), ("zfs_vdev_async_write_max_active", 3),
           ("zfs_arc_max", 8 * GiB), ("zfs_dirty_data_max", 2 * GiB)]
PROPERTIES = {"compression": ("lz4", "zstd", "off", "zstd-3"), "recordsize": ("131072", "1048576", "16384"),
              "sync": ("standard", "always"), "atime": ("on", "off"), "logbias": ("latency", "throughput")}
INFO = {"type": "filesystem", "compression": "lz4", "recordsize": "131072", "sync": "standard", "atime": "off",
        "logbias": "latency", "primarycache": "all", "secondarycache": "all", "dedup": "off",
        "special_small_blocks": "0", "encryption": "off"}
SIGNALS = ("write_throughput", "txg_sync", "throttle_delays", "dirty_peak", "read_latency", "write_latency",
           "arc_hit_ratio", "compression_new", "cpu_busy")
CPUS = 2
TARGET_LABELS = re.compile(r'instance="[^"]*", job="[^"]*"(, )?')


@dataclass(frozen=True)
class Behaviour:
    """What the NAS does during a segment, constant throughout (rates per second)."""
    queued: frozenset[str]                  # pools whose writes are queued (the pool sets the pace)
    write_rate: dict[str, float]            # bytes/s each pool's txgs write while queued
    sync_seconds: dict[str, float]          # mean sync time of a txg while queued
    delays: float                           # write-throttle delays per second while any pool is queued
    dirty_peak: float                       # highest live dirty data / zfs_dirty_data_max while queued
    disk_io: bool                           # the pools' disks read and write
    read_latency: float
    write_latency: float
    arc_reads: float                        # ARC reads per second (0: none)
    arc_hit: float
    new_data: dict[str, float]              # logical bytes/s written into a dataset (0: none)
    ratio: dict[str, float]                 # their compression ratio (logical / used)
    cpu_busy: float                         # while any pool is queued; 0.02 otherwise

    def pool_rate(self, pool: str) -> float:
        return self.write_rate[pool] if pool in self.queued else 2e6


@dataclass(frozen=True)
class Segment:
    start: int        # minutes from the history's start
    end: int
    behaviour: Behaviour
    # minutes from the segment's start of its busy part (a burst); outside it the NAS only reads its ARC
    busy_from: int = 0
    busy_to: int | None = None

    @property
    def burst(self) -> tuple[int, int]:
        return self.start + self.busy_from, self.start + (self.busy_to if self.busy_to is not None else
                                                          self.end - self.start)


@dataclass(frozen=True)
class Change:
    minute: int                                   # the new value is served from here (plus `second`)
    what: str | tuple[str, str]                   # a parameter's name, or (dataset, property)
    old: str
    new: str
    before: dict[str, float | None] = field(default_factory=dict)   # per signal; None: too little activity
    after: dict[str, float | None] = field(default_factory=dict)
    # per side, minutes of activity in the window when it starts or ends inside it (a burst), else 0:
    # there a step may be half busy, which moves a rate by up to a step's share
    partial: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "module parameter" if isinstance(self.what, str) else "dataset property"

    @property
    def label(self) -> str:
        """The `what` label of its series: the parameter, or "<dataset> <property>"."""
        return self.what if isinstance(self.what, str) else " ".join(self.what)


@dataclass
class History:
    seed: int
    instance: str
    pools: dict[str, list[str]]            # pool -> its datasets (the root first)
    disks: dict[str, str]                   # device -> pool
    segments: list[Segment]
    changes: list[Change]
    minutes: int
    failing: dict[str, str] = field(default_factory=dict)   # device -> what fails (SMART, ZFS errors)
    second: int = 7                          # changes and dataset refreshes happen this far (of 60) into a minute

    # --- values at a time (seconds from the start, in minutes of `minute` seconds) ----------------

    def _segment_integral(self, t: float, minute: float, rate) -> float:
        """The integral up to `t` of rate(behaviour, busy) over the segments, busy inside their burst."""
        total = 0.0
        for seg in self.segments:
            start, end = seg.start * minute, seg.end * minute
            if t <= start:
                break
            lo, hi = (m * minute for m in seg.burst)
            busy_part = max(0.0, min(t, hi) - lo)
            idle_part = max(0.0, min(t, end) - start) - busy_part
            total += idle_part * rate(seg.behaviour, False) + busy_part * rate(seg.behaviour, True)
        return total

    def _at(self, t: float, minute: float) -> tuple[Segment, bool]:
        for seg in self.segments:
            if seg.start * minute <= t < seg.end * minute:
                return seg, seg.burst[0] * minute <= t < seg.burst[1] * minute
        return self.segments[-1], True

    def parameters(self, t: float, minute: float) -> dict[str, float]:
        values = dict(PARAMETERS)
        for change in self.changes:
            if isinstance(change.what, str) and t >= (change.minute + self.second / 60) * minute:
                values[change.what] = float(change.new)
        return values

    def properties(self, t: float, minute: float) -> dict[str, dict[str, str]]:
        out = {ds: dict(INFO) for datasets in self.pools.values() for ds in datasets}
        for change in self.changes:
            if not isinstance(change.what, str) and t >= (change.minute + self.second / 60) * minute:
                out[change.what[0]][change.what[1]] = change.new
        return out

    def samples(self, t: float, minute: float) -> dict[str, float]:
        """Every series (as its exposition name with labels) and its value at `t` seconds."""
        nas = f'instance="{self.instance}", job="zfsnas"'
        out: dict[str, float] = {}
        params = self.parameters(t, minute)
        for name, value in params.items():
            out[f'zfs_module_parameter{{{nas}, name="{name}"}}'] = value
        out[f"zfs_dirty_data_max_bytes{{{nas}}}"] = params["zfs_dirty_data_max"]
        out[f"zfs_dirty_data_delay_min_ratio{{{nas}}}"] = params["zfs_delay_min_dirty_percent"] / 100
        for dataset, props in self.properties(t, minute).items():
            labels = ", ".join(f'{k}="{v}"' for k, v in props.items())
            out[f'zfs_dataset_info{{{nas}, pool="{dataset.split("/")[0]}", dataset="{dataset}", {labels}}}'] = 1
        seg, busy = self._at(t, minute)
        for pool in self.pools:
            p = f'{nas}, pool="{pool}"'

            def txgs(b: Behaviour, active: bool, pool=pool) -> float:
                return 1.0 if active and pool in b.queued else 0.2

            def integral(per_txg, pool=pool, txgs=txgs) -> float:
                return self._segment_integral(t, minute, lambda b, active: txgs(b, active) * per_txg(b, active))

            def queued(b: Behaviour, active: bool, pool=pool) -> bool:
                return active and pool in b.queued

            out[f"zfs_pool_txg_written_bytes_total{{{p}}}"] = self._segment_integral(
                t, minute, lambda b, active, pool=pool: b.pool_rate(pool) if active else 2e6)
            out[f"zfs_pool_txgs_synced_total{{{p}}}"] = integral(lambda b, active: 1.0)
            out[f"zfs_pool_txg_sync_seconds_count{{{p}}}"] = integral(lambda b, active: 1.0)
            out[f"zfs_pool_txg_sync_seconds_sum{{{p}}}"] = integral(
                lambda b, active, pool=pool, queued=queued: b.sync_seconds[pool] if queued(b, active) else 0.05)
            out[f"zfs_pool_txg_dirty_ratio_count{{{p}}}"] = integral(lambda b, active: 1.0)
            out[f"zfs_pool_txg_dirty_ratio_sum{{{p}}}"] = integral(
                lambda b, active, queued=queued: QUEUED_RATIO if queued(b, active) else IDLE_RATIO)
        any_queued = busy and bool(seg.behaviour.queued)
        out[f"zfs_dmu_tx_dirty_delay_total{{{nas}}}"] = self._segment_integral(
            t, minute, lambda b, active: b.delays if active and b.queued else 0.0)
        out[f"zfs_arc_anon_size_bytes{{{nas}}}"] = params["zfs_dirty_data_max"] * (
            seg.behaviour.dirty_peak if any_queued else 0.004)
        out[f"zfs_arc_hits_total{{{nas}}}"] = self._segment_integral(t, minute, lambda b, active: b.arc_reads * b.arc_hit)
        out[f"zfs_arc_misses_total{{{nas}}}"] = self._segment_integral(
            t, minute, lambda b, active: b.arc_reads * (1 - b.arc_hit))
        for n, (device, pool) in enumerate(sorted(self.disks.items())):
            d = f'{nas}, device="{device}"'
            out[f'zfs_disk_info{{{d}, serial="S{self.seed}-{n}", model="ZFSNAS HDD", pool="{pool}", '
                f'vdev_guid="{self.seed}{n:04d}", rotational="1"}}'] = 1
            share = 1 + n % 2   # the disks of a pool do not all work alike
            for io, latency in (("read", "read_latency"), ("write", "write_latency")):
                def ops(b: Behaviour, active: bool, share=share) -> float:
                    return 40.0 * share if active and b.disk_io else 0.0
                out[f"zfs_disk_{io}s_total{{{d}}}"] = self._segment_integral(t, minute, ops)
                out[f"zfs_disk_{io}_time_seconds_total{{{d}}}"] = self._segment_integral(
                    t, minute, lambda b, active, ops=ops, latency=latency: ops(b, active) * getattr(b, latency))
        late = self.second / 60 * minute   # `zfs list` runs once a minute, this far into it
        refreshed = math.floor((t - late) / minute) * minute + late
        for pool, datasets in self.pools.items():
            for dataset in datasets:
                children = [d for d in datasets if d == dataset or dataset == pool]   # the root holds them all
                logical = used = 0.0
                for child in children:
                    logical += self._segment_integral(
                        max(refreshed, 0), minute, lambda b, active, c=child: b.new_data[c] if active else 0.0)
                    used += self._segment_integral(
                        max(refreshed, 0), minute, lambda b, active, c=child: b.new_data[c] / b.ratio[c] if active else 0.0)
                labels = f'{nas}, pool="{pool}", dataset="{dataset}"'
                out[f"zfs_dataset_logical_used_bytes{{{labels}}}"] = 1e9 + logical
                out[f"zfs_dataset_used_bytes{{{labels}}}"] = 6e8 + used
        node = f'instance="{self.instance}", job="node"'
        for cpu in range(CPUS):
            for mode, share in (("user", 0.7), ("system", 0.3)):
                out[f'node_cpu_seconds_total{{{node}, cpu="{cpu}", mode="{mode}"}}'] = self._segment_integral(
                    t, minute, lambda b, active, share=share: share * (b.cpu_busy if active and b.queued else 0.02))
            out[f'node_cpu_seconds_total{{{node}, cpu="{cpu}", mode="iowait"}}'] = 0.05 * t
            out[f'node_cpu_seconds_total{{{node}, cpu="{cpu}", mode="idle"}}'] = 0.95 * t - self._segment_integral(
                t, minute, lambda b, active: b.cpu_busy if active and b.queued else 0.02)
        out.update(self.health_samples())
        return out

    def health_samples(self) -> dict[str, float]:
        """SMART and zpool status of the disks: all healthy but `failing` (SMART failed, read errors)
        and one disk with reallocated sectors (a warning)."""
        nas = f'instance="{self.instance}", job="zfsnas"'
        out: dict[str, float] = {}
        for n, (device, pool) in enumerate(sorted(self.disks.items())):
            join = f'device="{device}", serial="S{self.seed}-{n}", pool="{pool}", vdev_guid="{self.seed}{n:04d}"'
            out[f"zfs_disk_smart_healthy{{{nas}, {join}}}"] = 0 if self.failing.get(device) == "smart" else 1
            out[f"zfs_disk_smart_temperature_celsius{{{nas}, {join}}}"] = 35 + n
            out[f"zfs_disk_smart_reallocated_sectors{{{nas}, {join}}}"] = 8 if self.failing.get(device) == "sectors" else 0
            out[f'zfs_disk_smart_info{{{nas}, {join}, protocol="ATA", device_type="sat", model="ZFSNAS HDD", '
                f'firmware="1", media="hdd"}}'] = 1
            for state in ("ok", "standby", "unsupported", "failed"):
                out[f'zfs_disk_smart_state{{{nas}, {join}, state="{state}"}}'] = 1 if state == "ok" else 0
            vdev = f'{nas}, pool="{pool}", vdev="/dev/{device}1", vdev_guid="{self.seed}{n:04d}", role="data"'
            out[f'zfs_vdev_state{{{vdev}, parent="{pool}", state="ONLINE"}}'] = 1
            for kind in ("read", "write", "checksum"):
                errors = 3 if self.failing.get(device) == "zfs" and kind == "read" else 0
                out[f'zfs_vdev_errors{{{vdev}, type="{kind}"}}'] = errors
        for pool in self.pools:
            out[f'zfs_pool_state{{{nas}, pool="{pool}", state="ONLINE"}}'] = 1
        return out

    # --- renderings ----------------------------------------------------------------------------

    def input_series(self, minute: float, interval: float) -> list[dict[str, str]]:
        """promtool's input_series, one sample every `interval` seconds from 0 to the history's end."""
        times = [n * interval for n in range(int(self.minutes * minute / interval) + 1)]
        columns: dict[str, list[str]] = {}
        for n, t in enumerate(times):
            for name, value in self.samples(t, minute).items():
                columns.setdefault(name, ["_"] * n).append(repr(float(value)))
        return [{"series": name, "values": " ".join(values)} for name, values in columns.items()]

    def exposition(self, t: float, minute: float, stamp: float | None = None) -> str:
        """/metrics at `t`, without the target's labels (Prometheus sets instance and job); with
        `stamp` (Unix seconds), every sample carries it: the time its values are of, not the time
        Prometheus started the scrape (which a busy machine may answer a second later)."""
        at = f" {round(stamp * 1000)}" if stamp is not None else ""
        return "".join(f"{TARGET_LABELS.sub('', name).replace('{}', '')} {value!r}{at}\n"
                       for name, value in self.samples(t, minute).items())


# --- generating histories ------------------------------------------------------------------------

def behaviour(rng: random.Random, pools: dict[str, list[str]], queued: frozenset[str], quiet: set[str]) -> Behaviour:
    """Random numbers for a segment; `quiet`: signal families without activity (disks, arc, data)."""
    datasets = [d for ds in pools.values() for d in ds]
    writing = {d: (0.0 if "data" in quiet or rng.random() < 0.3 and d.count("/") else rng.uniform(5e6, 60e6))
               for d in datasets}
    writing = {d: (rate if d.count("/") else 0.0) for d, rate in writing.items()}   # roots hold their children's
    if "data" not in quiet and not any(writing.values()):
        writing[next(d for d in datasets if d.count("/"))] = 20e6
    return Behaviour(
        queued=queued, write_rate={p: round(rng.uniform(80e6, 900e6), -3) for p in pools},
        sync_seconds={p: round(rng.uniform(0.5, 6.0), 3) for p in pools}, delays=round(rng.uniform(0, 40), 2),
        dirty_peak=round(rng.uniform(0.4, 0.98), 3), disk_io="disks" not in quiet,
        read_latency=round(rng.uniform(0.002, 0.03), 5), write_latency=round(rng.uniform(0.003, 0.05), 5),
        arc_reads=0.0 if "arc" in quiet else round(rng.uniform(50, 5000)), arc_hit=round(rng.uniform(0.5, 0.99), 3),
        new_data=writing, ratio={d: round(rng.uniform(1.0, 3.5), 2) for d in datasets},
        cpu_busy=round(rng.uniform(0.05, 0.9), 3))


def busy_minutes(seg: Segment, side: str, window: int, gap: int, seen_after: tuple[int, int]) -> tuple[int, int]:
    """The fewest and the most minutes of the segment's burst inside the window of `side` (before a
    change at the segment's end, ending `gap` earlier; or after one at its start), wherever within
    `seen_after` steps after it the change is seen."""
    found = []
    for late in seen_after:
        lo, hi = (seg.end - gap - window, seg.end - gap) if side == "before" else (seg.start, seg.start + window)
        found.append(max(0, min(hi + late, seg.burst[1]) - max(lo + late, seg.burst[0])))
    return min(found), max(found)


def expected(history: History, seg: Segment, change: Change, busy: int, min_active: int) -> dict[str, float | None]:
    """Per signal, what the window shows for `change` (a host-wide parameter, or a property of one
    dataset of one pool) with `busy` minutes of the segment's activity in it: the behaviour's
    number, or None with too little activity."""
    b = seg.behaviour
    enough = busy >= min_active + 2
    pools = list(history.pools) if change.kind == "module parameter" else [change.what[0].split("/")[0]]
    queued = [p for p in pools if p in b.queued]
    write_path = enough and bool(queued)
    if change.kind == "module parameter":
        writers = [d for p in history.pools for d in history.pools[p] if d.count("/")]
    else:
        writers = [change.what[0]]
    logical = sum(b.new_data[d] for d in writers)
    used = sum(b.new_data[d] / b.ratio[d] for d in writers)
    return {
        "write_throughput": sum(b.write_rate[p] for p in queued) if write_path else None,
        "txg_sync": sum(b.sync_seconds[p] for p in queued) / len(queued) if write_path else None,
        "throttle_delays": b.delays if write_path else None,
        "dirty_peak": b.dirty_peak if write_path else None,
        "read_latency": b.read_latency if enough and b.disk_io else None,
        "write_latency": b.write_latency if enough and b.disk_io else None,
        "arc_hit_ratio": b.arc_hit if b.arc_reads else None,       # ARC reads run through idle parts too
        "compression_new": logical / used if enough and used else None,
        "cpu_busy": b.cpu_busy if write_path else None,
    }


def generate(seed: int, window: int = 60, min_active: int = 5, gap: int = 5, instance: str | None = None,
             seen_after: tuple[int, int] = (0, 4)) -> History:
    """A history: a first segment, then three changes (a parameter, a property, and one of: two
    parameters at once, the first change reverted, another property), each between two segments
    long enough for a whole window on either side (`window` minutes, the before window ending `gap`
    minutes before the change), which is seen `seen_after` steps (at least, at most) after it is
    served. A segment may have nothing queued, or be idle but for a burst clearly shorter or longer
    than `min_active`, inside both windows it is part of; a family of signals may be quiet."""
    rng = random.Random(seed)
    pools = {}
    for p in ("tank", "backup")[:rng.choice((1, 1, 2))]:
        names = rng.sample(["media", "home", "vm", "db", "photos"], rng.choice((1, 2, 3)))
        pools[p] = [p] + [f"{p}/{name}" for name in names]
    disks = {f"sd{chr(ord('a') + n)}": p for n, p in enumerate(q for q in pools for _ in range(rng.choice((2, 3))))}
    length = window + gap + 4            # a segment holds a whole window with margins on each side
    # where a burst lies inside the after window of the change at a segment's start and the before
    # window of the one at its end, wherever they are seen
    first, last = 4 + seen_after[1], window + seen_after[0]

    def segment(start: int) -> Segment:
        queued = frozenset(p for p in pools if rng.random() < 0.8) or frozenset([next(iter(pools))])
        quiet = {q for q in ("disks", "arc", "data") if rng.random() < 0.15}
        busy, roll = (0, length), rng.random()
        if roll < 0.15:
            queued = frozenset()          # nothing queued: no number for the write path
        elif roll < 0.35:                 # idle but for a burst: short, or long enough
            size = rng.choice((1, min_active + 4))
            assert last - first >= size, "windows too short for a burst"
            at = rng.randint(first, last - size)
            busy = (at, at + size)
        return Segment(start, start + length, behaviour(rng, pools, queued, quiet), *busy)

    params, props = dict(PARAMETERS), {d: dict(INFO) for ds in pools.values() for d in ds}
    segments, changes = [segment(0)], []
    for n, kind in enumerate(["parameter", "property", rng.choice(["parameters", "revert", "property"])]):
        at = length * (n + 1)
        segments.append(segment(at))
        if kind in ("parameter", "parameters"):
            for name, value in dict(rng.sample(TUNINGS, 2 if kind == "parameters" else 1)).items():
                value = PARAMETERS[name] if params[name] == value else value
                changes.append(Change(at, name, str(int(params[name])), str(int(value))))
                params[name] = value
        elif kind == "revert":
            last = next(c for c in reversed(changes) if isinstance(c.what, str))
            changes.append(Change(at, last.what, last.new, last.old))
            params[last.what] = int(last.old)
        else:
            dataset = rng.choice([d for ds in pools.values() for d in ds if d.count("/")])
            prop = rng.choice(sorted(PROPERTIES))
            new = rng.choice([v for v in PROPERTIES[prop] if v != props[dataset][prop]])
            changes.append(Change(at, (dataset, prop), props[dataset][prop], new))
            props[dataset][prop] = new
    history = History(seed, instance or f"nas-{seed}", pools, disks, segments, [], segments[-1].end)
    for change in changes:
        before = next(s for s in segments if s.end == change.minute)
        after = next(s for s in segments if s.start == change.minute)
        busy = {}
        for side, seg in (("before", before), ("after", after)):
            fewest, most = busy_minutes(seg, side, window, gap, seen_after)
            assert fewest >= min_active + 2 or most <= min_active - 1, \
                f"seed {seed}: {side} activity {fewest}-{most} too near the minimum {min_active} to expect anything"
            busy[side] = fewest
        history.changes.append(replace(
            change, before=expected(history, before, change, busy["before"], min_active),
            after=expected(history, after, change, busy["after"], min_active),
            partial={side: busy[side] if busy[side] < window else 0 for side in busy}))
    failing = rng.choice(sorted(disks))
    history.failing = {failing: rng.choice(("smart", "zfs"))}
    others = [d for d in disks if d != failing]
    if others and rng.random() < 0.5:
        history.failing[rng.choice(others)] = "sectors"
    return history
