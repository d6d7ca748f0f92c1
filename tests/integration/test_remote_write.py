"""Many NAS, one place (issue 18): two NAS remote-write to one VictoriaMetrics; the dashboards and
the rules work there, per NAS, with nothing of one NAS mixed into the other's.

Everything is real and on 127.0.0.1: two zfsnas-exporters on different fixture trees (NAS "a":
OpenZFS 2.3.2 kstats and 2.3 command recordings; NAS "b": 2.1.11 and 2.1, with tank 85 % full and
a benchmark run 30 % below its median), one node_exporter, two Prometheus in agent mode with
`external_labels: {nas: a|b}` remote-writing to Debian's VictoriaMetrics, and Debian's vmalert
evaluating alerts/zfsnas.rules.yml against the store and sending to Alertmanager and a webhook.
Both NAS carry the same `instance` label ("nas", the default of deploy/prometheus/prometheus.yml):
only the `nas` label tells them apart, as when two people copy the same stack.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

from tests.conftest import copy_commands, copy_tree, free_port, zfs_commands
from tests.dashboards.queries import Query, all_queries, legend_problems, render_legend
from tests.integration.daemon import Daemon
from tests.integration.exporter_process import ExporterProcess
from tests.integration.kernel import RATE, Kernel, TxgWriter
from tests.integration.test_stack import GiB, start_alertmanager, store_result
from tests.integration.victoria import PrometheusAgent, VictoriaMetrics, Vmalert

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "zfsnas.rules.yml"
INSTANCE = "nas"  # the same on both NAS
TANK_B_ALLOCATED = 40775976040857  # 85 % of tank's 47971736518656 bytes on NAS b
NAS = {  # name -> (kstat tree, command recordings, zpool iostat captures, latest benchmark throughput)
    "a": ("2.3.2", "zfs-2.3", "zpool-2.3.2", 1.01 * GiB),
    "b": ("2.1.11", "zfs-2.1", "zpool-2.1.11", 0.70 * GiB),
}


def nas_commands(tmp: Path, name: str, recordings: str, iostat: str) -> Path:
    """The stand-in's recordings for one NAS; on b, tank is 85 % full."""
    commands = copy_commands(tmp / "commands", recordings, iostat, smart="awake")
    if name == "b":
        listing = commands / "zpool-list.txt"
        rows = [line.split("\t") for line in listing.read_text().splitlines()]
        for row in rows:
            if row[0] == "tank":
                row[2], row[3], row[5] = str(TANK_B_ALLOCATED), str(int(row[1]) - TANK_B_ALLOCATED), "85"
        listing.write_text("".join("\t".join(row) + "\n" for row in rows))
    return commands


def nas_flags(root: Path, commands: Path, bench_db: Path) -> list[str]:
    return ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
            "--path.udev.data", str(root / "udev" / "data"), *zfs_commands(commands),
            "--collector.vdevlatency", "--bench.db", str(bench_db),
            *[f"--{name}.refresh-interval=1" for name in ("pools", "datasets", "vdevlatency", "bench")]]


