"""alerts/thresholds.toml is the one place of the numbers and selectors the rules and the dashboards
share: the rules carry the same numbers, and the generated dashboards use them."""

import re
import tomllib
from pathlib import Path

import yaml

from tests.dashboards.queries import load, panels

ROOT = Path(__file__).resolve().parents[2]
SHARED = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())


def rules() -> dict[str, dict]:
    groups = yaml.safe_load((ROOT / "alerts" / "zfsnas.rules.yml").read_text())["groups"]
    return {rule.get("alert") or rule["record"]: rule for group in groups for rule in group["rules"]}


def test_rules_use_the_shared_thresholds():
    found = rules()
    assert re.search(rf"> {SHARED['pool_capacity_warning']}$", found["ZfsPoolCapacityHigh"]["expr"])
    assert re.search(rf"> {SHARED['pool_capacity_critical']}$", found["ZfsPoolCapacityCritical"]["expr"])
    scrub = found["ZfsPoolScrubOverdue"]["expr"]
    days = SHARED["scrub_max_age_days"]
    assert scrub.count(f"[{days}d]") == 2 and f"/ 86400 > {days}\n" in scrub
    assert found["zfsnas:bench_regression_max_drop:threshold"]["expr"] == f"vector({SHARED['bench_regression_max_drop']})"
    assert found["ZfsDatasetQuotaNearlyFull"]["expr"].count(f"> {SHARED['dataset_quota_warning']}") == 2
    assert f'up{{job="{SHARED["exporter_job"]}"}}' in found["ZfsExporterDown"]["expr"]
    assert f"/ 86400 > {SHARED['snapshot_max_age_days']}\n" in found["ZfsDatasetSnapshotsStopped"]["expr"]
    alerts = [name for name, rule in found.items() if "alert" in rule]
    assert all(re.fullmatch(SHARED["alert_name_regex"], name) for name in alerts)
    assert SHARED["watchdog_alert"] in alerts and found[SHARED["watchdog_alert"]]["expr"] == "vector(1)"


def test_dashboards_use_the_shared_thresholds():
    overview = {p["title"]: p for p in panels(load("overview"))}
    steps = [s["value"] for s in overview["Pool capacity"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps == [None, SHARED["pool_capacity_warning"], SHARED["pool_capacity_critical"]]
    steps = [s["value"] for s in overview["Oldest scrub"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps[-1] == SHARED["scrub_max_age_days"] * 86400
    datasets = {p["title"]: p for p in panels(load("datasets"))}
    steps = [s["value"] for s in datasets["Newest snapshot age"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps == [None, SHARED["snapshot_max_age_days"] * 86400]
    firing = overview["Alerts firing"]["targets"][0]["expr"]
    assert f'alertname=~"{SHARED["alert_name_regex"]}", alertname!="{SHARED["watchdog_alert"]}"' in firing
