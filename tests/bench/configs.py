"""Configurations for tests, built the way the planner builds them (store/configuration.py)."""

from __future__ import annotations

import dataclasses

from zfsnas.store.configuration import IDENTITY_PARAMETERS, Configuration, pairs

# What the 2.3.2 guest's RAID-Z2 and mirror pools look like to `config.pool_layout`.
RAIDZ2 = pairs({"vdevs": "data:raidz2:8", "ashift": "12", "models": "ZFSNAS SATA HDD x8"})
MIRRORS = pairs({"vdevs": ",".join(["data:mirror:2"] * 4), "ashift": "12", "models": "ZFSNAS SATA HDD x8"})
PARAMETERS = {"zfs_dirty_data_max": "4294967296", "zfs_dirty_data_max_percent": "10", "zfs_arc_max": "0",
              "zfs_txg_timeout": "5", "zfs_vdev_async_write_max_active": "10", "zfs_delay_min_dirty_percent": "60"}
assert set(PARAMETERS) == set(IDENTITY_PARAMETERS)


def configuration(matrix: str = "m", workload: str = "seq-write", compression: str = "lz4", recordsize: str = "1M",
                  encryption: str = "off", size: str = "16G", pool: str = "tank", **changes) -> Configuration:
    """A configuration of a fio cell; keyword `changes` replace any other field (layout=MIRRORS,
    parameters={...} merged into PARAMETERS, data={...}, properties={...} merged, host=...)."""
    props = {"compression": compression, "recordsize": recordsize, "encryption": encryption,
             **changes.pop("properties", {})}
    params = {**PARAMETERS, **changes.pop("parameters", {})}
    data = changes.pop("data", {"compressibility": "50", "bytes": "17179869184", "kind": "filesystem",
                                "runtime": "0", "ramp_time": "0"})
    base = Configuration(matrix=matrix, workload=workload, size=size, data=pairs(data), properties=pairs(props),
                         pool=pool, layout=RAIDZ2, parameters=pairs(params), zfs_version="zfs-2.3.2-1 zfs-kmod-2.3.2-1",
                         direct="1", host="nas1")
    return dataclasses.replace(base, **changes)
