"""The store under crashes, full disks, contention, newer schemas and hostile names (issue 43,
cases 2, 8, 10, 11): SQLite judges a file, never its size against its header; a failed create
leaves nothing; a newer schema is refused before anything is written; a busy database is waited
for with one line, then refused in one; a full disk, a read-only file or directory is one line,
the data intact; names from the store never inject Markdown. Each kind in seeded variations."""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fuzz.inputs import fio_document, fio_job
from zfsnas.bench.answering.document import markdown
from zfsnas.bench.answering.report import sections
from zfsnas.bench.cli import main
from zfsnas.store.database import ReadOnlyStore, Store
from zfsnas.store.schema import SCHEMA_VERSION, TABLES, ResultFigures

from .configs import configuration

ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
rng = random.Random(43)


def cli(*argv: str, limit_bytes: int | None = None, user: str | None = None, env: dict | None = None,
        timeout: float = 300) -> tuple[int, list[str]]:
    """`zfsnas-bench argv` in a process of its own (files limited to `limit_bytes`: a full disk;
    run as `user`); its exit status and stderr lines."""
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # a write past the limit fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    prefix = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups"] if user else []
    python = "/usr/bin/python3" if user else sys.executable    # a virtualenv's may point into root's home
    proc = subprocess.run([*prefix, python, "-c", CLI, *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, preexec_fn=limited if limit_bytes is not None else None,
                          env={**os.environ, "PYTHONPATH": f"{ROOT / 'exporter'}:{ROOT}", **(env or {})})
    return proc.returncode, proc.stderr.splitlines()


def fio_file(directory: Path, jobs: int = 3, prefix: str = "job") -> Path:
    path = directory / f"{prefix}-{jobs}.json"
    path.write_text(json.dumps(fio_document([fio_job(f"{prefix}{i}") for i in range(jobs)])))
    return path


def filled_store(path: Path, results: int = 20) -> Path:
    store = Store(path)
    store.start_matrix("r", "m", "tank/scratch", results)
    for i in range(results):
        store.record_result("r", i, configuration(size=f"{i}G"), started=1_780_000_000.0 + i,
                            finished=1_780_000_010.0 + i, figures=ResultFigures(throughput_bytes_per_second=1e8 + i))
    store.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(path: Path, columns: str = "id, status, throughput_bytes_per_second") -> list[tuple]:
    """Those columns of every result, read without writing a byte."""
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return db.execute(f"SELECT {columns} FROM results ORDER BY id").fetchall()
    finally:
        db.close()


# --- case 2: a sound database longer than its header says --------------------------------------------

def crashed_mid_checkpoint(directory: Path, kind: str) -> Path:
    """The files a writer leaves when it dies in the middle of a checkpoint: the database and its
    intact WAL, of which the checkpoint had copied some frames into the database. `header-ahead`:
    page 1 was copied (its header counts pages the file does not have yet); `torn-tail`: and then
    part of a page past the old end (a full disk); `longer`: pages past the header's count."""
    path = filled_store(directory / "bench.sqlite")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO matrix_runs (id, matrix, dataset, pool, host, pid, started, status, parameters)"
                       " VALUES (?,?,?,?,?,?,?,?,?)",
                       [(f"x{i}", "m", "tank/x", "tank", "h", 1, 1.0, "complete",
                         json.dumps({"p": "x" * rng.randint(500, 3000)})) for i in range(rng.randint(50, 400))])
    writer.execute("COMMIT")
    crashed = directory / "crashed"
    crashed.mkdir()
    shutil.copy(path, crashed / "bench.sqlite")            # as they are on disk when it dies: no checkpoint ran
    shutil.copy(f"{path}-wal", crashed / "bench.sqlite-wal")
    writer.close()
    path = crashed / "bench.sqlite"
    page = int.from_bytes(path.read_bytes()[16:18], "big")
    wal = Path(f"{path}-wal").read_bytes()
    frames = {}                                            # page number -> its newest content in the WAL
    for offset in range(32, len(wal) - 24 - page + 1, 24 + page):
        frames[int.from_bytes(wal[offset:offset + 4], "big")] = wal[offset + 24:offset + 24 + page]
    with path.open("r+b") as db:
        if kind == "longer":
            db.seek(0, 2)
            db.write(rng.choice((bytes(page), rng.randbytes(page))) * rng.randint(1, 40))
            return path
        old_pages = path.stat().st_size // page
        db.write(frames[1])                                # the checkpoint copied page 1 first
        copied = [n for n in frames if 1 < n <= old_pages]
        for number in rng.sample(copied, rng.randint(0, len(copied))):
            db.seek((number - 1) * page)
            db.write(frames[number])
        if kind == "torn-tail":
            beyond = sorted(n for n in frames if n > old_pages)
            db.seek((beyond[0] - 1) * page)
            db.write(frames[beyond[0]][:rng.randrange(1, page)])
    return path


