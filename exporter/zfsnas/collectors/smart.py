"""Collector `smart`: disk health before ZFS sees errors, from smartctl, never waking a sleeping disk.

Owns every `zfs_disk_smart_*` family. Each carries the labels `device`, `serial`, `pool` and
`vdev_guid` of the disk's `zfs_disk_info` (the `disks` collector's identities, taken anew at every
scrape), so the two join in PromQL: per disk its state (`zfs_disk_smart_state{state}`: ok, standby,
unsupported, failed), when its values were read, its SMART health, temperature (and min/max where
the drive keeps them), power-on time and cycles, the ATA counters that predict failure, SAS grown
defects and error counters, NVMe health and wear, and the newest self-test of each type.

Source `smartctl` runs `smartctl --json` once per whole disk every `--smart.interval` seconds, in
the background and after the exporter's first answer, through the shared command runner (its
prefix, timeout and output limit; smartctl is not one of the one-at-a-time zfs/zpool programs).
`--nocheck=standby` leaves a sleeping disk asleep: it shows state `standby` and keeps serving the
values of its last read, whose age `zfs_disk_smart_read_timestamp_seconds` tells. A USB bridge that
smartctl does not know is tried once more with `-d sat` (and read that way from then on);
`--smart.device-type` gives the type instead. Without smartctl, without the privileges to open
any disk (a container without the SMART devices, the unprivileged systemd unit) or with a smartctl
that has no `--json`, SMART is unavailable, and never silently: the collector serves only
`zfs_disk_smart_unavailable{reason}` 1 (`smartctl_missing`, `permission_denied`, `smartctl_too_old`),
its `zfs_exporter_collector_success` is 0 and one log line says why (docs/disks.md#smart).
The families are built once per read (or change of identities), so a scrape copies their text.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ..exposition import Families, Family
from ..refresh import RenderedOnce
from ..settings import Settings, flag, interval
from .base import RefreshingCollector, Report
from .filters import DeviceFilter

if TYPE_CHECKING:
    from ..sources.blockdevices import DiskIdentity
    from ..sources.smart import DiskSmart, SmartReading, SmartResult, SmartSurvey

log = logging.getLogger("zfsnas")

JOIN = ("device", "serial", "pool", "vdev_guid")  # zfs_disk_info's labels that identify the disk
STATES = ("ok", "standby", "unsupported", "failed")  # sources.smart.STATES, without importing it at start
DEFAULT_INTERVAL = 600.0
# zfs_disk_smart_unavailable{reason}: why SMART cannot be read at all, as a word a dashboard can show.
MISSING, DENIED, TOO_OLD = "smartctl_missing", "permission_denied", "smartctl_too_old"
FIRST_SCAN_WAIT = 60.0  # seconds the first read waits for the disks collector's first device scan
# (reading key, metric, type, help); served when the drive reported the value.
NUMBERS = (
    ("healthy", "zfs_disk_smart_healthy", "gauge",
     "SMART overall-health self-assessment: 1 passed, 0 failed (the drive expects to fail)."),
    ("temperature", "zfs_disk_smart_temperature_celsius", "gauge", "Current temperature of the drive."),
    ("temperature_limit", "zfs_disk_smart_temperature_limit_celsius", "gauge",
     "The drive's own highest operating temperature (ATA SCT, NVMe warning threshold, SCSI trip point)."),
    ("power_on_seconds", "zfs_disk_smart_power_on_seconds_total", "counter",
     "Time the drive has been powered on (it counts hours)."),
    ("power_cycles", "zfs_disk_smart_power_cycles_total", "counter", "Power cycles of the drive."),
    ("reallocated_sectors", "zfs_disk_smart_reallocated_sectors", "gauge",
     "ATA attribute 5 (raw): sectors remapped to spares after errors."),
    ("pending_sectors", "zfs_disk_smart_pending_sectors", "gauge",
     "ATA attribute 197 (raw): unreadable sectors waiting to be remapped or rewritten."),
    ("offline_uncorrectable_sectors", "zfs_disk_smart_offline_uncorrectable_sectors", "gauge",
     "ATA attribute 198 (raw): sectors the offline scan could not read."),
    ("reported_uncorrectable_errors", "zfs_disk_smart_reported_uncorrectable_errors_total", "counter",
     "ATA attribute 187 (raw): errors the drive could not correct."),
    ("command_timeouts", "zfs_disk_smart_command_timeouts_total", "counter",
     "ATA attribute 188 (its first 16-bit raw counter): commands aborted on a timeout."),
    ("udma_crc_errors", "zfs_disk_smart_udma_crc_errors_total", "counter",
     "ATA attribute 199 (raw): transfer checksum errors on the link (cable, backplane, controller)."),
    ("grown_defects", "zfs_disk_smart_grown_defects", "gauge", "SCSI grown defect list: sectors remapped since manufacture."),
    ("nvme_critical_warning", "zfs_disk_smart_nvme_critical_warning", "gauge",
     "NVMe critical warning bits (0 none; 1 spare low, 2 temperature, 4 reliability degraded, 8 read-only, "
     "16 power-loss protection failed)."),
    ("nvme_available_spare_ratio", "zfs_disk_smart_nvme_available_spare_ratio", "gauge",
     "NVMe available spare capacity, 0..1."),
    ("nvme_available_spare_threshold_ratio", "zfs_disk_smart_nvme_available_spare_threshold_ratio", "gauge",
     "NVMe available spare below which the drive warns, 0..1."),
    ("nvme_endurance_used_ratio", "zfs_disk_smart_nvme_endurance_used_ratio", "gauge",
     "NVMe percentage used / 100: share of the rated endurance used (may exceed 1)."),
    ("nvme_media_errors", "zfs_disk_smart_nvme_media_errors_total", "counter",
     "NVMe media and data integrity errors (unrecovered)."),
    ("nvme_unsafe_shutdowns", "zfs_disk_smart_nvme_unsafe_shutdowns_total", "counter",
     "NVMe shutdowns without notice (power lost)."),
    ("nvme_read_bytes", "zfs_disk_smart_nvme_read_bytes_total", "counter", "NVMe data read by the host."),
    ("nvme_written_bytes", "zfs_disk_smart_nvme_written_bytes_total", "counter", "NVMe data written by the host."),
)

# (min|max) -> metric, help; label `period` = lifetime or power_cycle.
TEMPERATURE_EXTREMES = {
    "min": ("zfs_disk_smart_temperature_min_celsius",
            "Lowest temperature the drive recorded over its lifetime or since it was powered on (period)."),
    "max": ("zfs_disk_smart_temperature_max_celsius",
            "Highest temperature the drive recorded over its lifetime or since it was powered on (period)."),
}
# (corrected|uncorrected) -> metric, help; label `operation` = read, write or verify.
SCSI_ERRORS = {
    "corrected": ("zfs_disk_smart_scsi_corrected_errors_total", "SCSI error counter log: errors the drive corrected."),
    "uncorrected": ("zfs_disk_smart_scsi_uncorrected_errors_total",
                    "SCSI error counter log: errors the drive could not correct."),
}


def parse_device_types(values: Sequence[str] | None) -> tuple[str | None, dict[str, str]]:
    """`--smart.device-type` values: TYPE for every disk or DEVICE=TYPE for one -> (default, by device)."""
    default, by_device = None, {}
    for value in values or ():
        from ..sources.smart import valid_device_type  # only when the flag is given: not at every start

        device, _, kind = value.rpartition("=")
        if not valid_device_type(kind) or (device and "/" in device.removeprefix("/dev/")):
            raise SystemExit(f"zfsnas-exporter: --smart.device-type: {value!r} is not TYPE or DEVICE=TYPE "
                             "(a smartctl -d type such as sat, scsi, nvme, sat,12)")
        if device:
            by_device[device.removeprefix("/dev/")] = kind
        else:
            default = None if kind == "auto" else kind
    return default, by_device


class SmartSettings(Settings):
    namespace = "smart"
    interval: float = interval("--smart.interval", DEFAULT_INTERVAL, "SMART reads of every disk",
                               "; a sleeping disk is not woken")
    device_type: list[str] | None = flag("--smart.device-type", action="append", metavar="[DEVICE=]TYPE",
                                         help="smartctl -d TYPE for every disk, or DEVICE=TYPE for one (repeatable; "
                                              "e.g. sde=sat); default: smartctl's own detection, and sat for a USB "
                                              "bridge it does not know")


class SmartCollector(RefreshingCollector[SmartSettings]):
    name = "smart"
    description = ("SMART health, temperature and wear of every disk (smartctl --json in the background, "
                   "never waking a sleeping disk)")
    needs_zfs = False
    optional_programs = ("smartctl",)
    missing_hint = "install smartmontools 7.0 or later; docs/disks.md#smart"
    shared_settings = (DeviceFilter,)

    def setup(self) -> None:
        self.default_type, self.types = parse_device_types(self.settings.device_type)
        self.refresher = self.add_refresher("smartctl", self._survey, self.settings.interval, wait_for_start=True)
        self._kept: dict[str, DiskSmart] = {}
        self._learned: dict[tuple[str, str], str] = {}  # (device, serial) -> the type that read a USB bridge
        self._scan_types: dict[str, str] = {}  # device -> the type `smartctl --scan` gave it
        self._said = ""  # the unavailability last logged
        self._rendered = RenderedOnce(4)

    # --- the refresh (its own thread) --------------------------------------------------------

    def _survey(self) -> SmartSurvey:
        from ..sources.smart import SmartctlMissing, SmartSurvey

        disks: list[DiskSmart] = []
        identities: list[DiskIdentity] = []
        unavailable, reason, scanned, said_at_start = "", "", False, False
        try:
            identities, scanned = self._identities(FIRST_SCAN_WAIT)
            for at, identity in enumerate(identities):
                result = self._read(identity)
                if scanned:  # labelled by what the disk says of itself (or said before it slept)
                    identity = identities[at] = identity._replace(serial=self._scanned_serial(identity, result))
                disks.append(self._disk(identity, result))
        except SmartctlMissing as exc:
            disks, unavailable, reason = [], f"{exc} (install smartmontools 7.0 or later)", MISSING
            said_at_start = exc.explained  # the start-up line said it: not again at warning
        if not unavailable and _all_tried(disks, lambda disk: disk.denied):
            unavailable, reason = ("smartctl may not open the disks (permission denied): it needs root, or "
                                   "CAP_SYS_RAWIO (and CAP_SYS_ADMIN for NVMe) and read access to the disk devices"), DENIED
        if not unavailable and _all_tried(disks, lambda disk: NO_JSON in disk.reason):
            unavailable, reason = "smartctl printed no JSON for any disk: smartmontools 7.0 or later has --json", TOO_OLD
        self._kept = {disk.device: disk for disk in disks}
        if unavailable != self._said:
            if unavailable:
                log.log(logging.DEBUG if said_at_start else logging.WARNING,
                        "smart: %s; the smart collector serves only zfs_disk_smart_unavailable{reason=\"%s\"} "
                        "(docs/disks.md#smart)", unavailable, reason)
            else:
                log.info("smart: smartctl reads the disks")
            self._said = unavailable
        survey = SmartSurvey(tuple(disks), identities, unavailable, scanned, reason)
        self._families(survey, identities)  # rendered here, before the scrape asks
        return survey

    def _identities(self, wait: float = 0.0) -> tuple[list[DiskIdentity], bool]:
        """The disks to read and their labels: the disks collector's, else a scan of /sys/block, and
        where there is no sysfs at all (FreeBSD) `smartctl --scan`'s list; True when it was that."""
        paths = self.ctx.paths
        if os.path.isdir(paths.sysfs):
            if self.ctx.disk_identities is not None:
                return self.ctx.disk_identities(wait), False
            from ..sources.blockdevices import identify, scan_sysfs

            devices = scan_sysfs(paths.sysfs, paths.udev_data)
            excluded = self.ctx.device_filter.excluded
            return [i for i in identify(devices, self.ctx.vdevs()) if not excluded(i.device)], False
        return self._scanned(), True

    def _scanned(self) -> list[DiskIdentity]:
        """`smartctl --scan`'s disks, in the pool whose `zpool status -P` leaf is the disk or one of its
        partitions (/dev/ada0p2); their smartctl types are remembered for the reads."""
        from ..sources.blockdevices import DiskIdentity
        from ..sources.smart import scan

        leaves = [v for v in self.ctx.vdevs() if v.is_leaf]
        out = []
        for path, kind in scan(self.ctx.commands.complete):
            device = path.removeprefix("/dev/")
            member = re.compile(rf"/dev/{re.escape(device)}(?:p\d+|s\d+[a-h]?)?")
            vdev = next((v for v in leaves if member.fullmatch(v.name)), None)
            if kind:
                self._scan_types[device] = kind
            out.append(DiskIdentity(device, "", "", "", "", "", vdev.pool if vdev else "", vdev.guid if vdev else "",
                                    "smartctl"))
        return out

    def _scanned_serial(self, identity: DiskIdentity, result: SmartResult) -> str:
        if result.reading is not None:
            return result.reading.serial
        before = self._kept.get(identity.device)
        return before.serial if before is not None else ""

    def _read(self, identity: DiskIdentity) -> SmartResult:
        from ..sources.smart import OK, STANDBY, read_disk

        path = f"/dev/{identity.device}"
        key = (identity.device, identity.serial)
        chosen = (self.types.get(identity.device) or self.default_type or self._learned.get(key)
                  or self._scan_types.get(identity.device))
        result = read_disk(self.ctx.commands.complete, path, chosen)
        if result.needs_device_type and chosen is None:
            retry = read_disk(self.ctx.commands.complete, path, "sat")
            if retry.state in (OK, STANDBY):
                self._learned[key] = "sat"
                return retry
            return result._replace(reason=f"{result.reason}; with -d sat: {retry.reason}")
        return result

    def _disk(self, identity: DiskIdentity, result: SmartResult) -> DiskSmart:
        from ..sources.smart import OK, UNSUPPORTED, DiskSmart

        if result.state == OK and result.reading is not None:  # smartctl's own time of the read (a replay keeps it)
            return DiskSmart(identity.device, identity.serial, OK, result.reading, result.reading.read_at or time.time(), "")
        before = self._kept.get(identity.device)
        if before is None or before.serial != identity.serial or result.state == UNSUPPORTED:
            before = None
        return DiskSmart(identity.device, identity.serial, result.state, before and before.reading,
                         before and before.read_at, result.reason, result.denied)

    # --- the scrape ----------------------------------------------------------------------------

    def collect(self, report: Report) -> Iterable[Family]:
        if self._started and not self.refresher.tried:  # the first read is under way: nothing yet, nothing wrong
            return []
        survey = self.current(self.refresher, report)
        if survey is None:
            return []
        if survey.unavailable:  # a failure, and one that says why (logged once by the refresh)
            report.fail("smartctl", survey.unavailable, explained=True)
            return [_unavailable_family(survey.unavailable_reason)]
        identities = survey.identities
        if self.ctx.disk_identities is not None and not survey.scanned:
            with report.guard("identifying disks"):
                identities = self.ctx.disk_identities(0.0)
        for disk in survey.disks:
            if disk.state == "failed":
                report.fail(f"disk {disk.device}", disk.reason)
        return self._families(survey, identities)

    def _families(self, survey: SmartSurvey, identities: list[DiskIdentity]) -> list[Family]:
        return self._rendered.get((survey, identities), lambda: build_families(survey, identities).frozen())


