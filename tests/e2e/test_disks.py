"""Disks collector against `udevadm info` and `zpool status -gP` in the guest: identity and pool membership."""

from __future__ import annotations

import pytest

from .conftest import require_collector, vdev_guids

pytestmark = pytest.mark.e2e


def device_of(cap, serial: str) -> str:
    for dev, info in cap.udev.items():
        props = info["props"]
        if props.get("DEVTYPE") == "disk" and serial in (props.get("ID_SERIAL_SHORT"), props.get("ID_SCSI_SERIAL"),
                                                          props.get("ID_SERIAL")):
            return dev
    raise AssertionError(f"udevadm info shows no disk with serial {serial}")


def test_udev_knows_every_disk(steady, config):
    """Precondition of the disk comparisons: the guest's udev sees the identities QEMU was given."""
    for disk in config["disks"]:
        dev = device_of(steady, disk["serial"])
        props = steady.udev[dev]["props"]
        if "wwn" in disk:
            assert props.get("ID_WWN", "").startswith(disk["wwn"]), f"{dev}: ID_WWN {props.get('ID_WWN')} != {disk['wwn']}"
        assert any(link.startswith("/dev/disk/by-id/") for link in steady.udev[dev]["links"]), f"{dev}: no by-id link"


def test_disk_info_identity_and_pool(moment, config):
    for name in ("steady", "degraded"):
        cap = moment(name)
        require_collector(cap, "disks")
        guids = vdev_guids(cap.command("zpool_status_gP.txt"), cap.command("zpool_status_P.txt"))
        for disk in config["disks"]:
            dev = device_of(cap, disk["serial"])
            udev = cap.udev[dev]
            series = cap.series("zfs_disk_info", device=dev)
            assert len(series) == 1, f"[{name}] zfs_disk_info{{device={dev}}}: expected one series, served {series}"
            labels = series[0][0]
            props = udev["props"]
            serials = {props.get(k) for k in ("ID_SERIAL_SHORT", "ID_SCSI_SERIAL", "ID_SERIAL")} - {None}
            assert labels.get("serial") in serials, \
                f"[{name}] zfs_disk_info{{device={dev}}} serial: expected one of {sorted(serials)} (udev), " \
                f"served {labels.get('serial')!r}"
            assert disk["serial"] in labels["serial"] or labels["serial"] == props.get("ID_SERIAL")
            by_id = [link for link in udev["links"] if link.startswith("/dev/disk/by-id/")]
            served_by_id = labels.get("by_id", "")
            assert served_by_id in by_id or "/dev/disk/by-id/" + served_by_id in by_id, \
                f"[{name}] zfs_disk_info{{device={dev}}} by_id: expected one of {by_id}, served {served_by_id!r}"
            assert labels.get("pool") == disk["pool"], \
                f"[{name}] zfs_disk_info{{device={dev}}} pool: expected {disk['pool']!r} ({disk['role']} of {disk['pool']}), " \
                f"served {labels.get('pool')!r}"
            # the vdev guid of the disk's ZFS partition, as zpool status -g prints it for the -P path
            want_guids = {g for path, g in guids.items() if path.startswith(f"/dev/{dev}") or any(
                path.startswith(link) for link in udev["links"])}
            part_guids = {info["props"].get("ID_FS_UUID_SUB") for d, info in cap.udev.items()
                          if d.startswith(dev) and d != dev and info["props"].get("ID_FS_TYPE") == "zfs_member"}
            assert want_guids, f"[{name}] {dev} ({disk['serial']}) not found in zpool status -P: {sorted(guids)}"
            assert labels.get("vdev_guid") in want_guids, (
                f"[{name}] zfs_disk_info{{device={dev}}} vdev_guid: expected {sorted(want_guids)} "
                f"(zpool status -g; udev ID_FS_UUID_SUB {sorted(part_guids - {None})}), served {labels.get('vdev_guid')!r}")


def test_partition_labels_match_zpool_status(steady, config):
    """udev's ZFS labels on data partitions agree with zpool status (what the disks collector relies on)."""
    guids = vdev_guids(steady.command("zpool_status_gP.txt"), steady.command("zpool_status_P.txt"))
    for disk in config["disks"]:
        if disk["role"] != "data":
            continue
        dev = device_of(steady, disk["serial"])
        parts = [info["props"] for d, info in steady.udev.items() if d.startswith(dev) and d != dev
                 and info["props"].get("ID_FS_TYPE") == "zfs_member"]
        assert len(parts) == 1, f"{dev}: zfs_member partitions {parts}"
        assert parts[0].get("ID_FS_LABEL") == disk["pool"]
        assert parts[0].get("ID_FS_UUID_SUB") in guids.values()
