"""The seeded fuzz corpus (tests/fuzz/corpus.py) against the real exporter: every page served with
200 and accepted by `promtool check metrics`, no hang, every cause logged once, the fixed hostile
cases counted as they should be, and memory bounded on the big ones. The full corpus, 100 MB
outputs included, runs in benchmarks/fuzz.py."""

from __future__ import annotations

import shutil

import pytest

from tests.fuzz.corpus import generate
from tests.fuzz.run import measure_rss, run_cases, scratch_dir

SEED, PER_CLASS = 16, 37
RSS_LIMIT_KB = 64 * 1024


@pytest.fixture(scope="module")
def work():
    path = scratch_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def results(work):
    cases = [c for c in generate(SEED, PER_CLASS) if not c.big]
    return {r.case: r for r in run_cases(cases, work)}


def test_corpus_covers_every_class(results):
    """The size cases run in processes of their own (test_memory_stays_bounded)."""
    assert {r.klass for r in results.values()} == {"name", "value", "bytes", "shape", "time", "benchdb"}
    assert {c.klass for c in generate(SEED, PER_CLASS) if c.big} == {"size", "time"}
    assert len(results) >= 200


def test_no_crash_hang_or_error_status(results):
    bad = [(r.case, r.outcome, r.detail) for r in results.values() if r.outcome != "ok"]
    assert bad == []


def test_every_page_passes_promtool(results):
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")
    bad = [(r.case, r.detail) for r in results.values() if r.promtool_errors]
    assert bad == []


def test_each_cause_is_logged_once(results):
    """The second scrape of the same bad input logs nothing new at warning level."""
    assert [(r.case, r.warnings_again) for r in results.values() if r.warnings_again] == []


def find(results, fragment):
    (match,) = [r for name, r in results.items() if fragment in name]
    return match


@pytest.mark.parametrize("fragment, dropped, rewritten, failing", [
    # the benchmark database: a value that is no number is left out where it is read (once: the
    # reader reads what changed), nothing else
    ("throughput_bytes_per_second='fast'", 1, 0, []),
    ("duration_seconds=b'\\x00\\xff'", 1, 0, []),
    ("workload with non-UTF-8 bytes", 0, 16, []),     # read as it is, escaped by the renderer: 8 labels a scrape
    ("workload of 1 MB", 1, 0, []),                   # a configuration past 32 KiB: left out (too_long)
    ("zpool status hangs", 0, 0, ["pools", "zpool_status"]),
    ("leaves a process holding its pipe", 0, 0, []),             # served, not waited for
])
def test_fixed_cases_counted_where_they_should_be(results, fragment, dropped, rewritten, failing):
    result = find(results, fragment)
    assert (result.dropped, result.rewritten, result.failing) == (dropped, rewritten, failing)


def test_hung_command_costs_its_timeout_only(results):
    assert find(results, "zpool status hangs").seconds < 10  # two scrapes, 2 s timeout each


@pytest.mark.parametrize("fragment", [c.name.split("/", 2)[2] for c in generate(SEED, PER_CLASS) if c.big])
def test_memory_stays_bounded(work, fragment):
    (case,) = [c for c in generate(SEED, PER_CLASS) if c.big and c.name.endswith(fragment)]
    rss_kb, report = measure_rss(case, work)
    assert report["outcome"] == "ok", report
    assert rss_kb < RSS_LIMIT_KB, f"{fragment}: peak RSS {rss_kb // 1024} MiB"
    expected = {"zpool list: 20 MB output": "failing", "50 MB of stderr": "failing", "8 MB file": "failing",
                "snapshots: 1 MB name": None}  # a cut snapshot line names no dataset: nothing to count
    what = next((v for k, v in expected.items() if k in fragment), "rewritten")
    if what == "failing":
        assert report["failing"], report  # over the output or file limit, or exit 1: the source fails
    elif what == "rewritten":
        assert report["rewritten"] > 0 or report["dropped"] > 0, report  # the 1 MB name cut, or dropped
