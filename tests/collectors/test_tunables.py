"""Collector `tunables`: the OpenZFS version and numeric module parameters (Linux and FreeBSD), read in the background."""


from tests.conftest import (
    copy_tree,
    freebsd_sysctl,
    samples,
    scrape_text,
    scrape_tree,
    tree_exporter,
    value,
)


def test_tunables_linux_and_freebsd():
    text = scrape_tree("2.3.2", "tunables")
    assert value(text, "zfs_version_info", version="2.3.2-2~bpo12+2") == 1
    assert value(text, "zfs_module_parameter", name="zfs_dirty_data_max") == 4 << 30
    assert value(text, "zfs_module_parameter", name="zfs_txg_timeout") == 5
    names = {dict(labels)["name"] for (name, labels) in samples(text) if name == "zfs_module_parameter"}
    assert "zfs_vdev_raidz_impl" not in names  # a string parameter is left out
    bsd = scrape_text("--path.sysctl-file", str(freebsd_sysctl("13.2")), "--collector.disable-defaults",
                      "--collector.tunables")
    assert value(bsd, "zfs_module_parameter", name="txg.timeout") == 5
    assert value(bsd, "zfs_version_info", version="2.1.9-FreeBSD_g92e0d9d18") == 1



def test_tunables_are_served_as_their_last_background_read(tmp_path):
    root = copy_tree(tmp_path / "t")
    exporter = tree_exporter(root, "tunables")
    assert value(exporter.render(), "zfs_module_parameter", name="zfs_txg_timeout") == 5
    (root / "sys/module/zfs/parameters/zfs_txg_timeout").write_text("7\n")
    assert value(exporter.render(), "zfs_module_parameter", name="zfs_txg_timeout") == 5  # read every 30 s
    (collector,) = exporter.scrape.collectors
    collector.refresher.refresh_now()
    text = exporter.render()
    assert value(text, "zfs_module_parameter", name="zfs_txg_timeout") == 7
    assert value(text, "zfs_version_info", version="2.3.2-2~bpo12+2") == 1
