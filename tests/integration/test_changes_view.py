"""The Changes view, the Benchmarks history and the Overview's disk row through a real Prometheus
(Debian's package) evaluating our rules, read with the dashboards' own queries.

Recorded histories (tests/dashboards/histories.py, seeded: module-parameter changes, two at once, a
revert, dataset-property changes, write workloads, idle stretches and bursts on either side, quiet
disks or ARC, a failing disk) are served live, each as one NAS, in minutes of 1 second: the
zfsnas.changes rules run as shipped but written with 1-second minutes and a 20-minute window
(alerts/generate.py renders both from the same code; the other groups run every 5 seconds, to spare
the machine). Beside them the real exporter reads a
benchmark store in which a matrix ran twice with zfs_dirty_data_max changed between the runs.

Checked, for every change of every history: the Changes table's row (old -> new, when) and each
signal's before and after value, within TOLERANCE of what the history was built with, or "too
little activity" (NaN) where it was built with too little; the latest-change panels; the
Benchmarks history naming the parameter that differs, with its verdict; the Overview's disk row
counting each history's failing disk.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.bench.configs import configuration
from tests.conftest import free_port
from tests.dashboards.histories import History, generate
from tests.dashboards.queries import SUBSTITUTIONS, load, panels
from tests.dashboards.test_changes_rules import rules_with
from tests.integration.exporter_process import ExporterProcess
from tests.integration.prometheus import Prometheus
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

SEEDS = (101, 102, 103, 104)
# minutes (of one second here): the window, the gap before it, the minimum of activity, the
# evaluations in a row a change may be missed at (so it is seen up to MISSED + 1 steps late)
WINDOW, GAP, MIN_ACTIVE, MISSED = 24, 8, 5, 6
# Values agree within 3 % (scrapes every 0.5 s against 1-second steps) plus, where the window holds
# a burst, three steps' share of it (at either end a step is part busy, and a late scrape moves it).
# A rate is per second its samples span (not per step), so a scrape that comes too late for a step
# moves it no more than another value (seen: 168 of 172 values within 0.1 %, the others bursts);
# tests/dashboards/test_changes_rules.py holds the shipped rules exact.
TOLERANCE = 0.03
GiB = 1 << 30
TUNED = {"zfs_dirty_data_max": str(16 * GiB)}


class HistoryServer(ThreadingHTTPServer):
    """One history's /metrics, at the time since `start`."""

    def __init__(self, history: History, start: float):
        self.history, self.start = history, start

        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler):  # noqa: N802
                now = time.time()
                body = self.history.exposition(now - self.start, 1.0, stamp=now).encode()
                handler.send_response(200)
                handler.send_header("Content-Type", "text/plain; version=0.0.4")
                handler.end_headers()
                try:
                    handler.wfile.write(body)
                except BrokenPipeError:   # a scrape given up, or Prometheus stopping
                    pass

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def rule_file(path: Path) -> Path:
    """The shipped rules with the Changes view in 1-second minutes, a WINDOW-minute window and room
    for this busy machine: up to MISSED evaluations in a row may find a scrape not yet stored."""
    return rules_with(path, WINDOW, MIN_ACTIVE, minute_seconds=1, gap_minutes=GAP, missed_steps=MISSED)


def store_matrix_run(db: Path, run: str, finished: float, parameters: dict) -> list:
    """A matrix of two cells (lz4, zstd-3) run once, as `zfsnas-bench run` stores it."""
    store = Store(db)
    configs = [configuration(matrix="dirty", compression=c, parameters=parameters) for c in ("lz4", "zstd-3")]
    try:
        store.start_matrix(run, "dirty", "tank/scratch", len(configs))
        for n, config in enumerate(configs):
            store.record_result(run, n, config, started=finished - 30, finished=finished + n,
                                figures=ResultFigures(throughput_bytes_per_second=(400e6 if not parameters else 520e6)
                                                      + n * 1e6, compressratio=1.5, cpu_busy_ratio=0.3))
        store.finish_matrix(run, "complete")
    finally:
        store.close()
    return configs


def as_sent(expr: str) -> str:
    for name, value in {**SUBSTITUTIONS, "$__range": "1h"}.items():
        expr = expr.replace(name, value)
    return expr


def targets(dashboard: str, title: str) -> list[str]:
    panel = next(p for p in panels(load(dashboard)) if p["title"] == title)
    return [as_sent(t["expr"]) for t in panel["targets"]]


def close(seen: float, built: float, tolerance: float) -> bool:
    return math.isfinite(seen) and abs(seen / built - 1) <= tolerance


