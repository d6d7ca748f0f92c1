"""Collector `arc`: contract names, types and values from arcstats."""

import pytest

from tests.conftest import LINUX_VERSIONS, linux_tree, rendered_from_samples, samples, scrape_text, types, value
from zfsnas.collectors.arc import arc_families, arc_metric
from zfsnas.exposition import RenderIssues, _TextPart, render
from zfsnas.sources.kstat import parse_named_kstat


def laid_out(families) -> bool:
    """Whether the builder holds its families as one text laid out once (`FieldLayout`)."""
    return [type(part) for part in families._parts()] == [_TextPart]


def scrape(version):
    root = linux_tree(version)
    return scrape_text("--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                       "--collector.disable-defaults", "--collector.arc")


CONTRACT = {
    "zfs_arc_size_bytes": ("gauge", 11_811_160_064), "zfs_arc_target_size_bytes": ("gauge", 12 << 30),
    "zfs_arc_min_size_bytes": ("gauge", 1 << 30), "zfs_arc_max_size_bytes": ("gauge", 16 << 30),
    "zfs_arc_hits_total": ("counter", 48_211_907), "zfs_arc_misses_total": ("counter", 1_902_334),
    "zfs_arc_anon_size_bytes": ("gauge", 137_363_456), "zfs_l2arc_size_bytes": ("gauge", 214_748_364_800),
    "zfs_l2arc_allocated_bytes": ("gauge", 171_798_691_840), "zfs_l2arc_header_bytes": ("gauge", 251_658_240),
    "zfs_l2arc_hits_total": ("counter", 812_004), "zfs_l2arc_misses_total": ("counter", 1_090_330),
    "zfs_l2arc_read_bytes_total": ("counter", 96_636_764_160),
    "zfs_l2arc_written_bytes_total": ("counter", 322_122_547_200),
}


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_contract_names_types_values(version):
    text = scrape(version)
    kinds = types(text)
    for name, (kind, expected) in CONTRACT.items():
        assert kinds[name] == kind, name
        if not (version == "2.3.2" and name == "zfs_l2arc_written_bytes_total"):
            assert value(text, name) == expected, name
    assert value(text, "zfs_exporter_collector_success", collector="arc") == 1
    assert "untyped" not in kinds.values()


def test_large_counter_survives():
    # Served exactly, digit for digit: the fast renderer writes integers as integers.
    assert value(scrape("2.3.2"), "zfs_l2arc_written_bytes_total") == 2**53 + 12_345_678_901


def test_negative_available_memory():
    assert value(scrape("2.2.7"), "zfs_arc_memory_available_bytes") == -268_435_456


def test_reads_by_access_content_result_are_one_family():
    text = scrape("2.3.2")
    data = samples(text)
    reads = {dict(labels)["access"] + "/" + dict(labels)["content"] + "/" + dict(labels)["result"]: v
             for (name, labels), v in data.items() if name == "zfs_arc_reads_total"}
    assert len(reads) == 12  # demand/prefetch x data/metadata x hit/iohit/miss
    assert reads["demand/data/hit"] == 30_000_000 and reads["demand/data/miss"] == 900_000
    assert reads["demand/data/iohit"] == 100_000
    # A hit ratio by type is one expression over one family.
    ratio = reads["demand/data/hit"] / sum(v for k, v in reads.items() if k.startswith("demand/data/"))
    assert ratio == pytest.approx(30_000_000 / 31_000_000)
    assert not any(name.startswith("zfs_arc_demand_data") for name, _ in data)


def test_reads_family_on_old_versions_has_no_iohit():
    results = {dict(labels)["result"] for (name, labels) in samples(scrape("2.1.11")) if name == "zfs_arc_reads_total"}
    assert results == {"hit", "miss"}


def test_meta_balance_is_a_ratio():
    assert value(scrape("2.3.2"), "zfs_arc_meta_target_ratio") == 0.25
    assert value(scrape("2.1.11"), "zfs_arc_mru_target_size_bytes") == 6 << 30


@pytest.mark.parametrize("field, kind, name", [
    ("mru_ghost_hits", "counter", "zfs_arc_list_hits_total"),
    ("mfu_evictable_data", "gauge", "zfs_arc_mfu_evictable_data_bytes"),
    ("l2_mru_asize", "gauge", "zfs_l2arc_mru_allocated_bytes"),
    ("hash_chain_max", "gauge", "zfs_arc_hash_chain_max"),
    ("memory_throttle_count", "counter", "zfs_arc_memory_throttle_total"),
    ("arc_meta_limit", "gauge", "zfs_arc_meta_limit_bytes"),
    ("brand_new_field", "gauge", "zfs_arc_brand_new_field"),
    ("l2_brand_new_size", "gauge", "zfs_l2arc_brand_new_size_bytes"),
])
def test_field_mapping(field, kind, name):
    spec = arc_metric(field)
    assert (spec.kind, spec.name) == (kind, name)


# --- the text path: arcstats laid out once, served as text -------------------------------------


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_text_is_the_rendering_of_the_samples(version):
    text = (linux_tree(version) / "proc/spl/kstat/zfs/arcstats").read_text()
    values = parse_named_kstat(text).values
    families = arc_families(values)
    assert laid_out(families) and len(list(families)) > 80
    served = render(families)
    assert served == rendered_from_samples(families)
    assert value(served, "zfs_arc_size_bytes") == 11_811_160_064
    assert len([f for f in families if f.name == "zfs_arc_reads_total"]) == 1  # one family, its samples together


def test_text_follows_the_values_of_each_read():
    values = parse_named_kstat((linux_tree("2.3.2") / "proc/spl/kstat/zfs/arcstats").read_text()).values
    first = render(arc_families(values))
    later = dict(values, size=values["size"] + 4096, demand_data_misses=values["demand_data_misses"] + 1, pd=1 << 31)
    text = render(arc_families(later))
    assert value(first, "zfs_arc_size_bytes") == 11_811_160_064
    assert value(text, "zfs_arc_size_bytes") == 11_811_160_064 + 4096
    assert value(text, "zfs_arc_reads_total", access="demand", content="data", result="miss") == 900_001
    assert value(text, "zfs_arc_mru_data_target_ratio") == 0.5
    assert text == rendered_from_samples(arc_families(later))


@pytest.mark.parametrize("odd, reason", [
    ({"size": 10**400}, "out_of_range"),            # an integer no float64 holds: that sample is dropped
    ({"Weird:Field": 1}, "invalid_metric_name"),    # a field that makes no metric name: that family is dropped
])
def test_what_text_cannot_say_goes_through_the_renderer(odd, reason):
    values = parse_named_kstat((linux_tree("2.1.11") / "proc/spl/kstat/zfs/arcstats").read_text()).values
    families = arc_families({**values, **odd})
    assert not laid_out(families)
    problems = RenderIssues()
    text = render(families, problems)
    assert sum(problems.dropped.values()) == 1 and {r for _, r in problems.dropped} == {reason}
    assert value(text, "zfs_arc_hits_total") == values["hits"]
