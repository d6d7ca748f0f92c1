"""The `bench` collector: values from a database made by the runner's own store API."""

import re

import pytest

from tests.bench.configs import MIRRORS, configuration
from tests.conftest import samples, scrape_text, types, value
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

A = configuration(compression="zstd-1")
B = configuration(matrix="fits-copy", workload="copy", size="all")
LABELS_A = {"matrix": "m", "workload": "seq-write", "config": A.id, "compression": "zstd-1", "recordsize": "1M",
            "encryption": "off", "size": "16G", "pool": "tank"}
LABELS_B = {**LABELS_A, "matrix": "fits-copy", "workload": "copy", "config": B.id, "compression": "lz4", "size": "all"}


def scrape(db):
    return scrape_text("--collector.disable-defaults", "--collector.bench", "--bench.db", str(db))


def add(store, config, throughput, finished, status="complete", ratio=1.48):
    rid = store.start_result("r", 1, config, 1, "tank/scratch/zfsnas-bench-r-1", started=finished - 10)
    if status != "running":
        store.finish_result(rid, status, finished, figures=ResultFigures(
            throughput_bytes_per_second=throughput, compressratio=ratio, cpu_busy_ratio=0.42, duration_seconds=10.0))
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
    assert 'workload="copy"' not in text.split("zfs_bench_runs_total", 1)[0]  # a running config has no figures yet
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

    from zfsnas.store.reader import median

    for values in ([3.0], [1.0, 5.0], [9.0, 1.0, 4.0], [4.0, 1.0, 3.0, 2.0]):
        assert median(values) == statistics.median(values)


def test_no_label_named_job_or_instance(store):
    """Prometheus owns `job` and `instance`: ours would arrive renamed (`exported_job`)."""
    add(store, A, 100e6, 1_795_000_000)
    add(store, B, 90e6, 1_795_000_100)
    text = scrape(store.path)
    series = [line for line in text.splitlines() if line.startswith("zfs_bench_")]
    assert len(series) == 2 * 7
    for line in series:
        names = set(re.findall(r'([a-z_]+)="', line))
        assert names == {"matrix", "workload", "config", "compression", "recordsize", "encryption", "size", "pool"}


def test_configurations_that_look_alike_keep_their_own_previous_median(store):
    """Mirror then RAID-Z2 under one pool name, and a zfs_dirty_data_max change: separate series,
    each with its own history; a first run has no previous median to regress from."""
    mirror = configuration(layout=MIRRORS)
    raidz2 = configuration()
    dirty_1g = configuration(parameters={"zfs_dirty_data_max": "1073741824"})
    add(store, mirror, 500e6, 1_795_000_000)
    add(store, mirror, 520e6, 1_795_000_050)
    add(store, raidz2, 300e6, 1_795_000_100)
    add(store, dirty_1g, 200e6, 1_795_000_200)
    text = scrape(store.path)
    assert len({mirror.id, raidz2.id, dirty_1g.id}) == 3
    assert value(text, "zfs_bench_throughput_previous_median_bytes_per_second", **mirror.labels) == 500e6
    assert value(text, "zfs_bench_throughput_bytes_per_second", **raidz2.labels) == 300e6
    assert value(text, "zfs_bench_throughput_bytes_per_second", **dirty_1g.labels) == 200e6
    medians = {dict(labels)["config"] for name, labels in samples(text)
               if name == "zfs_bench_throughput_previous_median_bytes_per_second"}
    assert medians == {mirror.id}  # RAID-Z2 and the 1G dirty-data run: first runs, nothing to regress from
    assert value(text, "zfs_bench_runs_total", **dirty_1g.labels) == 1


def test_no_exported_metric_of_ours_has_a_job_or_instance_label():
    """The golden outputs pin every family of every collector: none carries Prometheus's labels."""
    from pathlib import Path

    golden = sorted((Path(__file__).parents[1] / "golden").glob("*.prom"))
    assert len(golden) >= 7
    for path in golden:
        names = set(re.findall(r'[{,]([a-zA-Z_]+)="', path.read_text()))
        assert names and not names & {"job", "instance"}, path.name


def change_info(text: str) -> dict[str, tuple[str, str]]:
    """{config: (previous_config, change)} of zfs_bench_config_change_info."""
    out = {}
    for name, labels in samples(text):
        if name == "zfs_bench_config_change_info":
            labels = dict(labels)
            out[labels["config"]] = (labels["previous_config"], labels["change"])
    return out


def test_a_tuning_change_between_two_runs_of_a_matrix_is_named(store):
    """A matrix of two cells run with zfs_dirty_data_max at 4 GiB, then at 16 GiB with sync=always:
    each second-run configuration names its cell's first-run one and what differs, in words; the
    first run's configurations follow nothing. Then the first setting again (a revert): it names the
    16 GiB one, the other way round."""
    cells = [dict(compression="lz4"), dict(compression="zstd-3")]
    first = [configuration(**cell) for cell in cells]
    second = [configuration(**cell, parameters={"zfs_dirty_data_max": str(16 << 30)},
                            properties={"sync": "always"}) for cell in cells]
    for n, config in enumerate(first + second):
        add(store, config, 300e6 + n, 1_795_000_000 + 100 * n)
    found = change_info(scrape(store.path))
    assert found == {new.id: (old.id, "zfs_dirty_data_max 4 GiB -> 16 GiB, sync (not set) -> always")
                     for old, new in zip(first, second)}
    labels = next(dict(found) for name, found in samples(scrape(store.path)) if name == "zfs_bench_config_change_info")
    assert set(labels) == {*LABELS_A, "previous_config", "change"}
    add(store, first[0], 310e6, 1_795_001_000)
    assert change_info(scrape(store.path))[first[0].id] == (
        second[0].id, "zfs_dirty_data_max 16 GiB -> 4 GiB, sync always -> (not set)")
    assert types(scrape(store.path))["zfs_bench_config_change_info"] == "gauge"
