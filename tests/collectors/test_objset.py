"""Collector `objset` serves each family as text joined from lines kept per dataset: that text must
be what rendering its samples writes, scrape after scrape, as datasets change, vanish and repeat;
and what only the renderer can write exactly (label values to rewrite, names that cannot be
written) must still go through it, counted on every scrape."""

import pytest
from prometheus_client import generate_latest

from tests.conftest import (
    LINUX_VERSIONS,
    collected,
    copy_tree,
    rendered_from_samples,
    samples,
    scrape_tree,
    tree_exporter,
    types,
    value,
)
from zfsnas.collectors.base import Report
from zfsnas.exposition import _TextPart, render

MEDIA = ("tank", "tank/media files")


def _rewrite(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))




def collect_kept(collector):
    """One collect, as the collector returned it (what `collected` lists); every read must have succeeded."""
    report = Report(collector.name)
    families = collector.collect(report)
    assert report.ok, report.errors
    return families


@pytest.fixture
def tree(tmp_path):
    return copy_tree(tmp_path / "t")


def test_text_is_the_rendering_of_the_samples_scrape_after_scrape(tree):
    tank = tree / "proc/spl/kstat/zfs/tank"
    (tank / "objset-0x999").write_text((tank / "objset-0x36").read_text())  # "tank" twice: summed
    exporter = tree_exporter(tree, "objset")
    (collector,) = exporter.scrape.collectors
    steps = [
        ("first scrape", lambda: None),
        ("a later read of the same rows", lambda: _rewrite(tank / "objset-0x104", "1139722432937", "1139722433937")),
        ("media written to", lambda: _rewrite(tank / "objset-0x104", "73014444032", "73014444033")),
        ("one of the summed objsets written to", lambda: _rewrite(tank / "objset-0x999", "1048576", "1048577")),
        ("a dataset unmounted", lambda: (tank / "objset-0x2f1").unlink()),
    ]
    kept = {}
    for what, change in steps:
        change()
        families = collect_kept(collector)
        assert [type(part) for part in families._parts()] == [_TextPart], what  # served as the table's text
        text = render(families)
        assert text == rendered_from_samples(families), what
        now = dict(collector._rows._kept)
        if what == "a later read of the same rows":
            assert all(now[key] is kept[key] for key in now), "unchanged datasets were rendered again"
        if what == "media written to":
            assert now[MEDIA] is not kept[MEDIA] and now[("tank", "tank")] is kept[("tank", "tank")]
        kept = now
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/media files") == 73_014_444_033
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank") == 2 * 1_048_576 + 1
    assert value(text, "zfs_dataset_reads_total", pool="backup", dataset="backup/archive") == 3_221_225_472 // 131_072 + 3
    served = {dict(labels)["dataset"] for name, labels in samples(text) if name == "zfs_dataset_written_bytes_total"}
    assert served == {"tank", "tank/media files", "tank/backups/ünïcode-ß", "backup", "backup/archive"}  # vm/disk0 gone
    assert len(collector._rows._kept) == 5  # and not kept
    assert types(text)["zfs_dataset_unlinked_total"] == "counter"


def test_samples_are_served_to_prometheus_client_as_they_are_rendered(tree):
    exporter = tree_exporter(tree, "objset")
    (collector,) = exporter.scrape.collectors
    families = collected(collector)
    written = next(f for f in families if f.name == "zfs_dataset_written_bytes_total")
    assert ("", MEDIA, 73_014_444_032) in written.samples
    assert [labels for _, labels, _ in written.samples] == [  # pools in order, then objset files by name
        ("backup", "backup"), ("backup", "backup/archive"),
        ("tank", "tank/media files"), ("tank", "tank/backups/ünïcode-ß"), ("tank", "tank/vm/disk0"), ("tank", "tank")]
    client = {k: v for k, v in samples(generate_latest(exporter.registry).decode()).items() if k[0].startswith("zfs_dataset_")}
    served = {k: v for k, v in samples(exporter.render()).items() if k[0].startswith("zfs_dataset_")}
    assert client == served and len(served) == 6 * len(families)