@pytest.fixture(scope="module")
def lived(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("changes-view")
    histories = [generate(seed, WINDOW, MIN_ACTIVE, GAP, seen_after=(0, MISSED + 1)) for seed in SEEDS]
    start = time.time() + 3          # Prometheus is up and scraping by then
    servers = [HistoryServer(h, start) for h in histories]
    db = tmp / "bench.sqlite"
    started = []
    try:
        exporter = ExporterProcess(free_port(), "--collector.disable-defaults", "--collector.bench", "--bench.db",
                                   str(db), "--bench.refresh-interval=1", log_path=tmp / "exporter.log")
        started.append(exporter)
        exporter.wait_ready()
        scraped = {f"127.0.0.1:{s.server_port}": {"instance": s.history.instance} for s in servers}
        scraped[f"127.0.0.1:{exporter.port}"] = {"instance": "bench"}
        port = free_port()
        itself = f"  - job_name: prometheus\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        prom = Prometheus(tmp / "prom", port, scraped, scrape_interval="500ms", evaluation_interval="5s",
                          rule_files=[str(rule_file(tmp / "rules.yml"))], extra_config=itself)
        started.append(prom)
        first = store_matrix_run(db, "run-1", time.time(), {})
        prom.wait_for(f'count(config:zfs_bench_throughput:per_run{{config=~"{first[0].id}|{first[1].id}"}}) == 2',
                      timeout=60)
        second = store_matrix_run(db, "run-2", time.time(), TUNED)
        end = start + max(h.minutes for h in histories) + 3   # the last after window is full and recorded
        time.sleep(max(0.0, end - time.time()))
        made = sum(len(h.changes) for h in histories)
        try:
            prom.wait_for(f"count(change:zfs_config:timestamp_seconds) == {made}")
        except AssertionError:
            seen = [(r["metric"]["instance"], r["metric"]["what"], r["metric"]["to"], r["value"][1])
                    for r in prom.query("change:zfs_config:timestamp_seconds")]
            missed = prom.query('sum(prometheus_rule_group_iterations_missed_total{rule_group=~".*zfsnas.changes"})')
            unhealthy = [(r["name"], r.get("lastError")) for g in prom.api("rules")["groups"] for r in g["rules"]
                         if r["health"] != "ok"]
            raise AssertionError(f"{made} changes made, {len(seen)} seen: {sorted(seen)}; made: "
                                 f"{[(h.instance, c.label, c.new, c.minute) for h in histories for c in h.changes]}; "
                                 f"evaluations missed: {missed}; rules failing: {unhealthy}") from None
        prom.wait_for(f'count(zfs_bench_config_change_info{{config=~"{second[0].id}|{second[1].id}"}}) == 2')
        yield {"prom": prom, "histories": histories, "start": start, "first": first, "second": second,
               "tmp": tmp}
    finally:
        for daemon in reversed(started):
            daemon.stop()
        for server in servers:
            server.shutdown()


def column(target: dict, renames: dict[str, str]) -> str | tuple[str, str]:
    """A table target's column: (signal, side) for a signal's, else its name ("when", ...)."""
    found = re.search(r'change:zfs_signal:(before|after)\{[^}]*signal="(\w+)"', target["expr"])
    return (found[2], found[1]) if found else renames[f"Value #{target['refId']}"]


def changes_table(prom) -> dict[tuple, dict]:
    """The Changes table as Grafana merges it: {(instance, what, old, new): {column: value}}."""
    panel = next(p for p in panels(load("changes")) if p["title"] == "Changes")
    renames = next(t for t in panel["transformations"] if t["id"] == "organize")["options"]["renameByName"]
    rows: dict[tuple, dict] = {}
    for target in panel["targets"]:
        for series in prom.query(as_sent(target["expr"])):
            labels = series["metric"]
            key = (labels["instance"], labels["what"], labels["from"], labels["to"])
            rows.setdefault(key, {"kind": labels["kind"]})[column(target, renames)] = float(series["value"][1])
    return rows


