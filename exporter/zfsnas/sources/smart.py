"""SMART through smartmontools' `smartctl --json` (7.x): one disk per call, never waking a sleeping one.

Owns the argument list smartctl runs with (`smartctl_argv`; `scan` lists disks where no sysfs
does), what its exit status and messages mean
(`interpret`: read, asleep, unsupported or failed), and the parsing of its JSON into a
`SmartReading` of plain numbers (`parse_reading`). Nothing here knows about metrics or runs a
command itself: the `smart` collector runs `smartctl_argv` through the shared command runner.

Facts this relies on (smartctl(8) and the smartmontools 7.0-7.5 sources, json.cpp, ataprint.cpp,
scsiprint.cpp, nvmeprint.cpp; host smartctl 7.3 seen answering):
- `--nocheck=standby,3`: before any SMART command an ATA (and, from 7.3, SCSI) disk is asked its
  power mode; one in STANDBY or SLEEP is left alone and smartctl exits with status 3 at once
  ("Device is in STANDBY mode, exit(3)" as an information message; 7.5 adds `power_mode.name`).
  3 sets bits 0 and 1, a pair smartctl never returns otherwise (an unparsable command line stops
  before any device is opened), so it tells a sleeping disk from one that failed to open (bit 1
  alone, the default status). A disk whose power-mode command fails is taken for asleep (SLEEP).
  NVMe has no such check (nothing spins).
- Exit status bits: 0 command line, 1 open/identify failed, 2 a SMART or other command failed
  (values still printed), 3 SMART status DISK FAILING, 4 a prefail attribute at or below its
  threshold now, 5 some attribute was in the past, 6 the error log has errors, 7 the self-test
  log has errors. `smartctl.exit_status` in the JSON repeats it.
- Errors come as `smartctl.messages[]` `{string, severity}`: "Unknown USB bridge [...]" (the
  bridge needs `-d sat` or another type; smartctl gave up before opening the device), "Unable to
  detect device type" (virtio and others without SMART), "Smartctl open device: ... failed:
  Permission denied" / "Operation not permitted" (exit status 2).
- Keys are lower case `[a-z0-9_]` (json.cpp turns "Accumulated start-stop cycles" into
  `accumulated_start_stop_cycles`); numbers past 2**53 are still plain JSON numbers; strings from
  the drive may hold any byte but control characters (they arrive as surrogate escapes).
- ATA: `ata_smart_attributes.table[]` `{id, name, value, worst, thresh, raw: {value, string}}`;
  `ata_smart_self_test_log.standard.table[]`, newest first, `{type.value, status.value,
  lifetime_hours}` where the high nibble of status is 0 completed, 1 aborted, 2 interrupted,
  3-8 failed, 15 running, and `lifetime_hours` is the 16-bit power-on hour count (it wraps);
  SCT status (`--log=scttempsts`) adds `temperature.{power_cycle,lifetime}_{min,max}` and
  `op_limit_max`.
- SCSI/SAS: `scsi_grown_defect_list`, `scsi_error_counter_log.{read,write,verify}`
  `{total_errors_corrected, total_uncorrected_errors}`, `scsi_self_test_<n>` (0 newest)
  `{code.value, result.value, power_on_time.hours}`, trip temperature `scsi_temperature.drive_trip`
  (7.3) or `temperature.drive_trip` (7.4+).
- NVMe: `nvme_smart_health_information_log` `{critical_warning, available_spare,
  available_spare_threshold, percentage_used, data_units_read, data_units_written (units of 1000
  blocks of 512 bytes), power_cycles, power_on_hours, unsafe_shutdowns, media_errors}`;
  `nvme_self_test_log.table[]` from 7.4 (unused entries may be null), `temperature.op_limit_max`
  (the warning composite temperature) from 7.5.
- Every protocol: `local_time.time_t` (when smartctl ran), `rotation_rate` (rpm, 0 for an SSD; ATA, SCSI), `smart_status.passed`,
  `temperature.current`, `power_on_time.{hours,minutes}`, `power_cycle_count`, `model_name` (SCSI:
  `scsi_model_name`), `serial_number`, `firmware_version` (SCSI: `scsi_revision`),
  `device.{type,protocol}`, `smart_support.{available,enabled}`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .model import Explained, SourceError

if TYPE_CHECKING:
    from .blockdevices import DiskIdentity
    from .commands import Completed

SMARTCTL = "smartctl"
SCAN = (SMARTCTL, "--scan", "--json=c")
STANDBY_STATUS = 3            # what `--nocheck=standby,3` makes smartctl exit with for a sleeping disk
OPEN_FAILED = 0x02            # exit status bit 1
NVME_DATA_UNIT_BYTES = 512_000
ATA_SELF_TEST_HOURS = 65536   # the ATA self-test log keeps power-on hours in 16 bits
MISSING_STATUS = 127          # a prefix such as nsenter that cannot find smartctl exits with this
# What one disk's JSON may hold before it is parsed: a report has hundreds to a few thousand values;
# the command's byte limit alone let 15 MB of `{}` make millions of objects (391 MiB).
MAX_JSON_VALUES = 100_000
# Temperatures a sensor reports, in degrees Celsius: ATA's SCT status is a signed byte (-128 means
# none), SCSI's log page 0 to 254 (255 means none), NVMe's Kelvin (0 means none: -273 C).
TEMPERATURE_RANGE = (-127, 254)

# What became of one disk's read.
OK, STANDBY, UNSUPPORTED, FAILED = "ok", "standby", "unsupported", "failed"
STATES = (OK, STANDBY, UNSUPPORTED, FAILED)

# ATA attributes whose raw value means the same on every drive: (id, reading key, raw bits used).
# Command timeouts (188) pack three 16-bit counters on some drives: the first is the count.
ATA_ATTRIBUTES = ((5, "reallocated_sectors", 48), (187, "reported_uncorrectable_errors", 48),
                  (188, "command_timeouts", 16), (197, "pending_sectors", 48),
                  (198, "offline_uncorrectable_sectors", 48), (199, "udma_crc_errors", 48))
NVME_COUNTERS = (("media_errors", "nvme_media_errors"), ("unsafe_shutdowns", "nvme_unsafe_shutdowns"))
NVME_RATIOS = (("available_spare", "nvme_available_spare_ratio"),
               ("available_spare_threshold", "nvme_available_spare_threshold_ratio"),
               ("percentage_used", "nvme_endurance_used_ratio"))
NVME_BYTES = (("data_units_read", "nvme_read_bytes"), ("data_units_written", "nvme_written_bytes"))
SCSI_OPERATIONS = ("read", "write", "verify")
TEMPERATURE_EXTREMES = (("power_cycle_min", "min", "power_cycle"), ("power_cycle_max", "max", "power_cycle"),
                        ("lifetime_min", "min", "lifetime"), ("lifetime_max", "max", "lifetime"))

# Self-test type and result codes, by protocol, to one vocabulary.
ATA_TEST_TYPES = {0: "offline", 1: "short", 2: "extended", 3: "conveyance", 4: "selective"}
ATA_TEST_RESULTS = {0: "passed", 1: "aborted", 2: "interrupted", 3: "failed", 4: "failed", 5: "failed",
                    6: "failed", 7: "failed", 8: "failed", 15: "in_progress"}
NVME_TEST_TYPES = {1: "short", 2: "extended", 14: "vendor"}
NVME_TEST_RESULTS = {0: "passed", 1: "aborted", 2: "aborted", 3: "aborted", 4: "aborted", 5: "failed",
                     6: "failed", 7: "failed", 8: "aborted", 9: "aborted"}
SCSI_TEST_TYPES = {1: "short", 2: "extended", 5: "short", 6: "extended"}
SCSI_TEST_RESULTS = {0: "passed", 1: "aborted", 2: "aborted", 3: "failed", 4: "failed", 5: "failed",
                     6: "failed", 7: "failed", 15: "in_progress"}

_DEVICE_TYPE = re.compile(r"^[a-z0-9][a-z0-9,+_-]*$")
_POWER_MODE = re.compile(r"Device is in (.+?) mode")
_DENIED = ("Permission denied", "Operation not permitted")
_UNSUPPORTED = ("Unable to detect device type", "Unknown USB bridge", "type is ambiguous", "lacks SMART capability",
                "Neither ATA, SCSI nor NVMe")


class SmartctlMissing(SourceError):
    """smartctl is not installed where commands run (this host, or the host behind the command prefix).
    `explained`: the start-up line already said so (the runner raised `Explained`)."""

    def __init__(self, message: str, explained: bool = False) -> None:
        super().__init__(message)
        self.explained = explained


class SelfTest(NamedTuple):
    """The newest self-test of one type: how it ended and how many power-on hours ago it ran."""

    type: str                 # short, extended, conveyance, selective, offline, vendor, other
    result: str               # passed, failed, aborted, interrupted, in_progress (the maps above), unknown
    hours_ago: int | None     # the disk's power-on hours since; None when the disk gave no clock


class SmartReading(NamedTuple):
    """What one awake disk told smartctl, in base units; a value the drive did not report is absent."""

    protocol: str             # ATA, SCSI, NVMe
    device_type: str          # the smartctl -d type that answered: sat, scsi, nvme, ...
    model: str
    serial: str
    firmware: str
    media: str                # hdd (it spins: rotation_rate > 0), ssd (0, or NVMe), "" when it does not say
    exit_status: int
    read_at: float | None                         # when smartctl ran (its `local_time.time_t`), Unix time
    numbers: dict[str, float]                     # key -> value, keys as in the collector's table
    temperatures: dict[tuple[str, str], float]    # (min|max, power_cycle|lifetime) -> degrees Celsius
    scsi_errors: dict[tuple[str, str], int]       # (read|write|verify, corrected|uncorrected) -> count
    self_tests: dict[str, SelfTest]               # type -> its newest test


class SmartResult(NamedTuple):
    """One run of smartctl for one disk: its state, the reading when awake, and why not otherwise."""

    state: str                          # OK, STANDBY, UNSUPPORTED or FAILED
    reading: SmartReading | None = None
    reason: str = ""                    # one line: why the disk was not read
    needs_device_type: bool = False     # an unknown USB bridge: worth one more try with `-d sat`
    denied: bool = False                # smartctl may not open the device (privileges)


class DiskSmart(NamedTuple):
    """What the exporter knows of one disk's SMART: its state at the last read and the last values."""

    device: str
    serial: str                      # the disk's serial when read: another disk under this name is not it
    state: str
    reading: SmartReading | None     # the last values read, kept while the disk sleeps or fails
    read_at: float | None            # Unix time of `reading` (smartctl's clock, else ours)
    reason: str                      # why the last read gave no values
    denied: bool = False             # smartctl may not open the device (privileges)


