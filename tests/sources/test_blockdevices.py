"""Block device records and identities: udev database, sysfs fallback, pyudev-shaped devices, hotplug."""

from pathlib import Path

from tests.conftest import FIXTURES
from zfsnas.sources.blockdevices import (
    BlockDevice,
    DeviceInventory,
    choose_by_id,
    from_pyudev,
    identify,
    normalise_wwid,
    parse_udev_db,
    scan_sysfs,
)
from zfsnas.sources.model import VdevStatus

TREE = FIXTURES / "linux-disks"
SYS, UDEV = TREE / "sys", TREE / "udev" / "data"
BLOCK = SYS / "block"


def vdev(pool, name, guid, role="data", parent="raidz2-0", leaf=True):
    return VdevStatus(pool, name, guid, role, parent, "ONLINE", 0, 0, 0, leaf)


def identities(udev=UDEV, vdevs=()):
    return {i.device: i for i in identify(scan_sysfs(SYS, udev), vdevs)}


def test_parse_udev_db():
    props, links = parse_udev_db("S:disk/by-id/ata-X\nS:disk/by-id/wwn-0x5\nI:123\nE:ID_SERIAL=X_Y\nE:EMPTY=\n"
                                 "E:ID_FS_LABEL=a=b\nG:systemd\nbogus\n")
    assert links == ("disk/by-id/ata-X", "disk/by-id/wwn-0x5")
    assert props == {"ID_SERIAL": "X_Y", "EMPTY": "", "ID_FS_LABEL": "a=b", "USEC_INITIALIZED": "123"}


def test_scan_sysfs_disks_partitions_and_multipath_partition():
    devices = {d.name: d for d in scan_sysfs(SYS, UDEV)}
    assert devices["sdb"].devtype == "disk" and devices["sdb"].parent == ""
    assert (devices["sdb1"].devtype, devices["sdb1"].parent, devices["sdb1"].major, devices["sdb1"].minor) == \
        ("partition", "sdb", 8, 17)
    assert devices["nvme0n1p1"].parent == "nvme0n1" and devices["nvme0n1p1"].minor == 1
    # dm-1 is kpartx's partition map on the multipath device dm-0
    assert (devices["dm-1"].devtype, devices["dm-1"].parent) == ("partition", "dm-0")
    assert devices["sdb"].from_udev and not devices["loop0"].from_udev
    assert devices["sdb1"].rotational == "1"  # a partition reports its disk's queue


def test_identities_from_udev():
    ids = identities()
    sata = ids["sdb"]
    assert (sata.serial, sata.model, sata.wwn) == ("WD-WCC7K1AAAAAA", "WDC_WD40EFRX-68N32N0", "0x50014ee2b0000010")
    assert sata.by_id == "ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA"
    assert (sata.pool, sata.vdev_guid, sata.rotational, sata.source) == ("tank", "11498310984210357301", "1", "udev")
    sas = ids["sdd"]
    assert (sas.serial, sas.model, sas.wwn, sas.pool) == ("ZA1B2C3D", "ST4000NM0025", "0x5000c500a1b2c3d4", "tank")
    assert sas.by_id == "scsi-35000c500a1b2c3d4"  # the transport link before wwn-
    nvme = ids["nvme0n1"]
    assert (nvme.serial, nvme.wwn, nvme.by_id) == ("S4EWNX0N123456", "eui.0025385b91b2c3d4",
                                                   "nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456")
    # a cache device: zfs_member with a vdev guid but no pool label, and no zpool status to ask
    assert (nvme.pool, nvme.vdev_guid, nvme.rotational) == ("", "9803362419451837265", "0")
    virtio = ids["vda"]
    assert (virtio.serial, virtio.model, virtio.by_id) == ("vdisk-spare01", "", "virtio-vdisk-spare01")
    no_serial = ids["sde"]
    assert (no_serial.serial, no_serial.wwn, no_serial.by_id, no_serial.model) == ("", "", "", "Flash_Disk")
    assert (ids["dm-0"].pool, ids["dm-0"].by_id) == ("backup", "dm-name-mpatha")
    system = ids["sda"]
    assert (system.pool, system.vdev_guid, system.serial) == ("", "", "S3Z1NB0K123456A")
    assert "sdb1" not in ids and "dm-1" not in ids


