"""alerts/thresholds.toml is the one place of the numbers and schedules the alerts and the dashboards
compare with: alerts/generate.py turns it into the zfsnas.thresholds group, the alerts read only
that group, the dashboards read the file, and a schedule of one's own ([[scrub_schedule]],
[[snapshot_schedule]]) reaches the per-pool and per-dataset thresholds promtool evaluates."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.dashboards.queries import load, panels

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "zfsnas.rules.yml"
SHARED = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())
NUMBERS = {key: value for key, value in SHARED.items() if isinstance(value, int | float)}


def generator():
    spec = importlib.util.spec_from_file_location("zfsnas_alerts_generate", ROOT / "alerts" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def groups() -> dict[str, list[dict]]:
    return {g["name"]: g["rules"] for g in yaml.safe_load(RULES.read_text())["groups"]}


def hand_written_rules() -> list[dict]:
    return [rule for name, rules in groups().items() if name != "zfsnas.thresholds" for rule in rules]


def test_the_generated_group_is_what_thresholds_toml_says(tmp_path):
    module = generator()
    assert module.main(["--check"]) == 0, "alerts/zfsnas.rules.yml is stale: run .venv/bin/python alerts/generate.py"
    generated = {rule["record"]: rule["expr"] for rule in groups()["zfsnas.thresholds"]}
    assert generated == {f"zfsnas:{key}:threshold": f"vector({value})" for key, value in NUMBERS.items()}
    stale = tmp_path / "rules.yml"
    stale.write_text(RULES.read_text().replace("vector(0.15)", "vector(0.25)"))
    assert module.main(["--check", "--rules", str(stale)]) == 1
    assert module.main(["--rules", str(stale)]) == 0 and stale.read_text() == RULES.read_text()


def test_every_threshold_is_read_by_a_rule_and_no_alert_carries_its_own():
    exprs = "\n".join(rule["expr"] for rule in hand_written_rules())
    unused = [key for key in NUMBERS if f"zfsnas:{key}:threshold" not in exprs]
    assert not unused, f"thresholds.toml numbers no rule reads: {unused}"
    # What is left literal in an alert: counts, unit conversions, 0/1 states and the 16 s the kernel
    # reports for an unsynchronised clock; 84 = half the hourly points of a week (ZfsPoolMissing).
    allowed = {"0", "1", "2", "4", "16", "84", "3600", "86400"}
    for rule in hand_written_rules():
        if "alert" in rule:
            # no strings, ranges, durations or names
            expr = re.sub(r'"[^"]*"|\[[^\]]*\]|\b\d+(?:ms|[smhdwy])\b|[A-Za-z_:][A-Za-z0-9_:]*', " ", rule["expr"])
            literals = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", expr)) - allowed
            assert not literals, f"{rule['alert']} compares with {literals}: put them into alerts/thresholds.toml"


def test_selectors_match_the_rules():
    found = {rule.get("alert") or rule["record"]: rule for rule in hand_written_rules()}
    assert f'up{{job="{SHARED["exporter_job"]}"}}' in found["ZfsExporterDown"]["expr"]
    assert f'job:up:vanished{{job="{SHARED["exporter_job"]}"}}' in found["ZfsExporterAbsent"]["expr"]
    assert f'up{{job="{SHARED["node_job"]}"}}' in found["ZfsHostDown"]["expr"]
    assert f'job:up:vanished{{job="{SHARED["node_job"]}"}}' in found["ZfsHostDown"]["expr"]
    assert found["job:up:last_seen_timestamp_seconds"]["expr"].count(
        f'up{{job=~"{SHARED["exporter_job"]}|{SHARED["node_job"]}"}}') == 1
    alerts = [name for name, rule in found.items() if "alert" in rule]
    assert all(re.fullmatch(SHARED["alert_name_regex"], name) for name in alerts)
    assert SHARED["watchdog_alert"] in alerts and found[SHARED["watchdog_alert"]]["expr"] == "vector(1)"


def test_dashboards_use_the_shared_thresholds():
    overview = {p["title"]: p for p in panels(load("overview"))}
    steps = [s["value"] for s in overview["Pool capacity"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps == [None, SHARED["pool_capacity_warning"], SHARED["pool_capacity_critical"]]
    steps = [s["value"] for s in overview["Oldest scrub"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps[-1] == SHARED["scrub_max_age_days"] * 86400
    forecast = overview["Pool full forecast"]
    assert f"{SHARED['pool_full_forecast_days']} * (pool:zfs_pool_free_bytes:delta1d_median3d" in forecast["targets"][1]["expr"]
    assert forecast["targets"][1]["legendFormat"].endswith(f"in {SHARED['pool_full_forecast_days']} days")
    problems = overview["Exporter problems"]["targets"][0]["expr"]
    assert f"> bool {SHARED['exporter_source_max_age_seconds']}" in problems
    datasets = {p["title"]: p for p in panels(load("datasets"))}
    steps = [s["value"] for s in datasets["Newest snapshot age"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps == [None, SHARED["snapshot_max_age_days"] * 86400]
    for board in (overview, datasets):
        steps = [s["value"] for s in board["Quota used"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
        assert steps == [None, SHARED["dataset_quota_warning"]]
    firing = overview["Alerts firing"]["targets"][0]["expr"]
    assert f'alertname=~"{SHARED["alert_name_regex"]}", alertname!="{SHARED["watchdog_alert"]}"' in firing


SCHEDULES = """
[[scrub_schedule]]
pool = "usb-.*"
max_age_days = 100

