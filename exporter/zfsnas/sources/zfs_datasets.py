"""Datasets (filesystems and volumes), snapshot counts and newest snapshot times from the `zfs` command.

Owns the argument lists the `datasets` collector runs and the parsing of their `-Hp` output:
`zfs list -Hp -t filesystem,volume -o <DATASET_PROPERTIES>` (one tab-separated line per dataset,
exact numbers; works on every OpenZFS) and `zfs list -Hp -t snapshot -o name,creation`, read line
by line and summarised per dataset (count, newest creation time) so 50,000 snapshot names are never
held at once.
It must not build metrics (that is the collector's job) nor run anything but these commands.

Dataset names cannot hold a tab or a newline (`zfs` refuses them), so the first tab ends the
name; any other character (spaces, quotes, `%`, unicode) is kept as printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from .model import SourceError

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


def _number(text: str) -> int | None:
    return None if text in ("-", "") else int(text)


def parse_compressratio(text: str) -> float | None:
    """A (ref)compressratio as a multiplier: with -p OpenZFS prints 1.48, without it 1.48x; both are read."""
    text = text.rstrip("x")
    return None if text in ("-", "") else float(text)


def parse_datasets(text: str | Iterable[str]) -> list[Dataset]:
    """Parse `zfs list -Hp -o <DATASET_PROPERTIES>` output."""
    lines = text.splitlines() if isinstance(text, str) else text
    width = len(DATASET_PROPERTIES)
    numbers_at = range(2, 2 + len(NUMBERS))
    ratios_at = range(numbers_at.stop, numbers_at.stop + len(RATIOS))
    out = []
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != width:
            raise SourceError(f"zfs list line {number}: {len(fields)} columns, expected {width}")
        try:
            numbers = {key: _number(fields[i]) for key, i in zip(NUMBERS, numbers_at)}
            ratios = {key: parse_compressratio(fields[i]) for key, i in zip(RATIOS, ratios_at)}
        except ValueError as exc:
            raise SourceError(f"zfs list line {number}: {exc}") from None
        settings = dict(zip(SETTINGS, fields[ratios_at.stop:]))
        out.append(Dataset(fields[0], fields[1], numbers, ratios, settings))
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


def summarise_snapshots(lines: Iterable[str]) -> dict[str, Snapshots]:
    """{dataset: Snapshots} from `name<TAB>creation` lines (`tank/fs@daily-1\t1763683200`), one at a
    time. A line without a readable creation still counts (its time is unknown, not wrong)."""
    counts: dict[str, int] = {}
    newest: dict[str, int] = {}
    for line in lines:
        name, _, creation = line.rstrip("\n").partition("\t")
        dataset, at, _ = name.partition("@")
        if not at:
            continue
        counts[dataset] = counts.get(dataset, 0) + 1
        if creation.isdigit() and int(creation) > newest.get(dataset, -1):
            newest[dataset] = int(creation)
    return {dataset: Snapshots(count, newest.get(dataset)) for dataset, count in counts.items()}


def read_datasets(run: Callable[[list[str]], str]) -> list[Dataset]:
    return parse_datasets(run(list(LIST_DATASETS)))


def read_snapshots(lines: Callable[[list[str]], Iterable[str]]) -> dict[str, Snapshots]:
    return summarise_snapshots(lines(list(LIST_SNAPSHOTS)))
