"""OpenZFS's own LZ4: the block compressor of the LZ4 r1xx releases that OpenZFS still bundles
(module/zfs/lz4_zfs.c), whose parse differs from today's LZ4 (the `lz4` package's 1.10 compresses
text and images 1.5-3 % worse, enough to miss a 2 % prediction). Written here from the algorithm,
in C, built on first use with the machine's C compiler into a cache directory and loaded with
ctypes; where no compiler is at hand `available()` is False and predict falls back on the `lz4`
package, saying so.

The algorithm: a table of 4096 positions hashed from 4 bytes (8192 of 16-bit offsets for inputs
under 64 KiB + 11 bytes), every entry starting at position 0; the search steps by one for 67
attempts then faster (skip strength 6); a match needs 4 equal bytes within 65535 bytes back, is
extended backwards over equal bytes and forwards up to 5 bytes before the end; after a match the
position 2 back is hashed and the next position tried at once; the last 12 bytes are never
searched. The output is the LZ4 block format; it fails (returns 0) where OpenZFS's would run out
of room, checked at the same points.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("zfsnas.bench")

SOURCE = r"""
#include <stdint.h>
#include <string.h>

#define MINMATCH 4
#define LASTLITERALS 5
#define MFLIMIT 12
#define MAX_DISTANCE 65535
#define SKIP 6
#define SMALL_LIMIT (65536 + MFLIMIT - 1)

static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static void put_length(unsigned char **op, int n) {   /* the bytes after a nibble of 15 */
    for (; n >= 255; n -= 255) *(*op)++ = 255;
    *(*op)++ = (unsigned char)n;
}

static unsigned hash_of(const unsigned char *p, int bits) { return (get32(p) * 2654435761U) >> (32 - bits); }

int zfsnas_lz4(const unsigned char *src, int isize, unsigned char *dst, int osize) {
    static uint32_t table[1 << 13];
    const int small = isize < SMALL_LIMIT, bits = small ? 13 : 12;
    const unsigned char *ip = src, *anchor = src, *end = src + isize;
    const unsigned char *mflimit = end - MFLIMIT, *matchlimit = end - LASTLITERALS;
    unsigned char *op = dst, *oend = dst + osize, *token;
    memset(table, 0, sizeof(uint32_t) << bits);
    if (isize >= MFLIMIT + 1) {
        unsigned h;
        table[hash_of(ip, bits)] = 0;
        ip++;
        h = hash_of(ip, bits);
        for (;;) {
            const unsigned char *ref, *next = ip;
            unsigned attempts = (1U << SKIP) + 3;
            int length;
            do {                                             /* search */
                unsigned here = h;
                ip = next;
                next = ip + (attempts++ >> SKIP);
                if (next > mflimit) goto last;
                h = hash_of(next, bits);
                ref = src + table[here];
                table[here] = (uint32_t)(ip - src);
            } while ((!small && ip - ref > MAX_DISTANCE) || get32(ref) != get32(ip));
            while (ip > anchor && ref > src && ip[-1] == ref[-1]) { ip--; ref--; }
            length = (int)(ip - anchor);
            token = op++;
            if (op + length + (2 + 1 + LASTLITERALS) + (length >> 8) > oend) return 0;
            if (length >= 15) { *token = 15 << 4; put_length(&op, length - 15); }
            else *token = (unsigned char)(length << 4);
            memcpy(op, anchor, length);
            op += length;
            for (;;) {                                       /* a match at ref */
                *op++ = (unsigned char)(ip - ref);
                *op++ = (unsigned char)((ip - ref) >> 8);
                ip += MINMATCH; ref += MINMATCH; anchor = ip;
                while (ip < matchlimit && *ip == *ref) { ip++; ref++; }
                length = (int)(ip - anchor);
                if (op + (1 + LASTLITERALS) + (length >> 8) > oend) return 0;
                if (length >= 15) { *token += 15; put_length(&op, length - 15); }
                else *token += (unsigned char)length;
                if (ip > mflimit) { anchor = ip; goto last; }
                table[hash_of(ip - 2, bits)] = (uint32_t)(ip - 2 - src);
                {
                    unsigned at = hash_of(ip, bits);
                    ref = src + table[at];
                    table[at] = (uint32_t)(ip - src);
                }
                if ((small || ip - ref <= MAX_DISTANCE) && get32(ref) == get32(ip)) { token = op++; *token = 0; continue; }
                break;
            }
            anchor = ip++;
            h = hash_of(ip, bits);
        }
    }
last:
    {
        int rest = (int)(end - anchor);
        if (op + rest + 1 + ((rest + 255 - 15) / 255) > oend) return 0;
        if (rest >= 15) { *op++ = 15 << 4; put_length(&op, rest - 15); }
        else *op++ = (unsigned char)(rest << 4);
        memcpy(op, anchor, rest);
        op += rest;
    }
    return (int)(op - dst);
}
"""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zfsnas"


def _compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The compiled compressor (built once per source and machine), None without a C compiler."""
    digest = hashlib.sha256((SOURCE + sys.platform + os.uname().machine).encode()).hexdigest()[:16]
    name = f"lz4zfs-{digest}.so"
    for directory in (_cache_dir(), Path(tempfile.gettempdir()) / f"zfsnas-{os.getuid()}"):
        target = directory / name
        if not target.exists():
            compiler = _compiler()
            if compiler is None:
                return None
            try:
                directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                with tempfile.TemporaryDirectory(dir=directory) as work:
                    source = Path(work) / "lz4zfs.c"
                    source.write_text(SOURCE)
                    built = Path(work) / name
                    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(source)],
                                   check=True, capture_output=True, timeout=120)
                    os.replace(built, target)
            except (OSError, subprocess.SubprocessError) as exc:
                log.debug("building OpenZFS's LZ4 in %s failed: %s", directory, exc)
                continue
        try:
            lib = ctypes.CDLL(str(target))
        except OSError as exc:
            log.debug("loading %s failed: %s", target, exc)
            continue
        lib.zfsnas_lz4.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
        lib.zfsnas_lz4.restype = ctypes.c_int
        return lib
    return None


def available() -> bool:
    return _library() is not None


class Lz4Zfs:
    """compress(data, limit) -> the LZ4 block (b"" when it does not fit in `limit` bytes)."""

    def __init__(self) -> None:
        lib = _library()
        if lib is None:
            raise RuntimeError("no C compiler: OpenZFS's LZ4 could not be built")
        self.fn = lib.zfsnas_lz4
        self.buffer = ctypes.create_string_buffer(0)

    def compress(self, data: bytes, limit: int | None = None) -> bytes:
        limit = len(data) + len(data) // 255 + 16 if limit is None else limit
        if len(self.buffer) < limit:
            self.buffer = ctypes.create_string_buffer(limit)
        n = self.fn(data, len(data), self.buffer, limit)
        return self.buffer.raw[:n]


def within() -> Callable[[bytes, int], int]:
    """size(data, limit): OpenZFS's LZ4 block size of `data`, 0 when it gives up within `limit` bytes."""
    compressor = Lz4Zfs()

    def size(data: bytes, limit: int) -> int:
        return len(compressor.compress(data, limit))
    return size
