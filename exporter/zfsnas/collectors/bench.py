"""Collector `bench`: the latest `zfsnas-bench` result per configuration, from its SQLite file.

Owns the `zfs_bench_*` families. Labels (`zfsnas.bench.config.LABELS`): `matrix`, `workload`,
`config` (the configuration id: one series per configuration, so two configurations never share
a "previous median"), and the readable `compression`, `recordsize`, `encryption`, `size`, `pool`.
No label is named `job` or `instance`: those are Prometheus's target labels.
The database is read in the background (source `bench_db`, `--bench.refresh-interval`); a missing
database serves nothing and success 1: no benchmark has run yet.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..exposition import Families, Family
from ..refresh import BackgroundRefresher
from .base import Context, RefreshingCollector, Report

if TYPE_CHECKING:
    from ..sources.benchdb import BenchConfig

# (metric, type, help, BenchConfig attribute)
FAMILIES = (
    ("zfs_bench_throughput_bytes_per_second", "gauge",
     "Throughput of the latest complete benchmark run of this configuration.", "throughput_bytes_per_second"),
    ("zfs_bench_compressratio", "gauge", "compressratio of the benchmark's child dataset after the latest run.",
     "compressratio"),
    ("zfs_bench_cpu_busy_ratio", "gauge", "Share of CPU time busy (not idle, not iowait) during the latest run.",
     "cpu_busy_ratio"),
    ("zfs_bench_duration_seconds", "gauge", "Wall time of the latest run's job.", "duration_seconds"),
    ("zfs_bench_last_run_timestamp_seconds", "gauge", "When the latest complete run of this configuration ended.",
     "last_run_timestamp"),
    ("zfs_bench_throughput_previous_median_bytes_per_second", "gauge",
     "Median throughput of this configuration's complete runs before the latest one.", "previous_median_throughput"),
)


class BenchCollector(RefreshingCollector):
    name = "bench"
    description = "zfsnas-bench results from its SQLite database"
    needs_zfs = False

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--bench.db", dest="bench_db", default=None,
                            help="zfsnas-bench database (default $ZFSNAS_BENCH_DB or /var/lib/zfsnas/bench.sqlite)")
        parser.add_argument("--bench.refresh-interval", dest="bench_refresh_interval", type=float, default=15.0,
                            help="seconds between reads of the benchmark database (default 15)")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.path = getattr(ctx.args, "bench_db", None)
        interval = getattr(ctx.args, "bench_refresh_interval", 15.0)
        self.refresher = BackgroundRefresher("bench_db", self._read, interval)

    def _read(self) -> list[BenchConfig]:
        # The reader is imported here, in the refresh thread: nothing of it is needed to start.
        from ..sources.benchdb import default_bench_db, read_bench_db

        return read_bench_db(self.path or default_bench_db())

    def sources(self) -> Sequence[BackgroundRefresher]:
        return (self.refresher,)

    def collect(self, report: Report) -> Iterable[Family]:
        families = Families()
        configs: list[BenchConfig] = self.current(self.refresher, report) or []
        for config in configs:
            labels = config.labels
            for metric, kind, helptext, attribute in FAMILIES:
                value = getattr(config, attribute)
                if value is not None:
                    families.add(kind, metric, helptext, labels, value)
            families.counter("zfs_bench_runs_total", "Complete benchmark runs of this configuration.", labels,
                             config.runs)
            families.gauge("zfs_bench_running", "1 while a benchmark run of this configuration is in progress.",
                           labels, 1 if config.running else 0)
        return families
