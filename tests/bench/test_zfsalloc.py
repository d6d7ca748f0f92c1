"""The allocation model against hand-computed cases: OpenZFS's rules, one at a time, with the real
compressors' output sizes as the only input not worked out by hand."""

import random
import zlib

import lz4.block
import pytest
import zstandard

from zfsnas.bench.predicting import zfsalloc
from zfsnas.bench.predicting.lz4zfs import Lz4Zfs
from zfsnas.bench.predicting.zfsalloc import (
    EMBEDDED_MAX,
    Compression,
    ModelError,
    RecordSizer,
    Rules,
    Vdev,
    block_count,
    block_size,
    compressed_size,
    directory_psize,
    indirect_pointers,
    parse_compression,
    parse_recordsize,
    parse_rules,
    parse_vdev,
    size_name,
    zle_size,
)

M = 1 << 20
K = 1 << 10
LZ4 = parse_compression("lz4")
OFF = parse_compression("off")


def sizer(rules=None):
    return RecordSizer(rules or Rules(), Vdev(), lambda: 0.0)


def up(n, sector):
    return -(-n // sector) * sector


def text(n, seed=1):
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefgh") for _ in range(rng.randint(2, 7))) for _ in range(300)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b" "
    return bytes(out[:n])


# --- the cases: the tail record and holes --------------------------------------------------

def test_compression_off_1m_records_tail_takes_a_whole_record():
    """A file of 1 MiB + 1 byte is two 1 MiB blocks; compression off stores the second whole."""
    size = M + 1
    assert block_size(size, M) == M and block_count(size, M) == 2
    tail = sizer().store(b"x", M, OFF, [12])[12]
    assert (tail.lsize, tail.psize, tail.allocated) == (M, M, M)


def test_with_compression_the_tail_does_not_take_a_whole_record():
    tail = b"x" * 3000                                             # 3000 bytes, then zeros to 1 MiB
    stored = sizer().store(tail, M, LZ4, [12])[12]
    expected = compressed_size(LZ4, tail + bytes(M - 3000))
    assert stored.psize == up(expected, 4096) and stored.allocated == up(expected, 4096)
    assert stored.allocated < M // 100


def test_all_zero_records_are_holes_only_with_compression():
    zeros = bytes(128 * K)
    for name in ("lz4", "zle", "gzip-1", "zstd-3", "zstd-fast-10"):
        hole = sizer().store(zeros, 128 * K, parse_compression(name), [9, 12])
        assert all((s.lsize, s.psize, s.allocated) == (0, 0, 0) for s in hole.values()), name
    written = sizer().store(zeros, 128 * K, OFF, [12])[12]
    assert written.allocated == 128 * K


def test_a_small_file_is_one_block_of_its_size_rounded_to_512():
    assert block_size(1000, 128 * K) == 1024 and block_count(1000, 128 * K) == 1
    assert block_size(300 * K, 1 * M) == 300 * K and block_count(300 * K, 128 * K) == 3
    stored = sizer().store(text(1000), 1024, OFF, [9, 12])
    assert stored[9].allocated == 1024 and stored[12].allocated == 4096


# --- compression: 12.5 %, sectors, embedding, headers ---------------------------------------------

def test_the_limit_of_a_compressed_record():
    v23, v22 = Rules((2, 3)), Rules((2, 2))
    assert v23.limit(128 * K, LZ4, 12) == 112 * K                        # 7/8, already whole sectors
    assert v22.limit(40 * K, LZ4, 12) == 35840                           # 7/8 of 10 sectors
    assert v23.limit(40 * K, LZ4, 12) == 32768                           # 2.3: down to whole sectors
    assert v23.limit(4 * K, LZ4, 12) == EMBEDDED_MAX                     # below one sector: embedded only
    assert v23.limit(40 * K, parse_compression("zle"), 12) == 35840      # ZLE keeps the exact 7/8


def test_incompressible_records_are_stored_as_they_are():
    data = random.Random(3).randbytes(128 * K)
    for name in ("lz4", "gzip-9", "zstd-19", "zle"):
        stored = sizer().store(data, 128 * K, parse_compression(name), [12])[12]
        assert stored.psize == 128 * K and stored.allocated == 128 * K, name


def test_compressed_sizes_carry_the_headers_of_openzfs():
    data = text(128 * K)
    assert compressed_size(LZ4, data) == 4 + len(Lz4Zfs().compress(data))       # OpenZFS's own LZ4
    zstd1 = zstandard.ZstdCompressor(level=1, write_checksum=False, write_content_size=False).compress(data)
    assert zstd1[:4] == b"\x28\xb5\x2f\xfd"                              # the magic OpenZFS leaves out
    assert compressed_size(parse_compression("zstd-1"), data) == 8 + len(zstd1) - 4
    fast = zstandard.ZstdCompressor(level=-10, write_checksum=False, write_content_size=False).compress(data)
    assert compressed_size(parse_compression("zstd-fast-10"), data) == 8 + len(fast) - 4
    assert compressed_size(parse_compression("gzip-9"), data) == len(zlib.compress(data, 9))


def test_without_a_c_compiler_lz4_is_the_packages(monkeypatch):
    monkeypatch.setattr(zfsalloc, "_lz4_zfs", lambda: None)
    data = text(128 * K)
    assert not zfsalloc.lz4_exact()
    assert compressed_size(LZ4, data) == 4 + len(lz4.block.compress(data, store_size=False))
    assert zfsalloc.lz4_within(data, 100) is None


def test_sector_rounding_and_the_saving_that_rounding_eats():
    data = text(128 * K)
    size = compressed_size(LZ4, data)
    for ashift in (9, 12, 13):
        stored = sizer().store(data, 128 * K, LZ4, [ashift])[ashift]
        assert stored.psize == up(size, 1 << ashift) == stored.allocated
    # 6 KiB of text at ashift 12: compressed to under 4 KiB it takes one sector, else it saves nothing
    small = text(6 * K, seed=9)
    c = compressed_size(LZ4, small)
    stored = sizer().store(small, 6 * K, LZ4, [12])[12]
    assert stored.allocated == (4096 if c <= 4096 else 8192)


def test_a_tiny_compressed_record_is_embedded_in_its_block_pointer():
    data = b"a" * 4096                                                   # lz4: a few bytes
    assert compressed_size(LZ4, data) <= EMBEDDED_MAX
    assert sizer().store(data, 4096, LZ4, [12])[12] == sizer().store(data, 4096, LZ4, [12])[12]
    stored = sizer().store(data, 4096, LZ4, [12])[12]
    assert (stored.lsize, stored.psize, stored.allocated) == (4096, 0, 0)


def test_zstd_early_abort_needs_lz4_or_zstd1_to_save_enough():
    data = text(128 * K)
    zstd3, zstd1 = parse_compression("zstd-3"), parse_compression("zstd-1")
    limit = 112 * K

    def passes(lz4_size, zstd1_size):   # what the two passes answered (lz4: lsize when it gave up)
        return {f"lz4-{limit}": lz4_size, f"zstd-1-{limit}": zstd1_size, f"lz4-{56 * K}": 64 * K,
                f"zstd-1-{56 * K}": 64 * K}
    s = sizer(Rules((2, 3)))
    s._record, s._passes = data, passes(128 * K, 128 * K)               # neither pass would save 12.5 %
    assert s._aborts_early(data, 128 * K, zstd3, limit)
    assert not s._aborts_early(data, 128 * K, zstd1, limit)            # zstd-1 and -2 never abort
    assert not s._aborts_early(data, 64 * K, zstd3, 56 * K)            # records under 128 KiB do not
    old = sizer(Rules((2, 1)))
    old._record, old._passes = data, passes(128 * K, 128 * K)
    assert not old._aborts_early(data, 128 * K, zstd3, limit)          # before 2.2 there was no early abort
    s._passes = passes(100 * K, 128 * K)
    assert not s._aborts_early(data, 128 * K, zstd3, limit)
    s._passes = passes(limit, limit)                                  # lz4 must be strictly under; zstd-1 within
    assert not s._aborts_early(data, 128 * K, zstd3, limit)


# --- ZLE: our implementation against the algorithm, step by step ----------------------------------

def zle_reference(data: bytes, limit: int) -> int | None:
    """zle.c's loop, written out byte by byte from its description (n = 64)."""
    src, dst, n = 0, 0, 64
    while src < len(data) and dst < limit - 1:
        first = src
        dst += 1
        if data[src] == 0:
            end = min(src + 256 - n, len(data))
            while src < end and data[src] == 0:
                src += 1
        else:
            if limit - dst < n:
                break
            end = min(first + n, len(data))
            while src < end - 1 and (data[src] | data[src + 1]):
                dst += 1
                src += 1
            if data[src]:
                dst += 1
                src += 1
    return dst if src == len(data) else None


@pytest.mark.parametrize("seed", range(40))
def test_zle_matches_the_algorithm(seed):
    rng = random.Random(seed)
    zero_share = rng.choice([0.0, 0.3, 0.6, 0.9, 0.97, 1.0])
    length = rng.choice([1, 2, 63, 64, 65, 300, 4096, 20000])
    runs = bytearray()
    while len(runs) < length:
        if rng.random() < zero_share:
            runs += bytes(rng.choice([1, 2, 3, 191, 192, 193, 500]))
        else:
            runs += bytes(rng.randrange(1, 256) for _ in range(rng.choice([1, 2, 62, 63, 64, 65, 130])))
    data = bytes(runs[:length])
    for limit in (length - length // 8, length, length * 2, 70, 3):
        assert zle_size(data, limit) == zle_reference(data, limit), (seed, limit)


def test_zle_by_hand():
    assert zle_size(b"\x01" * 100, 1000) == 102                  # literals of 64 and 36
    assert zle_size(bytes(300), 1000) == 2                        # zeros: 192 and 108
    assert zle_size(b"A\x00B", 1000) == 4                         # a lone zero stays among the literals
    assert zle_size(b"A\x00\x00B", 1000) == 5                     # two zeros end a literal run
    assert zle_size(b"\x01" * 100, 102) is None                   # the second run needs 65 bytes free


# --- metadata, vdevs, names -----------------------------------------------------------------------

def test_indirect_blocks_of_a_file():
    assert indirect_pointers(1) == []
    assert indirect_pointers(2) == [2]
    assert indirect_pointers(1024) == [1024]
    assert indirect_pointers(1025) == [1024, 1, 2]
    assert indirect_pointers(1024 * 1024 + 1) == [1024] * 1024 + [1] + [1024, 1] + [2]


def test_raidz_allocation_and_its_deflated_charge():
    raidz2 = Vdev("raidz2", 8)
    # 128 KiB at ashift 9: 256 data sectors + 2 x ceil(256 / 6) parity = 342, a multiple of 3
    assert raidz2.asize(128 * K, 9) == 342 * 512
    assert raidz2.charged(342 * 512, 9) == 342 * (131072 // 342)
    # one sector: 1 + 2 parity; 1 MiB: 2048 + 2 x 342 = 2732, padded to 2733
    assert raidz2.asize(512, 9) == 3 * 512 and raidz2.asize(M, 9) == 2733 * 512
    assert Vdev().asize(5000, 12) == 8192 and Vdev().charged(8192, 12) == 8192


def test_a_micro_zap_directory_grows_by_512_bytes():
    names = [b"file-%04d.txt" % i for i in range(20)]
    psize, lsize = directory_psize(names, 12, Rules())
    # 1536 bytes at ashift 12: a compressed copy would have to be embedded; it is not: stored as it is
    assert lsize == up(64 * 21, 512) == 1536 and psize == 1536
    fat_psize, fat_lsize = directory_psize([b"x" * 60], 12, Rules())    # a long name: a fat ZAP
    assert fat_lsize == 2 * 16 * K and fat_psize >= 2 * 4096


@pytest.mark.parametrize("text,expected", [("on", ("lz4", "lz4", 0)), ("gzip", ("gzip-6", "gzip", 6)),
                                           ("zstd", ("zstd-3", "zstd", 3)), ("zstd-fast", ("zstd-fast-1", "zstd", -1)),
                                           ("zstd-fast-500", ("zstd-fast-500", "zstd", -500)), ("ZLE", ("zle", "zle", 0))])
def test_compression_names(text, expected):
    c = parse_compression(text)
    assert (c.name, c.algorithm, c.level) == expected


@pytest.mark.parametrize("text", ["zstd-20", "zstd-fast-11", "gzip-10", "lzjb", "brotli", ""])
def test_compression_names_refused(text):
    with pytest.raises(ModelError):
        parse_compression(text)


def test_other_names():
    assert parse_recordsize("128K") == 128 * K and parse_recordsize("1m") == M and size_name(512 * K) == "512K"
    for bad in ("3K", "32M", "256", "1.5M"):
        with pytest.raises(ModelError):
            parse_recordsize(bad)
    assert parse_vdev("raidz2:8") == Vdev("raidz2", 8) and parse_vdev("raidz:5") == Vdev("raidz1", 5)
    assert parse_vdev("mirror").name == "mirror" and parse_rules("2.1.11").version == (2, 1)
    for bad in ("raidz2:2", "raidz9:4", "stripe"):
        with pytest.raises(ModelError):
            parse_vdev(bad)
    assert Compression("off", "off").on is False
