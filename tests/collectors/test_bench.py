"""The `bench` collector: values from a database made by the runner's own store API."""

import pytest

from tests.conftest import scrape_text, types, value
from zfsnas.bench.store import Store

A = {"job": "seq-write", "compression": "zstd-1", "recordsize": "1M", "size": "16G", "pool": "tank"}
B = {"job": "copy", "compression": "lz4", "recordsize": "1M", "size": "all", "pool": "tank"}
LABELS_A = {**A, "encryption": "off"}
LABELS_B = {**B, "encryption": "off"}


def scrape(db):
    return scrape_text("--collector.disable-defaults", "--collector.bench", "--bench.db", str(db))


def add(store, config, throughput, finished, status="complete", ratio=1.48):
    rid = store.start_result("r", 1, "m", config, "off", 1, "tank/scratch/zfsnas-bench-r-1", started=finished - 10)
    if status != "running":
        store.finish_result(rid, status, finished, throughput_bytes_per_second=throughput, compressratio=ratio,
                            cpu_busy_ratio=0.42, duration_seconds=10.0)
    return rid


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "bench.sqlite")
    s.start_matrix("r", "m", "tank/scratch", 0)
    yield s
    s.close()


def test_latest_previous_median_runs_and_running(store):
    add(store, A, 100e6, 1_795_000_000)
    add(store, A, 200e6, 1_795_000_100)
    add(store, A, 999e6, 1_795_000_150, status="aborted")     # not a result: ignored
    add(store, A, 150e6, 1_795_000_200, ratio=1.5)
    add(store, B, None, 1_795_000_300, status="running")
    text = scrape(store.path)           # read while the writer's connection is open (WAL)
    assert value(text, "zfs_bench_throughput_bytes_per_second", **LABELS_A) == 150e6
    assert value(text, "zfs_bench_throughput_previous_median_bytes_per_second", **LABELS_A) == 150e6
    assert value(text, "zfs_bench_compressratio", **LABELS_A) == 1.5
    assert value(text, "zfs_bench_cpu_busy_ratio", **LABELS_A) == 0.42
    assert value(text, "zfs_bench_duration_seconds", **LABELS_A) == 10.0
    assert value(text, "zfs_bench_last_run_timestamp_seconds", **LABELS_A) == 1_795_000_200
    assert value(text, "zfs_bench_runs_total", **LABELS_A) == 3
    assert value(text, "zfs_bench_running", **LABELS_A) == 0
    assert value(text, "zfs_bench_running", **LABELS_B) == 1
    assert value(text, "zfs_bench_runs_total", **LABELS_B) == 0
    assert "zfs_bench_throughput_bytes_per_second{job=\"copy\"" not in text
    assert value(text, "zfs_exporter_collector_success", collector="bench") == 1
    assert value(text, "zfs_exporter_source_success", source="bench_db") == 1
    kinds = types(text)
    assert kinds["zfs_bench_runs_total"] == "counter" and kinds["zfs_bench_running"] == "gauge"
    assert kinds["zfs_bench_throughput_bytes_per_second"] == "gauge"


def test_a_single_run_has_no_previous_median(store):
    add(store, A, 100e6, 1_795_000_000)
    text = scrape(store.path)
    assert value(text, "zfs_bench_runs_total", **LABELS_A) == 1
    assert "zfs_bench_throughput_previous_median_bytes_per_second{" not in text


def test_absent_database_serves_nothing_and_succeeds(tmp_path):
    text = scrape(tmp_path / "none.sqlite")
    assert "zfs_bench_" not in text
    assert value(text, "zfs_exporter_collector_success", collector="bench") == 1
    assert not (tmp_path / "none.sqlite").exists()      # read-only: never created


def test_unreadable_database_fails(tmp_path):
    (tmp_path / "bad.sqlite").write_bytes(b"this is not a database" * 100)
    text = scrape(tmp_path / "bad.sqlite")
    assert value(text, "zfs_exporter_collector_success", collector="bench") == 0
    assert value(text, "zfs_exporter_source_success", source="bench_db") == 0


def test_database_is_not_written(store):
    add(store, A, 100e6, 1_795_000_000)
    store.close()
    before = store.path.read_bytes()
    scrape(store.path)
    assert store.path.read_bytes() == before


def test_median_matches_statistics():
    import statistics

    from zfsnas.sources.benchdb import median

    for values in ([3.0], [1.0, 5.0], [9.0, 1.0, 4.0], [4.0, 1.0, 3.0, 2.0]):
        assert median(values) == statistics.median(values)
