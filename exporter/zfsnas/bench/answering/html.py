"""The report as one self-contained HTML page: what each matrix found first (document.opening: at
most five sentences, the `recommend` pick last), then per matrix the charts of charts.py embedded
as data: URIs (PNG), the pick's notes (its line per workload and setting folded) and every table
of tables.py, so the file can be mailed or attached to a forum post as is. Without matplotlib the
page has the tables and says what to install. Owns the page's markup only.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape

from . import charts
from .axes import Selector
from .document import opening
from .recommend import Recommendation, recommend
from .report import Section
from .tables import Table, section_tables

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
figure { margin: 1em 0; } img.chart { max-width: 100%; height: auto; border: 1px solid #eee; }
p.note { color: #555; font-size: 0.85em; } p.pick { background: #eef6ee; padding: 0.6em; }
ol.findings { background: #eef6ee; padding: 0.6em 0.6em 0.6em 2.2em; line-height: 1.45; }
ol.findings li { margin: 0.2em 0; }
"""


def _table(table: Table) -> str:
    parts = [f"<h3>{escape(table.title)}</h3>"]
    if table.code:
        parts.append("<pre>" + escape("\n".join(table.code)) + "</pre>")
    parts.append("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in table.headers) + "</tr></thead><tbody>")
    parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in table.rows]
    parts.append("</tbody></table>")
    if table.note:
        parts.append(f'<p class="note">{escape(table.note)}</p>')
    return "\n".join(parts)


def _findings(lines: list[str]) -> str:
    return '<ol class="findings">' + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ol>"


def _pick_details(rec: Recommendation) -> str:
    """What the pick's sentence leaves out: its notes and the pick per workload and setting."""
    if not rec.candidates and not rec.conditional:   # nothing to choose between: said by the findings
        return ""
    notes = "".join(f"<br>{escape(n)}" for n in rec.confidence + rec.notes)
    lines = "".join(f"<li>{escape(where)}: {escape(sentence)}</li>" for where, sentence in rec.per_workload)
    head = f'<p class="pick">{escape(rec.sentence)}{notes}</p>'
    # folded: one line per workload and setting would push the charts a screen down
    return head + (f'<details><summary>the pick per workload and setting ({len(rec.per_workload)})</summary>'
                   f'<ul class="note">{lines}</ul></details>' if lines else "")


def page(sections: list[Section], title: str = "zfsnas-bench report", baseline: Selector | None = None,
         cdm: str | None = None, extra: list[Table] | None = None, extra_findings: list[str] | None = None,
         races: Mapping[str, list[str]] | None = None) -> str:
    """One section: titled by it, its findings the first lines. Several: every section's findings
    first, each under its title, then each section's details. `extra_findings` and `extra`: what
    follows every section, apart (predictions, never mixed with measured results): its own findings
    list, then its tables. `races`: per matrix, how its races ended, with the pick's details."""
    with_charts = charts.available()
    recs = [recommend(section) for section in sections]
    blocks = [opening(section, rec) for section, rec in zip(sections, recs)]
    single = len(sections) == 1
    heading = sections[0].title if single else title
    body = [f"<h1>{escape(heading)}</h1>"]
    if single:
        body.append(_findings(blocks[0].lines()))
    else:
        for section, block in zip(sections, blocks):
            body.append(f'<h2 class="findings">{escape(section.title)}</h2>{_findings(block.lines())}')
    if not with_charts:
        body.append(f'<p class="note">{escape(charts.INSTALL)}</p>')
    for section, rec, block in zip(sections, recs, blocks):
        body.append(f"<h2>{escape(section.title)}{': details' if single else ''}</h2>")
        if with_charts:
            for name, images in charts.render(section, baseline):
                data = base64.b64encode(images["png"]).decode()
                body.append(f'<figure><img class="chart" data-chart="{escape(name)}" alt="{escape(section.matrix)} '
                            f'{escape(name)} chart" src="data:image/png;base64,{data}"></figure>')
        body.append(_pick_details(rec))
        if said := (races or {}).get(section.matrix):
            body.append('<p class="note">' + "<br>".join(escape(line) for line in said) + "</p>")
        evidence = block.table()
        body += [_table(t) for t in ([evidence] if evidence.rows else []) + section_tables(section, baseline, cdm)]
    if extra_findings:
        body.append(f'<h2 class="findings">Predicted, not measured</h2>{_findings(extra_findings)}')
    body += [_table(t) for t in extra or []]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(heading)}</title><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
