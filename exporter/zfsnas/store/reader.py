"""Reader of the benchmark database (`zfsnas-bench`'s SQLite file), opened read-only.

Owns turning the stored results into one `BenchConfig` per configuration id (the one definition
of a configuration is configuration.py, the schema and its typed rows schema.py, which the
runner's writer, database.py, writes through; nothing here comes from the bench wing above): the latest complete
run's figures, the median throughput of the earlier complete runs of the *same* configuration
(what the regression alert compares against), the count of complete runs, and whether a run of
it is in progress. It never writes to the database; a missing file is not an error (no benchmark
has run yet).

Its cost does not grow with the store (`BenchDbReader`): it keeps one summary per configuration
between reads and reads again only what changed (results added since, results it saw `running`);
an unchanged file (and `-wal`) is not opened at all. A configuration's summary is read through the
index on its id: its complete runs counted, the latest `MEDIAN_WINDOW + 1` of them read. At most
`max_configurations` are kept and served, the most recently stored; the others are counted
(`over_limit`) and the source reports the cut. What cannot be true is left out and counted where
it is read: a figure that is no finite number, a time outside what a calendar reaches, a stored
configuration over `MAX_CONFIG_CHARS` or with a label value over `MAX_LABEL_CHARS`.

Whether a `running` row is running: no run holds the runner's lock beside the database (the
lock file exists, and no one holds it), or it is this host's and its process is gone, and it is
not (`row_alive`; the commands' reader, database.py's `ReadOnlyStore`, asks the same). A database written by an
older runner (no configuration ids yet) is read whole with `schema.result_row`, as the
runner's migration would; such databases predate anything that could make them big.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..sources.model import SourceError, SourceIncomplete

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from ..sources.model import Dropped
    from .configuration import Configuration
    from .schema import ResultRow

# The schema and configuration modules (hashlib, json), pathlib and sqlite3 are imported only when
# there is a database to read: the `bench` collector is on by default and most exporters never see one.

DEFAULT_BENCH_DB = "/var/lib/zfsnas/bench.sqlite"
DEFAULT_MAX_CONFIGURATIONS = 1000
MEDIAN_WINDOW = 1000        # the earlier complete runs the previous median is taken over (the latest ones)
MAX_CONFIG_CHARS = 32768    # a stored configuration is 1-3 KB; one longer is not parsed
MAX_LABEL_CHARS = 256       # a label value (pool and dataset names are at most 255 bytes)
MAX_RUNNING_ROWS = 16       # `running` rows of one configuration watched for their end
PAGE_ROWS = 5000            # new rows read per query, in id order
_FIGURES = ("throughput_bytes_per_second", "compressratio", "cpu_busy_ratio", "duration_seconds")


@dataclass(frozen=True)
class BenchConfig:
    labels: dict[str, str]                      # Configuration.labels: matrix, workload, config, ...
    running: bool
    runs: int                                   # complete runs
    throughput_bytes_per_second: float | None   # the latest complete run's
    compressratio: float | None
    cpu_busy_ratio: float | None
    duration_seconds: float | None
    last_run_timestamp: float | None            # when the latest complete run finished
    previous_median_throughput: float | None    # median over the complete runs before the latest
    # (id, what changed in words) of the configuration that ran before this one's latest run among
    # those sharing its readable labels: the same cell before a tuning change
    previous: tuple[str, str] | None = None


def read_bench_db(path: str | Path, dropped: Dropped | None = None,
                  max_configurations: int = DEFAULT_MAX_CONFIGURATIONS) -> list[BenchConfig]:
    """One read of the database (a fresh reader: what `BenchDbReader` reads the first time)."""
    from ..sources.model import Dropped

    return BenchDbReader(path, max_configurations).read(Dropped() if dropped is None else dropped)


# --- whether a `running` row is running -----------------------------------------------------------

def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


def run_in_progress(db_path: str | Path) -> bool | None:
    """Whether a run or watch holds the runner's lock beside the database (`<db>.lock`, taken for
    their whole length): True, False, or None when there is no lock file to ask (no run ever took
    it here, or it cannot be read). Tried with a shared lock on a read-only descriptor: nothing is
    created or written."""
    import fcntl

    try:
        fd = os.open(f"{db_path}.lock", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def row_alive(host: object, pid: object, lock: bool | None, this_host: str) -> bool:
    """Whether a `running` row's process may still be running it: not when the lock exists and no
    one holds it (every run holds it), not when it is this host's and its pid is gone."""
    if lock is False:
        return False
    if host == this_host:
        return isinstance(pid, int) and pid_alive(pid)   # a pid that is no number: no process of ours
    return True


