"""The copy job: copy a user's own corpus directory (their FITS files, ISOs) into the child, timed.

Owns walking the corpus and writing real files; it never reads outside the corpus nor writes
outside the destination, which must not exist yet. Symlinks are recreated, not followed. A racing
copy (`run --until-decided`) copies the corpus window by window (whole records: each window is
written at its own offset of its file) in stratified order (sampling.stratified_windows: every
prefix holds each stratum's share of the bytes, as `predict` samples), and ends at the sustained
rate (`SustainedRate`): once the pool's dirty data buffer has filled, a writer goes at the pool's
pace, so the rate measured from then on is the copy's sustained rate; the rest of the copy adds
time, not knowledge.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..statistics.sampling import stratified_windows

CHUNK = 1 << 20


@dataclass(frozen=True)
class CopyResult:
    files: int
    bytes: int
    seconds: float
    sustained: float | None = None      # bytes/s once the dirty data buffer was full (a racing copy)


class SustainedRate:
    """Watches a copy's bytes over time: after `buffer` bytes (zfs_dirty_data_max: the buffer is full,
    the writer goes at the pool's pace) it measures; done once it has measured at least another
    buffer's worth (several txgs: their sawtooth averages out) over `min_seconds` or more, and the
    two halves of that window agree within `tolerance`. (A window of zfs_txg_timeout, 5 s, at least
    was tried in the e2e guest: its copies were three to four times as long, and their rates still
    varied 18-36 % from run to run, the host's load rather than the pool's sawtooth.)"""

    def __init__(self, buffer: int, min_seconds: float = 1.0, tolerance: float = 0.1):
        self.buffer, self.min_seconds, self.tolerance = buffer, min_seconds, tolerance
        self.points: list[tuple[float, int]] = []
        self.rate: float | None = None

    def observe(self, copied: int, now: float) -> bool:
        if copied < self.buffer:
            return False
        self.points.append((now, copied))
        (t0, b0), (t1, b1) = self.points[0], self.points[-1]
        if t1 - t0 < self.min_seconds or b1 - b0 < self.buffer:
            return False
        middle = next(p for p in self.points if p[0] >= t0 + (t1 - t0) / 2)
        if middle[0] in (t0, t1):
            return False
        first, second = (middle[1] - b0) / (middle[0] - t0), (b1 - middle[1]) / (t1 - middle[0])
        if abs(first - second) > self.tolerance * max(first, second):
            return False
        self.rate = (b1 - b0) / (t1 - t0)
        return True


def corpus_stats(corpus: str | Path) -> tuple[int, int]:
    """(files, bytes) of a corpus; symlinks are not counted (the copy recreates them)."""
    files = total = 0
    for root, _dirs, names in os.walk(corpus):
        for name in names:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                files += 1
                total += os.path.getsize(path)
    return files, total


def corpus_bytes(corpus: str | Path) -> int:
    return corpus_stats(corpus)[1]


def copy_corpus(corpus: str | Path, dest: str | Path, stop: threading.Event | None = None,
                limit: int | None = None) -> CopyResult:
    """Copy whole files in walk order until `limit` bytes (None: all) have been copied."""
    corpus, dest = Path(corpus), Path(dest)
    if not corpus.is_dir():
        raise FileNotFoundError(f"corpus {corpus} is not a directory")
    dest.mkdir(parents=False)
    return _copy_tree(corpus, dest, stop, limit)


def copy_sampled(corpus: str | Path, dest: str | Path, stop: threading.Event | None = None,
                 limit: int | None = None, until: SustainedRate | None = None, seed: int = 0,
                 window: int = CHUNK) -> CopyResult:
    """Copy the corpus's windows of `window` bytes in stratified order, each to its own offset of its
    file (symlinks and empty directories left out), until `limit` bytes, or until `until` has the
    sustained rate. Copied to the end, every file is whole. `window` should be a multiple of the
    recordsize, so that every write is whole records (the file's tail aside), as a full copy's are;
    `files` counts the files written to."""
    corpus, dest = Path(corpus), Path(dest)
    if not corpus.is_dir():
        raise FileNotFoundError(f"corpus {corpus} is not a directory")
    dest.mkdir(parents=False)
    touched: set[str] = set()
    copied = 0
    started = time.monotonic()
    for piece in stratified_windows(corpus, seed, window):
        if (limit is not None and copied >= limit) or (until is not None and until.rate is not None):
            break
        if stop is not None and stop.is_set():
            raise InterruptedError("copy stopped")
        target = dest / piece.file.relative
        if piece.file.relative not in touched:
            target.parent.mkdir(parents=True, exist_ok=True)
        with open(piece.file.path, "rb") as src:
            src.seek(piece.offset)
            data = src.read(piece.length)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            done = 0
            while done < len(data):
                done += os.pwrite(fd, memoryview(data)[done:], piece.offset + done)
        finally:
            os.close(fd)
        touched.add(piece.file.relative)
        copied += len(data)
        if until is not None:
            until.observe(copied, time.monotonic())
    return CopyResult(len(touched), copied, time.monotonic() - started, until.rate if until else None)


def _copy_tree(corpus: Path, dest: Path, stop: threading.Event | None, limit: int | None) -> CopyResult:
    files = copied = 0
    started = time.monotonic()
    for root, dirs, names in os.walk(corpus):
        dirs.sort()
        names.sort()
        rel = Path(root).relative_to(corpus)
        for name in dirs:
            source = Path(root) / name
            if source.is_symlink():
                os.symlink(os.readlink(source), dest / rel / name)
            else:
                (dest / rel / name).mkdir()
        for name in names:
            if limit is not None and copied >= limit:
                break
            if stop is not None and stop.is_set():
                raise InterruptedError("copy stopped")
            source, target = Path(root) / name, dest / rel / name
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
                continue
            with open(source, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
            files += 1
            copied += target.stat().st_size
    return CopyResult(files, copied, time.monotonic() - started)
