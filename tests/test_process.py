"""The exporter's own `process_*` families (exporter/zfsnas/process.py), read from this process."""

import os
import time

from tests.conftest import value
from zfsnas.exposition import render
from zfsnas.process import process_families


def test_process_families_describe_this_process():
    before = os.times()
    text = render(process_families().families())
    assert value(text, "process_cpu_seconds_total") >= before.user + before.system
    with open("/proc/self/status") as status:
        rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    assert abs(value(text, "process_resident_memory_bytes") - rss_kb * 1024) < 8 * 2**20
    assert value(text, "process_open_fds") == len(os.listdir("/proc/self/fd"))   # both count listdir's own
    # The start time: that of this Python (before now, after the machine's boot), read once and kept.
    with open("/proc/self/stat") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as stat:
        boot = next(int(line.split()[1]) for line in stat if line.startswith("btime"))
    started = value(text, "process_start_time_seconds")
    assert started == boot + ticks / os.sysconf("SC_CLK_TCK")
    assert boot < started <= time.time()
    assert value(render(process_families().families()), "process_start_time_seconds") == started
