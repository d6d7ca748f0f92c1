"""sources/smart.py: smartctl's JSON (tests/fixtures/smart, written from smartmontools' schema) to values,
its exit status to a disk's state, and hostile or broken output to a clear failure."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import FIXTURES
from zfsnas.sources.commands import CommandRunner
from zfsnas.sources.model import SourceError
from zfsnas.sources.smart import (
    FAILED,
    OK,
    STANDBY,
    UNSUPPORTED,
    SmartctlMissing,
    interpret,
    read_disk,
    smartctl_argv,
)

SMART = FIXTURES / "smart"


def fixture(name: str) -> dict:
    return json.loads((SMART / name).read_text())


def result(name: str, data: dict | None = None):
    data = fixture(name) if data is None else data
    return interpret(data["smartctl"]["exit_status"], json.dumps(data))


def test_argv_never_wakes_a_disk_and_asks_for_json():
    assert smartctl_argv("/dev/sdb") == ["smartctl", "--json=c", "--nocheck=standby,3", "--all", "--log=scttempsts",
                                         "/dev/sdb"]
    assert smartctl_argv("/dev/sde", "sat") == ["smartctl", "--json=c", "--nocheck=standby,3", "--all",
                                                "--log=scttempsts", "--device=sat", "/dev/sde"]


def test_sata_hdd():
    found = result("sata-hdd.json")
    assert found.state == OK and found.reason == ""
    reading = found.reading
    assert (reading.protocol, reading.device_type, reading.model, reading.serial, reading.firmware, reading.media) == \
        ("ATA", "sat", "WDC WD40EFRX-68N32N0", "WD-WCC7K1AAAAAA", "82.00A82", "hdd")
    assert reading.read_at == 1795752000
    assert reading.numbers == {"healthy": 1, "temperature": 33, "temperature_limit": 60, "power_on_seconds": 26300 * 3600,
                               "power_cycles": 41, "reallocated_sectors": 0, "pending_sectors": 0,
                               "offline_uncorrectable_sectors": 0, "udma_crc_errors": 0}
    assert reading.temperatures == {("min", "power_cycle"): 24, ("max", "power_cycle"): 36, ("min", "lifetime"): 18,
                                    ("max", "lifetime"): 47}
    assert reading.self_tests["short"] == ("short", "passed", 10)       # newest short: 26300 - 26290 hours
    assert reading.self_tests["extended"] == ("extended", "passed", 150)


def test_sata_ssd_temperature_from_attribute_190_and_crc_errors():
    reading = result("sata-ssd.json").reading
    assert reading.media == "ssd"  # rotation_rate 0
    assert reading.numbers["temperature"] == 31 and reading.numbers["udma_crc_errors"] == 2
    assert reading.numbers["reported_uncorrectable_errors"] == 0 and "pending_sectors" not in reading.numbers
    assert reading.self_tests == {"short": ("short", "passed", 10)}


def test_failing_disk_pending_sectors_grow_and_its_short_test_failed():
    first, second = result("failing-1.json").reading, result("failing-2.json").reading
    assert (first.numbers["pending_sectors"], second.numbers["pending_sectors"]) == (8, 24)
    assert (first.numbers["offline_uncorrectable_sectors"], second.numbers["offline_uncorrectable_sectors"]) == (8, 24)
    assert (first.numbers["reallocated_sectors"], second.numbers["reallocated_sectors"]) == (8, 16)
    assert second.read_at - first.read_at == 86400
    assert first.numbers["healthy"] == 1  # the overall assessment still passes: the counters warn first
    assert first.exit_status == 192  # bits 6 and 7: error log and self-test log hold errors
    assert first.self_tests["short"] == ("short", "failed", 10) and first.self_tests["extended"].result == "passed"


def test_sas_disk():
    reading = result("sas.json").reading
    assert (reading.protocol, reading.model, reading.firmware, reading.serial) == \
        ("SCSI", "SEAGATE ST4000NM0025", "E002", "ZA1B2C3D")
    assert reading.numbers == {"healthy": 1, "temperature": 34, "temperature_limit": 60, "grown_defects": 3,
                               "power_on_seconds": 31500 * 3600 + 12 * 60}
    assert reading.scsi_errors == {("read", "corrected"): 123456801, ("read", "uncorrected"): 0,
                                   ("write", "corrected"): 0, ("write", "uncorrected"): 0,
                                   ("verify", "corrected"): 2346, ("verify", "uncorrected"): 1}
    assert reading.self_tests == {"short": ("short", "passed", 20), "extended": ("extended", "passed", 200)}


def test_nvme():
    reading = result("nvme.json").reading
    assert reading.protocol == "NVMe" and reading.device_type == "nvme" and reading.media == "ssd"
    numbers = reading.numbers
    assert numbers["nvme_critical_warning"] == 0 and numbers["nvme_available_spare_ratio"] == 1.0
    assert numbers["nvme_available_spare_threshold_ratio"] == 0.1 and numbers["nvme_endurance_used_ratio"] == 0.03
    assert numbers["nvme_written_bytes"] == 39062500 * 512000 == 20 * 10**12
    assert numbers["nvme_read_bytes"] == 25 * 10**12
    assert numbers["nvme_unsafe_shutdowns"] == 37 and numbers["nvme_media_errors"] == 0
    assert numbers["power_on_seconds"] == 9876 * 3600 and numbers["power_cycles"] == 512
    assert numbers["temperature"] == 41 and numbers["temperature_limit"] == 82  # 7.5: the warning temperature
    assert reading.self_tests == {"short": ("short", "passed", 26), "extended": ("extended", "aborted", 176)}


def test_nvme_self_test_table_with_holes_and_unused_entries():
    data = fixture("nvme.json")
    table = data["nvme_self_test_log"]["table"]
    data["nvme_self_test_log"]["table"] = [None, {**table[0], "self_test_result": {"value": 15}}, table[1]]
    assert result("nvme.json", data).reading.self_tests == {"extended": ("extended", "aborted", 176)}


def test_sleeping_disk_is_not_read():
    found = result("standby.json")
    assert found.state == STANDBY and found.reading is None and found.reason == "in STANDBY mode: not woken"
    data = fixture("standby.json")  # 7.5 names the mode in power_mode too
    data["power_mode"] = {"ata_value": 0, "name": "STANDBY_Y"}
    assert result("standby.json", data).reason == "in STANDBY_Y mode: not woken"


def test_unknown_usb_bridge_asks_for_a_device_type_and_sat_reads_it():
    bridge = result("usb-unknown-bridge.json")
    assert bridge.state == UNSUPPORTED and bridge.needs_device_type
    assert bridge.reason == "/dev/sde: Unknown USB bridge [0x152d:0x0578 (0x508)]"
    behind = result("usb-sat.json").reading
    assert behind.model == "WDC WD20SPZX-22UA7T0" and behind.numbers["temperature"] == 38


def test_virtio_has_no_smart_and_a_refused_open_says_so():
    assert result("virtio.json")[:3] == (UNSUPPORTED, None, "/dev/vda: Unable to detect device type")
    denied = result("denied.json")
    assert denied.state == FAILED and denied.denied and "Permission denied" in denied.reason


def test_smart_unavailable_or_disabled_is_unsupported():
    data = fixture("sata-hdd.json")
    data["smart_support"] = {"available": False}
    assert result("sata-hdd.json", data)[:3] == (UNSUPPORTED, None, "the device has no SMART")
    data["smart_support"] = {"available": True, "enabled": False}
    assert "SMART disabled" in result("sata-hdd.json", data).reason


def test_ata_self_test_hours_wrap_at_16_bits():
    data = fixture("sata-hdd.json")
    data["power_on_time"] = {"hours": 70000}
    data["ata_smart_self_test_log"]["standard"]["table"][0]["lifetime_hours"] = (70000 - 5) % 65536
    assert result("sata-hdd.json", data).reading.self_tests["short"].hours_ago == 5


@pytest.mark.parametrize("stdout, why", [
    ("", "no output"),
    ("Smartctl open device: garbage", "Smartctl open device: garbage"),
    ("[1, 2, 3]", "[1, 2, 3]"),
    ("{" * 100000 + "}" * 100000, "exit status 1"),  # nesting deeper than the parser's recursion limit
])
def test_output_that_is_not_a_json_object_is_a_failure(stdout, why):
    found = interpret(1, stdout)
    assert found.state == FAILED and "printed no JSON object (exit status 1" in found.reason
    assert why[:50] in found.reason or why == "exit status 1"


def test_wrong_types_and_impossible_numbers_are_left_out():
    data = fixture("sata-hdd.json")
    data["temperature"].update({"current": "hot", "lifetime_max": True, "power_cycle_max": float("nan"),
                                "op_limit_max": None})
    data["power_on_time"] = {"hours": -5}
    data["power_cycle_count"] = 10**400  # a number no float holds: kept exact here, dropped by the renderer
    data["smart_status"] = {"passed": "yes"}
    data["ata_smart_attributes"]["table"][3] = {"id": 5, "raw": {"value": "8"}}
    data["ata_smart_self_test_log"] = {"standard": {"table": ["x", {"type": {"value": 1}}]}}
    reading = interpret(0, json.dumps(data)).reading  # NaN written as Python's json writes (and reads) it
    assert "temperature" not in reading.numbers and "healthy" not in reading.numbers
    assert "temperature_limit" not in reading.numbers
    assert "power_on_seconds" not in reading.numbers and "reallocated_sectors" not in reading.numbers
    assert reading.temperatures == {("min", "power_cycle"): 24, ("min", "lifetime"): 18}
    assert reading.numbers["power_cycles"] == 10**400 and reading.self_tests == {}
    assert reading.numbers["pending_sectors"] == 0  # the rest of the table is still read


def test_a_prefix_without_smartctl_says_it_is_missing():
    with pytest.raises(SmartctlMissing, match="smartctl not found: nsenter: failed to execute smartctl"):
        interpret(127, "", "nsenter: failed to execute smartctl: No such file or directory\n")


def standin(*options: str, timeout: float = 30.0, max_output: int | None = None) -> CommandRunner:
    prefix = [sys.executable, str(FIXTURES / "commands" / "standin.py"), *options, str(SMART / "awake")]
    return CommandRunner(prefix, timeout, *(() if max_output is None else (max_output,)))


def test_read_disk_through_the_command_runner():
    assert read_disk(standin().complete, "/dev/sdb").reading.serial == "WD-WCC7K1AAAAAA"
    assert read_disk(standin().complete, "/dev/sde").needs_device_type
    assert read_disk(standin().complete, "/dev/sde", "sat").reading.model == "WDC WD20SPZX-22UA7T0"


def test_a_hung_smartctl_is_that_disk_s_failure():
    found = read_disk(standin("--sleep", "30", timeout=0.5).complete, "/dev/sdb")
    assert found.state == FAILED and "timed out after 0.5s and was killed" in found.reason


def test_a_huge_output_is_cut_and_fails():
    found = read_disk(standin(max_output=4096).complete, "/dev/sdb")
    assert found.state == FAILED and "printed more than 4096 bytes" in found.reason


def test_no_smartctl_at_all_raises_missing():
    def absent(argv):
        raise SourceError("smartctl: command not found")

    with pytest.raises(SmartctlMissing):
        read_disk(absent, "/dev/sdb")