def scrape_configs(exporter_port: int, node_port: int, agent_port: int) -> str:
    jobs = (("zfsnas", exporter_port), ("node", node_port), ("prometheus", agent_port))
    return "".join(f"  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
                   f"        labels: {{instance: {INSTANCE}}}\n" for job, port in jobs)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    started, threads = [], []
    try:
        store = VictoriaMetrics(tmp / "vm", free_port())
        started.append(store)
        node_port = free_port()
        started.append(Daemon(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{node_port}",
                               "--collector.disable-defaults", "--collector.cpu"], tmp / "node.log",
                              f"http://127.0.0.1:{node_port}/metrics"))
        now = time.time()
        for name, (version, recordings, iostat, latest) in NAS.items():
            home = tmp / name
            home.mkdir()
            root = copy_tree(home / "tree", version, disks=True)
            bench_db = home / "bench.sqlite"
            for n, throughput in enumerate((1.00 * GiB, 1.04 * GiB, 0.98 * GiB, latest)):
                store_result(bench_db, throughput, now - 3600 * (4 - n))
            if name == "a":  # the same cell after a tuning change (a configuration that names it), and a
                # run in progress: the "Benchmark running" annotation
                store_result(bench_db, 1.10 * GiB, now - 1800, parameters={"zfs_dirty_data_max": str(16 * GiB)})
                store_result(bench_db, 0, now, running=True, compression="zstd")
            threads.append(Kernel(root))
            if name == "a":  # only a writes: b's pool write rate is 0
                threads.append(TxgWriter(root / "proc/spl/kstat/zfs/tank/txgs"))
            exporter = ExporterProcess(free_port(), *nas_flags(root, nas_commands(home, name, recordings, iostat),
                                                              bench_db), log_path=home / "exporter.log")
            started.append(exporter)
            exporter.wait_ready()
            agent_port = free_port()
            started.append(PrometheusAgent(home / "prom", agent_port, name,
                                           scrape_configs(exporter.port, node_port, agent_port),
                                           store.url + "/api/v1/write"))
        for thread in threads:
            thread.start()
        webhook, am_port = start_alertmanager(tmp, started)
        started.append(Vmalert(tmp, free_port(), store.url, f"http://127.0.0.1:{am_port}", [RULES]))
        for name in NAS:
            store.wait_for(f'up{{nas="{name}", job="zfsnas"}} == 1', timeout=60)
            store.wait_for(f'zfs_bench_throughput_previous_median_bytes_per_second{{nas="{name}"}}', timeout=60)
            # the end of the longest chain of recording rules (last seen -> first seen -> scrub age):
            # vmalert reads each link back from the store, one evaluation and ingestion later
            store.wait_for(f'pool:zfs_pool_scrub_age:seconds{{nas="{name}"}}', timeout=300)
        time.sleep(15)  # rates over 10 s windows and the recording rules filled
        yield {"store": store, "webhook": webhook, "vmalert": started[-1], "agents": [
            d for d in started if isinstance(d, PrometheusAgent)], "tmp": tmp}
    finally:
        for thread in threads:
            thread.stop()
        for daemon in reversed(started):
            daemon.stop()


def promql(query, nas: str) -> str:
    """The query as Grafana sends it with `nas` set to one NAS (or All) and the rest on All."""
    return Query(query.dashboard, query.where, query.expr.replace("$nas", nas), query.legend).promql()


def finite(result: list[dict]) -> list[dict]:
    return [r for r in result if math.isfinite(float(r["value"][1]))]


def by_nas(store: VictoriaMetrics, expr: str, **params) -> dict[str, float]:
    return {r["metric"].get("nas", ""): float(r["value"][1]) for r in store.query(expr, **params)}


def nas_problems(store: VictoriaMetrics, query: Query) -> tuple[list[str], list[str], list[str]]:
    """What is wrong with one dashboard query on the store: (it failed, it has no data for NAS a,
    it mixes the NAS)."""
    where = f"{query.dashboard} / {query.where}"
    try:
        results = {nas: finite(store.query(promql(query, nas))) for nas in ("a", "b", ".*")}
    except Exception as exc:  # noqa: BLE001 - every failing query is reported
        return [f"{where}: {exc}"], [], []
    empty, mixed = [], []
    # NAS a serves every collector, like the single-NAS stack test; what needs a change or a run seen
    # ending under the store's eyes is tests/integration/test_changes_view.py's
    if not results["a"] and not query.after_an_event:
        empty.append(f"{where}: {promql(query, 'a')}")
    if query.where.startswith("variable "):
        return [], empty, mixed  # label values for a drop-down, not series
    for nas in ("a", "b"):
        strangers = [r["metric"] for r in results[nas] if r["metric"].get("nas", nas) != nas]
        if strangers:
            mixed.append(f"{where} with nas={nas} returns {strangers[:2]}")
    # A heatmap sums its selection into buckets by design (one NAS, pool or vdev picked above it).
    labelled = [r for r in results[".*"] if set(r["metric"]) - {"__name__", "le"}]
    if [r for r in labelled if "nas" not in r["metric"]]:
        mixed.append(f"{where} drops the nas label: {promql(query, '.*')}")
    elif labelled and len(labelled) != len(results["a"]) + len(results["b"]):
        mixed.append(f"{where}: {len(labelled)} series for all NAS, {len(results['a'])} + "
                     f"{len(results['b'])} apart")
    return [], empty, mixed


