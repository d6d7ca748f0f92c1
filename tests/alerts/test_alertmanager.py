"""deploy/alertmanager/alertmanager.yml routes and inhibits as docs/runbook.md says, also for two NAS
that share an instance name and a pool name (docs/stack.md: both say `instance: nas`, both have a
pool `tank`, only the `nas` external label tells them apart).

`amtool config routes test` says which receiver a label set reaches; a real Alertmanager (Debian's
prometheus-alertmanager, on 127.0.0.1, the shipped file with the example webhook pointed at the
test's) shows what it groups, inhibits and delivers."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.alerts.test_rules import ROOT, run, tool
from tests.integration.test_stack import start_alertmanager

CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"


def receiver(**labels: str) -> str:
    result = run(tool("amtool"), "config", "routes", "test", f"--config.file={CONFIG}",
                 *[f"{name}={value}" for name, value in labels.items()])
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_the_watchdog_reaches_only_the_dead_mans_switch():
    assert receiver(alertname="ZfsWatchdog", severity="none") == "dead-mans-switch"
    assert receiver(alertname="ZfsWatchdog", severity="none", nas="a") == "dead-mans-switch"


@pytest.mark.parametrize("nas", ["a", "b", ""])
def test_problems_reach_the_admin(nas):
    for alertname, severity in (("ZfsPoolCapacityHigh", "warning"), ("ZfsPoolCapacityCritical", "critical"),
                                ("ZfsBenchThroughputRegression", "warning"), ("ZfsPoolResilvering", "info")):
        labels = {"alertname": alertname, "severity": severity, "instance": "nas", "pool": "tank"}
        assert receiver(**labels, **({"nas": nas} if nas else {})) == "nas-admin", labels


class Alertmanager:
    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/api/v2"

    def post(self, *alerts: dict) -> None:
        body = json.dumps([{"labels": labels, "annotations": {"summary": labels["alertname"]}}
                           for labels in alerts]).encode()
        request = urllib.request.Request(f"{self.url}/alerts", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

    def get(self, path: str) -> list[dict]:
        with urllib.request.urlopen(f"{self.url}/{path}", timeout=10) as response:
            return json.load(response)


def key(labels: dict) -> tuple[str, str]:
    return labels["alertname"], labels.get("nas", "")


NAS_A_CRITICAL = {"alertname": "ZfsPoolCapacityCritical", "severity": "critical", "nas": "a", "instance": "nas",
                  "job": "zfsnas", "pool": "tank"}
NAS_A_HIGH = {**NAS_A_CRITICAL, "alertname": "ZfsPoolCapacityHigh", "severity": "warning"}
NAS_B_HIGH = {**NAS_A_HIGH, "nas": "b"}
NAS_C_DOWN = {"alertname": "ZfsHostDown", "severity": "critical", "nas": "c", "instance": "nas", "job": "node"}
NAS_C_ABSENT = {"alertname": "ZfsExporterAbsent", "severity": "warning", "nas": "c", "instance": "nas", "job": "zfsnas"}
NAS_D_ABSENT = {**NAS_C_ABSENT, "nas": "d"}
WATCHDOG = {"alertname": "ZfsWatchdog", "severity": "none"}


def test_two_nas_with_one_instance_and_pool_name_stay_apart(tmp_path):
    """NAS a's pool is over 90 % and over 80 %, NAS b's tank (same instance, same pool name) over
    80 %: a's warning is inhibited by a's critical, b's is not and reaches the receiver in a group of
    its own; NAS c is down (its exporter's absence is inhibited), NAS d only lost its exporter."""
    started: list = []
    try:
        webhook, port = start_alertmanager(tmp_path, started)
        am = Alertmanager(port)
        am.post(NAS_A_CRITICAL, NAS_A_HIGH, NAS_B_HIGH, NAS_C_DOWN, NAS_C_ABSENT, NAS_D_ABSENT, WATCHDOG)
        alerts = {key(a["labels"]): a for a in am.get("alerts")}
        assert len(alerts) == 7
        by_fingerprint = {a["fingerprint"]: k for k, a in alerts.items()}
        inhibited = {k: [by_fingerprint[f] for f in a["status"]["inhibitedBy"]]
                     for k, a in alerts.items() if a["status"]["inhibitedBy"]}
        assert inhibited == {("ZfsPoolCapacityHigh", "a"): [("ZfsPoolCapacityCritical", "a")],
                             ("ZfsExporterAbsent", "c"): [("ZfsHostDown", "c")]}
        assert alerts[("ZfsWatchdog", "")]["receivers"] == [{"name": "dead-mans-switch"}]
        assert alerts[("ZfsPoolCapacityHigh", "b")]["receivers"] == [{"name": "nas-admin"}]
        groups = {(g["labels"]["alertname"], g["labels"].get("nas", "")): g for g in am.get("alerts/groups")}
        assert {k for k in groups if k[0] == "ZfsPoolCapacityHigh"} == {("ZfsPoolCapacityHigh", "a"),
                                                                        ("ZfsPoolCapacityHigh", "b")}
        assert groups[("ZfsPoolCapacityHigh", "b")]["labels"] == {"alertname": "ZfsPoolCapacityHigh", "nas": "b",
                                                                  "instance": "nas", "pool": "tank"}
        # What the receiver gets: every alert but the inhibited ones and the watchdog.
        expected = {("ZfsPoolCapacityCritical", "a"), ("ZfsPoolCapacityHigh", "b"), ("ZfsHostDown", "c"),
                    ("ZfsExporterAbsent", "d")}
        deadline = time.monotonic() + 20
        while {key(a["labels"]) for a in webhook.alerts} != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # further group intervals (1 s in the test): nothing else arrives
        assert {key(a["labels"]) for a in webhook.alerts} == expected
    finally:
        for daemon in reversed(started):
            daemon.stop()
