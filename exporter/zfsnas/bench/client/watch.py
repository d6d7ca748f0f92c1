"""`zfsnas-bench watch`: measure, from the NAS, a workload something else drives (an SMB or NFS copy
from a PC, CrystalDiskMark against a zvol over iSCSI).

What it samples is what the exporter reads, through the same sources:
- the watched datasets' objset counters (`nwritten`, `nread`, `writes`, `reads`): the bytes and
  operations of the client as they reach each dataset. They are read every `step` (0.1 s, or the
  interval where only sysctl can read them) so that the window's edges are known to half a step;
- every `interval` (1 s): CPU (/proc/stat or kern.cp_time), the bytes read and written by each
  disk of the pool (/proc/diskstats), dirty data (arcstats `anon_size`, its live proxy), the write
  throttle (`dmu_tx` counters) and the pool's txgs.

The measured window is first byte to last byte: up to the middle of the step in which a dataset's
counters last moved, from the middle of the one in which they first moved less the time the bytes
that landed then took at the rate that followed (a client's first request lands whole: an SMB
write carries up to 8 MiB); throughput is the bytes of that window over its seconds, i.e. the
rate from the first landing to the last. CPU is taken between the samples around the window; disk bytes
and throttle counters up to the sample after the last byte's txg has synced (the writes that byte
caused). Compression achieved by the workload: the dataset's growth in `logicalused` over its
growth in `used` (`zfs get -p` before and after that txg), unknown when it did not grow.

It ends on SIGINT/SIGTERM/SIGHUP, after `duration`, or `until_idle` seconds after the last change.
Counters that go backwards (the pool exported and imported) end that dataset's window where they
were last read going forward: its bytes are never negative. A counter that cannot be read (the
dataset or pool gone, a kstat that does not parse or holds no uint64) ends the watch with
WatchError; `Watcher.watched` still says what was seen until then.

Memory and time do not grow with the watch's length: of the samples only the first, the last
`PRE_SAMPLES` before a dataset's first byte, the one after its last byte and the latest are kept;
the peak of dirty data and the txgs that synced are folded in as samples come; the figures take
time linear in nothing but those. It creates, writes and destroys nothing: it only reads. Owns
sampling and the window; the command, the store and the annotations are client_commands.py's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...sources.kstat import ARCSTATS, parse_named_kstat
from ...sources.model import SourceError
from ...store.configuration import leaf_paths
from ...store.schema import ResultFigures
from ..running import probes

if TYPE_CHECKING:
    from ...sources.model import KstatSource

log = logging.getLogger("zfsnas.bench")
COUNTERS = ("nwritten", "nread", "writes", "reads")
FINE_STEP = 0.1
PRE_SAMPLES = 600            # samples kept from before a dataset's first byte (10 min at 1 s)
COUNTER_LIMIT = 1 << 64      # objset counters are uint64


class WatchError(Exception):
    pass


@dataclass
class Target:
    """One watched dataset and what was seen of it."""

    dataset: str
    pool: str
    path: str | None                         # its objset kstat file (procfs); None: read through the source
    first: tuple[float, float, tuple[int, ...]] | None = None   # (step before, step after, counters before)
    last: tuple[float, float, tuple[int, ...]] | None = None    # (step before, step after, counters after)
    previous: tuple[int, ...] = ()
    previous_t: float = 0.0
    txg_at_last: int | None = None          # the pool's open txg when the counters last moved
    first_step: tuple[int, ...] | None = None   # the counters at the end of the first step they moved in
    closed: str = ""                        # why its window ended before the watch did (counters went back)
    before: list[Sample] = field(default_factory=list)   # the samples before its first byte (the last ones)
    after_last: Sample | None = None        # the first sample taken at or after its last byte
    moved_since_sample: bool = False        # bytes came since the last sample: the next one is `after_last`
    peak_dirty: int | None = None           # dirty data's peak from its first byte to `after_last`
    peak_since: int | None = None           # ... and since, folded in if more bytes come
    txg_from: int | None = None             # the pool's open txg at the sample before its first byte
    txgs_synced: int = 0                    # txgs from `txg_from` on that committed (so far)
    txg_sync_seconds_max: float | None = None
    txg_counted: int = -1                   # the highest committed txg counted

    def window(self) -> tuple[float, float]:
        """Monotonic start and end of the measured window. The end is the middle of the step in
        which the counters last moved. The first bytes land all at once when the client's first
        request has arrived whole (an SMB write carries up to 8 MiB): their transfer began before,
        so the start is the middle of the first step less those bytes' time at the rate that
        followed. A window within a step or two is that step's time."""
        assert self.first is not None and self.last is not None
        landed = (self.first[0] + self.first[1]) / 2
        end = (self.last[0] + self.last[1]) / 2
        if end - landed < (self.last[1] - self.first[0]) / 2:
            return self.first[0], self.last[1]
        total, first = self.bytes_moved(self.last[2]), self.first_landing_bytes()
        rate = (total - first) / (end - landed)
        return (landed - first / rate if rate > 0 else landed), end

    def bytes_moved(self, counters: tuple[int, ...]) -> int:
        assert self.first is not None
        return sum(after - before for after, before in zip(counters[:2], self.first[2][:2]))

    def first_landing(self) -> float:
        assert self.first is not None
        return (self.first[0] + self.first[1]) / 2

    def first_landing_bytes(self) -> int:
        """The bytes that landed in the first step the counters moved in."""
        assert self.first is not None and self.first_step is not None
        return self.bytes_moved(self.first_step)

    def moved(self) -> dict[str, int]:
        assert self.first is not None and self.last is not None
        return {name: after - before for name, before, after in zip(COUNTERS, self.first[2], self.last[2])}

    def see(self, sample: Sample, synced: list[Any]) -> None:
        """Fold one sample in (dirty data's peak, the txgs that synced), as it is taken."""
        if self.first is None or self.closed:
            return
        if sample.anon_bytes is not None:
            self.peak_since = max(self.peak_since or 0, sample.anon_bytes)
        if self.moved_since_sample:          # the first sample at or after the latest byte
            self.after_last, self.moved_since_sample = sample, False
            self.peak_dirty = _max(self.peak_dirty, self.peak_since)
            self.peak_since = None
        for row in synced:
            if row.committed and row.txg > self.txg_counted and (self.txg_from is None or row.txg >= self.txg_from):
                self.txgs_synced += 1
                self.txg_counted = row.txg
                seconds = row.stime / 1e9
                self.txg_sync_seconds_max = max(self.txg_sync_seconds_max or 0.0, seconds)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class Sample:
    t: float                                  # monotonic
    wall: float
    snapshot: probes.Snapshot
    anon_bytes: int | None
    open_txgs: dict[str, int | None]          # pool -> its open txg (the highest in its txgs kstat)


