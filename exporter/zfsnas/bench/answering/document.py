"""The whole report as Markdown or CSV: what each experiment found first, then every table.

A report opens with the findings (findings.py) of each matrix, at most five sentences, the pick of
`recommend` last among them: in Markdown as the first lines (a list, one sentence a line), in CSV as
`# ` comment lines above the tables (the HTML page, html.py, shows the same block first). The
evidence table the sentences cite leads each section's tables, the others follow (tables.py); a
race's verdict, kept with its run, comes under the section's title (in CSV after the findings). CSV
figures keep their precision (tables.precise). Owns the order of the parts only.
"""

from __future__ import annotations

from collections.abc import Mapping

from .axes import Selector
from .findings import Findings, findings
from .recommend import Recommendation, recommend
from .report import Section
from .tables import Table, md_inline, precise, section_tables, table_csv, table_markdown


def opening(section: Section, rec: Recommendation | None = None, focus: str | None = None) -> Findings:
    """The findings of `section`, closed by recommend's answer when the matrix has options to choose
    between (`rec`, or the default recommendation)."""
    rec = rec if rec is not None else recommend(section)
    return findings(section, rec.sentence if rec.candidates or rec.conditional else None, focus)


def finding_lines(found: list[tuple[Section, Findings]]) -> list[str]:
    """Each section's sentences, one a line: bare for one section, each after its matrix for more."""
    if len(found) == 1:
        return [f"- {line}" for line in found[0][1].lines()]
    return [f"- {section.matrix}: {line}" for section, block in found for line in block.lines()]


def _tables(section: Section, block: Findings, baseline: Selector | None, cdm: str | None) -> list[Table]:
    evidence = block.table()
    return ([evidence] if evidence.rows else []) + section_tables(section, baseline, cdm)


def markdown(sections: list[Section], baseline: Selector | None = None, cdm: str | None = None,
             races: Mapping[str, list[str]] | None = None) -> str:
    """`races`: per matrix, how its races ended (racing.stored_verdict), under the section's title."""
    found = [(section, opening(section)) for section in sections]
    parts = [*map(md_inline, finding_lines(found)), "", "# zfsnas-bench report", ""]
    for section, block in found:
        parts += [f"## {md_inline(section.title)}", ""]
        if said := (races or {}).get(section.matrix):
            parts += [*map(md_inline, said), ""]
        parts += [table_markdown(t) for t in _tables(section, block, baseline, cdm)]
    return "\n".join(parts)


def to_csv(sections: list[Section], baseline: Selector | None = None, cdm: str | None = None,
           races: Mapping[str, list[str]] | None = None) -> str:
    """The findings as `# ` lines (then how the races ended, as `# ` lines too), then every table of
    every section (spreadsheets open it as one sheet; pandas reads the tables with comment="#")."""
    found = [(section, opening(section)) for section in sections]
    head = "".join(f"# {line[2:]}\n" for line in finding_lines(found))
    head += "".join(f"# {s.matrix}: {line}\n" for s in sections for line in (races or {}).get(s.matrix, []))
    with precise():
        body = "".join(table_csv(t) for section, block in found for t in _tables(section, block, baseline, cdm))
    return head + body


__all__ = ["finding_lines", "markdown", "opening", "to_csv"]
