"""The benchmark database's schema and its rows, read the same way by the runner's store
(database.py, the only writer) and the exporter's reader (reader.py).

Owns the tables (TABLES, with what a migration renames and indexes), the measured figures a
result carries (`ResultFigures`, what a writer hands the store) and the typed rows read back
(`ResultRow`, `MatrixRun`, `ParameterChange`, `QueuedAnnotation`), each built in one place from
the columns SQLite returns. A result stored by an older release (a `job` column, no configuration)
is read as the migration would write it: `workload`, and its configuration from
`legacy_configuration`. It sits in the store, below the bench wing and the exporter, and imports
nothing from `zfsnas.bench`; it opens no database itself and writes nothing.

Also owns what a stored value may be (`number_problem`, `time_problem`): finite numbers,
non-negative where that is physics, times within a plausible window. Writers check there before
they store (an import refuses its file), readers when they read (a value that is not one is read
as not measured, never served or plotted as it is).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from .configuration import Configuration, legacy_configuration

if TYPE_CHECKING:
    import sqlite3

SCHEMA_VERSION = 1
# The schema, defined once: CREATE builds it on a new database and the store's migration adds to an
# older one whatever of it is missing. Columns added after the first release must be nullable.
TABLES = {
    "matrix_runs": (
        "id TEXT PRIMARY KEY", "matrix TEXT NOT NULL", "dataset TEXT NOT NULL", "pool TEXT NOT NULL",
        "host TEXT NOT NULL", "pid INTEGER NOT NULL", "started REAL NOT NULL", "finished REAL",
        "status TEXT NOT NULL", "zfs_version TEXT", "fio_version TEXT", "kernel TEXT", "pool_layout TEXT",
        "cells INTEGER NOT NULL DEFAULT 0",
        "parameters TEXT",                  # every module parameter at run start (JSON)
        "race TEXT"),                       # `run --until-decided`: how the race ended (JSON; racing.py)
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
        "config_id TEXT", "config TEXT",    # configuration.py: the id and the canonical configuration
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

# A time a result may carry: not before 2000 (no zfsnas-bench, fio JSON or CrystalDiskMark 5 result
# is older), not more than a day ahead of this clock (a client whose clock is a little ahead).
EARLIEST_TIME = 946_684_800.0
FUTURE_SLACK_SECONDS = 86_400.0
LATEST_READABLE_TIME = 253_402_300_799.0     # 9999-12-31T23:59:59Z
# Figures that can be negative: a watch's `used`/`logicalused` are growths (files deleted meanwhile).
SIGNED_FIGURES = frozenset({"used_bytes", "logicalused_bytes"})
# Figures bounded by what they are: shares of CPU time, and a compression ratio (ZFS's best: a 16 MiB
# record held in a block pointer's 112 bytes, about 150,000; 10^6 leaves room).
FIGURE_RANGES = {"cpu_busy_ratio": (0.0, 1.0), "cpu_iowait_ratio": (0.0, 1.0), "compressratio": (0.0, 1e6)}

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class ResultFigures:
    """What a result measured: the columns a writer fills when it finishes a result. A figure left
    None is not written (it stays NULL); a JSON field (a dict) is stored as sorted compact JSON."""
    throughput_bytes_per_second: float | None = None
    iops: float | None = None
    bytes: int | None = None
    duration_seconds: float | None = None
    sync_seconds: float | None = None
    cpu_busy_ratio: float | None = None
    cpu_iowait_ratio: float | None = None
    compressratio: float | None = None
    used_bytes: int | None = None
    logicalused_bytes: int | None = None
    properties: JsonObject | None = None      # every dataset property the cell set
    clat_ns: JsonObject | None = None         # fio's completion latency percentiles
    disks: JsonObject | None = None
    dmu_tx: JsonObject | None = None
    fio_json: str | None = None
    error: str | None = None
    cpu_user_seconds: float | None = None
    cpu_system_seconds: float | None = None
    cpu_iowait_seconds: float | None = None
    cpu_idle_seconds: float | None = None
    prefill_seconds: float | None = None
    latency_us: float | None = None
    details: JsonObject | None = None         # what a result says beyond its figures (watch, import source)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ResultFigures:
        """Figures from a mapping of field names (a runner's or an importer's accumulated dict);
        a name that is no figure is refused before anything is written."""
        if unknown := set(values) - set(RESULT_FIELDS):
            raise ValueError(f"unknown result fields {sorted(unknown)}")
        return cls(**values)

    def columns(self) -> dict[str, object]:
        """The figures given, as the values of their columns."""
        return {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                for k, v in asdict(self).items() if v is not None}


RESULT_FIELDS = tuple(f.name for f in fields(ResultFigures))
NO_FIGURES = ResultFigures()
# The figures that are numbers (the others are JSON or text).
NUMBER_FIELDS = tuple(f.name for f in fields(ResultFigures) if f.type in ("float | None", "int | None"))


def number_problem(value: object, signed: bool = False) -> str | None:
    """Why `value` is no figure (`not_a_number`: text, bytes, NaN, an infinity, an integer past
    float64; `negative` where it cannot be), or None when it is one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "not_a_number"
    try:
        number = float(value)
    except OverflowError:
        return "not_a_number"
    if not math.isfinite(number):
        return "not_a_number"
    return "negative" if number < 0 and not signed else None


