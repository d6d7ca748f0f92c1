"""`zpool list` and `zpool status` parsing on the recorded 2.1 and 2.3 outputs and on edge cases."""

import time

import pytest

from tests.conftest import FIXTURES
from zfsnas.sources.model import Dropped, SourceError
from zfsnas.sources.zpool import (
    LIST_VDEVS,
    parse_bytes,
    parse_ctime,
    parse_duration,
    parse_expansion,
    parse_list,
    parse_scan,
    parse_status,
    parse_vdev_list,
    read_pools,
    read_status,
    read_vdev_space,
)

COMMANDS = FIXTURES / "commands"
VERSIONS = ("2.1", "2.3")
PART = "/dev/disk/by-id/ata-WDC_WD80EFZZ-68BTXN0_WD-CA0AAA{}-part1"
NVME = "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_500GB_S5H7NS0N10000{}-part1"


def recorded(version, name):
    return (COMMANDS / f"zfs-{version}" / name).read_text()


def status(version):
    return read_status(lambda argv: recorded(version, {"-Pp": "zpool-status-P.txt", "-gp": "zpool-status-g.txt"}[argv[2]]))


def local(*fields):
    return time.mktime((*fields, 0, 0, -1))


def test_parse_list():
    pools = {p.name: p for p in parse_list(recorded("2.3", "zpool-list.txt"))}
    tank = pools["tank"]
    assert (tank.size, tank.allocated, tank.free) == (47971736518656, 11874725347328, 36097011171328)
    assert (tank.fragmentation, tank.capacity, tank.dedup, tank.health) == (0.17, 0.24, 1.37, "DEGRADED")
    assert pools["scratch"].fragmentation is None  # printed as -


def test_parse_list_rejects_other_columns():
    with pytest.raises(SourceError, match="7 columns"):
        parse_list("tank\t1\t2\t3\t4\t5\t1.00\n")


def test_parse_list_drops_a_bad_line_or_field_not_the_listing():
    dropped = Dropped()
    pools = parse_list("tank\t100\t-40\t60\tNaN\t40%\t1.00x\tONLINE\nbad\tline\n"
                       "backup\t1e400\t1\t2\t3\t4\t1.00\tONLINE\n", dropped)
    assert [(p.name, p.size, p.allocated, p.free, p.fragmentation, p.capacity, p.dedup) for p in pools] == [
        ("tank", 100, None, 60, None, 0.4, 1.0), ("backup", None, 1, 2, 0.03, 0.04, 1.0)]
    assert dropped.counts == {"negative": 1, "not_a_number": 2, "malformed": 1}


def test_a_scan_line_that_cannot_be_read_costs_that_scan():
    text = ("  pool: tank\n state: ONLINE\n  scan: scrub repaired 1.2.3G in 00:00:01 with 0 errors on Sun Nov 22 "
            "10:00:00 2026\nconfig:\n\n\tNAME  STATE  READ WRITE CKSUM\n\ttank  ONLINE  0 0 0\n\nerrors: No known "
            "data errors\n")
    dropped = Dropped()
    [pool] = parse_status(text, dropped)
    assert (pool.state, pool.scans, pool.data_errors, len(pool.vdevs)) == ("ONLINE", [], 0, 1)
    assert dropped.counts == {"malformed": 1}


