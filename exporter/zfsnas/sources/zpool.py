"""Pools, their vdev trees, scrubs and resilvers from the `zpool` command.

Owns the argument lists the `pools` collector runs and the parsing of their text output:
- `zpool list -Hp -o name,size,alloc,free,frag,cap,dedup,health`: exact numbers; `frag` and
  `cap` are percents printed without `%` (or `-` when unknown), `dedup` a multiplier (`1.00`).
- `zpool status -Pp` and `zpool status -gp`: the same tree printed twice, once with full device
  paths (`/dev/disk/by-id/...-part1`, interior vdevs as `raidz2-0`, `mirror-1`, `spare-1`) and once
  with vdev guids; rows are paired by position to give every `VdevStatus` both. `-p` prints exact
  error counts. The `scan:` lines (OpenZFS 2.1 and 2.2+ wordings: progress, issue rate and the
  time to go), the `expand:` lines of a RAID-Z expansion (2.3+), `errors:` and `state:` too.
  Byte figures in `scan:` and `expand:` lines are what `zpool` prints (three significant digits,
  1024-based); a time to go (`12:50:05 to go`) is read as seconds remaining.
- `zpool list -HpPv`: each pool's vdevs with their space; rows of top-level vdevs (and cache
  devices) carry allocation, free space and fragmentation, leaves only their size. A vdev row has
  the same nine figures whatever `-o` asks for (size, alloc, free, ckpoint, expandsz, frag, cap,
  dedup, health: OpenZFS's `collect_list_stats`; seen live on 2.3.2), so none is asked for and the
  pool rows (the default columns) are left to `zpool list -o`. Section headings (`special`,
  `dedup`, `logs`, `cache`, `spare`) are printed without a tab even with -H and set the role of
  the rows below them.
It must not build metrics nor run anything but these commands.

Shared value: `read_status` returns a `ZpoolStatus`, a `list[VdevStatus]` (every vdev of every pool,
the pool's root vdev first, in `zpool status` order) that also carries `.pools`, the
`list[PoolStatus]` with state, scans and data errors. The `pools` collector sets its
BackgroundRefresher of it as `Context.zpool_status` for the `disks` and `vdevlatency` collectors.
In a `VdevStatus`: `name` is what `-P` prints, `guid` what `-g` prints (decimal, as udev's
`ID_FS_UUID_SUB`; "" for the root vdev, which `-g` prints by pool name), `role` one of data, log,
cache, spare, special, dedup, `parent` the parent vdev's name (the pool name for top-level vdevs,
"" for the root), `is_leaf` True for devices. Error counts are -1 where `zpool status` prints
none (the rows of the `spares` section).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import NamedTuple

from .model import Dropped, SourceError, VdevStatus, check_some_read, name_too_long, plain_count, plain_ratio

LIST_POOLS = ("zpool", "list", "-Hp", "-o", "name,size,alloc,free,frag,cap,dedup,health")
STATUS_PATHS = ("zpool", "status", "-Pp")
STATUS_GUIDS = ("zpool", "status", "-gp")
LIST_VDEVS = ("zpool", "list", "-HpPv")
VDEV_ROW = ("size", "alloc", "free", "ckpoint", "expandsz", "frag", "cap", "dedup", "health")
HEALTH_STATES = ("ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "UNAVAIL", "REMOVED", "SUSPENDED")
NO_POOLS = "no pools available"
SECTION_ROLES = {"logs": "log", "cache": "cache", "spares": "spare", "special": "special", "dedup": "dedup"}
# The headings of `zpool list -v` (it says `spare`, not `spares`).
LIST_SECTION_ROLES = {**SECTION_ROLES, "spare": "spare"}


# NamedTuples and slotted classes, not dataclasses: this module is imported by the first refresh,
# in a thread, while the exporter answers its first scrape; a dataclass costs about half a
# millisecond to make (its methods are generated and compiled), a NamedTuple a tenth of that.
class Pool(NamedTuple):
    """One line of `zpool list`; figures are None where zpool prints `-` (or something unreadable)."""

    name: str
    size: int | None
    allocated: int | None
    free: int | None
    fragmentation: float | None  # 0..1
    capacity: float | None  # 0..1
    dedup: float | None  # multiplier
    health: str


class VdevSpace(NamedTuple):
    """One vdev row of `zpool list -v`: `name` as `zpool status -P` prints it, `role` from the
    section it is listed in. Top-level vdevs and cache devices have every figure; leaves, spares
    and the members of a mirror or RAID-Z only `size` (the others None, printed `-`)."""

    pool: str
    name: str
    role: str
    size: int | None
    allocated: int | None
    free: int | None
    fragmentation: float | None  # 0..1
    capacity: float | None  # 0..1


class Scan:
    """One `scan:` block. function: scrub, resilver or none; state: finished, canceled, scanning,
    paused or none. Times are Unix seconds; byte fields are None when the line does not say. `rate`
    is the issue rate zpool prints (bytes/s, the running pass), `remaining` the seconds to go it prints
    (None when it prints none: slower than 10 MB/s, or a pass that has issued nothing yet)."""

    __slots__ = ("function", "state", "start", "end", "examined", "issued", "total", "processed", "errors",
                 "percent_done", "rate", "remaining")

    def __init__(self, function: str, state: str, start: float | None = None, end: float | None = None,
                 processed: int | None = None, errors: int | None = None):
        self.function = function
        self.state = state
        self.start = start
        self.end = end
        self.examined: int | None = None
        self.issued: int | None = None
        self.total: int | None = None
        self.processed = processed  # repaired (scrub) or resilvered bytes
        self.errors = errors
        self.percent_done: float | None = None
        self.rate: int | None = None
        self.remaining: int | None = None


class Expansion:
    """The `expand:` block of a RAID-Z expansion (`zpool attach` to a raidz vdev, OpenZFS 2.3+).
    state: expanding or finished; `copied` bytes reflowed so far (all of them once finished), `total`
    bytes to reflow, `rate` bytes/s and `remaining` seconds (as zpool estimates) while it runs; `paused`
    while it waits for a resilver or a `zpool clear`."""

    __slots__ = ("vdev", "state", "start", "end", "copied", "total", "rate", "remaining", "percent_done", "paused")

    def __init__(self, vdev: str, state: str, start: float | None = None, end: float | None = None,
                 copied: int | None = None):
        self.vdev = vdev
        self.state = state
        self.start = start
        self.end = end
        self.copied = copied
        self.total: int | None = None
        self.rate: int | None = None
        self.remaining: int | None = None
        self.percent_done: float | None = None
        self.paused = False


class PoolStatus:
    __slots__ = ("name", "state", "scans", "data_errors", "vdevs", "expansion")

    def __init__(self, name: str):
        self.name = name
        self.state = ""
        self.scans: list[Scan] = []
        self.data_errors: int | None = None
        self.vdevs: list[VdevStatus] = []
        self.expansion: Expansion | None = None


class ZpoolStatus(list[VdevStatus]):
    """A `list[VdevStatus]` of every pool, with the per-pool statuses as `.pools` and, once read,
    every vdev's space as `.vdev_space` (None when `zpool list -v` could not be read)."""

    def __init__(self, pools: list[PoolStatus]):
        super().__init__(v for p in pools for v in p.vdevs)
        self.pools = pools
        self.vdev_space: list[VdevSpace] | None = None


