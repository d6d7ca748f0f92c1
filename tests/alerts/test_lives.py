"""Generated home-NAS lives against the alert rules, judged by real promtool (issue 37).

300 healthy and 300 sick lives (tests/alerts/lives), all of them with 0 violations of the
invariants: a healthy life raises no warning or critical, each fault raises the alert that names
it within its documented delay, once, and it resolves when the fault does. The seed is printed
with every failure; `python -m tests.alerts.lives --seed S --life N` replays one life, and
`python -m tests.alerts.lives --healthy 3000 --sick 3000` runs thousands with a fresh seed.
ZFSNAS_LIVES_SEED picks another seed for this test.

The 600 lives take promtool some 1,500 CPU seconds (docs/alerts-proof.md#cost): a session that
collects test_hundreds_of_lives_raise_exactly_their_alerts starts them as it begins, in a process
of its own at the lowest priority (tests/conftest.py), on the CPU the other tests leave idle, and
runs that test last, which waits for them.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.alerts.lives.check import RULES, run
from tests.alerts.lives.faults import KINDS
from tests.alerts.lives.generate import make_life, plan
from tests.alerts.lives.model import BASELINES, EXPORTERS, SKIPS, TIERS
from tests.alerts.test_rules import ROOT, RUNBOOK, github_anchor, tool

SEED = os.environ.get("ZFSNAS_LIVES_SEED", "37")
HEALTHY, SICK = 300, 300


def test_every_kind_is_planned():
    planned = plan(HEALTHY, SICK, SEED)
    kinds = {k.name for _, k, _ in planned}
    assert kinds == set(KINDS), set(KINDS) - kinds
    assert sum(1 for _, k, _ in planned if k.sick) == SICK
    assert sum(1 for _, k, _ in planned if not k.sick) == HEALTHY


def test_a_life_replays_from_its_seed():
    index, k, tier = plan(HEALTHY, SICK, SEED)[5]
    one, two = (make_life(index, SEED, k, tier, EXPORTERS["fixed"]) for _ in range(2))
    assert one.describe() == two.describe() and one.expects == two.expects
    assert [(n, s.labels, s.pieces) for n, s in one.series] == [(n, s.labels, s.pieces) for n, s in two.series]


def test_every_skip_is_in_its_runbook_entry():
    """An alert the generator does not judge for a kind of history says why where the user reads it."""
    text = RUNBOOK.read_text()
    sections = dict(zip((github_anchor(h) for h in re.findall(r"^## (.+)$", text, re.M)),
                        re.split(r"^## .+$", text, flags=re.M)[1:]))
    for alert, _part in SKIPS:
        assert "Cannot be right" in sections[alert.lower()], alert
    for alert in BASELINES:   # not required to fire within a window of a relabel
        assert "Cannot be right" in sections[alert.lower()] and "of a relabel" in sections[alert.lower()], alert


def test_the_invariants_can_fail():
    """The judge sees a silent alert: lives of a fault whose alert the rules no longer have are
    each a `missed` violation."""
    tool("promtool")
    planned = [p for p in plan(0, 60, SEED) if p[1].name == "data_errors"][:2]
    lives = [make_life(index, SEED, k, tier, EXPORTERS["fixed"]) for index, k, tier in planned]
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.yml"
        rules.write_text(RULES.read_text().replace("last_over_time(zfs_pool_data_errors[10m]) > 0",
                                                   "last_over_time(zfs_pool_data_errors[10m]) > 1e9"))
        assert rules.read_text() != RULES.read_text()
        outcome = run(lives, rules, jobs=1)
    found = {(v.check, v.alert, v.life) for v in outcome.violations}
    assert found == {("missed", "ZfsPoolDataErrors", life.id) for life in lives}


class Background:
    """The 600 lives judged by `python -m tests.alerts.lives` in a process of its own (and its
    promtool runs) at niceness 19: the CPU the other tests leave idle, and none of their memory."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="zfsnas-lives-"))
        self.outcome = self.directory / "outcome.json"
        with open(self.directory / "output.txt", "w") as output:
            self.process = subprocess.Popen(
                ["nice", "-n", "19", sys.executable, "-m", "tests.alerts.lives", "--seed", SEED, "--healthy", str(HEALTHY),
                 "--sick", str(SICK), "--jobs", "2", "--json", str(self.outcome)],
                cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


_BACKGROUND: list[Background] = []


def start_in_background() -> Background:
    if not _BACKGROUND:
        _BACKGROUND.append(Background())
    return _BACKGROUND[0]


def stop_background() -> None:
    """A session that ends first (-x, ^C) leaves no promtool behind."""
    for background in _BACKGROUND:
        background.stop()


def test_hundreds_of_lives_raise_exactly_their_alerts():
    tool("promtool")
    background = start_in_background()
    background.process.wait()
    output = (background.directory / "output.txt").read_text()
    ended = background.process.returncode
    assert background.outcome.exists(), f"python -m tests.alerts.lives ended with {ended}:\n{output[-3000:]}"
    outcome = json.loads(background.outcome.read_text())
    assert outcome["tiers"].keys() == TIERS.keys() and outcome["lives"] == HEALTHY + SICK
    assert outcome["healthy"] == HEALTHY
    assert not outcome["violations"] and not outcome["errors"], \
        f"seed {SEED} (replay: python -m tests.alerts.lives --seed {SEED} --healthy {HEALTHY} --sick {SICK} --life N)\n" \
        + outcome["report"] + f"(its files: {background.directory})"
    shutil.rmtree(background.directory)