@pytest.mark.parametrize("version", VERSIONS)
def test_vdev_tree_roles_parents_guids(version):
    vdevs = status(version)
    tank = {(v.name, v.role): v for v in vdevs if v.pool == "tank"}
    assert len([v for v in vdevs if v.pool == "tank"]) == 23
    root = tank[("tank", "data")]
    assert (root.parent, root.guid, root.is_leaf, root.state) == ("", "", False, "DEGRADED")
    raidz = tank[("raidz2-0", "data")]
    assert (raidz.parent, raidz.guid, raidz.is_leaf) == ("tank", "1475094485618418262", False)
    faulted = tank[(PART.format("A2"), "data")]
    assert (faulted.state, faulted.parent, faulted.guid, faulted.is_leaf) == ("FAULTED", "spare-1", "15913282236170337251", True)
    assert (faulted.read_errors, faulted.write_errors, faulted.checksum_errors) == (3, 127, 0)
    removed = tank[(NVME.format(2), "special")]
    assert (removed.state, removed.parent, tank[("mirror-1", "special")].state) == ("REMOVED", "mirror-1", "DEGRADED")
    offline = tank[("/dev/disk/by-id/ata-INTEL_SSDSC2BB120G7_BTDV7261000B-part1", "log")]
    assert (offline.state, offline.parent, offline.guid) == ("OFFLINE", "mirror-2", "2468013579246801357")
    dedup = [v for v in vdevs if v.role == "dedup"]
    assert [(v.name, v.parent, v.is_leaf) for v in dedup] == [
        ("mirror-3", "tank", False),
        ("/dev/disk/by-id/ata-Samsung_SSD_850_PRO_256GB_S3Z8NB0K300001-part1", "mirror-3", True),
        ("/dev/disk/by-id/ata-Samsung_SSD_850_PRO_256GB_S3Z8NB0K300002-part1", "mirror-3", True)]
    missing = tank[("12897061293381947325", "data")]  # an absent device is printed by guid even with -P
    assert (missing.state, missing.guid, missing.is_leaf) == ("UNAVAIL", "12897061293381947325", True)
    spare_in_use = tank[(PART.format("S1"), "data")]
    assert (spare_in_use.parent, spare_in_use.state) == ("spare-1", "ONLINE")
    listed_spare = tank[(PART.format("S1"), "spare")]
    assert (listed_spare.state, listed_spare.parent, listed_spare.guid) == ("INUSE", "tank", "6315329934812738204")
    assert listed_spare.read_errors == -1  # the spares section prints no counters
    assert tank[(PART.format("S2"), "spare")].state == "AVAIL"
    assert tank[("mirror-1", "special")].parent == "tank"
    assert tank[("mirror-2", "log")].is_leaf is False
    log_leaf = [v for v in vdevs if v.role == "log" and v.is_leaf]
    assert [v.parent for v in log_leaf] == ["mirror-2", "mirror-2"]
    cache = [v for v in vdevs if v.role == "cache"]
    assert [(v.parent, v.is_leaf, v.checksum_errors) for v in cache] == [("tank", True, 0), ("tank", True, 1)]
    assert cache[1].guid == "2020202020202020202"


@pytest.mark.parametrize("version", VERSIONS)
def test_pool_state_scans_and_errors(version):
    pools = {p.name: p for p in status(version).pools}
    assert (pools["tank"].state, pools["tank"].data_errors) == ("DEGRADED", 3)
    assert pools["backup"].data_errors == 0
    [scrub] = pools["backup"].scans
    end = local(2026, 11, 22, 10, 0, 0)
    assert (scrub.function, scrub.state, scrub.end, scrub.start) == ("scrub", "finished", end, end - 93784)
    assert (scrub.processed, scrub.errors, scrub.examined) == (1572864, 2, None)
    [resilver] = pools["tank"].scans
    assert (resilver.function, resilver.state, resilver.start) == ("resilver", "scanning", local(2026, 11, 23, 9, 12, 41))
    assert resilver.examined == round(1.91 * 2**40)
    assert resilver.issued == 402 * 2**30
    assert resilver.total == round(10.8 * 2**40)
    assert (resilver.processed, resilver.percent_done) == (round(66.9 * 2**30), 3.63)
    assert (resilver.rate, resilver.remaining) == (236 * 2**20, 12 * 3600 + 50 * 60 + 5)
    [running] = pools["scratch"].scans
    assert (running.state, running.start) == ("scanning", local(2026, 11, 2, 8, 0, 0))
    assert (running.examined, running.issued, running.total) == (210 * 2**30, round(98.5 * 2**30), 400 * 2**30)
    assert (running.rate, running.remaining) == (240 * 2**20, 21 * 60 + 26)
    assert (scrub.rate, scrub.remaining) == (None, None)  # finished: neither is printed


# OpenZFS `print_scan_scrub_resilver_status`: 2.2+ prints a rate only once the pass has issued
# something and a time to go only from 10 MB/s; 2.1 always prints both rates (`0B/s`).
@pytest.mark.parametrize("lines, rate, remaining", [
    (["resilver in progress since Sun Nov 22 10:00:00 2026", "\t1.45G / 1.45G scanned, 0B / 1.45G issued",
      "\t0B resilvered, 0.00% done, no estimated completion time"], None, None),
    (["resilver in progress since Sun Nov 22 10:00:00 2026", "\t1.45G / 1.45G scanned at 742M/s, 112M / 1.45G issued at 5.6M/s",
      "\t110M resilvered, 7.55% done, no estimated completion time"], round(5.6 * 2**20), None),
    (["resilver in progress since Sun Nov 22 10:00:00 2026", "\t1.45G scanned at 742M/s, 0B issued at 0B/s, 1.45G total",
      "\t0B resilvered, 0.00% done, no estimated completion time"], 0, None),
    (["scrub in progress since Sun Nov 22 10:00:00 2026", "\t9.99T / 10.8T scanned at 1.12G/s, 9.01T / 10.8T issued at 1.01G/s",
      "\t0B repaired, 83.43% done, 1 days 02:03:04 to go"], round(1.01 * 2**30), 93784),
])
def test_scan_rate_and_time_remaining(lines, rate, remaining):
    scan = parse_scan(lines)
    assert (scan.rate, scan.remaining) == (rate, remaining)


