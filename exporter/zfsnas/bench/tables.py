"""The report's tables, shaped like the ones our users publish, as Markdown and CSV.

Per matrix section (report.Section): the configurations with only the identity columns that differ;
compression x recordsize pivots per figure; write-size sweeps (total size against MB/s with the
run's zfs_dirty_data_max); CrystalDiskMark's own text lines. Units say which: MB/s is 10^6 bytes/s,
MiB/s 2^20, GiB 2^30. A figure of several repeats reads `median (min-max)`, runs counted.
Owns formatting only; the figures come from report.py.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .report import GIB, MIB, Section, Stat, Summary

DIMENSIONS = ("property compression", "property recordsize", "property volblocksize")
SIZE_KEYS = ("size", "data bytes")


@dataclass(frozen=True)
class Column:
    header: str
    figure: str                          # a report.FIGURES name, or "" for a computed one
    scale: float
    digits: int
    compute: Callable[[Section, Summary], float | None] | None = None

    def stat(self, section: Section, summary: Summary) -> Stat | None:
        if self.compute is not None:
            value = self.compute(section, summary)
            return None if value is None else Stat(value, value, value, 1)
        stat = summary.get(self.figure)
        return None if stat is None else stat.scaled(self.scale)

    def cell(self, section: Section, summary: Summary) -> str:
        return fmt(self.stat(section, summary), self.digits)


def fmt(stat: Stat | None, digits: int) -> str:
    """`median`, or `median (min-max)` when repeats differ: a spread is never hidden."""
    if stat is None:
        return ""
    text = f"{stat.median:.{digits}f}"
    if stat.n > 1 and f"{stat.low:.{digits}f}" != f"{stat.high:.{digits}f}":
        text += f" ({stat.low:.{digits}f}-{stat.high:.{digits}f})"
    return text


FIGURE_COLUMNS = (
    Column("MB/s", "throughput", 1e-6, 1),
    Column("MiB/s", "throughput", 1 / MIB, 1),
    Column("IOPS", "iops", 1, 1),
    Column("latency us", "latency_us", 1, 2),
    Column("wall s", "seconds", 1, 1),
    Column("ratio", "ratio", 1, 3),
    Column("on-disk GiB", "used", 1 / GIB, 1),
    Column("logical GiB", "logical", 1 / GIB, 1),
    Column("% of uncompressed", "", 1, 1, lambda section, s: section.percent_of_uncompressed(s)),
    Column("CPU user %", "cpu_user", 100, 1),
    Column("CPU system %", "cpu_system", 100, 1),
)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    code: list[str] = field(default_factory=list)   # preformatted lines (CrystalDiskMark) instead of rows


def _short(key: str) -> str:
    return key.split(" ", 1)[-1] if " " in key else key


def _present(section: Section, summaries: list[Summary]) -> list[Column]:
    return [c for c in FIGURE_COLUMNS if any(c.stat(section, s) is not None for s in summaries)]


def configurations_table(section: Section) -> Table:
    """Every configuration in matrix order: the identity columns that differ, runs, every figure."""
    columns = _present(section, section.summaries)
    varying = [k for k in section.varying if k != "data bytes" or "size" not in section.varying]
    differs = any(s.differs for s in section.summaries)
    headers = ["config", *map(_short, varying), "runs", *(c.header for c in columns)] + (["differs"] if differs else [])
    rows = []
    for s in section.summaries:
        flat = s.config.flat()
        rows.append([s.id, *(flat.get(k, "") for k in varying), str(s.runs), *(c.cell(section, s) for c in columns)]
                    + ([s.differs] if differs else []))
    return Table(f"{section.matrix}: configurations", headers, rows,
                 "MB/s = 10^6 bytes/s, MiB/s = 2^20 bytes/s, GiB = 2^30 bytes; several runs read median (min-max).")


def _groups(section: Section, free: tuple[str, ...]) -> list[list[Summary]]:
    """The section's configurations grouped by every identity field except `free`, in matrix order."""
    groups: dict[tuple[tuple[str, str], ...], list[Summary]] = {}
    for s in section.summaries:
        key = tuple(sorted((k, v) for k, v in s.config.flat().items() if k not in free))
        groups.setdefault(key, []).append(s)
    return list(groups.values())


def pivot_tables(section: Section) -> list[Table]:
    """compression (rows) x recordsize (columns), one table per figure, for every group of
    configurations that differ only in those two and have at least two of each."""
    tables = []
    for group in _groups(section, DIMENSIONS):
        compressions = list(dict.fromkeys(s.compression for s in group))
        sizes = list(dict.fromkeys(s.recordsize for s in group))
        if len(compressions) < 2 or len(sizes) < 2:
            continue
        cells = {(s.compression, s.recordsize): s for s in group}
        where = _where(group[0])
        for column in _present(section, group):
            rows = [[c, *(column.cell(section, cells[c, r]) if (c, r) in cells else "" for r in sizes)]
                    for c in compressions]
            # A figure measured along one axis only is a column of the configurations table already.
            if sum(any(row[1:]) for row in rows) < 2 or sum(any(col) for col in list(zip(*rows))[1:]) < 2:
                continue
            tables.append(Table(f"{section.matrix}: {column.header} by compression and recordsize{where}",
                                [f"compression \\ recordsize ({column.header})", *sizes], rows))
    return tables


def _where(summary: Summary) -> str:
    return f" ({summary.config.workload}, size {summary.config.size})"


