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

from tests.alerts.test_thresholds import generator as alerts_generator
from tests.dashboards.histories import SIGNALS, History, generate

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "zfsnas.rules.yml"
SHARED = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())
WINDOW, MIN_ACTIVE = SHARED["change_window_minutes"], SHARED["change_min_active_minutes"]
TOLERANCE = 1e-6     # scrapes and steps fall on whole minutes here: the sums are exact
SEEDS = range(5)
SCRAPES = (15, 30, 60)   # seconds between samples, one per history in turn


def rules_with(path: Path, window: int, min_active: int, **settings) -> Path:
    """The shipped rule file with the zfsnas.changes group written for another window (thresholds
    and changes.Settings as alerts/generate.py would write them)."""
    module = alerts_generator()
    thresholds = {**SHARED, "change_window_minutes": window, "change_min_active_minutes": min_active}
    text = module.render(RULES.read_text(), thresholds)
    changes = module.changes
    group = changes.group(changes.Settings(window, min_active, **settings))
    path.write_text(module.replace_block(text, changes.BEGIN, changes.END, group))
    return path


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


def promtool_file(tmp_path: Path, histories: list[History], changes: int = 99, name: str = "changes",
                  rules: Path = RULES) -> Path:
    order = [g["name"] for g in yaml.safe_load(rules.read_text())["groups"]]
    tests = [{"interval": f"{SCRAPES[h.seed % len(SCRAPES)]}s",
              "input_series": h.input_series(60, SCRAPES[h.seed % len(SCRAPES)]),
              "promql_expr_test": checks(h, changes)} for h in histories]
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m",
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


@pytest.mark.parametrize(("window", "gap", "min_active", "seeds"), [(15, 5, 3, (21, 22)), (30, 7, 8, (23,))])
def test_other_windows_and_gaps(tmp_path, window, gap, min_active, seeds):
    """The same invariants with the windows a user may set in thresholds.toml (shorter than the
    shipped hour, a longer gap, another minimum of activity): the histories are built for them."""
    rules = rules_with(tmp_path / "rules.yml", window, min_active, gap_minutes=gap)
    histories = [generate(seed, window, min_active, gap) for seed in seeds]
    result = run_promtool(promtool_file(tmp_path, histories, rules=rules))
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout[-6000:] + result.stderr[-2000:]


def with_a_close_change(history: History, rng) -> tuple[History, object]:
    """`history` with one more module-parameter change a few minutes after its first change (inside
    that change's after window; the workload does not follow parameters here): its own values are
    not built (its before window holds two segments), only its row is checked."""
    from dataclasses import replace

    changed = {c.what for c in history.changes}
    name = next(n for n in ("zfs_vdev_async_write_max_active", "zfs_txg_timeout", "zfs_arc_max") if n not in changed)
    first = history.changes[0]
    old = history.parameters(first.minute * 60 + 59, 60)[name]
    close = replace(first, what=name, minute=first.minute + rng.randint(2, 10), old=str(int(old)),
                    new=str(int(old) * 2 + 1), before={}, after={}, partial={})
    history.changes.insert(1, close)
    return history, close


def test_a_change_close_after_another_changes_no_other_row(tmp_path):
    """Several changes close together: a parameter changed minutes after another. Every change is
    still seen once, when it was made; every other change's values are still those the history was
    built with (nothing leaks between rows); the close change has each signal on both sides, a number
    no lower than 0 and finite, or "too little activity"."""
    import random

    rng = random.Random(7)
    out = []
    for seed in (31, 32):
        history, close = with_a_close_change(generate(seed, WINDOW, MIN_ACTIVE), rng)
        row = (f'{{instance="{history.instance}", what="{close.label}", from="{close.old}", to="{close.new}"}}')
        extra = [{"expr": f"count(change:zfs_signal:{side}{row})", "eval_time": f"{history.minutes}m",
                  "exp_samples": [{"labels": "{}", "value": len(SIGNALS)}]} for side in ("before", "after")]
        extra += [{"expr": f"change:zfs_signal:{side}{row} < 0 or change:zfs_signal:{side}{row} == Inf",
                   "eval_time": f"{history.minutes}m", "exp_samples": []} for side in ("before", "after")]
        out.append((history, extra))
    path = promtool_file(tmp_path, [h for h, _ in out], name="close")
    tests = yaml.safe_load(path.read_text())
    for test, (_, extra) in zip(tests["tests"], out):
        test["promql_expr_test"] += extra
    path.write_text(yaml.safe_dump(tests, width=10_000))
    result = run_promtool(path)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout[-6000:] + result.stderr[-2000:]
