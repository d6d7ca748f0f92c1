"""What an experiment found, said first: at most five sentences over any matrix's figures.

From the summaries of one section (report.py) alone, whatever its shape:
- every axis (axes.py) is set against itself within each setting of the others and each workload:
  the configuration at its reference value (`off`, a whole disk, the smallest size, the first run)
  against each other value, for each measured figure (throughput per workload, on-disk size or the
  compression ratio, CPU user+system, the disks' bytes per byte moved);
- axes are ranked by how much they move each figure; an axis's sentence leads with its biggest
  effect (at the reference setting unless another setting's is clearly bigger), says whether it
  exceeds the spread of the repeats, names the setting of another axis (or the workloads) where the
  effect is clearly different (an interaction: volblocksize x NTFS cluster, RAM x workload), and
  what the axis leaves unchanged;
- the pick of `recommend` (a sentence handed in by the caller) closes the block.
Every number a sentence says is a cell of the evidence table (`Findings.table`), whose figures are
printed exactly as the configurations table prints them, so the findings never say what the tables
do not show. Owns the ranking, the sentences and that table; reads summaries, writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .axes import Axis, agreement, axis_value, magnitude, workload_text
from .report import GIB, SIZE_KEYS, Section, Stat, Summary
from .tables import Column, Table, figure_columns

MOST = 5                   # sentences
SHOWN_WORKLOADS = 2        # workloads an axis's sentence gives numbers for; the others are summed up


@dataclass(frozen=True)
class Measure:
    """A figure findings compare: its report.FIGURES name, what a sentence calls it, how a change is
    said (`relative` in %, `points` in percentage points), which way is better, the change below
    which it does not count, and the level below which it is not compared at all (the disks' writes
    during a read)."""
    figure: str
    noun: str
    kind: str
    better: int
    floor: float
    least: float = 0.0
    only_without: str = ""     # a fallback: used only when this other figure was not measured
    group: str = ""            # figures a sentence says together (the disks' writes and reads)

    def value(self, summary: Summary) -> Stat | None:
        stat = summary.get(self.figure)
        return None if stat is None else stat.scaled(100.0) if self.kind == "points" else stat


MEASURES = (
    Measure("throughput", "throughput", "relative", +1, 0.03),
    Measure("used", "on-disk size", "relative", -1, 0.005),
    Measure("ratio", "compression ratio", "relative", +1, 0.005, only_without="used"),
    Measure("cpu", "CPU", "points", -1, 1.0),
    Measure("disk_written", "disk writes per byte written", "relative", -1, 0.05, least=0.1, group="disks"),
    Measure("disk_read", "disk reads per byte read", "relative", -1, 0.05, least=0.1, group="disks"),
)
# Two effects differ "clearly" (an interaction, or a setting to lead with) when their sizes differ
# by this much: a factor for relative figures, points for CPU.
CLEARLY = {"relative": math.log(1.5), "points": 5.0}


@dataclass(frozen=True)
class Comparison:
    """One figure at two values of one axis, everything else equal: a row of the evidence table."""
    axis: str
    measure: Measure
    workload: str
    setting: tuple[tuple[str, str], ...]      # the other axes' values
    a_value: str
    b_value: str
    a: Summary
    b: Summary
    a_text: str                               # each figure as the configurations table prints it
    b_text: str
    noise: str                                # beyond | within | unknown

    @property
    def change(self) -> float:
        a, b = float(self.a_text), float(self.b_text)
        if self.measure.kind == "points":
            return b - a
        return b / a - 1 if a else math.inf

    @property
    def size(self) -> float:
        """How much it moves, comparable within a measure: |log(b/a)|, or points."""
        a, b = float(self.a_text), float(self.b_text)
        if self.measure.kind == "points":
            return abs(b - a)
        return abs(math.log(b / a)) if a > 0 and b > 0 else math.inf if a != b else 0.0

    @property
    def signed(self) -> float:
        a, b = float(self.a_text), float(self.b_text)
        if self.measure.kind == "points":
            return b - a
        return math.log(b / a) if a > 0 and b > 0 else 0.0

    @property
    def change_text(self) -> str:
        """`-93 %`, `+2.7 %`, `-0.04 %`, `+7.5 points`: the change b against a."""
        if self.measure.kind == "points":
            return f"{self.change:+.1f} points"
        pct = self.change * 100
        if abs(pct) < 0.005:
            return "0 %"
        return f"{pct:+.{0 if abs(pct) >= 10 else 1 if abs(pct) >= 0.1 else 2}f} %"

    @property
    def amount(self) -> str:
        """The change's number as a sentence says it (`-93`, `+7.5`)."""
        return self.change_text.split()[0]

    @property
    def factor_text(self) -> str:
        """The larger figure over the smaller (`14.8x`): how far a relative figure moves; `-` for CPU."""
        a, b = float(self.a_text), float(self.b_text)
        if self.measure.kind == "points" or min(a, b) <= 0:
            return "-"
        factor = max(a, b) / min(a, b)
        return f"{factor:.{1 if factor >= 10 else 2 if factor >= 1.01 else 3}f}x"

    @property
    def spread_text(self) -> str:
        """How far it moves, unsigned: `14.8x`, or `40.0 points`."""
        return f"{abs(self.change):.1f} points" if self.measure.kind == "points" else self.factor_text

    @property
    def counts(self) -> bool:
        return self.size >= (self.measure.floor if self.measure.kind == "points" else math.log1p(self.measure.floor))

    def setting_text(self, leave_out: Sequence[str] = ()) -> str:
        return ", ".join(_named(name, value) for name, value in self.setting if name not in leave_out)


