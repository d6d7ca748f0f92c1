"""Block devices and who they are: kernel name, serial, model, WWN, by-id link, ZFS pool membership.

Owns the reading of udev's view of block devices (through pyudev on a live system, or the udev
database files `<udev data>/b<major>:<minor>` directly, for fixture trees and as a second path)
and of the sysfs attributes used when udev has no database (containers, minimal hosts):
`device/serial`, `serial` (virtio), `device/vpd_pg80`, `device/model`, `device/wwid`, `wwid`,
`queue/rotational`. `identify` turns the device list (plus `zpool status` vdevs when known)
into one `DiskIdentity` per whole disk. Nothing here knows about metrics.

Decisions (see docs/disks.md):
- `serial` is what is printed on the disk's label: ID_SCSI_SERIAL (the unit serial of SCSI/SAS
  disks, whose ID_SERIAL_SHORT is their WWN), else ID_SERIAL_SHORT (ATA, NVMe), else ID_SERIAL
  (virtio has only this), else sysfs.
- `by_id` is the name of one `/dev/disk/by-id/` link without that prefix: the one a pool uses
  when `zpool status -P` names a by-id path of this disk, else the first of the transport links
  (ata-, nvme-, scsi-, virtio-, usb-, mmc-; names built from a WWN/EUI such as `scsi-3...`,
  `nvme-eui.` come after those built from vendor, model and serial), then `wwn-`, then any other.
- A device-mapper partition map of a multipath device (dm uuid `partN-mpath-...`) is treated
  as a partition of its multipath device.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from .model import SourceError, read_bounded, read_bounded_bytes

# Paths are strings joined as strings (`StrPath` only where a caller may hand a path object): a scan
# of 4,000 disks joins some 100,000 of them, and pathlib would be a few milliseconds of every start.
StrPath = str | os.PathLike[str]

log = logging.getLogger("zfsnas")

BY_ID = "disk/by-id/"
_LINK_RANK = ("ata-", "nvme-", "scsi-", "virtio-", "usb-", "mmc-", "ieee1394-", "wwn-")
# Names made of a WWN/EUI rather than vendor, model and serial (scsi_id designator types 2, 3, 8).
_ID_LIKE = re.compile(r"^(scsi-[238]|nvme-eui\.|nvme-nvme\.)")


_NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})


# NamedTuples, not frozen dataclasses: this module comes with the disks collector at start-up, and
# a frozen dataclass costs about half a millisecond to make, a NamedTuple a tenth of that.
class BlockDevice(NamedTuple):
    """One entry of the block subsystem, in the shape both pyudev and the udev database give."""

    name: str                     # kernel name: sdb, nvme0n1, sdb1, dm-2
    devtype: str                  # "disk" or "partition"
    parent: str                   # the whole disk of a partition, "" for a disk
    major: int
    minor: int
    properties: Mapping[str, str] = _NO_PROPERTIES  # udev properties (E: lines)
    links: tuple[str, ...] = ()   # udev symlinks relative to /dev: "disk/by-id/ata-..."
    serial: str = ""              # sysfs attributes, "" when absent
    model: str = ""
    wwid: str = ""
    rotational: str = ""

    @property
    def from_udev(self) -> bool:
        """True when udev has initialised this device (its database entry was found)."""
        return "USEC_INITIALIZED" in self.properties or any(k.startswith("ID_") for k in self.properties)


class DiskIdentity(NamedTuple):
    device: str
    serial: str
    model: str
    wwn: str
    by_id: str
    rotational: str
    pool: str
    vdev_guid: str
    source: str                   # "udev" or "sysfs"


# --- the udev database ----------------------------------------------------------------------

def parse_udev_db(text: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """Properties (`E:KEY=value`, plus `I:` as USEC_INITIALIZED) and symlinks (`S:`) of one entry."""
    properties: dict[str, str] = {}
    links: list[str] = []
    for line in text.splitlines():
        kind, _, rest = line.partition(":")
        if kind == "E" and "=" in rest:
            key, _, val = rest.partition("=")
            properties[key] = val
        elif kind == "S" and rest:
            links.append(rest)
        elif kind == "I" and rest:
            properties.setdefault("USEC_INITIALIZED", rest)
    return properties, tuple(links)


def read_udev_db(udev_data: StrPath, major: int, minor: int) -> tuple[dict[str, str], tuple[str, ...]] | None:
    try:
        text = read_bounded(f"{os.fspath(udev_data)}/b{major}:{minor}")
    except (OSError, SourceError):
        return None
    return parse_udev_db(text)


# --- sysfs ----------------------------------------------------------------------------------

def _attr(path: str) -> str:
    try:
        return read_bounded(path, 65536).strip().strip("\x00").strip()
    except (OSError, SourceError):
        return ""


def _vpd_serial(path: str) -> str:
    """The unit serial number page (0x80): a 4-byte header, then the serial in ASCII."""
    try:
        data = read_bounded_bytes(path, 65536)
    except (OSError, SourceError):
        return ""
    return data[4:].decode("ascii", "replace").strip("\x00 \n") if len(data) > 4 else ""


def sysfs_identity(sys_path: StrPath) -> dict[str, str]:
    """serial, model, wwid, rotational from a block device's sysfs directory ("" when absent)."""
    at = os.fspath(sys_path)
    return {
        "serial": _attr(f"{at}/device/serial") or _attr(f"{at}/serial") or _vpd_serial(f"{at}/device/vpd_pg80"),
        "model": _attr(f"{at}/device/model"),
        "wwid": _attr(f"{at}/wwid") or _attr(f"{at}/device/wwid"),
        "rotational": _attr(f"{at}/queue/rotational"),
    }


