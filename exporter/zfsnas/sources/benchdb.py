"""Reader of the benchmark database (`zfsnas-bench`'s SQLite file), opened read-only.

Owns turning the stored results into one `BenchConfig` per configuration (job, compression,
recordsize, encryption, size, pool): the latest complete run's figures, the median throughput of
the earlier complete runs (what the regression alert compares against), the count of complete
runs, and whether a run of it is in progress. It never writes to the database; a missing file
is not an error (no benchmark has run yet).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .model import SourceError

DEFAULT_BENCH_DB = "/var/lib/zfsnas/bench.sqlite"
CONFIG_COLUMNS = ("job", "compression", "recordsize", "encryption", "size", "pool")


@dataclass(frozen=True)
class BenchConfig:
    labels: dict[str, str]
    running: bool
    runs: int                                   # complete runs
    throughput_bytes_per_second: float | None   # the latest complete run's
    compressratio: float | None
    cpu_busy_ratio: float | None
    duration_seconds: float | None
    last_run_timestamp: float | None            # when the latest complete run finished
    previous_median_throughput: float | None    # median over the complete runs before the latest


def read_bench_db(path: str | Path) -> list[BenchConfig]:
    path = Path(path)
    if not path.exists():
        return []
    import sqlite3  # only when there is a database: keeps the exporter small otherwise

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
        db.row_factory = sqlite3.Row
        rows = db.execute(
            "SELECT job, compression, recordsize, encryption, size, pool, status, finished,"
            " throughput_bytes_per_second, compressratio, cpu_busy_ratio, duration_seconds"
            " FROM results WHERE status IN ('complete', 'running') ORDER BY finished, id").fetchall()
    except sqlite3.Error as exc:
        raise SourceError(f"{path}: {exc}") from None
    finally:
        db.close()
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault(tuple(row[c] for c in CONFIG_COLUMNS), []).append(row)
    configs = []
    for key, group in sorted(groups.items()):
        done = [r for r in group if r["status"] == "complete"]
        latest = done[-1] if done else None
        earlier = [r["throughput_bytes_per_second"] for r in done[:-1] if r["throughput_bytes_per_second"] is not None]
        configs.append(BenchConfig(
            labels=dict(zip(CONFIG_COLUMNS, key)), running=any(r["status"] == "running" for r in group),
            runs=len(done),
            throughput_bytes_per_second=latest["throughput_bytes_per_second"] if latest else None,
            compressratio=latest["compressratio"] if latest else None,
            cpu_busy_ratio=latest["cpu_busy_ratio"] if latest else None,
            duration_seconds=latest["duration_seconds"] if latest else None,
            last_run_timestamp=latest["finished"] if latest else None,
            previous_median_throughput=median(earlier) if earlier else None))
    return configs


def median(values: list[float]) -> float:
    """The median (statistics.median, without importing `statistics` into the exporter)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def default_bench_db() -> str:
    return os.environ.get("ZFSNAS_BENCH_DB", DEFAULT_BENCH_DB)