# OpenZFS 2.3 `print_raidz_expand_status` (zfs_nicenum figures, no `B`; `expansion of <vdev>`).
def test_raidz_expansion():
    running = parse_expansion(["expansion of raidz1-0 in progress since Sun Nov 22 10:00:00 2026",
                               "\t118M / 403M copied at 12.3M/s, 29.28% done, 00:00:23 to go"])
    assert (running.vdev, running.state, running.start, running.paused) == ("raidz1-0", "expanding",
                                                                             local(2026, 11, 22, 10, 0, 0), False)
    assert (running.copied, running.total, running.rate, running.remaining, running.percent_done) == (
        118 * 2**20, 403 * 2**20, round(12.3 * 2**20), 23, 29.28)
    paused = parse_expansion(["expansion of raidz2-0 in progress since Sun Nov 22 10:00:00 2026",
                              "\t1.00G / 4.00G copied at 1.00M/s, 25.00% done, paused for resilver or clear"])
    assert (paused.paused, paused.remaining) == (True, None)
    slow = parse_expansion(["expansion of raidz1-0 in progress since Sun Nov 22 10:00:00 2026",
                            "\t1 / 4.00T copied at 1/s, 0.00% done, (copy is slow, no estimated time)"])
    assert (slow.copied, slow.rate, slow.remaining, slow.paused) == (1, 1, None, False)
    done = parse_expansion(["expanded raidz1-0 copied 403M in 00:00:41, on Sun Nov 22 10:00:41 2026"])
    assert (done.state, done.copied, done.start, done.end, done.total) == (
        "finished", 403 * 2**20, local(2026, 11, 22, 10, 0, 0), local(2026, 11, 22, 10, 0, 41), None)
    assert parse_expansion(["something else entirely"]) is None
    # as a section of zpool status (printed without indentation, after `scan:`)
    text = recorded("2.3", "zpool-status-P.txt").replace(
        "  scan: scrub repaired 1.50M", "expand: expansion of mirror-0 in progress since Sun Nov 22 10:00:00 2026\n"
        "\t1.00G / 2.00G copied at 10.0M/s, 50.00% done, 00:01:42 to go\n  scan: scrub repaired 1.50M")
    backup = next(p for p in parse_status(text) if p.name == "backup")
    assert (backup.expansion.copied, backup.expansion.remaining, len(backup.scans)) == (2**30, 102, 1)


@pytest.mark.parametrize("lines, expect", [
    (["none requested"], ("none", "none", None, None)),
    (["scrub canceled on Sun Nov 22 10:00:00 2026"], ("scrub", "canceled", None, local(2026, 11, 22, 10, 0, 0))),
    (["resilver canceled on Sun Nov 22 10:00:00 2026"], ("resilver", "canceled", None, local(2026, 11, 22, 10, 0, 0))),
    (["resilvered 66.9G in 00:10:00 with 0 errors on Sun Nov 22 10:00:00 2026"],
     ("resilver", "finished", local(2026, 11, 22, 9, 50, 0), local(2026, 11, 22, 10, 0, 0))),
    (["resilvered (mirror-0) 12.0G in 00:01:40 with 0 errors on Sun Nov 22 10:00:00 2026"],
     ("resilver", "finished", local(2026, 11, 22, 9, 58, 20), local(2026, 11, 22, 10, 0, 0))),
    (["scrub paused since Sun Nov 22 11:00:00 2026", "\tscrub started on Sun Nov 22 10:00:00 2026",
      "\t5.00G scanned, 1.00G issued, 10.0G total", "\t0B repaired, 10.00% done"],
     ("scrub", "paused", local(2026, 11, 22, 10, 0, 0), None)),
])
def test_scan_wordings(lines, expect):
    scan = parse_scan(lines)
    assert (scan.function, scan.state, scan.start, scan.end) == expect


def test_paused_scrub_figures_and_unknown_wording():
    scan = parse_scan(["scrub paused since Sun Nov 22 11:00:00 2026", "\tscrub started on Sun Nov 22 10:00:00 2026",
                       "\t5.00G / 10.0G scanned, 1.00G / 9.00G issued", "\t0B repaired, 10.00% done"])
    assert (scan.examined, scan.total, scan.issued, scan.percent_done) == (5 * 2**30, 10 * 2**30, 2**30, 10.0)
    assert parse_scan(["error scrub repaired 0 error blocks in 00:00:01 on Sun Nov 22 10:00:00 2026"]) is None


