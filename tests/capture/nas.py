"""A whole NAS as fixture files, for captures on a machine without ZFS: the OpenZFS 2.3.2 kstat tree
and module parameters, a zfsnas-bench database with one result, the disk tree (sysfs, udev database,
/proc/diskstats: pools `tank` and `backup` on serial-numbered disks) and the stand-in `zfs`/`zpool` answering the 2.3 recordings
(and smartctl, the first read of tests/fixtures/smart)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import FIXTURES, copy_commands, zfs_commands
from tests.integration.test_stack import store_result

# Identities in the fixture files that an anonymized capture must not contain.
POOLS = ("tank", "backup", "scratch")
SERIALS = ("WD-WCC7K1AAAAAA", "WD-WCC7K2BBBBBB", "ZA1B2C3D", "S3Z1NB0K123456A", "S4EWNX0N123456",
           "vdisk-spare01", "WD-WX12A3456789")  # the last: the disk behind sde's USB bridge, in smartctl only
WWNS = ("5000c500a1b2c3d4", "50014ee2b0000010", "50014ee2b0000020", "5002538e40a1b2c3", "0025385b91b2c3d4")
HOSTNAME = "nas-in-the-attic"


def build_nas(tmp: Path) -> tuple[Path, list[str]]:
    """A copy of the fixture NAS under `tmp/nas` (writable: tests change it) and the exporter flags
    that read it."""
    root = tmp / "nas"
    (root / "proc" / "spl").mkdir(parents=True)
    shutil.copytree(FIXTURES / "linux-zfs-2.3.2" / "proc" / "spl" / "kstat", root / "proc" / "spl" / "kstat")
    shutil.copy(FIXTURES / "linux-disks" / "proc" / "diskstats", root / "proc" / "diskstats")
    shutil.copytree(FIXTURES / "linux-zfs-2.3.2" / "sys" / "module", root / "sys" / "module")
    shutil.copytree(FIXTURES / "linux-disks" / "sys" / "block", root / "sys" / "block", symlinks=True)
    shutil.copytree(FIXTURES / "linux-disks" / "udev", root / "udev")
    commands = copy_commands(root / "commands", iostat="zpool-2.3.2", smart="awake")
    store_result(root / "bench.sqlite", 800e6, 1_700_000_000.0)
    flags = ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
             "--path.udev.data", str(root / "udev" / "data"), *zfs_commands(commands),
             "--bench.db", str(root / "bench.sqlite"), "--capture.metrics-url", ""]
    return root, flags


def dataset_names() -> list[str]:
    """Every dataset and snapshot name the stand-in `zfs list` prints."""
    commands = FIXTURES / "commands" / "zfs-2.3"
    index = json.loads((commands / "index.json").read_text())
    names = []
    for line, name in index["commands"].items():
        if line.startswith("zfs list"):
            names += [row.split("\t")[0] for row in (commands / name).read_text().splitlines() if row]
    return names
