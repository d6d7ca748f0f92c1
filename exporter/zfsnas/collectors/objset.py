"""Collector `objset`: per-dataset I/O counters from `<pool>/objset-0x*`.

Owns `zfs_dataset_*_total` (labels `pool`, `dataset`, the same as the `datasets` collector's so
the two join). Two objsets reporting the same dataset name (a rename caught mid-way) are summed.

A big NAS has thousands of datasets, most of them idle between two scrapes, and twenty-odd
families of one sample per dataset: formatting those lines was most of a scrape. So each
dataset's lines are kept while its counters stay the same (the source hands out the very same
values then), and a family's text is joined from them (`_TextFamilies`, served as
`exposition.TextFamily`). What the kept lines cannot say exactly as `exposition.render_family`
would (a label value to rewrite, a value or field name that cannot be written, datasets with
different fields) is built as plain samples and rendered the usual way.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..exposition import Families, Family, Sample, TextFamily, Unrepresentable, format_labels, format_value, header_text
from ..settings import NoSettings
from .base import Collector, Report

if TYPE_CHECKING:
    from .base import Context

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


class ObjsetCollector(Collector):
    name = "objset"
    description = "per-dataset I/O from objset kstats"

    def __init__(self, ctx: Context, settings: NoSettings | None = None):
        super().__init__(ctx, settings)
        self._text = _TextFamilies()

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
        text = self._text.families(rows)
        if text is not None:
            return text
        families = Families()
        add_samples(families, rows)
        return families


def add_samples(families: Families, rows: list[Row]) -> None:
    """Each row's fields as samples of their families, in the order of the rows."""
    samples_of: dict[str, list] = {}  # field -> its family's sample list
    for labels, values in rows:
        for field, value in values.items():
            samples = samples_of.get(field)
            if samples is None:
                name, help_text = objset_metric(field)
                samples = samples_of[field] = families.family("counter", name, help_text, LABELS).samples
            samples.append(("", labels, value))


@functools.lru_cache(maxsize=512)
def _header(field: str) -> str | None:
    """The HELP and TYPE lines of the field's family as `render_family` writes them; None when its
    name cannot be written."""
    return header_text(*objset_metric(field), "counter", LABELS)


class _Kept:
    """One dataset's lines (one per field, in the order of `fields`) and the values they show."""

    __slots__ = ("fields", "values", "labels", "lines")

    def __init__(self, fields: tuple[str, ...], values: dict[str, int], labels: str, lines: tuple[str, ...]):
        self.fields = fields
        self.values = values
        self.labels = labels
        self.lines = lines


class _TextFamilies:
    """Builds the families of a scrape's rows as text, from the lines of the last scrape where a
    dataset's values are the same. Keeps only the datasets of the last scrape."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], _Kept] = {}
        self._fields: tuple[str, ...] = ()

    def families(self, rows: list[Row]) -> list[Family] | None:
        """The families, or None where `render_family` must write them (the kept lines then start over)."""
        if not rows:
            self._kept = {}
            return []
        fields = tuple(rows[0][1])
        if fields != self._fields:
            self._fields = fields
        fields = self._fields  # the same object as the kept lines' while the fields stay the same
        headers = [_header(field) for field in fields]
        kept, self._kept = self._kept, {}
        if None in headers:
            return None
        names = [objset_metric(field)[0] for field in fields]
        lines = []
        for labels, values in rows:
            last = kept.get(labels)
            if last is None or last.fields is not fields or (last.values is not values and last.values != values):
                last = self._render(fields, names, labels, values, last)
                if last is None:
                    self._kept = {}
                    return None
            self._kept[labels] = last
            lines.append(last.lines)
        return [TextFamily(*objset_metric(field), "counter", LABELS, f"{header}{''.join(column)}", _field_samples,
                           (field, rows))
                for field, header, column in zip(fields, headers, zip(*lines))]

    @staticmethod
    def _render(fields: tuple[str, ...], names: list[str], labels: tuple[str, str], values: dict[str, int],
                last: _Kept | None) -> _Kept | None:
        """The dataset's lines, or None where `render_family` must write them."""
        if tuple(values) != fields:
            return None
        if last is not None:
            text = last.labels
        else:
            issues: list[str] = []
            text = format_labels(LABELS, labels, issues)
            if issues:  # rewritten label values are counted at every render: render_family does that
                return None
        try:
            lines = tuple([f"{name}{text} {format_value(values[field])}\n" for name, field in zip(names, fields)])
        except Unrepresentable:
            return None
        return _Kept(fields, values, text, lines)


def _field_samples(arg: tuple[str, list[Row]]) -> list[Sample]:
    """One field's samples, for a `TextFamily` asked for them."""
    field, rows = arg
    return [("", labels, values[field]) for labels, values in rows]
