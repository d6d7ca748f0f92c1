"""Issue 43's memory bound in CI: the cases of tests/fuzz/run_inputs.py that bring the most bytes
(imports past their byte bound, /dev/zero, 15 MB of smartctl output a disk, a store of 100,000
results under the exporter), each in processes of its own: no crash, and the peak RSS of each
one's whole process tree under 256 MiB. benchmarks/fuzz.py (`--only inputs`) runs every kind."""

from __future__ import annotations

import random

from tests.fuzz import run_inputs
from tests.fuzz.inputs import import_cases

BIG = [c for c in import_cases(seed=43, per_kind=1) if c.big]


def test_big_imports_stay_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.fuzz.inputs.import_cases", lambda seed, per_kind: BIG)
    outcomes = run_inputs.import_outcomes(43, 1, tmp_path)
    assert len(outcomes) == len(BIG) >= 4
    assert [(o.kind, o.detail) for o in outcomes if o.outcome != "ok"] == []
    assert max(o.rss_kib for o in outcomes) < run_inputs.LIMIT_KIB


def test_hostile_smart_output_stays_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.sources.test_smart_hostile.KINDS", ["empty objects"])
    [outcome] = run_inputs._smart(tmp_path, random.Random(43))
    assert outcome.outcome == "ok", outcome.detail
    assert outcome.rss_kib < run_inputs.LIMIT_KIB


def test_a_store_of_100000_results_stays_bounded_under_the_exporter(tmp_path):
    outcomes = run_inputs._store_size(tmp_path)
    assert [(o.kind, o.detail) for o in outcomes if o.outcome != "ok"] == []
    assert max(o.rss_kib for o in outcomes) < 64 * 1024       # 100,000 results: under 64 MiB, not 256
