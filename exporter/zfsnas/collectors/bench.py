"""Collector `bench`: the latest `zfsnas-bench` result per configuration, from its SQLite file.

Owns the `zfs_bench_*` families. Labels (`zfsnas.store.configuration.LABELS`): `matrix`, `workload`,
`config` (the configuration id: one series per configuration, so two configurations never share
a "previous median"), and the readable `compression`, `recordsize`, `encryption`, `size`, `pool`;
`zfs_bench_config_change_info` adds `previous_config` and `change` (what a tuning change between
two runs of a cell changed, in words).
No label is named `job` or `instance`: those are Prometheus's target labels.
The database is read in the background (source `bench_db`, `--bench.refresh-interval`) by one
`BenchDbReader`, which reads only what changed since its last read and keeps at most
`--bench.max-configurations` (the most recently stored; the rest counted `over_limit`, the source
at 0 while it cuts); what it left out of the database is counted in
`zfs_exporter_source_values_dropped_total{source="bench_db"}`. A missing database serves nothing
and success 1: no benchmark has run yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..exposition import Families, Family
from ..refresh import RenderedOnce
from ..settings import Settings, flag, interval
from .base import RefreshingCollector, Report

if TYPE_CHECKING:
    from ..store.reader import BenchConfig, BenchDbReader

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


class BenchSettings(Settings):
    namespace = "bench"
    db: str | None = flag("--bench.db",
                          help="zfsnas-bench database (default $ZFSNAS_BENCH_DB or /var/lib/zfsnas/bench.sqlite)")
    refresh_interval: float = interval("--bench.refresh-interval", 15.0, "reads of the benchmark database")
    max_configurations: int = flag("--bench.max-configurations", type=int, default=1000, metavar="N",
                                   help="configurations served at most, the most recently stored (default 1000); "
                                        "the others are counted in zfs_exporter_source_values_dropped_total")


class BenchCollector(RefreshingCollector[BenchSettings]):
    name = "bench"
    description = "zfsnas-bench results from its SQLite database"
    needs_zfs = False

    def setup(self) -> None:
        self.path = self.settings.db
        self.refresher = self.add_refresher("bench_db", self._read, self.settings.refresh_interval)
        self._reader: BenchDbReader | None = None   # made by the first refresh (its module is not imported at start)
        self._rendered = RenderedOnce(2)            # the families of the reader's last lists

    def _read(self) -> list[BenchConfig]:
        # The reader is imported here, in the refresh thread: nothing of it is needed to start.
        from ..sources.model import Dropped
        from ..store.reader import BenchDbReader, default_bench_db

        if self._reader is None:
            self._reader = BenchDbReader(self.path or default_bench_db(), self.settings.max_configurations)
        dropped = Dropped()
        try:
            return self._reader.read(dropped)
        finally:
            self.refresher.count_dropped(dropped)

    def collect(self, report: Report) -> Iterable[Family]:
        configs: list[BenchConfig] = self.current(self.refresher, report) or []
        # The reader hands out the same list while nothing changed: its families are rendered once
        # for it (up to --bench.max-configurations of them: 8,000 samples), not at every scrape.
        frozen: list[Family] = self._rendered.get((configs,), lambda: self._families(configs).frozen())
        return frozen

    @staticmethod
    def _families(configs: list[BenchConfig]) -> Families:
        families = Families()
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
            if config.previous is not None:
                previous_id, change = config.previous
                families.gauge("zfs_bench_config_change_info", "1 for a configuration that follows another of the same "
                               "cell (matrix, workload and readable labels): the one that ran before its latest run "
                               "(previous_config) and what differs, in words (change).",
                               {**labels, "previous_config": previous_id, "change": change}, 1)
        return families
