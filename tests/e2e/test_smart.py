"""SMART in the guest (scenario.py `smart_phase`, results/smart/): what an exporter served of every
pool member against the guest's own `smartctl --json=c --all`, the self-test the scenario ran, the
standby check, and the scenario's own exporter serving SMART from its start (the steady moment).

QEMU 7.2 seen answering (docs/disks.md#smart): its AHCI disk (`ide-hd`) has ATA SMART (attributes
1, 3, 4, 5, 9, 12, 190, health, a self-test log it fills at once); `scsi-hd` says SMART is
unavailable; virtio has none; STANDBY IMMEDIATE is accepted but CHECK POWER MODE keeps answering
active/idle, so no emulated disk ever sleeps.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import samples
from tests.e2e.conftest import require_phase

pytestmark = pytest.mark.e2e

JOIN = ("device", "serial", "pool", "vdev_guid")
STATE_OF_BUS = {"sata": "ok", "scsi": "unsupported", "virtio": "unsupported"}


@pytest.fixture(scope="module")
def smart(results, config):
    require_phase(config, "smart")
    path = results / "smart"
    if not (path / "record.json").exists():
        pytest.fail(f"the guest did not run the SMART phase: see {results / 'scenario.log'}")
    return path


def read(path) -> dict:
    return samples(path.read_text())


def states(data: dict) -> dict[str, tuple[dict, str]]:
    """{device: (join labels, its state)} of zfs_disk_smart_state."""
    return {dict(k[1])["device"]: ({n: dict(k[1])[n] for n in JOIN}, dict(k[1])["state"])
            for k, v in data.items() if k[0] == "zfs_disk_smart_state" and v == 1}


def disk_info(data: dict) -> dict[str, dict]:
    return {dict(k[1])["device"]: dict(k[1]) for k in data if k[0] == "zfs_disk_info"}


def device_of(info: dict[str, dict], serial: str) -> str:
    [device] = [d for d, labels in info.items() if labels["serial"] == serial]
    return device


def served(data: dict, metric: str, join: dict, **extra) -> float:
    key = (metric, frozenset({**join, **extra}.items()))
    assert key in data, f"{metric}{ {**join, **extra} } not served"
    return data[key]


def check_every_pool_member(data: dict, config: dict, where: str, devices: list[str] | None = None) -> None:
    """Every pool member (or those of `devices`) has a state, labels equal to its zfs_disk_info and
    the state its bus gives under QEMU."""
    info, found = disk_info(data), states(data)
    by_serial = {labels["serial"]: device for device, labels in info.items()}
    for disk in config["disks"]:
        if devices is not None and by_serial.get(disk["serial"]) not in devices:
            continue
        device = device_of(info, disk["serial"])
        assert device in found, f"[{where}] no zfs_disk_smart_state for {device} ({disk['serial']})"
        join, state = found[device]
        assert join == {n: info[device][n] for n in JOIN}, f"[{where}] {device}: labels differ from zfs_disk_info"
        assert join["pool"] == disk["pool"], f"[{where}] {device}: pool {join['pool']!r}, expected {disk['pool']!r}"
        assert state == STATE_OF_BUS[disk["bus"]], f"[{where}] {device} ({disk['bus']}): state {state}"
    assert data[("zfs_exporter_collector_success", frozenset({("collector", "smart")}))] == 1, where


def test_the_phase_s_disks_are_read_and_joined_to_their_disk_info(smart, config):
    record = json.loads((smart / "record.json").read_text())
    data = read(smart / "metrics.txt")
    assert sorted(states(data)) == sorted(record["devices"])   # --disks.device-exclude left these four
    check_every_pool_member(data, config, "smart phase", record["devices"])


def test_the_scenario_s_exporter_serves_smart_from_its_start(moment, config):
    """The default collectors, as a user runs them, on every pool member: SMART read once at start
    (10-minute interval), its labels joined to the pools created after that read."""
    for name in ("steady", "degraded"):
        cap = moment(name)
        if not cap.collector_enabled("smart"):
            pytest.skip("collector 'smart' is not in this build of the exporter")
        check_every_pool_member(cap.metrics, config, name)


def test_served_values_are_smartctl_s_own(smart, config):
    data = read(smart / "metrics.txt")
    info, found = disk_info(data), states(data)
    compared = 0
    by_serial = {labels["serial"]: device for device, labels in info.items()}
    for disk in config["disks"]:
        device = by_serial.get(disk["serial"])
        if device is None:   # not one of the phase's four
            continue
        said = json.loads((smart / "smartctl" / f"{device}.json").read_text())
        join, state = found[device]
        if disk["bus"] == "scsi":   # QEMU's scsi-hd
            assert said["smart_support"] == {"available": False} and state == "unsupported"
            continue
        if disk["bus"] == "virtio":
            assert "Unable to detect device type" in said["smartctl"]["messages"][0]["string"]
            continue
        attributes = {a["id"]: a["raw"]["value"] for a in said["ata_smart_attributes"]["table"]}
        assert served(data, "zfs_disk_smart_temperature_celsius", join) == said["temperature"]["current"]
        assert served(data, "zfs_disk_smart_power_on_seconds_total", join) == said["power_on_time"]["hours"] * 3600
        assert served(data, "zfs_disk_smart_power_cycles_total", join) == said["power_cycle_count"]
        assert served(data, "zfs_disk_smart_healthy", join) == (1 if said["smart_status"]["passed"] else 0)
        assert served(data, "zfs_disk_smart_reallocated_sectors", join) == attributes[5]
        assert served(data, "zfs_disk_smart_info", join, protocol="ATA", device_type="sat",
                      model=said["model_name"], firmware=said["firmware_version"], media="hdd") == 1  # 7200 rpm
        assert served(data, "zfs_disk_smart_read_timestamp_seconds", join) <= said["local_time"]["time_t"]
        compared += 1
    assert compared == 2   # the self-tested and the standby SATA disks


def test_the_self_test_the_guest_ran_is_served(smart):
    record = json.loads((smart / "record.json").read_text())
    assert record["self_test"] == 0
    data = read(smart / "metrics.txt")
    join, state = states(data)[record["self_test_device"]]
    said = json.loads((smart / "smartctl" / f"{record['self_test_device']}.json").read_text())
    newest = said["ata_smart_self_test_log"]["standard"]["table"][0]
    assert newest["type"]["string"] == "Short offline" and newest["status"]["passed"] is True
    assert served(data, "zfs_disk_smart_self_test_info", join, type="short", result="passed") == 1
    assert ("zfs_disk_smart_self_test_age_seconds", frozenset({**join, "type": "short"}.items())) in data


def test_a_disk_put_to_standby_is_not_woken(smart):
    record = json.loads((smart / "record.json").read_text())
    after = read(smart / "metrics_standby.txt")
    join, state = states(after)[record["standby_device"]]
    assert record["standby_command"] == 0, record
    if "standby" not in record["power_after_standby"]:
        # The disk says it is awake, so the exporter must have read it: -n standby never hides an awake disk.
        assert state == "ok", (state, record)
        pytest.skip(f"QEMU's emulated disk does not sleep: after `hdparm -y` it reports "
                    f"{record['power_after_standby'].split(':')[-1].strip()!r}, so no sleeping disk to leave asleep")
    assert state == "standby", (state, record)
    assert "standby" in record["power_after_read"], f"the exporter's read woke the disk: {record}"


def test_smart_phase_cost(results, smart):
    timeline = json.loads((results / "timeline.json").read_text())
    record = json.loads((smart / "record.json").read_text())
    print(f"SMART phase in the guest: {timeline.get('smart_seconds', 0):.1f} s, "
          f"{timeline.get('smart_nominal_seconds', 0):.1f} nominal s "
          f"(first read of every disk {record.get('first_read_seconds')} s)")
    # nominal seconds (tests/e2e/guest/pace.py): what it would take on an idle host, so that a busy
    # host does not fail the phase's own cost
    assert timeline["smart_nominal_seconds"] < 60
