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

It ends on SIGINT/SIGTERM, after `duration`, or `until_idle` seconds after the last change. It
creates, writes and destroys nothing: it only reads. Owns sampling and the window; the command,
the store and the annotations are client_commands.py's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sources.benchschema import ResultFigures
from ..sources.kstat import parse_named_kstat
from ..sources.model import SourceError
from . import probes
from .config import leaf_paths

if TYPE_CHECKING:
    from ..sources.model import KstatSource

log = logging.getLogger("zfsnas.bench")
COUNTERS = ("nwritten", "nread", "writes", "reads")
FINE_STEP = 0.1


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


@dataclass
class Sample:
    t: float                                  # monotonic
    wall: float
    snapshot: probes.Snapshot
    anon_bytes: int | None
    txgs: dict[str, list[Any]]                # pool -> its txgs rows (sources.kstat.Txg)


@dataclass
class Watched:
    targets: list[Target]
    samples: list[Sample]
    stopped_by: str
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
        except (OSError, ValueError, SourceError) as exc:
            raise WatchError(f"{target.dataset}: its objset counters cannot be read: {exc}") from None
        return tuple(int(values.get(name, 0)) for name in COUNTERS)

    def _open_txg(self, pool: str) -> int | None:
        try:
            return max((r.txg for r in self.source.txgs(pool)), default=None)
        except (SourceError, ValueError):
            return None

    def sample(self) -> Sample:
        snapshot = probes.snapshot(self.procfs, self.sysfs, self.sysctl)
        try:
            self.source.refresh()
            anon = self.source.arcstats().values.get("anon_size")
        except (SourceError, ValueError):
            anon = None
        txgs: dict[str, list[Any]] = {}
        for pool in {t.pool for t in self.targets}:
            try:
                txgs[pool] = self.source.txgs(pool)
            except (SourceError, ValueError):
                txgs[pool] = []
        return Sample(time.monotonic(), time.time(), snapshot, anon, txgs)

    def watch(self, stop: threading.Event, duration: float | None = None, until_idle: float | None = None,
              on_first_byte: Any = None) -> Watched:
        """Sample until stopped; returns what was seen (the caller turns it into results)."""
        started = time.monotonic()
        for target in self.targets:
            target.previous_t = started
        samples = [self.sample()]
        next_sample = started + self.interval
        stopped_by = "signal"
        while True:
            now = time.monotonic()
            for target in self.targets:
                counters = self._counters(target)
                if counters != target.previous:
                    if target.first is None:
                        target.first = (target.previous_t, now, target.previous)
                        target.first_step = counters
                        if on_first_byte is not None and all(t.first is None or t is target for t in self.targets):
                            on_first_byte()
                    target.last = (target.previous_t, now, counters)
                    target.txg_at_last = self._open_txg(target.pool)
                target.previous, target.previous_t = counters, now
            if now >= next_sample:
                samples.append(self.sample())
                next_sample += self.interval * (1 + (now - next_sample) // self.interval)
            if stop.is_set():
                break
            if duration is not None and now - started >= duration:
                stopped_by = "duration"
                break
            lasts = [t.last[1] for t in self.targets if t.last is not None]
            if until_idle is not None and lasts and now - max(lasts) >= until_idle:
                stopped_by = "until-idle"
                break
            stop.wait(self.step)
        return Watched(self.targets, samples, stopped_by)

    def settle(self, watched: Watched, timeout: float) -> None:
        """Wait (reading only) until the txg that was open when the last byte came has committed in
        each pool, then take the closing sample."""
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
            time.sleep(0.2)
        else:
            log.warning("the last txg did not commit within %.0f s: disk bytes and space may miss its writes", timeout)
        watched.settle_seconds = time.monotonic() - started
        watched.samples.append(self.sample())


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


def _bracket(samples: list[Sample], start: float, end: float) -> tuple[Sample, Sample]:
    before = [s for s in samples if s.t <= start] or samples[:1]
    after = [s for s in samples if s.t >= end] or samples[-1:]
    return before[-1], after[0]


def figures(watched: Watched, target: Target, disks: list[str], space_before: dict[str, str],
            space_after: dict[str, str], dirty_data_max: int | None) -> ResultFigures:
    """The store's figures of one watched dataset (see the module docstring for each)."""
    start, end = target.window()
    seconds = max(end - start, 1e-6)
    moved = target.moved()
    total = moved["nwritten"] + moved["nread"]
    cpu_from, cpu_to = _bracket(watched.samples, start, end)
    cpu = probes.deltas(cpu_from.snapshot, cpu_to.snapshot)
    closing = probes.deltas(cpu_from.snapshot, watched.samples[-1].snapshot)
    within = [s for s in watched.samples if start - watched_step(watched) <= s.t <= end + watched_step(watched)]
    peak = max((s.anon_bytes for s in within if s.anon_bytes is not None), default=None)
    txg_rows = {r.txg: r for s in watched.samples for r in s.txgs.get(target.pool, [])}
    open_at_start = max((r.txg for r in cpu_from.txgs.get(target.pool, [])), default=None)
    synced = [r for n, r in txg_rows.items() if r.committed and (open_at_start is None or n >= open_at_start)]
    used = _delta(space_before, space_after, "used")
    logical = _delta(space_before, space_after, "logicalused")
    disk_bytes = {d: v for d, v in closing.disks.items() if d in disks}
    details = {
        "source": "watch", "written_bytes": moved["nwritten"], "read_bytes": moved["nread"],
        "writes": moved["writes"], "reads": moved["reads"],
        "window": [round(watched.wall(start), 3), round(watched.wall(end), 3)],
        "first_landing": round(watched.wall(target.first_landing()), 3),
        "first_landing_bytes": target.first_landing_bytes(),
        "step_seconds": watched_step(watched), "stopped_by": watched.stopped_by,
        "peak_dirty_bytes": peak, "dirty_data_max": dirty_data_max,
        "txgs_synced": len(synced), "txg_sync_seconds_max": max((r.stime / 1e9 for r in synced), default=None),
        "pool_read_bytes": sum(v["read_bytes"] for v in disk_bytes.values()),
        "pool_written_bytes": sum(v["written_bytes"] for v in disk_bytes.values()),
        "compression": "growth of logicalused / growth of used (zfs get -p, before and after the last txg)",
    }
    return ResultFigures.of({
        "bytes": total, "duration_seconds": seconds, "throughput_bytes_per_second": total / seconds,
        "iops": (moved["writes"] + moved["reads"]) / seconds,
        "compressratio": logical / used if used and logical and used > 0 else None,
        "used_bytes": used, "logicalused_bytes": logical, "sync_seconds": watched.settle_seconds,
        "disks": disk_bytes, "dmu_tx": closing.dmu_tx, "details": details,
        **{k: v for k, v in cpu.figures().items() if k not in ("disks", "dmu_tx")}})


def watched_step(watched: Watched) -> float:
    times = [s.t for s in watched.samples]
    return min((b - a for a, b in zip(times, times[1:])), default=1.0)


def _delta(before: dict[str, str], after: dict[str, str], name: str) -> int | None:
    try:
        return int(after[name]) - int(before[name])
    except (KeyError, ValueError):
        return None