def _named(name: str, value: str) -> str:
    """`compression lz4`, `ntfs_cluster 4K`; a value that names itself (`partition`) alone."""
    return value if value == name else f"{name} {value}"


@dataclass(frozen=True)
class Finding:
    text: str
    about: str                                # ranking | axis <name> | rest | pick | noise | nothing
    evidence: tuple[Comparison, ...] = ()
    numbers: tuple[str, ...] = ()             # every number the text says from the evidence
    # numbers it says from another table of the report: (table title, column, cell)
    elsewhere: tuple[tuple[str, str, str], ...] = ()


@dataclass
class Findings:
    section: str
    sentences: list[Finding]
    comparisons: list[Comparison] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f.text for f in self.sentences]

    def table(self) -> Table:
        """The evidence: every comparison a sentence cites, as it cites it."""
        rows, seen = [], set()
        for number_, finding in enumerate(self.sentences, 1):
            for c in finding.evidence:
                key = (number_, c.axis, c.measure.figure, c.a.id, c.b.id)
                if key in seen:
                    continue
                seen.add(key)
                rows.append([str(number_), c.axis, c.measure.noun, workload_text(c.workload),
                             c.setting_text() or "-", c.a_value, c.a_text, c.b_value, c.b_text, c.change_text,
                             c.factor_text, NOISE[c.noise]])
        return Table(f"{self.section}: the findings' evidence", ["finding", "axis", "figure", "workload", "setting",
                                                                  "from", "figure at from", "to", "figure at to",
                                                                  "change", "factor", "noise"], rows,
                     "Each finding's numbers, figure by figure: the configuration at `from` against the one at `to`, "
                     "everything else equal; CPU in percentage points of all CPU time.")


NOISE = {"beyond": "beyond the repeats' spread", "within": "within the repeats' spread",
         "unknown": "one run: noise unknown"}


def _noise(a: Stat, b: Stat) -> str:
    if a.n < 2 or b.n < 2:
        return "unknown"
    return "within" if a.overlaps(b) else "beyond"


def _unit(measure: Measure, column: Column) -> str:
    if measure.kind == "points":
        return "%"
    header = column.header
    for known in ("MB/s", "GiB", "MiB", "KiB", "bytes"):
        if header.endswith(known):
            return known
    return ""


# --- comparisons -----------------------------------------------------------------------------------------