def test_every_dashboard_query_keeps_the_nas_apart(fleet):
    """Every panel, variable and annotation query, on the store: with nas = a only a's series, and
    with every NAS selected each labelled series still carries its nas (no aggregation merged two
    NAS that share an instance name and pool names)."""
    store = fleet["store"]
    # A query without data for NAS a is asked again (with the others' checks) until it has some, for
    # at most 120 s: a busy machine delays the agents' remote writes.
    errors, mixed, waiting, deadline = [], [], all_queries(), time.monotonic() + 120
    while True:
        empty, mixed_waiting, again = [], [], []
        for query in waiting:
            failed, no_data, mixes = nas_problems(store, query)
            errors += failed
            if no_data:
                empty, mixed_waiting, again = empty + no_data, mixed_waiting + mixes, again + [query]
            else:
                mixed += mixes
        waiting = again
        if errors or not waiting or time.monotonic() > deadline:
            break
        time.sleep(1)
    mixed += mixed_waiting
    assert not errors, "queries failed on VictoriaMetrics:\n" + "\n".join(errors)
    assert not empty, "queries without data for NAS a:\n" + "\n".join(empty)
    assert not mixed, "series of one NAS mixed with the other's:\n" + "\n".join(mixed)


def test_legends_tell_the_nas_apart(fleet):
    """Both NAS carry instance "nas": every legend starts with the NAS's own name ("a nas ...",
    "b nas ..."), and no two series of a target read alike."""
    store = fleet["store"]
    problems, first_words = [], set()
    for query in all_queries():
        if query.legend and query.legend != "{{le}}":
            result = finite(store.query(promql(query, ".*")))
            problems += legend_problems(query, result)
            first_words |= {render_legend(query.legend, r["metric"]).split()[0] for r in result}
    assert not problems, "\n".join(problems)
    assert first_words == {"a", "b"}, first_words


def settled(store: VictoriaMetrics, expr: str, near, timeout: float = 60.0) -> dict[str, float]:
    """A rate-based recording rule's values per NAS once they have settled: each agent remote-writes
    its series in shards, so for a moment the store can hold one more scrape of the hits than of the
    misses, and vmalert (every second) records the ratio of the two uneven windows. Read until
    `near(values)` holds on two reads in a row (or time runs out): the last values read."""
    deadline, in_a_row = time.monotonic() + timeout, 0
    while True:
        values = by_nas(store, expr)
        in_a_row = in_a_row + 1 if near(values) else 0
        if in_a_row == 2 or time.monotonic() > deadline:
            return values
        time.sleep(1.0)


def test_values_per_nas(fleet):
    store = fleet["store"]
    # The recording rules, evaluated by vmalert on the store, per NAS.
    capacity = {(r["metric"]["nas"], r["metric"]["pool"]): float(r["value"][1])
                for r in store.query('pool:zfs_pool_capacity:ratio{pool="tank"}')}
    assert capacity == {("a", "tank"): pytest.approx(11874725347328 / 47971736518656),
                        ("b", "tank"): pytest.approx(0.85)}
    hit_ratio = {"a": pytest.approx(0.9, abs=0.01), "b": pytest.approx(0.9, abs=0.01)}  # 9 hits per miss
    assert settled(store, "instance:zfs_arc_hit_ratio:rate5m", lambda v: v == hit_ratio) == hit_ratio
    # Only a's tank writes (24 MiB/s); b's pool rate is 0.
    written = settled(store, 'pool:zfs_pool_written_bytes:rate5m{pool="tank"}',
                      lambda v: v.get("a") == pytest.approx(RATE, rel=0.2) and v.get("b") == 0)
    assert written["a"] == pytest.approx(RATE, rel=0.2) and written["b"] == 0
    versions = {r["metric"]["nas"]: r["metric"]["version"] for r in store.query("zfs_version_info")}
    assert versions["a"].startswith("2.3.2") and versions["b"].startswith("2.1.11")
    # One threshold series, recorded centrally: the scalar() of the alerts sees exactly one.
    assert [float(r["value"][1]) for r in store.query("zfsnas:bench_regression_max_drop:threshold")] == [0.15]


