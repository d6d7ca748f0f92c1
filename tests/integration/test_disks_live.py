"""The `disks` collector on this machine's real block devices, through the real pyudev.

There is no udev database here (no /run/udev), so identities come from sysfs: the self metric
must say so. Hotplug is exercised with real kernel events: a loop device created and removed
through /dev/loop-control (root only; skipped otherwise).
"""

import fcntl
import os
import time
from pathlib import Path

import pytest

from tests.conftest import make_collector, samples, scrape_text, value
from zfsnas.collectors.disks import DisksCollector
from zfsnas.sources.diskstats import read_diskstats
from zfsnas.wiring import build_parser

LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C80, 0x4C81
HAS_UDEV_DB = Path("/run/udev/data").is_dir()


def real_disks():
    import re

    from zfsnas.collectors.filters import DEFAULT_DEVICE_EXCLUDE as DEFAULT_EXCLUDE
    return sorted(d for d in os.listdir("/sys/block") if not re.search(DEFAULT_EXCLUDE, d))


def test_real_pyudev_identities_and_counters():
    disks = real_disks()
    if not disks:
        pytest.skip("no whole disks on this machine")
    before = {s.device: s for s in read_diskstats("/proc")}
    text = scrape_text("--collector.disable-defaults", "--collector.disks")
    data = samples(text)
    after = {s.device: s for s in read_diskstats("/proc")}
    infos = {dict(k)["device"]: dict(k) for (n, k) in data if n == "zfs_disk_info"}
    assert sorted(infos) == disks
    for disk in disks:
        sysfs_serial = ""
        for attr in ("device/serial", "serial"):
            path = Path("/sys/block") / disk / attr
            if path.exists():
                sysfs_serial = path.read_text().strip()
                break
        if not HAS_UDEV_DB:
            assert infos[disk]["serial"] == sysfs_serial
        assert infos[disk]["rotational"] == (Path("/sys/block") / disk / "queue/rotational").read_text().strip()
        reads = value(data, "zfs_disk_reads_total", device=disk)
        assert before[disk].reads <= reads <= after[disk].reads
        written = value(data, "zfs_disk_written_bytes_total", device=disk)
        assert before[disk].sectors_written * 512 <= written <= after[disk].sectors_written * 512
    source = "udev" if HAS_UDEV_DB else "sysfs"
    assert value(data, "zfs_disk_identity_source", source=source) == len(disks)
    assert value(data, "zfs_exporter_collector_success", collector="disks") == 1


@pytest.fixture
def loop_number():
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control"):
        pytest.skip("needs root and /dev/loop-control")
    number = 200 + os.getpid() % 50
    while os.path.exists(f"/sys/block/loop{number}"):
        number += 1
    try:  # a container may have the node but not the right to use it
        with open("/dev/loop-control", "wb") as ctl:
            fcntl.ioctl(ctl, LOOP_CTL_ADD, number)
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, number)
    except OSError as exc:
        pytest.skip(f"cannot create loop devices here: {exc}")
    yield number
    if os.path.exists(f"/sys/block/loop{number}"):
        with open("/dev/loop-control", "wb") as ctl:
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, number)


def wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_hotplug_with_real_kernel_events(loop_number):
    name = f"loop{loop_number}"
    args = build_parser().parse_args(["--disks.device-exclude", r"^(ram|zram)\d+$", "--disks.rescan-interval", "3600"])
    collector = make_collector(DisksCollector, args)
    collector.start()
    try:
        if collector.inventory._monitor_thread is None:
            pytest.skip("no netlink uevents here (the monitor logged why); hotplug relies on rescans")
        assert wait(lambda: collector.inventory.scanned)
        known = lambda: {i.device for i in collector.identities()}  # noqa: E731
        assert name not in known()
        with open("/dev/loop-control", "wb") as ctl:
            assert fcntl.ioctl(ctl, LOOP_CTL_ADD, loop_number) == loop_number
        assert wait(lambda: name in known()), "added disk did not appear"  # only the monitor can have seen it
        with open("/dev/loop-control", "wb") as ctl:
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, loop_number)
        assert wait(lambda: name not in known()), "removed disk did not drop out"
        with open("/dev/loop-control", "wb") as ctl:
            fcntl.ioctl(ctl, LOOP_CTL_ADD, loop_number)
        assert wait(lambda: name in known()), "returned disk did not come back"
    finally:
        collector.stop()
    assert collector.inventory._monitor_thread is None


def test_monitor_start_stop_without_hotplug_flag():
    args = build_parser().parse_args(["--no-disks.hotplug"])
    collector = make_collector(DisksCollector, args)
    collector.start()
    collector.stop()
    assert collector.inventory._monitor_thread is None
