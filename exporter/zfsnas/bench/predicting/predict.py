"""`zfsnas-bench predict`: the on-disk size of a corpus under each compression, recordsize and ashift,
predicted from a sample of it, without writing a byte to any pool.

Owns the estimate. The walk (sampling.py) counts every file and directory, which gives what is
exact without reading: the metadata (dnodes, indirect blocks, directories: zfsalloc.py) and each
stratum's allocation uncompressed. The sampled windows are read (in worker processes, `jobs` at a
time, a bounded number of windows in flight) and each of their records is stored as ZFS would
store it (zfsalloc.RecordSizer). Per stratum the data's on-disk size is the ratio of the sample's
allocation to its uncompressed allocation times the stratum's whole uncompressed allocation (a
ratio estimator: compression off comes out exact); the sampling error is the estimator's 95 %
interval. Memory stays bounded whatever the corpus: the walk keeps sums per stratum, and a few
windows per stratum for the top-up. Renders text and CSV; stores nothing (the command does).
"""

from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import io
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..statistics.intervals import t_quantile
from ..statistics.sampling import Directory, StratifiedSampler, Types, Walk, Window, size_class, walk, window_keys, windows
from .zfsalloc import (
    EMPTY_FILESYSTEM_OBJECTS,
    Compression,
    Lz4Used,
    Metadata,
    RecordSizer,
    Rules,
    Vdev,
    block_count,
    block_size,
    check_compressors,
    directory_psize,
    dnode_blocks,
    empty_filesystem,
    file_indirects,
    lz4_used,
    metadata_block,
    size_name,
    use_lz4,
)

GIB = 1 << 30
CSV_COLUMNS = ("compression", "recordsize", "ashift", "logical_bytes", "predicted_bytes", "ratio", "error_bytes",
               "error_percent", "data_bytes", "metadata_bytes", "compressratio", "cpu_seconds_per_gib",
               "sampled_bytes")
BATCH_BYTES = 8 << 20
BATCH_WINDOWS = 256
CONFIDENCE = 0.95

Combination = tuple[str, int, int]          # (compression name, recordsize, ashift)
Stratum = tuple[int, str]                   # (size class, type)


@dataclass(frozen=True)
class PredictOptions:
    corpus: str
    compressions: tuple[Compression, ...]
    recordsizes: tuple[int, ...]
    ashifts: tuple[int, ...] = (12,)
    fraction: float = 0.02
    rules: Rules = Rules()
    vdev: Vdev = Vdev()
    seed: int = 0
    jobs: int = 1
    minimum: int = 4            # windows per stratum at least (all of a smaller stratum)
    lz4_exact: bool | None = None   # OpenZFS's LZ4 or the package's: decided once by predict(), for every worker

    @property
    def window(self) -> int:
        """The sampled unit: the largest recordsize, so every record of every recordsize lies in one."""
        return max(self.recordsizes)

    def combinations(self) -> list[Combination]:
        return [(c.name, r, a) for c in self.compressions for r in self.recordsizes for a in self.ashifts]


# --- the workers: read a window, store its records ---------------------------------------------

@dataclass
class WindowFigures:
    """One sampled window: per (recordsize, ashift) its allocation uncompressed `x`; per combination
    (allocated, psize, lsize) as stored."""
    stratum: Stratum
    length: int
    x: dict[tuple[int, int], int]
    y: dict[Combination, tuple[int, int, int]]


@dataclass
class BatchFigures:
    windows: list[WindowFigures] = field(default_factory=list)
    seconds: dict[tuple[str, int], float] = field(default_factory=dict)     # (compression, recordsize) -> CPU s
    compressed: dict[tuple[str, int], int] = field(default_factory=dict)    # bytes handed to that compressor
    errors: list[str] = field(default_factory=list)

    def add(self, other: BatchFigures) -> None:
        self.windows += other.windows
        self.errors += other.errors[:max(0, 20 - len(self.errors))]    # the first say enough
        for key, value in other.seconds.items():
            self.seconds[key] = self.seconds.get(key, 0.0) + value
        for key, count in other.compressed.items():
            self.compressed[key] = self.compressed.get(key, 0) + count


