"""ZfsBenchThroughputRegression in a real Prometheus (Debian's package) scraping the real exporter,
whose bench collector reads a store written through the runner's own Store API.

The three histories that used to merge into one series and fire a false alarm (a FITS copy then an
ISO copy at the same compression; mirrors then RAID-Z2 under one pool name; a run before and after
a zfs_dirty_data_max change) stay silent as separate configurations; the same configuration 15 %
below the median of its 3 previous runs fires, naming the configuration.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.bench.configs import MIRRORS, configuration
from tests.integration.prometheus import exporter_and_prometheus
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

ROOT = Path(__file__).resolve().parents[2]
FITS = configuration(matrix="fits-copy", workload="copy", size="all", data={"corpus": "/srv/astro/fits"})
ISO = configuration(matrix="iso-rsync", workload="copy", size="all", data={"corpus": "/srv/isos"})
MIRROR = configuration(matrix="fio-seq", layout=MIRRORS)
RAIDZ2 = configuration(matrix="fio-seq")
DIRTY_4G = configuration(matrix="dirty-data", workload="write-size", size="4x dirty")
DIRTY_1G = configuration(matrix="dirty-data", workload="write-size", size="4x dirty",
                         parameters={"zfs_dirty_data_max": str(1 << 30)}, swept=("zfs_dirty_data_max",))
ALERT = 'ALERTS{alertname="ZfsBenchThroughputRegression"}'


def record(db: Path, config, throughput: float, finished: float) -> None:
    store = Store(db)
    try:
        run_id = f"run-{finished:.3f}"
        store.start_matrix(run_id, config.matrix, "tank/scratch", 1)
        rid = store.start_result(run_id, 1, config, 1, "tank/scratch/c", started=finished - 60)
        store.finish_result(rid, "complete", finished=finished, figures=ResultFigures(throughput_bytes_per_second=throughput))
        store.finish_matrix(run_id, "complete")
    finally:
        store.close()


@pytest.fixture
def prometheus(tmp_path):
    db = tmp_path / "bench.sqlite"
    with exporter_and_prometheus(tmp_path, "--collector.disable-defaults", "--collector.bench", "--bench.db", str(db),
                                 "--bench.refresh-interval=1", rule_files=[str(ROOT / "alerts" / "zfsnas.rules.yml")],
                                 target_labels={"instance": "nas1"}) as (_, prom):
        yield prom, db


def test_only_a_configuration_slower_than_its_own_history_fires(prometheus):
    prom, db = prometheus
    now = time.time() - 3600
    history = [(FITS, 175e6), (FITS, 185e6), (FITS, 180e6), (ISO, 120e6),       # ISO at 2/3 of FITS
               (MIRROR, 500e6), (MIRROR, 500e6), (MIRROR, 500e6),               # 3 runs: a baseline
               (RAIDZ2, 300e6),                                                 # RAID-Z2 at 60 % of mirrors
               (DIRTY_4G, 400e6), (DIRTY_4G, 410e6), (DIRTY_1G, 250e6)]         # 1G at 62 % of 4G
    for n, (config, throughput) in enumerate(history):
        record(db, config, throughput, now + 60 * n)
    prom.wait_for("count(zfs_bench_runs_total) == 6")
    # Two configurations under each pool-name/labels pair that used to be one series.
    for matrix in ("fio-seq", "dirty-data"):
        assert prom.scalar(f'count(zfs_bench_throughput_bytes_per_second{{matrix="{matrix}", pool="tank"}})') == 2
    assert prom.scalar(f'zfs_bench_throughput_previous_median_bytes_per_second{{config="{FITS.id}"}}') == 180e6
    assert prom.query(f'zfs_bench_throughput_previous_median_bytes_per_second{{config=~"{ISO.id}|{RAIDZ2.id}|'
                      f'{DIRTY_1G.id}"}}') == []
    [ratio] = prom.wait_for(f'config:zfs_bench_throughput_vs_previous_median:ratio{{config="{MIRROR.id}"}}')
    assert float(ratio["value"][1]) == 1.0
    assert not prom.query('{__name__=~"zfs_bench_.*", exported_job!=""}')        # no `job` label of ours
    time.sleep(4)  # several rule evaluations (1 s) over the scraped history
    assert prom.query(ALERT) == [], "separate configurations must not be compared"

    record(db, MIRROR, 425e6, now + 60 * len(history))   # 15 % below its previous median of 500 MB/s
    [alert] = prom.wait_for(ALERT, timeout=45)
    labels = alert["metric"]
    assert (labels["config"], labels["matrix"], labels["workload"], labels["pool"]) == (
        MIRROR.id, "fio-seq", "seq-write", "tank")
    assert prom.scalar(f'config:zfs_bench_throughput_vs_previous_median:ratio{{config="{MIRROR.id}"}}') == 0.85
    rule = next(r for g in prom.api("rules")["groups"] for r in g["rules"]
                if r["name"] == "ZfsBenchThroughputRegression")
    [active] = rule["alerts"]
    assert active["annotations"]["summary"] == (f"Benchmark fio-seq/seq-write (configuration {MIRROR.id}) regressed "
                                                f"on nas1")
    assert active["annotations"]["description"].startswith(
        f"The latest run on nas1 of configuration {MIRROR.id} (fio-seq/seq-write compression=lz4 recordsize=1M "
        f"encryption=off size=16G pool=tank) reached 85% of the median of its own previous runs")
