"""The results database (SQLite, WAL, synchronous=FULL): every run kept, none half-written.

Owns the migration of older databases to the schema and every write. The schema and the typed
rows read back are defined once in `zfsnas.sources.benchschema`, which the exporter's reader
shares. A result row is inserted as `running` in one transaction and finished as `complete`,
`aborted` or `failed` in another, so a power cut leaves a `running` row whose pid is gone: the
next `zfsnas-bench` start marks it `incomplete`. Annotations that could not reach Grafana wait in
`annotation_queue`. No Grafana token is ever written here.
"""

from __future__ import annotations

import dataclasses
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

from ..sources.benchschema import (
    FINAL,
    INDEXES,
    NO_FIGURES,
    RENAMED,
    RESULT_FIELDS,
    SCHEMA_VERSION,
    TABLES,
    MatrixRun,
    ParameterChange,
    QueuedAnnotation,
    ResultFigures,
    ResultRow,
    parameter_change,
    queued_annotation,
    read_matrix_runs,
    read_results,
    select,
)
from .config import Configuration, legacy_configuration

# The schema's names the bench wing and its tests import from the store.
__all__ = ["DEFAULT_DB", "RESULT_FIELDS", "SCHEMA_VERSION", "TABLES", "MatrixRun", "ParameterChange",
           "QueuedAnnotation", "ReadOnlyStore", "ResultFigures", "ResultRow", "Store", "StoreError"]

