"""OpenZFS's own LZ4 (zfsnas.bench.predicting.lz4zfs): every block it makes is valid LZ4 that the `lz4` package
decompresses to the input; it gives up, as OpenZFS's does, when the limit is too small. Built on
first use, safely: in a private directory (the cache, else the temporary one), renamed into place
whole while other processes build too, rebuilt when what is there does not load or fails the
self-test, never loaded from a directory others may write to; where all that fails, one line says
why (and predict falls back on the package, saying so: test_predict.py). That its sizes are
OpenZFS's is checked against real ZFS in the guest (tests/e2e/test_predict.py)."""

import os
import random
import shutil
import stat
import subprocess
import sys

import lz4.block
import pytest

from zfsnas.bench.predicting import lz4zfs

needs_it = pytest.mark.skipif(not lz4zfs.available(), reason="no C compiler to build OpenZFS's LZ4")


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


@needs_it
def test_every_block_decompresses_to_its_input():
    z = lz4zfs.Lz4Zfs()
    for data in inputs():
        block = z.compress(data)
        assert block or not data
        assert lz4.block.decompress(block, uncompressed_size=len(data)) == data
        # within a few percent of today's LZ4 either way: the same format, an older parse
        today = len(lz4.block.compress(data, store_size=False))
        assert abs(len(block) - today) <= 0.06 * today + 16


@needs_it
def test_it_gives_up_below_its_room_and_never_above():
    z = lz4zfs.Lz4Zfs()
    for data in inputs():
        size = len(z.compress(data))
        if not data:
            continue
        assert z.compress(data, size - 1) == b""
        roomy = z.compress(data, size + 64)
        assert len(roomy) == size


# --- building it on first use: wherever that fails, a clear reason and the package instead ----------

@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """lz4zfs as on a machine where it was never built: its cache and temporary directories under
    tmp_path, nothing loaded; afterwards this process's own library again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(lz4zfs.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    lz4zfs._library.cache_clear()
    yield tmp_path
    lz4zfs._library.cache_clear()


def built(tmp_path, where="cache"):
    directory = tmp_path / "cache" / "zfsnas" if where == "cache" else tmp_path / "tmp" / f"zfsnas-{os.getuid()}"
    return directory / lz4zfs.library_name()


@needs_it
def test_built_into_a_private_cache_directory_and_passing_its_self_test(fresh):
    assert lz4zfs.available() and lz4zfs.unavailable_reason() == ""
    library = built(fresh)
    assert lz4zfs._library().path == library
    assert stat.S_IMODE(library.parent.stat().st_mode) == 0o700
    assert not library.stat().st_mode & 0o022
    assert [p.name for p in library.parent.iterdir()] == [library.name]      # no build directory left
    assert len(lz4zfs.Lz4Zfs().compress(lz4zfs.self_test_input())) == lz4zfs.SELF_TEST_SIZE


@needs_it
def test_a_home_that_cannot_be_written_falls_back_to_the_temporary_directory(fresh, monkeypatch):
    (fresh / "readonly-home").write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(fresh / "readonly-home"))
    assert lz4zfs.available()
    assert lz4zfs._library().path == built(fresh, "tmp")
    assert stat.S_IMODE(built(fresh, "tmp").parent.stat().st_mode) == 0o700


def test_nowhere_to_write_means_no_library_and_says_where_it_tried(fresh, monkeypatch):
    (fresh / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(fresh / "file"))
    monkeypatch.setattr(lz4zfs.tempfile, "tempdir", str(fresh / "file"))
    assert not lz4zfs.available()
    why = lz4zfs.unavailable_reason()
    assert f"{fresh / 'file' / 'zfsnas'}: Not a directory" in why
    assert f"{fresh / 'file' / f'zfsnas-{os.getuid()}'}: Not a directory" in why
    assert "\n" not in why
    with pytest.raises(RuntimeError, match="could not be built"):
        lz4zfs.Lz4Zfs()


def test_no_compiler_says_so(fresh, monkeypatch):
    monkeypatch.setattr(lz4zfs.shutil, "which", lambda name: None)
    assert lz4zfs.available() is False
    assert lz4zfs.unavailable_reason() == "no C compiler (cc, gcc or clang; or $CC)"


def test_a_compiler_that_fails_says_how(fresh, monkeypatch):
    cc = fresh / "badcc"
    cc.write_text("#!/bin/sh\necho 'badcc: cannot build today' >&2\nexit 3\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    assert not lz4zfs.available()
    assert f"{cc} failed (3): badcc: cannot build today" in lz4zfs.unavailable_reason()
    assert [p.name for p in built(fresh).parent.iterdir()] == []             # nothing half-built left


COMPILER = lz4zfs._compiler()


@pytest.mark.skipif(COMPILER is None, reason="no C compiler")
def test_processes_building_at_once_each_get_a_whole_library(fresh):
    """Four processes start with an empty cache; the compiler (a wrapper that waits a second) runs in
    several at once; every process loads a library that passes, and one file is left."""
    log = fresh / "builds.log"
    cc = fresh / "slowcc"
    cc.write_text(f"#!/bin/sh\necho start >> {log}\nsleep 1\nexec {shutil.which(COMPILER)} \"$@\"\n")
    cc.chmod(0o755)
    env = {**os.environ, "XDG_CACHE_HOME": str(fresh / "cache"), "TMPDIR": str(fresh / "tmp"), "CC": str(cc)}
    code = ("from zfsnas.bench.predicting import lz4zfs; z = lz4zfs.Lz4Zfs(); "
            "print(len(z.compress(lz4zfs.self_test_input())), lz4zfs._library().path)")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert {out for out, _err in outs} == {f"{lz4zfs.SELF_TEST_SIZE} {built(fresh)}\n"}
    assert log.read_text().count("start") >= 2          # they did build at the same time
    assert [p.name for p in built(fresh).parent.iterdir()] == [built(fresh).name]


@pytest.mark.skipif(COMPILER is None, reason="no C compiler")
def test_a_library_that_does_not_load_is_rebuilt(fresh):
    """Half-written, or another machine's (a shared home): not a library this process can load."""
    library = built(fresh)
    library.parent.mkdir(parents=True, mode=0o700)
    library.write_bytes(b"\x7fELF" + bytes(100))
    library.chmod(0o755)
    assert lz4zfs.available() and lz4zfs._library().path == library
    assert library.stat().st_size > 1000


