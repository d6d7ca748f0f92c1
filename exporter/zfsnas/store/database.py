"""The results database (SQLite, WAL, synchronous=FULL): every run kept, none half-written.

Owns the migration of older databases to the schema and every write. The schema and the typed
rows read back are defined once in schema.py, which the exporter's reader (reader.py) shares; so
is the database's default path (`reader.DEFAULT_BENCH_DB`). A result row is inserted as `running`
in one transaction and finished as `complete`, `aborted` or `failed` in another, so a power cut
or `kill -9` leaves a `running` row whose process is gone: the next command that writes (run,
watch, import, restore, annotate) marks it `incomplete` as it opens the store, and the readers
show it so without writing. Annotations that could not reach Grafana wait in `annotation_queue`.
No Grafana token is ever written here.

Crash and disk-full safety as SQLite defines it: whether a file is a sound database is SQLite's
to say (`pragma quick_check`), never its size against the page count in its header (a crash in
the middle of a checkpoint leaves a longer file, which is legal); a new database is built beside
its name and linked into place whole, so a failed create leaves nothing; a database of a newer
schema (a higher `user_version`, a table or column this release does not know) is refused before
anything is written; a writer that finds the database busy waits `wait` seconds (`--db-timeout`)
with one line saying so, then fails in one line; any SQLite error (a full disk, a read-only file)
is one line, its transaction rolled back.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import socket
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .configuration import Configuration, legacy_configuration
from .reader import row_alive, run_in_progress
from .schema import (
    FINAL,
    INDEXES,
    NO_FIGURES,
    NUMBER_FIELDS,
    RENAMED,
    SCHEMA_VERSION,
    TABLES,
    MatrixRun,
    ParameterChange,
    QueuedAnnotation,
    ResultFigures,
    ResultRow,
    figure_problem,
    parameter_change,
    queued_annotation,
    read_matrix_runs,
    read_results,
    select,
)

DEFAULT_WAIT = 60.0      # seconds a writer waits for another one (--db-timeout)
log = logging.getLogger("zfsnas.bench")


class StoreError(Exception):
    """A database that cannot be read or written as asked; the message is one line."""


SQLITE_HEADER = b"SQLite format 3\x00"


def is_sqlite_file(path: str | Path) -> bool:
    """Whether `path` is a regular file starting with SQLite's header (a FIFO is never read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 16) == SQLITE_HEADER
        finally:
            os.close(fd)
    except OSError:
        return False


def check_database(path: str | Path) -> None:
    """Raise StoreError saying, in one line, why `path` is not a file to hand SQLite: missing, a
    directory or another kind of file (a FIFO, a device: never opened for reading), unreadable,
    empty, or not starting with SQLite's header. Whether it is a sound database is SQLite's to say
    (`judge`), never its size against the page count in its header."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise StoreError(f"no database at {path} (zfsnas-bench run, watch or import create it)") from None
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{path} is a directory, not a zfsnas-bench database")
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{path} is not a regular file (a FIFO, a device?), not a zfsnas-bench database")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            header = os.read(fd, 16)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None
    if not header:
        raise StoreError(f"{path} is empty, not a zfsnas-bench database")
    if header != SQLITE_HEADER:
        raise StoreError(f"{path} is not an SQLite database (it starts {header!r})")


def judge(db: sqlite3.Connection, path: Path) -> None:
    """SQLite's own word on the file (`pragma quick_check`): StoreError in one line when damaged."""
    if problems := [row[0] for row in db.execute("PRAGMA quick_check") if row[0] != "ok"]:
        raise StoreError(f"{path} is damaged: {problems[0]} (sqlite3 {path} .recover may save its rows)")