class SmartSurvey(NamedTuple):
    """One refresh: every disk, and the identities it was made with."""

    disks: tuple[DiskSmart, ...]
    identities: list[DiskIdentity]
    unavailable: str                 # why smartctl cannot be used at all ("" when it can)
    scanned: bool = False            # the disks came from `smartctl --scan` (no sysfs), labelled by smartctl
    unavailable_reason: str = ""     # the same as a short snake_case word (zfs_disk_smart_unavailable{reason})


def smartctl_argv(device_path: str, device_type: str | None = None) -> list[str]:
    """smartctl's arguments for one disk: JSON, never wake a sleeping disk, everything `-a` reads
    plus the SCT temperature status (ATA min/max temperatures), the device type when one is given."""
    argv = [SMARTCTL, "--json=c", f"--nocheck=standby,{STANDBY_STATUS}", "--all", "--log=scttempsts"]
    if device_type:
        argv.append(f"--device={device_type}")
    argv.append(device_path)
    return argv


def scan(complete: Callable[[Sequence[str]], Completed]) -> list[tuple[str, str]]:
    """The (device path, device type) pairs `smartctl --scan` lists: the disks where no sysfs lists
    them (FreeBSD: /dev/ada0 atacam, /dev/da0 scsi, /dev/nvme0 nvme). Lists, opens nothing."""
    try:
        done = complete(SCAN)
    except SourceError as exc:
        if str(exc).endswith("command not found"):
            raise SmartctlMissing(str(exc), isinstance(exc, Explained)) from None
        raise
    data, _unread = _json_object(done.stdout)
    if not isinstance(data, dict):
        if done.returncode == MISSING_STATUS:
            raise SmartctlMissing(f"{SMARTCTL} not found: {_first_line(done.stderr) or 'exit status 127'}")
        raise SourceError(f"smartctl --scan printed no JSON object (exit status {done.returncode})")
    out = []
    for entry in _entries(data.get("devices")):
        name, kind = entry.get("name"), entry.get("type")
        if isinstance(name, str) and name.startswith("/dev/") and "/" not in name[5:] and isinstance(kind, str):
            out.append((name, kind if valid_device_type(kind) else ""))
    return out


