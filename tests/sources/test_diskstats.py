"""/proc/diskstats in the three kernel layouts."""

from tests.conftest import FIXTURES
from zfsnas.sources.diskstats import parse_diskstats, read_diskstats

LINES = """\
   8       0 sda 41000 900 2100000 15000 88000 40000 3300000 70000 2 60000 90000
   8      16 sdb 12016 10 9000016 40000 250016 900 400016000 900000 1 800000 1700000 3 0 24 7
 259       0 nvme0n1 900000 0 120000000 100000 20000 0 60000000 9000 0 95000 109000 3000 0 50000000 200 11 5
   8      32 broken 1 2 3
   8      48 sdd x 0 0 0 0 0 0 0 0 0 0
"""


def test_three_layouts_and_bad_lines_skipped():
    old, discard, flush = parse_diskstats(LINES)
    assert (old.device, old.major, old.minor) == ("sda", 8, 0)
    assert (old.reads, old.sectors_read, old.read_ms, old.writes, old.sectors_written) == (41000, 2100000, 15000, 88000,
                                                                                            3300000)
    assert (old.in_progress, old.io_ms, old.weighted_io_ms) == (2, 60000, 90000)
    assert old.discards is None and old.flushes is None
    assert (discard.discards, discard.sectors_discarded, discard.discard_ms, discard.flushes) == (3, 24, 7, None)
    assert (flush.discards, flush.sectors_discarded, flush.flushes, flush.flush_ms) == (3000, 50000000, 11, 5)


def test_fixture_file():
    stats = {s.device: s for s in read_diskstats(FIXTURES / "linux-disks" / "proc")}
    assert stats["sdb"].sectors_written == 400_016_000
    assert stats["sdb1"].sectors_written == 200_008_000
    assert len(stats) == 20


def test_keep_chooses_the_devices_parsed():
    asked = []
    kept = parse_diskstats(LINES, keep=lambda device: asked.append(device) or device == "nvme0n1")
    assert [(s.device, s.flushes, s.flush_ms) for s in kept] == [("nvme0n1", 11, 5)]
    assert asked == ["sda", "sdb", "nvme0n1", "sdd"]  # a line of the wrong length is not even asked about
    stats = read_diskstats(FIXTURES / "linux-disks" / "proc", keep=lambda device: device.startswith("sdb"))
    assert {s.device: s.sectors_written for s in stats} == {"sdb": 400_016_000, "sdb1": 200_008_000,
                                                            "sdb9": 200_008_000}
