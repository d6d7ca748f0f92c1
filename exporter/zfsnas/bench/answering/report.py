"""Summaries of stored results: one `Summary` per configuration id (store/configuration.py), grouped into one
`Section` per matrix with the configurations in the matrix's own order (its cell numbers).

Owns what a figure of a configuration is (median over its complete repeats, with min-max spread and
the count: repeats are never merged silently), which identity fields tell a matrix's configurations
apart, and reading fio's mean latency for the CrystalDiskMark lines. The renderings live in
tables.py (Markdown/CSV), charts.py (PNG/SVG), html.py; recommend.py and compare.py decide from
these summaries. Reads the store's rows, writes nothing.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from ...store.configuration import UNKNOWN, Configuration, differs_text, look_alikes
from ...store.schema import ResultRow
from .axes import Axis, axes, axis_value

GIB = 2**30
MIB = 2**20
# The dataset properties a user chooses between (recommend's candidates, the compression x
# recordsize pivot) and the identity fields of a write-size sweep.
DIMENSIONS = ("property compression", "property recordsize", "property volblocksize")
SIZE_KEYS = ("size", "data bytes")


@dataclass(frozen=True)
class Stat:
    """One figure of a configuration over its repeats: median, min, max, count."""
    median: float
    low: float
    high: float
    n: int
    values: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat | None:
        known = tuple(float(v) for v in values if v is not None)
        if not known:
            return None
        return cls(statistics.median(known), min(known), max(known), len(known), known)

    def scaled(self, factor: float) -> Stat:
        return Stat(self.median * factor, self.low * factor, self.high * factor, self.n,
                    tuple(v * factor for v in self.values))

    def overlaps(self, other: Stat) -> bool:
        return self.low <= other.high and other.low <= self.high


def _cpu_share(row: ResultRow, seconds: float | None) -> float | None:
    """`seconds` of the row's CPU time as a share of all of it (user+system+iowait+idle) of the measured step."""
    total = row.cpu_seconds
    if seconds is None or not total:
        return None
    return float(seconds) / float(total)


def mean_latency_us(fio_json: str | None) -> float | None:
    """fio's mean completion latency (lat_ns, else clat_ns) in microseconds over the measured jobs
    and directions, weighted by their I/O count: what CrystalDiskMark prints between < >."""
    if not fio_json:
        return None
    try:
        jobs = json.loads(fio_json).get("jobs") or []
    except (ValueError, AttributeError):
        return None
    total = weight = 0.0
    for job in jobs:
        if str(job.get("jobname", "")).startswith("prefill"):
            continue
        for direction in ("read", "write"):
            d = job.get(direction) or {}
            lat = d.get("lat_ns") or d.get("clat_ns") or {}
            ios = float(d.get("total_ios") or 0)
            if ios and lat.get("mean") is not None:
                total += float(lat["mean"]) * ios
                weight += ios
    return total / weight / 1000 if weight else None


def _disk_share(row: ResultRow, direction: str) -> float | None:
    """Bytes the pool's disks read or wrote (`direction`: read_bytes, written_bytes) per byte the
    workload moved: a mirror writes every byte to each of its disks, RAID-Z adds parity."""
    if not row.disks or not row.bytes:
        return None
    try:
        disks = json.loads(row.disks)
        return sum(float(d.get(direction) or 0) for d in disks.values()) / float(row.bytes)
    except (ValueError, AttributeError, TypeError):
        return None


# A figure of a result row: name -> function of the row. Units are the stored ones (bytes, seconds,
# ratios); tables and charts scale them for reading.
FIGURES: dict[str, Callable[[ResultRow], float | None]] = {
    "throughput": lambda r: r.throughput_bytes_per_second,
    "seconds": lambda r: r.duration_seconds,
    "ratio": lambda r: r.compressratio,
    "used": lambda r: r.used_bytes,
    "logical": lambda r: r.logicalused_bytes,
    "cpu_user": lambda r: _cpu_share(r, r.cpu_user_seconds),
    "cpu_system": lambda r: _cpu_share(r, r.cpu_system_seconds),
    "cpu": lambda r: _cpu_share(r, None if r.cpu_user_seconds is None or r.cpu_system_seconds is None
                                else r.cpu_user_seconds + r.cpu_system_seconds),
    "disk_written": lambda r: _disk_share(r, "written_bytes"),
    "disk_read": lambda r: _disk_share(r, "read_bytes"),
    "iops": lambda r: r.iops,
    "latency_us": lambda r: r.latency_us if r.latency_us is not None else mean_latency_us(r.fio_json),
}


