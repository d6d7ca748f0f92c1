"""The exporter's reader of the benchmark database (store/reader.py) reads the typed rows of the
schema the runner's writer (store/database.py) writes through (store/schema.py). That the store
imports nothing of the bench wing is tests/test_import_graph.py's."""

from tests.bench.configs import configuration
from zfsnas.store.database import Store
from zfsnas.store.reader import read_bench_db
from zfsnas.store.schema import ResultFigures, ResultRow, read_results


def test_writer_and_reader_read_the_same_typed_rows(tmp_path):
    db = tmp_path / "bench.sqlite"
    store = Store(db)
    store.start_matrix("r1", "m", "tank/scratch", 2)
    config = configuration(size="1G")
    store.record_result("r1", 1, config, started=100.0, finished=110.0,
                        figures=ResultFigures(throughput_bytes_per_second=4e8, compressratio=1.5, cpu_busy_ratio=0.25,
                                              duration_seconds=10.0, properties={"compression": "lz4"}))
    store.record_result("r1", 2, config, started=120.0, finished=130.0,
                        figures=ResultFigures(throughput_bytes_per_second=2e8))
    [first, second] = read_results(store.db)
    assert store.results() == [first, second]
    assert isinstance(first, ResultRow) and first.configuration == config and first.config_id == config.id
    assert (first.status, first.cell, first.started, first.finished, first.throughput_bytes_per_second,
            first.compressratio, first.properties, first.iops) == (
        "complete", 1, 100.0, 110.0, 4e8, 1.5, '{"compression": "lz4"}', None)
    store.close()
    [series] = read_bench_db(db)
    assert (series.runs, series.throughput_bytes_per_second, series.previous_median_throughput,
            series.last_run_timestamp, series.compressratio) == (2, 2e8, 4e8, 130.0, None)
    assert series.labels == config.labels


def test_in_words_names_sizes_in_binary_units_and_leaves_other_numbers():
    """What a tuning change changed, as the Benchmarks dashboard says it."""
    from zfsnas.store.configuration import in_words

    base = configuration()
    tuned = configuration(parameters={"zfs_dirty_data_max": str(1610612736), "zfs_txg_timeout": "10",
                                      "zfs_arc_max": str(8 << 30)}, properties={"recordsize": "16K"})
    assert in_words(base, tuned) == ("zfs_arc_max 0 -> 8 GiB, zfs_dirty_data_max 4 GiB -> 1.5 GiB, "
                                     "zfs_txg_timeout 5 -> 10, recordsize 1M -> 16K")
    assert in_words(base, configuration(layout=(("ashift", "9"),))) == (
        "layout ashift 12 -> 9, layout models ZFSNAS SATA HDD x8 -> (not set), layout vdevs data:raidz2:8 -> (not set)")
    many = configuration(parameters={f"zfs_p{n}": str(n) for n in range(8)})
    assert in_words(base, many).endswith(" and 2 more") and in_words(base, base) == ""


def test_previous_configuration_is_the_same_cell_run_last_before(tmp_path):
    """Per configuration, the look-alike (same readable labels) whose complete run finished last
    before its own latest run; a cell of another compression, or a run still going, is none."""
    db = tmp_path / "bench.sqlite"
    store = Store(db)
    store.start_matrix("r1", "m", "tank/scratch", 3)
    old, new = configuration(), configuration(parameters={"zfs_txg_timeout": "10"})
    other = configuration(compression="zstd")
    for n, (config, finished) in enumerate(((old, 100.0), (other, 110.0), (new, 200.0), (old, 150.0))):
        store.record_result("r1", n, config, started=finished - 5, finished=finished,
                            figures=ResultFigures(throughput_bytes_per_second=1e8))
    store.start_result("r1", 9, configuration(parameters={"zfs_txg_timeout": "20"}), 0, "tank/scratch/c", started=300)
    store.close()
    found = {c.labels["config"]: c.previous for c in read_bench_db(db)}
    assert found[new.id] == (old.id, "zfs_txg_timeout 5 -> 10")
    assert found[old.id] is None           # its latest run (150) came before the new one's (200)
    assert found[other.id] is None
