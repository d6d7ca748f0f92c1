"""The committed dashboards are what dashboards/generate.py makes, and each follows the rules of issue 7."""

import importlib.util
import json
import re
import sys

import pytest

from tests.dashboards.queries import DASHBOARDS, NAMES, all_queries, load, panels, queries


def generator():
    spec = importlib.util.spec_from_file_location("zfsnas_dashboards_generate", DASHBOARDS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_committed_json_is_generated_output(tmp_path):
    module = generator()
    assert module.main(["--out", str(tmp_path)]) == 0
    for name in NAMES:
        fresh = (tmp_path / f"{name}.json").read_text()
        assert (DASHBOARDS / f"{name}.json").read_text() == fresh, \
            f"dashboards/{name}.json is stale: run .venv/bin/python dashboards/generate.py"
    assert sorted(p.name for p in DASHBOARDS.glob("*.json")) == sorted(f"{n}.json" for n in NAMES)
    assert module.main(["--check"]) == 0


def test_check_flags_a_stale_file(tmp_path):
    module = generator()
    module.main(["--out", str(tmp_path)])
    (tmp_path / "arc.json").write_text("{}\n")
    assert module.main(["--check", "--out", str(tmp_path)]) == 1


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_rules(name):
    board = load(name)
    assert board["schemaVersion"] == 41  # the Grafana 11.6 flavour of the SDK
    assert board["uid"] == f"zfsnas-{name}" and "zfsnas" in board["tags"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"datasource", "nas", "instance", "pool"} <= variables.keys()
    assert variables["nas"]["query"] == "label_values(zfs_exporter_collector_success, nas)"
    assert variables["nas"]["includeAll"] and variables["nas"]["allValue"] == ".*"
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["multi"] and variables["instance"]["includeAll"]
    link = board["links"][0]
    assert link["type"] == "dashboards" and link["tags"] == ["zfsnas"] and link["includeVars"] and link["keepTime"]
    annotations = board["annotations"]["list"]
    assert any(a.get("target", {}).get("tags") == ["zfsnas-bench"] for a in annotations)
    assert any("zfs_bench_running" in a.get("target", {}).get("expr", "") for a in annotations)
    assert panels(board)
    for panel in panels(board):
        where = f"{name}: {panel['title']}"
        assert panel.get("description"), f"{where} has no description"
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{where} has no unit"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        assert panel.get("targets"), f"{where} has no query"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", where
            for window in re.findall(r"\[([^\]]+)\]", target["expr"]):
                # the time range itself: panels that compare it with the one before, or sum the runs in it
                over_range = "before / after" in panel["title"] or panel["title"] == "History per configuration"
                allowed = {"$__rate_interval", "$__range"} if over_range else {"$__rate_interval"}
                assert window in allowed, f"{where}: range [{window}] instead of $__rate_interval"
            if "instance" in target["expr"] or "zfs_" in target["expr"]:
                assert 'nas=~"$nas", instance=~"$instance"' in target["expr"], \
                    f"{where}: query ignores $nas or $instance: {target['expr']}"
            for clause in re.findall(r"\b(?:by|on) \(([^)]*)\)", target["expr"]):
                assert clause == "le" or clause.startswith("nas, instance"), \
                    f"{where}: an aggregation or join without nas and instance merges NAS: {target['expr']}"


def test_dataset_and_disk_variables():
    assert "dataset" in {v["name"] for v in load("datasets")["templating"]["list"]}
    assert "dataset" in {v["name"] for v in load("write-path")["templating"]["list"]}
    assert {"disk", "vdev"} <= {v["name"] for v in load("disks")["templating"]["list"]}


def test_what_the_issue_asks_for_is_there():
    def titles(name):
        return {p["title"]: p for p in panels(load(name))}

    overview = titles("overview")
    assert {"Pools not ONLINE", "Pool capacity", "ARC hit ratio", "Pool write throughput", "Pool read throughput",
            "Dirty data vs zfs_dirty_data_max", "Alerts firing", "Oldest scrub"} <= overview.keys()
    heatmaps = {p["title"] for n in NAMES for p in panels(load(n)) if p["type"] == "heatmap"}
    assert {"Txg sync time", "Tx assign latency", "Vdev read latency", "Vdev write latency"} <= heatmaps
    bench = titles("benchmarks")
    assert {p["type"] for p in bench.values()} >= {"timeseries", "bargauge", "xychart", "table"}
    disk_exprs = [t["expr"] for p in titles("disks").values() for t in p["targets"]]
    assert sum("group_left (serial" in e for e in disk_exprs) >= 5  # labelled by serial, pool and vdev
    assert any("node_cpu_seconds_total" in t["expr"] for p in titles("write-path").values() for t in p["targets"])


def test_queries_are_found_and_substituted():
    found = all_queries()
    assert len(found) > 60
    for query in found:
        assert not re.search(r"\$[A-Za-z_{]", query.promql())
    variable = next(q for q in queries("datasets") if q.where == "variable dataset")
    assert variable.promql() == \
        'count by (dataset) (zfs_dataset_written_bytes_total{nas=~".*", instance=~".*", pool=~".*"})'

def test_benchmarks_use_the_configuration_labels():
    """`workload` and `config` replace `job` (which arrived as `exported_job`); matrix and config
    are variables of the Benchmarks dashboard only."""
    for name in NAMES:
        assert "exported_job" not in json.dumps(load(name)), name
    bench = load("benchmarks")
    variables = {v["name"]: v for v in bench["templating"]["list"]}
    assert variables["matrix"]["query"] == \
        'label_values(zfs_bench_runs_total{nas=~"$nas", instance=~"$instance", pool=~"$pool"}, matrix)'
    assert variables["config"]["query"].endswith('matrix=~"$matrix"}, config)')
    for panel in panels(bench):
        for target in panel["targets"]:
            assert 'config=~"$config"' in target["expr"] and "config," in target["expr"], panel["title"]
    assert "matrix" not in {v["name"] for v in load("overview")["templating"]["list"]}
    assert bench["time"] == {"from": "now-30d", "to": "now"}   # runs are days apart
    assert load("overview")["time"] == {"from": "now-6h", "to": "now"}
    ratio = next(p for p in panels(bench) if p["title"] == "Latest vs previous median")
    assert "config:zfs_bench_throughput_vs_previous_median:ratio" in ratio["targets"][0]["expr"]
