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


def test_a_capture_of_the_first_release_becomes_a_fixture(tmp_path):
    """Its second snapshot: the snapshot listing it recorded as `-o name` is derived for the stand-in
    as a replay derives it, and the tree renders to what a replay of that snapshot serves."""
    from tests.fixtures.from_capture import make_fixture

    tree, golden = make_fixture(FIXTURES / "captures" / "formats" / "first-release-e4b0bb0.tar.gz", "first",
                                snapshot=1, fixtures=tmp_path, golden_dir=tmp_path)
    text = golden.read_text()
    assert render_tree(tree) == text and 'zfs_dataset_snapshots{pool="tank",dataset="tank/media"}' in text
    assert "zfs_dataset_newest_snapshot_timestamp_seconds" not in text   # creation times: not in that capture