def read_disk(complete: Callable[[Sequence[str]], Completed], device_path: str,
              device_type: str | None = None) -> SmartResult:
    """Run smartctl for one disk through `complete` (the command runner's) and say what it found.
    A timeout or an output over the runner's limit is that disk's failure; SmartctlMissing is raised
    when there is no smartctl to run at all."""
    try:
        done = complete(smartctl_argv(device_path, device_type))
    except SourceError as exc:
        if str(exc).endswith("command not found"):
            raise SmartctlMissing(str(exc), isinstance(exc, Explained)) from None
        return SmartResult(FAILED, reason=str(exc))
    return interpret(done.returncode, done.stdout, done.stderr)


def valid_device_type(text: str) -> bool:
    """A `-d` type as smartctl spells them (sat, sat,12, scsi, nvme, usbjmicron,0, megaraid,N...)."""
    return bool(_DEVICE_TYPE.match(text)) and len(text) <= 64


def interpret(returncode: int, stdout: str, stderr: str = "") -> SmartResult:
    """What one smartctl run says about its disk. Raises SmartctlMissing when the output shows that
    smartctl itself could not be run (a command prefix that found no smartctl)."""
    data, unread = _json_object(stdout)
    if not isinstance(data, dict):
        if returncode == MISSING_STATUS:
            raise SmartctlMissing(f"{SMARTCTL} not found: {_first_line(stderr) or 'exit status 127'}")
        # JSON, but too much to parse, is a disk's (or a hostile prefix's) fault, not an old smartctl's
        reason = (f"{SMARTCTL} printed JSON too big to read (exit status {returncode}): {unread}" if unread else
                  f"{SMARTCTL} printed no JSON object (exit status {returncode}; smartmontools 7.0 or later has "
                  f"--json): {_first_line(stderr) or _first_line(stdout) or 'no output'}")
        return SmartResult(FAILED, reason=reason)
    status = _status(data, returncode)
    errors = [text for text, severity in _messages(data) if severity == "error"]
    if status == STANDBY_STATUS:
        mode = _power_mode(data)
        return SmartResult(STANDBY, reason=f"in {mode} mode: not woken" if mode else "asleep: not woken")
    if errors and ("device" not in data or status & OPEN_FAILED):  # smartctl gave up before reading the disk
        reason = errors[0][:300]
        if "Unknown USB bridge" in reason:
            return SmartResult(UNSUPPORTED, reason=reason, needs_device_type=True)
        if any(phrase in reason for phrase in _UNSUPPORTED):
            return SmartResult(UNSUPPORTED, reason=reason)
        return SmartResult(FAILED, reason=reason, denied=any(phrase in reason for phrase in _DENIED))
    if status & OPEN_FAILED:
        return SmartResult(FAILED, reason=f"exit status {status}: the device did not open or identify itself")
    support = data.get("smart_support")
    if isinstance(support, Mapping) and (support.get("available") is False or support.get("enabled") is False):
        what = "has no SMART" if support.get("available") is False else "has SMART disabled (smartctl -s on enables it)"
        return SmartResult(UNSUPPORTED, reason=f"the device {what}")
    reading = parse_reading(data, status)
    if not (reading.numbers or reading.self_tests or reading.temperatures or reading.scsi_errors):
        reason = (errors[0] if errors else f"exit status {status}, no SMART values")[:300]
        return SmartResult(FAILED, reading, reason=reason)
    return SmartResult(OK, reading)