DEFAULT_DB = "/var/lib/zfsnas/bench.sqlite"


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

    def record_race(self, run_id: str, record: dict[str, Any]) -> None:
        """How the race of `run_id` ended (racing.Race.to_record), kept with the run for `report` and
        `recommend` to state later."""
        with self.tx() as db:
            db.execute("UPDATE matrix_runs SET race=? WHERE id=?", (json.dumps(record, sort_keys=True), run_id))

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

    def finish_result(self, result_id: int, status: str, finished: float | None = None,
                      figures: ResultFigures = NO_FIGURES, started: float | None = None) -> None:
        """One transaction: every figure and the final status land together or not at all.
        `started` moves the row's start (a watch's result starts at its first byte, not at its start)."""
        if status not in FINAL:
            raise ValueError(f"status {status!r} is not one of {FINAL}")
        encoded = figures.columns()
        if started is not None:
            encoded = {"started": started, **encoded}
        columns = ", ".join(f"{k}=?" for k in encoded)
        with self.tx() as db:
            db.execute(f"UPDATE results SET status=?, finished=?{', ' if columns else ''}{columns} WHERE id=?",
                       (status, time.time() if finished is None else finished, *encoded.values(), result_id))

    def record_result(self, run_id: str, cell: int, config: Configuration, repeat: int = 1, dataset: str = "",
                      started: float | None = None, finished: float | None = None,
                      figures: ResultFigures = NO_FIGURES) -> int:
        """A finished `complete` result in one call (imports, published figures, tests): the same two
        transactions as a run's start_result/finish_result, so it reads back like any measured row."""
        result_id = self.start_result(run_id, cell, config, repeat, dataset or f"{config.pool}/imported",
                                      started=started)
        self.finish_result(result_id, "complete", finished=finished, figures=figures)
        return result_id

    def import_results(self, run_id: str, matrix: str, dataset: str, results: list[tuple[Configuration, ResultFigures]],
                       started: float, finished: float, details: dict | None = None,
                       status: str = "complete") -> list[int]:
        """Results measured elsewhere (`zfsnas-bench import`), with their matrix run, in ONE
        transaction: a bad value or a full disk stores none of them. `results`: (configuration,
        figures) in file order; each row is `complete` (or `status`: `predicted` for `zfsnas-bench
        predict`'s estimates, which no reader of measurements selects) from `started` to `finished`."""
        ids = []
        with self.tx() as db:
            db.execute("INSERT INTO matrix_runs (id, matrix, dataset, pool, host, pid, started, finished, status,"
                       " cells, parameters) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       (run_id, matrix, dataset, dataset.split("/")[0], self.host, os.getpid(), started, finished,
                        "complete", len(results), json.dumps(details or {}, sort_keys=True)))
            for cell, (config, figures) in enumerate(results, 1):
                labels = config.labels
                encoded = figures.columns()
                columns = ["run_id", "cell", "matrix", "workload", "compression", "recordsize", "size", "pool",
                           "encryption", "repeat", "dataset", "host", "pid", "started", "finished", "status",
                           "config_id", "config", *encoded]
                row = [run_id, cell, config.matrix, config.workload, labels["compression"], labels["recordsize"],
                       config.size, config.pool, labels["encryption"], 1, dataset, self.host, os.getpid(), started,
                       finished, status, config.id, config.to_json(), *encoded.values()]
                cur = db.execute(f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(row))})",
                                 row)
                ids.append(_rowid(cur))
        return ids

    def set_annotation(self, result_id: int, annotation_id: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE results SET annotation_id=? WHERE id=?", (annotation_id, result_id))

    def annotation_id(self, result_id: int) -> int | None:
        """The Grafana annotation a result's start created, if any."""
        row = self.db.execute("SELECT annotation_id FROM results WHERE id=?", (result_id,)).fetchone()
        return row["annotation_id"] if row else None

    def results(self, status: str | None = "complete", matrix: str | None = None) -> list[ResultRow]:
        where, args = ["1=1"], []
        if status:
            where.append("status=?")
            args.append(status)
        if matrix:
            where.append("matrix=?")
            args.append(matrix)
        return read_results(self.db, " AND ".join(where), args)

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

    def pending_parameters(self, run_id: str | None = None) -> list[ParameterChange]:
        """Changes of this host not yet restored, newest first (so the oldest original is written last)."""
        query, args = "SELECT * FROM parameter_changes WHERE host=? AND restored IS NULL", [self.host]
        if run_id is not None:
            query += " AND run_id=?"
            args.append(run_id)
        return [parameter_change(r) for r in select(self.db, query + " ORDER BY id DESC", args)]

    def parameter_restored(self, change_id: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE parameter_changes SET restored=? WHERE id=?", (time.time(), change_id))

    def dead_runs(self) -> set[str]:
        """Ids of this host's runs that ended without cleaning up (crashed, or marked incomplete)."""
        rows = self.db.execute("SELECT id FROM matrix_runs WHERE host=? AND status='incomplete'", (self.host,))
        return {row["id"] for row in rows}

    def matrix_runs(self) -> list[MatrixRun]:
        return read_matrix_runs(self.db)

    # Annotation queue
    def queue_annotation(self, result_id: int | None, url: str, method: str, path: str, payload: dict,
                         error: str) -> int:
        with self.tx() as db:
            cur = db.execute("INSERT INTO annotation_queue (result_id, url, method, path, payload, created, attempts,"
                             " last_error) VALUES (?,?,?,?,?,?,1,?)",
                             (result_id, url, method, path, json.dumps(payload, sort_keys=True), time.time(), error))
            return _rowid(cur)

    def pending_annotations(self) -> list[QueuedAnnotation]:
        return [queued_annotation(r) for r in select(self.db, "SELECT * FROM annotation_queue WHERE sent IS NULL ORDER BY id")]

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
    `legacy_configuration` (`benchschema.result_row`), as the writer's migration would, in memory
    only. A `running` row whose process on this host is gone reads `incomplete` (the next run records it so)."""

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
        self._rows: list[ResultRow] | None = None

    def close(self) -> None:
        self.db.close()

    def _all(self) -> list[ResultRow]:
        if self._rows is None:
            try:
                rows = read_results(self.db)
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from None
            self._rows = [dataclasses.replace(row, status="incomplete") if self._stale(row) else row for row in rows]
        return self._rows

    def _stale(self, row: ResultRow) -> bool:
        """A `running` row of this host whose run is gone (no run holds the lock, or its pid is dead)."""
        return row.status == "running" and row.host == self.host and (
            not self._run_in_progress() or not pid_alive(int(row.pid)))

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

    def results(self, status: str | None = "complete", matrix: str | None = None) -> list[ResultRow]:
        return [r for r in self._all() if (not status or r.status == status) and (not matrix or r.matrix == matrix)]

    def matrices(self) -> list[str]:
        """Matrices with complete results, in first-run order."""
        return list(dict.fromkeys(r.matrix for r in self._all() if r.status == "complete"))

    def matrix_runs(self) -> list[MatrixRun]:
        return read_matrix_runs(self.db)

    def configurations(self) -> dict[str, Configuration]:
        return {r.config_id: r.configuration for r in self._all()}


def _rowid(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (sqlite3 types it Optional for other statements)."""
    assert cur.lastrowid is not None, "not after an INSERT"
    return cur.lastrowid
