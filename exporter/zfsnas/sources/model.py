"""The values a kstat source hands to collectors, the same on Linux and FreeBSD."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # KstatSource is a type only: a Protocol class costs start-up and checks nothing at run time
    from typing import Protocol

    from .kstat import KstatPath, NamedKstat, Txg


class SourceError(RuntimeError):
    """A source could not read what it was asked for; the message is one clear line."""


class SourceIncomplete(SourceError):
    """A source read what it may hold but not all there was (a listing past its cap): `value` is
    served, and the source reports failure with this message until a refresh reads everything."""

    def __init__(self, message: str, value: object):
        super().__init__(message)
        self.value = value


class Dropped:
    """What a parser left out of its input, by reason, with one example each: a line it could not
    read (`malformed`, `too_long`), a field that is not a number (`not_a_number`) or cannot be true
    (`negative`), or what lies past a source's cap (`over_limit`). One bad line or field costs that
    line or field, never the rest of the source; the refresher adds these to
    `zfs_exporter_source_values_dropped_total{source,reason}`. `lines` counts the whole lines left
    out: a listing of which no line could be read is a source failure, not an empty listing."""

    __slots__ = ("counts", "examples", "lines")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self.lines = 0

    def add(self, reason: str, example: str, count: int = 1, line: bool = True) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + count
        if reason not in self.examples:
            self.examples[reason] = example[:200]
        if line:
            self.lines += count

    def field(self, reason: str, example: str) -> None:
        """One field left out of a line whose other fields are kept."""
        self.add(reason, example, line=False)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __repr__(self) -> str:
        return f"Dropped({self.counts!r})"


MAX_NAME_BYTES = 255  # ZFS_MAX_DATASET_NAME_LEN (256) less its NUL: no pool, dataset or snapshot name is longer


def name_too_long(name: str) -> bool:
    """Longer than any name ZFS allows (its bytes, as the command printed them)."""
    return len(name) > MAX_NAME_BYTES and len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES


def check_some_read(kept: list, dropped: Dropped, what: str) -> None:
    """A listing whose every line was dropped is not read: another format, not an empty listing."""
    if not kept and dropped.lines:
        reason, example = next(iter(dropped.examples.items()))
        raise SourceError(f"{what}: no line could be read ({dropped.lines} left out, e.g. {reason}: {example})")


def plain_count(text: str, dropped: Dropped, where: str) -> int | None:
    """A size or count as `zfs`/`zpool -p` prints it: ASCII digits (`-` or nothing: None, not
    applicable). Anything else is left out and counted: `1e400`, `NaN`, `0x10`, `+5`, `1_000`,
    `²` (str.isdigit takes it, int does not) are `not_a_number`; `-5` and `-0` are `negative`
    (a size cannot be)."""
    if text.isdigit() and text.isascii():
        return int(text)
    if text in ("-", ""):
        return None
    digits = text[1:]
    negative = text.startswith("-") and digits.isdigit() and digits.isascii()
    dropped.field("negative" if negative else "not_a_number", f"{where}: {text[:60]!r}")
    return None


def plain_ratio(text: str, dropped: Dropped, where: str, suffix: str = "x") -> float | None:
    """A ratio or percentage as `zfs`/`zpool` prints it (`1.48`, `1.48x`, `17%`; `-`: None); like
    `plain_count`, a text that is not a finite, non-negative decimal is left out and counted."""
    text = text.removesuffix(suffix) if suffix else text
    if text in ("-", ""):
        return None
    whole, _, fraction = text.partition(".")
    if whole.isdigit() and whole.isascii() and (not fraction or (fraction.isdigit() and fraction.isascii())):
        return float(text)
    rest = text[1:]
    negative = text.startswith("-") and rest.replace(".", "", 1).isdigit() and rest.isascii()
    dropped.field("negative" if negative else "not_a_number", f"{where}: {text[:60]!r}")
    return None


class Explained(SourceError):
    """A failure already said, once, in one line where it was found (the start-up line saying what
    is not served, a replay's note on what its capture lacks): the source that meets it logs it at
    debug only. It is still a failure: the source's success is 0."""


class NotRecorded(Explained):
    """A replay asked for a command its capture does not hold and cannot derive: that part of the
    capture is absent, which is not a failure of the collector that asked (its success stays 1;
    the source's is 0)."""


# The largest kstat, sysfs, udev or diskstats file read: real ones are a few KB (diskstats about
# 150 bytes a device); a file past this is refused rather than held in memory.
MAX_FILE_BYTES = 4 * 1024 * 1024
_READ_CHUNK = 65536


def read_bounded_bytes(path: str | os.PathLike, limit: int = MAX_FILE_BYTES) -> bytes:
    """The file's bytes; SourceError when it holds more than `limit` bytes.
    OSError (FileNotFoundError included) is the caller's to interpret."""
    # Straight from the file descriptor, a chunk a read until end of file (a short read need not
    # be the last one) or past `limit` (so at most a chunk more than `limit` is held): a Python file
    # object costs more than a small kstat's read, and a buffered read(limit + 1) allocates `limit`
    # bytes on every call.
    # O_NONBLOCK changes nothing for a file; a FIFO or device put where a kstat was (a pipe nobody
    # writes to) then ends or fails at once instead of holding the scrape forever.
    chunks, size = [], 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while size <= limit:
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                raise SourceError(f"{path}: not a regular file (reading it would wait)") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise SourceError(f"{path}: larger than {limit} bytes, not read")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_bounded(path: str | os.PathLike, limit: int = MAX_FILE_BYTES, encoding: str = "utf-8") -> str:
    """The file's text (`read_bounded_bytes`, decoded). Bytes that are not UTF-8 are kept as
    surrogate escapes (like os.listdir's names): the renderer shows them as `\\xNN` and counts
    them, so two names differing only there stay two series.
    OSError (FileNotFoundError included) is the caller's to interpret."""
    return read_bounded_bytes(path, limit).decode(encoding, "surrogateescape")


# NamedTuple rather than a frozen dataclass: made at import on the start path, a frozen dataclass costs
# about half a millisecond of start-up (its methods are generated and compiled); this is a few microseconds.
class Objset(NamedTuple):
    """Per-dataset I/O counters from `<pool>/objset-0x<id>`."""

    objset_id: str
    dataset: str
    values: dict[str, int]


class VdevStatus(NamedTuple):
    """One vdev of `zpool status`, shared by the `pools`, `disks` and `vdevlatency` collectors.

    `name` is what `zpool status -P` prints (`raidz2-0`, `mirror-1`, `/dev/disk/by-id/ata-X-part1`),
    `guid` what `zpool status -g` prints (decimal, like udev's ID_FS_UUID_SUB). `role` is one of
    data, log, cache, spare, special, dedup. `parent` is the parent vdev's name, "" at the top.
    """

    pool: str
    name: str
    guid: str
    role: str
    parent: str
    state: str
    read_errors: int
    write_errors: int
    checksum_errors: int
    is_leaf: bool


if TYPE_CHECKING:
    class KstatSource(Protocol):
        """What the kstat-based collectors need, whatever the platform."""

        kind: str

        def refresh(self) -> None:
            """Take a fresh snapshot where the platform reads everything at once (sysctl)."""

        def zfs_loaded(self) -> bool: ...

        def named(self, kstat: KstatPath, pool: str | None = None) -> NamedKstat:
            """A named kstat (sources/kstat.py's `KstatPath`s), of `pool` for a pool's; SourceError when absent."""

        def optional_named(self, kstat: KstatPath, pool: str | None = None) -> NamedKstat | None:
            """A named kstat, or None where this OpenZFS version does not publish it."""

        def pools(self) -> list[str]: ...

        def txgs(self, pool: str) -> list[Txg]: ...

        def pool_state(self, pool: str) -> str: ...

        def pool_io(self, pool: str) -> dict[str, int] | None: ...

        def objsets(self, pool: str) -> list[Objset]: ...

        def tunables(self) -> dict[str, str]: ...

        def version(self) -> str | None: ...

        def dirty_data_max(self) -> int | None: ...

        def delay_min_dirty_percent(self) -> int | None: ...
