"""Collector `disks`: per whole disk I/O counters from /proc/diskstats, and who each disk is.

Owns the `zfs_disk_*` families: the diskstats counters in base units (label `device`, the
kernel name), `zfs_disk_info{device,serial,model,wwn,by_id,rotational,pool,vdev_guid}` and
`zfs_disk_identity_source{source}` (how many disks were identified from the udev database and
how many from sysfs attributes alone). Whole disks only: the kernel's whole-disk line already
counts its partitions' I/O; partitions serve only to find pool membership. Devices matching
`--disks.device-exclude` (loop, ram, zram, device-mapper, optical, floppy and hidden NVMe
multipath paths by default) are left out.

The device list is kept in a `DeviceInventory`: rescanned in the background every
`--disks.rescan-interval` seconds (source `block_devices`) and, on a live system, kept current
between rescans by a pyudev monitor, so a disk that is pulled drops out and one plugged in
appears without a restart. Pool membership for disks whose partitions carry no pool label
(cache, spare) comes from `zpool status` vdev guids (`Context.vdevs()`) when the `pools` collector runs.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exposition import Families, Family
from ..refresh import BackgroundRefresher
from ..sources.diskstats import SECTOR_BYTES, DiskStats, read_diskstats
from .base import Context, RefreshingCollector, Report

if TYPE_CHECKING:
    from ..sources.blockdevices import DiskIdentity

DEFAULT_EXCLUDE = r"^(loop|ram|zram|dm-|sr|fd)\d+$|^nvme\d+c\d+n\d+$"
MS = 0.001
INFO_LABELS = ("device", "serial", "model", "wwn", "by_id", "rotational", "pool", "vdev_guid")

# (metric, DiskStats field, scale, kind, help); fields the kernel lacks (None) are left out.
COUNTERS = (
    ("zfs_disk_reads_total", "reads", 1, "counter", "Reads completed."),
    ("zfs_disk_writes_total", "writes", 1, "counter", "Writes completed."),
    ("zfs_disk_reads_merged_total", "reads_merged", 1, "counter", "Adjacent reads merged by the kernel."),
    ("zfs_disk_writes_merged_total", "writes_merged", 1, "counter", "Adjacent writes merged by the kernel."),
    ("zfs_disk_read_bytes_total", "sectors_read", SECTOR_BYTES, "counter", "Bytes read."),
    ("zfs_disk_written_bytes_total", "sectors_written", SECTOR_BYTES, "counter", "Bytes written."),
    ("zfs_disk_read_time_seconds_total", "read_ms", MS, "counter", "Seconds spent by all reads."),
    ("zfs_disk_write_time_seconds_total", "write_ms", MS, "counter", "Seconds spent by all writes."),
    ("zfs_disk_io_now", "in_progress", 1, "gauge", "I/Os in progress."),
    ("zfs_disk_io_time_seconds_total", "io_ms", MS, "counter", "Seconds the disk was busy with I/O."),
    ("zfs_disk_io_time_weighted_seconds_total", "weighted_io_ms", MS, "counter",
     "I/O seconds weighted by the number of I/Os in progress."),
    ("zfs_disk_discards_total", "discards", 1, "counter", "Discards completed (kernel 4.18+)."),
    ("zfs_disk_discarded_bytes_total", "sectors_discarded", SECTOR_BYTES, "counter", "Bytes discarded (4.18+)."),
    ("zfs_disk_discard_time_seconds_total", "discard_ms", MS, "counter", "Seconds spent by all discards (4.18+)."),
    ("zfs_disk_flushes_total", "flushes", 1, "counter", "Flush requests completed (kernel 5.5+)."),
    ("zfs_disk_flush_time_seconds_total", "flush_ms", MS, "counter", "Seconds spent by all flushes (5.5+)."),
)


class DisksCollector(RefreshingCollector):
    name = "disks"
    description = "per-disk I/O from /proc/diskstats with serial, model, by-id link and pool membership"
    needs_zfs = False

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--disks.device-exclude", dest="disks_device_exclude", default=DEFAULT_EXCLUDE,
                            help=f"regex of kernel device names to leave out (default {DEFAULT_EXCLUDE!r})")
        parser.add_argument("--disks.rescan-interval", dest="disks_rescan_interval", type=float, default=60.0,
                            help="seconds between full rescans of the block devices (default 60)")
        parser.add_argument("--disks.hotplug", dest="disks_hotplug", action=argparse.BooleanOptionalAction,
                            default=True, help="follow disk hotplug with a pyudev monitor (default on)")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        args = ctx.args
        self.procfs = getattr(args, "procfs", "/proc")
        self.sysfs = getattr(args, "sysfs", "/sys")
        self.udev_data = getattr(args, "udev_data", "/run/udev/data")
        self.exclude = re.compile(getattr(args, "disks_device_exclude", DEFAULT_EXCLUDE))
        self.hotplug = getattr(args, "disks_hotplug", True)
        # pyudev reads the real /sys; a tree given with --path.sysfs is read directly.
        self.live = Path(self.sysfs).resolve() == Path("/sys")
        from ..sources.blockdevices import DeviceInventory  # when the collector is built, not at every start

        self.inventory = DeviceInventory(self._scan)
        self.refresher = BackgroundRefresher("block_devices", self.inventory.rescan,
                                             getattr(args, "disks_rescan_interval", 60.0))
        self._context: Any = None

    def _scan(self):
        from ..sources.blockdevices import scan_pyudev, scan_sysfs

        if self.live:
            return scan_pyudev(self._pyudev_context(), self.udev_data)
        return scan_sysfs(self.sysfs, self.udev_data)

    def _pyudev_context(self):
        if self._context is None:
            import pyudev  # type: ignore[import-untyped]  # pyudev ships no type information
            self._context = pyudev.Context()
        return self._context

    def sources(self) -> Sequence[BackgroundRefresher]:
        return (self.refresher,)

    def start(self) -> None:
        super().start()
        if self.live and self.hotplug:
            # Without a udev daemon only the kernel's own events arrive.
            source = "udev" if Path(self.udev_data).parent.is_dir() else "kernel"
            self.inventory.start_monitor(self._pyudev_context(), self.udev_data, source)

    def stop(self) -> None:
        self.inventory.stop_monitor()
        super().stop()

    def identities(self, devices=None) -> list[DiskIdentity]:
        from ..sources.blockdevices import identify

        devices = self.inventory.devices() if devices is None else devices
        return [i for i in identify(devices, self.ctx.vdevs()) if not self.exclude.search(i.device)]

    def collect(self, report: Report) -> Iterable[Family]:
        self.current(self.refresher, report)  # the inventory itself holds the devices
        families = Families()
        devices = self.inventory.devices()
        identities = []
        with report.guard("identifying disks"):
            identities = self.identities(devices)
        whole = {i.device for i in identities}
        known = {d.name for d in devices}
        with report.guard("reading diskstats"):
            for stats in read_diskstats(self.procfs) or ():
                if stats.device in whole or (stats.device not in known and self._new_whole_disk(stats.device)):
                    self._counters(families, stats)
        for identity in identities:
            families.gauge("zfs_disk_info", "Identity of a whole disk and the pool it belongs to; 1.",
                           {label: getattr(identity, label) for label in INFO_LABELS}, 1)
        sources = Counter(i.source for i in identities)
        for source in ("udev", "sysfs"):
            families.gauge("zfs_disk_identity_source",
                           "Disks whose identity came from the udev database or, without one, from sysfs attributes.",
                           {"source": source}, sources[source])
        return families

    def _new_whole_disk(self, device: str) -> bool:
        """A disk plugged in since the last scan, before its hotplug event was seen."""
        return not self.exclude.search(device) and (Path(self.sysfs) / "block" / device).exists()

    @staticmethod
    def _counters(families: Families, stats: DiskStats) -> None:
        labels = {"device": stats.device}
        for metric, attr, scale, kind, help_text in COUNTERS:
            raw = getattr(stats, attr)
            if raw is not None:
                families.add(kind, metric, help_text, labels, raw * scale if scale != 1 else raw)
