"""Sampling a corpus without holding it: strata of files by size and type, windows of whole records,
and a replayable random key for each window.

Owns the walk of a corpus (regular files, directories with their entry names, symlinks; a hard
link's data once; unreadable parts counted, never fatal), what a file's stratum is (its size class,
a power of two, and its type, the lower-case extension; at most MAX_TYPES types, the rest pooled),
how a file is cut into windows (one window per `window` bytes, aligned, so that every record of
every recordsize up to `window` lies in exactly one), the key that decides whether a window is
sampled (a seeded hash of its path and index: the same corpus and seed always give the same
sample), and the stratified sampler itself: a window is sampled when its key is below the
fraction, and each stratum also keeps its `minimum` lowest keys, so that no stratum is left
unsampled (conditionally on its size, each stratum's sample is a simple random sample).
`predict` estimates from it; the racing copy copies the windows in `stratified_windows`' order.
Reads names and sizes, never file contents; imports no compressor.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import random
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_TYPES = 64
OTHER_TYPE = "*"
NO_TYPE = "-"


@dataclass(frozen=True)
class CorpusFile:
    path: str            # as opened
    relative: str        # below the corpus, the key's input
    size: int


@dataclass(frozen=True)
class Directory:
    path: str
    names: list[bytes]   # its entries' names (the directory's ZAP holds them)


@dataclass
class Walk:
    """What the walk met besides the files it yields."""
    directories: int = 0
    symlinks: int = 0
    others: int = 0              # sockets, devices, fifos: a dnode each, no data
    hard_links: int = 0          # names of a file already counted
    errors: list[str] = field(default_factory=list)

    def error(self, text: str) -> None:
        if len(self.errors) < 20:     # the first ones say enough; the count says the rest
            self.errors.append(text)
        self.unreadable += 1

    unreadable: int = 0


def walk(corpus: str | Path, walked: Walk, on_directory: Callable[[Directory], None] | None = None) -> Iterator[CorpusFile]:
    """Every regular file below `corpus` (a hard-linked file once), depth first in name order;
    each directory's names go to `on_directory`. Symlinks are not followed."""
    root = str(corpus)
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            walked.error(f"{directory}: {exc.strerror or exc}")
            continue
        walked.directories += 1
        if on_directory is not None:
            on_directory(Directory(directory, [os.fsencode(e.name) for e in entries]))
        subdirs = []
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                walked.error(f"{entry.path}: {exc.strerror or exc}")
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(entry.path)
            elif stat.S_ISLNK(st.st_mode):
                walked.symlinks += 1
            elif not stat.S_ISREG(st.st_mode):
                walked.others += 1
            elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen:
                walked.hard_links += 1
            else:
                if st.st_nlink > 1:
                    seen.add((st.st_dev, st.st_ino))
                yield CorpusFile(entry.path, os.path.relpath(entry.path, root), st.st_size)
        stack.extend(reversed(subdirs))


def size_class(size: int) -> int:
    """log2 of the power of two a size rounds up to, 9 (512 bytes) at least: the size strata."""
    return max(9, (size - 1).bit_length()) if size > 0 else 0


class Types:
    """The type of a file is its lower-case extension; past MAX_TYPES distinct ones, the rest are pooled."""

    def __init__(self) -> None:
        self.known: set[str] = set()

    def of(self, name: str) -> str:
        base = os.path.basename(name)
        stem, dot, ext = base.rpartition(".")
        ext = ext.lower()
        if not dot or not stem or not ext.isalnum() or len(ext) > 10:
            return NO_TYPE
        if ext not in self.known:
            if len(self.known) >= MAX_TYPES:
                return OTHER_TYPE
            self.known.add(ext)
        return ext


def windows(size: int, window: int) -> int:
    return -(-size // window)


def window_keys(relative: str, count: int, seed: int) -> Iterator[float]:
    """The sampling keys of a file's `count` windows: uniform in [0, 1), replayable from the seed."""
    digest = hashlib.blake2b(f"{seed}\0{relative}".encode("utf-8", "surrogateescape"), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "little"))
    for _ in range(count):
        yield rng.random()


@dataclass(frozen=True)
class Window:
    """One sampled unit: bytes [index * window, (index + 1) * window) of a file."""
    path: str
    size: int            # the file's size
    index: int
    stratum: tuple[int, str]


class StratifiedSampler:
    """Decides per window, as the walk goes: `take` now when its key is below the fraction, and keeps
    each stratum's `minimum` lowest keys to `top_up` at the end the strata that got fewer. Memory:
    `minimum` windows per stratum, whatever the corpus size."""

    def __init__(self, fraction: float, minimum: int = 3):
        self.fraction, self.minimum = fraction, minimum
        self.population: dict[tuple[int, str], int] = {}
        self.taken: dict[tuple[int, str], int] = {}
        self._lowest: dict[tuple[int, str], list[tuple[float, int, Window]]] = {}
        self._order = 0

    def offer(self, window: Window, key: float) -> bool:
        """Count the window in its stratum; True when it is sampled now."""
        stratum = window.stratum
        self.population[stratum] = self.population.get(stratum, 0) + 1
        lowest = self._lowest.setdefault(stratum, [])
        self._order += 1
        entry = (-key, self._order, window)
        if len(lowest) < self.minimum:
            heapq.heappush(lowest, entry)
        elif -lowest[0][0] > key:
            heapq.heapreplace(lowest, entry)
        if key < self.fraction:
            self.taken[stratum] = self.taken.get(stratum, 0) + 1
            return True
        return False

    def top_up(self) -> list[Window]:
        """The windows that bring every stratum to min(minimum, its size): its lowest keys not taken."""
        out = []
        for stratum, lowest in self._lowest.items():
            if self.taken.get(stratum, 0) >= self.minimum:
                continue
            for neg_key, _order, window in sorted(lowest, reverse=True):
                if -neg_key >= self.fraction:
                    out.append(window)
                    self.taken[stratum] = self.taken.get(stratum, 0) + 1
        return out


@dataclass(frozen=True)
class Piece:
    """Bytes [offset, offset + length) of a corpus file: one window (length 0: an empty file)."""
    file: CorpusFile
    offset: int
    length: int


def stratified_windows(corpus: str | Path, seed: int = 0, window: int = 1 << 20) -> list[Piece]:
    """The corpus cut in windows of `window` bytes (whole records of every recordsize up to it, the
    tail of a file its last one), in an order whose every prefix holds the same share of every
    stratum's bytes as the whole corpus: each stratum's windows ordered by their keys, then
    interleaved by their place within their stratum. A prefix of whole files would not: where a
    few files are large against the prefix (a sparse image of 12 MiB in the first 8 MiB copied, or
    none), one file's key decides a type's share. Holds the list (a few dozen bytes per window)."""
    types = Types()
    strata: dict[tuple[int, str], list[tuple[float, Piece]]] = {}
    for f in walk(corpus, Walk()):
        stratum = strata.setdefault((size_class(f.size), types.of(f.relative)), [])
        count = max(1, windows(f.size, window))
        for index, key in enumerate(window_keys(f.relative, count, seed)):
            offset = index * window
            stratum.append((key, Piece(f, offset, max(0, min(window, f.size - offset)))))
    placed = []
    for members in strata.values():
        members.sort(key=lambda m: m[0])
        n = len(members)
        placed += [((i + key) / n, p.file.relative, p.offset, p) for i, (key, p) in enumerate(members)]
    placed.sort(key=lambda p: (p[0], p[1], p[2]))
    return [p for _place, _name, _offset, p in placed]