def test_every_change_shows_what_its_history_was_built_with(lived):
    rows = changes_table(lived["prom"])
    problems, checked, nan, seen = [], 0, 0, {}
    for history in lived["histories"]:
        for change in history.changes:
            row = rows.get((history.instance, change.label, change.old, change.new))
            if row is None:
                problems.append(f"{history.instance}: no row for {change.label} {change.old} -> {change.new}")
                continue
            assert row["kind"] == change.kind
            when = row["when"] / 1000 - lived["start"]
            # seen within a scrape and two steps, at the whole second (floor)
            assert change.minute - 1 <= when <= change.minute + MISSED + 2, (change, when)
            assert row["after window"] == 1
            for side in ("before", "after"):
                for signal, built in getattr(change, side).items():
                    value = row[(signal, side)]
                    partial = change.partial[side]
                    tolerance = TOLERANCE + (3 / partial if partial else 0)
                    seen[f"{history.instance} {change.label} {change.old}->{change.new} {signal} {side}"] = \
                        [value, built]
                    if built is None:
                        nan += 1
                        if not math.isnan(value):
                            problems.append(f"{history.instance} {change.label} {signal} {side}: {value}, built with "
                                            "too little activity")
                    else:
                        checked += 1
                        if not close(value, built, tolerance):
                            problems.append(f"{history.instance} {change.label} {signal} {side}: {value} against "
                                            f"{built} (tolerance {tolerance:.0%})")
    (lived["tmp"] / "seen.json").write_text(json.dumps(seen, indent=1))
    assert not problems, "\n".join(problems)
    assert checked >= 100 and nan >= 10, (checked, nan)
    assert len(rows) == sum(len(h.changes) for h in lived["histories"])   # nothing but the changes made


def test_the_latest_change_panels_show_each_nas_newest(lived):
    """Per NAS, the bars of its newest change(s) (two parameters set at once are both newest)."""
    for history in lived["histories"]:
        newest = [c for c in history.changes if c.minute == max(c.minute for c in history.changes)]
        before, after = targets("changes", "Write throughput while writes were queued: the latest change")
        for expr, side in ((before, "before"), (after, "after")):
            found = {(r["metric"]["what"], r["metric"]["from"], r["metric"]["to"]): float(r["value"][1])
                     for r in lived["prom"].query(expr) if r["metric"]["instance"] == history.instance}
            assert set(found) == {(c.label, c.old, c.new) for c in newest}, (history.instance, found)
            for change in newest:
                built, value = getattr(change, side)["write_throughput"], found[(change.label, change.old, change.new)]
                assert math.isnan(value) if built is None else close(value, built, TOLERANCE + 0.2), (value, built)


def test_the_benchmarks_history_names_the_changed_parameter(lived):
    """The matrix ran twice, zfs_dirty_data_max 4 GiB then 16 GiB: each second-run configuration's
    row says so beside the first-run one it follows, with its throughput against that one's and
    the verdict on its own runs (one run: none yet); every run is a point of "Runs over time"."""
    prom = lived["prom"]
    change, versus, verdict, *_ = targets("benchmarks", "History per configuration")
    words = {r["metric"]["config"]: (r["metric"]["previous_config"], r["metric"]["change"]) for r in prom.query(change)}
    first, second = lived["first"], lived["second"]
    assert words == {new.id: (old.id, "zfs_dirty_data_max 4 GiB -> 16 GiB") for old, new in zip(first, second)}
    ratios = {r["metric"]["config"]: float(r["value"][1]) for r in prom.query(versus)}
    assert ratios == pytest.approx({second[0].id: 520e6 / 400e6, second[1].id: 521e6 / 401e6})
    verdicts = {r["metric"]["config"]: r["metric"]["verdict"] for r in prom.query(verdict)}
    assert set(verdicts.values()) == {"no verdict before 4 runs"} and len(verdicts) == 4
    (runs,) = targets("benchmarks", "Runs over time")
    points = prom.api("query_range", query=runs, start=lived["start"] - 60, end=time.time(), step=1)["result"]
    assert {p["metric"]["config"] for p in points} == {c.id for c in first + second}


def test_the_overview_counts_each_failing_disk(lived):
    failing, = targets("overview", "Failing disks")
    warning, = targets("overview", "Disks with a warning")
    healthy, = targets("overview", "Healthy disks")
    counts = {name: {(r["metric"]["instance"], r["metric"]["pool"]): float(r["value"][1])
                     for r in lived["prom"].query(expr)} for name, expr in
              (("failing", failing), ("warning", warning), ("healthy", healthy))}
    for history in lived["histories"]:
        for pool in history.pools:
            disks = [d for d, p in history.disks.items() if p == pool]
            kinds = [history.failing.get(d) for d in disks]
            expected = {"failing": sum(k in ("smart", "zfs") for k in kinds), "warning": kinds.count("sectors"),
                        "healthy": kinds.count(None)}
            found = {name: counts[name].get((history.instance, pool)) for name in counts}
            assert found == expected, (history.instance, pool, history.failing)
    assert sum(counts["failing"].values()) == len(lived["histories"])
