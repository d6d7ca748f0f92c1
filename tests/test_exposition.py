"""The renderer's guarantees (exporter/zfsnas/exposition.py): whatever the samples hold, the text
parses; a bad sample is dropped alone and reported, label values are valid, bounded UTF-8."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from decimal import Decimal

import pytest

from zfsnas import exposition
from zfsnas.collectors.base import Collector, Context
from zfsnas.exposition import (
    MAX_LABEL_VALUE,
    ClientCollector,
    Families,
    Family,
    FieldLayout,
    RenderIssues,
    format_le,
    format_value,
    render,
    render_family,
)
from zfsnas.scrape import ScrapeCollector


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
    family = Family("zfs_test", "help", "gauge", ("x",))
    family.samples = [("", ("a",), "bad"), ("", ("b",), 1)]
    family = family.frozen()
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


class Written(Collector):
    """A collector whose families are laid out as text once (as arc's are), and counts the builds."""
    name = "written"
    needs_zfs = False
    builds = 0

    def collect(self, report):
        families = Families()
        families.add_fields(Counted([(("zfs_a", "A.", "gauge", ("k",)), ("v",), 1)]), [7])
        return families


class Counted(FieldLayout):
    def families_of(self, numbers):
        Written.builds += 1
        return super().families_of(numbers)


def test_a_collectors_own_text_is_served_as_it_is_and_its_families_built_only_when_asked_for():
    scrape = ScrapeCollector([Written(Context(kstat=None, commands=None))])
    Written.builds = 0
    page = scrape.render()
    assert page.startswith('# HELP zfs_a A.\n# TYPE zfs_a gauge\nzfs_a{k="v"} 7\n')
    assert 'zfs_exporter_collector_success{collector="written"} 1' in page
    assert Written.builds == 0  # the page copied the text
    families = scrape.scrape()  # the generic path (prometheus_client) gets the families themselves
    assert [(f.name, f.samples) for f in families if f.name == "zfs_a"] == [("zfs_a", [("", ("v",), 7)])]
    assert Written.builds == 1
    written = Written(Context(kstat=None, commands=None)).collect(None)
    assert [f.samples for f in written] == [f.samples for f in written] == [[("", ("v",), 7)]]
    assert Written.builds == 2  # built once per collect, however often iterated


def test_log_lines_are_capped(caplog):
    import logging

    with caplog.at_level("WARNING", logger="zfsnas"):
        logging.getLogger("zfsnas").warning("source %s failed: %s", "zpool_status", "x" * 1_000_000)
    (record,) = caplog.records
    assert len(record.getMessage()) < 2100 and record.getMessage().endswith("...[1000028 characters]")


# --- the builder collectors use, and the adapter to prometheus_client

def test_families_builder_keeps_first_use_order_and_types():
    families = Families()
    families.gauge("zfs_b", "second help ignored later", {"pool": "tank"}, 1)
    families.counter("zfs_a_total", "counter", {"pool": "tank", "vdev": "sda"}, 2)
    families.add("counter", "zfs_a_total", "counter", {"pool": "tank", "vdev": "sdb"}, 3)
    families.add("gauge", "zfs_b", "other help", {"pool": "backup"}, 4.5)
    built = list(families)
    assert [(f.name, f.kind, f.labelnames, f.documentation) for f in built] == [
        ("zfs_b", "gauge", ("pool",), "second help ignored later"),
        ("zfs_a_total", "counter", ("pool", "vdev"), "counter")]
    assert built[0].samples == [("", ("tank",), 1), ("", ("backup",), 4.5)]
    assert built[1].samples == [("", ("tank", "sda"), 2), ("", ("tank", "sdb"), 3)]
    assert families.families() == built
    assert render(families) == ("# HELP zfs_b second help ignored later\n# TYPE zfs_b gauge\n"
                                'zfs_b{pool="tank"} 1\nzfs_b{pool="backup"} 4.5\n'
                                "# HELP zfs_a_total counter\n# TYPE zfs_a_total counter\n"
                                'zfs_a_total{pool="tank",vdev="sda"} 2\nzfs_a_total{pool="tank",vdev="sdb"} 3\n')


def test_histogram_samples_and_text():
    families = Families()
    families.histogram("zfs_lat_seconds", "latency", {"pool": "tank"}, [(0.001, 3), (0.5, 7), (math.inf, 9)], 1.25)
    families.histogram("zfs_lat_seconds", "latency", {"pool": "empty"}, [], None)  # no buckets, no _sum
    assert render(families).splitlines() == [
        "# HELP zfs_lat_seconds latency", "# TYPE zfs_lat_seconds histogram",
        'zfs_lat_seconds_bucket{pool="tank",le="0.001"} 3', 'zfs_lat_seconds_bucket{pool="tank",le="0.5"} 7',
        'zfs_lat_seconds_bucket{pool="tank",le="+Inf"} 9', 'zfs_lat_seconds_count{pool="tank"} 9',
        'zfs_lat_seconds_sum{pool="tank"} 1.25', 'zfs_lat_seconds_count{pool="empty"} 0']


@pytest.mark.parametrize("bound, text", [(1, "1.0"), (0.5, "0.5"), (2 ** -30, "9.313225746154785e-10"),
                                         (math.inf, "+Inf")])
def test_bucket_bounds_as_prometheus_writes_them(bound, text):
    assert format_le(bound) == text


@pytest.mark.parametrize("value, text", [(123456789012345.0, "123456789012345"), (1e15, "1000000000000000.0"),
                                         (-0.0, "0"), (Decimal("1.5"), "1.5"), (False, "0")])
def test_more_values(value, text):
    assert format_value(value) == text


def test_client_collector_serves_the_same_samples_through_prometheus_client():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    families = Families()
    families.gauge("zfs_pool_size_bytes", "size", {"pool": "tank"}, 2 ** 52 + 1)
    families.counter("zfs_arc_hits_total", "hits", {}, 12345)
    families.histogram("zfs_pool_txg_sync_seconds", "sync", {"pool": "tank"}, [(0.25, 1), (math.inf, 4)], 3.5)
    calls = []
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientCollector(lambda: calls.append(1) or families.families()))

    def parsed(text):
        return {(f.name, f.type): sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in f.samples)
                for f in text_string_to_metric_families(text)}

    theirs = generate_latest(registry).decode()
    assert parsed(theirs) == parsed(render(families))
    assert parsed(theirs)[("zfs_pool_txg_sync_seconds", "histogram")][0] == (
        "zfs_pool_txg_sync_seconds_bucket", (("le", "+Inf"), ("pool", "tank")), 4.0)
    assert "# TYPE zfs_arc_hits_total counter" in theirs and "zfs_arc_hits_total 12345.0" in theirs
    assert calls == [1]  # the families are asked for once per collect
    # beyond 2**53 prometheus_client prints floats; our renderer keeps the integer exact
    families.gauge("zfs_pool_size_bytes", "size", {"pool": "big"}, 2 ** 60 + 1)
    assert 'zfs_pool_size_bytes{pool="big"} 1152921504606846977' in render(families)
    assert 'zfs_pool_size_bytes{pool="big"} 1.152921504606847e+18' in generate_latest(registry).decode()