def _dev_numbers(sys_path: str) -> tuple[int, int]:
    major, _, minor = _attr(f"{sys_path}/dev").partition(":")
    return int(major), int(minor)


def _multipath_parent(sys_path: str) -> str:
    """The multipath device a dm partition map (`partN-mpath-...`) sits on, else ""."""
    if not _attr(f"{sys_path}/dm/uuid").startswith("part"):
        return ""
    try:
        slaves = sorted(os.listdir(f"{sys_path}/slaves"))
    except OSError:
        return ""
    return slaves[0] if len(slaves) == 1 else ""


def make_device(name: str, devtype: str, parent: str, sys_path: StrPath, properties: Mapping[str, str],
                links: Sequence[str], udev_data: StrPath | None) -> BlockDevice:
    """A `BlockDevice` from what the enumerator found plus sysfs (and the udev db when it had none)."""
    sys_path = os.fspath(sys_path)
    major, minor = _dev_numbers(sys_path)
    properties, links = dict(properties), tuple(links)
    if udev_data is not None and not ("USEC_INITIALIZED" in properties or links):
        db = read_udev_db(udev_data, major, minor)
        if db is not None:
            properties = {**db[0], **properties}
            links = links or db[1]
    # A partition's rotational flag is its disk's; a dm partition map has its own queue.
    attrs = sysfs_identity(sys_path if devtype == "disk" else os.path.dirname(sys_path))
    if devtype == "disk" and (mpath := _multipath_parent(sys_path)):
        devtype, parent = "partition", mpath
    return BlockDevice(name, devtype, parent, major, minor, properties, links, **attrs)


def scan_sysfs(sysfs: StrPath, udev_data: StrPath | None) -> list[BlockDevice]:
    """Every disk under `<sysfs>/block` and its partitions, with udev properties from the database files."""
    block = os.path.join(sysfs, "block")
    out: list[BlockDevice] = []
    try:
        disks = sorted(os.listdir(block))
    except OSError:
        return out
    for disk in disks:
        path = f"{block}/{disk}"
        try:
            out.append(make_device(disk, "disk", "", path, {}, (), udev_data))
            for part in sorted(name for name in os.listdir(path) if os.path.exists(f"{path}/{name}/partition")):
                out.append(make_device(part, "partition", disk, f"{path}/{part}", {}, (), udev_data))
        except (OSError, ValueError) as exc:  # a device removed while we read it
            log.debug("skipping block device %s: %s", disk, exc)
    return out


# --- pyudev ---------------------------------------------------------------------------------

def from_pyudev(device: Any, udev_data: StrPath | None = None) -> BlockDevice:
    """A `BlockDevice` from a pyudev Device of the block subsystem."""
    devtype = device.device_type or "disk"
    parent = ""
    if devtype == "partition":
        disk = device.find_parent("block", "disk")
        parent = disk.sys_name if disk is not None else ""
    links = tuple(link[5:] if link.startswith("/dev/") else link for link in device.device_links)
    return make_device(device.sys_name, devtype, parent, device.sys_path, dict(device.properties), links,
                       udev_data)


