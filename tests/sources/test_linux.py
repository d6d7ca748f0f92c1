"""The procfs source over the fixture trees, and over trees that change or break under it."""

import os
import shutil

import pytest

from tests.conftest import LINUX_VERSIONS, copy_tree, linux_tree
from zfsnas.sources.kstat import ARCSTATS, IOSTATS, KstatFormatError
from zfsnas.sources.linux import ProcfsKstatSource
from zfsnas.sources.model import SourceError, read_bounded, read_bounded_bytes


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
    assert (src.optional_named(IOSTATS, "tank") is not None) == iostats
    assert (src.pool_io("tank") is not None) == io
    if version == "2.3.2":
        assert src.optional_named(IOSTATS, "tank").values["arc_write_bytes"] == 98_784_247_808


def test_a_pool_without_an_io_kstat_is_not_looked_at_again_until_it_leaves(tmp_path):
    """OpenZFS 2.1 removed `<pool>/io`: once missing for a pool it is not opened again on every
    scrape; a pool that left the listing, or a module that went away, is looked at anew."""
    root = copy_tree(tmp_path / "tree", "2.1.11")
    src = ProcfsKstatSource(str(root / "proc"), str(root / "sys"))
    io = root / "proc/spl/kstat/zfs/tank/io"
    assert src.pools() == ["backup", "tank"] and src.pool_io("tank") is None
    shutil.copy(linux_tree("0.8.6") / "proc/spl/kstat/zfs/tank/io", io)   # never so on a live system
    assert src.pools() == ["backup", "tank"] and src.pool_io("tank") is None   # not looked for
    tank = root / "proc/spl/kstat/zfs/tank"
    tank.rename(tmp_path / "away")
    assert src.pools() == ["backup"]                       # exported
    (tmp_path / "away").rename(tank)
    assert src.pools() == ["backup", "tank"] and src.pool_io("tank") is not None   # imported: read again
    io.unlink()
    assert src.pool_io("tank") is None
    zfs = root / "proc/spl/kstat/zfs"
    zfs.rename(tmp_path / "unloaded")
    assert not src.zfs_loaded()                            # the module went away
    (tmp_path / "unloaded").rename(zfs)
    shutil.copy(linux_tree("0.8.6") / "proc/spl/kstat/zfs/tank/io", io)
    assert src.zfs_loaded() and src.pool_io("tank") is not None


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
        src.named(ARCSTATS)
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
    listdir = os.listdir

    def listed_then_unmounted(path):
        names = listdir(path)
        (tmp_path / "t/proc/spl/kstat/zfs/tank/objset-0x104").unlink(missing_ok=True)
        return names

    monkeypatch.setattr(os, "listdir", listed_then_unmounted)
    datasets = {o.dataset for o in src.objsets("tank")}
    assert "tank/media files" not in datasets and "tank" in datasets and len(datasets) == 3


