"""The results database: status transitions, stale runs, and no half-written row after SIGKILL."""

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import wait_until
from zfsnas.bench.answering.report import summarise
from zfsnas.store.configuration import Configuration, differences
from zfsnas.store.database import ReadOnlyStore, Store
from zfsnas.store.reader import read_bench_db
from zfsnas.store.schema import SCHEMA_VERSION, TABLES, MatrixRun, ParameterChange, QueuedAnnotation, ResultFigures, ResultRow

from .configs import configuration

CONFIG = configuration(size="1G")
RELEASE_0 = Path(__file__).parent / "fixtures" / "store-release0.sql"
FIGURES = dict(throughput_bytes_per_second=1e8, iops=95.4, bytes=1 << 30, duration_seconds=10.7, sync_seconds=0.4,
               cpu_busy_ratio=0.3, cpu_iowait_ratio=0.1, cpu_user_seconds=1.5, cpu_system_seconds=2.25,
               cpu_iowait_seconds=0.5, cpu_idle_seconds=6.0, prefill_seconds=3.1, compressratio=1.48,
               used_bytes=700 << 20,
               logicalused_bytes=1 << 30, properties={"compression": "lz4"}, clat_ns={"99.000000": 1e6},
               disks={"sda": {"written_bytes": 1}}, dmu_tx={"dmu_tx_dirty_delay": 11}, fio_json="{}")