def test_cache_and_spare_pools_from_zpool_status_guids():
    vdevs = [vdev("tank", "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456-part1",
                  "9803362419451837265", "cache", ""),
             vdev("tank", "/dev/disk/by-id/virtio-vdisk-spare01-part1", "5589211234001945507", "spare", "")]
    ids = identities(vdevs=vdevs)
    assert (ids["nvme0n1"].pool, ids["vda"].pool) == ("tank", "tank")


def test_pool_uses_a_wwn_path_then_by_id_follows_it():
    vdevs = [vdev("tank", "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1", "16120387443300851052")]
    assert identities(vdevs=vdevs)["sdd"].by_id == "wwn-0x5000c500a1b2c3d4"


def test_sysfs_fallback_without_udev_database(tmp_path):
    ids = identities(udev=tmp_path / "no-udev")
    assert {i.source for i in ids.values()} == {"sysfs"}
    assert (ids["sda"].serial, ids["sda"].model) == ("S3Z1NB0K123456A", "Samsung SSD 860")
    assert (ids["sda"].wwn, ids["sda"].by_id, ids["sda"].pool) == (
        "t10.ATA     Samsung SSD 860 EVO 500GB               S3Z1NB0K123456A", "", "")
    assert (ids["sdd"].serial, ids["sdd"].wwn) == ("ZA1B2C3D", "0x5000c500a1b2c3d4")
    assert (ids["nvme0n1"].serial, ids["nvme0n1"].model, ids["nvme0n1"].wwn) == (
        "S4EWNX0N123456", "Samsung SSD 970 EVO Plus 1TB", "eui.0025385b91b2c3d4")
    assert ids["vda"].serial == "vdisk-spare01"
    assert ids["sde"].serial == "" and ids["sde"].rotational == "1"


def test_sysfs_fallback_matches_zpool_status_device_paths(tmp_path, monkeypatch):
    # without udev, a pool created on /dev/sdb1 is found by resolving the path zpool prints
    import zfsnas.sources.blockdevices as bd
    monkeypatch.setattr(bd, "_resolve", lambda path: Path(path).name)
    ids = identities(udev=tmp_path / "none", vdevs=[vdev("tank", "/dev/sdc1", "2280133445316251466")])
    assert (ids["sdc"].pool, ids["sdc"].vdev_guid) == ("tank", "2280133445316251466")
    assert ids["sdb"].pool == ""


def test_choose_by_id_and_wwid():
    links = ["disk/by-id/wwn-0x1", "disk/by-id/scsi-3abc", "disk/by-id/scsi-SATA_X_Y", "disk/by-id/ata-X_Y",
             "disk/by-id/ata-X_Y-part1", "disk/by-path/pci-1"]
    assert choose_by_id(links) == "ata-X_Y"
    assert choose_by_id(links[:3]) == "scsi-SATA_X_Y"  # a SATA disk behind a SAS HBA
    assert choose_by_id(links[:2]) == "scsi-3abc"  # only WWN-based names left: the scsi- one before wwn-
    qemu = ["disk/by-id/scsi-0QEMU_QEMU_HARDDISK_SER1", "disk/by-id/scsi-35000c5001", "disk/by-id/wwn-0x5000c5001"]
    assert choose_by_id(qemu) == "scsi-0QEMU_QEMU_HARDDISK_SER1"
    assert choose_by_id(links, ["wwn-0x1"]) == "wwn-0x1"
    assert choose_by_id(["disk/by-path/x"]) == ""
    assert normalise_wwid("naa.5000C500A1B2C3D4") == "0x5000c500a1b2c3d4"
    assert normalise_wwid("eui.0025") == "eui.0025"


# --- devices in the shape pyudev gives them -------------------------------------------------

