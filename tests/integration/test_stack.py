"""The stack for real on 127.0.0.1: exporter on changing fixtures, node_exporter, Prometheus with the
zfsnas rules, Alertmanager and a webhook receiver.

- Every query of every panel, variable and annotation of the seven dashboards runs without error
  and returns data (variables on All, $__rate_interval at the 1 s scrape interval), but those that
  wait for a change or a benchmark run to happen (tests/integration/test_changes_view.py).
- A benchmark result that drops in the store (the bench runner's own Store API) fires
  ZfsBenchThroughputRegression through Prometheus and Alertmanager to the webhook.

The exporter runs every collector on the fixtures their owners wrote: the 2.3.2 kstat tree, the
disk tree (diskstats, sysfs, udev data) laid over it, the `zfs`/`zpool` stand-in replaying the
OpenZFS 2.3 recordings, and a bench store written through the runner's Store. A panel whose
metrics no collector serves fails here, by name.
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
from tests.conftest import copy_commands, copy_tree, free_port, zfs_commands
from tests.dashboards.queries import all_queries, legend_problems, render_legend
from tests.integration.daemon import Daemon
from tests.integration.exporter_process import ExporterProcess
from tests.integration.kernel import Kernel, TxgWriter
from tests.integration.prometheus import Prometheus
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

ROOT = Path(__file__).resolve().parents[2]
NAS = "nas1"  # both jobs carry the same instance, as deploy/prometheus/prometheus.yml sets it
BENCH = {"matrix": "ci", "workload": "seqwrite", "size": "64M"}
GiB = 1 << 30


def exporter_flags(root: Path, tmp: Path, bench_db: Path) -> list[str]:
    """Every collector on, zfs/zpool replaced by the stand-in, refreshes every second."""
    commands = copy_commands(tmp / "commands", iostat="zpool-2.3.2", smart="awake")
    return ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
            "--path.udev.data", str(root / "udev" / "data"), *zfs_commands(commands),
            "--collector.vdevlatency", "--bench.db", str(bench_db),
            *[f"--{name}.refresh-interval=1" for name in ("pools", "datasets", "vdevlatency", "bench")]]


# --- a store with benchmark history -----------------------------------------------------------

def store_result(db: Path, throughput: float, finished: float, running: bool = False, **config) -> None:
    """One run of BENCH (or BENCH with `config` changes) through the bench runner's Store, as
    `zfsnas-bench run` records it; `running` leaves it in progress."""
    store = Store(db)
    try:
        run_id = f"run-{finished:.3f}"
        store.start_matrix(run_id, "ci", "tank/bench", 1)
        result = store.start_result(run_id, 0, configuration(**{**BENCH, **config}), 0, "tank/bench/c0",
                                    started=finished - 30)
        if not running:
            store.finish_result(result, "complete", finished=finished, figures=ResultFigures(
                throughput_bytes_per_second=throughput, compressratio=1.9, cpu_busy_ratio=0.4, duration_seconds=30.0))
            store.finish_matrix(run_id, "complete")
    finally:
        store.close()


# --- Alertmanager and the webhook it posts to -------------------------------------------------------

class Webhook(ThreadingHTTPServer):
    def __init__(self, port: int):
        self.alerts: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler):  # noqa: N805
                body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
                self.alerts.extend(body["alerts"])
                handler.send_response(200)
                handler.end_headers()

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", port), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def alertmanager_config(webhook_port: int) -> str:
    """deploy/alertmanager/alertmanager.yml with the example receiver pointed at the test's webhook
    and short waits."""
    text = (ROOT / "deploy/alertmanager/alertmanager.yml").read_text()
    text = text.replace("http://127.0.0.1:9099/alerts", f"http://127.0.0.1:{webhook_port}/alerts")
    return text.replace("group_wait: 30s", "group_wait: 1s").replace("group_interval: 5m", "group_interval: 1s")


def start_alertmanager(tmp: Path, started: list) -> tuple[Webhook, int]:
    """Alertmanager with the stack's configuration posting to a new webhook; the daemon joins `started`."""
    webhook = Webhook(free_port())
    port = free_port()
    (tmp / "alertmanager.yml").write_text(alertmanager_config(webhook.server_port))
    started.append(Daemon(["prometheus-alertmanager", f"--config.file={tmp / 'alertmanager.yml'}",
                           f"--storage.path={tmp / 'am-data'}", f"--web.listen-address=127.0.0.1:{port}",
                           "--cluster.listen-address="], tmp / "alertmanager.log", f"http://127.0.0.1:{port}/-/ready"))
    return webhook, port


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    root = copy_tree(tmp / "tree", disks=True)
    bench_db = tmp / "bench.sqlite"
    now = time.time()
    for n, throughput in enumerate((1.00 * GiB, 1.04 * GiB, 0.98 * GiB)):
        store_result(bench_db, throughput, now - 3600 * (3 - n))
    # The same cell after a tuning change: a configuration of its own, which names the change.
    store_result(bench_db, 1.10 * GiB, now - 1800, parameters={"zfs_dirty_data_max": str(16 * GiB)})
    # A run in progress: zfs_bench_running, the annotation of users without a Grafana token.
    store_result(bench_db, 0, now, running=True, compression="zstd")
    kernel, txgs = Kernel(root), TxgWriter(root / "proc/spl/kstat/zfs/tank/txgs")
    kernel.start()
    txgs.start()
    started = []
    try:
        exporter = ExporterProcess(free_port(), *exporter_flags(root, tmp, bench_db), log_path=tmp / "exporter.log")
        started.append(exporter)
        exporter.wait_ready()
        node_port = free_port()
        started.append(Daemon(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{node_port}",
                               "--collector.disable-defaults", "--collector.cpu"], tmp / "node.log",
                              f"http://127.0.0.1:{node_port}/metrics"))
        webhook, am_port = start_alertmanager(tmp, started)
        extra = (f"  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{node_port}']\n"
                 f"        labels: {{instance: {NAS}}}\n"
                 f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n")
        prom = Prometheus(tmp / "prom", free_port(), [f"127.0.0.1:{exporter.port}"],
                          rule_files=[str(ROOT / "alerts" / "zfsnas.rules.yml")], extra_config=extra,
                          target_labels={"instance": NAS})
        started.append(prom)
        prom.wait_for('up{job="zfsnas"} == 1')
        prom.wait_for('up{job="node"} == 1')
        yield {"prom": prom, "webhook": webhook, "bench_db": bench_db, "exporter": exporter, "tmp": tmp}
    finally:
        for daemon in reversed(started):
            daemon.stop()
        kernel.stop()
        txgs.stop()


FALLBACK = " or vector(0)"


def has_data(result: list[dict]) -> bool:
    return any(math.isfinite(float(r["value"][1])) for r in result)


def query_problem(prom, query) -> tuple[str, str] | None:
    """("error" or "empty", what) for a dashboard query that fails or returns no data; None if fine."""
    try:
        result = prom.query(query.promql())
    except Exception as exc:  # noqa: BLE001 - every failing query is reported, not just the first
        return "error", f"{query.dashboard} / {query.where}: {query.promql()}: {exc}"
    if query.after_an_event:   # a change, a run seen ending: tests/integration/test_changes_view.py
        return None
    if not has_data(result):
        return "empty", f"{query.dashboard} / {query.where}: {query.promql()}"
    if query.promql().endswith(FALLBACK):  # the fallback must not hide a misspelt metric
        if not has_data(prom.query(query.promql().removesuffix(FALLBACK))):
            return "empty", f"{query.dashboard} / {query.where} without its fallback: {query.promql()}"
    return None


def test_every_dashboard_query_returns_data(stack):
    """Rates, recording rules and 10 s windows fill over several scrapes and rule evaluations: the
    queries without data are asked again until they have it (a busy machine delays them), for at
    most 120 s; a query that fails is reported at once."""
    prom = stack["prom"]
    waiting, deadline = all_queries(), time.monotonic() + 120
    while True:
        problems = [(query, query_problem(prom, query)) for query in waiting]
        errors = [problem[1] for _, problem in problems if problem and problem[0] == "error"]
        empty = [problem[1] for _, problem in problems if problem and problem[0] == "empty"]
        waiting = [query for query, problem in problems if problem and problem[0] == "empty"]
        if errors or not waiting or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not errors, "queries failed:\n" + "\n".join(errors)
    assert not empty, f"{len(empty)} queries return no data:\n" + "\n".join(empty)


def test_every_legend_names_what_a_reader_sees(stack):
    """On one Prometheus without a `nas` label: no legend label is missing from its series (Grafana
    would print the label's name: "nas nas:9923"), no two series of a target read alike, and the
    instance reads as itself."""
    prom = stack["prom"]
    problems, seen = [], 0
    for query in all_queries():
        if query.legend and query.legend != "{{le}}":
            result = prom.query(query.promql())
            problems += legend_problems(query, result)
            seen += len(result)
    assert not problems, "\n".join(problems)
    assert seen > 100
    ratio = next(q for q in all_queries() if q.where == "Compression ratio" and q.dashboard == "datasets")
    names = {render_legend(ratio.legend, r["metric"]) for r in prom.query(ratio.promql())}
    assert {f"{NAS} tank", f"{NAS} backup/tank"} <= names, sorted(names)


def test_dashboards_join_node_exporter_by_instance(stack):
    prom = stack["prom"]
    prom.wait_for_samples(f'node_cpu_seconds_total{{instance="{NAS}"}}', "10s", 2)   # what rate() needs
    prom.wait_for_samples(f'instance:zfs_arc_hit_ratio:rate5m{{instance="{NAS}"}}', "10s", 3)   # evaluated a few times
    result = prom.query(f'1 - avg by (instance) (rate(node_cpu_seconds_total{{instance="{NAS}", '
                        'mode=~"idle|iowait"}[10s]))')
    assert [r["metric"]["instance"] for r in result] == [NAS]
    assert prom.scalar(f'max(zfs_exporter_collector_success{{instance="{NAS}"}})') == 1
    # The recording rule the overview and ZfsArcHitRatioCollapsed share sees the 9:1 hits of Kernel.
    assert prom.scalar(f'instance:zfs_arc_hit_ratio:rate5m{{instance="{NAS}"}}') == pytest.approx(0.9, abs=0.01)


def test_regression_alert_reaches_the_webhook(stack):
    prom, webhook = stack["prom"], stack["webhook"]
    prom.wait_for('zfs_bench_throughput_previous_median_bytes_per_second{compression="lz4"}')
    time.sleep(3)
    assert not [a for a in webhook.alerts if a["labels"]["alertname"] == "ZfsBenchThroughputRegression"], \
        "history within 15 % of its median must not fire"
    store_result(stack["bench_db"], 0.70 * GiB, time.time())  # the new run is 30 % below the median
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        fired = [a for a in webhook.alerts if a["labels"]["alertname"] == "ZfsBenchThroughputRegression"]
        if fired:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"no regression alert at the webhook; alerts: {prom.query('ALERTS')}")
    alert = fired[0]
    assert alert["status"] == "firing"
    assert alert["labels"]["compression"] == "lz4" and alert["labels"]["workload"] == "seqwrite"
    assert alert["labels"]["config"] == configuration(**BENCH).id and "exported_job" not in alert["labels"]
    assert alert["labels"]["instance"] == NAS and alert["labels"]["severity"] == "warning"
    assert "reached 70% of the median" in alert["annotations"]["description"]
    assert alert["annotations"]["runbook_url"].endswith("docs/runbook.md#zfsbenchthroughputregression")