def test_running_then_complete(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.start_matrix("r1", "m", "tank/scratch", 1, "zfs-2.3.2", "fio-3.33", "6.12", "pool: tank",
                       {"zfs_dirty_data_max": "4294967296", "zfs_txg_timeout": "5"})
    rid = store.start_result("r1", 1, CONFIG, 1, "tank/scratch/zfsnas-bench-r1-1")
    assert store.results(None)[0].status == "running"
    store.finish_result(rid, "complete", figures=ResultFigures(**FIGURES))
    row = store.results()[0]
    assert row.status == "complete" and row.compressratio == 1.48 and row.finished >= row.started
    assert row.config_id == CONFIG.id and Configuration.from_json(row.config) == CONFIG
    assert (row.workload, row.compression, row.recordsize, row.size) == ("seq-write", "lz4", "1M", "1G")
    assert (row.cpu_user_seconds, row.cpu_system_seconds, row.prefill_seconds) == (1.5, 2.25, 3.1)
    assert store.matrix_runs()[0].parameters == '{"zfs_dirty_data_max": "4294967296", "zfs_txg_timeout": "5"}'
    assert row.disks == '{"sda": {"written_bytes": 1}}'
    with pytest.raises(ValueError, match="status"):
        store.finish_result(rid, "running")
    with pytest.raises(ValueError, match="unknown result fields"):
        store.finish_result(rid, "complete", figures=ResultFigures.of({"token": "x"}))


def test_stale_rows_of_dead_pids_become_incomplete(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r1", "m", "tank/scratch", 2)
    mine = store.start_result("r1", 1, CONFIG, 1, "c1")
    dead = store.start_result("r1", 2, CONFIG, 1, "c2")
    proc = subprocess.Popen(["true"])
    proc.wait()
    store.db.execute("UPDATE results SET pid=? WHERE id=?", (proc.pid, dead))
    assert store.mark_stale() == 1
    status = {r.id: r.status for r in store.results(None)}
    assert status == {mine: "running", dead: "incomplete"}
    assert store.mark_stale(holding_lock=True) == 1     # holding the run lock: every running row is stale
    assert {r.status for r in store.results(None)} == {"incomplete"}


WRITER = textwrap.dedent("""
    import sys
    from zfsnas.store.schema import ResultFigures
    from zfsnas.store.database import Store
    from tests.bench.test_store import CONFIG, FIGURES
    store = Store(sys.argv[1])
    store.start_matrix("r1", "m", "tank/scratch", 0)
    print("ready", flush=True)
    while True:
        rid = store.start_result("r1", 1, CONFIG, 1, "c")
        store.finish_result(rid, "complete", figures=ResultFigures(**FIGURES))
        store.start_result("r1", 2, CONFIG, 1, "c")
""")


def written_results(db: Path) -> int:
    """The result rows a writer in another process has committed so far (read, not written)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM results").fetchone()[0]
    finally:
        con.close()


def test_sigkill_mid_run_leaves_no_half_written_row(tmp_path):
    db = tmp_path / "b.sqlite"
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, cwd=root)
    assert proc.stdout.readline().strip() == b"ready"
    wait_until(lambda: written_results(db) > 2, "three result rows written")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = Store(db)      # a writer: it marks what the dead one left running as it opens
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = store.results(None)
    assert len(rows) > 2
    for row in rows:
        if row.status == "complete":
            assert all(getattr(row, k) is not None for k in FIGURES), row
        else:
            assert row.status == "incomplete" and row.throughput_bytes_per_second is None
    assert "incomplete" in {r.status for r in rows}
    assert store.mark_stale() == 0
    assert store.db.execute("SELECT status FROM matrix_runs").fetchone()[0] == "incomplete"


def release0(tmp_path) -> Path:
    """A database exactly as the first release's store wrote it (its schema and its rows)."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(RELEASE_0.read_text())
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    return path


def test_a_release_0_database_migrates_and_keeps_every_row(tmp_path):
    import sqlite3

    path = release0(tmp_path)
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    before = [dict(r) for r in con.execute("SELECT * FROM results ORDER BY id")]
    con.close()
    assert len(before) == 4 and "job" in before[0] and "config_id" not in before[0]
    read_by_exporter = {c.labels["config"]: c for c in read_bench_db(path)}  # unmigrated, read-only

    store = Store(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    for table, columns in TABLES.items():  # the whole schema is there
        have = {r["name"] for r in store.db.execute(f"PRAGMA table_info({table})")}
        assert have == {c.split()[0] for c in columns}, table
    after = [dict(r) for r in store.db.execute("SELECT * FROM results ORDER BY id")]
    for old, new in zip(before, after, strict=True):  # every value kept; job is now workload
        assert new["workload"] == old["job"]
        assert {k: new[k] for k in old if k != "job"} == {k: v for k, v in old.items() if k != "job"}
        assert len(new["config_id"]) == 12
    mirror, raidz2, fits, iso = (Configuration.from_json(r["config"]) for r in after)
    # The 8-disk study's two pools, both named tank, are two configurations; so are FITS and ISO.
    assert mirror.id != raidz2.id and fits.id != iso.id and len({c.id for c in (mirror, raidz2, fits, iso)}) == 4
    assert differences(mirror, raidz2) == ["layout vdevs: data:mirror:2,data:mirror:2 -> data:raidz2:4"]
    assert differences(fits, iso) == ["matrix: fits-copy -> iso-rsync"]
    assert dict(mirror.parameters) == {"recorded": "unknown"} and mirror.direct == "unknown"
    # The exporter, reading the old file before any migration, computed the same ids.
    assert set(read_by_exporter) == {r["config_id"] for r in after}
    # The report no longer merges 500 and 560 MB/s into "runs 2, 530 MB/s".
    rows = [r for r in summarise(store.results()) if r.workload == "seq-write"]
    assert [(r.runs, r.mb_per_s) for r in rows] == [(1, 500.0), (1, 560.0)]
    assert rows[0].differs == f"vs {raidz2.id}: layout vdevs: data:raidz2:4 -> data:mirror:2,data:mirror:2"
    store.close()
    assert Store(path).db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4  # migrating twice is a no-op


def test_parameter_changes_are_pending_until_restored(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    first = store.record_parameter("r1", "zfs_dirty_data_max", "4294967296", "1073741824")
    second = store.record_parameter("r1", "zfs_dirty_data_max", "1073741824", "2147483648")
    store.record_parameter("r2", "zfs_txg_timeout", "5", "10")
    assert [r.id for r in store.pending_parameters("r1")] == [second, first]   # newest first
    assert len(store.pending_parameters()) == 3
    store.parameter_restored(second)
    assert [r.original for r in store.pending_parameters("r1")] == ["4294967296"]


def test_rows_come_back_typed(tmp_path):
    """Every reader gets frozen dataclasses with typed fields, built from the columns in one place."""
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r1", "m", "tank/scratch", 1, "zfs-2.3.2", parameters={"zfs_txg_timeout": "5"})
    rid = store.record_result("r1", 1, CONFIG, started=100.0, finished=160.0, figures=ResultFigures(**FIGURES))
    [row] = store.results()
    assert isinstance(row, ResultRow) and (row.id, row.run_id, row.cell, row.repeat, row.started) == (
        rid, "r1", 1, 1, 100.0)
    assert (row.throughput_bytes_per_second, row.bytes, row.clat_ns) == (1e8, 1 << 30, '{"99.000000": 1000000.0}')
    assert row.cpu_seconds == 1.5 + 2.25 + 0.5 + 6.0 and row.configuration == CONFIG
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = "failed"  # type: ignore[misc]
    [run] = store.matrix_runs()
    assert isinstance(run, MatrixRun) and (run.id, run.status, run.cells, run.zfs_version) == ("r1", "running", 1,
                                                                                               "zfs-2.3.2")
    change = store.record_parameter("r1", "zfs_txg_timeout", "5", "10")
    assert store.pending_parameters() == [ParameterChange(change, "r1", store.host, "zfs_txg_timeout", "5", "10",
                                                          store.pending_parameters()[0].changed, None)]
    queued = store.queue_annotation(rid, "http://grafana", "POST", "/api/annotations", {"text": "x"}, "HTTP 500")
    [annotation] = store.pending_annotations()
    assert isinstance(annotation, QueuedAnnotation) and (annotation.id, annotation.result_id, annotation.payload,
                                                         annotation.attempts, annotation.sent) == (
        queued, rid, '{"text": "x"}', 1, None)


def test_a_release_0_database_reads_typed_without_migrating(tmp_path):
    """Read-only, an old file's `job` is the workload and its rows get their legacy configuration."""
    path = release0(tmp_path)
    rows = ReadOnlyStore(path).results()
    assert len(rows) == 4 and all(isinstance(r, ResultRow) for r in rows)
    assert [r.workload for r in rows] == ["seq-write", "seq-write", "copy", "copy"]
    assert all(len(r.config_id) == 12 and r.configuration.id == r.config_id for r in rows)
    assert ReadOnlyStore(path).matrix_runs()[0].parameters is None     # no such column then
