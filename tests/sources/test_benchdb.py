"""The exporter's reader of the benchmark database: below the bench wing, reading the schema the
runner's store writes through (sources/benchschema.py)."""

import ast
from pathlib import Path

import zfsnas.sources
from tests.bench.configs import configuration
from zfsnas.bench.store import ResultFigures, Store
from zfsnas.sources.benchdb import read_bench_db
from zfsnas.sources.benchschema import ResultRow, read_results

SOURCES = Path(zfsnas.sources.__file__).parent


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every import of a module, also those inside functions, as (line, absolute dotted name)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "zfsnas.sources" if node.level == 1 else "zfsnas" if node.level == 2 else ""
            module = ".".join(p for p in (base, node.module or "") if p) if node.level else node.module or ""
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return out


def test_no_source_imports_the_bench_wing():
    """sources/ is the lowest layer: not even a lazy import points up into zfsnas.bench."""
    found = [f"{path.name}:{line}: {name}" for path in sorted(SOURCES.glob("*.py"))
             for line, name in imported_modules(path) if name == "zfsnas.bench" or name.startswith("zfsnas.bench.")]
    assert found == []


def test_the_layering_check_sees_lazy_and_relative_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from ..bench.config import Configuration\n    from . import model\n")
    assert imported_modules(path) == [(2, "zfsnas.bench.config.Configuration"), (3, "zfsnas.sources.model")]


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
    from zfsnas.sources.benchconfig import in_words

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