def _comparisons(section: Section, axis: Axis, measure: Measure, column: Column) -> list[Comparison]:
    """Each configuration at a value of `axis` against its twin at the reference value (`off`, the
    smallest size, the first run; within a setting where the reference was not measured, the first
    value there): the same workload and the same values of the other axes, a value one side did not
    record matching any (compare --by pairs the same way)."""
    others = [a for a in section.axes if a is not axis]
    measured = [s for s in section.summaries if measure.value(s) is not None]
    setting = {s.id: tuple(axis_value(o.keys, s.flat) for o in others) for s in measured}
    value_of = {s.id: axis_value(axis.keys, s.flat) for s in measured}
    exact: dict[tuple, list[Summary]] = {}
    by_workload: dict[str, list[Summary]] = {}
    for s in measured:
        exact.setdefault((s.workload, setting[s.id]), []).append(s)
        by_workload.setdefault(s.workload, []).append(s)
    out = []
    for b in measured:
        value = value_of[b.id]
        # the same setting exactly; only when it has no other value, the settings that agree with it
        pool = [a for a in exact[b.workload, setting[b.id]] if a is not b] or by_workload[b.workload]
        twins = [(agree, a) for a in pool if value_of[a.id] != value
                 and (agree := agreement(setting[a.id], setting[b.id])) is not None]
        present = {value_of[a.id] for _agree, a in twins} | {value}
        ref = axis.reference if axis.reference in present else next(v for v in axis.values if v in present)
        twins = [(agree, a) for agree, a in twins if value_of[a.id] == ref]
        if value == ref or not twins:
            continue
        a = max(twins, key=lambda t: t[0])[1]
        a_stat, b_stat = measure.value(a), measure.value(b)
        assert a_stat is not None and b_stat is not None
        if max(a_stat.median, b_stat.median) / (100.0 if measure.kind == "points" else 1.0) < measure.least:
            continue
        a_text, b_text = column.text(section, a), column.text(section, b)
        if float(a_text) <= 0 and measure.kind == "relative":
            continue
        out.append(Comparison(axis.name, measure, b.workload, tuple(zip((o.name for o in others), setting[b.id])),
                              ref, value, a, b, a_text, b_text, _noise(a_stat, b_stat)))
    return out


def _measures(section: Section) -> list[tuple[Measure, Column]]:
    columns = figure_columns(section)
    measured = {m.figure for m in MEASURES if m.figure in columns}
    return [(m, columns[m.figure]) for m in MEASURES
            if m.figure in columns and not (m.only_without and m.only_without in measured)]


def _spreads(found: list[Comparison]) -> list[Comparison]:
    """Per setting and workload, the highest figure against the lowest: how far the axis moves it
    there, whichever values those are."""
    out = []
    groups: dict[tuple, list[Comparison]] = {}
    for c in found:
        groups.setdefault((c.workload, c.setting), []).append(c)
    for members in groups.values():
        first = members[0]
        points = [(first.a_value, first.a, first.a_text)] + [(c.b_value, c.b, c.b_text) for c in members]
        high = max(points, key=lambda p: float(p[2]))
        low = min(points, key=lambda p: float(p[2]))
        if high[0] == low[0]:
            continue
        out.append(Comparison(first.axis, first.measure, first.workload, first.setting, high[0], low[0], high[1],
                              low[1], high[2], low[2], _noise(first.measure.value(high[1]) or Stat(0, 0, 0, 1),
                                                              first.measure.value(low[1]) or Stat(0, 0, 0, 1))))
    return out


@dataclass
class _AxisEffects:
    axis: Axis
    by_measure: dict[str, list[Comparison]]       # measure figure -> comparisons against the reference

    def spread(self, figure: str) -> Comparison | None:
        """The biggest high-against-low comparison of the figure in any setting."""
        found = _spreads(self.by_measure.get(figure) or [])
        return max(found, key=lambda c: c.size) if found else None

    def counts(self, figure: str) -> bool:
        return any(c.counts for c in self.by_measure.get(figure) or [])

    @property
    def moves(self) -> bool:
        return any(self.counts(figure) for figure in self.by_measure)

    @property
    def score(self) -> float:
        """The axis's largest effect over its figures, relative (CPU points as a share of the level)."""
        best = 0.0
        for figure in self.by_measure:
            c = self.spread(figure)
            if c is None or not c.counts:
                continue
            level = max(float(c.a_text), float(c.b_text), 1.0)
            best = max(best, c.size / level if c.measure.kind == "points" else c.size)
        return best


def _reference_setting(section: Section, axis: Axis) -> tuple[tuple[str, str], ...]:
    return tuple((a.name, a.reference) for a in section.axes if a is not axis)


# --- sentences -----------------------------------------------------------------------------------------

@dataclass
class _Text:
    """A sentence being written, with the comparisons and numbers it cites."""
    evidence: list[Comparison] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    elsewhere: list[tuple[str, str, str]] = field(default_factory=list)

    def cite(self, c: Comparison, *texts: str) -> None:
        self.evidence.append(c)
        self.numbers += texts

    def take(self, other: _Text) -> None:
        self.evidence += other.evidence
        self.numbers += other.numbers
        self.elsewhere += other.elsewhere

    def finding(self, text: str, about: str) -> Finding:
        return Finding(_sentence(text), about, tuple(self.evidence), tuple(self.numbers), tuple(self.elsewhere))


