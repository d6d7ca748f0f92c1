"""The renderer's guarantees (exporter/zfsnas/exposition.py): whatever the samples hold, the text
parses; a bad sample is dropped alone and reported, label values are valid, bounded UTF-8."""

from __future__ import annotations

import math
import subprocess
import shutil

import pytest

from zfsnas.collector import Collector, Context, ScrapeCollector
from zfsnas.exposition import Families
from zfsnas.exposition import (MAX_LABEL_VALUE, Family, FrozenFamily, RenderIssues, format_value, render,
                               render_family)


def rendered(family: Family) -> tuple[str, RenderIssues]:
    problems = RenderIssues()
    out: list[str] = []
    render_family(family, out, problems=problems)
    return "".join(out), problems


@pytest.mark.parametrize("value, text", [
    (10 ** 300, "1" + "0" * 300), (2 ** 64, "18446744073709551616"), (-5, "-5"), (1.5, "1.5"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"), (True, "1"), (1e20, "1e+20"),
])
def test_values_as_the_format_spells_them(value, text):
    assert format_value(value) == text


def test_one_bad_value_drops_that_sample_only():
    family = Family("zfs_test_bytes", "help", "gauge", ("pool",))
    family.samples = [("", ("a",), 1), ("", ("b",), 10 ** 400), ("", ("c",), "fast"), ("", ("d",), None),
                      ("", ("e",), 2.5)]
    text, problems = rendered(family)
    assert text.splitlines()[2:] == ['zfs_test_bytes{pool="a"} 1', 'zfs_test_bytes{pool="e"} 2.5']
    assert problems.dropped == {("zfs_test_bytes", "out_of_range"): 1, ("zfs_test_bytes", "not_a_number"): 2}


@pytest.mark.parametrize("name", ["zfs_arc_foo-bar", "zfs_arc_fooBar", "zfs_arc_a:b", "zfs_名前", "1abc",
                                  "zfs_" + "x" * 300, "zfs_\udcff"])
def test_invalid_metric_names_drop_the_family_and_are_counted(name):
    family = Family(name, "help", "gauge", ())
    family.samples = [("", (), 1), ("", (), 2)]
    text, problems = rendered(family)
    assert text == ""
    assert sum(problems.dropped.values()) == 2 and {r for _, r in problems.dropped} == {"invalid_metric_name"}


def test_label_values_made_valid_utf8_and_bounded():
    family = Family("zfs_dataset_used_bytes", "help", "gauge", ("dataset",))
    long_a, long_b = "tank/" + "a" * 5000 + "1", "tank/" + "a" * 5000 + "2"
    family.samples = [("", ("tank/caf\udce9",), 1), ("", ("tank/caf\udce8",), 2), ("", ('q"\\\n',), 3),
                      ("", (long_a,), 4), ("", (long_b,), 5)]
    text, problems = rendered(family)
    lines = text.splitlines()[2:]
    assert lines[0] == 'zfs_dataset_used_bytes{dataset="tank/caf\\\\xe9"} 1'  # the byte, visible and distinct
    assert lines[1] == 'zfs_dataset_used_bytes{dataset="tank/caf\\\\xe8"} 2'
    assert lines[2] == 'zfs_dataset_used_bytes{dataset="q\\"\\\\\\n"} 3'
    cut_a, cut_b = (line.split('"')[1] for line in lines[3:5])
    assert len(cut_a) == len(cut_b) == MAX_LABEL_VALUE and cut_a != cut_b
    assert cut_a.startswith("tank/aaaa") and cut_a.endswith("]") and "...[cut " in cut_a
    assert problems.rewritten == {("zfs_dataset_used_bytes", "invalid_utf8"): 2,
                                  ("zfs_dataset_used_bytes", "too_long"): 2}
    text.encode("utf-8")  # strict: would raise on a lone surrogate


def test_frozen_family_counts_its_problems_on_every_render():
    family = FrozenFamily("zfs_test", "help", "gauge", ("x",))
    family.samples = [("", ("a",), "bad"), ("", ("b",), 1)]
    family.freeze()
    for _ in range(3):
        problems = RenderIssues()
        assert render([family], problems).endswith('zfs_test{x="b"} 1\n')
        assert problems.dropped == {("zfs_test", "not_a_number"): 1}


class Bad(Collector):
    name = "bad"
    needs_zfs = False

    def collect(self, report):
        families = Families()
        families.gauge("zfs_good", "fine", {"k": "v"}, 1)
        families.gauge("zfs_bad", "a text value", {"k": "v"}, "fast")
        families.gauge("zfs_bad", "a text value", {"k": "w"}, 2)
        return families


def test_scrape_counts_drops_per_collector_and_reason_and_logs_once(caplog):
    scrape = ScrapeCollector([Bad(Context(kstat=None, commands=None))])
    with caplog.at_level("WARNING", logger="zfsnas"):
        first = scrape.render()
        second = scrape.render()
    assert 'zfs_exporter_samples_dropped_total{collector="bad",reason="not_a_number"} 1' in first
    assert 'zfs_exporter_samples_dropped_total{collector="bad",reason="not_a_number"} 2' in second
    assert 'zfs_bad{k="w"} 2' in second and "zfs_good" in second
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1
    if shutil.which("promtool"):
        check = subprocess.run(["promtool", "check", "metrics"], input=second.encode(), capture_output=True)
        assert check.returncode == 0, check.stdout + check.stderr


def test_log_lines_are_capped(caplog):
    import logging

    with caplog.at_level("WARNING", logger="zfsnas"):
        logging.getLogger("zfsnas").warning("source %s failed: %s", "zpool_status", "x" * 1_000_000)
    (record,) = caplog.records
    assert len(record.getMessage()) < 2100 and record.getMessage().endswith("...[1000028 characters]")
