"""The whole /metrics text of each fixture tree equals its committed golden file."""

import difflib

import pytest

from tests.golden.render import ALL_CASES, golden_path, render


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_metrics_match_golden(case):
    expected = golden_path(case).read_text()
    actual = render(case)
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            "golden", "served", n=1))
        pytest.fail(f"/metrics for {case} differs from {golden_path(case).name} "
                    f"(regenerate on purpose with tests/golden/update.py):\n{diff[:4000]}")