def test_figures():
    assert [parse_bytes(x) for x in ("0B", "512B", "1.50M", "12.3T", "2K")] == \
        [0, 512, 1572864, round(12.3 * 2**40), 2048]
    assert parse_duration("00:00:01") == 1 and parse_duration("2 days 03:04:05") == 183845
    assert parse_ctime("Mon Nov  2 08:00:00 2026") == local(2026, 11, 2, 8, 0, 0)
    for bad, parse in (("1.5Q", parse_bytes), ("yesterday", parse_ctime), ("1h", parse_duration)):
        with pytest.raises(SourceError):
            parse(bad)


def test_tree_changed_between_the_two_commands():
    text_p = recorded("2.3", "zpool-status-P.txt")
    text_g = recorded("2.3", "zpool-status-g.txt").replace("\t    8426671512905713004     ONLINE       0     0     0\n", "")
    with pytest.raises(SourceError, match="changed between"):
        read_status(lambda argv: text_p if argv[2] == "-Pp" else text_g)


def test_no_pools():
    assert parse_status("no pools available\n") == []
    assert read_status(lambda argv: "no pools available\n") == []
    assert parse_list("no pools available\n") == []

    def exits_1(argv):
        raise SourceError(f"{' '.join(argv)} exited with status 1: no pools available")

    assert read_pools(exits_1) == [] and read_status(exits_1).pools == []


def test_shared_value_is_a_vdev_list_with_pools():
    shared = status("2.3")
    assert len(shared) == 23 + 4 + 2
    assert [p.name for p in shared.pools] == ["backup", "scratch", "tank"]


@pytest.mark.parametrize("version", VERSIONS)
def test_vdev_space(version):
    vdevs = read_vdev_space(lambda argv: recorded(version, "zpool-list-v.txt") if tuple(argv) == LIST_VDEVS else "")
    by_name = {(v.pool, v.name): v for v in vdevs}
    raidz = by_name[("tank", "raidz2-0")]
    assert (raidz.role, raidz.size, raidz.allocated, raidz.free, raidz.fragmentation, raidz.capacity) == (
        "data", 47244640256000, 11730456035328, 35514184220672, 0.18, 0.24)
    leaf = by_name[("tank", PART.format("A1"))]
    assert (leaf.role, leaf.size, leaf.allocated, leaf.fragmentation) == ("data", 8001561821184, None, None)
    assert [(v.name, v.role) for v in vdevs if v.role not in ("data",)][:3] == [
        ("mirror-3", "dedup"), ("/dev/disk/by-id/ata-Samsung_SSD_850_PRO_256GB_S3Z8NB0K300001-part1", "dedup"),
        ("/dev/disk/by-id/ata-Samsung_SSD_850_PRO_256GB_S3Z8NB0K300002-part1", "dedup")]
    assert {v.role for v in vdevs if v.name in ("mirror-1", "mirror-2")} == {"special", "log"}
    cache = by_name[("tank", "/dev/disk/by-id/ata-Samsung_SSD_860_EVO_500GB_S4EVNF0M200001-part1")]
    assert (cache.role, cache.allocated, cache.capacity) == ("cache", 412316860416, 0.82)
    assert by_name[("tank", PART.format("S2"))].role == "spare"
    assert by_name[("tank", "12897061293381947325")].size is None  # an absent disk: printed by guid, no size
    assert {v.pool for v in vdevs} == {"backup", "scratch", "tank"}  # the pool rows themselves are not vdevs
    assert len(vdevs) == 3 + 1 + 22  # backup, scratch, tank: every row but the pools' and the headings


def test_vdev_space_from_live_zfs():
    """The guest's `zpool list -Hpv`: the headings and rows of a live pool (2.3.2 and 2.1.11)."""
    for version in ("2.3.2", "2.1.11"):
        vdevs = parse_vdev_list((FIXTURES / f"linux-zfs-{version}-live" / "commands" / "zpool_list_v.txt").read_text())
        assert [(v.name, v.role) for v in vdevs if v.role != "data"] == [("virtio-ZNV0001", "cache"),
                                                                          ("ata-ZFSNAS_SATA_HDD_ZNS0005", "spare")]
        mirror = next(v for v in vdevs if v.name == "mirror-0")
        assert mirror.size == 251658240 and 0 < mirror.allocated < mirror.size and mirror.free == \
            mirror.size - mirror.allocated and mirror.fragmentation is not None
        assert len(vdevs) == 3 * 4 + 9 + 2


def test_vdev_space_rejects_other_columns():
    with pytest.raises(SourceError, match="7 columns, expected 10"):
        parse_vdev_list("tank\t1\t2\t3\t4\t5\n\tmirror-0\t1\t2\t3\t4\t5\t6\n")
