"""How OpenZFS lays a file out and what it charges for it: the allocation model of `zfsnas-bench predict`.

Owns the rules, read from OpenZFS's sources (never copied): the write pipeline's compression step
(zio.c `zio_write_compress`, zio_compress.c, lz4_zfs.c, zfs_zstd.c, gzip.c, zle.c), the file's
block size (zfs_write / dnode_set_blksz), indirect blocks (dbuf.c: 128 KiB blocks of 1024 block
pointers), dnodes (16 KiB blocks of 32), micro-ZAP directories, the extra copy of every metadata
block (dmu_write_policy, redundant_metadata=all) and the vdev's allocation and space accounting
(vdev_psize_to_asize, vdev_raidz_asize, the deflate ratio `used` is charged with). Pure: the
caller hands it bytes; it reads no file. The compressors are the real ones: OpenZFS's own LZ4
(lz4zfs.py, built on first use; without a C compiler the `lz4` package's, which compresses 1.5-3 %
worse), the `zstandard` package, zlib; ZLE is ours, from its algorithm. They are imported on
first use so that the rest of the bench wing runs where they are not installed.

The rules of a record of logical size L on a vdev with sectors of S = 2^ashift bytes:
- compression off: the record is written as it is, zeros included;
- compression on: an all-zero record is a hole (nothing allocated); otherwise it is compressed
  into at most D bytes (D = L - L/8: at least 12.5 % saved; from OpenZFS 2.3 D is rounded down to
  the sector, and a D below one sector allows only an embedded block) and stored compressed only
  if it fits; lz4 carries a 4-byte header, zstd an 8-byte one (and its frame has no magic, checksum
  or content size); a compressed record of at most 112 bytes is embedded in its block pointer
  (nothing allocated); else its size is rounded up to the sector, and if that is not smaller than
  L it is stored uncompressed; zstd-3 and above, on records of 128 KiB or more, first try lz4 and
  then zstd-1 and give up when neither saves 12.5 % (the early abort of OpenZFS 2.2+);
- a file of at most one recordsize is one block of its size rounded up to 512 bytes; a larger
  file is made of recordsize blocks, the last one zero-filled to a whole recordsize (which
  compression then squeezes out, and which compression off stores whole);
- the allocation is the size rounded up to the sector (RAID-Z adds parity and padding), charged
  to `used` through the vdev's deflate ratio; metadata is always lz4 and stored twice.
"""

from __future__ import annotations

import functools
import random
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

MIN_BLOCK = 512                     # SPA_MINBLOCKSIZE: block sizes are multiples of it
EMBEDDED_MAX = 112                  # BPE_PAYLOAD_SIZE: compressed data up to this lives in the block pointer
EARLY_ABORT_SIZE = 128 << 10        # zstd_abort_size
INDIRECT_SIZE = 128 << 10           # indirect blocks: 2^17 bytes (zfs_default_ibs)
BLOCK_POINTER = 128
POINTERS_PER_INDIRECT = INDIRECT_SIZE // BLOCK_POINTER
DNODE_SIZE = 512
DNODE_BLOCK = 16 << 10              # the meta-dnode's data blocks: 32 dnodes each
DNODES_PER_BLOCK = DNODE_BLOCK // DNODE_SIZE
MZAP_ENTRY = 64                     # micro-ZAP: one 64-byte chunk per entry (and one for the header)
MZAP_NAME_MAX = 49                  # names of 50 bytes or more turn a directory into a fat ZAP
MZAP_MAX = 128 << 10
FAT_LEAF = 16 << 10                 # fat ZAP leaf blocks
FAT_LEAF_CHUNKS = (FAT_LEAF - 48 - 2 * (FAT_LEAF >> 5)) // 24
FAT_LEAF_FILL = 0.75                # a leaf splits when full: about three quarters full on average
METADATA_COPIES = 2                 # redundant_metadata=all: every metadata block gets a second copy