def _lead(found: list[Comparison], reference: tuple[tuple[str, str], ...]) -> Comparison:
    """The comparison an axis's sentence leads with for one workload: at the reference setting, unless
    another setting's effect is clearly bigger (then that one, and the contrast shows the other)."""
    biggest = max(found, key=lambda c: c.size)
    at_reference = [c for c in found if c.setting == reference]
    if not at_reference:
        return biggest
    ref = max(at_reference, key=lambda c: c.size)
    return biggest if biggest.size - ref.size >= CLEARLY[ref.measure.kind] else ref


def _contrast(lead: Comparison, found: list[Comparison]) -> Comparison | None:
    """The same values and workload in a setting that differs from the lead's in one other axis, with
    a clearly different effect: where the axis interacts with that one."""
    candidates = [c for c in found if (c.a_value, c.b_value, c.workload) == (lead.a_value, lead.b_value, lead.workload)
                  and sum(x != y for x, y in zip(c.setting, lead.setting)) == 1]
    if not candidates:
        return None
    best = max(candidates, key=lambda c: abs(c.signed - lead.signed))
    return best if abs(best.signed - lead.signed) >= CLEARLY[lead.measure.kind] else None


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text


def _values_phrase(text: _Text, row: list[Comparison], unit: str, measure: Measure, two: bool) -> str:
    """The figure at the values of one setting and workload: `+28 % (1402.0 vs 1095.0 MB/s)` for two
    values; a trend along sizes (`falls from 88.9 MB/s at 4K to 6.0 MB/s at 16K (-93 %)`), or the
    values in order (`lz4 1152.4 > off 985.0 > zstd-3 719.0 MB/s`) for more."""
    if two:
        [c] = row
        text.cite(c, c.amount, c.b_text, c.a_text)
        return f"{c.change_text} ({c.b_text} vs {_with_unit(c.a_text, unit)})"
    return _trend(text, row, unit) or _ordering(text, row, unit, measure.better)


def _points_phrase(text: _Text, rows: list[list[Comparison]]) -> str:
    """CPU against the reference value, each value's points per workload: `lz4 +20.0/+10.0,
    zstd-3 +40.0/+13.0 points`."""
    values = list(dict.fromkeys(c.b_value for row in rows for c in row))
    items = []
    for value in values:
        amounts = []
        for row in rows:
            c = next((c for c in row if c.b_value == value), None)
            if c is not None:
                text.cite(c, c.amount)
            amounts.append(c.amount if c is not None else "-")
        items.append(f"{value} {'/'.join(amounts)}")
    return ", ".join(items) + " points"


def _ordering(text: _Text, row: list[Comparison], unit: str, better: int) -> str:
    first = row[0]
    values = [(first.a_value, first.a_text, first)] + [(c.b_value, c.b_text, c) for c in row]
    values.sort(key=lambda v: float(v[1]), reverse=better > 0)
    for _value, shown, c in values:
        text.cite(c, shown)
    return _with_unit((" > " if better > 0 else " < ").join(f"{v} {shown}" for v, shown, _c in values), unit)


def _trend(text: _Text, row: list[Comparison], unit: str) -> str | None:
    """`falls from 477.9 MB/s at 5G to 190.6 MB/s at 70G (-60 %)` when the figure moves one way along
    the sizes or numbers an axis takes (three of them at least); None otherwise."""
    first = row[0]
    points = [(first.a_value, first.a_text, first)] + [(c.b_value, c.b_text, c) for c in row]
    numeric = sorted(((magnitude(v), v, shown, c) for v, shown, c in points if magnitude(v) is not None),
                     key=lambda p: p[0] or 0.0)
    if len(numeric) < 3:
        return None
    figures = [float(p[2]) for p in numeric]
    rising = all(b >= a for a, b in zip(figures, figures[1:]))
    falling = all(b <= a for a, b in zip(figures, figures[1:]))
    if not (rising or falling) or figures[0] == figures[-1] or not figures[0]:
        return None
    (_m, low, low_text, low_c), (_n, high, high_text, high_c) = numeric[0], numeric[-1]
    pct = (figures[-1] / figures[0] - 1) * 100
    amount = f"{pct:+.0f}" if abs(pct) >= 10 else f"{pct:+.1f}"
    if high_c.a_value == low:           # the reference at one end: one comparison spans both
        text.cite(high_c, low_text, high_text)
    elif low_c.a_value == high:
        text.cite(low_c, low_text, high_text)
    else:
        text.cite(low_c, low_text)
        text.cite(high_c, high_text)
    text.numbers.append(amount)
    return (f"{'rises' if rising else 'falls'} from {_with_unit(low_text, unit)} at {low} to "
            f"{_with_unit(high_text, unit)} at {high} ({amount} %)")