def records(data: bytes, file_size: int, recordsize: int) -> list[tuple[bytes, int]]:
    """(bytes, logical size) of each record of a window: a file of at most one recordsize is one
    block, else recordsize slices (the file's last one is zero-filled by the sizer)."""
    if file_size <= recordsize:
        return [(data, block_size(file_size, recordsize))]
    return [(data[start:start + recordsize], recordsize) for start in range(0, len(data), recordsize)]


class WindowMeasurer:
    """Stores every record of a window under every combination; lives in a worker process."""

    def __init__(self, opts: PredictOptions):
        self.opts = opts
        self.sizer = RecordSizer(opts.rules, opts.vdev, time.process_time)

    def read(self, window: Window) -> bytes:
        expected = min(self.opts.window, window.size - window.index * self.opts.window)
        with open(window.path, "rb") as f:
            data = os.pread(f.fileno(), expected, window.index * self.opts.window)
        if len(data) != expected:
            raise OSError(f"{window.path}: changed while it was read")
        return data

    def batch(self, batch: list[Window]) -> BatchFigures:
        out = BatchFigures()
        for window in batch:
            try:
                data = self.read(window)
            except OSError as exc:
                out.errors.append(str(exc) if not exc.strerror else f"{window.path}: {exc.strerror}")
                continue
            out.windows.append(self.window(window, data, out))
        return out

    def window(self, window: Window, data: bytes, out: BatchFigures) -> WindowFigures:
        opts, vdev, ashifts = self.opts, self.opts.vdev, list(self.opts.ashifts)
        figures = WindowFigures(window.stratum, len(data), {}, {})
        for rs in opts.recordsizes:
            blocks = records(data, window.size, rs)
            for a in ashifts:
                figures.x[(rs, a)] = sum(vdev.charged(vdev.asize(lsize, a), a) for _b, lsize in blocks)
            for compression in opts.compressions:
                totals = {a: [0, 0, 0] for a in ashifts}
                for block, lsize in blocks:
                    for a, stored in self.sizer.store(block, lsize, compression, ashifts).items():
                        totals[a][0] += stored.allocated
                        totals[a][1] += stored.psize
                        totals[a][2] += stored.lsize
                for a, (alloc, psize, lsize) in totals.items():
                    figures.y[(compression.name, rs, a)] = (alloc, psize, lsize)
                if compression.on:
                    key = (compression.name, rs)
                    out.compressed[key] = out.compressed.get(key, 0) + sum(lsize for _b, lsize in blocks)
                    out.seconds[key] = out.seconds.get(key, 0.0) + self.sizer.seconds.pop(compression.name, 0.0)
        return figures


_MEASURER: WindowMeasurer | None = None


def _worker_start(opts: PredictOptions) -> None:
    global _MEASURER
    if opts.lz4_exact is not None:      # the parent's LZ4, whatever this process could build
        use_lz4(opts.lz4_exact)
    _MEASURER = WindowMeasurer(opts)


def _worker_batch(batch: list[Window]) -> BatchFigures:
    assert _MEASURER is not None
    return _MEASURER.batch(batch)


# --- what the walk knows exactly ---------------------------------------------------------------

@dataclass
class StratumSums:
    """A stratum's population (windows, uncompressed allocation per (recordsize, ashift)) and its
    sample's sums per combination: n, x, y, x^2, y^2, xy (y the allocation), psize, lsize."""
    windows: int = 0
    bytes: int = 0
    x_total: dict[tuple[int, int], int] = field(default_factory=dict)
    sample: dict[Combination, list[float]] = field(default_factory=dict)
    sampled: int = 0
    sampled_bytes: int = 0

    def add(self, w: WindowFigures) -> None:
        self.sampled += 1
        self.sampled_bytes += w.length
        for (name, rs, a), (alloc, psize, lsize) in w.y.items():
            x = auxiliary(name, w.x[(rs, a)], w.length)
            s = self.sample.setdefault((name, rs, a), [0.0] * 8)
            for i, v in enumerate((1, x, alloc, x * x, alloc * alloc, x * alloc, psize, lsize)):
                s[i] += v

    def population(self, key: Combination) -> int:
        name, rs, a = key
        return auxiliary(name, self.x_total.get((rs, a), 0), self.bytes)


def auxiliary(compression: str, uncompressed: int, length: int) -> int:
    """The ratio estimator's auxiliary figure of a window: its allocation uncompressed with compression
    off (the estimate is then exact), its bytes with compression on (a file's zero-filled last
    record costs next to nothing compressed, so bytes are what the allocation follows)."""
    return uncompressed if compression == "off" else length


