"""Collector `disks` on the fixture tree: counters in base units, identities, exclusions, fallback."""

import argparse
import shutil

from tests.conftest import FIXTURES, make_collector, rendered_from_samples, samples, scrape_text, types, value
from zfsnas.collectors.base import Report
from zfsnas.collectors.disks import DisksCollector
from zfsnas.exposition import _TextPart, render
from zfsnas.refresh import BackgroundRefresher
from zfsnas.sources.model import SourceError, VdevStatus
from zfsnas.wiring import build_parser

TREE = FIXTURES / "linux-disks"
PATHS = ["--path.procfs", str(TREE / "proc"), "--path.sysfs", str(TREE / "sys"),
         "--path.udev.data", str(TREE / "udev" / "data")]


def collect_kept(collector):
    """One collect, as the collector returned it (what `collected` lists); every read must have succeeded."""
    report = Report(collector.name)
    families = collector.collect(report)
    assert report.ok, report.errors
    return families


def counter_text(families) -> list[str]:
    """The families the builder holds as a `RowTable`'s text (the diskstats counters)."""
    return [family.name for part in families._parts() if isinstance(part, _TextPart) for family in part.families()]


def scrape(*flags):
    return scrape_text(*PATHS, "--collector.disable-defaults", "--collector.disks", *flags)


def info(text):
    return {dict(labels)["device"]: dict(labels) for (name, labels) in samples(text) if name == "zfs_disk_info"}


def test_counters_in_base_units_whole_disks_only():
    text = scrape()
    assert value(text, "zfs_disk_written_bytes_total", device="sdb") == 400_016_000 * 512
    assert value(text, "zfs_disk_read_bytes_total", device="sdb") == 9_000_016 * 512
    assert value(text, "zfs_disk_reads_total", device="sdb") == 12016
    assert value(text, "zfs_disk_writes_total", device="sdb") == 250016
    assert value(text, "zfs_disk_read_time_seconds_total", device="sdb") == 40.0
    assert value(text, "zfs_disk_write_time_seconds_total", device="sdb") == 900.0
    assert value(text, "zfs_disk_io_time_seconds_total", device="sdb") == 800.0
    assert value(text, "zfs_disk_io_time_weighted_seconds_total", device="sdb") == 1700.0
    assert value(text, "zfs_disk_io_now", device="sdb") == 1
    assert value(text, "zfs_disk_discarded_bytes_total", device="nvme0n1") == 50_000_000 * 512
    assert value(text, "zfs_disk_flushes_total", device="sda") == 9000
    assert value(text, "zfs_disk_flush_time_seconds_total", device="sda") == 0.3
    devices = {dict(labels)["device"] for (name, labels) in samples(text) if name == "zfs_disk_reads_total"}
    assert devices == {"sda", "sdb", "sdc", "sdd", "sde", "nvme0n1", "vda"}  # no partitions, loop or dm
    kinds = types(text)
    assert kinds["zfs_disk_written_bytes_total"] == "counter" and kinds["zfs_disk_io_now"] == "gauge"
    assert kinds["zfs_disk_info"] == "gauge"
    assert value(text, "zfs_exporter_collector_success", collector="disks") == 1


def test_info_labels():
    disks = info(scrape())
    assert disks["sdb"] == {"device": "sdb", "serial": "WD-WCC7K1AAAAAA", "model": "WDC_WD40EFRX-68N32N0",
                            "wwn": "0x50014ee2b0000010", "by_id": "ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA",
                            "rotational": "1", "pool": "tank", "vdev_guid": "11498310984210357301"}
    assert disks["sde"] == {"device": "sde", "serial": "", "model": "Flash_Disk", "wwn": "", "by_id": "",
                            "rotational": "1", "pool": "", "vdev_guid": ""}
    text = scrape()
    assert value(text, "zfs_disk_identity_source", source="udev") == 7
    assert value(text, "zfs_disk_identity_source", source="sysfs") == 0


def test_device_exclude_flag_brings_in_multipath():
    text = scrape("--disks.device-exclude", "^loop")
    assert info(text)["dm-0"]["pool"] == "backup"
    assert value(text, "zfs_disk_written_bytes_total", device="dm-0") == 720_000 * 512
    assert "dm-1" not in info(text)  # the partition map is counted in its multipath device


