"""OpenZFS's own LZ4 (zfsnas.bench.lz4zfs): every block it makes is valid LZ4 that the `lz4` package
decompresses to the input; it gives up, as OpenZFS's does, when the limit is too small; without a
C compiler it is not available and predict says so. That its sizes are OpenZFS's is checked against
real ZFS in the guest (tests/e2e/test_predict.py)."""

import random

import lz4.block
import pytest
from zfsnas.bench import lz4zfs

pytestmark = pytest.mark.skipif(not lz4zfs.available(), reason="no C compiler to build OpenZFS's LZ4")


def inputs():
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefgh ") for _ in range(rng.randint(2, 9))) for _ in range(500)]
    yield b""
    for n in (1, 4, 12, 13, 14, 100, 65546, 65547, 65548, 131072):
        yield bytes(n)
        yield rng.randbytes(n)
        yield b"".join(rng.choice(words) for _ in range(n))[:n]
    for _ in range(60):
        n = rng.choice([rng.randrange(0, 300), rng.randrange(60000, 70000), rng.randrange(100000, 1 << 20)])
        kind = rng.random()
        if kind < 0.3:
            yield rng.randbytes(n)
        elif kind < 0.6:
            yield b"".join(rng.choice(words) for _ in range(n))[:n]
        else:   # runs and repeats at every distance
            chunk = rng.randbytes(rng.randrange(1, 300))
            yield (chunk * (n // len(chunk) + 1))[:n]


def test_every_block_decompresses_to_its_input():
    z = lz4zfs.Lz4Zfs()
    for data in inputs():
        block = z.compress(data)
        assert block or not data
        assert lz4.block.decompress(block, uncompressed_size=len(data)) == data
        # within a few percent of today's LZ4 either way: the same format, an older parse
        today = len(lz4.block.compress(data, store_size=False))
        assert abs(len(block) - today) <= 0.06 * today + 16


def test_it_gives_up_below_its_room_and_never_above():
    z = lz4zfs.Lz4Zfs()
    for data in inputs():
        size = len(z.compress(data))
        if not data:
            continue
        assert z.compress(data, size - 1) == b""
        roomy = z.compress(data, size + 64)
        assert len(roomy) == size


def test_not_available_without_a_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(lz4zfs.tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(lz4zfs.shutil, "which", lambda name: None)
    lz4zfs._library.cache_clear()
    try:
        assert lz4zfs.available() is False
    finally:
        lz4zfs._library.cache_clear()