def json_values(text: str) -> int:
    """About how many values a JSON text holds (every value but a container's first follows a comma;
    containers counted too), counted without parsing it."""
    return text.count(",") + text.count("{") + text.count("[")


def _json_object(text: str) -> tuple[Any, str]:
    """smartctl's JSON (None when there is none), and why it was not parsed when it was too big."""
    if (values := json_values(text)) > MAX_JSON_VALUES:
        return None, f"about {values} JSON values (a disk's report holds a few thousand; at most {MAX_JSON_VALUES} " \
                     f"are parsed)"
    try:
        return (json.loads(text) if text.strip() else None), ""
    except (ValueError, RecursionError):
        return None, ""


def parse_reading(data: Mapping[str, Any], exit_status: int = 0) -> SmartReading:
    """A `SmartReading` from smartctl's JSON object; fields of the wrong type or missing are left out."""
    device = _mapping(data.get("device"))
    protocol = _text(device.get("protocol"))
    numbers: dict[str, float] = {}
    temperatures: dict[tuple[str, str], float] = {}
    passed = _mapping(data.get("smart_status")).get("passed")
    if isinstance(passed, bool):
        numbers["healthy"] = 1 if passed else 0
    temperature = _mapping(data.get("temperature"))
    _put(numbers, "temperature", _degrees(temperature.get("current")))
    limit = (_degrees(temperature.get("op_limit_max"))
             or _degrees(temperature.get("drive_trip"))
             or _degrees(_mapping(data.get("scsi_temperature")).get("drive_trip")))
    _put(numbers, "temperature_limit", limit)
    for key, extreme, period in TEMPERATURE_EXTREMES:
        if (degrees := _degrees(temperature.get(key))) is not None:
            temperatures[(extreme, period)] = degrees
    power_on = _mapping(data.get("power_on_time"))
    hours = _number(power_on.get("hours"))
    if hours is not None:
        numbers["power_on_seconds"] = hours * 3600 + (_number(power_on.get("minutes")) or 0) * 60
    _put(numbers, "power_cycles", _number(data.get("power_cycle_count")))
    _ata(data, numbers)
    _nvme(data, numbers)
    scsi_errors = _scsi(data, numbers)
    return SmartReading(protocol, _text(device.get("type")),
                        _text(data.get("model_name")) or _text(data.get("scsi_model_name")),
                        _text(data.get("serial_number")),
                        _text(data.get("firmware_version")) or _text(data.get("scsi_revision")),
                        _media(protocol, data.get("rotation_rate")), exit_status,
                        _number(_mapping(data.get("local_time")).get("time_t")), numbers, temperatures, scsi_errors,
                        _self_tests(data, hours))


