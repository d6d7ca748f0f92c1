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
process (`forked.ForkedWork`, see docs/performance.md): 5,000 datasets are 400 ms of CPU that,
in a thread, would hold the GIL against the scrape. The snapshot families are built in the refresh
threads too, whenever either source changes. A scrape only copies text (`Family.frozen`).

Memory is bounded by design, whatever `zfs` prints: both listings stream from the command into the
child (never held whole, in either process); the child keeps at most `--datasets.max-page-bytes`
of dataset families' text (built and measured `CHUNK` datasets at a time: the datasets past it are
left out, counted as `over_limit`, and the source reports 0 while serving the rest), and counts
snapshots only of the datasets it kept. A bad line or field is left out and counted
(`zfs_exporter_source_values_dropped_total`), never the listing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import closing
from itertools import islice
from typing import BinaryIO, ClassVar

from ..exposition import Family, frozen_within
from ..forked import ForkedWork
from ..refresh import RenderedOnce, return_big_blocks
from ..settings import Settings, flag, interval
from ..sources.commands import split_lines
from ..sources.model import Dropped, SourceIncomplete, check_some_read
from ..sources.zfs_datasets import (
    LIST_DATASETS,
    LIST_SNAPSHOTS,
    MAX_LINE_BYTES,
    SETTINGS,
    Dataset,
    Snapshots,
    parse_dataset_line,
    summarise_snapshots,
)
from .base import RefreshingCollector, Report
from .filters import PoolFilter, compile_pattern, name_selected

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
DEFAULT_MAX_PAGE_BYTES = 16 * 1024 * 1024
CHUNK = 256  # datasets built and measured at a time against --datasets.max-page-bytes
UNLISTED_DATASETS = 10_000  # datasets whose snapshots are counted before any dataset listing came


def build_families(datasets: list[Dataset]) -> list[Family]:
    """Every dataset family at once: done in the refresh thread, not at scrape time."""
    families: dict[str, Family] = {}

    def family(name: str, documentation: str, labels: tuple[str, ...] = LABELS) -> list:
        fam = families.get(name)
        if fam is None:
            fam = families[name] = Family(name, documentation, "gauge", labels)
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
    return list(families.values())


def build_families_within(datasets: Iterable[Dataset], max_bytes: int) -> tuple[list[str], list[Family], int]:
    """`build_families` of `datasets`, CHUNK at a time, frozen, until their text would pass
    `max_bytes`: (the names kept, their families (text only: samples are parsed back from it if
    something asks), how many datasets of the chunk that would pass the limit were left out).
    Nothing after that chunk is read. Frozen families travel from the parse child as their text
    alone: 60,000 sample tuples would cost memory in the exporter and 20 ms of unpickling that
    holds the GIL."""
    chunks: list[list[Dataset]] = []

    def built() -> Iterator[list[Family]]:
        each = iter(datasets)
        while chunk := list(islice(each, CHUNK)):
            chunks.append(chunk)
            yield build_families(chunk)

    families, taken = frozen_within(built(), max_bytes)
    names = [ds.name for chunk in chunks[:taken] for ds in chunk]
    left_out = sum(map(len, chunks[taken:]))  # the caller counts the lines after it, unparsed
    return names, families, left_out


class DatasetsSettings(Settings):
    namespace = "datasets"
    refresh_interval: float = interval("--datasets.refresh-interval", 60.0, "`zfs list` runs for datasets")
    snapshots: str = flag("--datasets.snapshots", choices=("off", "count"), default="count",
                          help="count snapshots per dataset (default count) or not (off)")
    snapshot_interval: float = interval("--datasets.snapshot-interval", 900.0, "snapshot counts")
    max_page_bytes: int = flag("--datasets.max-page-bytes", type=int, default=DEFAULT_MAX_PAGE_BYTES,
                               help="bytes of /metrics text the datasets collector may hold (default "
                                    f"{DEFAULT_MAX_PAGE_BYTES}, about 13,000 datasets with short names): the datasets "
                                    "past it are left out (counted) and source zfs_datasets reports 0")
    include: str | None = flag("--datasets.include",
                               help="regular expression on the whole dataset name (e.g. 'tank/media(/.*)?'): only "
                                    "matching datasets are exported")
    # `--dataset.exclude` is the spelling of the first releases, kept as an alias.
    exclude: str | None = flag("--datasets.exclude", "--dataset.exclude",
                               help="regular expression on the whole dataset name (e.g. 'tank/scratch(/.*)?'): "
                                    "matching datasets are not exported (wins over --datasets.include)")


