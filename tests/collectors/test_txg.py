"""Collector `txg`: txgs counted once across scrapes, gaps accounted for, histograms cumulative."""


import pytest
from prometheus_client import generate_latest

from tests.conftest import copy_tree, exporter_args, linux_tree, scrape_text, value
from zfsnas.collectors.txg import TxgAccumulator, dirty_ratio_bounds, tx_assign_buckets
from zfsnas.sources.kstat import Txg, parse_txgs
from zfsnas.wiring import build_exporter

MiB = 1 << 20


def txg(n, state="C", ndirty=10 * MiB, nwritten=12 * MiB, stime=200_000_000):
    return Txg(n, n * 5_000_000_000, state, ndirty, 0, nwritten, 0, 10, 5_000_000_000, 1, 1, stime)


def ring(first, last, open_tail=True):
    rows = [txg(n) for n in range(first, last + 1)]
    if open_tail:
        rows += [txg(last + 1, "S", 0, 0, 0), txg(last + 2, "O", 0, 0, 0)]
    return rows


def test_first_scrape_counts_the_whole_ring_then_only_new_txgs():
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60))
    acc.update(ring(100, 109), 100 * MiB)
    assert (acc.synced, acc.written_bytes, acc.dirty_bytes, acc.missed) == (10, 120 * MiB, 100 * MiB, 0)
    acc.update(ring(100, 109), 100 * MiB)  # nothing new: nothing counted twice
    assert acc.synced == 10
    acc.update(ring(103, 112), 100 * MiB)  # three more synced, the ring slid
    assert (acc.synced, acc.written_bytes, acc.missed, acc.last_txg) == (13, 156 * MiB, 0, 112)


def test_the_ring_before_the_start_is_the_zero_not_counted():
    """An exporter started (or restarted) finds up to zfs_txg_history txgs that synced before it:
    counted, each restart read as a burst that doubled the pool's rates for 5 minutes (issue 37)."""
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60), count_first_ring=False)
    acc.update(ring(100, 199), 100 * MiB)
    assert (acc.synced, acc.written_bytes, acc.dirty_bytes, acc.missed) == (0, 0, 0, 0)
    assert (acc.last_txg, acc.last_dirty_bytes) == (199, 10 * MiB)
    assert acc.sync_seconds.cumulative()[-1] == (float("inf"), 0)
    acc.update(ring(102, 201), 100 * MiB)  # two synced since: those count
    assert (acc.synced, acc.written_bytes, acc.missed) == (2, 24 * MiB, 0)
    acc.update(ring(4, 8), None)  # the pool re-created: its new txgs all count
    assert acc.synced == 7 and acc.last_txg == 8


def test_txgs_that_fell_out_of_the_ring_are_counted_as_missed(caplog):
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60))
    acc.update(ring(100, 109), None)
    acc.update(ring(150, 159), None)
    assert acc.missed == 40 and acc.synced == 20
    assert "40 txg(s) fell out of the txg history" in caplog.text


def test_empty_history_counts_nothing():
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60))
    acc.update([], 100 * MiB)
    assert (acc.synced, acc.missed, acc.last_dirty_bytes) == (0, 0, None)


def test_recreated_pool_starts_over_without_going_back():
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60))
    acc.update(ring(5000, 5009), None)
    acc.update(ring(4, 8), None)
    assert acc.synced == 15 and acc.last_txg == 8 and acc.missed == 0


def test_open_and_syncing_txgs_are_not_counted_until_synced():
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60))
    acc.update([txg(1), txg(2, "S", 0, 0, 0), txg(3, "O", 0, 0, 0)], None)
    assert acc.synced == 1
    acc.update([txg(1), txg(2, ndirty=50 * MiB), txg(3, "S", 0, 0, 0), txg(4, "O", 0, 0, 0)], None)
    assert acc.synced == 2 and acc.last_dirty_bytes == 50 * MiB


def test_histograms():
    acc = TxgAccumulator("tank", dirty_ratio_bounds(60))
    acc.update([txg(1, stime=30_000_000, ndirty=55 * MiB), txg(2, stime=700_000_000, ndirty=61 * MiB),
                txg(3, stime=7_000_000_000, ndirty=95 * MiB)], 100 * MiB)
    sync = dict(acc.sync_seconds.cumulative())
    assert (sync[0.025], sync[0.05], sync[0.5], sync[1.0], sync[5.0], sync[10.0], sync[float("inf")]) == (0, 1, 1, 2, 2, 3, 3)
    assert acc.sync_seconds.total == pytest.approx(7.73)
    ratio = dict(acc.dirty_ratio.cumulative())
    assert 0.6 in ratio  # the point where ZFS starts delaying writes is a bucket bound
    assert (ratio[0.5], ratio[0.6], ratio[0.7], ratio[1.0]) == (0, 1, 2, 3)


def test_delay_point_is_added_when_tuned():
    assert 0.45 in dirty_ratio_bounds(45) and 0.6 in dirty_ratio_bounds(45)