def build_families(survey: SmartSurvey, identities: list[DiskIdentity]) -> Families:
    """Every family of a survey, labelled with the disks' current identities; a disk that is gone,
    or whose name now belongs to another disk (another serial), is left out."""
    families = Families()
    by_device = {identity.device: identity for identity in identities}
    for disk in survey.disks:
        identity = by_device.get(disk.device)
        if identity is None or identity.serial != disk.serial:
            continue
        join = {label: getattr(identity, label) for label in JOIN}
        for state in STATES:
            families.gauge("zfs_disk_smart_state", "SMART read of the disk: 1 on its state (ok read now, standby "
                           "asleep and not woken, unsupported no SMART, failed smartctl failed), 0 on the others.",
                           {**join, "state": state}, 1 if state == disk.state else 0)
        if disk.reading is not None and disk.read_at is not None:
            _reading(families, join, disk.reading, disk.read_at)
    return families


def _reading(families: Families, join: dict[str, str], reading: SmartReading, read_at: float) -> None:
    families.gauge("zfs_disk_smart_read_timestamp_seconds",
                   "When the values served were read (Unix time); older than the interval while the disk sleeps.",
                   join, round(read_at, 3))
    families.gauge("zfs_disk_smart_info", "What smartctl found: protocol (ATA, SCSI, NVMe), smartctl device type, "
                   "model and firmware as the drive reports them, media hdd or ssd as it says (\"\" when it does not); 1.",
                   {**join, "protocol": reading.protocol, "device_type": reading.device_type, "model": reading.model,
                    "firmware": reading.firmware, "media": reading.media}, 1)
    for key, metric, kind, documentation in NUMBERS:
        if (number := reading.numbers.get(key)) is not None:
            families.add(kind, metric, documentation, join, number)
    for (extreme, period), degrees in sorted(reading.temperatures.items()):
        name, documentation = TEMPERATURE_EXTREMES[extreme]
        families.gauge(name, documentation, {**join, "period": period}, degrees)
    for (operation, kind), count in sorted(reading.scsi_errors.items()):
        name, documentation = SCSI_ERRORS[kind]
        families.counter(name, documentation, {**join, "operation": operation}, count)
    for kind, test in sorted(reading.self_tests.items()):
        families.gauge("zfs_disk_smart_self_test_info", "The newest self-test of each type and how it ended "
                       "(passed, failed, aborted, interrupted, in_progress, unknown); 1.",
                       {**join, "type": kind, "result": test.result}, 1)
        if test.hours_ago is not None:
            families.gauge("zfs_disk_smart_self_test_age_seconds", "Power-on time of the drive since its newest "
                           "self-test of this type ran (hours resolution; the drive's clock, not the wall clock).",
                           {**join, "type": kind}, test.hours_ago * 3600)


def _unavailable_family(reason: str) -> Family:
    families = Families()
    families.gauge("zfs_disk_smart_unavailable", "1 while SMART cannot be read at all, with why: smartctl_missing, "
                   "permission_denied (no raw access to the disks), smartctl_too_old (no --json).", {"reason": reason}, 1)
    [family] = families.frozen()
    return family


NO_JSON = "printed no JSON object"  # sources.smart.interpret's words for a smartctl without --json


def _all_tried(disks: list[DiskSmart], failed: Callable[[DiskSmart], bool]) -> bool:
    """Every disk with SMART failed the same way: a matter of the host (privileges, smartctl), not of the disks."""
    tried = [disk for disk in disks if disk.state != "unsupported"]
    return bool(tried) and all(disk.state == "failed" and failed(disk) for disk in tried)
