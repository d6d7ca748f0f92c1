"""The report's tables, shaped like the ones our users publish, as Markdown and CSV.

Per matrix section (report.Section):
- configurations: one row each, with only the axes that vary (axes.py) and every figure measured;
- compression x recordsize (or volblocksize) pivots, the posts' shape;
- a pivot of workload x axis for every other axis the matrix swept (volblocksize, encryption,
  compressibility, pool layout, a module parameter, a label such as `ram`), the other axes as
  leading columns, so no two rows look alike;
- space: on-disk and logical size in a unit that shows their differences (MiB where GiB would round
  them away), % of uncompressed, and the difference against a baseline in MiB and %;
- write-size sweeps (total size against MB/s with the run's zfs_dirty_data_max);
- CrystalDiskMark's own text lines, in the format of the version chosen (crystaldiskmark.py).
Units say which: MB/s is 10^6 bytes/s, MiB/s 2^20. A figure of several repeats reads
`median (min-max)`, runs counted. A figure nobody measured reads `-` (empty in CSV), never 0.
Owns formatting only; the figures come from report.py.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from . import crystaldiskmark
from .axes import Axis, Selector, matches, natural, selector_keys, workload_text
from .report import DIMENSIONS, GIB, MIB, SIZE_KEYS, Section, Stat, Summary

MISSING = "-"
SIZE = 0.0           # a Column's scale meaning "the size unit of its table"
# CSV is read by programs: its figures keep their precision (rounded to 6 decimals), the Markdown and
# HTML tables show the digits a reader needs.
_PRECISE: ContextVar[bool] = ContextVar("precise", default=False)


@contextmanager
def precise() -> Iterator[None]:
    """Within it, `fmt` and `number` write figures with every digit that means something."""
    token = _PRECISE.set(True)
    try:
        yield
    finally:
        _PRECISE.reset(token)


def number(value: float, digits: int) -> str:
    """`value` at `digits` decimals, or in precise mode at up to 6 (trailing zeros dropped, at least
    `digits`)."""
    if not _PRECISE.get():
        return f"{value:.{digits}f}"
    text = f"{value:.6f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(digits, '0')}" if digits or frac else whole


@dataclass(frozen=True)
class Column:
    header: str
    figure: str                          # a report.FIGURES name, or "" for a computed one
    scale: float
    digits: int
    compute: Callable[[Section, Summary], float | None] | None = None
    digits_of: Callable[[Section, Summary], int] | None = None   # per configuration, when it varies

    def stat(self, section: Section, summary: Summary) -> Stat | None:
        if self.compute is not None:
            value = self.compute(section, summary)
            return None if value is None else Stat(value, value, value, 1)
        stat = summary.get(self.figure)
        return None if stat is None else stat.scaled(self.scale)

    def cell(self, section: Section, summary: Summary | None) -> str:
        if summary is None:
            return MISSING
        return fmt(self.stat(section, summary), self.digits_of(section, summary) if self.digits_of else self.digits)

    def text(self, section: Section, summary: Summary) -> str:
        """The median as this column prints it (what a finding quotes)."""
        stat = self.stat(section, summary)
        digits = self.digits_of(section, summary) if self.digits_of else self.digits
        return MISSING if stat is None else number(stat.median, digits)


def signed(value: float, digits: int) -> str:
    """`number` with its sign always written: +0.0, -81.7."""
    text = number(value, digits)
    return text if text.startswith("-") else f"+{text}"


def fmt(stat: Stat | None, digits: int) -> str:
    """`median`, or `median (min-max)` when repeats differ: a spread is never hidden."""
    if stat is None:
        return MISSING
    text = number(stat.median, digits)
    if stat.n > 1 and number(stat.low, digits) != number(stat.high, digits):
        text += f" ({number(stat.low, digits)}-{number(stat.high, digits)})"
    return text


FIGURE_COLUMNS = (
    Column("MB/s", "throughput", 1e-6, 1),
    Column("MiB/s", "throughput", 1 / MIB, 1),
    Column("IOPS", "iops", 1, 1),
    Column("latency us", "latency_us", 1, 2),
    Column("wall s", "seconds", 1, 1),
    Column("ratio", "ratio", 1, 3, digits_of=lambda section, s: section.ratio_digits(s)),
    Column("on-disk", "used", SIZE, 1),
    Column("logical", "logical", SIZE, 1),
    Column("% of uncompressed", "", 1, 1, lambda section, s: section.percent_of_uncompressed(s),
           lambda section, s: section.percent_digits(s)),
    Column("CPU %", "cpu", 100, 1),
    Column("CPU user %", "cpu_user", 100, 1),
    Column("CPU system %", "cpu_system", 100, 1),
    Column("disk written per byte", "disk_written", 1, 2),
    Column("disk read per byte", "disk_read", 1, 2),
)
# The figures of the workload x axis pivots (MiB/s, wall time and logical size stay in the
# configurations table).
AXIS_FIGURES = ("MB/s", "IOPS", "latency us", "ratio", "on-disk", "CPU %", "CPU user %", "CPU system %",
                "disk written per byte", "disk read per byte")
SIZE_UNITS = (("GiB", GIB), ("MiB", MIB), ("KiB", 1024))
MOST_DIGITS = 3


def size_unit(values: Iterable[float | None]) -> tuple[str, float]:
    """The unit of a table's sizes, chosen for their magnitude: the largest in which the largest
    value is 1 or more (GiB for hundreds of GiB, whatever their differences)."""
    known = [abs(float(v)) for v in values if v is not None]
    for name, unit in SIZE_UNITS:
        if known and max(known) >= unit:
            return name, unit
    return "bytes", 1.0


def size_digits(values: Iterable[float | None], unit: float, least: int = 1) -> int:
    """Decimals that tell `values` (bytes) apart in `unit`: from `least` up to MOST_DIGITS. Differences
    finer than that are what a difference column (`difference_unit`) is for."""
    known = sorted({float(v) for v in values if v is not None})
    for digits in range(least, MOST_DIGITS + 1):
        shown = {f"{v / unit:.{digits}f}" for v in known}
        if len(shown) == len(known):
            return digits
    return MOST_DIGITS


def difference_unit(deltas: Iterable[float | None]) -> tuple[str, float]:
    """The unit of a column of size differences: the largest in which the smallest difference that
    is not zero is 1 or more (81.7 and 4623.0 MiB, not 0.1 and 4.5 GiB)."""
    known = [abs(float(d)) for d in deltas if d is not None and d]
    for name, unit in SIZE_UNITS:
        if known and min(known) >= unit:
            return name, unit
    return "bytes", 1.0


def _sized(columns: Iterable[Column], summaries: list[Summary]) -> list[Column]:
    """`columns` with the size columns in one unit for the table (the magnitude of all its sizes), each
    with the decimals that show its values' differences."""
    columns = list(columns)
    sizes = [c for c in columns if c.scale == SIZE]
    unit_name, unit = size_unit(s.median(c.figure) for c in sizes for s in summaries)
    out = []
    for c in columns:
        if c.scale == SIZE:
            digits = size_digits((s.median(c.figure) for s in summaries), unit, c.digits)
            c = replace(c, header=f"{c.header} {unit_name}", scale=1 / unit, digits=digits)
        out.append(c)
    return out


