"""A corpus of mixed compressibility, generated from a seed: the same seed gives the same bytes on the
host and in the guest (Python's `random` is the same generator everywhere; no compressor is used).

Kinds, each in its own directory, sized log-uniformly: text (a Zipf vocabulary: lz4 ~2x, zstd ~3x),
FITS-like images (2880-byte ASCII header cards, then big-endian 16-bit pixels whose high byte
varies slowly and whose low byte is 6 bits of noise, with blank rows: lz4 saves about a seventh,
zstd about a third),
already-compressed files (random bytes: nothing saves anything), sparse files (holes with a few
written extents: zeros that compression turns into holes) and tiny files (a few hundred bytes:
sector rounding and embedded blocks). Used by tests/bench (predict on generated corpora),
benchmarks/predict_bench.py (10 GiB) and the guest's predict phase (tests/e2e/guest/predict.py).
Big corpora are quick to make: each kind draws from a pool of a few MiB, every file a fresh
rotation and mix of it, so no two records are alike.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import random
from pathlib import Path

KINDS = {  # name: (share of the bytes, smallest and largest file)
    "text": (0.398, 512, 2 << 20),
    "fits": (0.30, 300 << 10, 6 << 20),
    "archive": (0.20, 16 << 10, 8 << 20),
    "sparse": (0.10, 1 << 20, 12 << 20),
    "tiny": (0.002, 40, 1 << 10),
}
EXTENSIONS = {"text": "txt", "fits": "fits", "archive": "gz", "sparse": "img", "tiny": "cfg"}
POOL = 4 << 20
LOW_BITS = bytes(b & 0x3F for b in range(256))       # pixel noise of 6 bits: what zstd's entropy coder squeezes
FILES_PER_DIR = 40


class Pools:
    """Each kind's raw material, made once per seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.text = self._text()
        self.fits = self._fits()

    def _text(self) -> bytes:
        words = [bytes(self.rng.choice(b"etaoinshrdlucmfwypvbgkjqxz") for _ in range(self.rng.randint(2, 10)))
                 for _ in range(6000)]
        cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
        drawn = self.rng.choices(words, cum_weights=cumulative, k=POOL // 5)
        out = bytearray()
        line = at = 0
        while len(out) < POOL:
            line += 1
            count = 6 + line % 11
            out += b"%d " % line + b" ".join(drawn[at:at + count]) + b"\n"
            at = (at + count) % (len(drawn) - 16)
        return bytes(out[:POOL])

    def _fits(self) -> bytes:
        width = 1024
        ramps = [bytes(((shift + x // 64) & 0x3F) + 0x40 for x in range(width)) for shift in range(64)]
        out = bytearray(POOL)
        for y in range(POOL // (2 * width)):
            start = y * 2 * width
            if self.rng.random() < 0.15:            # a blank or saturated row: runs lz4 finds
                out[start:start + 2 * width] = bytes([0x40, 0x00]) * width
                continue
            out[start:start + 2 * width:2] = ramps[(y // 16) % 64]
            out[start + 1:start + 2 * width:2] = self.rng.randbytes(width).translate(LOW_BITS)
        return bytes(out)

    def slice(self, pool: bytes, size: int) -> bytes:
        """`size` bytes of `pool`, from a random rotation (repeated when larger than the pool)."""
        start = self.rng.randrange(len(pool))
        rotated = pool[start:] + pool[:start]
        return (rotated * (size // len(rotated) + 1))[:size]


def _fits_header(rng: random.Random, size: int) -> bytes:
    cards = [f"SIMPLE  = {'T':>20}", f"BITPIX  = {16:>20}", f"NAXIS   = {2:>20}", f"NAXIS1  = {1024:>20}",
             f"NAXIS2  = {size // 2048:>20}", f"EXPTIME = {rng.uniform(1, 600):>20.3f}",
             f"OBJECT  = 'NGC{rng.randrange(1, 7840):04d}'", f"DATE-OBS= '2026-{rng.randrange(1, 13):02d}-01'", "END"]
    return "".join(card.ljust(80) for card in cards).ljust(2880).encode()


def _content(kind: str, size: int, pools: Pools) -> bytes | None:
    """A file's bytes; None for a sparse file (written by extents)."""
    rng = pools.rng
    if kind in ("text", "tiny"):
        return pools.slice(pools.text, size)
    if kind == "fits":
        header = _fits_header(rng, size)
        return header + pools.slice(pools.fits, max(0, size - len(header)))
    if kind == "archive":
        return rng.randbytes(size)
    return None


def _write_sparse(path: Path, size: int, pools: Pools) -> None:
    rng = pools.rng
    with open(path, "wb") as f:
        f.truncate(size)
        for _ in range(rng.randint(1, 4)):
            length = rng.randrange(4096, max(8192, size // 8))
            offset = rng.randrange(0, max(1, size - length))
            f.seek(offset)
            f.write(pools.slice(pools.text if rng.random() < 0.5 else pools.fits, length))


def generate(root: str | Path, total_bytes: int, seed: int = 0) -> list[Path]:
    """Write about `total_bytes` of files below `root` (created); the paths, in creation order."""
    rng = random.Random(seed)
    pools = Pools(rng)
    root = Path(root)
    paths: list[Path] = []
    for kind, (share, smallest, largest) in KINDS.items():
        budget = int(total_bytes * share)
        written = index = 0
        while written < budget:
            size = int(math.exp(rng.uniform(math.log(smallest), math.log(largest))))
            size = min(size, max(smallest, budget - written)) if kind != "tiny" else size
            directory = root / kind / f"d{index // FILES_PER_DIR:03d}"
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{kind}-{index:05d}.{EXTENSIONS[kind]}"
            data = _content(kind, size, pools)
            if data is None:
                _write_sparse(path, size, pools)
            else:
                path.write_bytes(data)
            paths.append(path)
            written += size
            index += 1
    return paths


def manifest(root: str | Path) -> dict[str, str]:
    """sha256 of every file below `root`, by relative path: the guest's corpus and the host's agree."""
    out = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(out.items()))


if __name__ == "__main__":
    import sys

    generate(sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