def _row(found: list[Comparison], lead: Comparison) -> list[Comparison]:
    return [c for c in found if c.setting == lead.setting and c.workload == lead.workload]


def _noise_words(noises: set[str]) -> str:
    return {frozenset({"beyond"}): "beyond the repeats' spread",
            frozenset({"within"}): "within the repeats' spread"}.get(frozenset(noises), "")


@dataclass
class _Phrase:
    text: str
    cited: _Text
    noise: set[str]


def _measure_phrase(section: Section, effects: _AxisEffects, measure: Measure, column: Column,
                    reference: tuple[tuple[str, str], ...]) -> _Phrase | None:
    """What `effects.axis` does to one figure: its lead effect per workload (the biggest two; the
    others summed up), the setting it was measured at when that matters, and a setting of another
    axis where the effect is clearly different. None when the axis does not move the figure."""
    found = effects.by_measure.get(measure.figure) or []
    if not effects.counts(measure.figure):
        return None
    axis = effects.axis
    unit = _unit(measure, column)
    two = len(axis.values) == 2
    single = len(section.workloads) == 1
    workloads = list(dict.fromkeys(c.workload for c in found))
    leads = {w: _lead([c for c in found if c.workload == w], reference) for w in workloads}
    ranked = sorted(workloads, key=lambda w: -max(c.size for c in _row(found, leads[w])))
    shown = ranked if len(ranked) <= SHOWN_WORKLOADS + 1 else ranked[:SHOWN_WORKLOADS]
    first = leads[ranked[0]]
    contrast = _contrast(first, found)
    cited = _Text()
    names = [workload_text(w) for w in shown]
    if measure.kind == "points" and not two:
        # one list per reference value (the workloads measured at the same one share it)
        words = []
        for reference_value in dict.fromkeys(leads[w].a_value for w in shown):
            same = [w for w in shown if leads[w].a_value == reference_value]
            words.append(f"vs {reference_value}: " + _points_phrase(cited, [_row(found, leads[w]) for w in same])
                         + ("" if single else f" ({'/'.join(workload_text(w) for w in same)})"))
    else:
        pieces = []
        for w in shown:
            piece = _Text()
            pieces.append((_values_phrase(piece, _row(found, leads[w]), unit, measure, two), piece))
        if len(pieces) > 1 and len({body for body, _p in pieces}) == 1 and len(pieces) == len(ranked):
            words = [pieces[0][0]]            # the same in every workload: said once
            cited.take(pieces[0][1])
        else:
            words = []
            for (body, piece), name in zip(pieces, names):
                cited.take(piece)
                words.append(body if single else f"{body} in {name}" if two else f"{name} {body}")
    if contrast is not None:            # right after the lead it qualifies
        changed = next(name for (name, x), (_n, y) in zip(contrast.setting, first.setting) if x != y)
        cited.cite(contrast, contrast.a_text, contrast.b_text, contrast.amount)
        words[0] += (f", but with {_named(changed, dict(contrast.setting)[changed])} {contrast.a_text} to "
                     f"{_with_unit(contrast.b_text, unit)} ({contrast.change_text})")
    rest = [leads[w] for w in ranked if w not in shown]
    if rest:
        low, high = min(rest, key=lambda c: c.change), max(rest, key=lambda c: c.change)
        cited.cite(low, low.amount)
        cited.cite(high, high.amount)
        span = high.change_text if low is high else f"{low.amount} to {high.change_text}"
        words.append(f"the other {len(rest)} workloads {span}")
    noun = measure.noun
    # Where the lead was measured, when that is not the reference setting or matters (an interaction):
    # the other axes' values that differ from their reference, or the one the contrast changes.
    at = ", ".join(_named(name, value) for (name, value), (_n, ref) in zip(first.setting, reference) if value != ref)
    if contrast is not None and not at:
        at = _named(changed, dict(first.setting)[changed])
    text = f"{noun}{f' (at {at})' if at else ''}{':' if not two and measure.kind != 'points' else ''} " \
        + ", ".join(words)
    text = text.replace(" : ", ": ").replace(" vs ", " vs ", 1)
    text += _dirty_data(cited, axis, measure, _row(found, first))
    return _Phrase(text, cited, {leads[w].noise for w in shown})