def test_rules_evaluate_centrally_without_errors(fleet):
    rules = [rule for group in fleet["vmalert"].groups() for rule in group["rules"]]
    assert len(rules) == len(re.findall(r"^\s+- (?:alert|record):", RULES.read_text(), re.M))
    assert not [(r["name"], r.get("lastError")) for r in rules if r.get("lastError")]


def test_regression_alert_fires_for_the_right_nas_only(fleet):
    store, webhook = fleet["store"], fleet["webhook"]
    firing = store.wait_for('ALERTS{alertname="ZfsBenchThroughputRegression", alertstate="firing"}', timeout=60)
    assert [r["metric"]["nas"] for r in firing] == ["b"]
    assert {r["metric"]["compression"] for r in firing} == {"lz4"}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not webhook.alerts:
        time.sleep(0.5)
    regressions = [a for a in webhook.alerts if a["labels"]["alertname"] == "ZfsBenchThroughputRegression"]
    assert regressions and {a["labels"]["nas"] for a in regressions} == {"b"}
    assert "reached 70% of the median" in " ".join(regressions[0]["annotations"]["description"].split())
    # The rest of b's and a's state: the degraded tank's vdev read error fires on both, each once.
    vdev = store.wait_for('ALERTS{alertname="ZfsVdevErrors", alertstate="firing"}')
    assert sorted({r["metric"]["nas"] for r in vdev}) == ["a", "b"]
    assert not store.query('ALERTS{alertname="ZfsRemoteWriteStalled"}')


def sample(text: str, name: str) -> float:
    return sum(float(line.rsplit(None, 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_store_outage_is_buffered_and_backfilled(fleet):
    """The store goes away for 12 s: the agents keep scraping into their WAL, count failed or
    retried sends and fall behind; when it returns they send the backlog, so no gap remains."""
    store, agents = fleet["store"], fleet["agents"]
    store.stop()
    down = time.time()
    time.sleep(12)
    behind = []
    for agent in agents:
        text = agent.metrics()
        newest = sample(text, "prometheus_remote_storage_highest_timestamp_in_seconds")
        sent = sample(text, "prometheus_remote_storage_queue_highest_sent_timestamp_seconds")
        behind.append(newest - sent)
        assert sample(text, "prometheus_remote_storage_samples_retried_total") + \
            sample(text, "prometheus_remote_storage_samples_failed_total") > 0
    assert min(behind) >= 8, f"agents should be about 12 s behind, are {behind}"
    store.start()
    up = time.time()
    # Once the backlog is through, the outage has as many samples per NAS as the same length of time
    # just before it (the agents scrape every second; on a busy machine they miss some scrapes in
    # both windows alike, so the window before is the measure, not the wall clock): no gap remains.
    window = f"{int(up - down) - 2}s"
    before = by_nas(store, f'count_over_time(up{{job="zfsnas"}}[{window}])', time=down)
    assert min(before.values()) >= (up - down) / 3, f"the agents hardly scraped before the outage: {before}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts = by_nas(store, f'count_over_time(up{{job="zfsnas"}}[{window}])', time=up)
        if all(counts.get(nas, 0) >= before[nas] - 3 for nas in before):
            break
        time.sleep(1)
    assert all(counts.get(nas, 0) >= before[nas] - 3 for nas in before), (counts, before)
    # Caught up: the stalled-remote_write expression (evaluated on the agents' self metrics) is quiet
    # once the agents' newest self metrics have reached the store (asked again until then, 60 s at most).
    deadline = time.monotonic() + 60
    while True:
        lag = by_nas(store, "max by (nas) (prometheus_remote_storage_highest_timestamp_in_seconds"
                            " - ignoring (remote_name, url) group_right"
                            " prometheus_remote_storage_queue_highest_sent_timestamp_seconds)")
        if (set(lag) == {"a", "b"} and max(lag.values()) < 5) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert set(lag) == {"a", "b"} and max(lag.values()) < 5, lag
