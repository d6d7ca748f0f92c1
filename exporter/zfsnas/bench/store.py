"""The results database (SQLite, WAL, synchronous=FULL): every run kept, none half-written.

Owns the schema (defined once, in TABLES, with the migration of older databases) and every
write. A result row is inserted as `running` in one transaction and
finished as `complete`, `aborted` or `failed` in another, so a power cut leaves a `running` row
whose pid is gone: the next `zfsnas-bench` start marks it `incomplete`. Annotations that could
not reach Grafana wait in `annotation_queue`. No Grafana token is ever written here.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .config import Configuration, legacy_configuration

DEFAULT_DB = "/var/lib/zfsnas/bench.sqlite"
SCHEMA_VERSION = 1
# The schema, defined once: CREATE builds it on a new database and `_migrate` adds to an older one
# whatever of it is missing. Columns added after the first release must be nullable.
TABLES = {
    "matrix_runs": (
        "id TEXT PRIMARY KEY", "matrix TEXT NOT NULL", "dataset TEXT NOT NULL", "pool TEXT NOT NULL",
        "host TEXT NOT NULL", "pid INTEGER NOT NULL", "started REAL NOT NULL", "finished REAL",
        "status TEXT NOT NULL", "zfs_version TEXT", "fio_version TEXT", "kernel TEXT", "pool_layout TEXT",
        "cells INTEGER NOT NULL DEFAULT 0",
        "parameters TEXT"),                 # every module parameter at run start (JSON)
    "results": (
        "id INTEGER PRIMARY KEY AUTOINCREMENT", "run_id TEXT NOT NULL REFERENCES matrix_runs(id)",
        "cell INTEGER NOT NULL", "matrix TEXT NOT NULL", "workload TEXT NOT NULL", "compression TEXT NOT NULL",
        "recordsize TEXT NOT NULL", "size TEXT NOT NULL", "pool TEXT NOT NULL", "encryption TEXT NOT NULL",
        "repeat INTEGER NOT NULL", "dataset TEXT NOT NULL", "host TEXT NOT NULL", "pid INTEGER NOT NULL",
        "started REAL NOT NULL", "finished REAL", "status TEXT NOT NULL",
        "throughput_bytes_per_second REAL", "iops REAL", "bytes INTEGER", "duration_seconds REAL",
        "sync_seconds REAL", "cpu_busy_ratio REAL", "cpu_iowait_ratio REAL", "compressratio REAL",
        "used_bytes INTEGER", "logicalused_bytes INTEGER", "properties TEXT", "clat_ns TEXT", "disks TEXT",
        "dmu_tx TEXT", "fio_json TEXT", "error TEXT", "annotation_id INTEGER",
        "config_id TEXT", "config TEXT",    # bench/config.py: the id and the canonical configuration
        "cpu_user_seconds REAL", "cpu_system_seconds REAL", "cpu_iowait_seconds REAL", "cpu_idle_seconds REAL",
        "prefill_seconds REAL",
        "latency_us REAL",                  # mean latency where it was given, not computed from fio_json (imports)
        "details TEXT"),                    # what a result says beyond its figures (JSON: watch, import source)
    "annotation_queue": (
        "id INTEGER PRIMARY KEY AUTOINCREMENT", "result_id INTEGER", "url TEXT NOT NULL", "method TEXT NOT NULL",
        "path TEXT NOT NULL", "payload TEXT NOT NULL", "created REAL NOT NULL",
        "attempts INTEGER NOT NULL DEFAULT 0", "last_error TEXT", "sent REAL"),
    # Module parameters a run changed: the original is committed before the change is written.
    "parameter_changes": (
        "id INTEGER PRIMARY KEY AUTOINCREMENT", "run_id TEXT NOT NULL", "host TEXT NOT NULL",
        "name TEXT NOT NULL", "original TEXT NOT NULL", "value TEXT NOT NULL", "changed REAL NOT NULL",
        "restored REAL"),
}
RENAMED = {("results", "job"): "workload"}   # release 0 -> 1: `job` collided with Prometheus's label
INDEXES = ("CREATE INDEX IF NOT EXISTS results_config_id ON results(config_id, status)",
           "CREATE INDEX IF NOT EXISTS parameter_changes_pending ON parameter_changes(host, restored)")
FINAL = ("complete", "aborted", "failed")
RESULT_FIELDS = ("throughput_bytes_per_second", "iops", "bytes", "duration_seconds", "sync_seconds",
                 "cpu_busy_ratio", "cpu_iowait_ratio", "compressratio", "used_bytes", "logicalused_bytes",
                 "properties", "clat_ns", "disks", "dmu_tx", "fio_json", "error", "cpu_user_seconds",
                 "cpu_system_seconds", "cpu_iowait_seconds", "cpu_idle_seconds", "prefill_seconds", "latency_us",
                 "details")


def _check_fields(values: dict) -> None:
    unknown = set(values) - set(RESULT_FIELDS)
    if unknown:
        raise ValueError(f"unknown result fields {sorted(unknown)}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StoreError(Exception):
    """A database that cannot be read or written as asked; the message is one line."""


SQLITE_HEADER = b"SQLite format 3\x00"


def is_sqlite_file(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_HEADER
    except OSError:
        return False


def check_database(path: str | Path) -> None:
    """Raise StoreError saying, in one line, why `path` is not a database to read."""
    path = Path(path)
    try:
        path.stat()
    except FileNotFoundError:
        raise StoreError(f"no database at {path} (zfsnas-bench run, watch or import create it)") from None
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a zfsnas-bench database")
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None
    if not header:
        raise StoreError(f"{path} is empty, not a zfsnas-bench database")
    if header[:16] != SQLITE_HEADER:
        raise StoreError(f"{path} is not an SQLite database (it starts {header[:16]!r})")
    if len(header) < 100:
        raise StoreError(f"{path} is truncated ({len(header)} bytes, less than an SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = int.from_bytes(header[92:96], "big") == int.from_bytes(header[24:28], "big")
    size = path.stat().st_size
    if page_size < 512 or size % page_size or (valid and pages and size < pages * page_size):
        raise StoreError(f"{path} is truncated or damaged ({size} bytes, page size {page_size}, "
                         f"{pages} pages in its header)")


class Store:
    def __init__(self, path: str | Path, create: bool = True):
        """The writers' store. `create=False`: an existing database only (restore, annotate)."""
        self.path = Path(path)
        if not create or self.path.exists():
            check_database(self.path)
        elif self.path.parent.exists() and not self.path.parent.is_dir():
            raise StoreError(f"{self.path.parent} is not a directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.host = socket.gethostname()
        self._migrate()

    def _migrate(self) -> None:
        """Create what is missing of TABLES, rename what RENAMED lists, and give every stored result
        its configuration id (results of older releases: `config.legacy_configuration`)."""
        with self.tx() as db:
            for table, columns in TABLES.items():
                db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(columns)})")
                have = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
                for (renamed_table, old), new in RENAMED.items():
                    if renamed_table == table and old in have and new not in have:
                        db.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")
                        have = (have - {old}) | {new}
                for column in columns:
                    if column.split()[0] not in have:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
            db.execute("DROP INDEX IF EXISTS results_config")  # release 0's index on the readable labels
            for index in INDEXES:
                db.execute(index)
            runs = {row["id"]: dict(row) for row in db.execute("SELECT * FROM matrix_runs")}
            for row in list(db.execute("SELECT * FROM results WHERE config_id IS NULL")):
                config = legacy_configuration(dict(row), runs.get(row["run_id"]))
                db.execute("UPDATE results SET config_id=?, config=? WHERE id=?", (config.id, config.to_json(), row["id"]))
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def mark_stale(self, holding_lock: bool = False) -> int:
        """Rows left `running` by a process of this host that is gone become `incomplete`.

        The runner calls this holding the run lock: then no other run of this host is alive, so
        every `running` row of this host is stale, even if its pid has been reused since.
        """
        stale = 0
        with self.tx() as db:
            for table in ("results", "matrix_runs"):
                for row in db.execute(f"SELECT id, pid FROM {table} WHERE status='running' AND host=?", (self.host,)):
                    if holding_lock or not pid_alive(row["pid"]):
                        db.execute(f"UPDATE {table} SET status='incomplete' WHERE id=?", (row["id"],))
                        stale += table == "results"
        return stale

    def start_matrix(self, run_id: str, matrix: str, dataset: str, cells: int, zfs_version: str = "",
                     fio_version: str = "", kernel: str = "", pool_layout: str = "",
                     parameters: dict[str, str] | None = None) -> None:
        with self.tx() as db:
            db.execute("INSERT INTO matrix_runs (id, matrix, dataset, pool, host, pid, started, status, zfs_version,"
                       " fio_version, kernel, pool_layout, cells, parameters) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (run_id, matrix, dataset, dataset.split("/")[0], self.host, os.getpid(), time.time(),
                        "running", zfs_version, fio_version, kernel, pool_layout, cells,
                        json.dumps(parameters or {}, sort_keys=True)))

    def finish_matrix(self, run_id: str, status: str) -> None:
        with self.tx() as db:
            db.execute("UPDATE matrix_runs SET status=?, finished=? WHERE id=?", (status, time.time(), run_id))

    def start_result(self, run_id: str, cell: int, config: Configuration, repeat: int, dataset: str,
                     started: float | None = None) -> int:
        """A `running` row of `config`; its readable columns are the configuration's labels."""
        labels = config.labels
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO results (run_id, cell, matrix, workload, compression, recordsize, size, pool, encryption,"
                " repeat, dataset, host, pid, started, status, config_id, config)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?, 'running',?,?)",
                (run_id, cell, config.matrix, config.workload, labels["compression"], labels["recordsize"],
                 config.size, config.pool, labels["encryption"], repeat, dataset, self.host, os.getpid(),
                 time.time() if started is None else started, config.id, config.to_json()))
            return _rowid(cur)

    def finish_result(self, result_id: int, status: str, finished: float | None = None, started: float | None = None,
                      **values) -> None:
        """One transaction: every figure and the final status land together or not at all.
        `started` moves the row's start (a watch's result starts at its first byte, not at its start)."""
        if status not in FINAL:
            raise ValueError(f"status {status!r} is not one of {FINAL}")
        _check_fields(values)
        encoded = {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for k, v in values.items()}
        if started is not None:
            encoded = {"started": started, **encoded}
        columns = ", ".join(f"{k}=?" for k in encoded)
        with self.tx() as db:
            db.execute(f"UPDATE results SET status=?, finished=?{', ' if columns else ''}{columns} WHERE id=?",
                       (status, time.time() if finished is None else finished, *encoded.values(), result_id))

    def record_result(self, run_id: str, cell: int, config: Configuration, repeat: int = 1, dataset: str = "",
                      started: float | None = None, finished: float | None = None, **values: Any) -> int:
        """A finished `complete` result in one call (imports, published figures, tests): the same two
        transactions as a run's start_result/finish_result, so it reads back like any measured row."""
        _check_fields(values)   # before the row exists: a bad call leaves nothing behind
        result_id = self.start_result(run_id, cell, config, repeat, dataset or f"{config.pool}/imported",
                                      started=started)
        self.finish_result(result_id, "complete", finished=finished, **values)
        return result_id

    def import_results(self, run_id: str, matrix: str, dataset: str, results: list[tuple[Configuration, dict]],
                       started: float, finished: float, details: dict | None = None) -> list[int]:
        """Results measured elsewhere (`zfsnas-bench import`), with their matrix run, in ONE
        transaction: a bad value or a full disk stores none of them. `results`: (configuration,
        figures) in file order; each row is `complete` from `started` to `finished`."""
        for _config, values in results:
            _check_fields(values)
        ids = []
        with self.tx() as db:
            db.execute("INSERT INTO matrix_runs (id, matrix, dataset, pool, host, pid, started, finished, status,"
                       " cells, parameters) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       (run_id, matrix, dataset, dataset.split("/")[0], self.host, os.getpid(), started, finished,
                        "complete", len(results), json.dumps(details or {}, sort_keys=True)))
            for cell, (config, values) in enumerate(results, 1):
                labels = config.labels
                encoded = {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                           for k, v in values.items()}
                columns = ["run_id", "cell", "matrix", "workload", "compression", "recordsize", "size", "pool",
                           "encryption", "repeat", "dataset", "host", "pid", "started", "finished", "status",
                           "config_id", "config", *encoded]
                row = [run_id, cell, config.matrix, config.workload, labels["compression"], labels["recordsize"],
                       config.size, config.pool, labels["encryption"], 1, dataset, self.host, os.getpid(), started,
                       finished, "complete", config.id, config.to_json(), *encoded.values()]
                cur = db.execute(f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(row))})",
                                 row)
                ids.append(_rowid(cur))
        return ids

    def set_annotation(self, result_id: int, annotation_id: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE results SET annotation_id=? WHERE id=?", (annotation_id, result_id))

    def results(self, status: str | None = "complete", matrix: str | None = None) -> list[sqlite3.Row]:
        query, args = "SELECT * FROM results WHERE 1=1", []
        if status:
            query += " AND status=?"
            args.append(status)
        if matrix:
            query += " AND matrix=?"
            args.append(matrix)
        return list(self.db.execute(query + " ORDER BY started, id", args))

    def configurations(self) -> dict[str, Configuration]:
        """Every stored configuration by id."""
        rows = self.db.execute("SELECT config_id, config FROM results WHERE config IS NOT NULL GROUP BY config_id")
        return {row["config_id"]: Configuration.from_json(row["config"]) for row in rows}

    # Module parameters a run changed (bench/parameters.py)
    def record_parameter(self, run_id: str, name: str, original: str, value: str) -> int:
        with self.tx() as db:  # committed (synchronous=FULL) before the caller writes the new value
            cur = db.execute("INSERT INTO parameter_changes (run_id, host, name, original, value, changed)"
                             " VALUES (?,?,?,?,?,?)", (run_id, self.host, name, original, value, time.time()))
            return _rowid(cur)

    def pending_parameters(self, run_id: str | None = None) -> list[sqlite3.Row]:
        """Changes of this host not yet restored, newest first (so the oldest original is written last)."""
        query, args = "SELECT * FROM parameter_changes WHERE host=? AND restored IS NULL", [self.host]
        if run_id is not None:
            query += " AND run_id=?"
            args.append(run_id)
        return list(self.db.execute(query + " ORDER BY id DESC", args))

    def parameter_restored(self, change_id: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE parameter_changes SET restored=? WHERE id=?", (time.time(), change_id))

    def dead_runs(self) -> set[str]:
        """Ids of this host's runs that ended without cleaning up (crashed, or marked incomplete)."""
        rows = self.db.execute("SELECT id FROM matrix_runs WHERE host=? AND status='incomplete'", (self.host,))
        return {row["id"] for row in rows}

    def matrix_runs(self) -> list[sqlite3.Row]:
        return list(self.db.execute("SELECT * FROM matrix_runs ORDER BY started"))

    # Annotation queue
    def queue_annotation(self, result_id: int | None, url: str, method: str, path: str, payload: dict,
                         error: str) -> int:
        with self.tx() as db:
            cur = db.execute("INSERT INTO annotation_queue (result_id, url, method, path, payload, created, attempts,"
                             " last_error) VALUES (?,?,?,?,?,?,1,?)",
                             (result_id, url, method, path, json.dumps(payload, sort_keys=True), time.time(), error))
            return _rowid(cur)

    def pending_annotations(self) -> list[sqlite3.Row]:
        return list(self.db.execute("SELECT * FROM annotation_queue WHERE sent IS NULL ORDER BY id"))

    def update_queued(self, queue_id: int, payload: dict) -> None:
        with self.tx() as db:
            db.execute("UPDATE annotation_queue SET payload=? WHERE id=?", (json.dumps(payload, sort_keys=True), queue_id))

    def annotation_sent(self, queue_id: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE annotation_queue SET sent=? WHERE id=?", (time.time(), queue_id))

    def annotation_failed(self, queue_id: int, error: str) -> None:
        with self.tx() as db:
            db.execute("UPDATE annotation_queue SET attempts=attempts+1, last_error=? WHERE id=?", (error, queue_id))


class ReadOnlyStore:
    """The database as the read-only commands see it: opened read-only (immutable when no writer
    has a WAL open), never migrated or written. Rows of an older schema are read as they are: a
    `job` column reads as `workload`, a row without a configuration gets it from
    `config.legacy_configuration`, as the writer's migration would, in memory only. A `running`
    row whose process on this host is gone reads `incomplete` (the next run records it so)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        check_database(self.path)
        wal = Path(f"{self.path}-wal").exists() or Path(f"{self.path}-journal").exists()
        # immutable=1 reads the file as it is and creates nothing beside it; with a writer's WAL
        # present, mode=ro reads through it (its -shm exists then).
        mode = "mode=ro" if wal else "immutable=1"
        try:
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True, timeout=30)
            self.db.row_factory = sqlite3.Row
            tables = {r["name"] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if problems := [r[0] for r in self.db.execute("PRAGMA quick_check") if r[0] != "ok"]:
                raise StoreError(f"{self.path} is damaged: {problems[0]}")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc} (not a readable zfsnas-bench database)") from None
        if "results" not in tables or "matrix_runs" not in tables:
            raise StoreError(f"{self.path} is an SQLite database but not zfsnas-bench's (no results table)")
        self.host = socket.gethostname()
        self._rows: list[dict] | None = None

    def close(self) -> None:
        self.db.close()

    def _all(self) -> list[dict]:
        if self._rows is None:
            try:
                runs = {r["id"]: dict(r) for r in self.db.execute("SELECT * FROM matrix_runs")}
                rows = [dict(r) for r in self.db.execute("SELECT * FROM results ORDER BY started, id")]
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from None
            for row in rows:
                if "workload" not in row and "job" in row:
                    row["workload"] = row.pop("job")
                if not row.get("config"):
                    config = legacy_configuration(row, runs.get(row["run_id"]))
                    row["config"], row["config_id"] = config.to_json(), config.id
                if row["status"] == "running" and row.get("host") == self.host and (
                        not self._run_in_progress() or not pid_alive(int(row["pid"]))):
                    row["status"] = "incomplete"
                for column in RESULT_FIELDS:
                    row.setdefault(column, None)
            self._rows = rows
        return self._rows

    def _run_in_progress(self) -> bool:
        """Whether a run holds the runner's lock beside the database (tried with a shared lock on a
        read-only descriptor: nothing is created or written)."""
        try:
            fd = os.open(f"{self.path}.lock", os.O_RDONLY)
        except OSError:
            return False     # no lock file: no run ever took it, or it cannot be read
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
        return False

    def results(self, status: str | None = "complete", matrix: str | None = None) -> list[dict]:
        return [r for r in self._all() if (not status or r["status"] == status) and (not matrix or r["matrix"] == matrix)]

    def matrices(self) -> list[str]:
        """Matrices with complete results, in first-run order."""
        return list(dict.fromkeys(r["matrix"] for r in self._all() if r["status"] == "complete"))

    def matrix_runs(self) -> list[dict]:
        return [dict(r) for r in self.db.execute("SELECT * FROM matrix_runs ORDER BY started")]

    def configurations(self) -> dict[str, Configuration]:
        return {r["config_id"]: Configuration.from_json(r["config"]) for r in self._all()}


def _rowid(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (sqlite3 types it Optional for other statements)."""
    assert cur.lastrowid is not None, "not after an INSERT"
    return cur.lastrowid