def test_help_text_is_escaped_and_valid_utf8():
    family = Family("zfs_x", "a \\ b\nc \udcff d", "gauge", ())
    family.samples = [("", (), 1)]
    text, _ = rendered(family)
    assert text.splitlines()[0] == "# HELP zfs_x a \\\\ b\\nc \\\\xff d"


@pytest.mark.parametrize("labelnames", [("__name",), ("pool-name",), ("Pool",), ("",)])
def test_invalid_label_names_drop_the_family(labelnames):
    family = Family("zfs_x", "help", "gauge", labelnames)
    family.samples = [("", ("a",), 1)]
    text, problems = rendered(family)
    assert text == "" and problems.dropped == {("zfs_x", "invalid_label_name"): 1}


def test_label_value_types():
    family = Family("zfs_x", "help", "gauge", ("n",))
    family.samples = [("", (7,), 1), ("", (None,), 2), ("", (True,), 3)]
    text, problems = rendered(family)
    assert text.splitlines()[2:] == ['zfs_x{n="7"} 1']
    assert problems.dropped == {("zfs_x", "invalid_label_value"): 2}


def _pool_family(documentation: str, *pools: str) -> Family:
    family = Family("zfs_x", documentation, "gauge", ("pool",))
    family.samples = [("", (pool,), 1) for pool in pools]
    return family


def test_line_cache_is_bounded_and_skips_rewritten_sets(monkeypatch):
    cache = exposition._TextCache()
    monkeypatch.setattr(exposition._TextCache, "MAX_ENTRIES", 3)
    out: list[str] = []
    exposition.render_family(_pool_family("help", "a", "b", "c"), out, cache=cache)
    (text,) = cache.families.values()
    assert text.lines == {"": {("a",): 'zfs_x{pool="a"} ', ("b",): 'zfs_x{pool="b"} ', ("c",): 'zfs_x{pool="c"} '}}
    assert cache.entries == 3 and cache.chars == len(text.header or "") + 3 * len('zfs_x{pool="a"} ')
    exposition.render_family(_pool_family("help", "d"), out, cache=cache)  # full: cleared, then this one kept
    assert cache.families == {} and text.lines == {"": {("d",): 'zfs_x{pool="d"} '}}  # d: till the render ends
    assert cache.entries == 1 and cache.chars == len('zfs_x{pool="d"} ')
    problems = RenderIssues()
    exposition.render_family(_pool_family("help", "caf\udce9"), out, problems, cache=cache)
    assert out[-1] == 'zfs_x{pool="caf\\\\xe9"} 1\n' and problems.rewritten == {("zfs_x", "invalid_utf8"): 1}
    assert cache.entries == 1  # a rewritten set is counted on every render, so never cached
    assert "".join(out).count("# HELP zfs_x help\n# TYPE zfs_x gauge\n") == 3