[[snapshot_schedule]]
dataset = "tank/media(/.*)?"
max_age_days = 8

[[snapshot_schedule]]
dataset = "tank/.*"
max_age_days = 3
"""


def test_schedules_of_ones_own_reach_the_alerts(tmp_path):
    """A user's thresholds.toml with a scrub schedule for USB pools and snapshot schedules for
    datasets (first match wins), rendered into the rule file and evaluated by promtool
    (tests/alerts/schedules.yml says which alert it expects where)."""
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed: run ./dev test")
    (tmp_path / "thresholds.toml").write_text((ROOT / "alerts" / "thresholds.toml").read_text() + SCHEDULES)
    shutil.copy(RULES, tmp_path / "zfsnas.rules.yml")
    module = generator()
    assert module.main(["--thresholds", str(tmp_path / "thresholds.toml"), "--rules", str(tmp_path / "zfsnas.rules.yml")]) == 0
    generated = {g["name"]: g for g in yaml.safe_load((tmp_path / "zfsnas.rules.yml").read_text())["groups"]}
    exprs = {r["record"]: r["expr"] for r in generated["zfsnas.thresholds"]["rules"]}
    assert 'dataset=~"tank/media(/.*)?"' in exprs["zfsnas:dataset_snapshot_max_age_days:threshold"]
    shutil.copy(ROOT / "tests" / "alerts" / "schedules.yml", tmp_path / "schedules.yml")
    result = subprocess.run([promtool, "test", "rules", str(tmp_path / "schedules.yml")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    # The same history against the shipped file (no schedules) gives other verdicts: the test can fail.
    shutil.copy(RULES, tmp_path / "zfsnas.rules.yml")
    result = subprocess.run([promtool, "test", "rules", str(tmp_path / "schedules.yml")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0


@pytest.mark.parametrize(("toml", "message"), [
    ('[[snapshot_schedule]]\ndataset = "tank/media"\n', "give exactly `dataset`"),
    ('[[scrub_schedule]]\npool = "usb"\nmax_age_days = 0\n', "max_age_days must be a positive number"),
    ('[[scrub_schedule]]\npool = ""\nmax_age_days = 9\n', "`pool` must be a non-empty string"),
    ('scrub_schedule = 3\n', "must be a list of tables"),
    ('flag = true\n', "flag: a number or a string"),
])
def test_a_bad_threshold_file_is_refused_with_its_reason(tmp_path, capsys, toml, message):
    (tmp_path / "thresholds.toml").write_text(toml)
    shutil.copy(RULES, tmp_path / "zfsnas.rules.yml")
    module = generator()
    assert module.main(["--thresholds", str(tmp_path / "thresholds.toml"), "--rules", str(tmp_path / "zfsnas.rules.yml")]) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "zfsnas.rules.yml").read_text() == RULES.read_text()   # nothing half written
