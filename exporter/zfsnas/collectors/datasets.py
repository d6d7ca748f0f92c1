"""Collector `datasets`: space, compression and configuration of every filesystem and volume.

Owns `zfs_dataset_compressratio`, `zfs_dataset_refcompressratio`, `zfs_dataset_*_bytes` (used,
logical used, referenced, logical referenced, available, used by snapshots, written since the last
snapshot; quota, refquota, reservation, refreservation only where set; volume size for volumes),
`zfs_dataset_info{pool,dataset,type,compression,recordsize,...}` (`recordsize` holds volblocksize
for volumes), `zfs_dataset_snapshots` (a count per dataset, never one series per snapshot) and
`zfs_dataset_newest_snapshot_timestamp_seconds` (creation time of its newest snapshot, only for
datasets that have one) and `zfs_dataset_key_loaded` (encrypted datasets only: 1 when the key is
loaded, 0 while the dataset is locked: not mounted, its shares and backups down).
Labels `pool` and `dataset` are the `objset` collector's, so the two join in PromQL.

`zfs list` can take minutes on a NAS with tens of thousands of snapshots, so nothing here runs on
the scrape path: source `zfs_datasets` refreshes every `--datasets.refresh-interval` seconds and
`zfs_snapshots` (the count and the newest time) every `--datasets.snapshot-interval` seconds (`--datasets.snapshots off`
disables it). The `zfs list` output is parsed and its families rendered to text in a forked child
process (`refresh.ForkedWork`, see docs/performance.md): 5,000 datasets are 400 ms of CPU that,
in a thread, would hold the GIL against the scrape. The snapshot families are built in the refresh
threads too, whenever either source changes. A scrape only copies text (`exposition.FrozenFamily`).
"""

from __future__ import annotations

import argparse
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from typing import Any, BinaryIO, ClassVar

from ..exposition import Family, FrozenFamily, RenderIssues
from ..refresh import BackgroundRefresher, ForkedWork, RenderedOnce
from ..sources.zfs_datasets import (
    LIST_DATASETS,
    LIST_SNAPSHOTS,
    SETTINGS,
    Dataset,
    Snapshots,
    parse_datasets,
    read_snapshots,
    summarise_snapshots,
)
from .base import Context, RefreshingCollector, Report

LABELS = ("pool", "dataset")
# (property, metric, help); None-valued (`-`) properties are skipped.
BYTES = (
    ("used", "zfs_dataset_used_bytes", "Space used by the dataset and everything under it (zfs used)."),
    ("logicalused", "zfs_dataset_logical_used_bytes", "Space used before compression (zfs logicalused)."),
    ("referenced", "zfs_dataset_referenced_bytes", "Data reachable from the dataset itself (zfs referenced)."),
    ("logicalreferenced", "zfs_dataset_logical_referenced_bytes",
     "Referenced data before compression (zfs logicalreferenced)."),
    ("available", "zfs_dataset_available_bytes", "Space available to the dataset (zfs available)."),
    ("usedbysnapshots", "zfs_dataset_used_by_snapshots_bytes", "Space held only by snapshots (zfs usedbysnapshots)."),
    ("written", "zfs_dataset_written_since_snapshot_bytes",
     "Referenced data written since the latest snapshot (zfs written)."),
    ("volsize", "zfs_dataset_volume_size_bytes", "Logical size of a volume (zfs volsize)."),
)
# Only served when set (non-zero): 0 means "none" for these.
LIMITS = (
    ("quota", "zfs_dataset_quota_bytes", "Quota of the dataset and its descendants (zfs quota), when set."),
    ("refquota", "zfs_dataset_refquota_bytes", "Quota on referenced data (zfs refquota), when set."),
    ("reservation", "zfs_dataset_reservation_bytes", "Space reserved for the dataset (zfs reservation), when set."),
    ("refreservation", "zfs_dataset_refreservation_bytes",
     "Space reserved for referenced data (zfs refreservation), when set."),
)
RATIOS = (
    ("compressratio", "zfs_dataset_compressratio",
     "Compression ratio of used data as ZFS prints it (1.48 means 1.48x)."),
    ("refcompressratio", "zfs_dataset_refcompressratio",
     "Compression ratio of referenced data as ZFS prints it (1.48 means 1.48x)."),
)
INFO_SETTINGS = tuple(s for s in SETTINGS if s not in ("volblocksize", "keystatus"))  # keystatus: zfs_dataset_key_loaded
KEY_STATES = {"available": 1, "unavailable": 0}  # `-` for a dataset that is not encrypted: not served
INFO_LABELS = ("pool", "dataset", "type", *INFO_SETTINGS)


