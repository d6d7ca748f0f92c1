"""The report as one self-contained HTML page: every table of tables.py, the `recommend` pick per
matrix, and the charts of charts.py embedded as data: URIs (PNG), so the file can be mailed or
attached to a forum post as is. Without matplotlib the page has the tables and says what to install.
Owns the page's markup only.
"""

from __future__ import annotations

import base64
from html import escape

from . import charts
from .axes import Selector
from .recommend import recommend
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


def _pick(section: Section) -> str:
    rec = recommend(section)
    if len(rec.candidates) < 2:   # one configuration, or tests of one (CrystalDiskMark): no choice to state
        return ""
    text = ("Pick: " if rec.pick else "No pick: ") + rec.reason
    notes = "".join(f"<br>{escape(n)}" for n in rec.confidence + rec.notes)
    lines = "".join(f"<li>{escape(where)}: {escape(sentence)}</li>" for where, sentence in rec.per_workload)
    return f'<p class="pick">{escape(text)}{notes}</p>' + (f'<ul class="note">{lines}</ul>' if lines else "")


def page(sections: list[Section], title: str = "zfsnas-bench report", baseline: Selector | None = None,
         cdm: str | None = None, extra: list[Table] | None = None) -> str:
    """The page; `extra`: tables shown after every section, apart (predictions)."""
    with_charts = charts.available()
    body = [f"<h1>{escape(title)}</h1>"]
    if not with_charts:
        body.append(f'<p class="note">{escape(charts.INSTALL)}</p>')
    for section in sections:
        body.append(f"<h2>{escape(section.title)}</h2>")
        body.append(_pick(section))
        if with_charts:
            for name, images in charts.render(section):
                data = base64.b64encode(images["png"]).decode()
                body.append(f'<figure><img class="chart" data-chart="{escape(name)}" alt="{escape(section.matrix)} '
                            f'{escape(name)} chart" src="data:image/png;base64,{data}"></figure>')
        body += [_table(t) for t in section_tables(section, baseline, cdm)]
    body += [_table(t) for t in extra or []]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
