"""Collector `objset`: per-dataset I/O counters from `<pool>/objset-0x*`.

Owns `zfs_dataset_*_total` (labels `pool`, `dataset`, the same as the `datasets` collector's so
the two join). Two objsets reporting the same dataset name (a rename caught mid-way) are summed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from ..exposition import Families, Family
from .base import Collector, Report

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


class ObjsetCollector(Collector):
    name = "objset"
    description = "per-dataset I/O from objset kstats"

    def collect(self, report: Report) -> Iterable[Family]:
        families = Families()
        pools = self.list_pools(report)
        for pool in pools:
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
                add_samples(families, pool, datasets)
        return families


def add_samples(families: Families, pool: str, datasets: dict[str, dict[str, int]]) -> None:
    """Each dataset's fields as samples of their families, in the order of the datasets."""
    labelled = [((pool, dataset), values) for dataset, values in datasets.items()]
    fields = list(labelled[0][1]) if labelled else []
    if all(list(values) == fields for _, values in labelled):
        # One field list for all (what a real pool has): a family's samples in one go per field.
        for field in fields:
            name, help_text = objset_metric(field)
            families.family("counter", name, help_text, LABELS).samples.extend(
                [("", labels, values[field]) for labels, values in labelled])
        return
    samples_of: dict[str, list] = {}  # field -> its family's sample list
    for labels, values in labelled:
        for field, value in values.items():
            samples = samples_of.get(field)
            if samples is None:
                name, help_text = objset_metric(field)
                samples = samples_of[field] = families.family("counter", name, help_text, LABELS).samples
            samples.append(("", labels, value))