def _scaled(text: str, dropped: Dropped, where: str, suffix: str, scale: float) -> float | None:
    """A `zpool list` figure (`17`, `17%`, `1.37x`; `-` when unknown) divided by `scale`."""
    figure = plain_ratio(text, dropped, where, suffix)
    return None if figure is None else figure / scale


def parse_list(text: str, dropped: Dropped | None = None) -> list[Pool]:
    """`zpool list -Hp -o name,size,alloc,free,frag,cap,dedup,health`; a line or field that cannot
    be read or be true is left out and counted in `dropped`."""
    dropped = Dropped() if dropped is None else dropped
    pools = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line == NO_POOLS:
            continue
        fields = line.split("\t")
        if len(fields) != 8:
            dropped.add("malformed", f"zpool list line {number}: {len(fields)} columns, expected 8")
            continue
        name, size, alloc, free, frag, cap, dedup, health = fields
        if name_too_long(name):
            dropped.add("too_long", f"zpool list line {number}: a pool name of {len(name)} characters")
            continue
        where = f"zpool list line {number}"
        pools.append(Pool(name, plain_count(size, dropped, f"{where} size"),
                          plain_count(alloc, dropped, f"{where} alloc"), plain_count(free, dropped, f"{where} free"),
                          _scaled(frag, dropped, f"{where} frag", "%", 100), _scaled(cap, dropped, f"{where} cap", "%", 100),
                          _scaled(dedup, dropped, f"{where} dedup", "x", 1), health))
    check_some_read(pools, dropped, "zpool list")
    return pools