class CorpusAccount:
    """Everything counted while walking: files, bytes, the metadata of every combination, strata."""

    def __init__(self, opts: PredictOptions):
        self.opts = opts
        self.files = self.bytes = 0
        self.metadata: dict[tuple[int, int], Metadata] = {(r, a): Metadata() for r in opts.recordsizes
                                                          for a in opts.ashifts}
        self.directory_metadata: dict[int, Metadata] = {a: Metadata() for a in opts.ashifts}
        self.strata: dict[Stratum, StratumSums] = {}
        self.types = Types()

    def directory(self, d: Directory) -> None:
        for a in self.opts.ashifts:
            psize, _lsize = directory_psize(d.names, a, self.opts.rules)
            self.directory_metadata[a] += metadata_block(psize, a, self.opts.vdev)

    def file(self, relative: str, size: int) -> Stratum:
        self.files += 1
        self.bytes += size
        stratum = (size_class(size), self.types.of(relative))
        sums = self.strata.setdefault(stratum, StratumSums())
        sums.bytes += size
        vdev = self.opts.vdev
        for rs in self.opts.recordsizes:
            blocks = block_count(size, rs)
            lsize = block_size(size, rs)
            for a in self.opts.ashifts:
                key = (rs, a)
                sums.x_total[key] = sums.x_total.get(key, 0) + blocks * vdev.charged(vdev.asize(lsize, a), a)
                if blocks > 1:
                    self.metadata[key] += file_indirects(blocks, a, self.opts.rules, vdev)
        return stratum


# --- the estimate ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Estimate:
    compression: str
    recordsize: int
    ashift: int
    logical_bytes: int          # the corpus's bytes (file sizes)
    predicted_bytes: int        # what `zfs get used` would say: data and metadata, allocated
    error_bytes: int            # half-width of the 95 % sampling interval (0: exact)
    data_bytes: int
    metadata_bytes: int
    compressratio: float        # as `zfs get compressratio` would say (logical over physical block sizes)
    cpu_seconds_per_gib: float | None   # compressor CPU time per GiB handed to it (None: off)
    sampled_bytes: int

    @property
    def ratio(self) -> float:
        return self.logical_bytes / self.predicted_bytes if self.predicted_bytes else math.inf

    @property
    def error_percent(self) -> float:
        return 100 * self.error_bytes / self.predicted_bytes if self.predicted_bytes else 0.0


@dataclass(frozen=True)
class Prediction:
    opts: PredictOptions
    files: int
    directories: int
    logical_bytes: int
    windows: int
    sampled_windows: int
    sampled_bytes: int
    strata: int
    seconds: float
    estimates: list[Estimate]
    walk: Walk
    errors: list[str]
    lz4: Lz4Used

    def estimate(self, compression: str, recordsize: int, ashift: int) -> Estimate:
        return next(e for e in self.estimates if (e.compression, e.recordsize, e.ashift) ==
                    (compression, recordsize, ashift))


def _stratum_data(sums: StratumSums, key: Combination) -> tuple[float, float, float, float]:
    """(allocation, its variance, psize, lsize) of a stratum's data, by the ratio estimator."""
    x_total = sums.population(key)
    s = sums.sample.get(key)
    if not x_total:
        return 0.0, 0.0, 0.0, 0.0
    if s is None or s[1] == 0:       # nothing of it could be read: unknown, taken as uncompressed
        _name, rs, a = key
        whole = float(sums.x_total.get((rs, a), 0))
        return whole, (whole / 2) ** 2, whole, whole
    n, sx, sy, sxx, syy, sxy, sp, sl = s
    r = sy / sx
    big_n = sums.windows
    if n >= big_n:
        variance = 0.0
    elif n < 2:
        variance = (r * x_total / 2) ** 2
    else:
        s2 = max(0.0, (syy - 2 * r * sxy + r * r * sxx) / (n - 1))
        variance = big_n * big_n * (1 - n / big_n) * s2 / n
    return r * x_total, variance, sp / sx * x_total, sl / sx * x_total


