"""Collector `pools` on the recorded OpenZFS 2.1 and 2.3 outputs (via the stand-in): space, health, vdevs and
scans; health within a scrape of a change is tests/collectors/test_pools_health.py."""

import time

import pytest

from tests.collectors.test_datasets import PART, exporter_for, labelsets, scrape
from tests.conftest import ZFS_COMMAND_VERSIONS, types, value, zfs_commands
from zfsnas.collectors.base import Report


@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_pool_space_and_health(version):
    text = scrape(version, collectors=("pools",))
    assert value(text, "zfs_pool_size_bytes", pool="tank") == 47971736518656
    assert value(text, "zfs_pool_allocated_bytes", pool="tank") == 11874725347328
    assert value(text, "zfs_pool_free_bytes", pool="tank") == 36097011171328
    assert value(text, "zfs_pool_fragmentation_ratio", pool="tank") == 0.17
    assert value(text, "zfs_pool_capacity_ratio", pool="tank") == 0.24
    assert value(text, "zfs_pool_dedup_ratio", pool="tank") == 1.37
    assert {"pool": "scratch"} not in labelsets(text, "zfs_pool_fragmentation_ratio")  # `-`
    health = {d["state"]: value(text, "zfs_pool_health", **d) for d in labelsets(text, "zfs_pool_health")
              if d["pool"] == "tank"}
    assert health == {"ONLINE": 0, "DEGRADED": 1, "FAULTED": 0, "OFFLINE": 0, "UNAVAIL": 0, "REMOVED": 0,
                      "SUSPENDED": 0}
    assert value(text, "zfs_pool_data_errors", pool="tank") == 3
    assert value(text, "zfs_pool_data_errors", pool="backup") == 0
    assert set(types(text).values()) == {"gauge"}



@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_vdevs(version):
    text = scrape(version, collectors=("pools",))
    states = {(d["vdev"], d["role"]): d for d in labelsets(text, "zfs_vdev_state") if d["pool"] == "tank"}
    assert len(states) == 23
    assert states[(PART.format("A2"), "data")] == {"pool": "tank", "vdev": PART.format("A2"),
                                                   "vdev_guid": "15913282236170337251", "role": "data",
                                                   "parent": "spare-1", "state": "FAULTED"}
    nvme = "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_500GB_S5H7NS0N100002-part1"
    assert (states[(nvme, "special")]["state"], states[(nvme, "special")]["parent"]) == ("REMOVED", "mirror-1")
    assert states[("/dev/disk/by-id/ata-INTEL_SSDSC2BB120G7_BTDV7261000B-part1", "log")]["state"] == "OFFLINE"
    assert states[("mirror-3", "dedup")]["vdev_guid"] == "3344556677889900112"
    assert states[("12897061293381947325", "data")]["state"] == "UNAVAIL"
    assert states[(PART.format("S1"), "spare")]["state"] == "INUSE"
    assert states[(PART.format("S1"), "data")]["parent"] == "spare-1"
    assert states[("mirror-1", "special")]["parent"] == "tank"
    assert states[("mirror-2", "log")]["vdev_guid"] == "7788990011223344556"
    assert sorted(d["vdev"] for d in states.values() if d["role"] == "cache") == [
        "/dev/disk/by-id/ata-Samsung_SSD_860_EVO_500GB_S4EVNF0M200001-part1",
        "/dev/disk/by-id/ata-Samsung_SSD_860_EVO_500GB_S4EVNF0M200002-part1"]
    faulted = {"pool": "tank", "vdev": PART.format("A2"), "vdev_guid": "15913282236170337251", "role": "data"}
    assert value(text, "zfs_vdev_errors", **faulted, type="read") == 3
    assert value(text, "zfs_vdev_errors", **faulted, type="write") == 127
    assert value(text, "zfs_vdev_errors", **faulted, type="checksum") == 0
    assert value(text, "zfs_vdev_errors", pool="tank", vdev=PART.format("A3"), vdev_guid="17009872342186931234",
                 role="data", type="checksum") == 2
    assert not [d for d in labelsets(text, "zfs_vdev_errors") if d["role"] == "spare"]  # no counters printed



def local(*fields):
    return time.mktime((*fields, 0, 0, -1))



@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_scans(version):
    text = scrape(version, collectors=("pools",))
    scrub = {"pool": "backup", "function": "scrub"}
    assert value(text, "zfs_pool_scan_info", **scrub, state="finished") == 1
    assert value(text, "zfs_pool_scan_end_timestamp_seconds", **scrub) == local(2026, 11, 22, 10, 0, 0)
    assert value(text, "zfs_pool_scan_start_timestamp_seconds", **scrub) == local(2026, 11, 22, 10, 0, 0) - 93784
    assert value(text, "zfs_pool_scan_repaired_bytes", **scrub) == 1572864
    assert value(text, "zfs_pool_scan_errors", **scrub) == 2
    resilver = {"pool": "tank", "function": "resilver"}
    assert value(text, "zfs_pool_scan_info", **resilver, state="scanning") == 1
    assert value(text, "zfs_pool_scan_start_timestamp_seconds", **resilver) == local(2026, 11, 23, 9, 12, 41)
    assert value(text, "zfs_pool_scan_examined_bytes", **resilver) == round(1.91 * 2**40)
    assert value(text, "zfs_pool_scan_issued_bytes", **resilver) == 402 * 2**30
    assert value(text, "zfs_pool_scan_total_bytes", **resilver) == round(10.8 * 2**40)
    assert value(text, "zfs_pool_scan_repaired_bytes", **resilver) == round(66.9 * 2**30)
    assert {"pool": "tank", "function": "resilver"} not in labelsets(text, "zfs_pool_scan_end_timestamp_seconds")
    running = {"pool": "scratch", "function": "scrub"}
    assert value(text, "zfs_pool_scan_info", **running, state="scanning") == 1
    progress = value(text, "zfs_pool_scan_issued_bytes", **running) / value(text, "zfs_pool_scan_total_bytes", **running)
    assert progress == pytest.approx(0.2462, abs=0.001)



def test_frozen_pool_families_follow_a_changed_zpool_status_after_the_next_refresh(tmp_path):
    from tests.conftest import copy_commands
    from zfsnas.exposition import _Frozen

    recordings = copy_commands(tmp_path / "zfs")
    exporter = exporter_for("--collector.pools", *zfs_commands(recordings))
    pools = exporter.collectors[0]
    disk = "/dev/disk/by-id/ata-ST4000VN008-2DR166_ZL2B0002-part1"
    def read_errors(text):
        [labels] = [labels for labels in labelsets(text, "zfs_vdev_errors") if labels["vdev"] == disk
                    and labels["type"] == "read"]
        return value(text, "zfs_vdev_errors", **labels)

    def state(text):
        return [labels["state"] for labels in labelsets(text, "zfs_vdev_state") if labels["vdev"] == disk]

    text = exporter.render()
    assert read_errors(text) == 1 and state(text) == ["ONLINE"]
    assert all(isinstance(f, _Frozen) and f.text for f in pools.collect(
        Report("pools")))
    status = recordings / "zpool-status-P.txt"
    status.write_text(status.read_text().replace(f"{disk}  ONLINE       1     0     0",
                                                 f"{disk}  FAULTED     12     0     0"))
    assert read_errors(exporter.render()) == 1  # nothing changes before the refresh
    assert pools.status.refresh_now()
    text = exporter.render()
    assert read_errors(text) == 12 and state(text) == ["FAULTED"]
