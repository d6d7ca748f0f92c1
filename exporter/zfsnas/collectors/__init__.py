"""Collectors: each turns values from the sources into metric families, one module per name.

`ALL` lists every collector class; `--collector.<name>` / `--no-collector.<name>` switch them.
"""

from __future__ import annotations

from . import arc, bench, datasets, disks, objset, pools, poolstats, smart, tunables, txg, vdevlatency
from .base import Collector

ALL: list[type[Collector]] = [
    arc.ArcCollector,
    txg.TxgCollector,
    objset.ObjsetCollector,
    poolstats.PoolstatsCollector,
    tunables.TunablesCollector,
    datasets.DatasetsCollector,
    pools.PoolsCollector,
    disks.DisksCollector,
    smart.SmartCollector,
    vdevlatency.VdevLatencyCollector,
    bench.BenchCollector,
]
