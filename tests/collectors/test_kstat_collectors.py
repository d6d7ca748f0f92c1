"""Collectors `objset`, `poolstats` and `tunables` on the fixture trees."""

import pytest

from tests.conftest import (
    LINUX_VERSIONS,
    copy_tree,
    exporter_args,
    freebsd_sysctl,
    linux_tree,
    samples,
    scrape_text,
    types,
    value,
)
from zfsnas.wiring import build_exporter


def scrape(version, *collectors):
    root = linux_tree(version)
    flags = ["--collector.disable-defaults"] + [f"--collector.{c}" for c in collectors]
    return scrape_text("--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), *flags)


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_objset_per_dataset_io(version):
    text = scrape(version, "objset")
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/media files") == 73_014_444_032
    assert value(text, "zfs_dataset_read_bytes_total", pool="tank", dataset="tank/media files") == 120_259_084_288
    assert value(text, "zfs_dataset_writes_total", pool="tank", dataset="tank/media files") == \
        73_014_444_032 // 131_072 + 7
    assert value(text, "zfs_dataset_reads_total", pool="backup", dataset="backup/archive") == 3_221_225_472 // 131_072 + 3
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/backups/ünïcode-ß") == 5_368_709_120
    assert types(text)["zfs_dataset_unlinked_total"] == "counter"
    assert ("zfs_dataset_zil_commit_total" in types(text)) == (version >= "2.2")


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_pool_state(version):
    text = scrape(version, "poolstats")
    assert value(text, "zfs_pool_state", pool="tank", state="ONLINE") == 1
    assert value(text, "zfs_pool_state", pool="tank", state="DEGRADED") == 0
    assert value(text, "zfs_pool_state", pool="backup", state="DEGRADED") == 1
    states = {dict(labels)["state"] for (name, labels) in samples(text) if name == "zfs_pool_state"}
    assert states == {"ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "REMOVED", "UNAVAIL", "SUSPENDED"}


def test_pool_io_before_2_1_and_iostats_after():
    old = scrape("2.0.7", "poolstats")
    assert value(old, "zfs_pool_read_bytes_total", pool="tank") == 120_259_084_288
    assert value(old, "zfs_pool_run_time_seconds_total", pool="tank") == 88.0
    assert types(old)["zfs_pool_run_queue_length"] == "gauge"
    new = scrape("2.3.2", "poolstats")
    assert "zfs_pool_read_bytes_total" not in types(new)
    assert value(new, "zfs_pool_arc_write_bytes_total", pool="tank") == 98_784_247_808
    assert types(new)["zfs_pool_trim_written_bytes_total"] == "counter"


def test_tunables_linux_and_freebsd():
    text = scrape("2.3.2", "tunables")
    assert value(text, "zfs_version_info", version="2.3.2-2~bpo12+2") == 1
    assert value(text, "zfs_module_parameter", name="zfs_dirty_data_max") == 4 << 30
    assert value(text, "zfs_module_parameter", name="zfs_txg_timeout") == 5
    names = {dict(labels)["name"] for (name, labels) in samples(text) if name == "zfs_module_parameter"}
    assert "zfs_vdev_raidz_impl" not in names  # a string parameter is left out
    bsd = scrape_text("--path.sysctl-file", str(freebsd_sysctl("13.2")), "--collector.disable-defaults",
                      "--collector.tunables")
    assert value(bsd, "zfs_module_parameter", name="txg.timeout") == 5
    assert value(bsd, "zfs_version_info", version="2.1.9-FreeBSD_g92e0d9d18") == 1


def _exporter(root, *collectors):
    flags = ["--collector.disable-defaults"] + [f"--collector.{c}" for c in collectors]
    return build_exporter(exporter_args("--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), *flags),
                          process_metrics=False)


def test_objsets_of_one_dataset_are_summed_on_every_scrape(tmp_path):
    """A rename caught mid-way: two objsets, one name. Their sum must not grow from scrape to
    scrape (the source hands the same parsed values to the next scrape while the file stays put)."""
    root = copy_tree(tmp_path / "t")
    pool = root / "proc/spl/kstat/zfs/tank"
    (pool / "objset-0x999").write_text((pool / "objset-0x104").read_text())
    exporter = _exporter(root, "objset")
    for _ in range(3):
        assert value(exporter.render(), "zfs_dataset_written_bytes_total", pool="tank",
                     dataset="tank/media files") == 2 * 73_014_444_032
    text = (pool / "objset-0x999").read_text()
    (pool / "objset-0x999").write_text(text.replace("73014444032", "73014444033", 1))
    assert value(exporter.render(), "zfs_dataset_written_bytes_total", pool="tank",
                 dataset="tank/media files") == 2 * 73_014_444_032 + 1


def test_tunables_are_served_as_their_last_background_read(tmp_path):
    root = copy_tree(tmp_path / "t")
    exporter = _exporter(root, "tunables")
    assert value(exporter.render(), "zfs_module_parameter", name="zfs_txg_timeout") == 5
    (root / "sys/module/zfs/parameters/zfs_txg_timeout").write_text("7\n")
    assert value(exporter.render(), "zfs_module_parameter", name="zfs_txg_timeout") == 5  # read every 30 s
    (collector,) = exporter.scrape.collectors
    collector.refresher.refresh_now()
    text = exporter.render()
    assert value(text, "zfs_module_parameter", name="zfs_txg_timeout") == 7
    assert value(text, "zfs_version_info", version="2.3.2-2~bpo12+2") == 1


def test_objsets_with_different_fields_in_one_pool(tmp_path):
    """One objset lacking a field (written by another OpenZFS version): its other fields are
    still served, and the field is served for the datasets that have it."""
    root = copy_tree(tmp_path / "t")
    media = root / "proc/spl/kstat/zfs/tank/objset-0x104"
    media.write_text("".join(line for line in media.read_text().splitlines(True) if not line.startswith("nunlinks ")))
    text = _exporter(root, "objset").render()
    assert ("zfs_dataset_unlinks_total", frozenset({("pool", "tank"), ("dataset", "tank/media files")})) \
        not in samples(text)
    assert value(text, "zfs_dataset_unlinks_total", pool="tank", dataset="tank") == 537
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank/media files") == 73_014_444_032
    assert value(text, "zfs_dataset_written_bytes_total", pool="tank", dataset="tank") == 1_048_576