class FakeDevice:
    """The pyudev.Device attributes we use, as pyudev fills them for a block device."""

    def __init__(self, sys_path, devtype, properties, links=(), parent=None, action=None):
        self.sys_path = str(sys_path)
        self.sys_name = Path(sys_path).name
        self.device_type = devtype
        self.properties = {"DEVTYPE": devtype, "SUBSYSTEM": "block", **properties}
        self.device_links = [f"/dev/{link}" for link in links]
        self._parent = parent
        self.action = action

    def find_parent(self, subsystem, devtype=None):
        return self._parent


def test_from_pyudev_shapes():
    disk = FakeDevice(BLOCK / "sdb", "disk", {"ID_SERIAL_SHORT": "WD-WCC7K1AAAAAA", "USEC_INITIALIZED": "5"},
                      ["disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA", "disk/by-id/wwn-0x50014ee2b0000010"])
    part = FakeDevice(BLOCK / "sdb" / "sdb1", "partition",
                      {"ID_FS_TYPE": "zfs_member", "ID_FS_LABEL": "tank", "ID_FS_UUID_SUB": "42"}, parent=disk)
    records = [from_pyudev(disk, UDEV), from_pyudev(part, UDEV)]
    assert records[0].links[0] == "disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA"
    assert (records[1].parent, records[1].major, records[1].minor) == ("sdb", 8, 17)
    (ident,) = identify(records)
    assert (ident.device, ident.serial, ident.pool, ident.vdev_guid, ident.source) == ("sdb", "WD-WCC7K1AAAAAA", "tank",
                                                                                      "42", "udev")
    # pyudev without a udev database: only the uevent keys; the db directory given is read instead
    bare = FakeDevice(BLOCK / "sdd", "disk", {"MAJOR": "8", "MINOR": "48", "DEVNAME": "/dev/sdd"})
    assert identify([from_pyudev(bare, UDEV)])[0].serial == "ZA1B2C3D"
    nodb = identify([from_pyudev(bare, Path("/nonexistent"))])[0]
    assert (nodb.serial, nodb.source, nodb.model) == ("ZA1B2C3D", "sysfs", "ST4000NM0025")


def test_inventory_hotplug_events():
    scanned = scan_sysfs(SYS, UDEV)
    inventory = DeviceInventory(lambda: scanned)
    assert inventory.rescan() == len(scanned)
    names = lambda: {d.name for d in inventory.devices()}  # noqa: E731
    assert {"sdb", "sdb1", "sdb9"} <= names()
    disk = next(d for d in scanned if d.name == "sdb")
    part = next(d for d in scanned if d.name == "sdb1")
    inventory.handle(FakeDevice(BLOCK / "sdb", "disk", {}, action="remove"))
    assert not {"sdb", "sdb1", "sdb9"} & names()  # its partitions went with it
    inventory.apply("add", disk)
    inventory.apply("add", part)
    assert {"sdb", "sdb1"} <= names()
    # a replacement disk under the same kernel name: new identity, same device
    inventory.handle(FakeDevice(BLOCK / "sdc", "disk", {}, action="change"))
    assert {d.name: d for d in inventory.devices()}["sdc"].serial == "WD-WCC7K2BBBBBB"
    inventory.handle(FakeDevice(BLOCK / "sdc", "scsi_device", {}, action="remove"))  # not a block device event
    assert "sdc" in names()


def test_event_during_a_rescan_is_not_lost():
    scanned = scan_sysfs(SYS, UDEV)
    inventory = DeviceInventory(lambda: scanned)
    inventory.rescan()

    def slow_scan():
        inventory.apply("remove", None, "sdc")  # the disk is pulled while the scan reads sysfs
        return scanned
    inventory._scan = slow_scan
    inventory.rescan()
    assert "sdc" not in {d.name for d in inventory.devices()}
    assert inventory._during_scan is None