class DatasetsCollector(RefreshingCollector[DatasetsSettings]):
    name = "datasets"
    description = "space, compression and settings of every dataset, snapshot counts (zfs list, in the background)"
    programs = ("zfs",)
    parse_in_child: ClassVar[bool] = True  # benchmarks/refresh_bench.py --old sets False (the old way)
    shared_settings = (PoolFilter,)

    def setup(self) -> None:
        self.include = compile_pattern(self.settings.include, "--datasets.include")
        self.exclude = compile_pattern(self.settings.exclude, "--datasets.exclude")
        self.datasets = self.add_refresher("zfs_datasets", self._read_datasets, self.settings.refresh_interval,
                                           wait_for_start=True)
        self.snapshots = None
        if self.settings.snapshots == "count":
            self.snapshots = self.add_refresher("zfs_snapshots", self._read_snapshots,
                                                self.settings.snapshot_interval, wait_for_start=True)
        # The snapshot families of the last three (dataset names, snapshots) pairs: a refresh keeps
        # its pair's a moment before it publishes its value, so the scrapes in between still ask for
        # the one before.
        self._snapshot_rendered = RenderedOnce(3)
        # One parse child at a time; each renders the snapshot families for the other source's
        # latest value, kept here before its refresher publishes it.
        self._render_lock = threading.Lock()
        self._latest_names: list[str] | None = None
        self._names_tried = threading.Event()  # snapshots are counted for listed datasets once there are some
        self._latest_snapshots: dict[str, Snapshots] | None = None
        self.max_page_bytes = self.settings.max_page_bytes
        self.forked = ForkedWork(self.ctx.command_timeout)

    def _selected(self, name: str) -> bool:
        return (self.ctx.pool_filter.selected(name.split("/", 1)[0])
                and name_selected(name, self.include, self.exclude))

    def _read_datasets(self) -> tuple[list[str], list[Family]]:
        try:
            return self._list_datasets()
        finally:
            self._names_tried.set()

    def _list_datasets(self) -> tuple[list[str], list[Family]]:
        return_big_blocks()  # the families' texts come back as blocks of megabytes, a new set each refresh
        listing = self.ctx.commands.chunks(list(LIST_DATASETS))
        with closing(listing), self._render_lock:
            snapshots = self._latest_snapshots
            if self.parse_in_child:
                names, families, snapshot_rendered, dropped, left_out = self.forked.run(
                    lambda fed: self._render(fed, snapshots), "parsing zfs list", feed=listing)
            else:
                names, families, dropped, left_out = self._families(listing)
                snapshot_rendered = None
            self._latest_names = names
            if snapshots is not None:
                self._keep_snapshot_families(names, snapshots, snapshot_rendered)
        self.datasets.count_dropped(dropped)
        check_some_read(names, dropped, "zfs list")
        if left_out:
            raise SourceIncomplete(f"zfs list: {left_out} of {left_out + len(names)} datasets left out: their "
                                   f"families would pass --datasets.max-page-bytes ({self.max_page_bytes}); "
                                   "raise it or leave datasets out with --datasets.exclude", (names, families))
        return names, families

    def _families(self, chunks: Iterable[bytes]) -> tuple[list[str], list[Family], Dropped, int]:
        """Parse a `zfs list` stream, keep the selected datasets' families within the page limit:
        (names, families, what was dropped, how many datasets were left out)."""
        dropped = Dropped()
        lines = enumerate(split_lines(chunks, MAX_LINE_BYTES), 1)
        seen: set[str] = set()  # no more than the datasets kept (and one chunk): those past the limit are not parsed

        def datasets() -> Iterator[Dataset]:
            for number, line in lines:
                ds = parse_dataset_line(line.decode("utf-8", "surrogateescape"), dropped, number)
                if ds is None or not self._selected(ds.name):
                    continue
                if ds.name in seen:  # zfs never lists a dataset twice; two series of one name would not parse
                    dropped.add("malformed", f"zfs list line {number}: {ds.name[:100]!r} listed again")
                    continue
                seen.add(ds.name)
                yield ds

        names, families, left_out = build_families_within(datasets(), self.max_page_bytes)
        if left_out:
            left_out += sum(1 for _, line in lines if line)  # past the limit: counted, not parsed
            dropped.add("over_limit", f"zfs list: {left_out} datasets past --datasets.max-page-bytes", left_out,
                        line=False)
        return names, families, dropped, left_out

    def _render(self, fed: BinaryIO, snapshots: dict[str, Snapshots] | None
                ) -> tuple[list[str], list[Family], tuple[Family, ...] | None, Dropped, int]:
        """In the parse child: dataset names, their families' text and that of the snapshot families."""
        names, families, dropped, left_out = self._families(_read_chunks(fed))
        snapshot_families = self._build_snapshot_families(names, snapshots) if snapshots is not None else None
        return names, families, snapshot_families, dropped, left_out

    def _read_snapshots(self) -> dict[str, Snapshots]:
        # Counted for the datasets zfs list printed (and this collector kept): nothing else is served.
        # Before any listing (the first failed), for at most UNLISTED_DATASETS datasets.
        self._names_tried.wait(2 * self.forked.timeout + 5)
        listing = self.ctx.commands.chunks(list(LIST_SNAPSHOTS))
        # The lock is held while the listing streams: zfs commands run one at a time anyway.
        with closing(listing), self._render_lock:
            names = self._latest_names
            if self.parse_in_child:
                snapshots, rendered, dropped = self.forked.run(lambda fed: self._summarise(fed, names),
                                                               "counting snapshots", feed=listing)
            else:
                dropped = Dropped()
                snapshots, rendered = _summary(listing, names, dropped), None
            self._latest_snapshots = snapshots
            if names is not None:
                self._keep_snapshot_families(names, snapshots, rendered)
        if self.snapshots is not None:  # always, in this source's own refresh
            self.snapshots.count_dropped(dropped)
        return snapshots

    def _summarise(self, fed: BinaryIO, names: list[str] | None
                   ) -> tuple[dict[str, Snapshots], tuple[Family, ...] | None, Dropped]:
        """In the parse child: the snapshot summary of the lines fed, and the snapshot families' text."""
        dropped = Dropped()
        snapshots = _summary(_read_chunks(fed), names, dropped)
        return snapshots, None if names is None else self._build_snapshot_families(names, snapshots), dropped

    def _keep_snapshot_families(self, names: list[str], snapshots: dict[str, Snapshots],
                                rendered: tuple[Family, ...] | None) -> None:
        """What a parse child rendered for this (datasets, snapshots) pair, for the scrapes to serve
        (without a child: built on the scrape that first asks)."""
        if rendered is not None:
            self._snapshot_rendered.put((names, snapshots), rendered)

    def stop(self) -> None:
        self.forked.close()  # a parse still running is killed, not waited for
        self._names_tried.set()  # a snapshot refresh waiting for the first dataset listing goes on
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
        count = Family("zfs_dataset_snapshots", "Number of snapshots of the dataset (refreshed on a slower "
                       "interval).", "gauge", LABELS)
        newest = Family("zfs_dataset_newest_snapshot_timestamp_seconds", "Creation time of the newest snapshot "
                        "of the dataset, Unix seconds (refreshed with the snapshot count).", "gauge", LABELS)
        for name in names:
            key = (name.split("/", 1)[0], name)
            found = snapshots.get(name)
            count.samples.append(("", key, found.count if found else 0))
            if found and found.newest is not None:
                newest.samples.append(("", key, found.newest))
        return (count.frozen(), newest.frozen()) if newest.samples else (count.frozen(),)


def _read_chunks(fed: BinaryIO) -> Iterator[bytes]:
    """What the parse child is fed, as it comes."""
    while chunk := fed.read(65536):
        yield chunk


def _summary(chunks: Iterable[bytes], names: list[str] | None, dropped: Dropped) -> dict[str, Snapshots]:
    lines = (line.decode("utf-8", "surrogateescape") for line in split_lines(chunks, MAX_LINE_BYTES))
    return summarise_snapshots(lines, dropped, known=None if names is None else set(names), limit=UNLISTED_DATASETS)
