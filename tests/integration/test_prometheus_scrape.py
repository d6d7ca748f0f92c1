"""A real Prometheus scrapes the exporter while the kstat tree changes; rate() gives the true write rate."""

import pytest

from tests.conftest import copy_tree
from tests.integration.kernel import RATE, TxgWriter, ticking
from tests.integration.prometheus import exporter_and_prometheus

MiB = 1 << 20


@pytest.fixture
def live_tree(tmp_path):
    root = copy_tree(tmp_path / "tree")
    with ticking(TxgWriter(root / "proc/spl/kstat/zfs/tank/txgs")):
        yield root


def test_prometheus_sees_values_and_txg_rate(live_tree, tmp_path):
    with exporter_and_prometheus(tmp_path, "--path.procfs", str(live_tree / "proc"),
                                 "--path.sysfs", str(live_tree / "sys")) as (_, prom):
        # the 8 s windows below hold scrapes only, none from the start (11 in the last 12 s)
        prom.wait_for_samples('zfs_pool_txg_written_bytes_total{pool="tank"}', "12s", 11)
        assert prom.scalar("zfs_arc_size_bytes") == 11_811_160_064
        assert prom.scalar('zfs_pool_state{pool="backup",state="DEGRADED"}') == 1
        assert prom.scalar('zfs_dataset_written_bytes_total{dataset="tank/media files"}') == 73_014_444_032
        rate = prom.scalar('rate(zfs_pool_txg_written_bytes_total{pool="tank"}[8s])')
        assert rate == pytest.approx(RATE, rel=0.15), f"rate {rate / MiB:.1f} MiB/s, expected {RATE / MiB} MiB/s"
        assert prom.scalar('rate(zfs_pool_txgs_synced_total{pool="tank"}[8s])') == pytest.approx(4, rel=0.2)
        # Four txgs a second against a 20-txg ring scraped every second: none lost.
        assert prom.scalar('zfs_pool_txgs_missed_total{pool="tank"}') == 0
        # The backup pool does not change: its counters stay flat.
        assert prom.scalar('rate(zfs_pool_txg_written_bytes_total{pool="backup"}[8s])') == 0
        quantile = prom.scalar('histogram_quantile(0.5, rate(zfs_pool_txg_sync_seconds_bucket{pool="tank"}[8s]))')
        assert 0.1 < quantile <= 0.25  # every simulated txg took 0.15 s to sync
        assert prom.scalar('histogram_quantile(0.99, zfs_pool_tx_assign_seconds_bucket{pool="tank"})') > 0
        assert prom.scalar('max_over_time(zfs_exporter_collector_success{collector="txg"}[10s])') == 1
