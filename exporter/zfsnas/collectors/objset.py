"""Collector `objset`: per-dataset I/O counters from `<pool>/objset-0x*`.

Owns `zfs_dataset_*_total` (labels `pool`, `dataset`, the same as the `datasets` collector's so
the two join). Two objsets reporting the same dataset name (a rename caught mid-way) are summed.

A big NAS has thousands of datasets, most of them idle between two scrapes, and twenty-odd
families of one sample per dataset: formatting those lines was most of a scrape. So the datasets
are rows of an `exposition.RowTable`, which keeps each dataset's lines while its counters stay the
same (the source hands out the very same values then).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..exposition import Families, Family, RowTable
from .base import Collector, Report

if TYPE_CHECKING:
    pass

_NAMES = {
    "writes": ("zfs_dataset_writes_total", "Write operations on the dataset."),
    "nwritten": ("zfs_dataset_written_bytes_total", "Bytes written to the dataset."),
    "reads": ("zfs_dataset_reads_total", "Read operations on the dataset."),
    "nread": ("zfs_dataset_read_bytes_total", "Bytes read from the dataset."),
    "nunlinks": ("zfs_dataset_unlinks_total", "Files queued for deletion (unlinked set)."),
    "nunlinked": ("zfs_dataset_unlinked_total", "Files whose deletion completed."),
}


@functools.lru_cache(maxsize=512)
def objset_metric(field: str) -> tuple[str, str]:
    if field in _NAMES:
        return _NAMES[field]
    if field.endswith("_bytes"):
        return f"zfs_dataset_{field}_total", f"Bytes (objset {field})."
    if field.endswith(("_write", "_alloc")):  # zil_itx_metaslab_*_write/_alloc count bytes
        stem, _, what = field.rpartition("_")
        return f"zfs_dataset_{stem}_{'written' if what == 'write' else 'allocated'}_bytes_total", f"Bytes (objset {field})."
    return f"zfs_dataset_{field.removesuffix('_count')}_total", f"Events (objset {field})."


LABELS = ("pool", "dataset")
Row = tuple[tuple[str, str], dict[str, int]]  # ((pool, dataset), field -> value)


@functools.lru_cache(maxsize=64)
def _columns(fields: tuple[str, ...]) -> tuple[tuple[str, str, str, str, float], ...]:
    return tuple((field, *objset_metric(field), "counter", 1) for field in fields)


def columns_of(values: dict[str, int]) -> tuple[tuple[str, str, str, str, float], ...]:
    """A dataset's `RowTable` columns: one counter per field, the same object for the same fields."""
    return _columns(tuple(values))


class ObjsetCollector(Collector):
    name = "objset"
    description = "per-dataset I/O from objset kstats"

    def setup(self) -> None:
        self._rows = RowTable(LABELS, columns_of)

    def collect(self, report: Report) -> Iterable[Family]:
        rows: list[Row] = []
        for pool in self.list_pools(report):
            with report.guard(f"pool {pool} objsets"):
                datasets: dict[str, dict[str, int]] = {}
                summed: set[str] = set()
                for objset in self.ctx.kstat.objsets(pool):
                    seen = datasets.get(objset.dataset)
                    if seen is None:  # only read: the source may hand the same values to the next scrape
                        datasets[objset.dataset] = objset.values
                        continue
                    if objset.dataset not in summed:
                        seen = datasets[objset.dataset] = dict(seen)
                        summed.add(objset.dataset)
                    for field, value in objset.values.items():
                        seen[field] = seen.get(field, 0) + value
                rows.extend(((pool, dataset), values) for dataset, values in datasets.items())
        families = Families()
        families.add_rows(self._rows, rows)
        return families