def scan_pyudev(context: Any, udev_data: StrPath | None = None) -> list[BlockDevice]:
    out = []
    for device in context.list_devices(subsystem="block"):
        if device.device_type not in ("disk", "partition"):
            continue
        try:
            out.append(from_pyudev(device, udev_data))
        except (OSError, ValueError) as exc:
            log.debug("skipping block device %s: %s", device.sys_name, exc)
    return out


# --- identity -------------------------------------------------------------------------------

def normalise_wwid(wwid: str) -> str:
    """sysfs `naa.5000C500A1B2C3D4` -> udev's ID_WWN form `0x5000c500a1b2c3d4`; others unchanged."""
    if wwid.startswith("naa."):
        return "0x" + wwid[4:].lower()
    return wwid


def choose_by_id(links: Iterable[str], preferred: Iterable[str] = ()) -> str:
    names = [link[len(BY_ID):] for link in links if link.startswith(BY_ID)]
    names = [n for n in names if not re.search(r"-part\d+$", n)]
    for want in preferred:
        if want in names:
            return want

    def rank(name: str) -> tuple:
        prefix = next((i for i, p in enumerate(_LINK_RANK) if name.startswith(p)), len(_LINK_RANK))
        return (prefix, bool(_ID_LIKE.match(name)), len(name), name)
    return min(names, key=rank) if names else ""


def identify(devices: Sequence[BlockDevice], vdevs: Sequence[Any] = ()) -> list[DiskIdentity]:
    """One identity per whole disk. `vdevs` are `sources.model.VdevStatus` of every pool (may be empty)."""
    pool_of_guid = {v.guid: v for v in vdevs if getattr(v, "guid", "")}
    # Each leaf path zpool prints, with the kernel name it resolves to here (once per call: syscalls).
    leaf_paths = {v.name: (v, _resolve(v.name)) for v in vdevs
                  if getattr(v, "is_leaf", False) and v.name.startswith("/")}
    parts: dict[str, list[BlockDevice]] = {}
    for dev in devices:
        if dev.devtype == "partition":
            parts.setdefault(dev.parent, []).append(dev)
    out = []
    for disk in devices:
        if disk.devtype != "disk":
            continue
        family = [disk, *parts.get(disk.name, [])]
        pool, guid, used_path = _membership(family, pool_of_guid, leaf_paths)
        props = disk.properties
        preferred = []
        if used_path.startswith("/dev/" + BY_ID):
            preferred.append(re.sub(r"-part\d+$", "", used_path[len("/dev/" + BY_ID):]))
        out.append(DiskIdentity(
            device=disk.name,
            serial=(props.get("ID_SCSI_SERIAL") or props.get("ID_SERIAL_SHORT") or props.get("ID_SERIAL")
                    or disk.serial),
            model=props.get("ID_MODEL") or disk.model,
            wwn=props.get("ID_WWN") or normalise_wwid(disk.wwid),
            by_id=choose_by_id(disk.links, preferred),
            rotational=disk.rotational,
            pool=pool,
            vdev_guid=guid,
            source="udev" if disk.from_udev else "sysfs",
        ))
    return out


def _membership(family: Sequence[BlockDevice], pool_of_guid: Mapping[str, Any],
                leaf_paths: Mapping[str, Any]) -> tuple[str, str, str]:
    """(pool, vdev guid, the vdev path zpool uses) of the first member of a disk's family."""
    for dev in family:
        props = dev.properties
        if props.get("ID_FS_TYPE") == "zfs_member":
            guid = props.get("ID_FS_UUID_SUB", "")
            vdev = pool_of_guid.get(guid)
            # Cache and spare devices carry no label: their pool comes from zpool status.
            pool = props.get("ID_FS_LABEL") or (vdev.pool if vdev else "")
            return pool, guid, vdev.name if vdev else ""
    # No udev labels (no database, or partitions not re-read since zpool create): match the paths
    # zpool status prints against our names and links.
    for path, (vdev, resolved) in leaf_paths.items():
        for dev in family:
            if resolved == dev.name or path[5:] in dev.links:
                return vdev.pool, vdev.guid, path
    return "", "", ""