def _dirty_data(cited: _Text, axis: Axis, measure: Measure, row: list[Comparison]) -> str:
    """`, past zfs_dirty_data_max (16.0 GiB)` when a sweep of write sizes crosses it: what the
    throughput's fall is about (the write-size table shows the value)."""
    if measure.figure != "throughput" or not set(axis.keys) & set(SIZE_KEYS) or not row:
        return ""
    members = [row[0].a, *(c.b for c in row)]
    dirty = {s.dirty_data_max for s in members}
    totals = [s.total_bytes for s in members if s.total_bytes]
    if len(dirty) != 1 or None in dirty or len(totals) < 2:
        return ""
    limit = dirty.pop() or 0
    if not min(totals) < limit < max(totals):
        return ""
    shown = f"{limit / GIB:.1f}"
    cited.elsewhere.append((f"{row[0].a.config.matrix}: throughput by total write size ({row[0].a.label})",
                            "zfs_dirty_data_max GiB", shown))
    return f", past zfs_dirty_data_max ({shown} GiB)"


# An axis's sentence says at most this many figures, in this order of importance.
MEASURES_PER_AXIS = 3


def _axis_sentence(section: Section, effects: _AxisEffects, measures: list[tuple[Measure, Column]]) -> Finding:
    axis = effects.axis
    reference = _reference_setting(section, axis)
    phrases: list[_Phrase] = []
    groups: list[str] = []
    for measure, column in measures:
        phrase = _measure_phrase(section, effects, measure, column, reference)
        if phrase is None:
            continue
        slot = measure.group or measure.figure
        if slot not in groups and len(groups) >= MEASURES_PER_AXIS:
            continue
        groups.append(slot)
        phrases.append(phrase)
    cited = _Text()
    for p in phrases:
        cited.take(p.cited)
    noises = set().union(*(p.noise for p in phrases)) if phrases else set()
    common = _noise_words(noises)
    parts = [p.text + ("" if common or not _noise_words(p.noise) else f", {_noise_words(p.noise)}") for p in phrases]
    text = f"{_head(axis)}: " + "; ".join(parts)
    if common:
        text += f"; {'all ' if len(phrases) > 1 else ''}{common}"
    still = _still(effects, measures)
    if still is not None:
        measure, c = still
        cited.cite(c, c.amount)
        text += f"; {measure.noun} at most {c.change_text}{_how(c)}"
    return cited.finding(text, f"axis {axis.name}")


def _head(axis: Axis) -> str:
    if len(axis.values) == 2:
        other = next(v for v in axis.values if v != axis.reference)
        return f"{other if other == axis.name else f'{axis.name} {other}'} vs {axis.reference}"
    return axis.name


def _biggest(effects: _AxisEffects, figure: str) -> Comparison | None:
    """The comparison against the reference value that moves the figure most."""
    found = effects.by_measure.get(figure) or []
    return max(found, key=lambda c: c.size) if found else None


def _still(effects: _AxisEffects, measures: list[tuple[Measure, Column]]) -> tuple[Measure, Comparison] | None:
    """Throughput, when the axis moves something else but not it ("costs CPU, no throughput")."""
    for measure, _column in measures:
        if measure.figure == "throughput" and not effects.counts("throughput"):
            biggest = _biggest(effects, "throughput")
            return (measure, biggest) if biggest is not None else None
    return None


