"""Every example query of docs/datasets-pools.md runs in a real Prometheus scraping the exporter."""

import re
from pathlib import Path

import pytest

from tests.conftest import linux_tree, zfs_commands
from tests.integration.prometheus import exporter_and_prometheus

DOC = Path(__file__).resolve().parents[2] / "docs" / "datasets-pools.md"
ROOT = linux_tree("2.3.2")


def doc_queries() -> list[str]:
    queries, in_table = [], False
    for line in DOC.read_text().splitlines():
        if line.startswith("|") and "example query" in line:
            in_table = True
        in_table = in_table and line.startswith("|")
        if not (in_table and line.startswith("| `zfs_")):
            continue
        last_cell = re.split(r"(?<!\\)\|", line.strip().strip("|"))[-1]
        queries += [q.replace("\\|", "|") for q in re.findall(r"`([^`]+)`", last_cell)]
    return queries


def test_doc_lists_queries():
    assert len(doc_queries()) >= 30


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("queries")
    with exporter_and_prometheus(tmp, "--path.procfs", str(ROOT / "proc"), "--path.sysfs", str(ROOT / "sys"),
                                 *zfs_commands("2.3"), wait_up=False) as (_, prom):
        prom.wait_for('zfs_exporter_source_success{source="zfs_snapshots"} == 1')
        prom.wait_for('zfs_exporter_source_success{source="zpool_status"} == 1')
        prom.wait_for('zfs_dataset_snapshots')
        yield prom


def test_every_doc_query_runs(prometheus):
    failing = []
    for query in doc_queries():
        try:
            prometheus.query(query)  # asserts status success: the query parses and evaluates
        except Exception as exc:
            body = exc.read() if hasattr(exc, "read") else str(exc).encode()   # HTTPError: Prometheus says why
            failing.append((query, body.decode()))
    assert not failing, failing


def test_key_queries_answer(prometheus):
    days = prometheus.query('(time() - zfs_pool_scan_end_timestamp_seconds{function="scrub"}) / 86400')
    assert [r["metric"]["pool"] for r in days] == ["backup"]
    progress = prometheus.scalar('zfs_pool_scan_issued_bytes{function="resilver"} '
                                 '/ zfs_pool_scan_total_bytes{function="resilver"}')
    assert progress == pytest.approx(402 / (10.8 * 1024), rel=1e-3)
    unhealthy = prometheus.query('zfs_pool_health{state!="ONLINE"} == 1')
    assert [(r["metric"]["pool"], r["metric"]["state"]) for r in unhealthy] == [("tank", "DEGRADED")]
    bad = prometheus.query('zfs_vdev_state{state!~"ONLINE|AVAIL|INUSE"}')
    assert sorted(r["metric"]["state"] for r in bad) == ["DEGRADED"] * 5 + ["FAULTED", "OFFLINE", "REMOVED", "UNAVAIL"]
    per_algorithm = prometheus.query('avg by (compression) (zfs_dataset_compressratio * on (pool, dataset) '
                                     'group_left (compression) zfs_dataset_info)')
    assert {r["metric"]["compression"]: float(r["value"][1]) for r in per_algorithm}["zstd-fast"] == 2.6