# --- the reader -------------------------------------------------------------------------------------

@dataclass
class _Series:
    """What is kept of one configuration between reads."""
    labels: dict[str, str]
    runs: int
    latest: dict[str, float | None]              # _FIGURES and `finished` of the latest complete run
    previous_median: float | None
    running: list[tuple[int, Any, Any]]          # (id, host, pid) of its `running` rows, newest first
    last_id: int                                 # its newest complete or running row: recency
    configuration: Configuration | None = None   # what a change from the previous configuration is said from


@dataclass
class _State:
    file: tuple[int, int] | None = None          # (device, inode) of the database
    stat: tuple[Any, ...] | None = None          # the database's and its -wal's size and times at the last read
    last_id: int = 0                             # the highest row id read
    series: dict[str, _Series] = field(default_factory=dict)
    left_out: int = 0                            # configurations not kept (past max_configurations)


class BenchDbReader:
    """Reads the database again and again at a cost that does not grow with it (module docstring).
    `rows_read` counts the rows SQLite handed over since the reader was made (what the tests bound)."""

    def __init__(self, path: str | Path, max_configurations: int = DEFAULT_MAX_CONFIGURATIONS):
        from pathlib import Path

        self.path = Path(path)
        self.max_configurations = max_configurations
        self.rows_read = 0
        self.host = socket.gethostname()
        self._state = _State()
        self._reads = 0            # database reads that changed something: the served list is rebuilt after one
        self._value: list[BenchConfig] = []
        self._value_key: tuple[Any, ...] | None = None

    def read(self, dropped: Dropped) -> list[BenchConfig]:
        """The configurations, one `BenchConfig` each (the same list object while nothing changed).
        Raises SourceError when the file cannot be read, SourceIncomplete (with the value) when
        configurations were left out."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._state = _State()
            return []
        except OSError as exc:
            raise SourceError(f"{self.path}: {exc.strerror or exc}") from None
        state = self._state
        if state.file != (stat.st_dev, stat.st_ino):
            state = self._state = _State(file=(stat.st_dev, stat.st_ino))
        key = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, _stat_key(f"{self.path}-wal"))
        if key != state.stat:
            self._update(dropped)
            self._reads += 1
            self._state.stat = key
        value = self._served(run_in_progress(self.path))
        if left_out := self._state.left_out:      # (the state a read started again from, when it did)
            raise SourceIncomplete(f"{self.path}: {left_out} configuration(s) past --bench.max-configurations "
                                   f"({self.max_configurations}) left out (the most recently stored are served)",
                                   value)
        return value

    def _update(self, dropped: Dropped) -> None:
        import sqlite3

        try:
            db = self._open()
        except (OSError, sqlite3.Error) as exc:
            raise SourceError(f"{self.path}: {exc}") from None
        try:
            state = self._state
            columns = {row[1] for row in db.execute("PRAGMA table_info(results)")}
            if not columns:
                raise SourceError(f"{self.path}: no results table (not a zfsnas-bench database)")
            if "config_id" not in columns:
                self._read_whole(db, dropped)
                return
            newest = db.execute("SELECT MAX(id) FROM results").fetchone()[0] or 0
            if newest < state.last_id:     # rows were removed: start again
                self._state = state = _State(file=state.file)
            if state.last_id == 0:
                self._load_all(db, dropped)
            else:
                self._read_changes(db, dropped)
            self._state.last_id = max(self._state.last_id, newest)
        except sqlite3.Error as exc:
            raise SourceError(f"{self.path}: {exc}") from None
        finally:
            db.close()

    def _open(self) -> sqlite3.Connection:
        # A WAL database is read through its -shm file, which the runner deletes when it closes the
        # store, and a reader without write access to the directory (the systemd unit, a read-only
        # mount) cannot create it. With no -wal the runner is not writing: open the file as immutable then.
        import sqlite3

        with self.path.open("rb") as header:
            wal_mode = header.read(20)[18:19] == b"\x02"   # the file format's write version: 2 = WAL
        mode = "immutable=1" if wal_mode and not os.path.exists(f"{self.path}-wal") else "mode=ro"
        db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True, timeout=5)
        # text that is not UTF-8 reaches the renderer, which escapes and counts it: one bad label, not the source
        db.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
        return db

    def _rows(self, db: sqlite3.Connection, query: str, args: tuple = ()) -> list[tuple]:
        rows = db.execute(query, args).fetchall()
        self.rows_read += len(rows)
        return rows

    def _load_all(self, db: sqlite3.Connection, dropped: Dropped) -> None:
        """The first read: the most recently stored configurations (by their newest row: the index
        on configuration ids holds it), up to the limit; the others counted, not read."""
        state = self._state
        newest = self._rows(db, "SELECT config_id, MAX(id) AS newest FROM results WHERE status IN ('complete', "
                                "'running') GROUP BY config_id ORDER BY newest DESC LIMIT ?",
                            (self.max_configurations,))
        for config_id, _newest in newest:
            if isinstance(config_id, str):
                self._admit(db, config_id, dropped)
            else:
                dropped.add("malformed", f"a result without a configuration id: {config_id!r}")
        if len(newest) == self.max_configurations:
            [(count,)] = self._rows(db, "SELECT COUNT(DISTINCT config_id) FROM results WHERE status IN "
                                        "('complete', 'running')")
            if count > len(newest):
                state.left_out = count - len(newest)
                dropped.add("over_limit", f"{state.left_out} configurations stored before the {len(newest)} served",
                            count=state.left_out)

    def _read_changes(self, db: sqlite3.Connection, dropped: Dropped) -> None:
        """Results added since the last read, and the end of the results seen `running`."""
        state = self._state
        changed: dict[object, int] = {}      # configuration id -> the row that changed it
        after = state.last_id
        while True:
            rows = self._rows(db, "SELECT id, config_id FROM results WHERE id > ? AND status IN ('complete', 'running')"
                              " ORDER BY id LIMIT ?", (after, PAGE_ROWS))
            for row_id, config_id in rows:
                changed[config_id] = row_id
            if len(changed) > self.max_configurations:    # more new ones than are kept: read as at the start
                self._state = _State(file=state.file)
                self._load_all(db, dropped)
                return
            if len(rows) < PAGE_ROWS:
                break
            after = rows[-1][0]
        watched = {row_id: cid for cid, s in state.series.items() for row_id, _host, _pid in s.running}
        ids = sorted(watched)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            still = {row_id for row_id, status in self._rows(
                db, f"SELECT id, status FROM results WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk))
                if status == "running"}
            for row_id in chunk:
                if row_id not in still:      # it ended (or was removed)
                    changed.setdefault(watched[row_id], row_id)
        for config_id in sorted(changed, key=changed.__getitem__):
            if not isinstance(config_id, str):
                dropped.add("malformed", f"a result without a configuration id: {config_id!r}")
            elif config_id in state.series:
                del state.series[config_id]
                self._admit(db, config_id, dropped)
            else:
                self._arrive(db, config_id, dropped)
        if len(state.series) < self.max_configurations and state.left_out:
            # one went away (its results all ended otherwise): take the next of those left out
            self._state = _State(file=state.file)
            self._load_all(db, dropped)

    def _arrive(self, db: sqlite3.Connection, config_id: str, dropped: Dropped) -> None:
        """A configuration not kept has a new result: kept, in place of the least recent when full."""
        state = self._state
        if state.left_out and self._rows(
                db, "SELECT 1 FROM results WHERE config_id = ? AND id <= ? AND status IN ('complete', 'running') LIMIT 1",
                (config_id, state.last_id)):
            state.left_out -= 1      # it was one of those left out
        if len(state.series) >= self.max_configurations:
            oldest = min(state.series, key=lambda cid: state.series[cid].last_id)
            del state.series[oldest]
            state.left_out += 1
            dropped.add("over_limit", f"configuration {oldest}")
        self._admit(db, config_id, dropped)

    def _admit(self, db: sqlite3.Connection, config_id: str, dropped: Dropped) -> None:
        if (series := self._series(db, config_id, dropped)) is not None:
            self._state.series[config_id] = series

    def _series(self, db: sqlite3.Connection, config_id: str, dropped: Dropped) -> _Series | None:
        """One configuration's summary, read through the index on its id."""
        from .schema import figure_problem, stored_time_problem

        [(config_length, config_text)] = self._rows(
            db, "SELECT length(config), CASE WHEN length(config) <= ? THEN config END FROM results WHERE config_id = ?"
                " ORDER BY id DESC LIMIT 1", (MAX_CONFIG_CHARS, config_id)) or [(0, None)]
        parsed = self._labels(config_id, config_length, config_text, dropped)
        if parsed is None:
            return None
        labels, configuration = parsed
        [(runs, newest)] = self._rows(db, "SELECT COUNT(*), MAX(id) FROM results WHERE config_id = ? AND status = "
                                          "'complete'", (config_id,))
        running = self._rows(db, "SELECT id, host, pid FROM results WHERE config_id = ? AND status = 'running'"
                                 " ORDER BY id DESC LIMIT ?", (config_id, MAX_RUNNING_ROWS))
        if not runs and not running:
            return None
        done = self._rows(db, f"SELECT finished, {', '.join(_FIGURES)} FROM results WHERE config_id = ? AND status ="
                              " 'complete' ORDER BY CASE WHEN typeof(finished) IN ('integer', 'real') THEN finished END"
                              " DESC, id DESC LIMIT ?", (config_id, MEDIAN_WINDOW + 1))
        checked = []
        for finished, *figures in done:
            values: dict[str, float | None] = {"finished": finished}
            values.update(zip(_FIGURES, figures))
            for name, value in values.items():
                problem = stored_time_problem(value) if name == "finished" else figure_problem(name, value)
                if value is not None and problem:
                    dropped.add(problem, f"{name}={value!r:.40} (configuration {config_id})")
                    values[name] = None
            checked.append(values)
        earlier = [v["throughput_bytes_per_second"] for v in checked[1:] if v["throughput_bytes_per_second"] is not None]
        return _Series(labels=labels, runs=runs, latest=checked[0] if checked else {},
                       previous_median=median(earlier) if earlier else None,
                       running=[(row_id, host, pid) for row_id, host, pid in running],
                       last_id=max(newest or 0, running[0][0] if running else 0), configuration=configuration)

    def _labels(self, config_id: str, length: int | None, text: str | None,
                dropped: Dropped) -> tuple[dict[str, str], Configuration] | None:
        from .configuration import Configuration

        if text is None:
            dropped.add("too_long" if length else "malformed", f"configuration {config_id}: "
                        f"{length} characters stored" if length else f"configuration {config_id}: none stored")
            return None
        try:
            configuration = Configuration.from_json(text)
            labels = {**configuration.labels, "config": config_id}
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            dropped.add("malformed", f"configuration {config_id}: {exc}")
            return None
        if long := [name for name, value in labels.items() if len(value) > MAX_LABEL_CHARS]:
            dropped.add("too_long", f"configuration {config_id}: {long[0]} of {len(labels[long[0]])} characters")
            return None
        return labels, configuration

    def _read_whole(self, db: sqlite3.Connection, dropped: Dropped) -> None:
        """An older runner's database (no configuration ids yet): every row, as its migration would read it."""
        from .schema import read_results

        rows = read_results(db, "status IN ('complete', 'running')", order="finished, id")
        self.rows_read += len(rows)
        groups: dict[str, list[ResultRow]] = {}
        configurations: dict[str, Configuration] = {}
        for row in rows:
            config = row.configuration
            groups.setdefault(config.id, []).append(row)
            configurations[config.id] = config
        ordered = sorted(groups, key=lambda cid: -max(r.id for r in groups[cid]))
        state = self._state
        state.series = {}
        for config_id in ordered[:self.max_configurations]:
            state.series[config_id] = _legacy_series(configurations[config_id], groups[config_id])
        state.left_out = max(0, len(ordered) - self.max_configurations)
        if state.left_out:
            dropped.add("over_limit", ordered[self.max_configurations], count=state.left_out)

    def _served(self, lock: bool | None) -> list[BenchConfig]:
        """The kept summaries as BenchConfigs (the same list while neither they nor the lock changed)."""
        state = self._state
        alive = {cid: any(row_alive(host, pid, lock, self.host) for _id, host, pid in s.running)
                 for cid, s in state.series.items() if s.running}
        key = (self._reads, tuple(sorted(alive.items())))
        if key != self._value_key:
            previous = previous_configurations(state.series)
            self._value = [_bench_config(s, alive.get(cid, False), previous.get(cid))
                           for cid, s in sorted(state.series.items())]
            self._value_key = key
        return self._value


