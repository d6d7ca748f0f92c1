"""The procfs source over the fixture trees, and over trees that change or break under it."""

import os
import shutil

import pytest

from tests.conftest import LINUX_VERSIONS, copy_tree, linux_tree
from zfsnas.sources.linux import ProcfsKstatSource
from zfsnas.sources.model import SourceError


def source(version):
    root = linux_tree(version)
    return ProcfsKstatSource(str(root / "proc"), str(root / "sys"))


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_pools_objsets_state(version):
    src = source(version)
    assert src.zfs_loaded()
    assert src.pools() == ["backup", "tank"]
    assert src.pool_state("tank") == "ONLINE" and src.pool_state("backup") == "DEGRADED"
    names = {o.dataset: o for o in src.objsets("tank")}
    assert set(names) == {"tank", "tank/media files", "tank/backups/ünïcode-ß", "tank/vm/disk0"}
    media = names["tank/media files"]
    assert media.objset_id == "0x104"
    assert media.values["nwritten"] == 73_014_444_032 and media.values["nread"] == 120_259_084_288
    assert ("zil_commit_count" in media.values) == (version >= "2.2")


@pytest.mark.parametrize("version, iostats, io", [
    ("0.8.6", False, True), ("2.0.7", True, True), ("2.1.11", True, False), ("2.2.7", True, False),
    ("2.3.2", True, False)])
def test_pool_io_kstats_by_version(version, iostats, io):
    src = source(version)
    assert (src.pool_iostats("tank") is not None) == iostats
    assert (src.pool_io("tank") is not None) == io
    if version == "2.3.2":
        assert src.pool_iostats("tank").values["arc_write_bytes"] == 98_784_247_808


def test_tunables_version_and_dirty_data():
    src = source("2.3.2")
    assert src.version() == "2.3.2-2~bpo12+2"
    assert src.dirty_data_max() == 4 << 30
    assert src.delay_min_dirty_percent() == 60
    tunables = src.tunables()
    assert tunables["zfs_txg_timeout"] == "5"
    assert tunables["zfs_vdev_raidz_impl"].startswith("cycle [fastest]")


def test_no_zfs(tmp_path):
    src = ProcfsKstatSource(str(tmp_path / "proc"), str(tmp_path / "sys"))
    assert not src.zfs_loaded()
    with pytest.raises(SourceError, match="arcstats does not exist"):
        src.arcstats()
    with pytest.raises(SourceError, match="zfs/parameters does not exist"):
        src.tunables()
    assert src.version() is None


def test_pool_vanished_between_listing_and_reading(tmp_path):
    copy_tree(tmp_path / "t")
    src = ProcfsKstatSource(str(tmp_path / "t/proc"), str(tmp_path / "t/sys"))
    assert "backup" in src.pools()
    shutil.rmtree(tmp_path / "t/proc/spl/kstat/zfs/backup")
    with pytest.raises(SourceError, match="pool 'backup' vanished"):
        src.txgs("backup")
    with pytest.raises(SourceError, match="pool 'backup' vanished"):
        src.objsets("backup")


def test_objset_unmounted_between_listing_and_reading_is_skipped(tmp_path, monkeypatch):
    copy_tree(tmp_path / "t")
    src = ProcfsKstatSource(str(tmp_path / "t/proc"), str(tmp_path / "t/sys"))
    original = src._optional

    def vanish(path, pool=None):
        if os.path.basename(path) == "objset-0x104":
            os.unlink(path)
        return original(path, pool)

    monkeypatch.setattr(src, "_optional", vanish)
    assert "tank/media files" not in {o.dataset for o in src.objsets("tank")}
