"""Seeded variations of every kind of matrix, stored through the store's public API: the inputs
nobody listed, for the invariants of the findings (test_report_findings.py) and of the charts
(test_report_charts.py). `load_variation(store, seed)` is replayable: the same seed, the same matrix."""

from __future__ import annotations

import math
import random

from zfsnas.store.configuration import pairs
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

from .configs import MIRRORS, RAIDZ2, configuration

SIZES = ("4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M")
AXES = {
    "compression": ("off", "lz4", "zstd-1", "zstd-3", "zstd-fast-10", "gzip-9"),
    "recordsize": SIZES[4:],
    "volblocksize": SIZES[:5],
    "encryption": ("off", "aes-256-gcm"),
    "ram": ("8G", "16G", "32G", "64G"),
    "ntfs_cluster": ("4K", "64K"),
    "layout": ("mirror", "raidz2"),
    "partition": ("whole disk", "partition"),
    "size": ("5G", "10G", "20G", "70G"),
}
WORKLOADS = ("seq-write", "seq-read", "cdm-rnd4k-q32t1-write", "cdm-seq1m-q8t1-read", "copy")


def variation(seed: int):
    """A matrix of a random shape: 1-3 axes (never recordsize with volblocksize), 1-3 workloads, cells
    dropped at random, run in a shuffled order, one or three repeats, and figures from random effects
    (each value of each axis a factor, one random interaction), some figures not measured at all."""
    rng = random.Random(seed)
    names = [n for n in AXES if n != "volblocksize"] if rng.random() < 0.5 else [n for n in AXES if n != "recordsize"]
    chosen = rng.sample(names, rng.randint(1, 3))
    values = {n: rng.sample(AXES[n], rng.randint(2, min(4, len(AXES[n])))) for n in chosen}
    workloads = rng.sample(WORKLOADS, rng.randint(1, 3))
    effect = {(n, v): math.exp(rng.gauss(0, 0.4)) for n in chosen for v in values[n]}
    twisted = rng.choice(chosen)           # an interaction: one value of one axis, in one workload only
    twist = (twisted, rng.choice(values[twisted]), rng.choice(workloads), math.exp(rng.gauss(0, 1.0)))
    repeats = rng.choice((1, 3))
    measured = {"used": rng.random() < 0.6, "cpu": rng.random() < 0.5, "disks": rng.random() < 0.3,
                "ratio": rng.random() < 0.5}
    cells = [dict(zip(chosen, combo)) for combo in _product([values[n] for n in chosen])]
    cells = [(w, c) for w in workloads for c in cells if rng.random() < 0.85]
    rng.shuffle(cells)
    return chosen, cells, effect, twist, repeats, measured, rng


def _product(lists):
    out = [[]]
    for values in lists:
        out = [o + [v] for o in out for v in values]
    return [tuple(o) for o in out]


def _config(workload: str, cell: dict[str, str]):
    props = {"compression": cell.get("compression", "lz4"), "encryption": cell.get("encryption", "off")}
    if "volblocksize" in cell:
        props.update(recordsize="", volblocksize=cell["volblocksize"])
    layout = dict(MIRRORS if cell.get("layout") == "mirror" else RAIDZ2)
    if "partition" in cell:
        layout["partition"] = cell["partition"]
    labels = {k: cell[k] for k in ("ram", "ntfs_cluster") if k in cell}
    return configuration(matrix="variation", workload=workload, recordsize=cell.get("recordsize", "1M"),
                         size=cell.get("size", "16G"), properties=props, layout=pairs(layout),
                         pool="fast" if cell.get("layout") == "mirror" else "tank",
                         user_labels=pairs(labels))


def load_variation(store: Store, seed: int) -> None:
    chosen, cells, effect, twist, repeats, measured, rng = variation(seed)
    run = f"var-{seed}"
    store.start_matrix(run, "variation", "tank/scratch", len(cells))
    for n, (workload, cell) in enumerate(cells, 1):
        factor = math.prod(effect[a, v] for a, v in cell.items())
        axis, value, where, times = twist
        if workload == where and cell.get(axis) == value:
            factor *= times
        base = {"seq-write": 800.0, "seq-read": 1100.0, "copy": 180.0}.get(workload, 90.0)
        for repeat in range(repeats):
            jitter = 1 + (rng.uniform(-0.02, 0.02) if repeats > 1 else 0)
            mbs = base * factor * jitter
            logical = 16 * 2**30
            ratio = round(1 + 1.5 * effect.get(("compression", cell.get("compression", "")), 0.5) % 1.5, 2)
            figures = dict(throughput_bytes_per_second=mbs * 1e6, bytes=int(mbs * 1e6 * 60))
            if measured["used"]:
                figures.update(used_bytes=int(logical / ratio), logicalused_bytes=logical)
            if measured["ratio"]:
                figures.update(compressratio=ratio)
            if measured["cpu"]:
                busy = min(90.0, 10 * factor * jitter)
                figures.update(cpu_user_seconds=busy * 0.3, cpu_system_seconds=busy * 0.7, cpu_iowait_seconds=2.0,
                               cpu_idle_seconds=98.0 - busy)
            if measured["disks"]:
                written = mbs * 1e6 * 60 * (2.0 if cell.get("layout") == "mirror" else 1.34)
                figures.update(disks={"sda": {"written_bytes": int(written / 2), "read_bytes": 0},
                                      "sdb": {"written_bytes": int(written / 2), "read_bytes": 0}})
            store.record_result(run, n, _config(workload, cell), repeat=repeat + 1, started=1e9 + n * 100 + repeat,
                                finished=1e9 + n * 100 + repeat + 60, figures=ResultFigures(**figures))
    store.finish_matrix(run, "complete")