def _present(section: Section, summaries: list[Summary], names: Iterable[str] | None = None) -> list[Column]:
    wanted = [c for c in FIGURE_COLUMNS if names is None or c.header in names]
    return _sized([c for c in wanted if any(c.stat(section, s) is not None for s in summaries)], summaries)


def figure_columns(section: Section) -> dict[str, Column]:
    """The configurations table's columns by figure name (`throughput` is MB/s): what findings quote."""
    out: dict[str, Column] = {}
    for c in _present(section, section.summaries):
        key = c.figure or c.header
        out.setdefault(key, c)
    return out


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    code: list[str] = field(default_factory=list)   # preformatted lines (CrystalDiskMark) instead of rows


def _workloads_vary(section: Section) -> bool:
    return len(section.workloads) > 1


def configurations_table(section: Section) -> Table:
    """Every configuration in matrix order: the axes that vary, runs, every figure measured."""
    columns = _present(section, section.summaries)
    axes = section.axes
    shown = {k for a in axes for k in a.keys}
    differs = {s.id: s.differs_beyond(shown) for s in section.summaries}
    workload = _workloads_vary(section)
    headers = ["config", *(["workload"] if workload else []), *(a.name for a in axes), "runs",
               *(c.header for c in columns)] + (["differs"] if any(differs.values()) else [])
    rows = []
    for s in section.summaries:
        rows.append([s.id, *([workload_text(s.workload)] if workload else []), *(a.value(s.config) for a in axes),
                     str(s.runs), *(c.cell(section, s) for c in columns)] + ([differs[s.id]] if any(differs.values()) else []))
    return Table(f"{section.matrix}: configurations", headers, rows,
                 "MB/s = 10^6 bytes/s, MiB/s = 2^20 bytes/s, GiB = 2^30 bytes; several runs read median (min-max); "
                 "- = not measured.")


