"""`zpool iostat -HpPvw` / `-HpPvq` of OpenZFS 2.1 (no rebuild columns) and 2.3."""

import pytest

from tests.conftest import FIXTURES
from zfsnas.sources.model import Dropped
from zfsnas.sources.zpool_iostat import is_pool_name, parse_latency_histograms, parse_queue_depths

VERSIONS = {"2.1.11": 10, "2.3.2": 11}
WD1 = "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA-part1"
CACHE = "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456-part1"


def read(version, kind):
    return (FIXTURES / "linux-disks" / f"zpool-{version}" / f"iostat-{kind}.txt").read_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_latency_histograms(version):
    vdevs = parse_latency_histograms(read(version, "w"))
    assert [(v.pool, v.vdev) for v in vdevs] == [
        ("tank", "tank"), ("tank", "raidz2-0"), ("tank", WD1),
        ("tank", WD1.replace("K1AAAAAA", "K2BBBBBB")), ("tank", "/dev/disk/by-id/scsi-35000c500a1b2c3d4-part1"),
        ("tank", CACHE), ("backup", "backup"), ("backup", "/dev/mapper/mpatha1")]
    leaf = vdevs[2]
    assert len(leaf.histograms) == VERSIONS[version]
    assert ("rebuild", "" ) in leaf.histograms if version >= "2.2" else ("rebuild", "") not in leaf.histograms
    disk_read = leaf.histograms[("disk_wait", "read")]
    assert len(disk_read) == 37
    assert disk_read[0] == (1, 0)
    assert disk_read[-1][0] == 2 ** 37 - 1
    # vdev index 2, column 2 (disk_wait read): hump centred on bucket 12 + 2*2 + 2 = 18
    assert disk_read[18] == (2 ** 19 - 1, 3000)
    assert disk_read[17] == (2 ** 18 - 1, 3000 - 180)


@pytest.mark.parametrize("version", VERSIONS)
def test_queue_depths(version):
    vdevs = parse_queue_depths(read(version, "q"))
    assert [v.vdev for v in vdevs][:2] == ["tank", "raidz2-0"]
    cache = next(v for v in vdevs if v.vdev == CACHE)
    assert cache.pool == "tank"
    classes = ["sync_read", "sync_write", "async_read", "async_write", "scrub", "trim"]
    if version >= "2.2":
        classes.append("rebuild")
    assert list(cache.pending) == classes
    # index 6 in the generator: values (6*7 + c) % 5 for c = 0.. -> 2,3,4,0,1,2,...
    assert cache.pending["sync_read"] == 2 and cache.active["sync_read"] == 3
    assert cache.pending["sync_write"] == 4 and cache.active["sync_write"] == 0
    assert vdevs[-1].pool == "backup"


def test_queue_depths_without_default_columns_and_bad_width():
    assert parse_queue_depths("tank\t" + "\t".join("1" * 14))[0].active["rebuild"] == 1
    dropped = Dropped()
    queues = parse_queue_depths("tank\t1\t2\t3\nbackup\t" + "\t".join("2" * 14), dropped=dropped)
    assert [q.pool for q in queues] == ["backup"] and dropped.counts == {"malformed": 1}


def test_a_bad_row_costs_that_row():
    """Before issue 33 one `int()` failure failed every vdev's histograms and queues."""
    dropped = Dropped()
    text = "tank\n1023\t1\t2\n2047\tNaN\t2\n4095\t3\t-4\n\n/dev/sda\n1023\t5\t6\n"
    latency = parse_latency_histograms(text, dropped=dropped)
    assert [(v.vdev, v.histograms[("total_wait", "read")]) for v in latency] == [("tank", [(1023, 1)]),
                                                                                ("/dev/sda", [(1023, 5)])]
    assert dropped.counts == {"not_a_number": 1, "negative": 1}
    queues = parse_queue_depths("tank\t" + "\t".join(["1"] * 13 + ["\u00b2"]), dropped=dropped)
    assert queues == [] and dropped.counts["not_a_number"] == 2


def test_pool_names():
    assert is_pool_name("tank") and is_pool_name("logs") and is_pool_name("my pool")
    assert not is_pool_name("raidz2-0") and not is_pool_name("mirror-1") and not is_pool_name("draid2:4d:8c:1s-0")
    assert not is_pool_name("/dev/sdb1") and not is_pool_name("12345678901234567")
    assert is_pool_name("indirectly", {"indirectly"}) and not is_pool_name("indirectly")
    assert is_pool_name("tank", {"backup"})  # imported after the last zpool status