def evaluated_groups(prom, timeout: float = 150) -> list[dict]:
    """The rule groups once each has been evaluated (zfsnas.changes runs once a minute)."""
    deadline = time.monotonic() + timeout
    while True:
        groups = prom.api("rules")["groups"]
        waiting = [g["name"] for g in groups if g["lastEvaluation"].startswith("0001-")]
        if not waiting:
            return groups
        assert time.monotonic() < deadline, f"never evaluated: {waiting}"
        time.sleep(1)


def test_rules_evaluate_cleanly_against_real_series(stack):
    prom = stack["prom"]
    rules = [rule for group in evaluated_groups(prom) for rule in group["rules"]]
    rule_file = (ROOT / "alerts/zfsnas.rules.yml").read_text()
    assert len(rules) == len(re.findall(r"^\s+- (?:alert|record):", rule_file, re.M))
    assert not [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    # Every recording rule has data here but the two that only exist under a write-heavy load, the
    # daily change of free space (a day of history first), the snapshot schedules (snapshots taken
    # over days), and the busy share of pool data disks: the disk fixture and the zpool recordings
    # come from different machines and share no vdev guid (alerts/tests/performance.yml has them).
    under_load = {"pool:zfs_pool_written_bytes_under_load:rate5m", "pool:zfs_pool_written_bytes_under_load:median7d"}
    elsewhere = {"pool:zfs_pool_free_bytes:delta1d_median3d", "dataset:zfs_dataset_snapshot_gap_seconds:max35d",
                 "device:zfs_disk_busy:ratio_rate5m"}
    # The Changes view's and the benchmark history's after a change or a run ended under Prometheus's
    # eyes, and the per-step numbers of its signals, differences to a step (a minute) earlier that the
    # young Prometheus here has not seen (tests/integration/test_changes_view.py has them all).
    events = {name for name in (r["name"] for r in rules) if name.startswith("change:") or name.endswith(":step")}
    events.add("config:zfs_bench_throughput:per_run")
    # Issue 37's memories and conditions, recorded only while what they name holds (promtool cases in
    # alerts/tests/ and the generated lives in tests/alerts/lives have them): a new snapshot's gap
    # (two snapshots served under Prometheus's eyes), an ARC warming after a boot, a vanished target,
    # a pool away or back (and its habit), a pool over a capacity line, a pool seen for 7 days.
    # instance:zfs_arc_normal_*, :baseline1d: nothing while the ARC warms up, which a series younger
    # than 30 minutes is taken for (a Prometheus started for the test)
    conditional = {"dataset:zfs_dataset_snapshot_gap:seconds", "instance:zfs_arc_warming:bool", "job:up:vanished",
                   "instance:zfs_arc_normal_reads:rate5m", "instance:zfs_arc_normal_hits:rate5m",
                   "instance:zfs_arc_hit_ratio:baseline1d",
                   "pool:zfs_pool_absence:seconds", "pool:zfs_pool_absence_seconds:max35d",
                   "pool:zfs_pool_away_since:timestamp_seconds", "pool:zfs_pool_capacity_over_critical:ratio",
                   "pool:zfs_pool_capacity_over_warning:ratio", "pool:zfs_pool_imported:ratio7d"}
    assert conditional <= {r["name"] for r in rules if r["type"] == "recording"}    # no stale name here
    records = {r["name"] for r in rules if r["type"] == "recording"} - conditional
    empty = [name for name in sorted(records - under_load - elsewhere - events) if not has_data(prom.query(name))]
    assert not empty, " ".join(empty)
    # The fixtures' faults fire their alerts: a degraded pool's vdev with a read error, the scrub of
    # backup that repaired 1.5 MiB with 2 errors.
    firing = {a["labels"]["alertname"] for a in prom.api("alerts")["alerts"]}
    assert {"ZfsVdevErrors", "ZfsPoolScrubFoundErrors"} <= firing, firing