@pytest.mark.skipif(COMPILER is None, reason="no C compiler")
def test_a_library_that_fails_its_self_test_is_replaced(fresh):
    """A library that loads and makes valid LZ4, but not OpenZFS's (every byte a literal): the self-test's
    size catches it, the rebuilt one is used, in the same process and at the same path."""
    library = built(fresh)
    library.parent.mkdir(parents=True, mode=0o700)
    source = fresh / "literal.c"
    source.write_text("""
#include <string.h>
int zfsnas_lz4(const unsigned char *src, int isize, unsigned char *dst, int osize) {
    int n = 0, rest = isize - 15;
    if (isize < 15) { dst[n++] = (unsigned char)(isize << 4); }
    else { dst[n++] = 0xF0; for (; rest >= 255; rest -= 255) dst[n++] = 255; dst[n++] = (unsigned char)rest; }
    if (n + isize > osize) return 0;
    memcpy(dst + n, src, isize);
    return n + isize;
}
""")
    subprocess.run([COMPILER, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    library.chmod(0o755)
    assert lz4zfs.available() and lz4zfs._library().path == library
    assert len(lz4zfs.Lz4Zfs().compress(lz4zfs.self_test_input())) == lz4zfs.SELF_TEST_SIZE


@pytest.mark.skipif(COMPILER is None, reason="no C compiler")
def test_a_directory_others_may_write_to_is_never_loaded_from(fresh):
    """Someone planted a library in a cache directory others can write to: it is not loaded; the
    private temporary directory is used instead."""
    shared = fresh / "cache" / "zfsnas"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    (shared / lz4zfs.library_name()).write_bytes(b"planted")
    assert lz4zfs.available() and lz4zfs._library().path == built(fresh, "tmp")
    assert (shared / lz4zfs.library_name()).read_bytes() == b"planted"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user takes root")
def test_a_directory_of_another_user_is_never_loaded_from(fresh, monkeypatch):
    other = fresh / "tmp" / f"zfsnas-{os.getuid()}"       # made in advance by someone else in /tmp
    other.mkdir(mode=0o700)
    os.chown(other, 65534, 65534)
    (fresh / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(fresh / "file"))
    assert not lz4zfs.available()
    assert f"{other} is not private (owner uid 65534" in lz4zfs.unavailable_reason()


def test_each_kind_of_machine_has_a_library_of_its_own(monkeypatch):
    here = lz4zfs.library_name()
    real = os.uname()
    other = "aarch64" if real.machine != "aarch64" else "x86_64"
    fake = os.uname_result((real.sysname, real.nodename, real.release, real.version, other))
    monkeypatch.setattr(lz4zfs.os, "uname", lambda: fake)
    assert lz4zfs.library_name() != here