def compile_pattern(text: str | None, flag: str) -> re.Pattern | None:
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise SystemExit(f"zfsnas-exporter: {flag}: invalid regular expression: {exc}") from None


def name_selected(name: str, include: re.Pattern | None, exclude: re.Pattern | None) -> bool:
    """`--pools.include` / `--pools.exclude` (and the datasets' pair): whole-name regular
    expressions; exclude wins."""
    return (include is None or include.fullmatch(name) is not None) and not (exclude and exclude.fullmatch(name))


def build_families(datasets: list[Dataset]) -> list[Family]:
    """Every dataset family at once: done in the refresh thread, not at scrape time."""
    families: dict[str, FrozenFamily] = {}

    def family(name: str, documentation: str, labels: tuple[str, ...] = LABELS) -> list:
        fam = families.get(name)
        if fam is None:
            fam = families[name] = FrozenFamily(name, documentation, "gauge", labels)
        return fam.samples

    for ds in datasets:
        key = (ds.pool, ds.name)
        for prop, name, documentation in RATIOS:
            if (ratio := ds.ratios[prop]) is not None:
                family(name, documentation).append(("", key, ratio))
        for prop, name, documentation in BYTES:
            if (number := ds.numbers[prop]) is not None:
                family(name, documentation).append(("", key, number))
        for prop, name, documentation in LIMITS:
            if number := ds.numbers[prop]:
                family(name, documentation).append(("", key, number))
        settings = dict(ds.settings)
        if ds.type == "volume":
            settings["recordsize"] = settings.get("volblocksize", "-")
        family("zfs_dataset_info", "Configuration of the dataset (recordsize holds volblocksize for volumes).",
               INFO_LABELS).append(("", (*key, ds.type, *(settings.get(s, "") for s in INFO_SETTINGS)), 1))
        if (loaded := KEY_STATES.get(settings.get("keystatus", ""))) is not None:
            family("zfs_dataset_key_loaded", "1 if the encryption key of the dataset is loaded, 0 while it is locked "
                   "(zfs keystatus; encrypted datasets only).").append(("", key, loaded))
    return [family.freeze() for family in families.values()]


# What the parse child sends back per family: name, help, type, label names, text, render problems.
Rendered = tuple[str, str, str, tuple[str, ...], str, RenderIssues | None]


class ChildRenderedFamily(FrozenFamily):
    """A family whose text was rendered in the parse child. Its samples are not sent back (60,000
    tuples: their memory in the exporter and 20 ms of unpickling that holds the GIL); `rebuild`
    makes them in this process for whoever asks, which only the prometheus_client adapter does."""

    __slots__ = ("_rebuild",)

    def __init__(self, rendered: Rendered, rebuild: Callable[[], dict[str, Family]]):
        name, documentation, kind, labelnames, text, problems = rendered
        super().__init__(name, documentation, kind, labelnames)
        self.text, self.problems, self._rebuild = text, problems, rebuild

    @property  # a view of what the child would have built
    def samples(self) -> list:
        return self._rebuild()[self.name].samples

    @samples.setter
    def samples(self, value: list) -> None:
        """Family.__init__ sets an empty list; the samples are the rebuilt ones."""