def _stat_key(path: str) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def previous_configurations(series: dict[str, _Series]) -> dict[str, tuple[str, str]]:
    """{id: (previous id, what changed in words)}: for each configuration, the one among those kept
    with its readable labels (matrix, workload, compression, ..., pool) whose latest complete run
    finished last before its own latest one. A tuning change between two runs of a matrix makes the
    second run's configurations new ids; this names the change. From the summaries kept (each
    configuration's latest run): A, then B, then A again names B's change for A, none for B."""
    from .configuration import in_words

    cells: dict[tuple, list[tuple[float, str, Configuration]]] = {}
    for cid, s in series.items():
        finished = s.latest.get("finished")
        if s.configuration is not None and finished is not None:
            cell = tuple(v for k, v in s.labels.items() if k != "config")
            cells.setdefault(cell, []).append((finished, cid, s.configuration))
    out = {}
    for runs in cells.values():
        runs.sort(key=lambda run: run[:2])
        for (_, before, old), (_, after, new) in zip(runs, runs[1:]):
            out[after] = (before, in_words(old, new))
    return out


def _bench_config(series: _Series, running: bool, previous: tuple[str, str] | None = None) -> BenchConfig:
    latest = series.latest
    return BenchConfig(labels=series.labels, running=running, runs=series.runs,
                       throughput_bytes_per_second=latest.get("throughput_bytes_per_second"),
                       compressratio=latest.get("compressratio"), cpu_busy_ratio=latest.get("cpu_busy_ratio"),
                       duration_seconds=latest.get("duration_seconds"), last_run_timestamp=latest.get("finished"),
                       previous_median_throughput=series.previous_median, previous=previous)


def _legacy_series(configuration: Configuration, group: list[ResultRow]) -> _Series:
    """One configuration's summary from its rows (in finishing order)."""
    done = [r for r in group if r.status == "complete"]
    latest = done[-1] if done else None
    earlier = [r.throughput_bytes_per_second for r in done[:-1][-MEDIAN_WINDOW:]
               if r.throughput_bytes_per_second is not None]
    figures: dict[str, float | None] = {name: getattr(latest, name) for name in _FIGURES} if latest else {}
    if latest:
        figures["finished"] = latest.finished
    return _Series(labels=configuration.labels, runs=len(done), latest=figures,
                   previous_median=median(earlier) if earlier else None,
                   running=[(r.id, r.host, r.pid) for r in group if r.status == "running"][-MAX_RUNNING_ROWS:],
                   last_id=max(r.id for r in group), configuration=configuration)


def median(values: list[float]) -> float:
    """The median (statistics.median, without importing `statistics` into the exporter)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def default_bench_db() -> str:
    return os.environ.get("ZFSNAS_BENCH_DB", DEFAULT_BENCH_DB)