def parse_vdev_list(text: str) -> list[VdevSpace]:
    """`zpool list -HpPv`: the vdev rows of every pool (the pool rows themselves are what
    `parse_list` reads, from `zpool list -o ...`)."""
    out: list[VdevSpace] = []
    pool, role = "", "data"
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line == NO_POOLS:
            continue
        if "\t" not in line:  # a section heading, printed with spaces even with -H
            role = LIST_SECTION_ROLES.get(line.split()[0], role)
            continue
        fields = line.split("\t")
        if not fields[0]:  # a vdev: a leading tab
            fields = fields[1:]
        else:
            pool, role = fields[0], "data"
            continue
        if len(fields) != 1 + len(VDEV_ROW) or not pool:
            raise SourceError(f"zpool list -v line {number}: {len(fields)} columns, expected {1 + len(VDEV_ROW)}")
        name, size, alloc, free, _ckpoint, _expandsz, frag, cap, _dedup, _health = fields
        try:
            out.append(VdevSpace(pool, name, role, _count(size), _count(alloc), _count(free),
                                 _scaled_figure(frag, 100), _scaled_figure(cap, 100)))
        except ValueError as exc:
            raise SourceError(f"zpool list -v line {number}: {exc}") from None
    return out


def _count(text: str) -> int | None:
    return None if text in ("-", "") else int(text)


# --- zpool status ---------------------------------------------------------------------------

_SECTION = re.compile(r"^ *([a-z][a-z ]*?): ?(.*)$")
_ROW = re.compile(r"^\t( *)(\S+)(?:\s+([A-Z]+))?(?:\s+(\d+)\s+(\d+)\s+(\d+))?(?:\s+(.*))?$", re.ASCII)
_UNITS = "BKMGTPE"
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                       "Nov", "Dec"), 1)}


def _scaled_figure(text: str, scale: float) -> float | None:
    """A `zpool list` figure (`17`, `17%`, `1.37x`; `-` when unknown) divided by `scale`."""
    text = text.rstrip("%x")
    return None if text in ("-", "") else float(text) / scale


def parse_bytes(text: str) -> int:
    """`zfs_nicebytes` output (`0B`, `512B`, `1.23G`, `12.3T`) back to bytes, 1024-based."""
    match = re.fullmatch(r"([\d.]+)([BKMGTPE]?)", text)
    if not match:
        raise SourceError(f"not a byte figure: {text!r}")
    number, unit = match.groups()
    return int(round(float(number) * 1024 ** _UNITS.index(unit or "B")))


def parse_ctime(text: str) -> float:
    """`ctime(3)` text (`Sun Nov 22 10:00:00 2026`, `Mon Nov  2 ...`) in local time, to Unix seconds."""
    parts = text.split()
    try:
        _, month, day, clock, year = parts
        hour, minute, second = (int(x) for x in clock.split(":"))
        fields = (int(year), _MONTHS[month], int(day), hour, minute, second, 0, 0, -1)
        return time.mktime(fields)
    except (ValueError, KeyError):
        raise SourceError(f"not a ctime date: {text!r}") from None