def pivot_tables(section: Section) -> list[Table]:
    """compression (rows) x recordsize or volblocksize (columns), one table per figure, for every
    group of configurations that differ only in those two and have at least two of each."""
    tables = []
    for group in section.groups(DIMENSIONS):
        compressions = list(dict.fromkeys(s.compression for s in group))
        sizes = list(natural(s.recordsize for s in group))
        if len(compressions) < 2 or len(sizes) < 2:
            continue
        cells = {(s.compression, s.recordsize): s for s in group}
        block = group[0].block_property
        where = f" ({group[0].config.workload}, size {group[0].config.size})"
        for column in _present(section, group):
            rows = [[c, *(column.cell(section, cells.get((c, r))) for r in sizes)] for c in compressions]
            # A figure measured along one axis only is a column of the configurations table already;
            # one that is the same in every cell (the corpus's logical size) says nothing by the two.
            if sum(_measured(row[1:]) > 0 for row in rows) < 2 or \
                    sum(_measured(col) > 0 for col in list(zip(*rows))[1:]) < 2 or \
                    len({cell for row in rows for cell in row[1:] if cell != MISSING}) < 2:
                continue
            tables.append(Table(f"{section.matrix}: {column.header} by compression and {block}{where}",
                                [f"compression \\ {block} ({column.header})", *sizes], rows))
    return tables


def _measured(cells: Iterable[str]) -> int:
    return sum(cell != MISSING for cell in cells)


def _covered(section: Section) -> set[str]:
    """Axes the posts' own tables already show: compression and recordsize/volblocksize in the
    pivot when one workload ran, the size in the write-size table."""
    covered = set()
    if pivot_tables(section) and not _workloads_vary(section):
        covered |= {"compression", "recordsize", "volblocksize"}
    if write_size_tables(section):
        covered.add("size")
    return covered


def axis_tables(section: Section) -> list[Table]:
    """For every axis the matrix swept: workload (rows) x that axis's values (columns), one table per
    figure, the other axes as the leading columns of each row. Only rows where the axis really
    varies (two values or more measured) are kept."""
    tables = []
    covered = _covered(section)
    for axis in section.axes:
        if axis.name in covered:
            continue
        others = [a for a in section.axes if a is not axis]
        rows_of: dict[tuple[str, ...], dict[str, Summary]] = {}
        for s in section.summaries:
            key = (*(a.value(s.config) for a in others), workload_text(s.workload))
            rows_of.setdefault(key, {})[axis.value(s.config)] = s
        comparable = {k: cells for k, cells in rows_of.items() if len(cells) >= 2}
        if not comparable:
            continue
        group = [s for cells in comparable.values() for s in cells.values()]
        for column in _present(section, group, AXIS_FIGURES):
            rows = [[*key, *(column.cell(section, cells.get(v)) for v in axis.values)]
                    for key, cells in comparable.items()]
            rows = [r for r in rows if _measured(r[len(others) + 1:]) >= 2]
            if not rows:
                continue
            by = f"workload and {axis.name}" if _workloads_vary(section) else axis.name
            tables.append(Table(f"{section.matrix}: {column.header} by {by}",
                                [*(a.name for a in others), "workload", *(f"{axis.name} {v}" for v in axis.values)],
                                rows))
    return tables


# --- space --------------------------------------------------------------------------------------------

