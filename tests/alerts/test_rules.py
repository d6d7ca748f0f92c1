"""The rule file passes promtool, every alert is well formed and tested both ways, Alertmanager's config passes amtool."""

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "zfsnas.rules.yml"
TESTS = sorted((ROOT / "alerts" / "tests").glob("*.yml"))
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_URL = "https://github.com/zfsnas/zfsnas/blob/main/docs/runbook.md#"


def tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.fail(f"{name} is not installed: run ./dev test, which installs Debian's prometheus packages")
    return path


def run(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def github_anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def test_promtool_check_rules():
    result = run(tool("promtool"), "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_test_rules():
    # One promtool per file, as many at once as there are CPUs: the long histories take seconds each.
    promtool = tool("promtool")
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda path: run(promtool, "test", "rules", str(path)), TESTS))
    failed = [r.stdout + r.stderr for r in results if r.returncode != 0 or "SUCCESS" not in r.stdout]
    assert not failed, "\n".join(failed)


def test_promtool_test_rules_can_fail(tmp_path):
    """A 25 % threshold must break the regression test: the tests look at the threshold."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "zfsnas.rules.yml").write_text(RULES.read_text().replace("vector(0.15)", "vector(0.25)"))
    shutil.copy(ROOT / "alerts" / "tests" / "benchmarks.yml", tmp_path / "tests")
    result = run(tool("promtool"), "test", "rules", str(tmp_path / "tests" / "benchmarks.yml"))
    assert result.returncode != 0 and "ZfsBenchThroughputRegression" in result.stdout + result.stderr


def test_every_alert_is_complete():
    found = alerts()
    assert len(found) >= 17
    runbook_anchors = {github_anchor(h) for h in re.findall(r"^#+ (.+)$", RUNBOOK.read_text(), re.M)}
    for rule in found:
        name = rule["alert"]
        # The watchdog is no problem to act on: severity none, as receivers route dead man's switches.
        assert rule["labels"]["severity"] in ({"none"} if name == "ZfsWatchdog" else {"critical", "warning", "info"}), name
        annotations = rule["annotations"]
        assert annotations["summary"] and "{{ $value" in annotations["description"], name
        assert annotations["runbook_url"] == RUNBOOK_URL + name.lower(), name
        assert name.lower() in runbook_anchors, f"docs/runbook.md has no section {name}"


def test_every_alert_has_a_firing_and_a_silent_case():
    fired, silent = set(), set()
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (fired if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in alerts()}
    # A silent case is either its own eval with no alert or, where a test lists the alerts that fire,
    # input series in the same case that must not fire (commented in the test files).
    assert names <= fired, f"never fires in a test: {names - fired}"
    assert names - silent <= {"ZfsPoolNotOnline", "ZfsPoolCapacityCritical", "ZfsL2arcHeaderRamHigh",
                              "ZfsWriteThrottleDelaying", "ZfsExporterDown", "ZfsExporterCollectorFailing",
                              "ZfsExporterSourceFailing", "ZfsDatasetQuotaNearlyFull", "ZfsWatchdog"}


def test_long_histories_evaluate_every_group_in_order():
    """promtool evaluates the groups of a test in random order unless told (group_eval_order): where
    rules are evaluated further apart than the 5-minute lookback, an alert would then read the
    thresholds or recording rules of another group only when that group happened to run first. A
    new group (SMART, ...) must be added to these lists."""
    groups = [g["name"] for g in yaml.safe_load(RULES.read_text())["groups"]]
    for path in TESTS:
        test = yaml.safe_load(path.read_text())
        seconds = {"m": 60, "h": 3600}[test["evaluation_interval"][-1]] * int(test["evaluation_interval"][:-1])
        if seconds > 300:
            assert test.get("group_eval_order") == groups, path.name


def test_amtool_check_config():
    result = run(tool("amtool"), "check-config", str(ROOT / "deploy" / "alertmanager" / "alertmanager.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_prometheus_config_as_the_container_sees_it(tmp_path):
    """/etc/prometheus/prometheus.yml with the rule file mounted under rules/, as in docker-compose.yml."""
    shutil.copy(ROOT / "deploy" / "prometheus" / "prometheus.yml", tmp_path / "prometheus.yml")
    (tmp_path / "rules").mkdir()
    shutil.copy(RULES, tmp_path / "rules" / "zfsnas.rules.yml")
    result = run(tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout
    # Prometheus scrapes itself too (ZfsRemoteWriteStalled reads its queue metrics), as the same NAS.
    config = yaml.safe_load((tmp_path / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job["static_configs"] for job in config["scrape_configs"]}
    assert jobs.keys() == {"zfsnas", "node", "prometheus"}
    assert jobs["prometheus"] == [{"targets": ["127.0.0.1:9090"], "labels": {"instance": "nas"}}]
    assert {c[0]["labels"]["instance"] for c in jobs.values()} == {"nas"}
