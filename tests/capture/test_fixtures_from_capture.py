"""Every fixture tree made from a capture (tests/fixtures/capture-*/, by tests/fixtures/from_capture.py)
renders to its golden file tests/golden/capture-*.prom."""

from __future__ import annotations

import difflib

import pytest

from tests.conftest import FIXTURES
from tests.fixtures.from_capture import render_tree

TREES = sorted(p for p in FIXTURES.glob("capture-*") if p.is_dir())
GOLDEN = FIXTURES.parent / "golden"


@pytest.mark.skipif(not TREES, reason="no fixture tree made from a capture is committed")
@pytest.mark.parametrize("tree", TREES, ids=[t.name for t in TREES])
def test_capture_fixture_matches_golden(tree):
    expected = (GOLDEN / f"{tree.name}.prom").read_text()
    actual = render_tree(tree)
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "golden", "served", n=1))
        pytest.fail(f"{tree.name} renders differently (remake with tests/fixtures/from_capture.py):\n{diff[:4000]}")