def test_sysfs_fallback_self_metric(tmp_path):
    text = scrape_text(*PATHS[:4], "--path.udev.data", str(tmp_path), "--collector.disable-defaults",
                       "--collector.disks")
    assert value(text, "zfs_disk_identity_source", source="sysfs") == 7
    assert value(text, "zfs_disk_identity_source", source="udev") == 0
    assert info(text)["sdd"]["serial"] == "ZA1B2C3D"


def collector_with_pools(vdevs):
    from zfsnas.wiring import build_parser
    args = build_parser().parse_args(PATHS)
    status = BackgroundRefresher("zpool_status", lambda: vdevs, 60)
    status.refresh_now()
    return make_collector(DisksCollector, args, zpool_status=status)


def test_cache_and_spare_membership_from_pools_collector():
    vdevs = [VdevStatus("tank", "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456-part1",
                        "9803362419451837265", "cache", "", "ONLINE", 0, 0, 0, True)]
    report = Report("disks")
    families = collector_with_pools(vdevs).collect(report)
    labels = {s[1][0]: s[1] for f in families if f.name == "zfs_disk_info" for s in f.samples}
    assert labels["nvme0n1"][6:] == ("tank", "9803362419451837265")
    assert labels["vda"][6:] == ("", "5589211234001945507")  # the spare is not in that status
    assert report.ok


def test_zpool_status_that_failed_or_is_absent_is_ignored():
    collector = collector_with_pools(None)  # read, but nothing in it
    assert collector.ctx.vdevs() == []

    def failing():
        raise SourceError("zpool status exited with status 1")

    collector.ctx.zpool_status = BackgroundRefresher("zpool_status", failing, 60)
    assert not collector.ctx.zpool_status.refresh_now() and collector.ctx.vdevs() == []
    collector.ctx.zpool_status = None  # the pools collector switched off
    assert collector.ctx.vdevs() == []
    collector.inventory.rescan()
    assert len(collector.identities()) == 7


def test_unreadable_diskstats_is_a_failure_not_a_crash(tmp_path):
    (tmp_path / "diskstats").mkdir()
    text = scrape_text("--path.procfs", str(tmp_path), *PATHS[2:], "--collector.disable-defaults", "--collector.disks")
    assert value(text, "zfs_exporter_collector_success", collector="disks") == 0
    assert len(info(text)) == 7


def test_no_diskstats_no_block_devices_is_not_a_failure(tmp_path):
    # FreeBSD, or a kstat-only tree: nothing to serve, nothing wrong
    text = scrape_text("--path.procfs", str(tmp_path), "--path.sysfs", str(tmp_path), "--collector.disable-defaults",
                       "--collector.disks")
    assert value(text, "zfs_exporter_collector_success", collector="disks") == 1
    assert value(text, "zfs_disk_identity_source", source="sysfs") == 0
    assert "zfs_disk_reads_total" not in text


def test_flags_parse():
    from zfsnas.wiring import build_parser
    args = build_parser().parse_args(["--no-disks.hotplug", "--disks.rescan-interval", "5"])
    assert args.disks_hotplug is False and args.disks_rescan_interval == 5.0
    assert isinstance(args, argparse.Namespace)


def info_served(collector):
    families = collector.collect(Report("disks"))
    return {s[1][0]: s[1] for f in families if f.name == "zfs_disk_info" for s in f.samples}


def test_identities_kept_between_scrapes_follow_a_hotplug_event_and_a_new_zpool_status():
    collector = collector_with_pools([])
    first = info_served(collector)
    assert "sdb" in first and first["nvme0n1"][6:] == ("", "9803362419451837265")
    collector.inventory.apply("remove", None, "sdb")  # pulled: its identity goes with the next scrape
    assert "sdb" not in info_served(collector)
    cache = VdevStatus("tank", "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456-part1",
                       "9803362419451837265", "cache", "", "ONLINE", 0, 0, 0, True)
    collector.ctx.zpool_status = BackgroundRefresher("zpool_status", lambda: [cache], 60)
    assert collector.ctx.zpool_status.refresh_now()
    assert info_served(collector)["nvme0n1"][6:] == ("tank", "9803362419451837265")


