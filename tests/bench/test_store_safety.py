"""The store is safe to read: list, report, recommend and compare never write to it (the database's
bytes and its directory are the same after, as root and as a user who may only read), refuse to
write a report over it, and every bad --db, output or option is one line, exit status 2, nothing
changed. restore and annotate without a database create none."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from zfsnas.bench.cli import main
from zfsnas.store.database import ReadOnlyStore, Store, StoreError

from .seeds import seeded_store
from .test_store import release0

ROOT = Path(__file__).resolve().parents[2]
READS = (["list"], ["list", "--all"], ["report"], ["report", "--format", "csv"], ["report", "--format", "html"],
         ["report", "--matrix", "fits-copy"], ["recommend", "fits-copy"], ["compare", "lab-seq-1", "lab-seq-3"],
         ["compare", "--by", "compression", "fio-seq"])


def state(directory: Path) -> dict[str, str]:
    """Every file under the directory and its SHA-256 (a directory as `dir`): the database and
    anything beside it."""
    return {str(p.relative_to(directory)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*"))}


@pytest.fixture
def db(tmp_path) -> Path:
    directory = tmp_path / "store"
    directory.mkdir()
    path = directory / "bench.sqlite"
    seeded_store(path).close()
    assert sorted(p.name for p in directory.iterdir()) == ["bench.sqlite"]   # the writer closed it: no -wal/-shm
    return path


@pytest.mark.parametrize("argv", READS, ids=" ".join)
def test_read_only_commands_change_nothing(db, argv, capsys):
    before = state(db.parent)
    assert main([*argv, "--db", str(db)]) in (0, 1)
    assert capsys.readouterr().out
    assert state(db.parent) == before


def test_an_old_schema_is_read_as_it_is_and_left_alone(tmp_path, capsys):
    path = release0(tmp_path)
    before = state(tmp_path)
    assert main(["list", "--db", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and "\tcomplete\t" in out[1]       # the header and its four rows
    assert main(["report", "--db", str(path)]) == 0
    assert state(tmp_path) == before
    con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 0          # not migrated
    con.close()


def test_report_refuses_to_overwrite_the_database_it_reads(db, caplog):
    before = state(db.parent)
    for extra in ([], ["--force"]):
        assert main(["report", "--db", str(db), "-o", str(db), *extra]) == 2
    assert "is the database being read: refusing to overwrite it" in caplog.text
    assert state(db.parent) == before
    assert len(ReadOnlyStore(db).results()) > 0


def test_report_output_file_rules(db, tmp_path, caplog, capsys):
    other = tmp_path / "other.sqlite"
    shutil.copy(db, other)
    assert main(["report", "--db", str(db), "-o", str(other), "--force"]) == 2
    assert f"{other} is an SQLite database: refusing to overwrite it (--force does not apply)" in caplog.text
    existing = tmp_path / "report.md"
    existing.write_text("keep me\n")
    assert main(["report", "--db", str(db), "-o", str(existing)]) == 2
    assert existing.read_text() == "keep me\n" and "exists: refusing to overwrite it (--force replaces it)" in caplog.text
    assert main(["report", "--db", str(db), "-o", str(existing), "--force"]) == 0
    assert "\n# zfsnas-bench report\n" in existing.read_text()
    assert main(["report", "--db", str(db), "-o", str(tmp_path / "missing" / "r.md")]) == 2
    assert f"{tmp_path / 'missing'} does not exist: create it first" in caplog.text
    assert main(["report", "--db", str(db), "--png", str(existing)]) == 2
    assert "exists and is not a directory: --png/--svg take a directory" in caplog.text
    assert "\n# zfsnas-bench report\n" in existing.read_text()
    assert not list(tmp_path.glob(".report.md.*"))       # no temporary file left behind
    capsys.readouterr()


def bad(kind: str, tmp_path: Path, db: Path) -> Path:
    path = tmp_path / f"bad-{kind}"
    if kind == "text":
        path.write_text("id,matrix\n1,fits-copy\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(db.read_bytes()[:6000])
    elif kind == "directory":
        path.mkdir()
    elif kind == "other-sqlite":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (x)")
        con.close()
    return path


@pytest.mark.parametrize("kind", ["missing", "text", "empty", "truncated", "directory", "other-sqlite"])
@pytest.mark.parametrize("command", [["list"], ["report"], ["recommend", "fits-copy"], ["compare", "a", "b"]],
                         ids=" ".join)
def test_a_bad_database_is_one_line_and_exit_2(db, tmp_path, kind, command):
    path = bad(kind, tmp_path, db)
    before = state(tmp_path)
    code = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, *command, "--db", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(path) in proc.stderr
    assert state(tmp_path) == before


def test_writers_refuse_a_bad_database_too(db, tmp_path):
    for kind in ("text", "truncated", "directory"):
        path = bad(kind, tmp_path, db)
        with pytest.raises(StoreError, match=str(path)):
            Store(path)


def test_restore_and_annotate_create_no_database(tmp_path, capsys):
    path = tmp_path / "none" / "bench.sqlite"
    assert main(["restore", "--db", str(path)]) == 0
    assert main(["annotate", "--retry", "--db", str(path)]) == 0
    err = capsys.readouterr().err
    assert "nothing to restore" in err and "no annotation is queued" in err
    assert not path.parent.exists()


def test_nothing_to_answer_with_says_what_exists(db, tmp_path, caplog):
    assert main(["report", "--matrix", "fits-cpy", "--db", str(db)]) == 2
    assert "no complete results of matrix 'fits-cpy'" in caplog.text and "it has: fits-copy, iso-rsync, fio-seq, " \
           "cdm-zvol" in caplog.text
    empty = tmp_path / "empty.sqlite"
    Store(empty).close()
    for argv in (["report"], ["recommend", "x"]):
        assert main([*argv, "--db", str(empty)]) == 2
    assert "holds no complete result yet" in caplog.text


@pytest.mark.parametrize(("argv", "says"), [
    (["compare", "a", "b", "--max-drop", "-1"], "--max-drop: '-1' is not between 0 and 1"),
    (["compare", "a", "b", "--max-drop", "1.5"], "is not between 0 and 1"),
    (["recommend", "m", "--speed-weight", "2"], "--speed-weight: '2' is not between 0 and 1"),
    (["recommend", "m", "--speed-weight", "nan"], "is not between 0 and 1"),
    (["run", "smoke", "--size-scale", "0"], "--size-scale: '0' is not a number above 0"),
    (["run", "smoke", "--time-scale", "-2"], "is not a number above 0"),
    (["plan", "smoke", "--dirty-data-max", "0"], "is not a whole number above 0"),
    (["list", "--zfs.command-timeout", "inf"], "is not a number above 0"),
    (["run", "smoke", "--set", "ram"], "expected KEY=VALUE"),
])
def test_numbers_and_labels_are_range_checked_in_one_line(argv, says, tmp_path):
    code = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, *argv, "--db", str(tmp_path / "db")], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and says in proc.stderr, proc.stderr
    assert not (tmp_path / "db").exists()


def test_a_user_who_may_only_read_gets_answers_and_changes_nothing():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to write as one user and read as another (nobody)")
    with tempfile.TemporaryDirectory() as tmp:     # /tmp/<x> 0755 root: nobody may list it, not write
        read_as_nobody(Path(tmp))


def read_as_nobody(tmp: Path) -> None:
    directory = tmp / "ro"
    directory.mkdir()
    path = directory / "bench.sqlite"
    seeded_store(path).close()
    for p in (tmp, directory):
        p.chmod(0o755)
    path.chmod(0o644)
    before = state(directory)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "exporter")}
    # The system's python: a virtualenv's may point into root's home.
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    for argv in (["list"], ["report"], ["recommend", "fits-copy"], ["compare", "lab-seq-1", "lab-seq-3"]):
        proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", python, "-m",
                               "zfsnas.bench.cli", *argv, "--db", str(path)], capture_output=True, text=True,
                              timeout=120, env=env, cwd=ROOT, check=False)
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout
    assert state(directory) == before