ZSTD_FAST_LEVELS = (*range(1, 11), *range(20, 101, 10), 500, 1000)
_SIZE = re.compile(r"^(\d+)([KMG]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class ModelError(ValueError):
    """A compression, recordsize, ashift or vdev the model cannot take; one line."""


# --- what a user names -------------------------------------------------------------------------

@dataclass(frozen=True)
class Compression:
    """A `compression=` value: `name` as `zfs get` prints it, the algorithm and its level (zstd-fast-N
    is level -N, as OpenZFS hands it to zstd)."""
    name: str
    algorithm: str          # off, lz4, gzip, zle, zstd
    level: int = 0

    @property
    def on(self) -> bool:
        return self.algorithm != "off"

    @property
    def uses_lz4(self) -> bool:
        """lz4 itself, or zstd-3 and above, whose early abort tries lz4 first (zio_compress.c)."""
        return self.algorithm == "lz4" or (self.algorithm == "zstd" and self.level >= 3)


def parse_compression(text: str) -> Compression:
    """`lz4`, `gzip-9`, `zstd-3`, `zstd-fast-10`, `zle`, `off` (and `on`, `gzip`, `zstd`, `zstd-fast`,
    which OpenZFS reads as lz4, gzip-6, zstd-3, zstd-fast-1)."""
    name = text.strip().lower()
    name = {"on": "lz4", "gzip": "gzip-6", "zstd": "zstd-3", "zstd-fast": "zstd-fast-1"}.get(name, name)
    if name in ("off", "lz4", "zle"):
        return Compression(name, name)
    if match := re.fullmatch(r"gzip-([1-9])", name):
        return Compression(name, "gzip", int(match[1]))
    if match := re.fullmatch(r"zstd-([0-9]+)", name):
        if 1 <= int(match[1]) <= 19:
            return Compression(name, "zstd", int(match[1]))
    if match := re.fullmatch(r"zstd-fast-([0-9]+)", name):
        if int(match[1]) in ZSTD_FAST_LEVELS:
            return Compression(name, "zstd", -int(match[1]))
    if name == "lzjb":
        raise ModelError("lzjb: no real lzjb compressor is at hand, so it is not predicted (lz4 replaced it)")
    raise ModelError(f"compression {text!r}: expected off, lz4, zle, gzip-1..9, zstd-1..19 or zstd-fast-N "
                     f"(N = 1..10, 20..100 by 10, 500, 1000)")


def parse_recordsize(text: str) -> int:
    """Bytes of `128K`, `1M`: a power of two from 512 bytes to 16 MiB, as `recordsize=` takes."""
    match = _SIZE.match(text.strip())
    size = int(match[1]) * _UNITS[match[2].upper()] if match else 0
    if not match or size < MIN_BLOCK or size > 16 << 20 or size & (size - 1):
        raise ModelError(f"recordsize {text!r}: a power of two from 512 to 16M (128K, 1M)")
    return size


def size_name(size: int) -> str:
    """`128K`, `1M`: how `zfs get recordsize` prints a power of two."""
    for unit, factor in (("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


@dataclass(frozen=True)
class Vdev:
    """The top-level vdevs' kind: `disk` (or a mirror: the same charge) or RAID-Z with its width."""
    kind: str = "disk"      # disk, mirror, raidz1, raidz2, raidz3
    width: int = 1

    @property
    def parity(self) -> int:
        return int(self.kind[-1]) if self.kind.startswith("raidz") else 0

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.width}" if self.parity else self.kind

    def asize(self, psize: int, ashift: int) -> int:
        """The bytes allocated for `psize` (vdev_psize_to_asize)."""
        if not self.parity:
            return -(-psize >> ashift) << ashift
        sectors = ((psize - 1) >> ashift) + 1
        data = self.width - self.parity
        sectors += self.parity * ((sectors + data - 1) // data)
        return -(-sectors // (self.parity + 1)) * (self.parity + 1) << ashift

    def charged(self, asize: int, ashift: int) -> int:
        """What `used` counts for an allocation: RAID-Z's is scaled by the vdev's deflate ratio (the
        parity of a 128 KiB block taken out), in 512-byte units as OpenZFS does."""
        if not self.parity:
            return asize
        ratio = (1 << 17) // (self.asize(1 << 17, ashift) >> 9)
        return (asize >> 9) * ratio


def parse_vdev(text: str) -> Vdev:
    """`disk`, `mirror`, `raidz1:6`, `raidz2:8`, `raidz3:11` (kind:width)."""
    match = re.fullmatch(r"(disk|mirror|raidz([123])?)(?::(\d+))?", text.strip().lower())
    if not match:
        raise ModelError(f"vdev {text!r}: expected disk, mirror or raidzP:WIDTH (raidz2:8)")
    kind = match[1] if match[1] != "raidz" else "raidz1"
    if kind.startswith("raidz"):
        width = int(match[3] or 0)
        if width <= int(kind[-1]):
            raise ModelError(f"vdev {text!r}: a {kind} needs a width above its parity (raidz2:8)")
        return Vdev(kind, width)
    return Vdev(kind)


@dataclass(frozen=True)
class Rules:
    """Which OpenZFS's rules: the compression limit changed in 2.3, the zstd early abort came in 2.2."""
    version: tuple[int, int] = (2, 3)

    @property
    def name(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    def limit(self, lsize: int, compression: Compression, ashift: int) -> int:
        """The most bytes a compressed record may take (zio_get_compression_max_size)."""
        limit = lsize - (lsize >> 3)
        if self.version < (2, 3) or compression.algorithm == "zle":
            return limit
        limit -= limit % (1 << ashift)
        return EMBEDDED_MAX if limit < 1 << ashift else limit

    @property
    def early_abort(self) -> bool:
        return self.version >= (2, 2)


def parse_rules(text: str) -> Rules:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text.strip())
    if not match or (int(match[1]), int(match[2])) < (0, 8):
        raise ModelError(f"OpenZFS version {text!r}: expected 0.8 or later, e.g. 2.1, 2.3")
    return Rules((int(match[1]), int(match[2])))


# --- the compressors ---------------------------------------------------------------------------

class MissingCompressor(ModelError):
    pass


@functools.cache
def _lz4_package() -> Callable[[bytes], int]:
    try:
        import lz4.block  # type: ignore[import-untyped]
    except ImportError:
        raise MissingCompressor("the lz4 package is not installed (pip install lz4)") from None
    compress = lz4.block.compress
    return lambda data: len(compress(data, mode="default", store_size=False))


_PACKAGE_ONLY = False      # set in worker processes whose parent sized lz4 with the package (use_lz4)


@functools.cache
def _lz4_zfs() -> Callable[[bytes, int], int] | None:
    """OpenZFS's own LZ4 (lz4zfs.py), None where it cannot be built."""
    from . import lz4zfs

    return lz4zfs.within() if not _PACKAGE_ONLY and lz4zfs.available() else None


def lz4_exact() -> bool:
    """Whether lz4 is sized with OpenZFS's own LZ4 (else with the `lz4` package's, a little larger)."""
    return _lz4_zfs() is not None


def use_lz4(exact: bool) -> None:
    """Size lz4 as another process decided (predict's workers follow the parent: one prediction never
    mixes two LZ4s); ModelError when OpenZFS's is asked for and cannot be had here."""
    global _PACKAGE_ONLY
    _PACKAGE_ONLY = not exact
    _lz4_zfs.cache_clear()
    if exact and not lz4_exact():
        from . import lz4zfs

        raise ModelError(f"OpenZFS's LZ4 is not available in this process: {lz4zfs.unavailable_reason()}")


@dataclass(frozen=True)
class Lz4Used:
    """Which LZ4 sized lz4 records (and zstd's early abort, and metadata), as a prediction records it."""
    exact: bool
    library: str          # `OpenZFS's LZ4 (r1xx parse, built here)` or `lz4 package 4.4.5 (LZ4 1.9.4)`
    fallback: str = ""    # why OpenZFS's could not be used ("" when it was)

    @property
    def note(self) -> str:
        """The one line predict prints when it fell back ("" when it did not)."""
        if self.exact:
            return ""
        return (f"LZ4 here is the {self.library}, not OpenZFS's own ({self.fallback}): today's LZ4 compresses "
                f"1.5-3 % worse than the older LZ4 that OpenZFS bundles, so lz4 predictions come out about 1.5-3 % "
                f"high (zstd-3 and above use LZ4 only for their early abort)")


def lz4_used() -> Lz4Used:
    """Which LZ4 this process sizes lz4 with (building OpenZFS's on first use)."""
    from . import lz4zfs

    if lz4_exact():
        return Lz4Used(True, "OpenZFS's LZ4 (r1xx parse, built here)")
    try:
        import lz4

        library = f"lz4 package {lz4.__version__} (LZ4 {lz4.library_version_string()})"
    except ImportError:
        library = "lz4 package (not installed)"
    return Lz4Used(False, library, "forced by the parent process" if _PACKAGE_ONLY else lz4zfs.unavailable_reason())


def lz4_within(data: bytes, limit: int) -> int | None:
    """lz4_zfs.c's stored size of `data` (a 4-byte big-endian length, then the LZ4 block), None when
    it does not fit in `limit` bytes (OpenZFS's compressor gives up at its own checkpoints)."""
    exact = _lz4_zfs()
    if exact is not None:
        n = exact(data, limit - 4) if limit > 4 else 0
        return n + 4 if n else None
    size = 4 + _lz4_package()(data)
    return size if size <= limit else None


def _lz4() -> Callable[[bytes], int]:
    """The whole stored lz4 size of `data` (header included)."""
    exact = _lz4_zfs()
    if exact is not None:
        return lambda data: 4 + exact(data, len(data) + len(data) // 255 + 16)
    package = _lz4_package()
    return lambda data: 4 + package(data)


@functools.cache
def _zstd(level: int) -> Callable[[bytes], int]:
    try:
        import zstandard
    except ImportError:
        raise MissingCompressor("the zstandard package is not installed (pip install zstandard)") from None
    compress = zstandard.ZstdCompressor(level=level, write_checksum=False, write_content_size=False).compress
    # zfs_zstd.c: an 8-byte header (length, version and level), then a frame without its 4-byte magic
    return lambda data: 8 + len(compress(data)) - 4


def compressed_size(compression: Compression, data: bytes) -> int:
    """The bytes `compression` makes of `data`, headers included (ZLE: see `zle_size`)."""
    if compression.algorithm == "lz4":
        return _lz4()(data)
    if compression.algorithm == "zstd":
        return _zstd(compression.level)(data)
    if compression.algorithm == "gzip":
        return len(zlib.compress(data, compression.level))      # compress2(): a zlib stream
    raise ValueError(f"{compression.name}: no whole-output size (zle is sized against its limit)")


def check_compressors(compressions: list[Compression]) -> None:
    """Raise MissingCompressor (one line) before any work when a compressor is not installed."""
    for c in compressions:
        if c.uses_lz4:
            _lz4_package()
            _lz4_zfs()
        if c.algorithm == "zstd":
            _zstd(c.level)


# ZLE (zle.c, n = 64): a length byte b, then b + 1 literal bytes when b < 64, or b - 63 zeros (up to
# 192) when b >= 64. A literal run ends before two zeros in a row, after 64 bytes, or at a lone
# zero in its 64th place. One token per match, the zero run in group 1 and the literals in group 2.
_ZLE_TOKEN = re.compile(rb"(\x00{1,192})|([^\x00](?:[^\x00]|\x00(?=[^\x00])){0,62}[^\x00]?)")
_ZLE_LITERAL = 64


def zle_size(data: bytes, limit: int) -> int | None:
    """The bytes ZLE makes of `data`, or None when it stops short of `limit` as zle.c does: before a
    token when fewer than 2 bytes are left, before a literal run when fewer than 65 are."""
    if len(data) - data.count(0) > limit:      # the literals alone do not fit: most records end here
        return None
    out = 0
    last_token = last_literal = -1
    for _zeros, literal in _ZLE_TOKEN.findall(data):
        last_token = out
        if literal:
            last_literal = out
            out += 1 + len(literal)
        else:
            out += 1
    if last_token > limit - 2 or (last_literal >= 0 and last_literal + 1 + _ZLE_LITERAL > limit):
        return None
    return out


# --- one record --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stored:
    """What one record became: `psize` is what the block pointer says (0 for a hole or an embedded
    block), `lsize` its logical size (0 for a hole), `allocated` the bytes `used` is charged."""
    lsize: int
    psize: int
    allocated: int


class RecordSizer:
    """Compresses one record's bytes once per compression and answers for every ashift, caching the
    passes the zstd early abort needs. `seconds` gathers each compression's CPU time."""

    def __init__(self, rules: Rules, vdev: Vdev, clock: Callable[[], float]):
        self.rules, self.vdev, self.clock = rules, vdev, clock
        self.seconds: dict[str, float] = {}
        self._record: bytes | None = None
        self._passes: dict[str, int] = {}      # the early abort's lz4 and zstd-1 sizes of `_record`

    def _pass(self, name: str, data: bytes, limit: int) -> int:
        """A pass of the early abort: lz4's stored size within `limit` (lsize when it does not fit,
        as OpenZFS's compressor answers) or zstd-1's."""
        if data is not self._record:
            self._record, self._passes = data, {}
        key = f"{name}-{limit}"
        if key not in self._passes:
            if name == "lz4":
                self._passes[key] = lz4_within(data, limit) or len(data)
            else:
                self._passes[key] = _zstd(1)(data)
        return self._passes[key]

    def store(self, data: bytes, lsize: int, compression: Compression, ashifts: list[int]) -> dict[int, Stored]:
        """`data` (a record, shorter than `lsize` when zero-filled at its end) stored with `compression`,
        for each ashift."""
        if not compression.on:
            return {a: self._plain(lsize, a) for a in ashifts}
        if len(data) < lsize:
            data = data + bytes(lsize - len(data))
        if data.count(0) == lsize:
            return {a: Stored(0, 0, 0) for a in ashifts}
        started = self.clock()
        try:
            return {a: self._compressed(data, lsize, compression, a, sizes) for a, sizes in
                    zip(ashifts, self._sizes(data, lsize, compression, ashifts))}
        finally:
            self.seconds[compression.name] = self.seconds.get(compression.name, 0.0) + self.clock() - started

    def _plain(self, lsize: int, ashift: int) -> Stored:
        return Stored(lsize, lsize, self.vdev.charged(self.vdev.asize(lsize, ashift), ashift))

    def _sizes(self, data: bytes, lsize: int, compression: Compression, ashifts: list[int]) -> list[int | None]:
        """The compressed size allowed at each ashift (None: does not fit: stored uncompressed)."""
        limits = [self.rules.limit(lsize, compression, a) for a in ashifts]
        if compression.algorithm == "zle":
            return [zle_size(data, limit) for limit in limits]
        if compression.algorithm == "lz4":
            return [lz4_within(data, limit) for limit in limits]
        size = compressed_size(compression, data)
        out: list[int | None] = []
        for limit in limits:
            fits = size <= limit
            if fits and self._aborts_early(data, lsize, compression, limit):
                fits = False
            out.append(size if fits else None)
        return out

    def _aborts_early(self, data: bytes, lsize: int, compression: Compression, limit: int) -> bool:
        """zstd-3 and up on 128 KiB records or more (OpenZFS 2.2+): neither lz4 (strictly under the
        limit) nor zstd-1 (within it) saving enough means the record is stored as it is."""
        if not (self.rules.early_abort and compression.algorithm == "zstd" and compression.level >= 3
                and lsize >= EARLY_ABORT_SIZE):
            return False
        if self._pass("lz4", data, limit) < limit:
            return False
        return self._pass("zstd-1", data, limit) > limit

    def _compressed(self, data: bytes, lsize: int, compression: Compression, ashift: int, size: int | None) -> Stored:
        if size is None:
            return self._plain(lsize, ashift)
        if size <= EMBEDDED_MAX:
            return Stored(lsize, 0, 0)
        sector = 1 << ashift
        rounded = max(sector, -(-size // sector) * sector)
        if rounded >= lsize:
            return self._plain(lsize, ashift)
        return Stored(lsize, rounded, self.vdev.charged(self.vdev.asize(rounded, ashift), ashift))


# --- a file's blocks ---------------------------------------------------------------------------

def block_size(file_size: int, recordsize: int) -> int:
    """The logical size of each block of a file: one block of the file's size rounded up to 512
    bytes while it fits in a record, recordsize blocks beyond."""
    if file_size <= recordsize:
        return max(MIN_BLOCK, -(-file_size // MIN_BLOCK) * MIN_BLOCK)
    return recordsize


def block_count(file_size: int, recordsize: int) -> int:
    if file_size == 0:
        return 0
    return -(-file_size // block_size(file_size, recordsize))


def indirect_pointers(blocks: int) -> list[int]:
    """The block pointers each indirect block holds, level by level, for a file of `blocks` blocks
    (its dnode holds one pointer: a file of one block has none, of 2 to 1024 one level-1 block)."""
    out: list[int] = []
    while blocks > 1:
        full, rest = divmod(blocks, POINTERS_PER_INDIRECT)
        out += [POINTERS_PER_INDIRECT] * full + ([rest] if rest else [])
        blocks = full + (1 if rest else 0)
    return out


def _pointer(rng: random.Random, offset: int, lsize: int, level: int) -> bytes:
    """A block pointer as a little-endian host writes it: one DVA, the properties word, the birth
    txg, fill and a checksum (random: fletcher4 and sha256 both look so)."""
    sectors = lsize >> 9
    dva = struct.pack("<QQ", sectors & 0xFFFFFF, offset >> 9) + bytes(32)
    prop = ((sectors - 1) & 0xFFFF) | (((sectors - 1) & 0xFFFF) << 16) | (15 << 32) | (7 << 40) \
        | (19 << 48) | (level << 56) | (1 << 63)
    return dva + struct.pack("<Q", prop) + bytes(16) + struct.pack("<QQQ", 0, 4321, 1) + rng.randbytes(32)


@functools.cache
def metadata_psize(kind: str, count: int, ashift: int, rules: Rules) -> int:
    """The stored size of one metadata block, lz4 as OpenZFS writes metadata: an indirect block
    holding `count` pointers (`indirect`) or a dnode block holding `count` dnodes (`dnode`)."""
    rng = random.Random(f"{kind}-{count}")
    if kind == "indirect":
        lsize = INDIRECT_SIZE
        data = b"".join(_pointer(rng, (1 << 30) + i * (128 << 10), 128 << 10, 0) for i in range(count))
    else:
        lsize = DNODE_BLOCK
        data = b"".join(_dnode(rng, i) for i in range(count))
    return _metadata_stored(data, lsize, ashift, rules)


def _metadata_stored(data: bytes, lsize: int, ashift: int, rules: Rules) -> int:
    """psize of a metadata block (lz4; 0 when embedded or all zero)."""
    sizer = RecordSizer(rules, Vdev(), lambda: 0.0)
    return sizer.store(data, lsize, Compression("lz4", "lz4"), [ashift])[ashift].psize


def _dnode(rng: random.Random, index: int) -> bytes:
    """A file's 512-byte dnode: the core (type, shifts, levels, one pointer, SA bonus), its block
    pointer and its system attributes (mode, size, times, ids, links) in the bonus."""
    core = struct.pack("<BBBBBBBBHHBB2xQQ32x", 19, 17, 2, 1, 44, 0, 0, 3, 256, 168, 0, 0, rng.randrange(1 << 20),
                       rng.randrange(1 << 24))
    pointer = _pointer(rng, (1 << 32) + index * 4096, 128 << 10, 1)
    now = 1_790_000_000 + rng.randrange(3600)
    attrs = struct.pack("<IHH", 0x2F505A, 2, 0) + struct.pack(
        "<QQQQQQQ", 0o100644, rng.randrange(1 << 26), rng.randrange(1 << 16), 1000, 1000, 34, 0x800000000)
    times = b"".join(struct.pack("<QQ", now, rng.randrange(10**9)) for _ in range(4))
    bonus = attrs + times + struct.pack("<QQ", 1, 0)
    return (core + pointer + bonus).ljust(DNODE_SIZE, b"\0")


def directory_psize(names: list[bytes], ashift: int, rules: Rules) -> tuple[int, int]:
    """(psize, lsize) of a directory's ZAP: a micro-ZAP (one 64-byte chunk per entry, grown 512 bytes
    at a time) while it holds at most 2047 names shorter than 50 bytes, else a fat ZAP of 16 KiB
    leaves about three quarters full (approximated: its leaves are taken as compressing like the
    names they hold)."""
    if len(names) < MZAP_MAX // MZAP_ENTRY and all(len(n) <= MZAP_NAME_MAX for n in names):
        rng = random.Random(len(names))
        lsize = max(MIN_BLOCK, -(-MZAP_ENTRY * (len(names) + 1) // MIN_BLOCK) * MIN_BLOCK)
        header = struct.pack("<QQQ", (1 << 63) + 3, rng.randrange(1 << 64), 0).ljust(MZAP_ENTRY, b"\0")
        entries = b"".join(struct.pack("<QIH", (8 << 60) | (2 + i), 0, 0) + name.ljust(MZAP_ENTRY - 14, b"\0")
                           for i, name in enumerate(names))
        return _metadata_stored(header + entries, lsize, ashift, rules), lsize
    chunks = sum(2 + -(-(len(n) + 1) // 21) for n in names)
    leaves = max(1, -(-chunks // int(FAT_LEAF_CHUNKS * FAT_LEAF_FILL)))
    sample = b"".join(struct.pack("<QQ", 0x8000 | i, 2 + i) + n for i, n in enumerate(names[:400]))
    share = min(1.0, _lz4()(sample) / max(1, len(sample)) + 0.1)
    sector = 1 << ashift
    leaf = min(FAT_LEAF, max(sector, -(-int(FAT_LEAF * share) // sector) * sector))
    return (leaves + 1) * leaf, (leaves + 1) * FAT_LEAF


@dataclass(frozen=True)
class Metadata:
    """Metadata of a dataset: the bytes `used` is charged (every block twice), the physical and the
    logical block sizes (once each, as compressratio counts them)."""
    allocated: int = 0
    psize: int = 0
    lsize: int = 0

    def __add__(self, other: Metadata) -> Metadata:
        return Metadata(self.allocated + other.allocated, self.psize + other.psize, self.lsize + other.lsize)

    def __sub__(self, other: Metadata) -> Metadata:
        return Metadata(self.allocated - other.allocated, self.psize - other.psize, self.lsize - other.lsize)

    def times(self, n: int) -> Metadata:
        return Metadata(self.allocated * n, self.psize * n, self.lsize * n)


def metadata_block(psize: int, ashift: int, vdev: Vdev) -> Metadata:
    """One metadata block of `psize` bytes stored, with its second copy (allocated twice; its block
    pointer counts once in compressratio)."""
    if psize == 0:
        return Metadata()
    # OpenZFS counts a metadata block's logical size as its physical one (BP_GET_UCSIZE).
    return Metadata(METADATA_COPIES * vdev.charged(vdev.asize(psize, ashift), ashift), psize, psize)


def file_indirects(blocks: int, ashift: int, rules: Rules, vdev: Vdev) -> Metadata:
    """The indirect blocks of a file of `blocks` blocks."""
    total = Metadata()
    for count in indirect_pointers(blocks):
        total += metadata_block(metadata_psize("indirect", count, ashift, rules), ashift, vdev)
    return total


def dnode_blocks(objects: int, ashift: int, rules: Rules, vdev: Vdev) -> Metadata:
    """The meta-dnode's blocks (32 dnodes each) and their indirect blocks, for `objects` dnodes."""
    full, rest = divmod(objects, DNODES_PER_BLOCK)
    block = metadata_block(metadata_psize("dnode", DNODES_PER_BLOCK, ashift, rules), ashift, vdev)
    total = block.times(full)
    if rest:
        total += metadata_block(metadata_psize("dnode", rest, ashift, rules), ashift, vdev)
    # The meta-dnode has three block pointers of its own before it needs indirect blocks.
    blocks = full + (1 if rest else 0)
    if blocks > 3:
        total += file_indirects(blocks, ashift, rules, vdev)
    return total


# Objects every new filesystem has (master node, SA registry and layouts, delete queue, root and
# .zfs directories, user/group/project accounting) and the objset block itself: what an empty
# filesystem is charged, as 12 small metadata blocks of about 1 KiB, each with its second copy.
# Seen in the OpenZFS 2.3 guest: 24576 bytes at ashift 9 (two sectors each), 98304 at ashift 12
# (one sector each).
EMPTY_FILESYSTEM_OBJECTS = 8
EMPTY_FILESYSTEM_BLOCKS = 12
EMPTY_FILESYSTEM_BLOCK = 1024


def empty_filesystem(ashift: int, vdev: Vdev) -> Metadata:
    return metadata_block(EMPTY_FILESYSTEM_BLOCK, ashift, vdev).times(EMPTY_FILESYSTEM_BLOCKS)