def test_a_hung_scan_is_killed_and_reported_and_the_devices_kept():
    import time

    collector = collector_with_pools([])
    assert collector.refresher.refresh_now() and len(info_served(collector)) == 7
    collector.forked.timeout = 0.5
    collector._scan_here = lambda context: time.sleep(60)  # the child runs this copy: a dead disk's sysfs
    started = time.monotonic()
    assert not collector.refresher.refresh_now()
    assert time.monotonic() - started < 10
    assert collector.refresher.state().error == \
        "scanning block devices took longer than 0.5s in its child process and was killed"
    report = Report("disks")
    families = collector.collect(report)
    assert report.errors == ["source block_devices: scanning block devices took longer than 0.5s in its child "
                             "process and was killed"]
    assert len([s for f in families if f.name == "zfs_disk_info" for s in f.samples]) == 7


# --- the counters as text: headers and label texts made once, numbers written per scrape ---------


def _tree_with(tmp_path, diskstats):
    shutil.copytree(TREE, tmp_path / "t", symlinks=True)
    (tmp_path / "t/proc/diskstats").write_text(diskstats)
    args = build_parser().parse_args(["--path.procfs", str(tmp_path / "t/proc"), "--path.sysfs", str(tmp_path / "t/sys"),
                                      "--path.udev.data", str(tmp_path / "t/udev/data")])
    collector = make_collector(DisksCollector, args)
    collector.refresher.refresh_now()
    return collector



def test_counter_text_is_the_rendering_of_its_samples_and_follows_each_read(tmp_path):
    original = (TREE / "proc/diskstats").read_text()
    collector = _tree_with(tmp_path, original)
    first = collect_kept(collector)
    assert counter_text(first)[:2] == ["zfs_disk_reads_total", "zfs_disk_writes_total"]
    assert render(first) == rendered_from_samples(first)
    info_before = [f for f in first if f.name == "zfs_disk_info"]
    # sdb reads 40 s more and writes 1 sector more: the next scrape's text says so
    line = next(line for line in original.splitlines() if line.split()[2] == "sdb")
    fields = line.split()
    fields[6] = str(int(fields[6]) + 40_000)
    fields[9] = str(int(fields[9]) + 1)
    (tmp_path / "t/proc/diskstats").write_text(original.replace(line, " ".join(fields)))
    later = collect_kept(collector)
    text = render(later)
    assert text == rendered_from_samples(later)
    assert value(text, "zfs_disk_read_time_seconds_total", device="sdb") == 80.0
    assert value(text, "zfs_disk_written_bytes_total", device="sdb") == 400_016_001 * 512
    assert [f for f in later if f.name == "zfs_disk_info"] == info_before  # identities unchanged: the same text


def test_old_kernel_lines_have_no_discard_or_flush_families(tmp_path):
    # 14 fields (kernel < 4.18): the four discard and two flush counters are left out, not zeros
    old = "\n".join(" ".join(line.split()[:14]) for line in (TREE / "proc/diskstats").read_text().splitlines()) + "\n"
    families = collect_kept(_tree_with(tmp_path, old))
    names = {f.name for f in families}
    assert "zfs_disk_reads_total" in names and not names & {"zfs_disk_discards_total", "zfs_disk_flushes_total"}
    assert {n for n in names if n.startswith("zfs_disk_") and n.endswith("_total")} <= set(counter_text(families))
    assert render(families) == rendered_from_samples(families)


def test_what_counter_text_cannot_say_goes_through_the_renderer(tmp_path):
    # one line of another length (14 fields among 20): plain samples, the same numbers
    lines = (TREE / "proc/diskstats").read_text().splitlines()
    sdb = next(i for i, line in enumerate(lines) if line.split()[2] == "sdb")
    lines[sdb] = " ".join(lines[sdb].split()[:14])
    families = collect_kept(_tree_with(tmp_path, "\n".join(lines) + "\n"))
    assert not counter_text(families)
    text = render(families)
    assert value(text, "zfs_disk_reads_total", device="sdb") == 12016
    assert value(text, "zfs_disk_flushes_total", device="sda") == 9000
