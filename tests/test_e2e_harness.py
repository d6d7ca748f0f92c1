"""The e2e harness (tests/e2e/harness.py): its image pipeline (ImageBuilder: a guest may boot on the
first image while the next one builds, and a failed build stops the run with its flavour named),
the guest's failure reports for the log's tail, budgets at the measured pace (guest/pace.py) and
the stall watchdog, the wheelhouse's requirements. image.sh itself is not run here (a cold build
takes 15-25 CPU-minutes; the e2e suite runs it)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.e2e import harness


def test_the_first_image_is_handed_over_while_the_next_builds(monkeypatch):
    second_may_finish = threading.Event()
    built: list[str] = []

    def build_image(flavour: str) -> Path:
        if flavour == "2.1":
            assert second_may_finish.wait(10), "the test never let 2.1 finish"
        built.append(flavour)
        return Path(f"/images/{flavour}")

    monkeypatch.setattr(harness, "build_image", build_image)
    builder = harness.ImageBuilder(["2.3", "2.1"])
    builder.start()
    assert builder.wait("2.3") == Path("/images/2.3")
    assert built == ["2.3"] and not builder.ready["2.1"].is_set()   # 2.1 still building
    second_may_finish.set()
    assert builder.wait("2.1") == Path("/images/2.1")
    assert built == ["2.3", "2.1"]


def test_a_failed_build_names_the_flavour_and_the_cause(monkeypatch):
    def build_image(flavour: str) -> Path:
        if flavour == "2.1":
            raise SystemExit("e2e: image build failed (exit 100)")
        return Path(f"/images/{flavour}")

    monkeypatch.setattr(harness, "build_image", build_image)
    builder = harness.ImageBuilder(["2.3", "2.1"])
    builder.start()
    assert builder.wait("2.3") == Path("/images/2.3")
    with pytest.raises(SystemExit, match=r"no image for 2.1: e2e: image build failed \(exit 100\)"):
        builder.wait("2.1")


def test_a_failed_guests_own_reports_are_gathered_for_the_log_tail(tmp_path):
    """CI shows the tail of the harness's output, not the guest's files: each `... failed:` block of
    scenario.log (to the next log line) and the container step's error.txt are printed there."""
    (tmp_path / "container").mkdir()
    (tmp_path / "scenario.log").write_text(
        "   10.00 $ zpool create tank -> 0 (1.00 s)\n"
        "  386.32 capture round trip failed:\n"
        "Traceback (most recent call last):\n"
        '  File "scenario.py", line 1, in capture\n'
        "RuntimeError: no capture\n"
        "  387.19 $ dpkg-query -W -> 0 (0.16 s)\n"
        "  500.00 container phase failed:\n"
        "RuntimeError: dockerd did not start\n"
        "  501.00 scenario done, status 0\n")
    (tmp_path / "container" / "error.txt").write_text("container step failed at 500 s:\nRuntimeError: dockerd did not start\n")
    assert harness.guest_failures(tmp_path).splitlines() == [
        "386.32 capture round trip failed:",
        "Traceback (most recent call last):",
        '  File "scenario.py", line 1, in capture',
        "RuntimeError: no capture",
        "  500.00 container phase failed:",
        "RuntimeError: dockerd did not start",
        "container/error.txt:",
        "container step failed at 500 s:",
        "RuntimeError: dockerd did not start",
    ]
    assert harness.guest_failures(tmp_path / "nothing") == ""


# --- budgets at the measured pace (tests/e2e/guest/pace.py), the stall watchdog -------------------

class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def time(self) -> float:
        return self.now


def test_nominal_seconds_divide_each_stretch_by_the_slowness_measured_then(monkeypatch):
    pace = harness.pace.Pace(idle_seconds=0.05)
    pace.history = [(10.0, 2.0), (20.0, 4.0), (30.0, 1.0)]
    pace._samples = [(30.0, 1.0)]
    # 5..10 at 2 (the probe at 10), 10..20 at 4, 20..30 at 1, 30..40 at the current slowness (1)
    assert pace.nominal_between(5.0, 40.0) == 5 / 2 + 10 / 4 + 10 / 1 + 10 / 1
    assert pace.nominal_between(12.0, 18.0) == 6 / 1   # no probe inside: the current slowness


