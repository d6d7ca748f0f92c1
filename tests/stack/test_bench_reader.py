"""The exporter reads the benchmark store as the systemd unit and the container do: another user,
with a read-only view of the store's directory, while `zfsnas-bench` writes and after it closed.

The runner's Store keeps SQLite in WAL mode; once it closes, SQLite deletes -wal and -shm, and a
reader that cannot create a -shm used to fail ("unable to open database file"), which dropped the
bench metrics and fired ZfsExporterSourceFailing. The reader runs here as the real user nobody.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.bench.configs import configuration
from tests.integration.test_stack import BENCH, GiB, store_result
from zfsnas.store.database import Store

READ = ("import json, sys; from zfsnas.store.reader import read_bench_db; "
        "print(json.dumps([[c.runs, c.running, c.throughput_bytes_per_second] for c in read_bench_db(sys.argv[1])]))")


def read_as_nobody(db: Path) -> list:
    result = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                             sys.executable, "-c", READ, str(db)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.fixture
def store_dir():
    if os.geteuid() != 0:
        pytest.skip("needs root to write as one user and read as another (nobody)")
    with tempfile.TemporaryDirectory() as tmp:   # /tmp/<x> 0755 root: nobody can list it, not write
        os.chmod(tmp, 0o755)
        yield Path(tmp)


def test_nobody_reads_the_store_while_a_run_writes_and_after(store_dir):
    db = store_dir / "bench.sqlite"
    now = time.time()
    store_result(db, 1.0 * GiB, now - 7200)
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()   # the runner closed it
    assert read_as_nobody(db) == [[1, False, 1.0 * GiB]]

    writer = Store(db)   # a run in progress: the runner holds the store open, -wal and -shm exist
    try:
        run_id = "run-live"
        writer.start_matrix(run_id, "ci", "tank/bench", 1)
        writer.start_result(run_id, 0, configuration(**BENCH), 0, "tank/bench/c0", started=now)
        assert Path(f"{db}-wal").exists()
        assert read_as_nobody(db) == [[1, True, 1.0 * GiB]]
    finally:
        writer.close()
    store_result(db, 2.0 * GiB, now)
    assert read_as_nobody(db) == [[2, True, 2.0 * GiB]]
    assert sorted(p.name for p in store_dir.iterdir()) == ["bench.sqlite"]   # the reader created nothing
