"""Read the generated dashboards: every PromQL query of every panel, variable and annotation."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
CHANGE_ANNOTATIONS = ("Module parameter changes", "Dataset property changes")
NAMES = ("overview", "arc", "write-path", "datasets", "disks", "benchmarks", "changes")
# Series that exist only after something happened while Prometheus watched: a change of a module
# parameter or dataset property (the Changes view), a benchmark run (the Benchmarks history). Their
# queries run everywhere, but return data only where a test made such a thing happen.
EVENT_SERIES = ("change:zfs_", "config:zfs_bench_throughput:per_run")
# What Grafana puts in for "All" (allValue ".*"), for $__rate_interval at a 1 s scrape interval and
# for a 10 s time range ($__range; $__range_s in seconds, replaced first).
SUBSTITUTIONS = {"$__rate_interval": "10s", "$__range_s": "10", "$__range": "10s", "$nas": ".*", "$instance": ".*",
                 "$pool": ".*", "$dataset": ".*", "$disk": ".*", "$vdev": ".*", "$matrix": ".*", "$config": ".*"}


@dataclass(frozen=True)
class Query:
    dashboard: str
    where: str      # panel title, "variable <name>" or "annotation <name>"
    expr: str
    legend: str = ""  # the panel target's legendFormat

    @property
    def after_an_event(self) -> bool:
        """Empty until a change or a benchmark run happens under Prometheus's eyes (EVENT_SERIES)."""
        return any(series in self.expr for series in EVENT_SERIES)

    def promql(self) -> str:
        """The expression as Grafana sends it with every variable on All."""
        expr = self.expr
        label_values = re.fullmatch(r"label_values\((.*), *(\w+)\)", expr)
        if label_values:  # Grafana answers label_values(m, l) from the series of m
            expr = f"count by ({label_values[2]}) ({label_values[1]})"
        for name, value in SUBSTITUTIONS.items():
            expr = expr.replace(name, value)
        assert not re.search(r"\$[A-Za-z_{]", expr), f"unsubstituted variable in {self}"  # "$1" is label_replace's
        return expr


def load(name: str) -> dict:
    return json.loads((DASHBOARDS / f"{name}.json").read_text())


def panels(board: dict) -> list[dict]:
    out = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return [p for p in out if p["type"] != "row"]


def queries(name: str) -> list[Query]:
    board = load(name)
    out = [Query(name, p["title"], t["expr"], t.get("legendFormat", "")) for p in panels(board)
           for t in p.get("targets", [])]
    out += [Query(name, f"variable {v['name']}", v["query"]) for v in board["templating"]["list"]
            if v["type"] == "query"]
    out += [Query(name, f"annotation {a['name']}", annotation_expr(a)) for a in board["annotations"]["list"]
            if annotation_expr(a) and a["name"] not in CHANGE_ANNOTATIONS]
    return out


def annotation_expr(annotation: dict) -> str:
    """A Prometheus annotation's query: in its target, where Grafana 11 keeps it."""
    return annotation.get("target", {}).get("expr", "")


def change_queries(name: str) -> dict[str, str]:
    """{annotation name: expr} of the configuration-change annotations: events, empty while nothing
    changes, so not in queries() (tests/integration/test_change_annotations.py checks them)."""
    return {a["name"]: annotation_expr(a) for a in load(name)["annotations"]["list"] if a["name"] in CHANGE_ANNOTATIONS}


def render_legend(legend: str, labels: dict[str, str]) -> str:
    """A series' name as Grafana's Prometheus data source writes it from a legendFormat: each
    `{{label}}` becomes the label's value, and a label the series lacks becomes its *name*."""
    return re.sub(r"\{\{\s*(.+?)\s*\}\}", lambda m: labels.get(m[1]) or m[1], legend)


def legend_problems(query: Query, result: list[dict]) -> list[str]:
    """What a reader would trip on in one target's legend over its series: a label the series lack
    (Grafana would print the label's name) or two series that read alike."""
    if not query.legend or query.legend == "{{le}}":
        return []
    problems = []
    names = [render_legend(query.legend, r["metric"]) for r in result]
    for r in result:
        missing = [label for label in re.findall(r"\{\{\s*(.+?)\s*\}\}", query.legend) if not r["metric"].get(label)]
        if missing:
            problems.append(f"{query.dashboard} / {query.where}: {missing} missing in {r['metric']}")
            break
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"{query.dashboard} / {query.where}: {len(twice)} legends read alike, e.g. {twice[0]!r}")
    return problems


def all_queries() -> list[Query]:
    return [q for name in NAMES for q in queries(name)]