def time_problem(value: object, now: float | None = None) -> str | None:
    """Why `value` is no plausible Unix time of a result coming in (`out_of_range`: before 2000 or
    more than a day ahead of this clock), or None."""
    latest = (time.time() if now is None else now) + FUTURE_SLACK_SECONDS
    return _time_outside(value, EARLIEST_TIME, latest)


def stored_time_problem(value: object) -> str | None:
    """Why a stored `value` cannot be read as a time (`out_of_range`: before 1970 or after 9999, which
    no calendar a reader prints reaches), or None. Looser than `time_problem`: what an older release
    stored is read if it can be."""
    return _time_outside(value, 0.0, LATEST_READABLE_TIME)


def _time_outside(value: object, earliest: float, latest: float) -> str | None:
    problem = number_problem(value)
    if problem is not None:
        return problem
    assert isinstance(value, (int, float))   # number_problem said so
    return None if earliest <= value <= latest else "out_of_range"


def figure_problem(name: str, value: object) -> str | None:
    """`number_problem` of one figure of ResultFigures (signed where SIGNED_FIGURES says), and
    `out_of_range` outside FIGURE_RANGES."""
    problem = number_problem(value, signed=name in SIGNED_FIGURES)
    if problem is None and name in FIGURE_RANGES:
        assert isinstance(value, (int, float))   # number_problem said so
        low, high = FIGURE_RANGES[name]
        return None if low <= value <= high else "out_of_range"
    return problem


@dataclass(frozen=True)
class ResultRow:
    """One stored result (a row of `results`), JSON fields as the stored text."""
    id: int
    run_id: str
    cell: int
    matrix: str
    workload: str
    compression: str
    recordsize: str
    size: str
    pool: str
    encryption: str
    repeat: int
    dataset: str
    host: str
    pid: int
    started: float
    finished: float | None
    status: str
    config_id: str
    config: str                       # the configuration's stored JSON (Configuration.to_json)
    annotation_id: int | None
    throughput_bytes_per_second: float | None
    iops: float | None
    bytes: int | None
    duration_seconds: float | None
    sync_seconds: float | None
    cpu_busy_ratio: float | None
    cpu_iowait_ratio: float | None
    compressratio: float | None
    used_bytes: int | None
    logicalused_bytes: int | None
    properties: str | None
    clat_ns: str | None
    disks: str | None
    dmu_tx: str | None
    fio_json: str | None
    error: str | None
    cpu_user_seconds: float | None
    cpu_system_seconds: float | None
    cpu_iowait_seconds: float | None
    cpu_idle_seconds: float | None
    prefill_seconds: float | None
    latency_us: float | None
    details: str | None

    @property
    def configuration(self) -> Configuration:
        return Configuration.from_json(self.config)

    @property
    def cpu_seconds(self) -> float | None:
        """All CPU time of the measured step (user+system+iowait+idle); None when a part is missing."""
        parts = (self.cpu_user_seconds, self.cpu_system_seconds, self.cpu_iowait_seconds, self.cpu_idle_seconds)
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