def _media(protocol: str, rotation_rate: Any) -> str:
    """The drive's own word on whether it spins (the kernel's `rotational` is often wrong behind USB)."""
    if protocol == "NVMe":
        return "ssd"
    rpm = _number(rotation_rate)
    return "" if rpm is None else "hdd" if rpm > 0 else "ssd"


def _ata(data: Mapping[str, Any], numbers: dict[str, float]) -> None:
    table = _mapping(data.get("ata_smart_attributes")).get("table")
    by_id = {entry.get("id"): entry for entry in _entries(table)}
    for attribute, key, bits in ATA_ATTRIBUTES:
        raw = _number(_mapping(_mapping(by_id.get(attribute)).get("raw")).get("value"))
        if raw is not None:
            numbers[key] = int(raw) & ((1 << bits) - 1)


def _nvme(data: Mapping[str, Any], numbers: dict[str, float]) -> None:
    log = _mapping(data.get("nvme_smart_health_information_log"))
    if not log:
        return
    _put(numbers, "nvme_critical_warning", _number(log.get("critical_warning")))
    for field, key in NVME_COUNTERS:
        _put(numbers, key, _number(log.get(field)))
    for field, key in NVME_RATIOS:
        percent = _number(log.get(field))
        _put(numbers, key, None if percent is None else percent / 100)
    for field, key in NVME_BYTES:
        units = _number(log.get(field))
        _put(numbers, key, None if units is None else units * NVME_DATA_UNIT_BYTES)


def _scsi(data: Mapping[str, Any], numbers: dict[str, float]) -> dict[tuple[str, str], int]:
    _put(numbers, "grown_defects", _number(data.get("scsi_grown_defect_list")))
    counters = _mapping(data.get("scsi_error_counter_log"))
    out: dict[tuple[str, str], int] = {}
    for operation in SCSI_OPERATIONS:
        log = _mapping(counters.get(operation))
        for field, kind in (("total_errors_corrected", "corrected"), ("total_uncorrected_errors", "uncorrected")):
            if (count := _number(log.get(field))) is not None:
                out[(operation, kind)] = int(count)
    return out