class DatasetsCollector(RefreshingCollector):
    name = "datasets"
    description = "space, compression and settings of every dataset, snapshot counts (zfs list, in the background)"
    programs = ("zfs",)
    parse_in_child: ClassVar[bool] = True  # benchmarks/refresh_bench.py --old sets False (the old way)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--datasets.refresh-interval", dest="datasets_refresh_interval", type=float, default=60.0,
                            help="seconds between `zfs list` runs for datasets (default 60)")
        parser.add_argument("--datasets.snapshots", dest="datasets_snapshots", choices=("off", "count"),
                            default="count", help="count snapshots per dataset (default count) or not (off)")
        parser.add_argument("--datasets.snapshot-interval", dest="datasets_snapshot_interval", type=float,
                            default=900.0, help="seconds between snapshot counts (default 900)")
        parser.add_argument("--datasets.include", dest="datasets_include", default=None,
                            help="regular expression on the whole dataset name (e.g. 'tank/media(/.*)?'): only "
                                 "matching datasets are exported")
        # `--dataset.exclude` is the spelling of the first releases, kept as an alias.
        parser.add_argument("--datasets.exclude", "--dataset.exclude", dest="datasets_exclude", default=None,
                            help="regular expression on the whole dataset name (e.g. 'tank/scratch(/.*)?'): "
                                 "matching datasets are not exported (wins over --datasets.include)")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        args = ctx.args
        self.include = compile_pattern(getattr(args, "datasets_include", None), "--datasets.include")
        self.exclude = compile_pattern(getattr(args, "datasets_exclude", None), "--datasets.exclude")
        self.include_pool = compile_pattern(getattr(args, "pools_include", None), "--pools.include")
        self.exclude_pool = compile_pattern(getattr(args, "pools_exclude", None), "--pools.exclude")
        self.datasets = BackgroundRefresher("zfs_datasets", self._read_datasets,
                                            getattr(args, "datasets_refresh_interval", 60.0), wait_for_start=True)
        self.snapshots = None
        if getattr(args, "datasets_snapshots", "count") == "count":
            self.snapshots = BackgroundRefresher("zfs_snapshots", self._read_snapshots,
                                                 getattr(args, "datasets_snapshot_interval", 900.0),
                                                 wait_for_start=True)
        # The snapshot families of the last three (dataset names, snapshots) pairs: a refresh keeps
        # its pair's a moment before it publishes its value, so the scrapes in between still ask for
        # the one before.
        self._snapshot_rendered = RenderedOnce(3)
        # One parse child at a time; each renders the snapshot families for the other source's
        # latest value, kept here before its refresher publishes it.
        self._render_lock = threading.Lock()
        self._latest_names: list[str] | None = None
        self._latest_snapshots: dict[str, Snapshots] | None = None
        self.forked = ForkedWork(getattr(args, "command_timeout", 30.0))

    def _selected(self, name: str) -> bool:
        return (name_selected(name.split("/", 1)[0], self.include_pool, self.exclude_pool)
                and name_selected(name, self.include, self.exclude))

    def _read_datasets(self) -> tuple[list[str], list[Family]]:
        text = self.ctx.commands.run(list(LIST_DATASETS))
        if not self.parse_in_child:
            return self._families(text)
        with self._render_lock:
            snapshots = self._latest_snapshots
            names, rendered, snapshot_rendered = self.forked.run(lambda: self._render(text, snapshots),
                                                                 "parsing zfs list")
            self._latest_names = names
            if snapshots is not None:
                self._keep_snapshot_families(names, snapshots, snapshot_rendered)
        rebuild = _once(lambda: {family.name: family for family in self._families(text)[1]})
        return names, [ChildRenderedFamily(r, rebuild) for r in rendered]

    def _families(self, text: str) -> tuple[list[str], list[Family]]:
        datasets = [ds for ds in parse_datasets(text) if self._selected(ds.name)]
        return [ds.name for ds in datasets], build_families(datasets)

    def _render(self, text: str, snapshots: dict[str, Snapshots] | None
                ) -> tuple[list[str], list[Rendered], list[Rendered]]:
        """In the parse child: dataset names, their families' text and that of the snapshot families."""
        names, families = self._families(text)
        snapshot_families = self._build_snapshot_families(names, snapshots) if snapshots is not None else ()
        return names, _rendered(families), _rendered(snapshot_families)

    def _read_snapshots(self) -> dict[str, Snapshots]:
        if not self.parse_in_child:
            return read_snapshots(self.ctx.commands.lines)
        # The lock is held while the listing streams: zfs commands run one at a time anyway.
        with self._render_lock, closing(self.ctx.commands.lines(list(LIST_SNAPSHOTS))) as lines:  # type: ignore[type-var]
            names = self._latest_names
            snapshots, rendered = self.forked.run(lambda fed: self._summarise(fed, names), "counting snapshots",
                                                  feed=_batches(lines))
            self._latest_snapshots = snapshots
            if names is not None:
                self._keep_snapshot_families(names, snapshots, rendered)
        return snapshots

    def _summarise(self, fed: BinaryIO, names: list[str] | None) -> tuple[dict[str, Snapshots], list[Rendered]]:
        """In the parse child: the snapshot summary of the lines fed, and the snapshot families' text."""
        snapshots = summarise_snapshots(line.decode("utf-8", "surrogateescape") for line in fed)
        return snapshots, _rendered(self._build_snapshot_families(names, snapshots)) if names is not None else []

    def _keep_snapshot_families(self, names: list[str], snapshots: dict[str, Snapshots],
                                rendered: list[Rendered]) -> None:
        """What a parse child rendered for this (datasets, snapshots) pair, for the scrapes to serve."""
        rebuild = _once(lambda: {f.name: f for f in self._build_snapshot_families(names, snapshots)})
        self._snapshot_rendered.put((names, snapshots), tuple(ChildRenderedFamily(r, rebuild) for r in rendered))

    def sources(self) -> Sequence[BackgroundRefresher]:
        return tuple(s for s in (self.datasets, self.snapshots) if s is not None)

    def stop(self) -> None:
        self.forked.close()  # a parse still running is killed, not waited for
        super().stop()

    def collect(self, report: Report) -> Iterable[Family]:
        value = self.current(self.datasets, report)
        if value is None:
            return []
        names, families = value
        out = list(families)
        if self.snapshots is not None:
            snapshots = self.current(self.snapshots, report)
            if snapshots is not None:
                out.extend(self._snapshot_families(names, snapshots))
        return out

    def _snapshot_families(self, names: list[str], snapshots: dict[str, Snapshots]) -> tuple[Family, ...]:
        """Built once per new (datasets, snapshots) pair; datasets without snapshots count 0 and
        have no newest time."""
        return self._snapshot_rendered.get((names, snapshots), lambda: self._build_snapshot_families(names, snapshots))

    @staticmethod
    def _build_snapshot_families(names: list[str], snapshots: dict[str, Snapshots]) -> tuple[Family, ...]:
        count = FrozenFamily("zfs_dataset_snapshots", "Number of snapshots of the dataset (refreshed on a slower "
                             "interval).", "gauge", LABELS)
        newest = FrozenFamily("zfs_dataset_newest_snapshot_timestamp_seconds", "Creation time of the newest snapshot "
                              "of the dataset, Unix seconds (refreshed with the snapshot count).", "gauge", LABELS)
        for name in names:
            key = (name.split("/", 1)[0], name)
            found = snapshots.get(name)
            count.samples.append(("", key, found.count if found else 0))
            if found and found.newest is not None:
                newest.samples.append(("", key, found.newest))
        return (count.freeze(), newest.freeze()) if newest.samples else (count.freeze(),)


def _rendered(families: Iterable[Family]) -> list[Rendered]:
    """Frozen families as the parse child sends them back: everything but their samples."""
    return [(f.name, f.documentation, f.kind, f.labelnames, f.text or "", f.problems)
            for f in families if isinstance(f, FrozenFamily)]


def _batches(lines: Iterable[str], size: int = 4096) -> Iterator[bytes]:
    """Lines as newline-terminated bytes, `size` lines at a time (the names as the command printed them)."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= size:
            yield ("\n".join(batch) + "\n").encode("utf-8", "surrogateescape")
            batch.clear()
    if batch:
        yield ("\n".join(batch) + "\n").encode("utf-8", "surrogateescape")


def _once(make: Callable[[], Any]) -> Callable[[], Any]:
    """`make()` on the first call, its result on every later one."""
    made: list = []

    def get() -> Any:
        if not made:
            made.append(make())
        return made[0]
    return get