@pytest.mark.parametrize("kind", ["header-ahead", "torn-tail", "longer", "header-ahead", "torn-tail"])
def test_a_database_left_mid_checkpoint_is_read_and_written(kind, tmp_path):
    """What a crash in the middle of a checkpoint (or a disk that filled during it) leaves: a file
    shorter or longer than its header says, legal with its WAL. SQLite opens it and its integrity
    check says ok: so does every command, writers too."""
    path = crashed_mid_checkpoint(tmp_path, kind)
    header = path.read_bytes()[:100]
    page, pages = int.from_bytes(header[16:18], "big"), int.from_bytes(header[28:32], "big")
    assert path.stat().st_size != pages * page            # not what the header says
    probe = tmp_path / "probe"
    probe.mkdir()
    shutil.copy(path, probe / "db")
    shutil.copy(f"{path}-wal", probe / "db-wal")
    assert sqlite3.connect(probe / "db").execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for argv in (["list"], ["report"], ["annotate", "--retry"]):
        code, err = cli(*argv, "--db", str(path))
        assert code == 0, err
        assert not any("damaged" in line or "truncated" in line for line in err), err
    before = rows(path)
    code, err = cli("import", "fio", str(fio_file(tmp_path)), "--db", str(path))
    assert code == 0, err
    assert rows(path)[:len(before)] == before and len(rows(path)) == len(before) + 3
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_kill_9_in_the_middle_of_checkpoints_never_makes_a_sound_file_damaged(tmp_path):
    """The issue's trial, for real: a writer that checkpoints as it writes, killed at seeded moments."""
    writer = ("import sys, sqlite3\n"
              "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "db.execute('PRAGMA journal_mode=WAL')\n"
              "db.execute('PRAGMA wal_autocheckpoint=0')\n"
              "print('ready', flush=True)\n"
              "while True:\n"
              "    db.execute('BEGIN IMMEDIATE')\n"
              "    db.executemany('INSERT INTO parameter_changes (run_id, host, name, original, value, changed, restored) "
              "VALUES (?,?,?,?,?,?,?)', [('r', 'h', 'x' * 3000, '1', '2', 1.0, 2.0)] * 200)\n"
              "    db.execute('COMMIT')\n"
              "    db.execute('PRAGMA wal_checkpoint(TRUNCATE)')\n")
    judged = 0
    for trial in range(4):
        path = filled_store(tmp_path / f"bench{trial}.sqlite")
        proc = subprocess.Popen([sys.executable, "-c", writer, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.3, 1.5))
        proc.kill()
        proc.wait()
        con = sqlite3.connect(path)
        sound = con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        if not sound:
            continue
        judged += 1
        code, err = cli("list", "--db", str(path))
        assert code == 0 and not any("damaged" in line or "truncated" in line for line in err), err
        code, err = cli("import", "fio", str(fio_file(tmp_path)), "--db", str(path))
        assert code == 0, err
    assert judged >= 1


def test_a_damaged_file_is_said_so_in_one_line(tmp_path):
    """SQLite's own word: a file cut short or overwritten in its middle is refused, one line, exit 2."""
    path = filled_store(tmp_path / "bench.sqlite", results=200)
    data = bytearray(path.read_bytes())
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[:rng.randrange(4096 * 2, len(data) - 4096)])
    middle = tmp_path / "scribbled.sqlite"
    start = rng.randrange(4096 * 2, len(data) - 8192)
    data[start:start + 4096] = rng.randbytes(4096)
    middle.write_bytes(bytes(data))
    for bad in (cut, middle):
        for argv in (["list"], ["import", "fio", str(fio_file(tmp_path))]):
            before = digest(bad)
            code, err = cli(*argv, "--db", str(bad))
            assert code == 2 and len(err) == 1 and "Traceback" not in err[0] and str(bad) in err[0], err
            assert digest(bad) == before


# --- case 8: a newer schema is refused before anything is written ----------------------------------