@dataclass(frozen=True)
class Summary:
    config: Configuration
    cell: int                       # the first cell number it ran as: the matrix's order
    runs: int
    run_ids: tuple[str, ...]
    figures: dict[str, Stat]
    alikes: tuple[tuple[str, tuple[str, ...]], ...] = ()   # look-alikes (same series labels), what tells them apart

    @cached_property
    def id(self) -> str:
        """The configuration's id (a hash of its canonical form: computed once, asked for often)."""
        return self.config.id

    @cached_property
    def flat(self) -> dict[str, str]:
        """`config.flat()`, built once: what axes, groups and pairings read over and over."""
        return self.config.flat()

    @property
    def workload(self) -> str:
        return self.config.workload

    @property
    def mb_per_s(self) -> float | None:
        """Median throughput in MB/s (10^6 bytes/s)."""
        tp = self.median("throughput")
        return None if tp is None else tp / 1e6

    @property
    def compression(self) -> str:
        return self.config.dataset_property("compression", UNKNOWN)

    @property
    def recordsize(self) -> str:
        """recordsize, or volblocksize for a volume ("" when neither was recorded)."""
        return self.config.recordsize

    @property
    def block_property(self) -> str:
        return "volblocksize" if self.config.dataset_property("volblocksize") else "recordsize"

    @property
    def label(self) -> str:
        """compression / recordsize, the way the posts name a configuration (a volume's block size
        named: `lz4 / volblocksize 16K`); what was not recorded is left out, never filled in."""
        known = self.compression != UNKNOWN
        block = self.recordsize if self.block_property == "recordsize" else f"volblocksize {self.recordsize}"
        if known and self.recordsize:
            return f"{self.compression} / {block}"
        if self.recordsize:
            return f"{self.block_property} {self.recordsize}"
        return self.compression if known else self.id

    @property
    def total_bytes(self) -> int | None:
        value = dict(self.config.data).get("bytes")
        return int(value) if value and value.isdigit() else None

    @property
    def dirty_data_max(self) -> int | None:
        value = dict(self.config.parameters).get("zfs_dirty_data_max")
        return int(value) if value and value.isdigit() else None

    @property
    def differs(self) -> str:
        """Configurations with the same series labels as this one, and what tells them apart."""
        return differs_text([(oid, list(diff)) for oid, diff in self.alikes])

    def differs_beyond(self, keys: set[str]) -> str:
        """`differs`, leaving out differences in `keys` (identity fields a table shows as columns)."""
        kept = [(oid, [d for d in diff if d.split(":", 1)[0] not in keys]) for oid, diff in self.alikes]
        return differs_text([(oid, diff) for oid, diff in kept if diff])

    def get(self, figure: str) -> Stat | None:
        return self.figures.get(figure)

    def median(self, figure: str) -> float | None:
        stat = self.figures.get(figure)
        return None if stat is None else stat.median


