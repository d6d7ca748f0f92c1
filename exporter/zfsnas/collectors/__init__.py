"""Collectors: each turns values from the sources into metric families, one module per name.

`ALL` is the one registry of collectors: every collector class, in the order of the page and of
`--help`; `--collector.<name>` / `--no-collector.<name>` switch them, and every list of collectors
elsewhere (the wiring's flags, the tests' golden pages, fuzz corpus, replays: tests/registry.py) is
derived from it. Adding a collector: README's "Adding a collector".
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