def write_size_tables(section: Section) -> list[Table]:
    """Total write size against throughput, with the zfs_dirty_data_max the run had: the
    "fast until dirty data fills" curve as rows, in matrix order."""
    tables = []
    for group in _groups(section, SIZE_KEYS):
        if len({s.total_bytes for s in group}) < 2:
            continue
        rows = []
        for s in group:
            total, dirty = s.total_bytes, s.dirty_data_max
            rows.append([s.config.size, "" if total is None else f"{total / GIB:.1f}",
                         "" if dirty is None else f"{dirty / GIB:.1f}",
                         "" if not (total and dirty) else f"{total / dirty:.2f}", str(s.runs),
                         FIGURE_COLUMNS[0].cell(section, s), FIGURE_COLUMNS[1].cell(section, s)])
        tables.append(Table(f"{section.matrix}: throughput by total write size ({group[0].label})",
                            ["size", "total GiB", "zfs_dirty_data_max GiB", "x dirty", "runs", "MB/s", "MiB/s"], rows))
    return tables


# --- CrystalDiskMark --------------------------------------------------------------------------------

_CDM = re.compile(r"cdm-(?P<kind>seq|rnd)(?P<block>\d+)(?P<unit>[km])-q(?P<q>\d+)t(?P<t>\d+)-(?P<dir>read|write)$")


def cdm_test(workload: str) -> tuple[str, str, int, int, str] | None:
    """(SEQ/RND, block as CDM writes it, queue depth, threads, read/write) of a cdm-* fio job."""
    m = _CDM.match(workload)
    if not m:
        return None
    return m["kind"].upper(), f"{m['block']}{m['unit'].upper()}iB", int(m["q"]), int(m["t"]), m["dir"]


def cdm_line(kind: str, block: str, q: int, t: int, mb_per_s: float, iops: float, latency_us: float) -> str:
    """One result as CrystalDiskMark's text export prints it, column widths included:
    `  SEQ    1MiB (Q=  8, T= 1):   216.271 MB/s [    206.3 IOPS] < 38555.55 us>`."""
    return f"  {kind} {block:>7} (Q={q:>3}, T={t:>2}): {mb_per_s:9.3f} MB/s [{iops:9.1f} IOPS] <{latency_us:9.2f} us>"


def _best(summary: Summary) -> tuple[float, float, float]:
    """CrystalDiskMark reports the best of its N passes: the repeat of highest throughput, with that
    repeat's IOPS and latency (the three figures are kept per repeat in the same order)."""
    tp, iops, lat = summary.get("throughput"), summary.get("iops"), summary.get("latency_us")
    i = max(range(len(tp.values)), key=tp.values.__getitem__) if tp else 0

    def at(stat: Stat | None) -> float:
        return stat.values[i] if stat and i < len(stat.values) else (stat.median if stat else 0.0)
    return at(tp) / 1e6, at(iops), at(lat)


def cdm_tables(section: Section) -> list[Table]:
    tables = []
    for group in _groups(section, ("workload",)):
        tests = [(test, s) for s in group if (test := cdm_test(s.config.workload)) is not None]
        if not tests:
            continue
        lines = ["* MB/s = 1,000,000 bytes/s", ""]
        rows = []
        for direction in ("read", "write"):
            lines.append(f"[{direction.title()}]")
            for (kind, block, q, t, d), s in tests:
                if d == direction:
                    tp = s.get("throughput")
                    lines.append(cdm_line(kind, block, q, t, *_best(s)))
                    rows.append([f"{kind} {block} Q{q}T{t}", d, str(s.runs), f"{_best(s)[0]:.3f}",
                                 fmt(tp.scaled(1e-6) if tp else None, 3), fmt(s.get("iops"), 1),
                                 fmt(s.get("latency_us"), 2)])
            lines.append("")
        first = group[0]
        title = f"{section.matrix}: CrystalDiskMark, {first.label} ({first.config.size})"
        tables.append(Table(title, ["test", "direction", "runs", "best MB/s", "median MB/s", "IOPS", "latency us"],
                            rows, "Best of the runs, as CrystalDiskMark reports; median (min-max) beside it.",
                            code=lines[:-1]))
    return tables


def section_tables(section: Section) -> list[Table]:
    return [configurations_table(section), *pivot_tables(section), *write_size_tables(section),
            *cdm_tables(section)]


# --- renderings ----------------------------------------------------------------------------------------

def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def table_markdown(table: Table) -> str:
    out = [f"### {table.title}", ""]
    if table.code:
        out += ["```", *table.code, "```", ""]
    out += ["| " + " | ".join(map(_md_cell, table.headers)) + " |", "|" + "---|" * len(table.headers)]
    out += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in table.rows]
    if table.note:
        out += ["", table.note]
    return "\n".join(out) + "\n"


def markdown(sections: list[Section]) -> str:
    parts = ["# zfsnas-bench report", ""]
    for section in sections:
        parts += [f"## {section.title}", ""]
        parts += [table_markdown(t) for t in section_tables(section)]
    return "\n".join(parts)


def table_csv(table: Table) -> str:
    """A title line, the header line and the rows, then a blank line."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([table.title])
    writer.writerow(table.headers)
    writer.writerows(table.rows)
    writer.writerow([])
    return buf.getvalue()


def to_csv(sections: list[Section]) -> str:
    """Every table of every section (spreadsheets open it as one sheet)."""
    return "".join(table_csv(t) for section in sections for t in section_tables(section))
