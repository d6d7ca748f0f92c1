"""OpenZFS's own LZ4: the block compressor of the LZ4 r1xx releases that OpenZFS still bundles
(module/zfs/lz4_zfs.c), whose parse differs from today's LZ4 (the `lz4` package's 1.10 compresses
text and images 1.5-3 % worse, enough to miss a 2 % prediction). Written here from the algorithm,
in C, built on first use with the machine's C compiler into a private cache directory (the user's,
else one under the temporary directory), renamed into place whole, and loaded with ctypes after a
self-test; where that fails in any way (no compiler, nowhere private to write, a library that does
not load or does not pass) `available()` is False, `unavailable_reason()` says why in one line,
and predict falls back on the `lz4` package, saying so.

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
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
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


def _directories() -> list[Path]:
    """Where the library may live: the user's cache, else a private directory under the temporary one
    (a read-only or full home)."""
    return [_cache_dir(), Path(tempfile.gettempdir()) / f"zfsnas-{os.getuid()}"]


def _compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def library_name() -> str:
    """The file name of this source's library for this kind of machine: another source, processor
    family, OS or C library builds its own, so a home shared between machines never loads a foreign one."""
    machine = (SOURCE, sys.platform, os.uname().sysname, os.uname().machine, *platform.libc_ver(), sys.byteorder)
    return f"lz4zfs-{hashlib.sha256(repr(machine).encode()).hexdigest()[:16]}.so"


def _private(directory: Path) -> str:
    """"" when `directory` exists (made if missing) as a directory of ours that nobody else may write
    to, else why not: a library loaded from a place others can write to would run their code."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(directory)
    except OSError as exc:
        return f"{directory}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{directory} is not a directory"
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return f"{directory} is not private (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}): not used"
    return ""


def _build(target: Path) -> str:
    """Compile the source into `target` ("" when done, else why not). Built in a directory of its own
    beside the target and renamed over it in one step: processes building at once each rename a whole
    library, and a reader never sees half of one."""
    compiler = _compiler()
    if compiler is None:
        return "no C compiler (cc, gcc or clang; or $CC)"
    try:
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
            source = Path(work) / "lz4zfs.c"
            source.write_text(SOURCE)
            built = Path(work) / target.name
            subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(source)],
                           check=True, capture_output=True, timeout=300)
            os.chmod(built, 0o755)          # whatever the umask: a library others may not change
            os.replace(built, target)
    except subprocess.CalledProcessError as exc:
        first = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[:1]
        return f"{compiler} failed ({exc.returncode}){': ' + first[0] if first else ''}"
    except subprocess.TimeoutExpired:
        return f"{compiler} took more than 300 s"
    except OSError as exc:
        return f"building in {target.parent}: {exc.strerror or exc}"
    return ""


# A self-test every load runs: an input mixing literals, near and far matches and runs, and the size
# OpenZFS's LZ4 makes of it (native-endian hashing, as lz4_zfs.c's: pinned on little-endian machines).
SELF_TEST_BYTES = 1 << 17
SELF_TEST_SIZE = 61687


def self_test_input() -> bytes:
    words = [b"zfs", b"record", b"size", b"lz4", b" ", b"compress", b"0123", b"\n", b"pool", b"sector"]
    out, x = bytearray(), 12345
    while len(out) < SELF_TEST_BYTES:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out += words[x % len(words)] if x & 0x300 else bytes([x >> 16 & 0xFF]) * (x >> 8 & 3)
    return bytes(out[:SELF_TEST_BYTES])


def _self_test(fn: Callable[..., int]) -> str:
    """"" when `fn` makes valid LZ4 of the self-test input, of OpenZFS's size; else what is wrong."""
    import lz4.block  # type: ignore[import-untyped]

    data = self_test_input()
    out = ctypes.create_string_buffer(len(data) + len(data) // 255 + 16)
    n = fn(data, len(data), out, len(out))
    try:
        good = n > 0 and lz4.block.decompress(out.raw[:n], uncompressed_size=len(data)) == data
    except lz4.block.LZ4BlockError:
        good = False
    if not good:
        return "its output is not the input's LZ4"
    if sys.byteorder == "little" and n != SELF_TEST_SIZE:
        return f"it made {n} bytes of the self-test, OpenZFS's LZ4 makes {SELF_TEST_SIZE}"
    return ""


def _load(target: Path) -> tuple[ctypes.CDLL | None, str]:
    """The library at `target` once it is ours, private and passes the self-test; else why not."""
    try:
        st = os.lstat(target)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None, f"{target} is not a private file of ours: not loaded"
        lib = ctypes.CDLL(str(target))
        fn = lib.zfsnas_lz4
    except (OSError, AttributeError) as exc:
        return None, f"loading {target}: {exc}"
    fn.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
    fn.restype = ctypes.c_int
    if why := _self_test(fn):
        _unload(lib)       # else dlopen() of the rebuilt file at the same path hands back this one
        return None, f"{target} failed its self-test: {why}"
    return lib, ""


def _unload(lib: ctypes.CDLL) -> None:
    try:
        dlclose = ctypes.CDLL(None).dlclose      # the C library's (libdl's before glibc 2.34: Python links it)
        dlclose.argtypes = (ctypes.c_void_p,)
        dlclose(lib._handle)
    except (AttributeError, OSError) as exc:
        log.debug("unloading %s: %s", lib, exc)


@dataclass(frozen=True)
class Library:
    lib: ctypes.CDLL | None
    path: Path | None = None     # the file loaded
    why: str = ""                # why there is none (one line)


@functools.cache
def _library() -> Library:
    """The compiled compressor, or why there is none. Any failure (no compiler, a home that cannot be
    written, a library that does not load or fails its self-test: half-written, another machine's,
    tampered with) is rebuilt once, then tried in the next directory, then given up on."""
    name = library_name()
    reasons: list[str] = []
    for directory in _directories():
        if why := _private(directory):
            reasons.append(why)
            continue
        target = directory / name
        for rebuild in (False, True):
            if rebuild or not os.path.lexists(target):
                if why := _build(target):
                    reasons.append(why)
                    break
            lib, why = _load(target)
            if lib is not None:
                return Library(lib, target)
            reasons.append(why)
            log.debug("%s", why)
    return Library(None, None, "; ".join(dict.fromkeys(reasons)))


def available() -> bool:
    return _library().lib is not None


def unavailable_reason() -> str:
    """Why OpenZFS's LZ4 is not at hand ("" when it is)."""
    return _library().why


class Lz4Zfs:
    """compress(data, limit) -> the LZ4 block (b"" when it does not fit in `limit` bytes)."""

    def __init__(self) -> None:
        found = _library()
        if found.lib is None:
            raise RuntimeError(f"OpenZFS's LZ4 could not be built: {found.why}")
        self.fn = found.lib.zfsnas_lz4
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