def _schema(db: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table of the database (but SQLite's own) and its column names."""
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
              if not str(row[0]).startswith("sqlite_")]
    return {table: {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')} for table in tables}


def newer_schema(db: sqlite3.Connection) -> str | None:
    """Why the database is of a newer schema than this release writes (a higher user_version, a
    table or a column it does not know: a newer release's), or None."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        return f"its schema is version {version}, newer than this zfsnas-bench's ({SCHEMA_VERSION})"
    for table, columns in _schema(db).items():
        if table not in TABLES:
            return f"it has a table {table!r} this zfsnas-bench does not know (a newer release's?)"
        known = {c.split()[0] for c in TABLES[table]} | {old for (t, old) in RENAMED if t == table}
        if unknown := sorted(columns - known):
            return f"its table {table} has a column {unknown[0]!r} this zfsnas-bench does not know (a newer release's?)"
    return None


class Store:
    def __init__(self, path: str | Path, create: bool = True, wait: float = DEFAULT_WAIT):
        """The writers' store. `create=False`: an existing database only (restore, annotate).
        `wait`: seconds to wait for another writer (`--db-timeout`). Marks the rows of runs and
        watches that died (`mark_stale`). StoreError in one line, nothing written, when the file
        is not a sound database of this release's schema or older."""
        self.path = Path(path)
        self.wait = wait
        self.host = socket.gethostname()
        if create and not os.path.lexists(self.path):
            self._create()
        check_database(self.path)
        try:
            self.db = self._connect(self.path)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc} (not a readable zfsnas-bench database); nothing written") from None
        try:
            if reason := newer_schema(self.db):
                raise StoreError(f"{self.path}: {reason}: upgrade zfsnas-bench to write to it; nothing written")
            judge(self.db, self.path)
            self._locked(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
            self.db.execute("PRAGMA synchronous=FULL")
            self._migrate()
        except sqlite3.Error as exc:
            self.db.close()
            raise StoreError(f"{self.path}: {exc}; nothing written") from None
        except BaseException:
            self.db.close()
            raise
        if stale := self.mark_stale():
            log.warning("%d result(s) left running by a run or watch that died were marked incomplete", stale)

    def _connect(self, path: Path) -> sqlite3.Connection:
        # SQLite's own busy wait is kept short: `_locked` waits the rest, saying so
        db = sqlite3.connect(path, timeout=min(1.0, self.wait), isolation_level=None)
        db.row_factory = sqlite3.Row
        return db

    def _create(self) -> None:
        """A new database, built whole beside its name and linked into place: a full disk, a
        read-only directory or a kill leave no empty or half-made file (nor the directories made
        for it)."""
        made = self._make_parents()
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}-{secrets.token_hex(4)}.new")
        failure: str | None = None
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))   # mode as SQLite's own
            self.db = self._connect(temporary)
            try:
                self.db.execute("PRAGMA journal_mode=WAL")
                self._migrate()
            finally:
                self.db.close()
            try:
                os.link(temporary, self.path)
            except FileExistsError:
                pass         # another writer made it meanwhile: theirs is used
            except OSError:  # a file system without hard links
                os.rename(temporary, self.path)
        except (OSError, sqlite3.Error, StoreError) as exc:
            failure = (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)).split("; nothing")[0]
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(f"{temporary}{suffix}")
                except OSError:
                    pass
        if failure is not None:
            self._undo(made)
            raise StoreError(f"cannot create {self.path}: {failure.removeprefix(f'{self.path}: ')}; nothing written")

    def _make_parents(self) -> list[Path]:
        """The database's missing directories, made; those made, for `_undo`."""
        made: list[Path] = []
        for parent in reversed([self.path.parent, *self.path.parent.parents]):
            if not parent.exists():
                try:
                    parent.mkdir()
                except FileExistsError:
                    continue
                except OSError as exc:
                    self._undo(made)
                    raise StoreError(f"cannot create {parent}: {exc.strerror or exc}; nothing written") from None
                made.append(parent)
            elif not parent.is_dir():
                raise StoreError(f"{parent} is not a directory")
        return made

    @staticmethod
    def _undo(made: list[Path]) -> None:
        for directory in reversed(made):
            try:
                directory.rmdir()
            except OSError:
                pass

    def _locked(self, action: Callable[[], object]) -> None:
        """Run `action`; while the database is locked by another writer, try again for `wait`
        seconds, saying once that it waits; then StoreError in one line."""
        deadline = None
        while True:
            try:
                action()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.wait
                log.warning("%s is being written by another process: waiting up to %g s (--db-timeout)",
                            self.path, self.wait)
            if now >= deadline:
                raise StoreError(f"{self.path}: still locked by another writer after {self.wait:g} s "
                                 f"(--db-timeout raises it); nothing written")

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
        """One write transaction: all of it or (on any error, a full disk included) none of it;
        an SQLite error becomes StoreError in one line."""
        self._locked(lambda: self.db.execute("BEGIN IMMEDIATE"))
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass     # SQLite rolled it back itself (a full disk): the first error is the one to say
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{self.path}: {exc}; nothing of this change was written") from None
            raise

    def mark_stale(self, holding_lock: bool = False) -> int:
        """Rows left `running` by a process of this host that is gone become `incomplete`.

        Gone: the caller holds the run lock (no other run or watch of this host is alive, even if
        a pid has been reused since), no one holds it (every run and watch holds it for its whole
        length: asked inside the write transaction, so a run that takes it now writes its rows
        after these), or its pid is dead."""
        stale = 0
        with self.tx() as db:
            lock = True if holding_lock else run_in_progress(self.path)
            for table in ("results", "matrix_runs"):
                for row in db.execute(f"SELECT id, pid FROM {table} WHERE status='running' AND host=?", (self.host,)):
                    if holding_lock or not row_alive(self.host, row["pid"], lock, self.host):
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
        encoded = _checked_columns(figures)
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
                encoded = _checked_columns(figures)
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

    # Module parameters a run changed (bench/running/parameters.py)
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
    `legacy_configuration` (`schema.result_row`), as the writer's migration would, in memory
    only. A `running` row whose run is gone (`reader.row_alive`: no one holds the run lock, or its
    process on this host is dead) reads `incomplete`, as the exporter reads it; the next command
    that writes records it so. What cannot be true reads as not measured (`schema.checked_row`)."""

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
            judge(self.db, self.path)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc} (not a readable zfsnas-bench database)") from None
        if "results" not in tables or "matrix_runs" not in tables:
            raise StoreError(f"{self.path} is an SQLite database but not zfsnas-bench's (no results table)")
        self.host = socket.gethostname()
        self._rows: list[ResultRow] | None = None
        self._lock: tuple[bool | None] | None = None    # run_in_progress, asked once

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
        """A `running` row whose run is gone (`reader.row_alive`)."""
        if row.status != "running":
            return False
        if self._lock is None:
            self._lock = (run_in_progress(self.path),)
        return not row_alive(row.host, row.pid, self._lock[0], self.host)

    def results(self, status: str | None = "complete", matrix: str | None = None) -> list[ResultRow]:
        return [r for r in self._all() if (not status or r.status == status) and (not matrix or r.matrix == matrix)]

    def matrices(self) -> list[str]:
        """Matrices with complete results, in first-run order."""
        return list(dict.fromkeys(r.matrix for r in self._all() if r.status == "complete"))

    def matrix_runs(self) -> list[MatrixRun]:
        return read_matrix_runs(self.db)


def _checked_columns(figures: ResultFigures) -> dict[str, object]:
    """The figures' columns, less a number that cannot be one (NaN, an infinity, a negative
    throughput): left NULL, not measured, and said. Importers refuse such input before."""
    encoded = figures.columns()
    for name in NUMBER_FIELDS:
        if name in encoded and (problem := figure_problem(name, encoded[name])):
            log.warning("figure %s = %r left out (%s)", name, encoded.pop(name), problem.replace("_", " "))
    return encoded


def _rowid(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (sqlite3 types it Optional for other statements)."""
    assert cur.lastrowid is not None, "not after an INSERT"
    return cur.lastrowid