def _newer(path: Path, kind: str) -> None:
    db = sqlite3.connect(path)
    if kind == "user_version":
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + rng.randint(1, 1000)}")
    elif kind == "table":
        db.execute(f"CREATE TABLE predictions_{rng.randint(0, 999)} (id INTEGER PRIMARY KEY, x TEXT)")
    elif kind == "column":
        db.execute(f"ALTER TABLE results ADD COLUMN future_{rng.randint(0, 999)} REAL")
    elif kind == "not-null column":
        db.execute(f"ALTER TABLE matrix_runs ADD COLUMN future_{rng.randint(0, 999)} TEXT NOT NULL DEFAULT 'x'")
    db.commit()
    db.close()


@pytest.mark.parametrize("kind", ["user_version", "table", "column", "not-null column", "all of them"])
def test_a_newer_schema_is_refused_before_anything_is_written(kind, tmp_path):
    path = filled_store(tmp_path / "bench.sqlite")
    for one in (["user_version", "table", "column", "not-null column"] if kind == "all of them" else [kind]):
        _newer(path, one)
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    before = digest(path)
    for argv in (["import", "fio", str(fio_file(tmp_path))], ["annotate", "--retry"], ["restore"]):
        code, err = cli(*argv, "--db", str(path))
        assert code == 2, err
        assert len(err) == 1 and ("newer than this zfsnas-bench's" in err[0] or "does not know" in err[0]), err
        assert "nothing written" in err[0]
    assert digest(path) == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == version
    code, err = cli("list", "--db", str(path))     # reading it is harmless: what is known of it is shown
    assert code == 0, err


def test_a_newer_not_null_column_without_default_is_refused_too(tmp_path):
    """A newer release's table made with a NOT NULL column that our INSERTs would not fill."""
    path = tmp_path / "bench.sqlite"
    db = sqlite3.connect(path)
    for table, columns in TABLES.items():
        extra = (", future TEXT NOT NULL",) if table == "results" else ()
        db.execute(f"CREATE TABLE {table} ({', '.join(columns)}{''.join(extra)})")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    db.commit()
    db.close()
    before = digest(path)
    code, err = cli("import", "fio", str(fio_file(tmp_path)), "--db", str(path))
    assert code == 2 and len(err) == 1 and "column 'future' this zfsnas-bench does not know" in err[0], err
    assert digest(path) == before


# --- case 10: full disk, read-only, contention ------------------------------------------------------

@pytest.mark.parametrize("variation", range(3))
def test_a_full_disk_is_one_line_and_loses_nothing(variation, tmp_path):
    path = filled_store(tmp_path / "bench.sqlite")
    before = rows(path)
    big = fio_file(tmp_path, jobs=rng.randint(200, 900))
    limit = path.stat().st_size + rng.randint(0, 64 * 1024)
    code, err = cli("import", "fio", str(big), "--db", str(path), limit_bytes=limit)
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert "disk I/O error" in err[0] or "full" in err[0], err
    assert "cannot rollback" not in err[0] and "nothing" in err[0]
    assert rows(path) == before
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    code, err = cli("import", "fio", str(big), "--db", str(path))      # room again: it goes in
    assert code == 0, err


@pytest.mark.parametrize("limit", [0, 512, 4096, 12288, 24576])
def test_a_failed_create_leaves_no_file(limit, tmp_path):
    """The issue's 0-byte file, that every command then refused until deleted by hand: never made."""
    path = tmp_path / "new" / "deeper" / "bench.sqlite"
    code, err = cli("import", "fio", str(fio_file(tmp_path)), "--db", str(path), limit_bytes=limit)
    assert code == 2 and len(err) == 1 and f"cannot create {path}" in err[0], err
    assert not (tmp_path / "new").exists()            # neither the file nor the directories made for it
    code, err = cli("import", "fio", str(fio_file(tmp_path)), "--db", str(path))
    assert code == 0, err


def test_read_only_database_or_directory_is_one_line():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to write as one user and refuse another (nobody)")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        base.chmod(0o755)
        fio = fio_file(base)
        fio.chmod(0o644)
        for writable_file in (False, True):          # a file nobody may write; one they may, in a directory they may not
            directory = base / f"ro-{writable_file}"
            directory.mkdir()
            path = filled_store(directory / "bench.sqlite")
            directory.chmod(0o755)
            path.chmod(0o666 if writable_file else 0o644)
            before = digest(path)
            code, err = cli("import", "fio", str(fio), "--db", str(path), user="nobody")
            assert code == 2 and len(err) == 1 and "Traceback" not in err[0] and str(path) in err[0], err
            assert digest(path) == before