def test_line_cache_keeps_its_family_count_bounded(monkeypatch):
    cache = exposition._TextCache()
    monkeypatch.setattr(exposition._TextCache, "MAX_FAMILIES", 2)
    for documentation in ("one", "two", "three"):
        exposition.render_family(_pool_family(documentation, "a"), [], cache=cache)
    assert [key[1] for key in cache.families] == ["three"]


def test_cached_header_follows_a_changed_help_and_a_fixed_name():
    """The cache is keyed by all the text depends on: a new HELP is served at once, and a family
    whose label names were invalid is rendered once they are valid (and dropped again after)."""
    assert render([_pool_family("old help", "tank")]).startswith("# HELP zfs_x old help\n")
    assert render([_pool_family("new help", "tank")]) == (
        '# HELP zfs_x new help\n# TYPE zfs_x gauge\nzfs_x{pool="tank"} 1\n')
    for names, served in ((("Pool",), False), (("pool",), True), (("Pool",), False)):
        family = Family("zfs_y", "help", "counter", names)
        family.samples = [("", ("tank",), 2)]
        problems = RenderIssues()
        assert render([family], problems) == ('# HELP zfs_y help\n# TYPE zfs_y counter\nzfs_y{pool="tank"} 2\n'
                                              if served else "")
        assert problems.dropped == ({} if served else {("zfs_y", "invalid_label_name"): 1})


def test_cached_lines_serve_each_scrape_its_own_values():
    for value, text in ((1, "1"), (2**70, str(2**70)), (0.5, "0.5"), ("x", None), (3, "3")):
        family = _pool_family("help", "tank")
        family.samples = [("", ("tank",), value)]
        problems = RenderIssues()
        out = render([family], problems)
        assert out == ('# HELP zfs_x help\n# TYPE zfs_x gauge\n' + (f'zfs_x{{pool="tank"}} {text}\n' if text else ""))
        assert problems.dropped == ({} if text else {("zfs_x", "not_a_number"): 1})


def test_frozen_families_render_once_and_keep_their_samples():
    families = Families()
    families.gauge("zfs_pool_size_bytes", "Total size.", {"pool": "tank"}, 2**60)
    [family] = families.frozen()
    assert family.text == '# HELP zfs_pool_size_bytes Total size.\n# TYPE zfs_pool_size_bytes gauge\n' \
                          'zfs_pool_size_bytes{pool="tank"} 1152921504606846976\n'
    assert family.samples == [("", ("tank",), 2**60)] and render([family]) == family.text


def test_frozen_text_is_rendered_once():
    family = Family("zfs_x", "help", "gauge", ("pool",))
    family.samples = [("", ("tank",), 1)]
    family = family.frozen()
    family.samples.append(("", ("late",), 2))  # after freezing: not served
    assert render([family]) == '# HELP zfs_x help\n# TYPE zfs_x gauge\nzfs_x{pool="tank"} 1\n'
    assert family.problems is None


def test_embedding_as_readme_shows(tmp_path):
    """README's "From a Python program" example, on the 2.3.2 fixture tree and a private registry."""
    from prometheus_client import CollectorRegistry, generate_latest

    from tests.conftest import linux_tree, samples, value, zfs_commands
    from zfsnas.wiring import build_exporter, build_parser

    tree = linux_tree("2.3.2")
    args = build_parser().parse_args(["--path.procfs", str(tree / "proc"), "--path.sysfs", str(tree / "sys"),
                                      "--collector.disable-defaults", "--collector.arc", "--collector.pools",
                                      *zfs_commands("2.3")])
    exporter = build_exporter(args, process_metrics=False)
    registry = CollectorRegistry(auto_describe=False)
    exporter.start()
    try:
        registry.register(ClientCollector(exporter.scrape.scrape))
        deadline = time.monotonic() + 20
        while True:
            data = samples(generate_latest(registry).decode())
            if data.get(("zfs_exporter_collector_success", frozenset({("collector", "pools")}))) == 1:
                break
            assert time.monotonic() < deadline, "zpool list/status never refreshed"
            time.sleep(0.1)
    finally:
        exporter.stop()
    assert value(data, "zfs_arc_size_bytes") == 11_811_160_064
    assert value(data, "zfs_pool_size_bytes", pool="tank") == 47971736518656
    assert value(data, "zfs_exporter_collector_success", collector="pools") == 1