def _self_tests(data: Mapping[str, Any], power_on_hours: float | None) -> dict[str, SelfTest]:
    """The newest self-test of each type, from whichever log the protocol has."""
    found: dict[str, SelfTest] = {}
    now = None if power_on_hours is None else int(power_on_hours)

    def add(kind: str, result: str, hours: float | None, wrap: int | None = None) -> None:
        if kind in found:  # logs list the newest first
            return
        ago = None
        if now is not None and hours is not None:
            ago = (now - int(hours)) % wrap if wrap and now >= wrap else max(0, now - int(hours))
        found[kind] = SelfTest(kind, result, ago)

    ata_log = _mapping(_mapping(data.get("ata_smart_self_test_log")).get("standard"))
    for entry in _entries(ata_log.get("table")):
        code = _number(_mapping(entry.get("type")).get("value"))
        status = _number(_mapping(entry.get("status")).get("value"))
        if code is None or status is None:
            continue
        add(_ata_test_type(int(code)), ATA_TEST_RESULTS.get(int(status) >> 4, "unknown"),
            _number(entry.get("lifetime_hours")), ATA_SELF_TEST_HOURS)
    for entry in _entries(_mapping(data.get("nvme_self_test_log")).get("table")):
        code = _number(_mapping(entry.get("self_test_code")).get("value"))
        result = _number(_mapping(entry.get("self_test_result")).get("value"))
        if code is None or result is None or result == 15:  # 15: an unused entry
            continue
        add(NVME_TEST_TYPES.get(int(code), "other"), NVME_TEST_RESULTS.get(int(result), "unknown"),
            _number(entry.get("power_on_hours")))
    for number in range(20):
        entry = _mapping(data.get(f"scsi_self_test_{number}"))
        if not entry:
            break
        code = _number(_mapping(entry.get("code")).get("value"))
        result = _number(_mapping(entry.get("result")).get("value"))
        if code is None or result is None:
            continue
        add(SCSI_TEST_TYPES.get(int(code), "other"), SCSI_TEST_RESULTS.get(int(result), "unknown"),
            _number(_mapping(entry.get("power_on_time")).get("hours")))
    return found


def _ata_test_type(code: int) -> str:
    kind = ATA_TEST_TYPES.get(code & 0x7f)  # 0x8N: the same test run in captive mode
    if kind is not None:
        return kind
    return "vendor" if 0x40 <= code <= 0x7e or code >= 0x90 else "other"


# --- typed access to untrusted JSON --------------------------------------------------------

def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [entry for entry in value if isinstance(entry, Mapping)] if isinstance(value, list) else []


def _number(value: Any, signed: bool = False) -> float | None:
    """A JSON number smartctl reported (never a bool), non-negative unless `signed`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value < 0 and not signed:
        return None
    return value


def _degrees(value: Any) -> float | None:
    """A temperature as a sensor can report it (TEMPERATURE_RANGE); another is left out."""
    degrees = _number(value, signed=True)
    return degrees if degrees is not None and TEMPERATURE_RANGE[0] <= degrees <= TEMPERATURE_RANGE[1] else None


def _text(value: Any) -> str:
    return value.strip()[:200] if isinstance(value, str) else ""


def _put(numbers: dict[str, float], key: str, value: float | None) -> None:
    if value is not None:
        numbers[key] = value


def _status(data: Mapping[str, Any], returncode: int) -> int:
    status = _mapping(data.get("smartctl")).get("exit_status")
    return status if isinstance(status, int) and not isinstance(status, bool) and 0 <= status <= 255 else returncode


def _messages(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(_text(m.get("string")), _text(m.get("severity"))) for m in _entries(_mapping(data.get("smartctl")).get("messages"))]


def _power_mode(data: Mapping[str, Any]) -> str:
    name = _text(_mapping(data.get("power_mode")).get("name"))
    if name:
        return name
    for text, _ in _messages(data):
        if match := _POWER_MODE.search(text):
            return match[1]
    return ""


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""
