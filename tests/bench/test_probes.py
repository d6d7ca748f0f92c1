"""Probes: CPU, disk and throttle deltas from /proc texts in their real formats."""

import os

from zfsnas.bench.running.probes import CpuTimes, deltas, disk_bytes, parse_cp_time, parse_cpu, parse_stathz, snapshot

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
    assert parse_cpu(STAT_1) == CpuTimes(user=10.0, system=5.0, iowait=5.0, idle=80.0)
    assert disk_bytes(DISK_1, {"sda", "loop0", "zd0"}) == {"sda": (2000 * 512, 8000 * 512)}
    # without /sys/block partitions cannot be told apart; loop and zvol devices are still left out
    assert set(disk_bytes(DISK_1)) == {"sda", "sda1"}


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
    # busy = (600 user + 400 system) / 2000 ticks; iowait 700 / 2000; seconds at USER_HZ
    assert d.cpu_busy_ratio == 1000 / 2000 and d.cpu_iowait_ratio == 700 / 2000
    hz = os.sysconf("SC_CLK_TCK")
    assert (d.cpu_user_seconds, d.cpu_system_seconds, d.cpu_iowait_seconds, d.cpu_idle_seconds) == (
        round(600 / hz, 2), round(400 / hz, 2), round(700 / hz, 2), round(300 / hz, 2))
    assert d.disks == {"sda": {"read_bytes": 0, "written_bytes": 2048 * 512}}
    assert d.dmu_tx == {"dmu_tx_assigned": 80, "dmu_tx_dirty_delay": 11}


def test_snapshot_without_zfs_or_diskstats(tmp_path):
    (tmp_path / "stat").write_text(STAT_1)
    snap = snapshot(tmp_path, tmp_path / "nosys")
    assert snap.disks == {} and snap.dmu_tx == {}


# In the format of FreeBSD 14.1 (amd64, 4 CPUs; written by us, FreeBSD cannot boot here): `sysctl -n
# kern.clockrate` and `sysctl -n kern.cp_time`
# about ten seconds apart during a write (user nice sys intr idle, in stathz ticks).
CLOCKRATE = "{ hz = 1000, tick = 1000, profhz = 8128, stathz = 127 }\n"
CP_TIME_1 = "183467 521 110954 2281 17408211\n"
CP_TIME_2 = "183721 521 111970 2535 17412060\n"


def test_freebsd_cpu_from_kern_cp_time(tmp_path):
    assert parse_stathz(CLOCKRATE) == 127
    assert parse_cp_time(CP_TIME_1, 127) == CpuTimes(user=(183467 + 521) / 127, system=(110954 + 2281) / 127,
                                                     iowait=0.0, idle=17408211 / 127)
    answers = iter([CP_TIME_1, CP_TIME_2])
    sysctl = {"kern.clockrate": lambda: CLOCKRATE, "kern.cp_time": lambda: next(answers)}
    before = snapshot(tmp_path, tmp_path, lambda name: sysctl[name]())
    after = snapshot(tmp_path, tmp_path, lambda name: sysctl[name]())
    d = deltas(before, after)
    # 254 user + 1016 sys + 254 intr + 3849 idle ticks = 5373 ticks of 4 CPUs over about 10.6 s
    assert (d.cpu_user_seconds, d.cpu_system_seconds, d.cpu_idle_seconds) == (2.0, 10.0, 30.31)
    assert abs(d.cpu_busy_ratio - 1524 / 5373) < 1e-9 and d.cpu_iowait_seconds == 0.0
