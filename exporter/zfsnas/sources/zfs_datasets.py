"""Datasets (filesystems and volumes), snapshot counts and newest snapshot times from the `zfs` command.

Owns the argument lists the `datasets` collector runs and the parsing of their `-Hp` output:
`zfs list -Hp -t filesystem,volume -o <DATASET_PROPERTIES>` (one tab-separated line per dataset,
exact numbers; works on every OpenZFS) and `zfs list -Hp -t snapshot -o name,creation`, read line
by line and summarised per dataset (count, newest creation time) so 50,000 snapshot names are never
held at once. A line or field that cannot be read, or cannot be true (a negative size, a name
longer than ZFS allows), is left out and counted in a `Dropped`: never the whole listing.
It must not build metrics (that is the collector's job) nor run anything but these commands.

Dataset names cannot hold a tab or a newline (`zfs` refuses them), so the first tab ends the
name; any other character (spaces, quotes, `%`, unicode) is kept as printed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import NamedTuple

from .model import Dropped, check_some_read, name_too_long, plain_count, plain_ratio

# The order is the column order of the `zfs list` output.
NUMBERS = ("used", "logicalused", "referenced", "logicalreferenced", "available", "usedbysnapshots",
           "written", "quota", "refquota", "reservation", "refreservation", "volsize")
RATIOS = ("compressratio", "refcompressratio")
SETTINGS = ("compression", "recordsize", "volblocksize", "atime", "sync", "primarycache", "secondarycache",
            "encryption", "dedup", "logbias", "special_small_blocks", "keystatus")
DATASET_PROPERTIES = ("name", "type", *NUMBERS, *RATIOS, *SETTINGS)
LIST_DATASETS = ("zfs", "list", "-Hp", "-t", "filesystem,volume", "-o", ",".join(DATASET_PROPERTIES))
LIST_SNAPSHOTS = ("zfs", "list", "-Hp", "-t", "snapshot", "-o", "name,creation")


# A NamedTuple, not a frozen dataclass: cheaper to make at start-up (see sources/model.py).
class Dataset(NamedTuple):
    """One filesystem or volume. Numbers are None where `zfs` prints `-` (not applicable)."""

    name: str
    type: str
    numbers: dict[str, int | None]
    ratios: dict[str, float | None]
    settings: dict[str, str]

    @property
    def pool(self) -> str:
        return self.name.split("/", 1)[0]


MAX_LINE_BYTES = 4096  # longer than any line these listings can print (a name, 26 short columns)


def parse_compressratio(text: str) -> float | None:
    """A (ref)compressratio as a multiplier: with -p OpenZFS prints 1.48, without it 1.48x; both are
    read. Anything else raises ValueError (the listing's parser drops and counts it)."""
    dropped = Dropped()
    ratio = plain_ratio(text, dropped, "compressratio")
    if dropped:
        raise ValueError(f"not a compression ratio: {text[:60]!r}")
    return ratio


def parse_dataset_line(line: str, dropped: Dropped, number: int = 0) -> Dataset | None:
    """One line of `zfs list -Hp -o <DATASET_PROPERTIES>`; None (counted in `dropped`) when it cannot
    be a dataset. A field that is not a plain number, or a negative size, is left out (None, as
    for `-`) and counted; the dataset's other fields are kept."""
    if not line:
        return None
    fields = line.split("\t")
    if len(fields) != _WIDTH:
        dropped.add("too_long" if len(line) > MAX_LINE_BYTES else "malformed",
                    f"zfs list line {number}: {len(fields)} columns, expected {_WIDTH}")
        return None
    name = fields[0]
    if not name or "@" in name:
        dropped.add("malformed", f"zfs list line {number}: {name[:100]!r} is not a dataset name")
        return None
    if name_too_long(name):
        dropped.add("too_long", f"zfs list line {number}: a name of {len(name)} characters, {name[:60]!r}...")
        return None
    where = f"zfs list line {number}"
    numbers = {key: plain_count(fields[i], dropped, f"{where} {key}") for key, i in _NUMBERS_AT}
    ratios = {key: plain_ratio(fields[i], dropped, f"{where} {key}") for key, i in _RATIOS_AT}
    return Dataset(name, fields[1], numbers, ratios, dict(zip(SETTINGS, fields[_SETTINGS_AT:])))


_WIDTH = len(DATASET_PROPERTIES)
_NUMBERS_AT = tuple((key, 2 + i) for i, key in enumerate(NUMBERS))
_RATIOS_AT = tuple((key, 2 + len(NUMBERS) + i) for i, key in enumerate(RATIOS))
_SETTINGS_AT = 2 + len(NUMBERS) + len(RATIOS)


def parse_datasets(text: str | Iterable[str], dropped: Dropped | None = None) -> list[Dataset]:
    """Parse `zfs list -Hp -o <DATASET_PROPERTIES>` output: bad lines and fields are left out and
    counted in `dropped`; SourceError only when lines came and none could be read (another format)."""
    lines = text.splitlines() if isinstance(text, str) else text
    dropped = Dropped() if dropped is None else dropped
    out = [ds for number, line in enumerate(lines, 1) if (ds := parse_dataset_line(line, dropped, number)) is not None]
    check_some_read(out, dropped, "zfs list")
    return out


class Snapshots:
    """The snapshots of one dataset: how many, and the creation time (Unix seconds) of the newest;
    None when no line carried a readable one. (A plain class, cheap to make like the NamedTuples;
    not one of them: `count` is a tuple's method.)"""

    __slots__ = ("count", "newest")

    def __init__(self, count: int, newest: int | None):
        self.count = count
        self.newest = newest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Snapshots) and (self.count, self.newest) == (other.count, other.newest)

    def __hash__(self) -> int:
        return hash((self.count, self.newest))

    def __repr__(self) -> str:
        return f"Snapshots(count={self.count!r}, newest={self.newest!r})"