@dataclass(frozen=True)
class MatrixRun:
    """One run of a matrix (a row of `matrix_runs`); `parameters` is the stored JSON."""
    id: str
    matrix: str
    dataset: str
    pool: str
    host: str
    pid: int
    started: float
    finished: float | None
    status: str
    zfs_version: str | None
    fio_version: str | None
    kernel: str | None
    pool_layout: str | None
    cells: int
    parameters: str | None
    race: str | None = None        # a race's record (JSON), None for a full run or an import


@dataclass(frozen=True)
class ParameterChange:
    """A module parameter a run changed (a row of `parameter_changes`); `restored` None: not yet."""
    id: int
    run_id: str
    host: str
    name: str
    original: str
    value: str
    changed: float
    restored: float | None


@dataclass(frozen=True)
class QueuedAnnotation:
    """A Grafana request that could not be sent (a row of `annotation_queue`); `payload` is JSON."""
    id: int
    result_id: int | None
    url: str
    method: str
    path: str
    payload: str
    created: float
    attempts: int
    last_error: str | None
    sent: float | None


def _columns(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """`cls`'s fields from a row's columns; a column an older schema lacks reads None."""
    return {f.name: values.get(f.name) for f in fields(cls)}


def result_row(values: Mapping[str, Any], runs: Mapping[str, Mapping[str, Any]] | None = None) -> ResultRow:
    """A `results` row as the current schema has it: an older release's `job` is the workload, and a
    row without a configuration gets `legacy_configuration` (of the row and its run in `runs`). A
    figure that is no number (or negative where it cannot be) reads None, not measured; a finish
    time that is no readable time None, such a start time the finish (else 0: 1970)."""
    columns = dict(values)
    if "workload" not in columns and "job" in columns:
        columns["workload"] = columns.pop("job")
    if not columns.get("config"):
        config = legacy_configuration(columns, (runs or {}).get(columns["run_id"]))
        columns["config"], columns["config_id"] = config.to_json(), config.id
    return checked_row(ResultRow(**_columns(ResultRow, columns)))


def checked_row(row: ResultRow) -> ResultRow:
    """`row` with what cannot be true read as not measured (see `result_row`)."""
    bad: dict[str, Any] = {name: None for name in NUMBER_FIELDS
                           if (value := getattr(row, name)) is not None and figure_problem(name, value)}
    if row.finished is not None and stored_time_problem(row.finished):
        bad["finished"] = None
    if stored_time_problem(row.started):
        finished = bad.get("finished", row.finished)
        bad["started"] = finished if finished is not None else 0.0
    return replace(row, **bad) if bad else row


def matrix_run(values: Mapping[str, Any]) -> MatrixRun:
    return MatrixRun(**_columns(MatrixRun, values))


def parameter_change(values: Mapping[str, Any]) -> ParameterChange:
    return ParameterChange(**_columns(ParameterChange, values))


def queued_annotation(values: Mapping[str, Any]) -> QueuedAnnotation:
    return QueuedAnnotation(**_columns(QueuedAnnotation, values))


def select(db: sqlite3.Connection, query: str, args: Iterable[object] = ()) -> list[dict[str, Any]]:
    """The rows of `query` as column dicts, whatever the connection's row factory."""
    cursor = db.execute(query, tuple(args))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def read_results(db: sqlite3.Connection, where: str = "", args: Iterable[object] = (),
                 order: str = "started, id") -> list[ResultRow]:
    """The results matching `where` (an SQL condition on `results`, with `args`), in `order`. The
    matrix runs are read only when an older release's row needs one for its configuration."""
    rows = select(db, f"SELECT * FROM results{f' WHERE {where}' if where else ''} ORDER BY {order}", args)
    runs = {r["id"]: r for r in select(db, "SELECT * FROM matrix_runs")} if any(
        not r.get("config") for r in rows) else {}
    return [result_row(r, runs) for r in rows]


def read_matrix_runs(db: sqlite3.Connection) -> list[MatrixRun]:
    return [matrix_run(r) for r in select(db, "SELECT * FROM matrix_runs ORDER BY started")]