# --- the fast paths a collector declares: the same bytes as its plain samples ------------------


def _columns(values):
    return _COLUMNS[len(values)]


_COLUMNS = {n: tuple((i, f"zfs_t{i}_total", f"T{i}.", "counter", 0.5 if i == 1 else 1) for i in range(n)) for n in (2, 3)}


def test_a_row_table_keeps_a_rows_lines_while_its_values_stay_the_same():
    table = exposition.RowTable(("dev",), _columns)
    sda, sdb = (1, 3), (10, 30)
    kept: dict = {}
    for rows in ([(("sda",), sda), (("sdb",), sdb)], [(("sda",), sda), (("sdb",), (11, 31))], [(("sdb",), (11, 31))]):
        families = Families()
        families.add_rows(table, rows)
        assert [type(part) for part in families._parts()] == [exposition._TextPart]
        plain = [Family(f.name, f.documentation, f.kind, f.labelnames) for f in families]
        for copy, family in zip(plain, families):
            copy.samples = list(family.samples)
        assert render(families) == render(plain)
        if ("sda",) in kept and ("sda",) in table._kept:
            assert table._kept[("sda",)] is kept[("sda",)]  # the same values: its lines not made again
            assert table._kept[("sdb",)] is not kept[("sdb",)]
        kept = dict(table._kept)
    assert 'zfs_t1_total{dev="sdb"} 15.5\n' in render(families) and list(table._kept) == [("sdb",)]


@pytest.mark.parametrize("rows, reason", [
    ([(("sda",), (1, 2)), (("sdb",), (1, 2, 3))], None),             # rows of other columns
    ([(("caf\udce9",), (1, 2))], "invalid_utf8"),                      # a label value to rewrite
    ([(("sda",), ("x", 2))], "not_a_number"),                          # a value that cannot be written
])
def test_what_a_row_table_cannot_say_exactly_goes_through_the_renderer(rows, reason):
    families = Families()
    families.add_rows(exposition.RowTable(("dev",), _columns), rows)
    assert not any(isinstance(part, exposition._TextPart) for part in families._parts())
    problems = RenderIssues()
    text = render(families, problems)
    assert 'zfs_t1_total{dev="' in text and (reason is None) == (not problems)
    if reason:
        assert {r for _, r in [*problems.dropped, *problems.rewritten]} == {reason}


def test_laid_out_fields_keep_their_place_among_plain_families():
    layout = FieldLayout([(("zfs_b", "B.", "gauge", ("k",)), ("x",), 1), (("zfs_b", "B.", "gauge", ("k",)), ("y",), 2)])
    families = Families()
    families.gauge("zfs_a", "A.", {}, 1)
    families.add_fields(layout, [3, 4])
    families.gauge("zfs_c", "C.", {}, 5)
    assert [f.name for f in families] == ["zfs_a", "zfs_b", "zfs_c"]
    assert render(families) == ('# HELP zfs_a A.\n# TYPE zfs_a gauge\nzfs_a 1\n# HELP zfs_b B.\n# TYPE zfs_b gauge\n'
                                'zfs_b{k="x"} 3\nzfs_b{k="y"} 8\n# HELP zfs_c C.\n# TYPE zfs_c gauge\nzfs_c 5\n')
    mixed = Families()
    mixed.add_fields(layout, [3, 4.5])  # not all integers: still laid out, each written as the renderer does
    assert render(mixed) == render(layout.families_of([3, 4.5])) and "zfs_b{k=\"y\"} 9\n" in render(mixed)
    assert any(isinstance(part, exposition._TextPart) for part in mixed._parts())
    for bad in ([3, "x"], [3, 10 ** 400], [3, float("nan")]):
        plain = Families()   # a value the renderer drops (or NaN, which it writes): its way, counted
        plain.add_fields(layout, bad)
        problems, expected = RenderIssues(), RenderIssues()
        assert render(plain, problems) == render(layout.families_of(bad), expected), bad
        assert (problems.dropped, problems.rewritten) == (expected.dropped, expected.rewritten), bad


def test_frozen_within_merges_chunks_up_to_the_limit_and_travels_as_text():
    import pickle

    def chunk(*pools):
        family = Family("zfs_x", "X.", "gauge", ("pool",))
        family.samples = [("", (pool,), 1) for pool in pools]
        return [family]

    families, taken = exposition.frozen_within(iter([chunk("a"), chunk("b"), chunk("c" * 100)]), 120)
    assert taken == 2 and render(families) == render(chunk("a", "b"))
    back = pickle.loads(pickle.dumps(families[0]))
    assert back._samples is None and back.samples == [("", ("a",), 1), ("", ("b",), 1)]
    assert render([back]) == render(families)
