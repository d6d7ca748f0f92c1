"""Reader of the benchmark database (`zfsnas-bench`'s SQLite file), opened read-only.

Owns turning the stored results into one `BenchConfig` per configuration id (the one definition
of a configuration is `benchconfig.py`, the schema and its typed rows `benchschema.py`, which the
runner's store writes through; nothing here comes from the bench wing above): the latest complete
run's figures, the median throughput of the earlier complete runs of the *same* configuration
(what the regression alert compares against), the count of complete runs, and whether a run of
it is in progress. A database written by an older runner (no configuration ids yet) is read with
`benchschema.result_row`, as the runner's migration would. It never writes to the database; a
missing file is not an error (no benchmark has run yet).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import SourceError

if TYPE_CHECKING:
    from pathlib import Path

    from .benchconfig import Configuration
    from .benchschema import ResultRow

# The schema and configuration modules (hashlib, json), pathlib and sqlite3 are imported only when
# there is a database to read: the `bench` collector is on by default and most exporters never see one.

DEFAULT_BENCH_DB = "/var/lib/zfsnas/bench.sqlite"


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


def read_bench_db(path: str | Path) -> list[BenchConfig]:
    if not os.path.exists(path):
        return []
    import sqlite3
    from pathlib import Path

    from .benchschema import read_results

    path = Path(path)

    # A WAL database is read through its -shm file, which the runner deletes when it closes the store,
    # and a reader without write access to the directory (the systemd unit, a read-only mount) cannot
    # create it. With no -wal the runner is not writing: open the file as immutable then.
    try:
        with path.open("rb") as header:
            wal_mode = header.read(20)[18:19] == b"\x02"   # the file format's write version: 2 = WAL
        mode = "immutable=1" if wal_mode and not Path(f"{path}-wal").exists() else "mode=ro"
        db = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True, timeout=5)
    except (OSError, sqlite3.Error) as exc:
        raise SourceError(f"{path}: {exc}") from None
    try:
        rows = read_results(db, "status IN ('complete', 'running')", order="finished, id")
    except sqlite3.Error as exc:
        raise SourceError(f"{path}: {exc}") from None
    finally:
        db.close()
    groups: dict[str, tuple[Configuration, list[ResultRow]]] = {}
    for row in rows:
        config = row.configuration
        groups.setdefault(config.id, (config, []))[1].append(row)
    previous = previous_configurations(groups)
    return [_bench_config(config, group, previous.get(cid)) for cid, (config, group) in sorted(groups.items())]


def previous_configurations(groups: dict[str, tuple[Configuration, list[ResultRow]]]) -> dict[str, tuple[str, str]]:
    """{id: (previous id, what changed in words)}: for each configuration, the one among those with
    its readable labels (matrix, workload, compression, ..., pool) whose complete run finished last
    before its own latest one. A tuning change between two runs of a matrix makes the second run's
    configurations new ids; this names the change."""
    from .benchconfig import in_words

    finished = {cid: sorted(r.finished for r in rows if r.status == "complete" and r.finished is not None)
                for cid, (_config, rows) in groups.items()}
    cells: dict[tuple, list[str]] = {}
    for cid, (config, _rows) in groups.items():
        cells.setdefault(tuple(v for k, v in config.labels.items() if k != "config"), []).append(cid)
    out = {}
    for ids in cells.values():
        for cid in ids:
            if not finished[cid]:
                continue
            latest = finished[cid][-1]
            earlier = [(max(t for t in finished[other] if t < latest), other) for other in ids
                       if other != cid and any(t < latest for t in finished[other])]
            if earlier:
                previous = max(earlier)[1]
                out[cid] = (previous, in_words(groups[previous][0], groups[cid][0]))
    return out


def _bench_config(config: Configuration, group: list[ResultRow], previous: tuple[str, str] | None = None) -> BenchConfig:
    """One configuration's series from its rows (in finishing order)."""
    done = [r for r in group if r.status == "complete"]
    latest = done[-1] if done else None
    earlier = [r.throughput_bytes_per_second for r in done[:-1] if r.throughput_bytes_per_second is not None]
    return BenchConfig(
        labels=config.labels, running=any(r.status == "running" for r in group),
        runs=len(done),
        throughput_bytes_per_second=latest.throughput_bytes_per_second if latest else None,
        compressratio=latest.compressratio if latest else None,
        cpu_busy_ratio=latest.cpu_busy_ratio if latest else None,
        duration_seconds=latest.duration_seconds if latest else None,
        last_run_timestamp=latest.finished if latest else None,
        previous_median_throughput=median(earlier) if earlier else None, previous=previous)


def median(values: list[float]) -> float:
    """The median (statistics.median, without importing `statistics` into the exporter)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def default_bench_db() -> str:
    return os.environ.get("ZFSNAS_BENCH_DB", DEFAULT_BENCH_DB)
