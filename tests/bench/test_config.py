"""The one definition of a benchmark configuration: canonical form, stable id, labels, layout, differences."""

import dataclasses
import hashlib
from pathlib import Path

from zfsnas.bench.running.zfs import ZfsOps
from zfsnas.store.configuration import (
    LABELS,
    Configuration,
    differences,
    differs_text,
    legacy_configuration,
    look_alikes,
    pairs,
    pool_layout,
)

from .configs import MIRRORS, configuration

LIVE = Path(__file__).parents[1] / "fixtures" / "linux-zfs-2.3.2-live" / "commands"


def test_the_id_is_a_stable_hash_of_the_canonical_form():
    config = configuration()
    # Pinned: a change to the canonical form would silently split every stored history.
    assert config.canonical() == (
        '{"data":{"bytes":"17179869184","compressibility":"50","kind":"filesystem","ramp_time":"0","runtime":"0"},'
        '"direct":"1","host":"nas1","layout":{"ashift":"12","models":"ZFSNAS SATA HDD x8","vdevs":"data:raidz2:8"},'
        '"matrix":"m","parameters":{"zfs_arc_max":"0","zfs_delay_min_dirty_percent":"60",'
        '"zfs_dirty_data_max":"4294967296","zfs_dirty_data_max_percent":"10","zfs_txg_timeout":"5",'
        '"zfs_vdev_async_write_max_active":"10"},"pool":"tank","properties":{"compression":"lz4",'
        '"encryption":"off","recordsize":"1M"},"size":"16G","workload":"seq-write",'
        '"zfs_version":"zfs-2.3.2-1 zfs-kmod-2.3.2-1"}')
    assert config.id == hashlib.sha256(config.canonical().encode()).hexdigest()[:12] == "9e4bf29b942d"
    # Order-free: the same properties given in another order are the same configuration.
    reordered = dataclasses.replace(config, properties=tuple(reversed(config.properties)))
    assert pairs(dict(reordered.properties)) == config.properties
    assert Configuration.from_json(config.to_json()) == config
    # Which parameters the matrix swept changes the tags, not the identity.
    assert dataclasses.replace(config, swept=("zfs_dirty_data_max",)).id == config.id


def test_every_field_is_part_of_the_identity():
    base = configuration()
    variants = [configuration(matrix="other"), configuration(workload="seq-read"), configuration(size="1G"),
                configuration(data={"compressibility": "0"}), configuration(properties={"atime": "off"}),
                configuration(pool="fast"), configuration(layout=MIRRORS), configuration(parameters={"zfs_txg_timeout": "10"}),
                configuration(zfs_version="zfs-2.2.7-1"), configuration(direct="0"), configuration(host="nas2")]
    assert len({v.id for v in variants} | {base.id}) == len(variants) + 1


def test_labels_and_tags():
    config = configuration(encryption="aes-256-gcm", parameters={"zfs_dirty_data_max": "1073741824"},
                           swept=("zfs_dirty_data_max",))
    assert tuple(config.labels) == LABELS
    assert config.labels == {"matrix": "m", "workload": "seq-write", "config": config.id, "compression": "lz4",
                             "recordsize": "1M", "encryption": "aes-256-gcm", "size": "16G", "pool": "tank"}
    assert config.tags()[-1] == "zfs_dirty_data_max:1073741824" and f"config:{config.id}" in config.tags()
    zvol = configuration(properties={"volblocksize": "16K"}, recordsize="")
    assert zvol.labels["recordsize"] == "16K"


def test_what_differs_between_look_alikes():
    mirror, raidz2 = configuration(layout=MIRRORS), configuration()
    dirty = configuration(parameters={"zfs_dirty_data_max": "1073741824"})
    assert differences(raidz2, mirror) == [
        "layout vdevs: data:raidz2:8 -> data:mirror:2,data:mirror:2,data:mirror:2,data:mirror:2"]
    assert differences(raidz2, dirty) == ["parameter zfs_dirty_data_max: 4294967296 -> 1073741824"]
    alikes = look_alikes([mirror, raidz2, dirty, configuration(compression="zstd-3")])
    assert [other for other, _ in alikes[raidz2.id]] == [mirror.id, dirty.id]
    assert alikes[configuration(compression="zstd-3").id] == []     # its labels differ: nothing to explain
    assert differs_text(alikes[dirty.id]).startswith(f"vs {mirror.id}: layout vdevs: data:mirror:2,")


def test_pool_layout_from_live_zpool_status(tmp_path):
    """`zpool status -P` of the 2.3.2 guest: RAID-Z2 of 8 with an L2ARC and a spare, and 4 mirrors."""
    status = (LIVE / "zpool_status_P.txt").read_text()
    assert dict(pool_layout(status, "tank", "12")) == {
        "vdevs": "cache:disk:1,data:raidz2:8,spare:disk:1", "ashift": "12", "models": "unknown x8"}
    assert dict(pool_layout(status, "fast", "0"))["vdevs"] == ",".join(["data:mirror:2"] * 4)
    assert dict(pool_layout("garbage", "tank")) == {"vdevs": "unknown", "ashift": "unknown", "models": "unknown"}
    # Disk models from sysfs (--path.sysfs), the partition's whole disk.
    (tmp_path / "block/sda/device").mkdir(parents=True)
    (tmp_path / "block/sda/device/model").write_text("WDC WD40EFRX-68N\n")
    (tmp_path / "block/nvme0n1/device").mkdir(parents=True)
    (tmp_path / "block/nvme0n1/device/model").write_text("Samsung SSD 980 1TB                     \n")
    ops = ZfsOps(None, sysfs=str(tmp_path))
    assert ops.disk_model("sda1") == "WDC WD40EFRX-68N" and ops.disk_model("nvme0n1p1") == "Samsung SSD 980 1TB"
    assert ops.disk_model("/dev/vdb1") == ""
    models = {f"/dev/sd{c}1": "WDC WD40EFRX-68N" for c in "ab"}
    mirror = "  pool: t\n state: ONLINE\nconfig:\n\n\tNAME STATE\n\tt ONLINE\n\t  mirror-0 ONLINE\n" \
             "\t    /dev/sda1 ONLINE\n\t    /dev/sdb1 ONLINE\n\nerrors: No known data errors\n"
    assert dict(pool_layout(mirror, "t", "12", models))["models"] == "WDC WD40EFRX-68N x2"


def test_a_legacy_row_keeps_its_labels():
    row = {"matrix": "fits-copy", "job": "copy", "compression": "zstd-1", "recordsize": "1M", "encryption": "off",
           "size": "all", "pool": "tank", "host": "nas1",
           "properties": '{"compression": "zstd-1", "org.zfsnas:bench-run": "r", "recordsize": "1M"}'}
    config = legacy_configuration(row, None)
    assert {k: v for k, v in config.labels.items() if k != "config"} == {
        "matrix": "fits-copy", "workload": "copy", "compression": "zstd-1", "recordsize": "1M", "encryption": "off",
        "size": "all", "pool": "tank"}
    assert dict(config.properties) == {"compression": "zstd-1", "recordsize": "1M", "encryption": "off"}
    assert config.direct == "unknown" and config.zfs_version == "unknown"