def _rewrite(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_objset_rows_are_parsed_again_exactly_when_they_change(tmp_path):
    """The snapshot time ending the header changes at every read; the rows decide what is reused."""
    copy_tree(tmp_path / "t")
    src = ProcfsKstatSource(str(tmp_path / "t/proc"), str(tmp_path / "t/sys"))
    media = tmp_path / "t/proc/spl/kstat/zfs/tank/objset-0x104"
    first = {o.dataset: o for o in src.objsets("tank")}
    header = media.read_text().split("\n", 1)[0]
    _rewrite(media, header, header[:-1] + ("9" if header[-1] != "9" else "8"))  # a later read, same rows
    second = {o.dataset: o for o in src.objsets("tank")}
    assert second["tank/media files"] is first["tank/media files"]
    _rewrite(media, "nwritten                        4    73014444032", "nwritten                        4    73014444033")
    third = {o.dataset: o for o in src.objsets("tank")}
    assert third["tank/media files"].values["nwritten"] == 73_014_444_033  # one byte changed: read again
    assert third["tank"] is first["tank"]
    assert first["tank/media files"].values["nwritten"] == 73_014_444_032  # what was handed out is not touched
    _rewrite(media, "0x01", "0x0g")  # a broken header fails the read even with known rows
    with pytest.raises(KstatFormatError, match="missing kstat header"):
        src.objsets("tank")


def test_source_memos_hold_only_the_files_and_pools_of_the_last_read(tmp_path):
    copy_tree(tmp_path / "t")
    src = ProcfsKstatSource(str(tmp_path / "t/proc"), str(tmp_path / "t/sys"))
    for pool in src.pools():
        src.objsets(pool)
        src.txgs(pool)
    assert set(src._objsets) == set(src._txg_rows) == {"backup", "tank"}
    assert len(src._objsets["tank"]) == 4
    (tmp_path / "t/proc/spl/kstat/zfs/tank/objset-0x104").unlink()  # dataset unmounted
    assert len(src.objsets("tank")) == len(src._objsets["tank"]) == 3
    shutil.rmtree(tmp_path / "t/proc/spl/kstat/zfs/backup")  # pool exported
    assert src.pools() == ["tank"] and set(src._objsets) == set(src._txg_rows) == {"tank"}


def test_read_bounded_reads_whole_files_and_refuses_larger_ones(tmp_path):
    big = tmp_path / "big"
    data = bytes(range(256)) * 1000  # several read chunks
    big.write_bytes(data)
    assert read_bounded(big, len(data), "latin-1") == data.decode("latin-1")
    with pytest.raises(SourceError, match=f"larger than {len(data) - 1} bytes"):
        read_bounded(big, len(data) - 1)
    small = tmp_path / "small"
    small.write_bytes(b"caf\xe9\n")
    assert read_bounded(small) == "caf\udce9\n"
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert read_bounded(empty) == ""


def test_read_bounded_bytes_hands_back_the_bytes_and_leaves_os_errors_and_no_descriptor(tmp_path):
    big = tmp_path / "big"
    data = bytes(range(256)) * 1000  # several read chunks
    big.write_bytes(data)
    fds = len(os.listdir("/proc/self/fd"))
    assert read_bounded_bytes(str(big), len(data)) == data
    assert read_bounded_bytes(big, len(data)) == data  # a path object too
    with pytest.raises(SourceError, match=f"big: larger than {len(data) - 1} bytes, not read"):
        read_bounded_bytes(str(big), len(data) - 1)
    with pytest.raises(FileNotFoundError):
        read_bounded_bytes(str(tmp_path / "missing"))
    with pytest.raises(IsADirectoryError):  # opened, then refused by the read: closed all the same
        read_bounded_bytes(str(tmp_path))
    assert len(os.listdir("/proc/self/fd")) == fds


def test_objset_files_are_read_whole_bounded_and_undecoded_names_kept(tmp_path, monkeypatch):
    copy_tree(tmp_path / "t")
    tank = tmp_path / "t/proc/spl/kstat/zfs/tank"
    src = ProcfsKstatSource(str(tmp_path / "t/proc"), str(tmp_path / "t/sys"))
    media = tank / "objset-0x104"
    rows = "".join(f"extra_{i:05d}_count                4    {i}\n" for i in range(1000))  # about 40 KB: several reads
    media.write_bytes(media.read_bytes().replace(b"tank/media files", b"tank/caf\xe9") + rows.encode())
    (objset,) = [o for o in src.objsets("tank") if o.objset_id == "0x104"]
    assert objset.dataset == "tank/caf\udce9"
    assert objset.values["nwritten"] == 73_014_444_032 and objset.values["extra_00999_count"] == 999
    monkeypatch.setattr("zfsnas.sources.linux.MAX_FILE_BYTES", 30_000)
    with pytest.raises(SourceError, match=r"objset-0x104: larger than 30000 bytes, not read"):
        src.objsets("tank")
    monkeypatch.undo()
    media.unlink()
    media.mkdir()  # not a file: an error naming it, not a crash
    with pytest.raises(SourceError, match=r"objset-0x104: Is a directory"):
        src.objsets("tank")


def test_an_objset_header_the_kernel_does_not_print_is_parsed_at_every_read(tmp_path):
    """Only a header in the kernel's own form lets the rows decide that nothing changed; any other
    header (here with a doubled space, which the full check accepts) means a full parse each time."""
    copy_tree(tmp_path / "t")
    media = tmp_path / "t/proc/spl/kstat/zfs/tank/objset-0x104"
    _rewrite(media, "24 1 0x01", "24  1 0x01")
    src = ProcfsKstatSource(str(tmp_path / "t/proc"), str(tmp_path / "t/sys"))
    first, second = ({o.objset_id: o for o in src.objsets("tank")} for _ in range(2))
    assert first["0x104"] is not second["0x104"] and first["0x104"] == second["0x104"]
    assert second["0x104"].values["nwritten"] == 73_014_444_032
    assert first["0x36"] is second["0x36"]