def test_from_pyudev_nvme_and_multipath_shapes():
    nvme = FakeDevice(BLOCK / "nvme0n1", "disk", {"ID_SERIAL_SHORT": "S4EWNX0N123456", "ID_WWN": "eui.0025385b91b2c3d4",
                                                 "USEC_INITIALIZED": "9"},
                      ["disk/by-id/nvme-eui.0025385b91b2c3d4", "disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456"])
    nvme_part = FakeDevice(BLOCK / "nvme0n1" / "nvme0n1p1", "partition",
                           {"ID_FS_TYPE": "zfs_member", "ID_FS_UUID_SUB": "9803362419451837265", "USEC_INITIALIZED": "9"},
                           parent=nvme)
    mpath = FakeDevice(BLOCK / "dm-0", "disk", {"DM_NAME": "mpatha", "USEC_INITIALIZED": "9"},
                       ["disk/by-id/dm-name-mpatha", "mapper/mpatha"])
    mpath_part = FakeDevice(BLOCK / "dm-1", "disk", {"DM_NAME": "mpatha1", "ID_FS_TYPE": "zfs_member",
                                                     "ID_FS_LABEL": "backup", "ID_FS_UUID_SUB": "7", "USEC_INITIALIZED": "9"})
    records = [from_pyudev(d) for d in (nvme, nvme_part, mpath, mpath_part)]
    assert (records[1].devtype, records[1].parent, records[1].minor) == ("partition", "nvme0n1", 1)
    assert (records[3].devtype, records[3].parent) == ("partition", "dm-0")
    ids = {i.device: i for i in identify(records, [vdev("tank", "x", "9803362419451837265", "cache", "")])}
    assert set(ids) == {"nvme0n1", "dm-0"}
    assert (ids["nvme0n1"].pool, ids["nvme0n1"].by_id, ids["nvme0n1"].rotational) == (
        "tank", "nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0N123456", "0")
    assert (ids["dm-0"].pool, ids["dm-0"].vdev_guid, ids["dm-0"].by_id) == ("backup", "7", "dm-name-mpatha")


def test_partition_not_reread_since_zpool_create_found_by_its_by_id_link():
    # udev knows the disk, but its partition shows no ZFS label until `udevadm trigger`
    disk = BlockDevice("sdx", "disk", "", 8, 96, {"ID_SERIAL_SHORT": "X1", "USEC_INITIALIZED": "1"},
                       ("disk/by-id/wwn-0x50014ee", "disk/by-id/ata-WDC_X1"))
    part = BlockDevice("sdx1", "partition", "sdx", 8, 97, {"USEC_INITIALIZED": "1"},
                       ("disk/by-id/ata-WDC_X1-part1", "disk/by-id/wwn-0x50014ee-part1"))
    (ident,) = identify([disk, part], [vdev("tank", "/dev/disk/by-id/wwn-0x50014ee-part1", "77")])
    assert (ident.pool, ident.vdev_guid, ident.by_id) == ("tank", "77", "wwn-0x50014ee")
    (ident,) = identify([disk, part], [vdev("tank", "/dev/disk/by-id/ata-WDC_X2-part1", "78")])
    assert (ident.pool, ident.vdev_guid, ident.by_id) == ("", "", "ata-WDC_X1")


def test_sas_serial_is_the_unit_serial_not_the_wwn():
    """udev on a SAS disk (seen in the e2e guest): ID_SERIAL_SHORT is the NAA WWN, ID_SCSI_SERIAL the label's serial."""
    sas = FakeDevice(BLOCK / "sdb", "disk", {"ID_SERIAL": "35000c500e2e10001", "ID_SERIAL_SHORT": "5000c500e2e10001",
                                             "ID_SCSI_SERIAL": "ZNC0001", "ID_WWN": "0x5000c500e2e10001",
                                             "USEC_INITIALIZED": "5"},
                     ["disk/by-id/scsi-35000c500e2e10001", "disk/by-id/wwn-0x5000c500e2e10001"])
    (ident,) = identify([from_pyudev(sas, UDEV)])
    assert (ident.serial, ident.wwn) == ("ZNC0001", "0x5000c500e2e10001")