def baseline_of(section: Section, summary: Summary, baseline: Selector | None) -> Summary | None:
    """The configuration `summary` is measured against: with `baseline` (e.g. recordsize=128K), the one
    that matches it and equals `summary` in everything the selector does not name; else the first
    configuration of the section with an on-disk size."""
    sized = [s for s in section.summaries if s.get("used") is not None]
    if baseline is None:
        return sized[0] if sized else None
    free = selector_keys(baseline, [s.config for s in section.summaries])
    mine = {k: v for k, v in summary.config.flat().items() if k not in free}
    for s in sized:
        if matches(s.config, baseline) and {k: v for k, v in s.config.flat().items() if k not in free} == mine:
            return s
    return None


def space_table(section: Section, baseline: Selector | None = None) -> list[Table]:
    """On-disk and logical size per configuration in one unit for the table, ratio, % of
    uncompressed, and the difference against the baseline in its own unit (one that shows it) and %."""
    sized = [s for s in section.summaries if s.get("used") is not None]
    if len(sized) < 2:
        return []
    columns = _present(section, sized, ("on-disk", "logical", "ratio", "% of uncompressed"))
    axes = section.axes
    workload = _workloads_vary(section)
    deltas: list[float | None] = []
    bases = set()
    for s in sized:
        base = baseline_of(section, s, baseline)
        used, base_used = s.median("used"), base.median("used") if base else None
        deltas.append(None if base is None or used is None or not base_used else used - base_used)
        if deltas[-1] is not None and base is not None:
            bases.add(base.id)
    unit_name, unit = difference_unit(deltas)
    rows = []
    for s, delta in zip(sized, deltas):
        base = baseline_of(section, s, baseline)
        base_used = base.median("used") if base else None
        cells = (MISSING, MISSING) if delta is None or not base_used else (
            signed(delta / unit, 1 if unit > 1 else 0), signed(delta / base_used * 100, 2))
        rows.append([*([workload_text(s.workload)] if workload else []), *(a.value(s.config) for a in axes),
                     *(c.cell(section, s) for c in columns), *cells])
    against = "the first configuration" if baseline is None else ",".join(f"{k}={v}" for k, v in baseline)
    if len(bases) == 1:
        first = next(s for s in sized if s.id in bases)
        against = section.describe(first) or first.label
    headers = [*(["workload"] if workload else []), *(a.name for a in axes), *(c.header for c in columns),
               f"vs baseline {unit_name}", "vs baseline %"]
    return [Table(f"{section.matrix}: space on disk (baseline: {against})", headers, rows,
                  f"vs baseline: on-disk size minus the baseline's ({unit_name} = {_unit_text(unit)}) and in % of it; "
                  "`report --baseline NAME=VALUE` picks another (e.g. recordsize=128K: each row against its "
                  "128K twin).")]


def _unit_text(unit: float) -> str:
    names: dict[float, str] = {GIB: "2^30 bytes", MIB: "2^20 bytes", 1024: "2^10 bytes"}
    return names.get(unit, "bytes")


def write_size_tables(section: Section) -> list[Table]:
    """Total write size against throughput, with the zfs_dirty_data_max the run had: the
    "fast until dirty data fills" curve as rows, in matrix order."""
    tables = []
    for group in section.groups(SIZE_KEYS):
        if len({s.total_bytes for s in group}) < 2:
            continue
        rows = []
        for s in group:
            total, dirty = s.total_bytes, s.dirty_data_max
            rows.append([s.config.size, MISSING if total is None else f"{total / GIB:.1f}",
                         MISSING if dirty is None else f"{dirty / GIB:.1f}",
                         MISSING if not (total and dirty) else f"{total / dirty:.2f}", str(s.runs),
                         FIGURE_COLUMNS[0].cell(section, s), FIGURE_COLUMNS[1].cell(section, s)])
        tables.append(Table(f"{section.matrix}: throughput by total write size ({group[0].label})",
                            ["size", "total GiB", "zfs_dirty_data_max GiB", "x dirty", "runs", "MB/s", "MiB/s"], rows))
    return tables


# --- CrystalDiskMark --------------------------------------------------------------------------------

