"""The SMART rules (group zfsnas.smart) carry alerts/thresholds.toml's numbers, and the opt-in self-test
rule's documented value is the file's."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SHARED = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())


def smart_rules() -> dict[str, dict]:
    groups = yaml.safe_load((ROOT / "alerts" / "zfsnas.rules.yml").read_text())["groups"]
    [group] = [g for g in groups if g["name"] == "zfsnas.smart"]
    return {rule["alert"]: rule for rule in group["rules"]}


def test_smart_rules_use_the_shared_thresholds():
    rules = smart_rules()
    temperature = rules["ZfsDiskTemperatureHigh"]["expr"]
    # the drive's own limit first, else the shared one for its media (SSDs and NVMe, then the rest)
    assert re.search(r'media="ssd"}\[10m\]\)\)\s+\* 0 \+ scalar\(zfsnas:disk_temperature_ssd_max:threshold\)', temperature)
    assert re.search(r'temperature_celsius\[10m\]\)\)\s+\* 0 \+ scalar\(zfsnas:disk_temperature_hdd_max:threshold\)', temperature)
    assert temperature.index("zfs_disk_smart_temperature_limit_celsius") < temperature.index("disk_temperature_ssd_max")
    description = rules["ZfsDiskTemperatureHigh"]["annotations"]["description"]
    assert f"{SHARED['disk_temperature_hdd_max']} °C for disks that spin" in description
    assert f"{SHARED['disk_temperature_ssd_max']} °C for SSDs" in description
    assert rules["ZfsNvmeWearHigh"]["expr"].endswith("zfsnas:nvme_endurance_used_warning:threshold")


def test_the_opt_in_self_test_threshold_is_documented_with_the_shared_value():
    rules = smart_rules()
    assert "zfsnas:smart_self_test_max_age_days:threshold" in rules["ZfsDiskSelfTestOverdue"]["expr"]
    days = SHARED["opt_in"]["smart_self_test_max_age_days"]
    assert f"expr: vector({days})" in (ROOT / "docs" / "runbook.md").read_text()
    tests = yaml.safe_load((ROOT / "alerts" / "tests" / "smart.yml").read_text())["tests"]
    opted_in = [s for case in tests for s in case["input_series"]
                if s["series"] == "zfsnas:smart_self_test_max_age_days:threshold"]
    assert opted_in and all(s["values"].startswith(f"{days}x") for s in opted_in)
    # Nothing ships the rule: without the user's, the alert never fires.
    text = (ROOT / "alerts" / "zfsnas.rules.yml").read_text()
    assert "record: zfsnas:smart_self_test_max_age_days:threshold" not in text


def test_the_disks_dashboard_uses_the_shared_thresholds():
    """Temperatures are coloured against each disk's own limit (the drive's, else the shared one for
    its media, in device:zfs_disk_temperature_limit:celsius); the self-test age is not coloured while
    its alert waits in [opt_in] (an opt-in alert's limit is no warning until the user turns it on)."""
    from tests.dashboards.queries import load, panels

    table = next(p for p in panels(load("disks")) if p["title"] == "Disk health")
    overrides = {o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
                 for o in table["fieldConfig"]["overrides"]}
    steps = [s["value"] for s in overrides["of limit"]["thresholds"]["steps"]]
    assert steps == [None, 0.9, 1]
    assert "thresholds" not in overrides["temperature"]
    assert "smart_self_test_max_age_days" not in SHARED and "thresholds" not in overrides["self-test age"]
    groups = yaml.safe_load((ROOT / "alerts" / "zfsnas.rules.yml").read_text())["groups"]
    [limit] = [r["expr"] for g in groups for r in g["rules"] if r.get("record") == "device:zfs_disk_temperature_limit:celsius"]
    assert "zfs_disk_smart_temperature_limit_celsius > 0" in limit
    assert "zfsnas:disk_temperature_ssd_max:threshold" in limit and "zfsnas:disk_temperature_hdd_max:threshold" in limit
    temperature = next(p for p in panels(load("disks")) if p["title"] == "Temperature by pool")
    assert f"{SHARED['disk_temperature_hdd_max']} °C for disks that spin" in temperature["description"]