@dataclass
class Watched:
    """What a watch saw (bounded: see the module docstring)."""
    targets: list[Target]
    first: Sample                             # the watch's first sample
    last: Sample                              # its latest (after `settle`: the closing one)
    stopped_by: str
    step: float = 1.0                         # the shortest time between two samples
    samples: int = 1                          # how many were taken
    error: str = ""                           # why the watch ended before it was asked to ("": it was not)
    settle_seconds: float = 0.0
    wall_offset: float = field(default_factory=lambda: time.time() - time.monotonic())

    def wall(self, t: float) -> float:
        return t + self.wall_offset


def objset_path(procfs: str, pool: str, dataset: str) -> str | None:
    """The `<pool>/objset-0x<id>` kstat file of `dataset`, or None where there is none."""
    directory = os.path.join(procfs, "spl", "kstat", "zfs", pool)
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith("objset-0x"))
    except OSError:
        return None
    for name in names:
        path = os.path.join(directory, name)
        try:
            named = parse_named_kstat(Path(path).read_text(), path)
        except (OSError, ValueError):
            continue
        if named.strings.get("dataset_name") == dataset:
            return path
    return None


class Watcher:
    def __init__(self, source: KstatSource, datasets: list[str], procfs: str = "/proc", sysfs: str = "/sys",
                 sysctl: Any = None, interval: float = 1.0):
        self.source, self.procfs, self.sysfs, self.sysctl = source, procfs, sysfs, sysctl
        self.interval = interval
        self.targets = []
        for dataset in datasets:
            pool = dataset.split("/")[0]
            path = objset_path(procfs, pool, dataset) if source.kind == "procfs" else None
            self.targets.append(Target(dataset, pool, path))
        for target in self.targets:
            target.previous = self._counters(target)     # WatchError: nothing readable, said now
        self.step = min(FINE_STEP, interval) if all(t.path for t in self.targets) else interval
        self.watched: Watched | None = None      # what was seen so far (also when the watch failed)
        self._recent: deque[Sample] = deque(maxlen=PRE_SAMPLES)

    def _counters(self, target: Target) -> tuple[int, ...]:
        try:
            if target.path is not None:
                values = parse_named_kstat(Path(target.path).read_text(), target.path).values
            else:
                self.source.refresh()
                found = [o for o in self.source.objsets(target.pool) if o.dataset == target.dataset]
                if not found:
                    raise WatchError(f"{target.dataset}: no objset counters in the {self.source.kind} kstats "
                                     f"(is it mounted? a zvol has them once opened)")
                values = found[0].values
            counters = tuple(int(values.get(name, 0)) for name in COUNTERS)
        except (OSError, ValueError, TypeError, OverflowError, SourceError) as exc:
            raise WatchError(f"{target.dataset}: its objset counters cannot be read: {exc}") from None
        if not all(0 <= c < COUNTER_LIMIT for c in counters):
            raise WatchError(f"{target.dataset}: its objset counters are not uint64 ({counters}): not ZFS's")
        return counters

    def _open_txg(self, pool: str) -> int | None:
        try:
            return max((r.txg for r in self.source.txgs(pool)), default=None)
        except (SourceError, ValueError):
            return None

    def sample(self) -> tuple[Sample, dict[str, list[Any]]]:
        """A sample, and each pool's txgs rows (folded into the targets, not kept)."""
        snapshot = probes.snapshot(self.procfs, self.sysfs, self.sysctl)
        try:
            self.source.refresh()
            anon = self.source.named(ARCSTATS).values.get("anon_size")
        except (SourceError, ValueError):
            anon = None
        txgs: dict[str, list[Any]] = {}
        for pool in {t.pool for t in self.targets}:
            try:
                txgs[pool] = self.source.txgs(pool)
            except (SourceError, ValueError):
                txgs[pool] = []
        opened = {pool: max((r.txg for r in rows), default=None) for pool, rows in txgs.items()}
        return Sample(time.monotonic(), time.time(), snapshot, anon if isinstance(anon, int) else None, opened), txgs

    def _take(self, watched: Watched) -> None:
        sample, txgs = self.sample()
        watched.step = min(watched.step, max(sample.t - watched.last.t, 1e-6))
        watched.samples += 1
        watched.last = sample
        for target in watched.targets:
            target.see(sample, txgs.get(target.pool, []))
        if any(t.first is None for t in watched.targets):
            self._recent.append(sample)
        elif self._recent:
            self._recent.clear()      # every dataset has its own copy of what came before its first byte

    def watch(self, stop: threading.Event, duration: float | None = None, until_idle: float | None = None,
              on_first_byte: Any = None) -> Watched:
        """Sample until stopped; returns what was seen (the caller turns it into results). On
        WatchError, `self.watched` holds what was seen until then."""
        started = time.monotonic()
        for target in self.targets:
            target.previous_t = started
        first, _txgs = self.sample()
        self._recent.append(first)
        watched = self.watched = Watched(self.targets, first, first, "signal", step=self.interval)
        next_sample = started + self.interval
        while True:
            now = time.monotonic()
            for target in self.targets:
                if not target.closed:
                    self._read(target, now, watched, on_first_byte)
            if now >= next_sample:
                self._take(watched)
                next_sample += self.interval * (1 + (now - next_sample) // self.interval)
            if stop.is_set():
                break
            if reason := self._ended(now - started, duration, until_idle, now):
                watched.stopped_by = reason
                break
            stop.wait(self.step)
        return watched

    def _read(self, target: Target, now: float, watched: Watched, on_first_byte: Any) -> None:
        """One read of a dataset's counters: its first byte, its last, or its window's end when they go back."""
        counters = self._counters(target)
        if any(c < p for c, p in zip(counters, target.previous)):
            target.closed = (f"its counters went backwards at {time.strftime('%H:%M:%S')} (the pool exported "
                             f"and imported?): the window ends at the last read before")
            log.warning("%s: %s", target.dataset, target.closed)
            return
        if counters != target.previous:
            if target.first is None:
                target.first = (target.previous_t, now, target.previous)
                target.first_step = counters
                target.before = list(self._recent)
                target.txg_from = watched.last.open_txgs.get(target.pool)
                if on_first_byte is not None and all(t.first is None or t is target for t in self.targets):
                    on_first_byte()
            target.last = (target.previous_t, now, counters)
            target.txg_at_last = self._open_txg(target.pool)
            target.moved_since_sample = True
        target.previous, target.previous_t = counters, now

    def _ended(self, elapsed: float, duration: float | None, until_idle: float | None, now: float) -> str:
        """Why the watch ends now ("" while it goes on)."""
        if all(t.closed for t in self.targets):
            return "counters-went-backwards"
        if duration is not None and elapsed >= duration:
            return "duration"
        lasts = [t.last[1] for t in self.targets if t.last is not None]
        if until_idle is not None and lasts and now - max(lasts) >= until_idle:
            return "until-idle"
        return ""

    def settle(self, watched: Watched, timeout: float, stop: threading.Event | None = None) -> None:
        """Wait (reading only) until the txg that was open when the last byte came has committed in
        each pool, then take the closing sample. `stop` cuts the wait short (a second Ctrl-C)."""
        started = time.monotonic()
        open_txgs: dict[str, int] = {}
        for target in watched.targets:
            if target.txg_at_last is not None:
                open_txgs[target.pool] = max(target.txg_at_last, open_txgs.get(target.pool, 0))
        while time.monotonic() - started < timeout:
            pending = False
            for pool, txg in open_txgs.items():
                try:
                    rows = self.source.txgs(pool)
                except (SourceError, ValueError):
                    continue
                if not any(r.txg >= txg and r.committed for r in rows):
                    pending = True
            if not pending:
                break
            if stop is not None and stop.wait(0.2):
                log.warning("settling cut short: disk bytes and space may miss the last txg's writes")
                break
            if stop is None:
                time.sleep(0.2)
        else:
            log.warning("the last txg did not commit within %.0f s: disk bytes and space may miss its writes", timeout)
        watched.settle_seconds = time.monotonic() - started
        self._take(watched)


def pool_disks(status_text: str, pool: str, sysfs: str = "/sys") -> list[str]:
    """The whole disks under the pool's leaves (`zpool status -P` paths resolved to sda, nvme0n1, ...)."""
    out = []
    block = Path(sysfs) / "block"
    for leaf in leaf_paths(status_text, pool):
        name = Path(os.path.realpath(leaf)).name if leaf.startswith("/") else leaf
        for candidate in (name, name.rstrip("0123456789").removesuffix("p") if name[-1:].isdigit() else name):
            if (block / candidate).exists():
                out.append(candidate)
                break
    return sorted(set(out))


def _bracket(target: Target, watched: Watched, start: float) -> tuple[Sample, Sample]:
    """The samples around a dataset's window: the last kept one at or before its start (else the
    oldest kept), and the first one at or after its last byte (else the latest)."""
    kept = [watched.first, *(s for s in target.before if s is not watched.first)]
    before = [s for s in kept if s.t <= start] or kept[:1]
    return before[-1], target.after_last or watched.last


def figures(watched: Watched, target: Target, disks: list[str], space_before: dict[str, str],
            space_after: dict[str, str], dirty_data_max: int | None) -> ResultFigures:
    """The store's figures of one watched dataset (see the module docstring for each)."""
    start, end = target.window()
    seconds = max(end - start, 1e-6)
    moved = target.moved()
    total = moved["nwritten"] + moved["nread"]
    cpu_from, cpu_to = _bracket(target, watched, start)
    cpu = probes.deltas(cpu_from.snapshot, cpu_to.snapshot)
    closing = probes.deltas(cpu_from.snapshot, watched.last.snapshot)
    early = [s.anon_bytes for s in target.before if s.t >= start - watched.step and s.anon_bytes is not None]
    # bytes after the last sample (a watch that ended at once): the samples since count too
    peak = _max(_max(target.peak_dirty, max(early, default=None)),
                target.peak_since if target.moved_since_sample else None)
    used = _delta(space_before, space_after, "used")
    logical = _delta(space_before, space_after, "logicalused")
    disk_bytes = {d: v for d, v in closing.disks.items() if d in disks}
    details = {
        "source": "watch", "written_bytes": moved["nwritten"], "read_bytes": moved["nread"],
        "writes": moved["writes"], "reads": moved["reads"],
        "window": [round(watched.wall(start), 3), round(watched.wall(end), 3)],
        "first_landing": round(watched.wall(target.first_landing()), 3),
        "first_landing_bytes": target.first_landing_bytes(),
        "step_seconds": watched.step, "stopped_by": watched.stopped_by, "samples": watched.samples,
        "peak_dirty_bytes": peak, "dirty_data_max": dirty_data_max,
        "txgs_synced": target.txgs_synced, "txg_sync_seconds_max": target.txg_sync_seconds_max,
        "pool_read_bytes": sum(v["read_bytes"] for v in disk_bytes.values()),
        "pool_written_bytes": sum(v["written_bytes"] for v in disk_bytes.values()),
        "compression": "growth of logicalused / growth of used (zfs get -p, before and after the last txg)",
    }
    if target.closed:
        details["window_ended"] = target.closed
    if watched.error:
        details["watch_ended"] = watched.error
    return ResultFigures.of({
        "bytes": total, "duration_seconds": seconds, "throughput_bytes_per_second": total / seconds,
        "iops": (moved["writes"] + moved["reads"]) / seconds,
        "compressratio": logical / used if used and logical and used > 0 else None,
        "used_bytes": used, "logicalused_bytes": logical, "sync_seconds": watched.settle_seconds,
        "disks": disk_bytes, "dmu_tx": closing.dmu_tx, "details": details,
        **{k: v for k, v in cpu.figures().items() if k not in ("disks", "dmu_tx")}})


def _delta(before: dict[str, str], after: dict[str, str], name: str) -> int | None:
    try:
        return int(after[name]) - int(before[name])
    except (KeyError, ValueError):
        return None