def test_a_label_value_to_rewrite_is_counted_on_every_scrape(tree):
    """A dataset name that is not UTF-8 (kept by the source as surrogate escapes) is written by the
    renderer as \\xNN, and every scrape counts each of its samples as rewritten."""
    media = tree / "proc/spl/kstat/zfs/tank/objset-0x104"
    media.write_bytes(media.read_bytes().replace(b"tank/media files", b"tank/caf\xe9"))
    exporter = tree_exporter(tree, "objset")
    first = exporter.render()
    per_dataset = sum(1 for name in types(first) if name.startswith("zfs_dataset_"))
    assert value(first, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/caf\\xe9") == 73_014_444_032
    second = exporter.render()
    assert value(second, "zfs_exporter_label_values_rewritten_total", collector="objset", reason="invalid_utf8") \
        == 2 * per_dataset
    assert value(second, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank") == 1_048_576


def test_a_field_that_makes_no_metric_name_drops_its_family_on_every_scrape(tree):
    objsets = sorted((tree / "proc/spl/kstat/zfs").glob("*/objset-0x*"))
    for path in objsets:  # in every objset: the same fields everywhere, as a newer kernel would have it
        path.write_text(path.read_text() + "Bad:Field                       4    7\n")
    exporter = tree_exporter(tree, "objset")
    for scrape in (1, 2):
        text = exporter.render()
        assert value(text, "zfs_exporter_samples_dropped_total", collector="objset", reason="invalid_metric_name") \
            == scrape * len(objsets)
        assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/media files") == 73_014_444_032


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_objset_per_dataset_io(version):
    text = scrape_tree(version, "objset")
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/media files") == 73_014_444_032
    assert value(text, "zfs_dataset_read_bytes_total", pool="tank", dataset="tank/media files") == 120_259_084_288
    assert value(text, "zfs_dataset_writes_total", pool="tank", dataset="tank/media files") == \
        73_014_444_032 // 131_072 + 7
    assert value(text, "zfs_dataset_reads_total", pool="backup", dataset="backup/archive") == 3_221_225_472 // 131_072 + 3
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/backups/ünïcode-ß") == 5_368_709_120
    assert types(text)["zfs_dataset_unlinked_total"] == "counter"
    assert ("zfs_dataset_zil_commit_total" in types(text)) == (version >= "2.2")



def test_objsets_of_one_dataset_are_summed_on_every_scrape(tmp_path):
    """A rename caught mid-way: two objsets, one name. Their sum must not grow from scrape to
    scrape (the source hands the same parsed values to the next scrape while the file stays put)."""
    root = copy_tree(tmp_path / "t")
    pool = root / "proc/spl/kstat/zfs/tank"
    (pool / "objset-0x999").write_text((pool / "objset-0x104").read_text())
    exporter = tree_exporter(root, "objset")
    for _ in range(3):
        assert value(exporter.render(), "zfs_dataset_written_bytes_total", pool="tank",
                     dataset="tank/media files") == 2 * 73_014_444_032
    text = (pool / "objset-0x999").read_text()
    (pool / "objset-0x999").write_text(text.replace("73014444032", "73014444033", 1))
    assert value(exporter.render(), "zfs_dataset_written_bytes_total", pool="tank",
                 dataset="tank/media files") == 2 * 73_014_444_032 + 1



def test_objsets_with_different_fields_in_one_pool(tmp_path):
    """One objset lacking a field (written by another OpenZFS version): its other fields are
    still served, and the field is served for the datasets that have it."""
    root = copy_tree(tmp_path / "t")
    media = root / "proc/spl/kstat/zfs/tank/objset-0x104"
    media.write_text("".join(line for line in media.read_text().splitlines(True) if not line.startswith("nunlinks ")))
    text = tree_exporter(root, "objset").render()
    assert ("zfs_dataset_unlinks_total", frozenset({("pool", "tank"), ("dataset", "tank/media files")})) \
        not in samples(text)
    assert value(text, "zfs_dataset_unlinks_total", pool="tank", dataset="tank") == 537
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/media files") == 73_014_444_032
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank") == 1_048_576
