"""Configuration changes on every graph (issue 12): a real Prometheus scrapes the exporter on a
fixture tree; mid-test a module parameter and a dataset property change, and the dashboards'
"Module parameter changes" / "Dataset property changes" annotation queries return exactly those two
changes, with their old and new values, at the time they happened, and nothing else."""

from __future__ import annotations

import time

import pytest

from tests.conftest import copy_commands, copy_tree, zfs_commands
from tests.dashboards.queries import NAMES, SUBSTITUTIONS, change_queries
from tests.integration.kernel import write_atomically
from tests.integration.prometheus import exporter_and_prometheus

OLD_MAX, NEW_MAX = 4294967296, 17179869184  # zfs_dirty_data_max 4 GiB -> 16 GiB


def as_sent(expr: str) -> str:
    """Variables on All; the dashboards' 1 m change step shrunk to the test's 1 s scrapes."""
    for name, value in SUBSTITUTIONS.items():
        expr = expr.replace(name, value)
    return expr.replace("offset 1m", "offset 1s")


def set_compression(listing, dataset: str, compression: str) -> None:
    rows = [line.split("\t") for line in listing.read_text().splitlines()]
    for row in rows:
        if row[0] == dataset:
            row[16] = compression  # the `compression` column of the recorded zfs list
    write_atomically(listing, "".join("\t".join(row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("changes")
    root, commands = copy_tree(tmp / "tree"), copy_commands(tmp / "commands")
    with exporter_and_prometheus(tmp, "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                                 "--collector.disable-defaults", "--collector.tunables", "--collector.datasets",
                                 "--tunables.refresh-interval=1", "--datasets.refresh-interval=1",
                                 "--datasets.snapshots=off", *zfs_commands(commands), wait_up=False) as (_, prom):
        prom.wait_for('zfs_dataset_info{dataset="tank/media", compression="lz4"}')
        prom.wait_for(f'zfs_module_parameter{{name="zfs_dirty_data_max"}} == {OLD_MAX}')
        start = time.time()
        time.sleep(4)
        parameter_changed = time.time()
        (root / "sys/module/zfs/parameters/zfs_dirty_data_max").write_text(f"{NEW_MAX}\n")
        prom.wait_for(f'zfs_module_parameter{{name="zfs_dirty_data_max"}} == {NEW_MAX}')
        time.sleep(4)
        property_changed = time.time()
        set_compression(commands / "zfs-list.txt", "tank/media", "zstd-1")
        prom.wait_for('zfs_dataset_info{dataset="tank/media", compression="zstd-1"}')
        time.sleep(4)
        yield {"prom": prom, "start": start, "end": time.time(), "parameter": parameter_changed,
               "property": property_changed}


def annotations(changed, expr: str) -> list[tuple[dict, list[float]]]:
    """What Grafana gets for the annotation over the test's time range: (labels, step times)."""
    result = changed["prom"].api("query_range", query=as_sent(expr), start=changed["start"], end=changed["end"],
                                 step=1)["result"]
    return [(r["metric"], [float(t) for t, _ in r["values"]]) for r in result]


@pytest.mark.parametrize("dashboard", NAMES)
def test_every_dashboard_carries_both_change_annotations(dashboard):
    assert set(change_queries(dashboard)) == {"Module parameter changes", "Dataset property changes"}


def test_module_parameter_change(changed):
    (found,) = [annotations(changed, change_queries("overview")["Module parameter changes"])]
    assert [labels for labels, _ in found] == [{"instance": found[0][0]["instance"], "name": "zfs_dirty_data_max",
                                                "from": str(OLD_MAX), "to": str(NEW_MAX)}]
    times = found[0][1]
    # Once (twice when a scrape lands on a step edge), within the refresh + scrape after the change.
    assert 1 <= len(times) <= 2 and changed["parameter"] - 1 <= times[0] <= changed["parameter"] + 4, \
        (times, changed["parameter"])


def test_dataset_property_change(changed):
    found = annotations(changed, change_queries("datasets")["Dataset property changes"])
    assert [(labels["dataset"], labels["property"], labels["from"], labels["to"]) for labels, _ in found] == \
        [("tank/media", "compression", "lz4", "zstd-1")]
    times = found[0][1]
    assert 1 <= len(times) <= 2 and changed["property"] - 1 <= times[0] <= changed["property"] + 4, \
        (times, changed["property"])
