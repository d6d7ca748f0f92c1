"""The values a kstat source hands to collectors, the same on Linux and FreeBSD."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # KstatSource is a type only: a Protocol class costs start-up and checks nothing at run time
    from typing import Protocol

    from .kstat import NamedKstat, Txg


class SourceError(RuntimeError):
    """A source could not read what it was asked for; the message is one clear line."""


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
    chunks, size = [], 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while size <= limit:
            chunk = os.read(fd, _READ_CHUNK)
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

        def arcstats(self) -> NamedKstat: ...

        def dmu_tx(self) -> NamedKstat: ...

        def pools(self) -> list[str]: ...

        def txgs(self, pool: str) -> list[Txg]: ...

        def tx_assign(self, pool: str) -> NamedKstat | None: ...

        def pool_state(self, pool: str) -> str: ...

        def pool_iostats(self, pool: str) -> NamedKstat | None: ...

        def pool_io(self, pool: str) -> dict[str, int] | None: ...

        def objsets(self, pool: str) -> list[Objset]: ...

        def tunables(self) -> dict[str, str]: ...

        def version(self) -> str | None: ...

        def dirty_data_max(self) -> int | None: ...

        def delay_min_dirty_percent(self) -> int | None: ...