def estimates(opts: PredictOptions, account: CorpusAccount, measured: BatchFigures,
              objects: int) -> list[Estimate]:
    out = []
    for name, rs, a in opts.combinations():
        data = variance = psize = lsize = spread = 0.0
        for sums in account.strata.values():
            d, v, p, lz = _stratum_data(sums, (name, rs, a))
            data, variance, psize, lsize = data + d, variance + v, psize + p, lsize + lz
            spread += v * v / max(1, sums.sampled - 1)
        # Satterthwaite: the degrees of freedom of a sum of strata variances, each of few windows
        df = variance * variance / spread if spread else math.inf
        meta = account.metadata[(rs, a)] + account.directory_metadata[a] + dataset_dnodes(objects, a, opts)
        predicted = round(data) + meta.allocated
        error = t_quantile((1 + CONFIDENCE) / 2, max(1.0, df)) * math.sqrt(variance) if variance else 0.0
        seconds, handed = measured.seconds.get((name, rs)), measured.compressed.get((name, rs))
        physical = psize + meta.psize
        out.append(Estimate(name, rs, a, account.bytes, predicted, round(error), round(data), meta.allocated,
                            (lsize + meta.lsize) / physical if physical else 1.0,
                            seconds / handed * GIB if seconds is not None and handed else None,
                            sum(s.sampled_bytes for s in account.strata.values())))
    return out


def dataset_dnodes(objects: int, ashift: int, opts: PredictOptions) -> Metadata:
    """An empty filesystem's metadata and the dnode blocks of `objects` dnodes beyond its own."""
    base = dnode_blocks(EMPTY_FILESYSTEM_OBJECTS, ashift, opts.rules, opts.vdev)
    return empty_filesystem(ashift, opts.vdev) + dnode_blocks(objects, ashift, opts.rules, opts.vdev) - base


