"""Series of a generated life on a continuous time axis, written as promtool `input_series` values.

A series is a list of `Piece`s: present on [start, end) with value `value + slope * (t - start)`
(a counter is pieces of slopes; a gauge pieces of slope 0). Rendering puts it on the sample grid of
its test group (every `interval` seconds from 0) and writes promtool's expanding notation: `vxN`
(N+1 equal samples), `a+bxN` / `a-bxN` (linear), `_xN` (N missing), `stale` (a staleness marker:
Prometheus writes one when a series it scraped a moment ago is gone from a scrape that worked, or
when the scrape failed). Where a series is absent while its target was being scraped, the first
grid point of the gap is `stale`; where the target was not scraped at all (the NAS off, its
Prometheus with it), the gap is plain missing samples and the last sample lives on for the 5
minutes of Prometheus's lookback, as it would.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple


class Piece(NamedTuple):   # a tuple: a life holds hundreds of thousands, made ten times faster than a frozen dataclass
    start: float
    end: float
    value: float
    slope: float = 0.0

    def at(self, t: float) -> float:
        return self.value + self.slope * (t - self.start)


Intervals = list[tuple[float, float]]   # sorted, disjoint [start, end) spans


def clip(intervals: Iterable[tuple[float, float]], start: float, end: float) -> Intervals:
    return [(max(a, start), min(b, end)) for a, b in intervals if min(b, end) > max(a, start)]


def restrict(series: Series, spans: Intervals) -> Series:
    """`series` kept only within `spans` (sorted and disjoint), piece by piece in its own order."""
    out = Series(series.name, series.labels)
    ends = [b for _, b in spans]
    for piece in series.pieces:
        n = bisect_right(ends, piece.start)
        while n < len(spans) and spans[n][0] < piece.end:
            a, b = max(spans[n][0], piece.start), min(spans[n][1], piece.end)
            if b > a:
                out.pieces.append(Piece(a, b, piece.value + piece.slope * (a - piece.start), piece.slope))
            n += 1
    return out


def subtract(intervals: Intervals, holes: Intervals) -> Intervals:
    """`intervals` without `holes` (both sorted and disjoint)."""
    out = []
    for a, b in intervals:
        pieces = [(a, b)]
        for h0, h1 in holes:
            nxt = []
            for p0, p1 in pieces:
                if h1 <= p0 or h0 >= p1:
                    nxt.append((p0, p1))
                    continue
                if h0 > p0:
                    nxt.append((p0, h0))
                if h1 < p1:
                    nxt.append((h1, p1))
            pieces = nxt
        out.extend(pieces)
    return out


def union(intervals: Iterable[tuple[float, float]]) -> Intervals:
    out: Intervals = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@dataclass
class Series:
    name: str
    labels: dict[str, str]
    pieces: list[Piece] = field(default_factory=list)
    integer: bool = False    # a count (txgs, events): every sample a whole number, as the exporter serves it

    def add(self, start: float, end: float, value: float, slope: float = 0.0) -> Series:
        if end > start:
            self.pieces.append(Piece(start, end, value, slope))
        return self


def gauge(name: str, labels: dict[str, str], steps: Sequence[tuple[float, float | None]], end: float) -> Series:
    """A gauge from (time, value) steps, each value held until the next step; None: absent."""
    series = Series(name, labels)
    for (t, value), (t_next, _) in zip(steps, [*steps[1:], (end, None)]):
        if value is not None:
            series.add(t, min(t_next, end), value)
    return series


def counter(name: str, labels: dict[str, str], rates: Sequence[tuple[float, float]], end: float,
            resets: Sequence[tuple[float, float]] = (), start: float = 0.0, base: float = 0.0) -> Series:
    """A counter from (time, rate per second) steps; `resets` (time, value it starts again from)."""
    series = Series(name, labels)
    marks = sorted({start, end, *(t for t, _ in rates if start < t < end), *(t for t, _ in resets if start < t < end)})
    reset_at = dict(resets)
    value = base
    ordered = sorted(rates, key=lambda r: r[0])   # stable: of two rates at one time the later holds
    rate, n = 0.0, 0
    for t0, t1 in zip(marks, marks[1:]):
        if t0 in reset_at and t0 != start:
            value = reset_at[t0]
        while n < len(ordered) and ordered[n][0] <= t0:
            rate = ordered[n][1]
            n += 1
        series.add(t0, t1, value, rate)
        value += rate * (t1 - t0)
    return series


def number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".15g")


class Grid:
    """The sample grid of one test group: points k * interval, k = 0 .. horizon / interval."""

    def __init__(self, interval: int, horizon: int):
        self.interval = interval
        self.points = horizon // interval + 1

    def first_at_or_after(self, t: float) -> int:
        return max(0, math.ceil(t / self.interval - 1e-9))

    def indices(self, intervals: Intervals) -> list[tuple[int, int]]:
        """Grid index ranges [k0, k1) whose points fall in the intervals."""
        out = []
        for a, b in intervals:
            k0, k1 = self.first_at_or_after(a), min(self.points, self.first_at_or_after(b))
            if k1 > k0:
                out.append((k0, k1))
        return out


def render(series: Series, grid: Grid, present: Intervals, scraped: Intervals,
           missed: frozenset[int] = frozenset()) -> str | None:
    """The promtool values of `series` on `grid`, kept only where its target `present`s it (the
    exporter answered); `scraped` (a superset) is where a missing sample means a staleness marker.
    `missed`: grid points the target's scrape failed (a staleness marker for every series of it)."""
    runs: list[tuple[int, int, Piece]] = []
    for piece in series.pieces:
        for k0, k1 in grid.indices(clip(present, piece.start, piece.end)):
            runs.append((k0, k1, piece))
    if not runs:
        return None
    runs.sort(key=lambda r: r[0])
    scraped_points = grid.indices(scraped)
    tokens: list[str] = []
    k = 0

    def gap(until: int) -> None:
        nonlocal k
        if until <= k:
            return
        if _in(scraped_points, k):
            tokens.append("stale")
            k += 1
        if until > k:
            tokens.append(f"_x{until - k}")
            k = until

    for k0, k1, piece in runs:
        if k0 < k:
            k0 = k
        if k1 <= k0:
            continue
        gap(k0)
        cuts = sorted(p for p in missed if k0 <= p < k1)
        start = k0
        for cut in [*cuts, k1]:
            if cut > start:
                first = piece.at(start * grid.interval)
                step = piece.slope * grid.interval
                count = cut - start - 1
                if series.integer and step != int(step):   # whole counts that do not grow evenly: one by one
                    tokens.extend(number(math.floor(piece.at((start + i) * grid.interval) + 1e-9))
                                  for i in range(count + 1))
                elif step == 0 or count == 0:
                    first = math.floor(first + 1e-9) if series.integer else first
                    tokens.append(f"{number(first)}x{count}" if count else number(first))
                else:
                    first = math.floor(first + 1e-9) if series.integer else first
                    sign = "+" if step > 0 else "-"
                    tokens.append(f"{number(first)}{sign}{number(abs(step))}x{count}")
            if cut < k1:
                tokens.append("stale")
            start = cut + 1
        k = k1
    if k < grid.points and _in(scraped_points, k):   # gone while scraped: a staleness marker ends it
        tokens.append("stale")
    return " ".join(tokens)


def _in(ranges: list[tuple[int, int]], k: int) -> bool:
    return any(a <= k < b for a, b in ranges)
