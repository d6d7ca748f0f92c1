"""Collector `vdevlatency` on recorded `zpool iostat -w/-q` of OpenZFS 2.1 and 2.3."""

import pytest

from tests.conftest import FIXTURES, make_collector, samples, types, value
from zfsnas.collectors.vdevlatency import VdevLatencyCollector
from zfsnas.exposition import render
from zfsnas.scrape import ScrapeCollector
from zfsnas.sources.model import SourceError
from zfsnas.wiring import build_parser

WD1 = "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA-part1"


class RecordedZpool:
    """A CommandRunner that answers from the recorded captures and remembers what it was asked."""

    def __init__(self, version, fail=""):
        self.base = FIXTURES / "linux-disks" / f"zpool-{version}"
        self.fail = fail
        self.calls = []

    def run(self, argv, timeout=None):
        self.calls.append(list(argv))
        if self.fail:
            raise SourceError(f"zpool iostat -HpPvw exited with status 1: {self.fail}")
        return (self.base / f"iostat-{argv[-1][-1]}.txt").read_text()


def scrape(version, fail=""):
    runner = RecordedZpool(version, fail)
    args = build_parser().parse_args(["--collector.disable-defaults", "--collector.vdevlatency"])
    collector = make_collector(VdevLatencyCollector, args, runner)
    text = render(ScrapeCollector([collector]).scrape())
    return text, samples(text), runner


@pytest.mark.parametrize("version", ["2.1.11", "2.3.2"])
def test_histograms_in_seconds_cumulative(version):
    text, data, runner = scrape(version)
    assert runner.calls == [["zpool", "iostat", "-HpPvw"], ["zpool", "iostat", "-HpPvq"]]
    assert types(text)["zfs_vdev_latency_seconds"] == "histogram"
    labels = dict(pool="tank", vdev=WD1, type="disk_wait", io="read")
    # bucket 18 holds 3000, 17 and 19 hold 2820 each, 16 and 20 2280: le = (2^(j+1) - 1) ns
    assert value(data, "zfs_vdev_latency_seconds_bucket", le=str((2 ** 18 - 1) * 1e-9), **labels) == 2280 + 2820
    assert value(data, "zfs_vdev_latency_seconds_bucket", le=str((2 ** 19 - 1) * 1e-9), **labels) == 2280 + 2820 + 3000
    assert value(data, "zfs_vdev_latency_seconds_bucket", le="+Inf", **labels) == 2 * 2280 + 2 * 2820 + 3000
    assert value(data, "zfs_vdev_latency_seconds_count", **labels) == 2 * 2280 + 2 * 2820 + 3000
    assert value(data, "zfs_vdev_latency_seconds_count", pool="backup", vdev="/dev/mapper/mpatha1", type="scrub",
                 io="") > 0
    kinds = {dict(k)["type"] for (n, k) in data if n == "zfs_vdev_latency_seconds_count"}
    assert kinds == {"total_wait", "disk_wait", "syncq_wait", "asyncq_wait", "scrub", "trim"} | (
        {"rebuild"} if version >= "2.2" else set())
    assert value(data, "zfs_exporter_collector_success", collector="vdevlatency") == 1


@pytest.mark.parametrize("version", ["2.1.11", "2.3.2"])
def test_queue_depths(version):
    text, data, _ = scrape(version)
    assert value(data, "zfs_vdev_queue_pending", pool="tank", vdev="raidz2-0", **{"class": "sync_read"}) == 2
    assert value(data, "zfs_vdev_queue_active", pool="tank", vdev="raidz2-0", **{"class": "sync_read"}) == 3
    assert value(data, "zfs_vdev_queue_pending", pool="backup", vdev="backup", **{"class": "sync_read"}) == 4
    assert value(data, "zfs_vdev_queue_active", pool="backup", vdev="backup", **{"class": "trim"}) == 0
    classes = {dict(k)["class"] for (n, k) in data if n == "zfs_vdev_queue_pending"}
    assert ("rebuild" in classes) == (version >= "2.2")


def test_failing_zpool_is_reported():
    text, data, _ = scrape("2.3.2", fail="cannot open '/dev/zfs': Permission denied")
    assert value(data, "zfs_exporter_collector_success", collector="vdevlatency") == 0
    assert value(data, "zfs_exporter_source_success", source="zpool_iostat") == 0
    assert "zfs_vdev_latency_seconds" not in types(text)


def test_off_by_default_with_own_interval():
    args = build_parser().parse_args(["--vdevlatency.refresh-interval", "120"])
    assert args.collector_vdevlatency is None and not VdevLatencyCollector.default_enabled
    assert make_collector(VdevLatencyCollector, args).refresher.interval == 120


def test_no_pools_is_empty_not_a_failure():
    text, data, runner = scrape("2.3.2", fail="no pools available")
    assert value(data, "zfs_exporter_collector_success", collector="vdevlatency") == 1
    assert "zfs_vdev_queue_pending" not in types(text)


def test_families_built_once_per_refresh():
    from zfsnas.collectors.base import Report
    args = build_parser().parse_args([])
    collector = make_collector(VdevLatencyCollector, args, RecordedZpool("2.3.2"))
    first = collector.collect(Report("vdevlatency"))
    assert collector.collect(Report("vdevlatency")) is first
    assert all(family.text for family in first)  # rendered in the refresh, not by the scrape
    collector.refresher.refresh_now()
    again = collector.collect(Report("vdevlatency"))
    assert again is not first
    assert [f.text for f in again] == [f.text for f in first]


@pytest.mark.parametrize("version", ["2.1", "2.3"])
def test_vdev_labels_match_the_pools_collector(version):
    """The same vdev names as `zpool status -P` in the pools collector's recordings (spares have no I/O)."""
    from zfsnas.sources.zpool import parse_status

    base = FIXTURES / "commands" / f"zfs-{version}"
    status = {(v.pool, v.name) for p in parse_status((base / "zpool-status-P.txt").read_text()) for v in p.vdevs
              if v.role != "spare"}

    class Recorded:
        def run(self, argv, timeout=None):
            return (base / f"zpool-iostat-{argv[-1][-1]}.txt").read_text()
    collector = make_collector(VdevLatencyCollector, build_parser().parse_args([]), Recorded())
    latency, queues = collector._read()
    served = {(v.pool, v.vdev) for v in latency}
    assert served == {(v.pool, v.vdev) for v in queues}
    roots = {(pool, pool) for pool, _ in status}
    assert served - roots == status - roots
    assert ("tank", "12897061293381947325") in served  # the missing disk, named by its guid


def test_a_hung_zpool_never_holds_a_scrape():
    import threading
    import time as clock

    from zfsnas.collectors.base import Report
    release = threading.Event()

    class Hung(RecordedZpool):
        def run(self, argv, timeout=None):
            release.wait(10)
            return super().run(argv, timeout)
    collector = make_collector(VdevLatencyCollector, build_parser().parse_args([]), Hung("2.3.2"))
    collector.start()
    try:
        started = clock.monotonic()
        report = Report("vdevlatency")
        assert list(collector.collect(report)) == []
        assert clock.monotonic() - started < 1 and not report.ok  # "not refreshed yet", at once
        release.set()
        deadline = clock.monotonic() + 10
        while collector.refresher.state().value is None and clock.monotonic() < deadline:
            clock.sleep(0.05)
        assert collector.collect(Report("vdevlatency"))
    finally:
        release.set()
        collector.stop()
