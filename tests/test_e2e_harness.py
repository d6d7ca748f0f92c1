"""The e2e harness's image pipeline (tests/e2e/harness.py ImageBuilder): a guest may boot on the
first image while the next one builds, and a failed build stops the run with its flavour named.
image.sh itself is not run here (a cold build takes 15-25 CPU-minutes; the e2e suite runs it)."""

from __future__ import annotations

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