def _holder(path: Path) -> subprocess.Popen:
    """Another writer in the middle of its transaction, until a line comes on its stdin."""
    code = ("import sqlite3, sys\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('holding', flush=True)\n"
            "sys.stdin.readline()\n"
            "db.execute('COMMIT')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"holding"
    return proc


def test_contention_waits_saying_so_then_fails_in_one_line(tmp_path):
    path = filled_store(tmp_path / "bench.sqlite")
    before = rows(path)
    holder = _holder(path)
    try:
        code, err = cli("import", "fio", str(fio_file(tmp_path)), "--db", str(path), "--db-timeout", "1.5")
    finally:
        holder.kill()
        holder.wait()
    assert code == 2, err
    assert len(err) == 2 and "waiting up to 1.5 s (--db-timeout)" in err[0], err
    assert "still locked by another writer after 1.5 s (--db-timeout raises it)" in err[1]
    assert rows(path) == before
    holder = _holder(path)          # a writer that finishes while the import waits: it goes in then
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'exporter'}:{ROOT}"}
    proc = subprocess.Popen([sys.executable, "-c", CLI, "import", "fio", str(fio_file(tmp_path)), "--db", str(path),
                             "--db-timeout", "600"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    waiting = proc.stderr.readline()
    holder.communicate(b"done\n", timeout=60)
    assert proc.wait(timeout=600) == 0 and "waiting up to 600 s (--db-timeout)" in waiting, waiting
    assert len(rows(path)) == len(before) + 3


def test_four_concurrent_big_imports_all_go_in(tmp_path):
    """The issue's `database is locked` after 30 s: they wait for one another."""
    path = filled_store(tmp_path / "bench.sqlite")
    files = [fio_file(tmp_path, jobs=1000, prefix=f"p{n}-") for n in range(4)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'exporter'}:{ROOT}"}
    procs = [subprocess.Popen([sys.executable, "-c", CLI, "import", "fio", str(f), "--db", str(path)], cwd=ROOT,
                              env=env, stderr=subprocess.PIPE, text=True) for f in files]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0, 0, 0], results
    assert len(rows(path)) == 20 + 4000


# --- case 11: hostile names in the store, options in dataset names ----------------------------------

def test_names_from_the_store_never_inject_markdown(tmp_path, capsys):
    """Names stored by an older release (or by hand) with line breaks: the report's headings are its own."""
    path = tmp_path / "bench.sqlite"
    store = Store(path)
    store.start_matrix("r", "m", "tank/scratch", 4)
    names = []
    for i in range(6):
        text = "".join(rng.choice(("a", " ", "\n", "\r\n", "# ", "## ", "|", "\t", "\x1b")) for _ in range(12))
        names.append(text)
        config = configuration(matrix=f"m{i % 2}{text}", workload=f"w{text}", pool=f"tank{text}")
        store.record_result("r", i, config, started=1_780_000_000.0, finished=1_780_000_010.0,
                            figures=ResultFigures(throughput_bytes_per_second=1e8))
    store.close()
    text = markdown(sections(ReadOnlyStore(path).results()))
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[0] == "# zfsnas-bench report"
    assert all(line.startswith(("## m0", "## m1", "### m0", "### m1")) for line in headings[1:]), headings
    assert not any(ch in text.replace("\n", "") for ch in "\r\t\x1b")
    matrices = list(dict.fromkeys(r.matrix for r in ReadOnlyStore(path).results()))
    assert main(["compare", *matrices[:2], "--db", str(path)]) in (0, 1)      # A vs B: its head names both
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("#")] == [] or \
        all(line.startswith("### ") for line in out.splitlines() if line.startswith("#"))
    lines = out.splitlines()
    sides = [i for i, line in enumerate(lines) if line.startswith("A: ")]     # after the findings lines
    assert len(sides) == 1 and lines[sides[0] + 1].startswith("B: ")
    assert not any(ch in out for ch in "\r\t\x1b")


@pytest.mark.parametrize("argv", [["watch", "--duration", "1"], ["import", "fio", "FIO"]], ids=["watch", "import"])
@pytest.mark.parametrize("name", ["-r", "tank/-o", "-", "tank/x\n", "tank/a b"])
def test_a_dataset_that_reads_as_an_option_reaches_no_zfs(argv, name, fake_zfs, tmp_path):
    db = tmp_path / "bench.sqlite"
    argv = [str(fio_file(tmp_path)) if a == "FIO" else a for a in argv]
    assert main([*argv, f"--dataset={name}", *fake_zfs.flags(db)]) == 2
    assert fake_zfs.commands() == [] and not db.exists()
