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
