"""Pure parsers for the text formats OpenZFS publishes its kernel statistics in.

This module owns turning kstat text into plain values: named kstats (`arcstats`, `dmu_tx`,
`objset-0x*`, `dmu_tx_assign`, `iostats`), the raw `txgs` table and the old `io` kstat.
It does no I/O and knows nothing of Prometheus; readers in `linux.py` and `freebsd.py` feed it.
Every malformed input raises `KstatFormatError` with a one-line reason.

It also names where each named kstat a collector reads is published (`KstatPath`, one line each,
as node_exporter maps a subsystem to its file): both platforms' sources read any of them through
one generic reader (`named`, `optional_named`), so a new named kstat is one line here, not a
reader method on each platform.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple


class KstatPath(NamedTuple):
    """Where one named kstat is published: `procfs`, its file under `<procfs>/spl/kstat/zfs`
    (Linux), and `sysctl`, the prefix of its fields' sysctls (FreeBSD). A per-pool kstat has
    `{pool}` in both. `blank_is_empty`: a file without even its header lines reads as a kstat
    without rows (seen where every row can be absent), not as malformed."""

    procfs: str
    sysctl: str
    blank_is_empty: bool = False

    def procfs_of(self, pool: str | None) -> str:
        return self.procfs if pool is None else self.procfs.replace("{pool}", pool)

    def sysctl_of(self, pool: str | None) -> str:
        return self.sysctl if pool is None else self.sysctl.replace("{pool}", pool)


# The named kstats the collectors read, one line each (a collector imports the one it reads).
ARCSTATS = KstatPath("arcstats", "kstat.zfs.misc.arcstats")
DMU_TX = KstatPath("dmu_tx", "kstat.zfs.misc.dmu_tx")
# Seen live (OpenZFS 2.3.2, a pool with no tx assignment yet recorded): with every bucket empty
# the kstat holds no rows and the file reads as nothing at all.
DMU_TX_ASSIGN = KstatPath("{pool}/dmu_tx_assign", "kstat.zfs.{pool}.misc.dmu_tx_assign", blank_is_empty=True)
IOSTATS = KstatPath("{pool}/iostats", "kstat.zfs.{pool}.misc.iostats")


# Kstat data type codes (sys/kstat.h).
KSTAT_CHAR, KSTAT_INT32, KSTAT_UINT32, KSTAT_INT64, KSTAT_UINT64, KSTAT_LONG, KSTAT_ULONG, KSTAT_STRING = range(8)
_NUMERIC_TYPES = {KSTAT_INT32, KSTAT_UINT32, KSTAT_INT64, KSTAT_UINT64, KSTAT_LONG, KSTAT_ULONG}

# A named kstat row is "%-31s %-4d %s": the name may itself hold spaces ("1 ns"), so the type
# column is the first whitespace-separated integer after the name; string data may hold spaces too.
_NAMED_ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<type>\d+)(?:\s(?P<data>.*))?$")


class KstatFormatError(ValueError):
    """The text is not in the kstat format we expect; the message says where and why."""


# NamedTuples rather than frozen dataclasses: the dataclasses module (with inspect, dis and ast) costs
# several milliseconds of every start, and a frozen dataclass's instances cost more to make.
class NamedKstat(NamedTuple):
    """A named kstat: numeric fields and string fields kept apart."""

    values: dict[str, int]
    strings: dict[str, str]


class Txg(NamedTuple):
    """One row of `<pool>/txgs`. Times are nanoseconds; counters are filled in only once synced."""

    txg: int
    birth: int
    state: str
    ndirty: int
    nread: int
    nwritten: int
    reads: int
    writes: int
    otime: int
    qtime: int
    wtime: int
    stime: int

    @property
    def committed(self) -> bool:
        return self.state == "C"


TXG_COLUMNS = ("txg", "birth", "state", "ndirty", "nread", "nwritten", "reads", "writes",
               "otime", "qtime", "wtime", "stime")

IO_COLUMNS = ("nread", "nwritten", "reads", "writes", "wtime", "wlentime", "wupdate",
              "rtime", "rlentime", "rupdate", "wcnt", "rcnt")


# The header as the kernel prints it; what else int() would read is left to _is_kstat_header.
_PLAIN_HEADER = re.compile(r"[0-9]+ [0-9]+ 0x[0-9a-f]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+")


def _is_kstat_header(line: str) -> bool:
    # "kid type flags ndata data_size crtime snaptime": seven integers, flags in hex.
    parts = line.split()
    if len(parts) != 7:
        return False
    try:
        for i, part in enumerate(parts):
            int(part, 16 if i == 2 else 10)
    except ValueError:
        return False
    return True


def parse_named_rows(lines: list[str], where: str) -> NamedKstat:
    """Parse `name type data` rows (without the two header lines)."""
    values: dict[str, int] = {}
    strings: dict[str, str] = {}
    for lineno, line in enumerate(lines, start=1):
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1].isdigit():  # the common case, without a regex
            name, code, data = parts[0], int(parts[1]), parts[2]
        elif not parts:
            continue
        else:  # a name with spaces ("1 ns"), or string data that is empty
            match = _NAMED_ROW.match(line.rstrip("\n"))
            if match is None:
                raise KstatFormatError(f"{where}: row {lineno} is not 'name type data': {line.strip()[:60]!r}")
            name, code, data = match["name"].strip(), int(match["type"]), match["data"] or ""
        if code in _NUMERIC_TYPES:
            try:
                values[name] = int(data)
            except ValueError:
                raise KstatFormatError(f"{where}: field {name!r} has non-numeric value {data.strip()[:40]!r}") from None
        elif code == KSTAT_STRING or code == KSTAT_CHAR:
            strings[name] = data.strip()
        else:
            raise KstatFormatError(f"{where}: field {name!r} has unknown type code {code}")
    return NamedKstat(values, strings)


# Rows as the kernel prints a numeric stat ("%-31s %-4d %lld"): checked in one regex pass, so such a
# body is split and converted without a Python loop per row. Anything else takes parse_named_rows.
_NUMERIC_ROW = r"[!-~]+ +[1-6] +-?[0-9]+"
_NUMERIC_BODY = re.compile(rf"(?:{_NUMERIC_ROW}\n)*(?:{_NUMERIC_ROW})?")


def parse_named_kstat(text: str, where: str = "kstat") -> NamedKstat:
    """Parse a Linux named kstat file: kstat header, `name type data`, one row per stat."""
    return parse_named_body(named_kstat_body(text, where), text, where)


def parse_named_body(body: str | None, text: str, where: str = "kstat") -> NamedKstat:
    """Parse the rows `named_kstat_body` split off `text` (whose headers it checked); `body` None
    (it could not split them off) reads the rows of the whole text line by line."""
    if body is None:
        return parse_named_rows(text.splitlines()[2:], where)
    if _NUMERIC_BODY.fullmatch(body):  # codes 1-6 are the numeric types, all read the same way
        return NamedKstat(_numeric_rows(body), {})
    first, _, rest = body.partition("\n")
    if _NUMERIC_BODY.fullmatch(rest):  # one other row first: an objset's dataset_name
        named = parse_named_rows([first], where)
        return NamedKstat(named.values | _numeric_rows(rest), named.strings)
    return parse_named_rows(body.splitlines(), where)


def _numeric_rows(body: str) -> dict[str, int]:
    words = body.split()
    return dict(zip(words[0::3], map(int, words[2::3])))


_PLAIN_HEADER_BYTES = re.compile(_PLAIN_HEADER.pattern.encode())


def named_kstat_rows(data: bytes) -> bytes | None:
    """What follows a named kstat file's first line, when that line is a kstat header as the kernel
    prints it: the part of the file that is the same in two reads of an unchanged kstat (the header
    ends in the time of the read), so a memo of a file's parse can key on it without decoding the
    file. None when the first line is anything else (only a full parse can then say what it is)."""
    head, newline, rest = data.partition(b"\n")
    return rest if newline and _PLAIN_HEADER_BYTES.fullmatch(head) else None


def named_kstat_body(text: str, where: str = "kstat") -> str | None:
    """The rows of a named kstat file after its two header lines, which are checked (the first one
    changes at every read: it ends in the snapshot time, so a memo of a file's rows keys on this).
    None when only a line-by-line look can say where the rows start (a header line holding a
    control character); `parse_named_kstat` then reads the whole text."""
    parts = text.split("\n", 2)
    body: str | None = None
    if len(parts) == 3 and parts[0].isprintable() and parts[1].isprintable():
        head, second, body = parts
    else:
        lines = text.splitlines()
        if len(lines) < 2:
            raise KstatFormatError(f"{where}: truncated, {len(lines)} line(s)")
        head, second = lines[0], lines[1]
    if not (_PLAIN_HEADER.fullmatch(head) or _is_kstat_header(head)):
        raise KstatFormatError(f"{where}: missing kstat header, first line is {head[:60]!r}")
    if second.split() != ["name", "type", "data"]:
        raise KstatFormatError(f"{where}: second line is not 'name type data': {second[:60]!r}")
    return body


def _table_rows(text: str, columns: tuple[str, ...], where: str) -> list[str]:
    """The row lines of a whitespace table whose first non-empty line names `columns`."""
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and _is_kstat_header(lines[0]):
        lines = lines[1:]
    if not lines:
        raise KstatFormatError(f"{where}: empty")
    header = lines[0].split()
    if tuple(header) != columns:
        raise KstatFormatError(f"{where}: unexpected columns {' '.join(header)[:80]!r}")
    return lines[1:]


def _row_parts(line: str, lineno: int, columns: tuple[str, ...], where: str) -> list[str]:
    parts = line.split()
    if len(parts) != len(columns):
        raise KstatFormatError(f"{where}: row {lineno} has {len(parts)} columns, expected {len(columns)}")
    return parts


def _parse_table(text: str, columns: tuple[str, ...], where: str) -> list[list[str]]:
    """Rows of a whitespace table whose first non-empty line names `columns`."""
    return [_row_parts(line, lineno, columns, where)
            for lineno, line in enumerate(_table_rows(text, columns, where), start=2)]


def parse_txgs(text: str, where: str = "txgs", known: dict[str, Txg] | None = None) -> list[Txg]:
    """Parse `<pool>/txgs`: a column line, then one row per txg in the history ring.

    `known` is a memo of rows read before (row text -> Txg), kept by the caller for one file and
    updated here. Between two scrapes a few txgs are born and sync and as many leave the ring: the
    other rows are the same text, and a synced row never changes again, so only rows not in the
    memo are checked and built. The memo keeps the rows of past reads until it holds more than
    twice this read's ring (plus a few), then only this read's. A malformed new row raises
    KstatFormatError and leaves the memo as it was."""
    memo = {} if known is None else known
    header, _, body = text.partition("\n")
    if tuple(header.split()) == TXG_COLUMNS:  # as the kernel prints it: blank lines left to the row check
        lines = body.removesuffix("\n").split("\n")
    else:  # e.g. a kstat header line first, or not a txgs file at all: the full check says which
        lines = _table_rows(text, TXG_COLUMNS, where)
    found = list(map(memo.get, lines))  # the common case: all rows but the newest one or two known
    if None in found:
        new = [(lineno, line) for lineno, (line, txg) in enumerate(zip(lines, found), start=2)
               if txg is None and line.strip()]
        if new:
            checked = [(line, _row_parts(line, lineno, TXG_COLUMNS, where))  # every new row checked before any is read
                       for lineno, line in new]
            memo.update([(line, _txg(parts, where)) for line, parts in checked])  # all built before the memo takes any
            found = list(map(memo.get, lines))
        rows = [line for line, txg in zip(lines, found) if txg is not None]
        txgs = [txg for txg in found if txg is not None]
    else:
        rows, txgs = lines, found  # type: ignore[assignment]  # no None in it
    if len(memo) > 2 * len(txgs) + 8:
        memo.clear()
        memo.update(zip(rows, txgs))
    return txgs


def _txg(parts: list[str], where: str) -> Txg:
    try:
        numbers = [int(value) for i, value in enumerate(parts) if i != 2]
    except ValueError:
        raise KstatFormatError(f"{where}: non-numeric value in txg row {' '.join(parts)[:80]!r}") from None
    return Txg(numbers[0], numbers[1], parts[2], *numbers[2:])


def parse_io_kstat(text: str, where: str = "io") -> dict[str, int]:
    """Parse the KSTAT_TYPE_IO `<pool>/io` of OpenZFS before 2.1: one row of twelve counters."""
    rows = _parse_table(text, IO_COLUMNS, where)
    if len(rows) != 1:
        raise KstatFormatError(f"{where}: expected one row, found {len(rows)}")
    try:
        return {name: int(value) for name, value in zip(IO_COLUMNS, rows[0])}
    except ValueError:
        raise KstatFormatError(f"{where}: non-numeric value in {' '.join(rows[0])[:80]!r}") from None


_BUCKET_NAME = re.compile(r"^(\d+) ns$")


def histogram_buckets(named: NamedKstat, where: str = "dmu_tx_assign") -> list[tuple[int, int]]:
    """(upper bound in ns, count) pairs of a power-of-two latency kstat, sorted by bound.

    OpenZFS puts an assignment of `n` ns into the first bucket whose bound `2**i` is >= n, so each
    bound is an inclusive upper edge, which is what a Prometheus `le` bucket means.
    """
    bounds = _bucket_bounds(tuple(named.values))
    if isinstance(bounds, str):
        raise KstatFormatError(f"{where}: bucket name {bounds!r} is not '<n> ns'")
    return sorted(zip(bounds, named.values.values()))


@functools.lru_cache(maxsize=64)  # the same bucket names on every read
def _bucket_bounds(names: tuple[str, ...]) -> tuple[int, ...] | str:
    """Each bucket's bound in ns, or the first name that is not '<n> ns'."""
    bounds = []
    for name in names:
        match = _BUCKET_NAME.match(name)
        if match is None:
            return name
        bounds.append(int(match[1]))
    return tuple(bounds)