@dataclass(frozen=True)
class Section:
    """One matrix: its configurations in matrix order; `axes` says what they vary in."""
    matrix: str
    summaries: list[Summary]

    @cached_property
    def axes(self) -> list[Axis]:
        """What the section's configurations vary in (axes.py), the workload aside."""
        return axes(s.config for s in self.summaries)

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(s.workload for s in self.summaries))

    @property
    def pools(self) -> list[str]:
        return sorted({s.config.pool for s in self.summaries})

    @property
    def title(self) -> str:
        return f"{self.matrix} on {', '.join(self.pools)}"

    def groups(self, free: tuple[str, ...]) -> list[list[Summary]]:
        """The configurations grouped by every identity field except `free`, in matrix order."""
        out: dict[tuple[tuple[str, str], ...], list[Summary]] = {}
        for s in self.summaries:
            key = tuple(sorted((k, v) for k, v in s.flat.items() if k not in free))
            out.setdefault(key, []).append(s)
        return list(out.values())

    def describe(self, summary: Summary, leave_out: tuple[str, ...] = ()) -> str:
        """What sets `summary` apart within the section: each axis's value (`volblocksize 4K, ram 16G`),
        axes in `leave_out` (by name) aside."""
        return ", ".join(f"{a.name} {axis_value(a.keys, summary.flat)}" for a in self.axes if a.name not in leave_out)

    def uncompressed_used(self, summary: Summary) -> float | None:
        """The on-disk bytes of the `compression=off` configuration that differs from `summary` only
        in compression (the ISO post's 100 %), else None."""
        return self._uncompressed.get(_without(summary.flat, "property compression"))

    @cached_property
    def _uncompressed(self) -> dict[tuple[tuple[str, str], ...], float | None]:
        """The `off` configurations' on-disk bytes by everything but their compression: built once."""
        return {_without(s.flat, "property compression"): s.median("used") for s in self.summaries
                if s.compression == "off"}

    def percent_of_uncompressed(self, summary: Summary) -> float | None:
        """On-disk size as % of uncompressed: against the `off` configuration when the matrix has one
        (off = 100 %), else against the logical size ZFS reports, else 1 / the compression ratio."""
        used = summary.median("used")
        if used is None:
            return None
        base = self.uncompressed_used(summary) or summary.median("logical")
        if base:
            return used / base * 100
        ratio = summary.median("ratio")
        return 100 / ratio if ratio else None

    def percent_digits(self, summary: Summary) -> int:
        """Decimals `percent_of_uncompressed` deserves: 1 from sizes; from a ratio only what its own
        decimals carry (1/1.19 is 84 %, not 84.03 %: 1.19 means 1.185 to 1.195)."""
        if self.uncompressed_used(summary) or summary.median("logical"):
            return 1
        return min(1, max(0, self.ratio_digits(summary) - 2))

    def ratio_digits(self, summary: Summary) -> int:
        """Decimals of the compression ratio as recorded (ZFS prints two; a ratio from sizes has more),
        2 to 3: 1.19 is not shown as 1.190."""
        stat = summary.get("ratio")
        decimals = max((len(f"{v:.6f}".rstrip("0").partition(".")[2]) for v in stat.values), default=2) if stat else 2
        return min(3, max(2, decimals))


def _without(flat: dict[str, str], key: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in flat.items() if k != key))


def group_by_configuration(results: Iterable[ResultRow]) -> dict[str, tuple[Configuration, list[ResultRow]]]:
    """{config id: (configuration, its rows)} in first-run order: the only grouping of results."""
    groups: dict[str, tuple[Configuration, list[ResultRow]]] = {}
    for row in results:
        if row.config_id not in groups:
            groups[row.config_id] = (row.configuration, [])
        groups[row.config_id][1].append(row)
    return groups


def summarise(results: Iterable[ResultRow]) -> list[Summary]:
    """One Summary per configuration of complete `results`, in first-run order."""
    groups = group_by_configuration(results)
    alikes = look_alikes([config for config, _rows in groups.values()])
    out = []
    for cid, (config, rows) in groups.items():
        figures = {name: stat for name, get in FIGURES.items() if (stat := Stat.of(get(r) for r in rows))}
        out.append(Summary(config, min(int(r.cell) for r in rows), len(rows),
                           tuple(dict.fromkeys(str(r.run_id) for r in rows)), figures,
                           tuple((oid, tuple(diff)) for oid, diff in alikes[cid])))
    return out


def sections(results: Iterable[ResultRow]) -> list[Section]:
    """One Section per matrix, matrices in first-run order, configurations in cell order (results
    imported into one matrix file by file: each file's in its order)."""
    by_matrix: dict[str, list[Summary]] = {}
    first_run: dict[str, int] = {}
    for summary in summarise(results):
        by_matrix.setdefault(summary.config.matrix, []).append(summary)
        first_run.setdefault(summary.run_ids[0], len(first_run))
    out = []
    for matrix, summaries in by_matrix.items():
        summaries.sort(key=lambda s: (first_run[s.run_ids[0]], s.cell))
        out.append(Section(matrix, summaries))
    return out
