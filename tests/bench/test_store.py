"""The results database: status transitions, stale runs, and no half-written row after SIGKILL."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from zfsnas.bench.store import Store

CONFIG = {"job": "seq-write", "compression": "lz4", "recordsize": "1M", "size": "1G", "pool": "tank"}
FIGURES = dict(throughput_bytes_per_second=1e8, iops=95.4, bytes=1 << 30, duration_seconds=10.7, sync_seconds=0.4,
               cpu_busy_ratio=0.3, cpu_iowait_ratio=0.1, compressratio=1.48, used_bytes=700 << 20,
               logicalused_bytes=1 << 30, properties={"compression": "lz4"}, clat_ns={"99.000000": 1e6},
               disks={"sda": {"written_bytes": 1}}, dmu_tx={"dmu_tx_dirty_delay": 11}, fio_json="{}")


def test_running_then_complete(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.start_matrix("r1", "m", "tank/scratch", 1, "zfs-2.3.2", "fio-3.33", "6.12", "pool: tank")
    rid = store.start_result("r1", 1, "m", CONFIG, "off", 1, "tank/scratch/zfsnas-bench-r1-1")
    assert store.results(None)[0]["status"] == "running"
    store.finish_result(rid, "complete", **FIGURES)
    row = store.results()[0]
    assert row["status"] == "complete" and row["compressratio"] == 1.48 and row["finished"] >= row["started"]
    assert row["disks"] == '{"sda": {"written_bytes": 1}}'
    with pytest.raises(ValueError, match="status"):
        store.finish_result(rid, "running")
    with pytest.raises(ValueError, match="unknown result fields"):
        store.finish_result(rid, "complete", token="x")


def test_stale_rows_of_dead_pids_become_incomplete(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r1", "m", "tank/scratch", 2)
    mine = store.start_result("r1", 1, "m", CONFIG, "off", 1, "c1")
    dead = store.start_result("r1", 2, "m", CONFIG, "off", 1, "c2")
    proc = subprocess.Popen(["true"])
    proc.wait()
    store.db.execute("UPDATE results SET pid=? WHERE id=?", (proc.pid, dead))
    assert store.mark_stale() == 1
    status = {r["id"]: r["status"] for r in store.results(None)}
    assert status == {mine: "running", dead: "incomplete"}
    assert store.mark_stale(holding_lock=True) == 1     # holding the run lock: every running row is stale
    assert {r["status"] for r in store.results(None)} == {"incomplete"}


WRITER = textwrap.dedent("""
    import sys
    from zfsnas.bench.store import Store
    from tests.bench.test_store import CONFIG, FIGURES
    store = Store(sys.argv[1])
    store.start_matrix("r1", "m", "tank/scratch", 0)
    print("ready", flush=True)
    while True:
        rid = store.start_result("r1", 1, "m", CONFIG, "off", 1, "c")
        store.finish_result(rid, "complete", **FIGURES)
        store.start_result("r1", 2, "m", CONFIG, "off", 1, "c")
""")


def test_sigkill_mid_run_leaves_no_half_written_row(tmp_path):
    db = tmp_path / "b.sqlite"
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, cwd=root)
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(0.8)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = Store(db)
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = store.results(None)
    assert len(rows) > 2
    for row in rows:
        if row["status"] == "complete":
            assert all(row[k] is not None for k in FIGURES), dict(row)
        else:
            assert row["status"] == "running" and row["throughput_bytes_per_second"] is None
    assert store.mark_stale() >= 1
    assert {r["status"] for r in store.results(None)} <= {"complete", "incomplete"}
    assert store.db.execute("SELECT status FROM matrix_runs").fetchone()[0] == "incomplete"