def parse_duration(text: str) -> int:
    """`secs_to_dhms` output: `00:00:01` or `2 days 03:04:05`."""
    match = re.fullmatch(r"(?:(\d+) days? )?(\d+):(\d\d):(\d\d)", text.strip())
    if not match:
        raise SourceError(f"not a duration: {text!r}")
    days, hours, minutes, seconds = (int(x or 0) for x in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


_FINISHED = re.compile(r"(scrub repaired|resilvered(?: \(\S+\))?) (\S+) in (.+?) with (\d+) errors on (.+)")
_CANCELED = re.compile(r"(scrub|resilver(?: \(\S+\))?) canceled on (.+)")
_RUNNING = re.compile(r"(scrub|resilver(?: \(\S+\))?) (in progress|paused) since (.+)")
_STARTED = re.compile(r"scrub started on (.+)")
_PROGRESS_21 = re.compile(r"(\S+) scanned(?: at \S+)?, (\S+) issued(?: at (\S+)/s)?, (\S+) total")
_PROGRESS_22 = re.compile(r"(\S+) / (\S+) scanned(?: at \S+)?, (\S+) / \S+ issued(?: at (\S+)/s)?")
_DONE = re.compile(r"(\S+) (?:repaired|resilvered), ([\d.]+)% done")
_TO_GO = re.compile(r", ((?:\d+ days? )?\d+:\d\d:\d\d) to go$")
_EXPANDING = re.compile(r"expansion of (\S+) in progress since (.+)")
_EXPANDED = re.compile(r"expanded (\S+) copied (\S+) in (.+?), on (.+)")
_EXPAND_PROGRESS = re.compile(r"(\S+) / (\S+) copied at (\S+)/s, ([\d.]+)% done(.*)")


def parse_scan(lines: list[str]) -> Scan | None:
    """One `scan:` block: its first line (after `scan: `) and its continuation lines."""
    first = lines[0].strip()
    if first.startswith("none requested"):
        return Scan("none", "none")
    function = "scrub" if first.startswith("scrub") else "resilver" if first.startswith("resilver") else None
    if function is None:  # error scrubs (2.2+) and wordings we do not know: not a scrub/resilver
        return None
    if match := _FINISHED.fullmatch(first):
        end = parse_ctime(match[5])
        return Scan(function, "finished", start=end - parse_duration(match[3]), end=end,
                    processed=parse_bytes(match[2]), errors=int(match[4]))
    if match := _CANCELED.fullmatch(first):
        return Scan(function, "canceled", end=parse_ctime(match[2]))
    match = _RUNNING.fullmatch(first)
    if not match:
        return None
    scan = Scan(function, "scanning" if match[2] == "in progress" else "paused", start=parse_ctime(match[3]))
    for line in (x.strip() for x in lines[1:]):
        if started := _STARTED.fullmatch(line):
            scan.start = parse_ctime(started[1])
        elif progress := _PROGRESS_21.fullmatch(line):
            scan.examined, scan.issued, scan.total = (parse_bytes(progress[i]) for i in (1, 2, 4))
            scan.rate = _rate(progress[3])
        elif progress := _PROGRESS_22.fullmatch(line):
            scan.examined, scan.total, scan.issued = (parse_bytes(x) for x in progress.groups()[:3])
            scan.rate = _rate(progress[4])
        elif done := _DONE.match(line):
            scan.processed, scan.percent_done = parse_bytes(done[1]), float(done[2])
            scan.remaining = _remaining(line)
    return scan


def _rate(text: str | None) -> int | None:
    """An `at 236M/s` figure (2.1 prints `0B/s` before the first issue; 2.2+ prints none then)."""
    return None if text is None else parse_bytes(text)


def _remaining(line: str) -> int | None:
    """The seconds of `, 12:50:05 to go`; None for `no estimated completion time` and the like."""
    match = _TO_GO.search(line)
    return None if match is None else parse_duration(match[1])


def parse_expansion(lines: list[str]) -> Expansion | None:
    """The `expand:` block (OpenZFS 2.3's `print_raidz_expand_status`); None for a wording we do not know."""
    first = lines[0].strip()
    if match := _EXPANDED.fullmatch(first):
        end = parse_ctime(match[4])
        return Expansion(match[1], "finished", start=end - parse_duration(match[3]), end=end,
                         copied=parse_bytes(match[2]))
    match = _EXPANDING.fullmatch(first)
    if match is None:
        return None
    expansion = Expansion(match[1], "expanding", start=parse_ctime(match[2]))
    for line in (x.strip() for x in lines[1:]):
        if progress := _EXPAND_PROGRESS.fullmatch(line):
            expansion.copied, expansion.total, expansion.rate = (parse_bytes(progress[i]) for i in (1, 2, 3))
            expansion.percent_done = float(progress[4])
            expansion.paused = "paused" in progress[5]
            expansion.remaining = _remaining(line)
    return expansion


def _sections(block: list[str]) -> list[tuple[str, list[str]]]:
    """A pool's block cut at `key:` lines; each (key, [rest of first line, continuation lines...])."""
    out: list[tuple[str, list[str]]] = []
    for line in block:
        match = None if line.startswith("\t") else _SECTION.match(line)
        if match:
            out.append((match[1], [match[2]]))
        elif out:
            out[-1][1].append(line)
    return out


class _Row(NamedTuple):
    depth: int
    name: str
    state: str
    errors: tuple[int, int, int]
    role: str
    parent: str


def _config_rows(pool: str, lines: list[str]) -> list[_Row]:
    rows: list[_Row] = []
    role, stack = "data", [pool]
    header_seen = False
    for line in lines:
        match = _ROW.match(line)
        if not match:
            continue
        indent, name, state, read, write, cksum, _ = match.groups()
        if not header_seen:
            header_seen = name == "NAME"
            continue
        depth = len(indent) // 2
        if depth == 0 and state is None and name in SECTION_ROLES:
            role, stack = SECTION_ROLES[name], [pool]
            continue
        if depth == 0:  # the root vdev: the pool itself
            rows.append(_Row(0, name, state or "", _errors(read, write, cksum), "data", ""))
            role, stack = "data", [pool]
            continue
        del stack[depth:]
        parent = stack[-1] if stack else pool
        rows.append(_Row(depth, name, state or "", _errors(read, write, cksum), role, parent))
        stack.append(name)
    return rows


def _errors(*counts: str | None) -> tuple[int, int, int]:
    return tuple(int(c) if c is not None else -1 for c in counts)  # type: ignore[return-value]


def parse_status(text: str, dropped: Dropped | None = None) -> list[PoolStatus]:
    """Parse `zpool status -p` output (with `-P` or `-g` names); vdev guids are left empty here. A
    `scan:` or `errors:` line that cannot be read is left out (counted in `dropped`), not the pool."""
    dropped = Dropped() if dropped is None else dropped
    return [_pool_status(block, dropped) for block in _pool_blocks(text)]


def _pool_blocks(text: str) -> list[list[str]]:
    """The lines of each pool, from its `pool:` line to the next one."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if _SECTION.match(line) and line.strip().startswith("pool:"):
            blocks.append([])
        if blocks:
            blocks[-1].append(line)
    return blocks


def _pool_status(block: list[str], dropped: Dropped) -> PoolStatus:
    sections = _sections(block)
    status = PoolStatus(sections[0][1][0].strip())
    for key, lines in sections[1:]:
        if key == "state":
            status.state = lines[0].strip()
        elif key == "scan":
            try:
                scan = parse_scan(lines)
            except (SourceError, ValueError) as exc:
                dropped.add("malformed", f"zpool status pool {status.name[:60]!r} scan: {exc}")
                continue
            if scan is not None:
                status.scans.append(scan)
        elif key == "expand":
            status.expansion = parse_expansion(lines)
        elif key == "errors":
            status.data_errors = _data_errors(lines[0])
        elif key == "config":
            status.vdevs = _vdevs(status.name, _config_rows(status.name, lines[1:]), None)
    return status


def _data_errors(line: str) -> int | None:
    if line.startswith("No known data errors"):
        return 0
    match = re.match(r"([0-9]+) data errors", line)
    return int(match[1]) if match else None


def _vdevs(pool: str, rows: list[_Row], guids: list[str] | None) -> list[VdevStatus]:
    out = []
    for i, row in enumerate(rows):
        next_depth = rows[i + 1].depth if i + 1 < len(rows) and rows[i + 1].role == row.role else 0
        is_leaf = row.depth > 0 and next_depth <= row.depth
        read, write, cksum = row.errors
        out.append(VdevStatus(pool, row.name, guids[i] if guids else "", row.role, row.parent, row.state,
                              read, write, cksum, is_leaf))
    return out


def merge_guids(by_path: list[PoolStatus], by_guid: list[PoolStatus]) -> list[PoolStatus]:
    """Give each vdev of the `-P` parse the guid printed at the same place by `-g`."""
    guid_pools = {p.name: p for p in by_guid}
    for pool in by_path:
        other = guid_pools.get(pool.name)
        if other is None or len(other.vdevs) != len(pool.vdevs):
            raise SourceError(f"pool {pool.name} changed between zpool status -P and -g; retrying next time")
        guids = ["" if v.parent == "" else v.name for v in other.vdevs]
        pool.vdevs = [VdevStatus(v.pool, v.name, guid, v.role, v.parent, v.state, v.read_errors,
                                 v.write_errors, v.checksum_errors, v.is_leaf)
                      for v, guid in zip(pool.vdevs, guids)]
    return by_path


def _run_or_no_pools(run: Callable[[list[str]], str], argv: tuple[str, ...]) -> str:
    """Nothing imported is no error: some zpool versions say so with a non-zero exit status."""
    try:
        return run(list(argv))
    except SourceError as exc:
        if str(exc).endswith(NO_POOLS):
            return ""
        raise


def read_pools(run: Callable[[list[str]], str], dropped: Dropped | None = None) -> list[Pool]:
    return parse_list(_run_or_no_pools(run, LIST_POOLS), dropped)


def read_status(run: Callable[[list[str]], str], dropped: Dropped | None = None) -> ZpoolStatus:
    by_path = parse_status(_run_or_no_pools(run, STATUS_PATHS), dropped)
    by_guid = parse_status(_run_or_no_pools(run, STATUS_GUIDS))  # the same tree: its drops are the -P run's
    return ZpoolStatus(merge_guids(by_path, by_guid))


def read_vdev_space(run: Callable[[list[str]], str]) -> list[VdevSpace]:
    return parse_vdev_list(_run_or_no_pools(run, LIST_VDEVS))
