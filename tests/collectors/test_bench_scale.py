"""The `bench` collector's cost does not grow with the store (issue 43, cases 1, 4, 5): 100,000
stored results, as one configuration's history or as 100,000 configurations (what a fio file of
100,000 jobs stored before imports were bounded). Bounds that do not depend on the clock: rows
read per refresh, series and bytes of the page, memory. The scrape's time against a small store
is benchmarks/bench_store_bench.py's. Also: a dead watch's row is not "running", and what cannot be
true is never served (counted instead)."""

from __future__ import annotations

import os
import sqlite3
import statistics
import tracemalloc
from pathlib import Path

import pytest

from tests.bench.configs import configuration
from tests.conftest import samples, scrape_text, value
from zfsnas.sources.model import Dropped, SourceIncomplete
from zfsnas.store.database import Store
from zfsnas.store.reader import read_bench_db
from zfsnas.store.schema import ResultFigures

RESULTS = 100_000
FAMILIES = 8                                  # zfs_bench_* families a configuration may have
MiB = 1 << 20
MAX_CONFIGURATIONS = 1000                     # --bench.max-configurations' default
MEDIAN_WINDOW = 1000                          # benchdb.MEDIAN_WINDOW: the earlier runs a median is taken over


def configurations_of(count: int) -> list[tuple[str, str, dict[str, str]]]:
    """(id, stored JSON, labels) of `count` configurations that differ in their size (`<i>M`):
    one made, the others its text with the size replaced (100,000 made one by one take a minute)."""
    import hashlib

    base = configuration(size="SIZE-PLACEHOLDER")
    canonical, stored, labels = base.canonical(), base.to_json(), base.labels
    out = []
    for i in range(count):
        size = f"{i}M"
        config_id = hashlib.sha256(canonical.replace("SIZE-PLACEHOLDER", size).encode()).hexdigest()[:12]
        out.append((config_id, stored.replace("SIZE-PLACEHOLDER", size), {**labels, "config": config_id, "size": size}))
    assert out[0][0] == configuration(size="0M").id and out[-1][0] == configuration(size=f"{count - 1}M").id
    return out