def _how(c: Comparison) -> str:
    return {"within": " (within the repeats' spread)", "beyond": " (beyond the repeats' spread)"}.get(c.noise, "")


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def _ranking(movers: list[_AxisEffects], measures: list[tuple[Measure, Column]], unrepeated: bool) -> Finding:
    """Per figure, the axes that move it, biggest first, each with the most it moves it (the highest
    against the lowest figure in one setting: a factor, or CPU points)."""
    cited = _Text()
    parts = []
    for measure, _column in measures:
        moving = [(spread, e.axis.name) for e in movers
                  if e.counts(measure.figure) and (spread := e.spread(measure.figure)) is not None]
        if not moving:
            continue
        moving.sort(key=lambda m: -m[0].size)
        items = []
        for spread, name in moving:
            cited.cite(spread, spread.spread_text.split()[0].rstrip("x"))
            items.append(f"{name} {spread.spread_text}")
        parts.append(f"{measure.noun} " + ", ".join(items))
    tail = " (one run per configuration: whether this exceeds the noise is unknown)" if unrepeated else ""
    return cited.finding("Ranked by how much they move each figure" + tail + ": " + "; ".join(parts), "ranking")


def _rest_sentence(left: list[_AxisEffects], measures: list[tuple[Measure, Column]]) -> Finding:
    """The axes without a sentence of their own, each with its biggest change of throughput, size and
    CPU against its reference value: small effects (the encryption's CPU) and none (a partition)."""
    cited = _Text()
    parts = []
    for effects in left:
        items = [(m, c) for m, _col in measures if m.figure in ("throughput", "used", "ratio", "cpu")
                 and (c := _biggest(effects, m.figure)) is not None]
        if not items:
            continue
        moved = [(m, c) for m, c in items if c.counts]
        # What does not move: throughput always (the question everybody asks), the others when not 0.
        quiet = [(m, c) for m, c in items if not c.counts and (m.figure == "throughput" or c.change)]
        for _m, c in moved + quiet:
            cited.cite(c, c.amount)
        words = [f"{m.noun} {c.change_text}{_how(c)}" for m, c in moved]
        if quiet:
            noise = _noise_words({c.noise for _m, c in quiet})
            words.append(", ".join(f"{m.noun} at most {c.change_text}" for m, c in quiet)
                         + (f" ({noise})" if noise else ""))
        parts.append(f"{_head(effects.axis)}: " + ", ".join(words))
    return cited.finding("; ".join(parts), "rest")




def findings(section: Section, pick: str | None = None, focus: str | None = None) -> Findings:
    """At most five sentences on what `section` found: the axes ranked per figure, one sentence per
    axis that moves something (biggest first; `focus` names one to put first) as long as they fit,
    one for all the others, and `pick` (recommend's sentence) last."""
    measures = _measures(section)
    effects = []
    for axis in section.axes:
        by_measure = {m.figure: _comparisons(section, axis, m, column) for m, column in measures}
        effects.append(_AxisEffects(axis, {k: v for k, v in by_measure.items() if v}))
    effects.sort(key=lambda e: (e.axis.name != focus, -e.score))
    movers = [e for e in effects if e.moves]
    quiet = [e for e in effects if not e.moves and e.by_measure]
    budget = MOST - (1 if pick else 0)
    unrepeated = all(s.runs < 2 for s in section.summaries)
    sentences: list[Finding] = []
    if len(movers) > 1:
        sentences.append(_ranking(movers, measures, unrepeated))
    own = len(movers) if len(sentences) + len(movers) + (1 if quiet else 0) <= budget else \
        max(1, budget - len(sentences) - 1)
    axis_sentences = [_axis_sentence(section, e, measures) for e in movers[:own]]
    if focus and movers and movers[0].axis.name == focus:   # what was asked about comes first
        sentences.insert(0, axis_sentences.pop(0))
    sentences += axis_sentences
    if left := movers[own:] + quiet:
        sentences.append(_rest_sentence(left, measures))
    if unrepeated and len(movers) < 2 and len(sentences) < budget and effects:
        sentences.append(Finding("One run per configuration: whether these differences exceed the noise is unknown "
                                 "(repeat the matrix to know).", "noise"))
    if not sentences and not pick:
        sentences.append(_nothing(section))
    if pick:
        sentences.append(Finding(_sentence(pick), "pick"))
    return Findings(section.matrix, sentences[:MOST], [c for e in effects for found in e.by_measure.values()
                                                         for c in found])


def _nothing(section: Section) -> Finding:
    if not section.axes:
        return Finding(f"{section.matrix} has one configuration per workload: nothing to compare within it.", "nothing")
    return Finding(f"{section.matrix} varies in {', '.join(a.name for a in section.axes)}, but no figure was measured "
                   "at two of its values with everything else equal.", "nothing")


__all__ = ["Comparison", "Finding", "Findings", "MEASURES", "Measure", "findings"]