def test_a_budget_lasts_longer_on_a_slower_host(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(harness.pace.time, "time", clock.time)
    slow = harness.pace.Pace()
    slow._samples = [(clock.now, 3.0)]            # three times slower than idle, from the start
    budget = harness.pace.Budget(10, slow)
    clock.now += 29
    assert not budget.spent() and round(budget.left(), 6) == round(10 - 29 / 3, 6)
    clock.now += 2
    assert budget.spent()
    idle = harness.pace.Pace()                       # no probe yet: slowness 1, wall time is nominal
    budget = harness.pace.Budget(10, idle)
    clock.now += 9.5
    assert not budget.spent()
    clock.now += 1
    assert budget.spent() and "10 nominal s" in budget.describe()


def test_a_guest_is_stopped_only_after_a_stall(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(harness.pace.time, "time", clock.time)
    monkeypatch.setattr(harness.time, "time", clock.time)
    monkeypatch.setattr(harness, "HOST_PACE", harness.pace.Pace())
    share = tmp_path / "share"
    (share / "results").mkdir(parents=True)
    console = tmp_path / "console.log"
    console.write_text("boot\n")
    os.utime(console, (clock.now, clock.now))
    progress = harness.Progress(console, share, seconds=100)
    assert progress.stalled() is None                 # first look: the console is news
    for _ in range(30):                               # 300 s of nothing: stalled at 100 s
        clock.now += 10
        if progress.stalled():
            break
    assert 100 <= clock.now - 1000 <= 120
    progress = harness.Progress(console, share, seconds=100)
    log = share / "results" / "scenario.log"
    for step in range(30):                            # a file that keeps changing: never stalled
        clock.now += 10
        log.write_text(str(step))
        os.utime(log, (clock.now, clock.now))
        assert progress.stalled() is None


def test_the_guests_wheelhouse_covers_the_wheels_requirements(tmp_path):
    import zipfile

    wheel = tmp_path / "zfsnas-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("zfsnas-0.1.0.dist-info/METADATA", "Name: zfsnas\nRequires-Dist: pyudev>=0.24\n"
                         "Requires-Dist: PyYAML>=6\nRequires-Dist: pytest>=7; extra == \"test\"\n")
    assert harness.requirements(wheel) == ["PyYAML>=6", "pyudev>=0.24"]


def test_tiers_give_every_phase_a_live_run_and_the_guest_knows_them_all(monkeypatch):
    """`full` runs every phase on some flavour, `ci` a subset of it per flavour (the 2.3 guest's
    failure states, client and unit under systemd; SMART on both); the guest's own default list
    (a share without `phases`) is the harness's."""
    import re

    full, ci = harness.TIERS["full"], harness.TIERS["ci"]
    assert set().union(*full.values()) == set(harness.EXTRA_PHASES)
    for flavour, wanted in ci.items():
        assert set(wanted) <= set(full[flavour]), flavour
    assert {"failures", "unit", "client"} <= set(ci["2.3"]) and "smart" in ci["2.1"]
    source = (Path(harness.HERE) / "guest" / "scenario.py").read_text()
    default = re.search(r'RUN = set\(CONFIG\.get\("phases", \(([^)]*)\)', source).group(1)
    assert set(re.findall(r'"(\w+)"', default)) == set(harness.EXTRA_PHASES)


def test_the_tier_and_only_decide_the_phases_written_for_the_guest(tmp_path, monkeypatch):
    monkeypatch.delenv("ZFSNAS_E2E_ONLY", raising=False)
    monkeypatch.delenv("ZFSNAS_E2E_PHASES", raising=False)
    monkeypatch.delenv("ZFSNAS_E2E_TIER", raising=False)
    assert harness.phases("2.1") == ("smart",)
    monkeypatch.setenv("ZFSNAS_E2E_TIER", "full")
    assert "predict" in harness.phases("2.1") and "container" not in harness.phases("2.1")
    monkeypatch.setenv("ZFSNAS_E2E_ONLY", "client")
    assert harness.phases("2.3") == ("client",)
    monkeypatch.setenv("ZFSNAS_E2E_TIER", "everything")
    with pytest.raises(SystemExit, match="ZFSNAS_E2E_TIER='everything'"):
        harness.tier()


def test_named_phases_replace_the_tiers_on_the_flavours_that_have_them(monkeypatch):
    """ZFSNAS_E2E_PHASES (tests/e2e/run --phases): one phase on one flavour with the core moments and
    none of the tier's other phases; a phase a flavour lacks (client, container on 2.1) is left out
    there; a misspelt name stops the run before any guest."""
    monkeypatch.delenv("ZFSNAS_E2E_ONLY", raising=False)
    for tier in ("ci", "full"):
        monkeypatch.setenv("ZFSNAS_E2E_TIER", tier)
        monkeypatch.setenv("ZFSNAS_E2E_PHASES", "unit")
        assert harness.phases("2.1") == harness.phases("2.3") == ("unit",)
        assert harness.run_name() == "ZFSNAS_E2E_PHASES=unit"
    monkeypatch.setenv("ZFSNAS_E2E_PHASES", "client,unit smart")
    assert harness.phases("2.3") == ("client", "unit", "smart") and harness.phases("2.1") == ("unit", "smart")
    for nothing in ("", "none"):
        monkeypatch.setenv("ZFSNAS_E2E_PHASES", nothing)
        assert harness.phases("2.1") == () and harness.run_name() == "ZFSNAS_E2E_PHASES=none"
    monkeypatch.setenv("ZFSNAS_E2E_PHASES", "unit,units")
    with pytest.raises(SystemExit, match="ZFSNAS_E2E_PHASES='unit,units': no phase units"):
        harness.phases("2.1")
    monkeypatch.delenv("ZFSNAS_E2E_PHASES")
    assert harness.run_name() == "full"


def test_a_phase_outside_the_run_is_skipped_with_how_to_run_it():
    from tests.e2e.conftest import require_phase

    require_phase({"phases": ["unit"], "tier": "ci"}, "unit")   # in the run: no skip
    require_phase({}, "unit")                                    # an older share: every phase ran
    with pytest.raises(pytest.skip.Exception, match=r"no 'predict' phase in this ci-tier run .*--full"):
        require_phase({"phases": ["unit"], "tier": "ci"}, "predict")
    with pytest.raises(pytest.skip.Exception, match=r"no 'predict' phase in this ZFSNAS_E2E_PHASES=unit run "):
        require_phase({"phases": ["unit"], "tier": "ZFSNAS_E2E_PHASES=unit"}, "predict")