def bulk_store(path: Path, configurations: int, results: int = RESULTS) -> list[str]:
    """`results` complete results over `configurations` configurations, the way the store writes
    them (its schema, its columns), in one transaction; their configuration ids, oldest first."""
    Store(path).close()
    texts = configurations_of(configurations)
    db = sqlite3.connect(path)
    db.execute("INSERT INTO matrix_runs (id, matrix, dataset, pool, host, pid, started, status) "
               "VALUES ('r', 'm', 'tank/scratch', 'tank', 'h', 1, 1.0, 'complete')")
    rows = []
    for i in range(results):
        cid, text, labels = texts[i % configurations]
        rows.append(("r", i, "m", labels["workload"], labels["compression"], labels["recordsize"], labels["size"],
                     "tank", "off", 1, "tank/scratch", "h", 1, 1_700_000_000.0 + i, 1_700_000_010.0 + i, "complete",
                     cid, text, 1e8 + i, 1.5, 0.25, 10.0))
    db.executemany("INSERT INTO results (run_id, cell, matrix, workload, compression, recordsize, size, pool, "
                   "encryption, repeat, dataset, host, pid, started, finished, status, config_id, config, "
                   "throughput_bytes_per_second, compressratio, cpu_busy_ratio, duration_seconds) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.commit()
    db.close()
    return [cid for cid, _t, _l in texts]


@pytest.fixture(scope="module", params=[1, RESULTS], ids=["one-configuration", "a-configuration-each"])
def big(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "bench.sqlite"
    ids = bulk_store(path, request.param)
    return path, request.param, ids


def test_a_read_of_100000_results_is_bounded_in_memory_and_page(big):
    path, configurations, _ids = big
    tracemalloc.start()
    try:
        try:
            configs = read_bench_db(path)
        except SourceIncomplete as exc:      # more configurations than are served: the cut is said
            configs = exc.value
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * MiB, f"{peak / MiB:.0f} MiB to read {RESULTS} results"
    assert len(configs) == min(configurations, MAX_CONFIGURATIONS)
    text = scrape_text("--collector.disable-defaults", "--collector.bench", "--bench.db", str(path))
    series = [line for line in text.splitlines() if line.startswith("zfs_bench_")]
    assert len(series) <= MAX_CONFIGURATIONS * FAMILIES
    assert len(text) < 8 * MiB


def test_one_configuration_of_100000_runs_reads_its_latest_window(big):
    path, configurations, _ids = big
    if configurations != 1:
        pytest.skip("the one-configuration store")
    [config] = read_bench_db(path)
    assert config.runs == RESULTS                                       # counted, not read
    assert config.throughput_bytes_per_second == 1e8 + RESULTS - 1    # the latest
    earlier = [1e8 + i for i in range(RESULTS - 1 - MEDIAN_WINDOW, RESULTS - 1)]
    assert config.previous_median_throughput == statistics.median(earlier)


def test_a_refresh_reads_what_changed_only(big, tmp_path):
    import shutil

    from zfsnas.store.reader import BenchDbReader

    path = tmp_path / "bench.sqlite"
    shutil.copy(big[0], path)
    configurations = big[1]
    reader = BenchDbReader(path)
    first = _read(reader)
    at_start = reader.rows_read
    # the start reads the ids of the configurations it keeps and their summaries: not the results
    assert at_start <= min(configurations, MAX_CONFIGURATIONS) * 4 + MEDIAN_WINDOW + 2
    assert _read(reader) is first and reader.rows_read == at_start       # nothing changed: nothing read
    store = Store(path)
    latest = configuration(size=f"{(RESULTS - 1) % configurations}M")
    store.start_matrix("r2", "m", "tank/scratch", 1)
    store.record_result("r2", 1, latest, started=1_800_000_000.0, finished=1_800_000_010.0,
                        figures=ResultFigures(throughput_bytes_per_second=7e8))
    running = store.start_result("r2", 2, configuration(size="new"), 1, "tank/scratch/x")
    store.close()
    now = _read(reader)
    read = reader.rows_read - at_start
    assert read <= 2 + 2 * (MEDIAN_WINDOW + 5), f"{read} rows read for two new results"
    by_id = {c.labels["config"]: c for c in now}
    assert by_id[latest.id].throughput_bytes_per_second == 7e8 and by_id[latest.id].runs == RESULTS // configurations + 1
    assert by_id[configuration(size="new").id].running       # this process runs it, no lock says otherwise
    store = Store(path)
    store.finish_result(running, "complete", figures=ResultFigures(throughput_bytes_per_second=1e6))
    store.close()
    before = reader.rows_read
    [new] = [c for c in _read(reader) if c.labels["config"] == configuration(size="new").id]
    assert not new.running and new.runs == 1 and reader.rows_read - before <= MEDIAN_WINDOW + 8


def _read(reader):
    try:
        return reader.read(Dropped())
    except SourceIncomplete as exc:
        return exc.value


def test_configurations_past_the_limit_are_counted_and_the_source_says_so(tmp_path):
    path = tmp_path / "bench.sqlite"
    bulk_store(path, 30, results=60)
    text = scrape_text("--collector.disable-defaults", "--collector.bench", "--bench.db", str(path),
                       "--bench.max-configurations", "10")
    assert len({dict(k[1])["config"] for k in samples(text) if k[0] == "zfs_bench_runs_total"}) == 10
    assert value(text, "zfs_exporter_source_values_dropped_total", source="bench_db", reason="over_limit") == 20
    assert value(text, "zfs_exporter_source_success", source="bench_db") == 0
    served = {dict(k[1])["size"] for k in samples(text) if k[0] == "zfs_bench_runs_total"}
    assert served == {f"{i}M" for i in range(20, 30)}        # the most recently stored


def test_what_cannot_be_true_is_never_served(tmp_path):
    """Values a hand or an older release stored: infinities, NaN, text, a time past any calendar."""
    path = tmp_path / "bench.sqlite"
    store = Store(path)
    store.start_matrix("r", "m", "tank/scratch", 1)
    config = configuration()
    rid = store.record_result("r", 1, config, started=1_780_000_000.0, finished=1_780_000_010.0,
                              figures=ResultFigures(throughput_bytes_per_second=1e8))
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE results SET finished = ?, throughput_bytes_per_second = ?, compressratio = ?, "
               "cpu_busy_ratio = ?, duration_seconds = ? WHERE id = ?", (float("inf"), 1e400, 1e18, "busy",
                                                                         -3.0, rid))
    db.commit()
    db.close()
    text = scrape_text("--collector.disable-defaults", "--collector.bench", "--bench.db", str(path))
    assert value(text, "zfs_bench_runs_total", **config.labels) == 1
    for name in ("zfs_bench_last_run_timestamp_seconds", "zfs_bench_throughput_bytes_per_second",
                 "zfs_bench_compressratio", "zfs_bench_cpu_busy_ratio", "zfs_bench_duration_seconds"):
        assert name not in text
    assert "Inf" not in text and "NaN" not in text
    dropped = {dict(k[1])["reason"]: v for k, v in samples(text).items()
               if k[0] == "zfs_exporter_source_values_dropped_total"}
    # a compression ratio of 10^18: out of what ZFS can reach (benchschema.FIGURE_RANGES)
    assert dropped == {"not_a_number": 3, "negative": 1, "out_of_range": 1}


def test_a_dead_watch_is_not_running(tmp_path):
    """A row `running` whose watch holds no lock any more (kill -9): the exporter serves 0 for it,
    so ZfsDiskSaturated is not silenced for ever; one whose run holds the lock: 1."""
    from zfsnas.bench.running.runner import RunLock

    path = tmp_path / "bench.sqlite"
    store = Store(path)
    store.start_matrix("r", "watch", "tank/x", 1)
    store.start_result("r", 1, configuration(matrix="watch"), 1, "tank/x")
    with RunLock(f"{path}.lock"):
        [live] = read_bench_db(path)
        assert live.running
    [dead] = read_bench_db(path)
    assert not dead.running
    from zfsnas.store.reader import BenchDbReader

    reader = BenchDbReader(path)              # and one reader, as the exporter keeps it, sees it change
    with RunLock(f"{path}.lock"):
        assert _read(reader)[0].running
    assert not _read(reader)[0].running
    store.close()
    assert os.path.exists(f"{path}.lock")


def test_the_bounds_are_defined_once():
    """The flag's default is the reader's; the figures above are theirs."""
    from zfsnas.collectors.bench import BenchSettings
    from zfsnas.store import reader as benchdb

    assert BenchSettings.flags["max_configurations"].default == benchdb.DEFAULT_MAX_CONFIGURATIONS == MAX_CONFIGURATIONS
    assert benchdb.MEDIAN_WINDOW == MEDIAN_WINDOW


def test_more_new_configurations_than_are_kept_are_read_as_at_the_start(tmp_path):
    """5,000 configurations stored between two reads (a bulk copy by hand): the reader takes the
    most recent of them as it would at its start, not one by one."""
    from zfsnas.store.reader import BenchDbReader

    path = tmp_path / "bench.sqlite"
    bulk_store(path, 3, results=3)
    reader = BenchDbReader(path, max_configurations=100)
    assert len(_read(reader)) == 3
    db = sqlite3.connect(path)
    texts = configurations_of(5003)[3:]
    db.executemany("INSERT INTO results (run_id, cell, matrix, workload, compression, recordsize, size, pool, "
                   "encryption, repeat, dataset, host, pid, started, finished, status, config_id, config, "
                   "throughput_bytes_per_second) VALUES ('r', 1, 'm', 'w', 'lz4', '1M', ?, 'tank', 'off', 1, 'd', 'h', "
                   "1, 1.7e9, 1.7e9, 'complete', ?, ?, 1e8)", [(labels["size"], cid, text) for cid, text, labels in texts])
    db.commit()
    db.close()
    before = reader.rows_read
    dropped = Dropped()
    with pytest.raises(SourceIncomplete) as cut:
        reader.read(dropped)
    served = cut.value.value
    assert {c.labels["size"] for c in served} == {f"{i}M" for i in range(4903, 5003)}   # the 100 most recent
    assert dropped.counts == {"over_limit": 4903}
    assert reader.rows_read - before <= 100 * 4 + 2 + 5000     # the new ids once, then as at the start
