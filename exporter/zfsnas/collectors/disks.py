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
The scan runs in a forked child process (`forked.ForkedWork`): 4,000 disks are some 100,000 file
reads, and in a thread each read would wait for the GIL behind the scrape. The identities (who each
disk is, which pool) are kept until the device list or `zpool status` changes; only
/proc/diskstats is read and rendered on every scrape.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from ..exposition import Families, Family, RowTable
from ..forked import ForkedWork
from ..refresh import RenderedOnce
from ..settings import Settings, flag, interval
from ..sources.diskstats import SECTOR_BYTES, DiskStats, read_diskstats
from .base import RefreshingCollector, Report
from .filters import DeviceFilter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..sources.blockdevices import BlockDevice, DiskIdentity
    from .base import Context

MS = 0.001
INFO_LABELS = ("device", "serial", "model", "wwn", "by_id", "rotational", "pool", "vdev_guid")
SCAN_TIMEOUT = 300.0  # seconds: a scan that takes longer is hung (a dead disk's sysfs): killed and reported

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


class DisksSettings(Settings):
    namespace = "disks"
    rescan_interval: float = interval("--disks.rescan-interval", 60.0, "full rescans of the block devices")
    hotplug: bool = flag("--disks.hotplug", action=argparse.BooleanOptionalAction, default=True,
                         help="follow disk hotplug with a pyudev monitor (default on)")