def summarise_snapshots(lines: Iterable[str], dropped: Dropped | None = None,
                        known: Collection[str] | None = None, limit: int = 100_000) -> dict[str, Snapshots]:
    """{dataset: Snapshots} from `name<TAB>creation` lines (`tank/fs@daily-1\t1763683200`), one at a
    time. With `known` (the datasets `zfs list` printed), only their snapshots are counted: the
    summary holds no more names than the dataset listing did. Without it, at most `limit` datasets
    are (the others' lines counted as `over_limit`). A line that names no snapshot or too long a
    name is dropped and counted; one without a readable creation still counts (its time is unknown:
    `-` says so, anything else is counted as dropped)."""
    dropped = Dropped() if dropped is None else dropped
    counts: dict[str, int] = {}
    newest: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        name, _, creation = line.rstrip("\n").partition("\t")
        dataset, at, _ = name.partition("@")
        if not at or not dataset:
            if line:
                dropped.add("malformed", f"zfs list -t snapshot line {number}: {name[:100]!r} names no snapshot")
            continue
        if known is not None:
            if dataset not in known:
                continue  # not listed, or left out of the listing: not served either
        elif dataset not in counts and len(counts) >= limit:
            dropped.add("over_limit", f"zfs list -t snapshot line {number}: more than {limit} datasets")
            continue
        if name_too_long(name):
            dropped.add("too_long", f"zfs list -t snapshot line {number}: a name of {len(name)} characters")
            continue
        counts[dataset] = counts.get(dataset, 0) + 1
        if creation and creation != "-":
            time = plain_count(creation, dropped, f"zfs list -t snapshot line {number} creation")
            if time is not None and time > newest.get(dataset, -1):
                newest[dataset] = time
    return {dataset: Snapshots(count, newest.get(dataset)) for dataset, count in counts.items()}


def read_datasets(run: Callable[[list[str]], str]) -> list[Dataset]:
    return parse_datasets(run(list(LIST_DATASETS)))