def _resolve(path: str) -> str:
    try:
        return os.path.basename(os.path.realpath(path)) if os.path.exists(path) else ""
    except OSError:
        return ""


# --- the live map and hotplug ---------------------------------------------------------------

class DeviceInventory:
    """The current block devices by name: rescanned in full, and kept current by hotplug events."""

    def __init__(self, scan: Callable[[], list[BlockDevice]]):
        self._scan = scan
        self._lock = threading.Lock()
        self._devices: dict[str, BlockDevice] = {}
        self._during_scan: list[tuple[str, BlockDevice | None, str]] | None = None
        self._generation = 0  # counts changes of the device list, for those who keep what they derived from it
        self.scanned = False
        self._first_scan = threading.Event()
        self._monitor_thread: threading.Thread | None = None
        self._stop = threading.Event()

    def rescan(self) -> int:
        # Events that arrive while the scan runs are replayed on its result, so none is lost.
        with self._lock:
            self._during_scan = []
        try:
            devices = self._scan()
        except BaseException:
            with self._lock:
                self._during_scan = None
            raise
        with self._lock:
            replay, self._during_scan = self._during_scan or [], None
            self._devices = {d.name: d for d in devices}
            for event in replay:
                self._apply(*event)
            self.scanned = True
            self._generation += 1
        self._first_scan.set()
        return len(devices)

    def wait_scanned(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the first scan to have finished; True once it has."""
        return self._first_scan.wait(timeout)

    def devices(self) -> list[BlockDevice]:
        with self._lock:
            return list(self._devices.values())

    def snapshot(self) -> tuple[int, list[BlockDevice]]:
        """(generation, devices): the generation changes whenever the list may have."""
        with self._lock:
            return self._generation, list(self._devices.values())

    def apply(self, action: str, device: BlockDevice | None, name: str = "") -> None:
        """One hotplug event: add/change/bind/online put the device in, remove takes it (and its partitions) out."""
        with self._lock:
            if self._during_scan is not None:
                self._during_scan.append((action, device, name))
            self._apply(action, device, name)

    def _apply(self, action: str, device: BlockDevice | None, name: str) -> None:
        self._generation += 1
        name = device.name if device is not None else name
        if action == "remove":
            self._devices.pop(name, None)
            for other in [n for n, d in self._devices.items() if d.parent == name]:
                del self._devices[other]
        elif device is not None:
            self._devices[name] = device

    # pyudev's Monitor in a thread; kernel events when no udev daemon is running (no /run/udev).
    def start_monitor(self, context: Any, udev_data: StrPath | None, source: str = "udev") -> bool:
        try:
            import pyudev  # type: ignore[import-untyped]  # pyudev ships no type information
            monitor = pyudev.Monitor.from_netlink(context, source=source)
            monitor.filter_by("block")
            monitor.start()
        except Exception as exc:  # no netlink in this sandbox, no permission...
            log.warning("disk hotplug monitor unavailable (%s); relying on periodic rescans", exc)
            return False
        self._stop.clear()
        self._monitor_thread = threading.Thread(target=self._watch, args=(monitor, udev_data),
                                                name="disks-hotplug", daemon=True)
        self._monitor_thread.start()
        return True

    def _watch(self, monitor: Any, udev_data: StrPath | None) -> None:
        while not self._stop.is_set():
            try:
                device = monitor.poll(timeout=0.5)
            except Exception as exc:
                log.warning("disk hotplug monitor stopped: %s", exc)
                return
            if device is None:
                continue
            self.handle(device, udev_data)

    def handle(self, device: Any, udev_data: StrPath | None = None) -> None:
        """A pyudev device event."""
        action = device.action or "change"
        if device.device_type not in ("disk", "partition"):
            return
        if action == "remove":
            self.apply("remove", None, device.sys_name)
            return
        try:
            self.apply(action, from_pyudev(device, udev_data))
        except (OSError, ValueError) as exc:  # gone again before we read it
            log.debug("hotplug %s %s: %s", action, device.sys_name, exc)

    def stop_monitor(self) -> None:
        self._stop.set()
        if self._monitor_thread is not None:
            self._monitor_thread.join(timeout=5)
            self._monitor_thread = None
