"""Identities from what a real guest recorded (tests/e2e, OpenZFS 2.3.2, Debian 12 udev 252):
`udevadm info --export-db` of its disks and the `zpool status -P` / `-gPp` the pools collector reads.

RAID-Z2 `tank` of 4 SATA + 4 SAS disks with a virtio cache and a SATA spare, and `fast`, four
mirrors of a SAS and a virtio disk.
"""

from pathlib import Path

from tests.conftest import FIXTURES
from zfsnas.sources.blockdevices import BlockDevice, identify
from zfsnas.sources.zpool import merge_guids, parse_status

LIVE = FIXTURES / "linux-disks" / "live-2.3.2"


def devices_from_export_db(text: str) -> list[BlockDevice]:
    """BlockDevice records as pyudev builds them from the same database (sysfs attributes aside)."""
    out = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.splitlines():
            key, _, val = line.partition(": ")
            fields.setdefault(key, []).append(val)
        props = dict(v.split("=", 1) for v in fields.get("E", []))
        path = Path(fields["P"][0])
        devtype = props["DEVTYPE"]
        out.append(BlockDevice(fields["N"][0], devtype, path.parent.name if devtype == "partition" else "",
                               int(props["MAJOR"]), int(props["MINOR"]), props, tuple(fields.get("S", ()))))
    return out


def vdevs():
    by_path = parse_status((LIVE / "zpool-status-P.txt").read_text())
    by_guid = parse_status((LIVE / "zpool-status-gPp.txt").read_text())
    return [v for pool in merge_guids(by_path, by_guid) for v in pool.vdevs]


def test_every_disk_of_the_guest():
    devices = devices_from_export_db((LIVE / "udevadm-export-db.txt").read_text())
    ids = {i.device: i for i in identify(devices, vdevs())}
    assert len(ids) == 19 and {i.source for i in ids.values()} == {"udev"}
    sata, sas, cache, spare, mirror = ids["sdb"], ids["sdg"], ids["vdb"], ids["sde"], ids["vdc"]
    assert (sata.serial, sata.by_id, sata.pool, sata.wwn) == ("ZNS0001", "ata-ZFSNAS_SATA_HDD_ZNS0001", "tank",
                                                             "0x5000c500e2e00001")
    assert (sas.serial, sas.by_id, sas.pool, sas.model) == ("ZNC0001", "scsi-35000c500e2e10001", "tank", "SAS_HDD")
    assert (cache.serial, cache.by_id, cache.pool) == ("ZNV0001", "virtio-ZNV0001", "tank")
    assert (spare.serial, spare.pool) == ("ZNS0005", "tank")
    assert (mirror.serial, mirror.pool) == ("ZNV0002", "fast")
    assert ids["vda"].pool == "" and ids["vda"].serial == ""  # the guest's root disk
    guids = {v.guid for v in vdevs()}
    assert all(i.vdev_guid in guids for i in ids.values() if i.pool)
    assert sorted(i.pool for i in ids.values()).count("tank") == 10  # 8 data, cache, spare


def test_cache_and_spare_without_zpool_status():
    devices = devices_from_export_db((LIVE / "udevadm-export-db.txt").read_text())
    ids = {i.device: i for i in identify(devices)}
    assert (ids["vdb"].pool, ids["sde"].pool) == ("", "")  # no pool label on L2ARC and spare partitions
    assert ids["vdb"].vdev_guid and ids["sde"].vdev_guid
    assert ids["sdb"].pool == "tank"