def test_tx_assign_buckets_fold_small_and_keep_fixed_bounds():
    raw = [(2**i, 1) for i in range(0, 40)]
    buckets = tx_assign_buckets(raw)
    assert buckets[0] == (2**10 / 1e9, 11)  # 1 ns .. 1024 ns
    assert buckets[-2] == (2**36 / 1e9, 37)
    assert buckets[-1] == (float("inf"), 40)
    assert len(buckets) == 28
    assert tx_assign_buckets([(1, 3), (2, 0)])[-1] == (float("inf"), 3)


def served(root, exporter=None):
    exporter = exporter or build_exporter(exporter_args("--path.procfs", str(root / "proc"), "--path.sysfs",
                                                        str(root / "sys"), "--collector.disable-defaults",
                                                        "--collector.txg"), process_metrics=False)
    return exporter, generate_latest(exporter.registry).decode()


def test_collector_on_fixture_and_across_scrapes(tmp_path):
    root = copy_tree(tmp_path / "t")
    txgs_path = root / "proc/spl/kstat/zfs/tank/txgs"
    exporter, text = served(root)
    rows = parse_txgs(txgs_path.read_text())
    committed = [t for t in rows if t.committed]
    # The first scrape: the 22 txgs of the ring synced before the exporter started; counters at zero.
    assert value(text, "zfs_pool_txgs_synced_total", pool="tank") == 0
    assert value(text, "zfs_pool_txg_written_bytes_total", pool="tank") == 0
    assert value(text, "zfs_pool_txg_last_dirty_bytes", pool="tank") == committed[-1].ndirty
    assert value(text, "zfs_pool_txg_sync_seconds_count", pool="tank") == 0
    assert value(text, "zfs_pool_txg_history_length", pool="tank") == len(rows)
    assert value(text, "zfs_pool_tx_assign_seconds_bucket", pool="tank", le="+Inf") == 9129
    assert value(text, "zfs_dirty_data_max_bytes") == 4 << 30
    assert value(text, "zfs_dmu_tx_dirty_delay_total") > 0
    # The kernel syncs two more txgs: the ring drops its two oldest and appends.
    lines = txgs_path.read_text().splitlines()
    head, body = lines[0], lines[3:-2]
    new = [f"{4128322:<8} {1249000000000:<16} {'C':<5} {64 * MiB:<12} {0:<12} {80 * MiB:<12} {0:<8} {9:<8} "
           f"{1:<12} {1:<12} {1:<12} {300000000:<12}",
           f"{4128323:<8} {1254000000000:<16} {'C':<5} {32 * MiB:<12} {0:<12} {40 * MiB:<12} {0:<8} {9:<8} "
           f"{1:<12} {1:<12} {1:<12} {200000000:<12}",
           f"{4128324:<8} {1259000000000:<16} {'S':<5} " + " ".join(f"{0:<12}" for _ in range(3))
           + " 0        0        0            0            0            0           ",
           f"{4128325:<8} {1264000000000:<16} {'O':<5} " + " ".join(f"{0:<12}" for _ in range(3))
           + " 0        0        0            0            0            0           "]
    txgs_path.write_text("\n".join([head, *body, *new]) + "\n")
    _, text2 = served(root, exporter)
    assert value(text2, "zfs_pool_txgs_synced_total", pool="tank") == 2
    assert value(text2, "zfs_pool_txg_written_bytes_total", pool="tank") == 120 * MiB
    assert value(text2, "zfs_pool_txg_dirty_bytes_total", pool="tank") == 96 * MiB
    assert value(text2, "zfs_pool_txg_sync_seconds_count", pool="tank") == 2
    assert value(text2, "zfs_pool_txg_sync_seconds_bucket", pool="tank", le="0.25") == 1
    assert value(text2, "zfs_pool_txg_last_dirty_bytes", pool="tank") == 32 * MiB
    assert value(text2, "zfs_pool_txgs_missed_total", pool="tank") == 0
    # A restarted exporter starts at zero again, not at the ring's 22 txgs (issue 37).
    _, restarted = served(root)
    assert value(restarted, "zfs_pool_txgs_synced_total", pool="tank") == 0


def test_a_pool_imported_after_the_start_counts_its_ring(tmp_path):
    """A pool imported while the exporter runs has a ring of its own, all of it since the import."""
    root = copy_tree(tmp_path / "t")
    pools = root / "proc/spl/kstat/zfs"
    hidden = tmp_path / "tank-later"
    (pools / "tank").rename(hidden)
    exporter, text = served(root)
    assert 'zfs_pool_txgs_synced_total{pool="tank"}' not in text
    hidden.rename(pools / "tank")
    _, text = served(root, exporter)
    committed = [t for t in parse_txgs((pools / "tank" / "txgs").read_text()) if t.committed]
    assert value(text, "zfs_pool_txgs_synced_total", pool="tank") == len(committed) == 22
    assert value(text, "zfs_pool_txg_written_bytes_total", pool="tank") == sum(t.nwritten for t in committed)


def test_tx_assign_histogram_types():
    root = linux_tree("2.1.11")
    text = scrape_text("--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                       "--collector.disable-defaults", "--collector.txg")
    assert "# TYPE zfs_pool_tx_assign_seconds histogram" in text
    assert "# TYPE zfs_pool_txg_sync_seconds histogram" in text
    assert "# TYPE zfs_pool_txgs_synced_total counter" in text
    assert "zfs_pool_tx_assign_seconds_sum" not in text  # the kstat keeps no sum: none is made up
