"""Probes: CPU, disk and throttle deltas from /proc texts in their real formats."""

from zfsnas.bench.probes import deltas, parse_cpu, parse_diskstats, snapshot

STAT_1 = "cpu  1000 0 500 8000 500 0 0 0 0 0\ncpu0 500 0 250 4000 250 0 0 0 0 0\nintr 1\n"
STAT_2 = "cpu  1600 0 900 8300 1200 0 0 0 0 0\ncpu0 800 0 450 4150 600 0 0 0 0 0\nintr 2\n"
DISK_1 = ("   8       0 sda 100 0 2000 50 300 0 8000 90 0 100 140 0 0 0 0 0 0\n"
          "   8       1 sda1 100 0 2000 50 300 0 8000 90 0 100 140 0 0 0 0 0 0\n"
          "   7       0 loop0 1 0 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
          " 230       0 zd0 1 0 2 0 5 0 10 0 0 0 0 0 0 0 0 0 0\n")
DISK_2 = ("   8       0 sda 100 0 2000 50 500 0 10048 90 0 100 140 0 0 0 0 0 0\n"
          "   8       1 sda1 100 0 2000 50 500 0 10048 90 0 100 140 0 0 0 0 0 0\n"
          "   7       0 loop0 1 0 2 0 9 0 900 0 0 0 0 0 0 0 0 0 0\n"
          " 230       0 zd0 1 0 2 0 5 0 99 0 0 0 0 0 0 0 0 0 0\n")
DMU_TX = ("11 1 0x01 3 144 1 2\nname                            type data\n"
          "dmu_tx_assigned                 4    {a}\ndmu_tx_dirty_delay              4    {d}\n"
          "dmu_tx_dirty_throttle           4    7\n")


def test_cpu_and_disk_parsers():
    assert parse_cpu(STAT_1) == (1000, 0, 500, 8000, 500, 0, 0, 0)
    assert parse_diskstats(DISK_1, {"sda", "loop0", "zd0"}) == {"sda": (2000 * 512, 8000 * 512)}
    # without /sys/block partitions cannot be told apart; loop and zvol devices are still left out
    assert set(parse_diskstats(DISK_1)) == {"sda", "sda1"}


def test_deltas_from_two_snapshots(tmp_path):
    (tmp_path / "spl/kstat/zfs").mkdir(parents=True)
    for name in ("sda", "loop0", "zd0"):
        (tmp_path / "sys/block" / name).mkdir(parents=True)

    def write(stat, disk, assigned, delay):
        (tmp_path / "stat").write_text(stat)
        (tmp_path / "diskstats").write_text(disk)
        (tmp_path / "spl/kstat/zfs/dmu_tx").write_text(DMU_TX.format(a=assigned, d=delay))
        return snapshot(tmp_path, tmp_path / "sys")

    before = write(STAT_1, DISK_1, 100, 64)
    after = write(STAT_2, DISK_2, 180, 75)
    d = deltas(before, after)
    # busy = (600 user + 400 system) / 2000 ticks; iowait 700 / 2000
    assert d.cpu_busy_ratio == 1000 / 2000 and d.cpu_iowait_ratio == 700 / 2000
    assert d.disks == {"sda": {"read_bytes": 0, "written_bytes": 2048 * 512}}
    assert d.dmu_tx == {"dmu_tx_assigned": 80, "dmu_tx_dirty_delay": 11}


def test_snapshot_without_zfs_or_diskstats(tmp_path):
    (tmp_path / "stat").write_text(STAT_1)
    snap = snapshot(tmp_path, tmp_path / "nosys")
    assert snap.disks == {} and snap.dmu_tx == {}