def _best(summary: Summary) -> tuple[float | None, float | None, float | None]:
    """CrystalDiskMark reports the best of its N passes: the repeat of highest throughput, with that
    repeat's IOPS and latency (the three figures are kept per repeat in the same order)."""
    tp, iops, lat = summary.get("throughput"), summary.get("iops"), summary.get("latency_us")
    if tp is None:
        return None, None, None
    i = max(range(len(tp.values)), key=tp.values.__getitem__)

    def at(stat: Stat | None) -> float | None:
        if stat is None:
            return None
        return stat.values[i] if i < len(stat.values) and len(stat.values) == len(tp.values) else stat.median
    return tp.values[i] / 1e6, at(iops), at(lat)


def _scaled(stat: Stat | None, factor: float) -> Stat | None:
    return None if stat is None else stat.scaled(factor)


def cdm_version(group: list[Summary], wanted: str | None) -> str:
    """`wanted` (--cdm-format), else the version the results were imported from, else 8."""
    if wanted:
        return wanted
    sources = {dict(s.config.data).get("source", "") for s in group}
    versions = {src.split()[1].split(".")[0] for src in sources if src.startswith("crystaldiskmark ") and " " in src}
    return versions.pop() if len(versions) == 1 else crystaldiskmark.DEFAULT_VERSION


def cdm_tables(section: Section, version: str | None = None) -> list[Table]:
    tables = []
    for group in section.groups(("workload",)):
        tests = [(t, s) for s in group
                 if (t := crystaldiskmark.CdmTest.of(s.workload, *_best(s))) is not None and t.mb_per_s is not None]
        if not tests:
            continue
        chosen = cdm_version(group, version)
        lines, left = crystaldiskmark.render([t for t, _ in tests], chosen)
        rows = [[workload_text(s.workload).rsplit(" ", 1)[0], t.direction, str(s.runs),
                 MISSING if t.mb_per_s is None else f"{t.mb_per_s:.3f}", fmt(_scaled(s.get("throughput"), 1e-6), 3),
                 fmt(s.get("iops"), 1), fmt(s.get("latency_us"), 2)] for t, s in tests]
        what = section.describe(group[0], ("workload",)) or group[0].label
        note = f"CrystalDiskMark {chosen} lines; best of the runs, as CrystalDiskMark reports; median (min-max) beside it."
        if left:
            note += (f" Not in CrystalDiskMark {chosen}'s lines: "
                     f"{', '.join(workload_text(t.workload) for t in left)} (--cdm-format 8 prints them).")
        tables.append(Table(f"{section.matrix}: CrystalDiskMark, {what}",
                            ["test", "direction", "runs", "best MB/s", "median MB/s", "IOPS", "latency us"],
                            rows, note, code=lines))
    return tables


def section_tables(section: Section, baseline: Selector | None = None, cdm: str | None = None) -> list[Table]:
    return [configurations_table(section), *pivot_tables(section), *axis_tables(section),
            *space_table(section, baseline), *write_size_tables(section), *cdm_tables(section, cdm)]


# --- renderings ----------------------------------------------------------------------------------------

def md_inline(text: str) -> str:
    """Text from the store (names a user gave, fio job names) as inline Markdown: a line break or
    other control character shown as `\\xNN`, never starting a line of its own (a heading)."""
    return "".join(f"\\x{ord(ch):02x}" if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text).replace("|", "\\|")


def table_markdown(table: Table) -> str:
    out = [f"### {md_inline(table.title)}", ""]
    if table.code:
        out += ["```", *table.code, "```", ""]
    out += ["| " + " | ".join(map(md_inline, table.headers)) + " |", "|" + "---|" * len(table.headers)]
    out += ["| " + " | ".join(map(md_inline, row)) + " |" for row in table.rows]
    if table.note:
        out += ["", table.note]
    return "\n".join(out) + "\n"


def table_csv(table: Table) -> str:
    """A title line, the header line and the rows (not measured: empty), then a blank line."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([table.title])
    writer.writerow(table.headers)
    writer.writerows([["" if cell == MISSING else cell for cell in row] for row in table.rows])
    writer.writerow([])
    return buf.getvalue()


__all__ = ["MISSING", "Axis", "Column", "Table", "cdm_tables", "configurations_table", "difference_unit",
           "figure_columns", "fmt", "md_inline", "number", "pivot_tables", "precise", "section_tables", "signed", "size_digits",
           "size_unit", "space_table", "table_csv", "table_markdown", "write_size_tables"]