class DisksCollector(RefreshingCollector[DisksSettings]):
    name = "disks"
    description = "per-disk I/O from /proc/diskstats with serial, model, by-id link and pool membership"
    needs_zfs = False
    scan_in_child: ClassVar[bool] = True  # benchmarks/diskscan_bench.py --old sets False (the old way)
    shared_settings = (DeviceFilter,)

    def setup(self) -> None:
        self.procfs = self.ctx.paths.procfs
        self.sysfs = self.ctx.paths.sysfs
        self.udev_data = self.ctx.paths.udev_data
        self.exclude = self.ctx.device_filter.pattern
        self.hotplug = self.settings.hotplug
        # pyudev reads the real /sys; a tree given with --path.sysfs is read directly. (os.path, not
        # pathlib: nothing else of a start needs pathlib, a few milliseconds of it.)
        self.live = os.path.realpath(self.sysfs) == "/sys"
        from ..sources.blockdevices import DeviceInventory  # when the collector is built, not at every start

        self.inventory = DeviceInventory(self._scan)
        self.refresher = self.add_refresher("block_devices", self.inventory.rescan, self.settings.rescan_interval)
        self.forked = ForkedWork(SCAN_TIMEOUT)
        self._context: Any = None
        # (device list generation, zpool status value) -> identities, whole disk names, known names
        self._identified: tuple[tuple[int, Any], list[DiskIdentity], set[str], set[str]] = ((-1, None), [], set(), set())
        self._counters = RowTable(("device",), counter_columns)
        self._identities_rendered = RenderedOnce(2)

    def _scan(self) -> list[BlockDevice]:
        # pyudev is imported (and its context made) here, never in the child: a child that imports
        # a module another thread was importing when it forked waits for that module's lock forever.
        context = self._pyudev_context() if self.live else None
        if self.scan_in_child:
            return self.forked.run(lambda: self._scan_here(context), "scanning block devices")
        return self._scan_here(context)

    def _scan_here(self, context: Any) -> list[BlockDevice]:
        # blockdevices is already loaded (by __init__): this import only looks it up, in the child too
        from ..sources.blockdevices import scan_pyudev, scan_sysfs

        if context is not None:
            return scan_pyudev(context, self.udev_data)
        return scan_sysfs(self.sysfs, self.udev_data)

    def _pyudev_context(self) -> Any:
        if self._context is None:
            import pyudev  # type: ignore[import-untyped]  # pyudev ships no type information
            self._context = pyudev.Context()
        return self._context

    def start(self) -> None:
        super().start()
        if self.live and self.hotplug:
            # Without a udev daemon only the kernel's own events arrive.
            source = "udev" if os.path.isdir(os.path.dirname(os.path.abspath(self.udev_data))) else "kernel"
            self.inventory.start_monitor(self._pyudev_context(), self.udev_data, source)

    def stop(self) -> None:
        self.inventory.stop_monitor()
        self.forked.close()  # a scan still running is killed, not waited for
        super().stop()

    def identities(self, devices: Sequence[BlockDevice] | None = None) -> list[DiskIdentity]:
        devices = self.inventory.devices() if devices is None else devices
        from ..sources.blockdevices import identify

        return [i for i in identify(devices, self.ctx.vdevs()) if not self.exclude.search(i.device)]

    def offer(self, ctx: Context) -> None:
        ctx.disk_identities = self.current_identities  # the disks smart reads, labelled as zfs_disk_info

    def current_identities(self, wait: float = 0.0) -> list[DiskIdentity]:
        """Every whole disk's identity (`zfs_disk_info`'s labels; the same list object until the
        devices or `zpool status` change), once the first device scan is done or `wait` seconds have
        passed: what the `smart` collector reads its disks from (`Context.disk_identities`)."""
        if not self.inventory.scanned:
            if not self._started:  # no refresh thread (tests, one-shot renders): scan now
                self.refresher.refresh_now()
            elif wait:
                self.inventory.wait_scanned(wait)
        return self._current_identities()[0]

    def _current_identities(self) -> tuple[list[DiskIdentity], set[str], set[str]]:
        """Identities, whole disk names and every known name; worked out again only when the device
        list (a rescan or hotplug event) or the `zpool status` value changed since the last scrape."""
        status = self.ctx.zpool_status.state().value if self.ctx.zpool_status is not None else None
        generation, devices = self.inventory.snapshot()
        (known_generation, known_status), identities, whole, known = self._identified
        if known_generation != generation or known_status is not status:  # `is`: the value is kept, its id not reused
            identities = self.identities(devices)
            whole, known = {i.device for i in identities}, {d.name for d in devices}
            self._identified = ((generation, status), identities, whole, known)
        return identities, whole, known

    def collect(self, report: Report) -> Iterable[Family]:
        self.current(self.refresher, report)  # the inventory itself holds the devices
        families = Families()
        identities: list[DiskIdentity] = []
        whole: set[str] = set()
        known: set[str] = set()
        with report.guard("identifying disks"):
            identities, whole, known = self._current_identities()
        with report.guard("reading diskstats"):
            listed: set[str] | None = None  # /sys/block, listed once a scrape if a device is new

            def counted(device: str) -> bool:
                """A whole disk we know, or one plugged in since the last scan, before its event."""
                nonlocal listed
                if device in whole:
                    return True
                if device in known or self.exclude.search(device):
                    return False
                if listed is None:
                    listed = self._block_devices()
                return device in listed

            rows = read_diskstats(self.procfs, counted) or []
            families.add_rows(self._counters, [((stats.device,), stats) for stats in rows])
        families.extend(self._identity_families(identities))
        return families

    def _identity_families(self, identities: list[DiskIdentity]) -> list[Family]:
        """`zfs_disk_info` and `zfs_disk_identity_source`, rendered once per identity list (it is kept,
        the same object, until the devices or `zpool status` change)."""
        def build() -> list[Family]:
            families = Families()
            if identities:
                info = families.family("gauge", "zfs_disk_info",
                                       "Identity of a whole disk and the pool it belongs to; 1.", INFO_LABELS)
                info.samples.extend(("", tuple(getattr(identity, label) for label in INFO_LABELS), 1)
                                    for identity in identities)
            sources = Counter(i.source for i in identities)
            for source in ("udev", "sysfs"):
                families.gauge("zfs_disk_identity_source",
                               "Disks whose identity came from the udev database or, without one, from sysfs attributes.",
                               {"source": source}, sources[source])
            return families.frozen()

        return self._identities_rendered.get((identities,), build)

    def _block_devices(self) -> set[str]:
        try:
            return set(os.listdir(os.path.join(self.sysfs, "block")))
        except OSError:
            return set()


_FIELD_INDEX = {name: i for i, name in enumerate(DiskStats._fields)}


@functools.lru_cache(maxsize=8)
def _columns(width: int) -> tuple[tuple[int, str, str, str, float], ...]:
    return tuple((_FIELD_INDEX[attr], name, help_text, kind, scale) for name, attr, scale, kind, help_text in COUNTERS
                 if _FIELD_INDEX[attr] < width)


def counter_columns(stats: DiskStats) -> tuple[tuple[int, str, str, str, float], ...]:
    """A disk's `RowTable` columns: the COUNTERS its kernel has (those it lacks are None, at the
    end of the line), the same object for the same line length."""
    return _columns(len(stats) - stats.count(None))