class _Pool:
    """Batches of windows measured in `jobs` worker processes (in this process for one job), at most
    two batches per worker in flight."""

    def __init__(self, opts: PredictOptions, sink: Callable[[BatchFigures], None]):
        self.opts, self.sink = opts, sink
        self.batch: list[Window] = []
        self.batch_bytes = 0
        self.pending: set[concurrent.futures.Future[BatchFigures]] = set()
        self.executor = concurrent.futures.ProcessPoolExecutor(opts.jobs, initializer=_worker_start,
                                                               initargs=(opts,)) if opts.jobs > 1 else None
        self.local = WindowMeasurer(opts) if self.executor is None else None

    def add(self, window: Window) -> None:
        self.batch.append(window)
        self.batch_bytes += min(self.opts.window, window.size - window.index * self.opts.window)
        if self.batch_bytes >= BATCH_BYTES or len(self.batch) >= BATCH_WINDOWS:
            self.flush()

    def flush(self) -> None:
        batch, self.batch, self.batch_bytes = self.batch, [], 0
        if not batch:
            return
        if self.local is not None:
            self.sink(self.local.batch(batch))
            return
        assert self.executor is not None
        while len(self.pending) >= 2 * self.opts.jobs:
            done, self.pending = concurrent.futures.wait(self.pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                self.sink(future.result())
        self.pending.add(self.executor.submit(_worker_batch, batch))

    def finish(self) -> None:
        self.flush()
        for future in concurrent.futures.as_completed(self.pending):
            self.sink(future.result())
        self.pending = set()
        if self.executor is not None:
            self.executor.shutdown()

    def abandon(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)


def predict(opts: PredictOptions) -> Prediction:
    """Walk the corpus, sample it, store the sample's records and estimate every combination."""
    check_compressors(list(opts.compressions))
    lz4 = lz4_used()
    opts = dataclasses.replace(opts, lz4_exact=lz4.exact)
    started = time.monotonic()
    account = CorpusAccount(opts)
    sampler = StratifiedSampler(opts.fraction, opts.minimum)
    measured = BatchFigures()

    def sink(figures: BatchFigures) -> None:
        measured.add(BatchFigures([], figures.seconds, figures.compressed, figures.errors))
        for w in figures.windows:
            account.strata[w.stratum].add(w)

    walked = Walk()
    pool = _Pool(opts, sink)
    try:
        for f in walk(opts.corpus, walked, account.directory):
            stratum = account.file(f.relative, f.size)
            count = windows(f.size, opts.window)
            for index, key in enumerate(window_keys(f.relative, count, opts.seed)):
                window = Window(f.path, f.size, index, stratum)
                if sampler.offer(window, key):
                    pool.add(window)
        for window in sampler.top_up():
            pool.add(window)
        pool.finish()
    except BaseException:
        pool.abandon()
        raise
    for stratum, count in sampler.population.items():
        account.strata[stratum].windows = count
    objects = EMPTY_FILESYSTEM_OBJECTS + account.files + walked.directories + walked.symlinks + walked.others
    found = estimates(opts, account, measured, objects)
    return Prediction(opts, account.files, walked.directories, account.bytes, sum(sampler.population.values()),
                      sum(s.sampled for s in account.strata.values()),
                      sum(s.sampled_bytes for s in account.strata.values()), len(account.strata),
                      time.monotonic() - started, found, walked, walked.errors + measured.errors[:20], lz4)


# --- what is printed ---------------------------------------------------------------------------

def human_bytes(n: float) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def headline(p: Prediction) -> str:
    o = p.opts
    share = f"{o.fraction * 100:g} %" if o.fraction < 1 else "everything"
    return (f"predict {o.corpus}: {p.files} files in {p.directories} directories, {human_bytes(p.logical_bytes)} "
            f"({p.strata} strata by size and type); sample {share}: {p.sampled_windows} of {p.windows} windows "
            f"of {size_name(o.window)}, {human_bytes(p.sampled_bytes)} read in {p.seconds:.1f} s; OpenZFS {o.rules.name} "
            f"rules, vdev {o.vdev.name}")


def render_text(p: Prediction) -> str:
    lines = [headline(p), ""]
    header = f"{'compression':<14}{'recordsize':>11}{'ashift':>7}{'on disk':>13}{'ratio':>8}{'± (95 %)':>12}" \
             f"{'metadata':>12}{'CPU s/GiB':>11}"
    lines.append(header)
    for e in p.estimates:
        error = "exact" if e.error_bytes == 0 else f"±{e.error_percent:.2f} %"
        cpu = "-" if e.cpu_seconds_per_gib is None else f"{e.cpu_seconds_per_gib:.2f}"
        lines.append(f"{e.compression:<14}{size_name(e.recordsize):>11}{e.ashift:>7}{human_bytes(e.predicted_bytes):>13}"
                     f"{e.ratio:>7.2f}x{error:>12}{human_bytes(e.metadata_bytes):>12}{cpu:>11}")
    lines += notes(p)
    return "\n".join(lines) + "\n"


def notes(p: Prediction) -> list[str]:
    out = ["", "on disk: what `zfs get used` of a new filesystem holding this corpus would say (data and metadata, "
           "copied file by file: zeros written are holes only with compression on); ratio: the corpus's bytes over "
           "that; CPU s/GiB: this machine's compressor time, a hint of the throughput cost"]
    if p.walk.unreadable or p.errors:
        out.append(f"warning: {p.walk.unreadable} unreadable path(s) left out, {len(p.errors)} error(s); first: "
                   f"{(p.errors or ['-'])[0]}")
    if p.walk.hard_links:
        out.append(f"note: {p.walk.hard_links} hard link(s) to files counted once")
    if note := lz4_note(p):
        out.append(f"note: {note}")
    return out


def lz4_note(p: Prediction) -> str:
    """The line that says lz4 was sized with the lz4 package's LZ4, when it was and it matters."""
    return p.lz4.note if any(c.uses_lz4 for c in p.opts.compressions) else ""


def render_csv(p: Prediction) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in p.estimates:
        writer.writerow([e.compression, size_name(e.recordsize), e.ashift, e.logical_bytes, e.predicted_bytes,
                         f"{e.ratio:.4f}", e.error_bytes, f"{e.error_percent:.3f}", e.data_bytes, e.metadata_bytes,
                         f"{e.compressratio:.4f}",
                         "" if e.cpu_seconds_per_gib is None else f"{e.cpu_seconds_per_gib:.3f}", e.sampled_bytes])
    return out.getvalue()


def parse_sample(text: str) -> float:
    """`2%`, `0.5%`, `100%` (or a fraction: 0.02) -> a fraction in (0, 1]."""
    value = text.strip()
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"--sample {text!r}: a percentage, e.g. 2% or 100%") from None
    if not 0 < fraction <= 1:
        raise ValueError(f"--sample {text!r}: above 0 % and at most 100 %")
    return fraction


def split(text: str) -> Iterable[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
