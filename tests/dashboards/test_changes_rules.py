"""The zfsnas.changes rules as shipped (60-minute windows, 1-minute steps) on seeded histories,
evaluated by promtool (Prometheus's own rule engine, every minute over hours of simulated time):
for every change of every history, each signal's before and after value is the one the history was
built with, or NaN ("too little activity") where its window held too little activity.

tests/integration/test_changes_view.py drives the same kind of histories through a real Prometheus
and the dashboards' own queries; this file proves the shipped numbers (windows of an hour)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.dashboards.histories import SIGNALS, History, generate

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "zfsnas.rules.yml"
SHARED = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())
WINDOW, MIN_ACTIVE = SHARED["change_window_minutes"], SHARED["change_min_active_minutes"]
TOLERANCE = 1e-6     # scrapes and steps fall on whole minutes here: the sums are exact
SEEDS = range(5)
SCRAPES = (15, 30, 60)   # seconds between samples, one per history in turn


def selector(history: History, change, signal: str) -> str:
    return f'{{instance="{history.instance}", what="{change.label}", from="{change.old}", to="{change.new}", ' \
           f'signal="{signal}"}}'


def checks(history: History, changes: int = 99) -> list[dict]:
    """promql_expr_tests: one count per value, 1 when it is what the history holds (NaN: NaN), for
    the first `changes` changes, at the end of the history."""
    out = []
    for change in history.changes[:changes]:
        for side in ("before", "after"):
            for signal, value in getattr(change, side).items():
                series = f"change:zfs_signal:{side}{selector(history, change, signal)}"
                if value is None:
                    expr = f"count({series} != {series})"   # NaN is not equal to itself
                else:
                    expr = f"count(abs({series} / {value!r} - 1) <= {TOLERANCE})"
                out.append({"expr": expr, "eval_time": f"{history.minutes}m", "exp_samples": [{"labels": "{}",
                                                                                              "value": 1}]})
        # one series per change, seen once, after the minute it was served (plus a scrape and two steps)
        when = f'change:zfs_config:timestamp_seconds{{instance="{history.instance}", what="{change.label}", ' \
               f'to="{change.new}"}}'
        out.append({"expr": f"count(({when} - {change.minute * 60}) >= 0 <= 180)", "eval_time": f"{history.minutes}m",
                    "exp_samples": [{"labels": "{}", "value": 1}]})
    if changes >= len(history.changes):
        every = f'count(change:zfs_config:timestamp_seconds{{instance="{history.instance}"}})'
        out.append({"expr": every, "eval_time": f"{history.minutes}m",
                    "exp_samples": [{"labels": "{}", "value": len(history.changes)}]})
    return out


def promtool_file(tmp_path: Path, histories: list[History], changes: int = 99, name: str = "changes") -> Path:
    order = [g["name"] for g in yaml.safe_load(RULES.read_text())["groups"]]
    tests = [{"interval": f"{SCRAPES[h.seed % len(SCRAPES)]}s",
              "input_series": h.input_series(60, SCRAPES[h.seed % len(SCRAPES)]),
              "promql_expr_test": checks(h, changes)} for h in histories]
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": "1m",
                                    "group_eval_order": order, "tests": tests}, width=10_000))
    return path


def run_promtool(path: Path) -> subprocess.CompletedProcess:
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed: run ./dev test")
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=900)


def test_every_change_shows_the_values_its_history_was_built_with(tmp_path):
    histories = [generate(seed, WINDOW, MIN_ACTIVE) for seed in SEEDS]
    kinds = {c.kind for h in histories for c in h.changes}
    assert kinds == {"module parameter", "dataset property"}
    values = [v for h in histories for c in h.changes for side in (c.before, c.after) for v in side.values()]
    assert values.count(None) >= 10 and len(values) - values.count(None) >= 150   # both kinds of answer
    # a promtool per share of the histories, as many at once as there are CPUs: hours of minutes each
    shares = max(1, min(os.cpu_count() or 1, len(histories)))
    files = [promtool_file(tmp_path, histories[n::shares], name=f"changes{n}") for n in range(shares)]
    with ThreadPoolExecutor(shares) as pool:
        results = list(pool.map(run_promtool, files))
    failed = [r.stdout[-6000:] + r.stderr[-2000:] for r in results if r.returncode != 0 or "SUCCESS" not in r.stdout]
    assert not failed, "\n".join(failed)


def test_a_wrong_expectation_fails(tmp_path):
    """The checks can fail: one value 2 % off is caught (the history up to the end of the first
    change's after window)."""
    history = generate(SEEDS[0], WINDOW, MIN_ACTIVE)
    change = history.changes[0]
    signal = next(s for s in SIGNALS if change.after[s] is not None)
    change.after[signal] *= 1.02
    history.minutes = change.minute + WINDOW + 2
    result = run_promtool(promtool_file(tmp_path, [history], changes=1))
    assert result.returncode != 0 and signal in result.stdout + result.stderr
