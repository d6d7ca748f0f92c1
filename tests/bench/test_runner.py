"""The runner end to end against the fake zfs/zpool (tests/bench/fakezfs.py) with real fio."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from zfsnas.bench.cli import main
from zfsnas.bench.running.runner import RunError, RunLock

from .configs import configuration
from .grafana import FakeGrafana

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (./dev test installs it)")
TINY = """name = "tiny"
jobs = ["write-size", "seq-write"]
compression = ["off", "lz4"]
size = ["4M"]
runtime = 1
"""


@pytest.fixture
def matrix(tmp_path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture
def small(tmp_path) -> Path:
    """Two quick size-based cells, for tests about something else than the jobs."""
    path = tmp_path / "small.toml"
    path.write_text(TINY.replace('jobs = ["write-size", "seq-write"]', 'jobs = ["write-size"]'))
    return path


def run(fake, db, *args) -> int:
    return main(["run", *args, *fake.flags(db), "--mountpoint", str(fake.root / "tank/scratch"), "--no-direct"])


def rows(db) -> list[dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT * FROM results ORDER BY id")]


def changing(commands) -> list[list[str]]:
    return [c for c in commands if c[:2] not in (["zfs", "get"], ["zfs", "list"], ["zfs", "version"],
                                                 ["zpool", "status"], ["zpool", "get"])]


def test_matrix_runs_and_cleans_up(fake_zfs, matrix, tmp_path):
    db = tmp_path / "bench.sqlite"
    assert run(fake_zfs, db, str(matrix), "--dataset", "tank/scratch") == 0
    results = rows(db)
    assert [(r["workload"], r["compression"], r["status"]) for r in results] == [
        ("write-size", "off", "complete"), ("write-size", "lz4", "complete"),
        ("seq-write", "off", "complete"), ("seq-write", "lz4", "complete")]
    for r in results:
        assert r["throughput_bytes_per_second"] > 0 and r["duration_seconds"] > 0
        assert r["used_bytes"] > 0 and r["logicalused_bytes"] >= 4 << 20 and r["compressratio"] > 0
        assert 0 <= r["cpu_busy_ratio"] <= 1 and r["pool"] == "tank" and r["size"] == "4M"
        cpu = [r[f"cpu_{k}_seconds"] for k in ("user", "system", "iowait", "idle")]
        assert all(v >= 0 for v in cpu) and sum(cpu) > 0
        config = json.loads(r["config"])
        assert (config["workload"], config["direct"], config["layout"]["vdevs"], config["layout"]["ashift"]) == (
            r["workload"], "0", "data:disk:1", "12")
        assert json.loads(r["properties"])["compression"] == r["compression"]
        assert json.loads(r["fio_json"])["fio version"].startswith("fio-")
    assert results[0]["bytes"] == 4 << 20
    # Only the run's own children were created and destroyed; nothing else changed.
    assert set(fake_zfs.datasets()) == {"tank", "tank/scratch", "tank/scratchX", "tank/home"}
    changed = changing(fake_zfs.commands())
    assert [c[:2] for c in changed] == [["zfs", "create"], ["zpool", "sync"], ["zfs", "destroy"]] * 4
    run_id = json.loads(results[0]["properties"])["org.zfsnas:bench-run"]
    for c in changed:
        if c[0] == "zfs":
            assert c[-1].startswith(f"tank/scratch/zfsnas-bench-{run_id}-")
    con = sqlite3.connect(db)
    assert con.execute("SELECT status, cells, zfs_version FROM matrix_runs").fetchone() == (
        "complete", 4, "zfs-2.3.2-fake zfs-kmod-2.3.2-fake")


@pytest.mark.parametrize("dataset, reason", [
    ("tank/home", "not marked as scratch"),
    ("tank/scratchX", "not marked as scratch"),
    ("tank/nothere", "does not exist"),
    ("tank", "pool's root"),
    ("tank/scratch@s", "snapshot"),
    ("tank/scratch/../home", "'..'"),
])
def test_refused_before_any_change(fake_zfs, matrix, tmp_path, caplog, dataset, reason):
    db = tmp_path / "bench.sqlite"
    assert run(fake_zfs, db, str(matrix), "--dataset", dataset) == 2
    assert reason in caplog.text
    assert changing(fake_zfs.commands()) == []
    assert not db.exists() or rows(db) == []


def test_inherited_mark_is_refused(fake_zfs, matrix, tmp_path, caplog):
    state = fake_zfs.read()
    state["datasets"]["tank/scratch/sub"] = {"type": "filesystem", "props": {}}
    fake_zfs.write(state)
    assert run(fake_zfs, tmp_path / "db", str(matrix), "--dataset", "tank/scratch/sub") == 2
    assert "inherited from tank/scratch" in caplog.text
    assert changing(fake_zfs.commands()) == []


def test_a_clone_is_refused(fake_zfs, matrix, tmp_path, caplog):
    state = fake_zfs.read()
    state["datasets"]["tank/scratch"]["props"]["origin"] = "tank/base@s"
    fake_zfs.write(state)
    assert run(fake_zfs, tmp_path / "db", str(matrix), "--dataset", "tank/scratch") == 2
    assert "clone of tank/base@s" in caplog.text


def test_free_space_checked_first(fake_zfs, matrix, tmp_path, caplog):
    state = fake_zfs.read()
    state["available"] = 1 << 20
    fake_zfs.write(state)
    assert run(fake_zfs, tmp_path / "db", str(matrix), "--dataset", "tank/scratch") == 2
    assert "needs 0.0 GiB" in caplog.text or "available" in caplog.text
    assert changing(fake_zfs.commands()) == []


def test_lock_refuses_a_second_run(fake_zfs, matrix, tmp_path, caplog):
    db = tmp_path / "bench.sqlite"
    with RunLock(f"{db}.lock"):
        assert run(fake_zfs, db, str(matrix), "--dataset", "tank/scratch") == 2
        with pytest.raises(RunError, match="another benchmark is running"):
            RunLock(f"{db}.lock").__enter__()
    assert "another benchmark is running" in caplog.text
    assert changing(fake_zfs.commands()) == []


def test_keep_leaves_children(fake_zfs, small, tmp_path):
    assert run(fake_zfs, tmp_path / "db", str(small), "--dataset", "tank/scratch", "--keep") == 0
    kept = [d for d in fake_zfs.datasets() if d.startswith("tank/scratch/zfsnas-bench-")]
    assert len(kept) == 2
    assert all((fake_zfs.root / d / "fio.dat").stat().st_size == 4 << 20 for d in kept)


def test_copy_job_copies_the_corpus(fake_zfs, tmp_path):
    corpus = tmp_path / "fits"
    (corpus / "night1").mkdir(parents=True)
    for i in range(3):
        (corpus / "night1" / f"m31_{i}.fits").write_bytes(os.urandom(300_000) + bytes(200_000))
    path = tmp_path / "copy.toml"
    path.write_text(f'job = "copy"\ncorpus = "{corpus}"\nsize = ["all", "600K"]\ncompression = ["zstd-1"]\n')
    db = tmp_path / "db"
    assert run(fake_zfs, db, str(path), "--dataset", "tank/scratch", "--keep") == 0
    whole, part = rows(db)
    assert whole["bytes"] == 1_500_000 and whole["size"] == "all"
    assert part["bytes"] == 1_000_000        # whole files until 600K was reached
    children = sorted(d for d in fake_zfs.datasets() if d.startswith("tank/scratch/zfsnas-bench-"))
    copied = fake_zfs.root / children[0] / "corpus" / "night1" / "m31_2.fits"
    assert copied.read_bytes() == (corpus / "night1" / "m31_2.fits").read_bytes()


def test_annotations_during_a_run_and_grafana_down(fake_zfs, small, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("glsa_abc\n")
    db = tmp_path / "db"
    with FakeGrafana("glsa_abc") as grafana:
        assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch", "--grafana-url", grafana.url,
                   "--grafana-token-file", str(token_file)) == 0
        assert len(grafana.annotations) == 2
        for region in grafana.annotations.values():
            assert region["timeEnd"] > region["time"] and "MB/s" in region["text"] and "complete" in region["text"]
            assert "zfsnas-bench" in region["tags"] and any(t.startswith("run:") for t in region["tags"])
        assert {r["annotation_id"] for r in rows(db)} == set(grafana.annotations)
        url = grafana.url
    # Grafana is down now: the run goes on, the regions are queued, `annotate --retry` sends them later.
    assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch", "--grafana-url", url,
               "--grafana-token-file", str(token_file), "--grafana-timeout", "1") == 0
    assert [r["status"] for r in rows(db)] == ["complete"] * 4
    with FakeGrafana("glsa_abc") as grafana:
        assert main(["annotate", "--retry", "--db", str(db), "--grafana-url", grafana.url,
                     "--grafana-token-file", str(token_file)]) == 0
        assert len(grafana.annotations) == 2
        assert all("timeEnd" in a for a in grafana.annotations.values())
    # Down again for a run; the next run with Grafana back sends that run's queue before its own.
    assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch", "--grafana-url", url,
               "--grafana-token-file", str(token_file), "--grafana-timeout", "1") == 0
    with FakeGrafana("glsa_abc") as grafana:
        assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch", "--grafana-url", grafana.url,
                   "--grafana-token-file", str(token_file)) == 0
        assert len(grafana.annotations) == 4
        assert sqlite3.connect(db).execute("SELECT count(*) FROM annotation_queue WHERE sent IS NULL").fetchone() == (0,)
    assert "glsa_abc" not in "\n".join(sqlite3.connect(db).iterdump())


def _start_in_background(fake, tmp_path, matrix: str):
    """`zfsnas-bench run` in its own process, returned once fio has started writing."""
    path = tmp_path / "long.toml"
    path.write_text(matrix)
    db = tmp_path / "db"
    argv = [sys.executable, "-m", "zfsnas.bench.cli", "run", str(path), "--dataset", "tank/scratch",
            *fake.flags(db), "--mountpoint", str(fake.root / "tank/scratch"), "--no-direct"]
    proc = subprocess.Popen(argv, env={**os.environ, **fake.env}, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not _fio_file(fake):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    return proc, db


def _fio_file(fake) -> list[Path]:
    return list(fake.root.glob("tank/scratch/zfsnas-bench-*/fio.dat"))


def test_sigterm_stops_fio_destroys_the_child_and_records_aborted(fake_zfs, tmp_path):
    proc, db = _start_in_background(fake_zfs, tmp_path,
                                    'job = "seq-write"\nsize = "4M"\nruntime = 60\ncompression = ["lz4", "off"]\n')
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    assert time.monotonic() - started < 20        # fio was stopped, not waited for (runtime 60 s)
    assert [r["status"] for r in rows(db)] == ["aborted"]   # the second cell never started
    assert sqlite3.connect(db).execute("SELECT status FROM matrix_runs").fetchone()[0] == "aborted"
    assert not [d for d in fake_zfs.datasets() if d.startswith("tank/scratch/zfsnas-bench-")]
    assert not _fio_file(fake_zfs)


def test_sigkill_then_next_run_marks_incomplete(fake_zfs, tmp_path, small, caplog):
    proc, db = _start_in_background(fake_zfs, tmp_path, 'job = "seq-write"\nsize = "4M"\nruntime = 3\n')
    proc.kill()
    proc.wait()
    assert [r["status"] for r in rows(db)] == ["running"]
    [left] = [d for d in fake_zfs.datasets() if d.startswith("tank/scratch/zfsnas-bench-")]
    dead_run = rows(db)[0]["run_id"]
    outputs = Path(tempfile.gettempdir()) / f"zfsnas-bench-{dead_run}"
    assert outputs.is_dir()                          # its fio outputs stayed behind in /tmp
    key = Path(tempfile.gettempdir()) / f"zfsnas-bench-key-{dead_run}-test"
    key.write_text("00")                             # as an encrypted cell's key file would have
    # A child someone else marked with a run id we do not know stays untouched.
    state = fake_zfs.read()
    state["datasets"]["tank/scratch/zfsnas-bench-other-1"] = {
        "type": "filesystem", "props": {"org.zfsnas:bench-run": "19990101T000000-0000"}}
    fake_zfs.write(state)
    assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch") == 0
    statuses = [r["status"] for r in rows(db)]
    assert statuses == ["incomplete"] + ["complete"] * 2
    assert left not in fake_zfs.datasets()          # the dead run's child was cleaned up
    assert "tank/scratch/zfsnas-bench-other-1" in fake_zfs.datasets()
    assert not outputs.exists() and not key.exists()  # and its files in /tmp, each said
    assert f"removed {outputs}, the fio outputs of run {dead_run} that died" in caplog.text
    assert f"removed {key}, the encryption key file of run {dead_run} that died" in caplog.text
    assert f"destroyed {left}, left behind by a run that died" in caplog.text


def test_init_marks_after_confirmation(fake_zfs, tmp_path, monkeypatch, capsys, caplog):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("no\n"))
    assert main(["init", "tank/home", *fake_zfs.flags(tmp_path / "db")]) == 1
    assert "org.zfsnas:scratch" not in fake_zfs.datasets()["tank/home"]["props"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("yes\n"))
    assert main(["init", "tank/home", *fake_zfs.flags(tmp_path / "db")]) == 0
    assert fake_zfs.datasets()["tank/home"]["props"]["org.zfsnas:scratch"].startswith("init-")
    assert main(["init", "tank", "--yes", *fake_zfs.flags(tmp_path / "db")]) == 2
    assert main(["init", "tank/nothere", "--yes", *fake_zfs.flags(tmp_path / "db")]) == 2
    # A dataset that does not exist is refused before the question: nothing is read from stdin.
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.StringIO("yes\n"))
    assert main(["init", "tank/nope", *fake_zfs.flags(tmp_path / "db")]) == 2
    assert "'tank/nope': dataset does not exist" in caplog.text and "Type 'yes'" not in capsys.readouterr().err
    assert sys.stdin.read() == "yes\n"


def test_an_unknown_matrix_lists_the_shipped_ones(caplog):
    from zfsnas.bench.cli import default_jobs_dir

    assert main(["plan", "nonexistent"]) == 2
    err = caplog.text
    shipped = sorted(p.stem for p in (default_jobs_dir() / "matrices").glob("*.toml"))
    assert len(shipped) >= 8 and f"no matrix 'nonexistent': the shipped ones are {', '.join(shipped)}" in err


def test_list_and_report(fake_zfs, small, tmp_path, capsys):
    db = tmp_path / "db"
    assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch") == 0
    capsys.readouterr()
    assert main(["list", "--db", str(db)]) == 0
    listing = capsys.readouterr().out.splitlines()
    config_id = rows(db)[0]["config_id"]
    assert len(listing) == 3 and listing[1].split("\t")[2:7] == ["complete", "tiny", "write-size", config_id, "off"]
    charts = tmp_path / "charts"
    assert main(["report", "--db", str(db), "--png", str(charts)]) == 0
    out = capsys.readouterr().out.splitlines()
    findings = out[:out.index("")]            # what the run found comes first
    assert findings and all(line.startswith("- ") for line in findings)
    assert findings[0].startswith("- compression lz4 vs off: ")
    table = out[out.index("# zfsnas-bench report"):]
    assert table[:5] == ["# zfsnas-bench report", "", "## tiny on tank", "", "### tiny: the findings' evidence"]
    table = table[table.index("### tiny: configurations"):]
    assert table[2].startswith("| config | compression | runs | MB/s | MiB/s | IOPS | latency us | wall s | ratio |")
    assert table[4].startswith(f"| {config_id} | off | 1 | ")
    # Two compressions of one write: the throughput, space, CPU and Pareto charts.
    assert sorted(p.name for p in charts.iterdir()) == ["bench-tiny-cpu.png", "bench-tiny-pareto.png", "bench-tiny-space.png",
                                                         "bench-tiny-throughput.png"]
    assert (charts / "bench-tiny-throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["report", "--db", str(db), "--format", "csv"]) == 0
    csv_lines = capsys.readouterr().out.splitlines()
    assert [line[2:] for line in csv_lines[:len(findings)]] == [line[2:] for line in findings]   # `# ` comments
    csv_lines = csv_lines[csv_lines.index("tiny: configurations"):]
    assert csv_lines[1].startswith("config,compression,runs,MB/s,MiB/s,")
    assert csv_lines[2].startswith(f"{config_id},off,1,")


def test_mountpoint_comes_from_the_scratch_dataset(fake_zfs, small, tmp_path):
    db = tmp_path / "db"
    assert main(["run", str(small), "--dataset", "tank/scratch", *fake_zfs.flags(db), "--no-direct", "--keep"]) == 0
    kept = [d for d in fake_zfs.datasets() if d.startswith("tank/scratch/zfsnas-bench-")]
    assert all((fake_zfs.root / d / "fio.dat").exists() for d in kept) and len(kept) == 2


def test_a_failing_job_is_recorded_and_its_child_destroyed(fake_zfs, tmp_path, caplog):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bad.fio").write_text("[bad]\nfilename=${ZFSNAS_FILE}\nsize=${ZFSNAS_SIZE}\nrw=sideways\n")
    path = tmp_path / "bad.toml"
    path.write_text('job = "bad"\nsize = "4M"\n')
    db = tmp_path / "db"
    code = main(["run", str(path), "--dataset", "tank/scratch", *fake_zfs.flags(db), "--jobs-dir", str(jobs),
                 "--no-direct"])
    assert code == 1
    [row] = rows(db)
    assert row["status"] == "failed" and "fio" in row["error"]
    assert row["throughput_bytes_per_second"] is None
    assert not [d for d in fake_zfs.datasets() if d.startswith("tank/scratch/zfsnas-bench-")]
    assert "cell 1" in caplog.text


def test_a_missing_corpus_is_refused_before_any_change(fake_zfs, tmp_path, caplog):
    path = tmp_path / "copy.toml"
    path.write_text(f'job = "copy"\ncorpus = "{tmp_path}/nothere"\nsize = ["all"]\n')
    assert run(fake_zfs, tmp_path / "db", str(path), "--dataset", "tank/scratch") == 2
    assert "is not a directory (give your files with --corpus DIR)" in caplog.text
    assert changing(fake_zfs.commands()) == []


def test_list_shows_stale_rows_only_when_no_run_holds_the_lock(tmp_path, capsys):
    from zfsnas.store.database import Store

    db = tmp_path / "db"
    store = Store(db)
    store.start_matrix("r1", "m", "tank/scratch", 1)
    store.start_result("r1", 1, configuration(), 1, "c")
    with RunLock(f"{db}.lock"):            # a run in progress
        assert main(["list", "--db", str(db)]) == 0
        assert "\trunning\t" in capsys.readouterr().out
    assert main(["list", "--db", str(db)]) == 0  # nobody holds the lock: the row's run is gone
    assert "\tincomplete\t" in capsys.readouterr().out
    # ... as read: `list` wrote nothing; the next run records it
    assert store.results(status="running") and not store.results(status="incomplete")


def test_a_read_cell_times_only_its_read(fake_zfs, tmp_path):
    """The prefill write and its sync are a figure of their own, outside the read's seconds and bytes."""
    path = tmp_path / "read.toml"
    path.write_text('workload = "seq-read"\nsize = "32M"\nruntime = 1\n')
    db = tmp_path / "db"
    assert run(fake_zfs, db, str(path), "--dataset", "tank/scratch") == 0
    [row] = rows(db)
    assert row["status"] == "complete" and row["prefill_seconds"] > 0
    assert row["duration_seconds"] >= 0.9               # fio's 1 s of reading ...
    fio = json.loads(row["fio_json"])
    assert [j["jobname"] for j in fio["jobs"]] == ["seq-read"] and fio["jobs"][0]["write"]["io_bytes"] == 0
    assert row["bytes"] == fio["jobs"][0]["read"]["io_bytes"]   # ... and only its bytes: no prefill in them
    kinds = [c[:2] for c in changing(fake_zfs.commands())]
    assert kinds == [["zfs", "create"], ["zpool", "sync"], ["zpool", "sync"], ["zfs", "destroy"]]


def test_scratch_mark_removed_mid_run_stops_before_the_next_cell(fake_zfs, matrix, tmp_path, caplog):
    """4 cells; the mark goes right after cell 1 destroyed its child: nothing more is created,
    written or destroyed, the run is `aborted` with the reason, the exit status non-zero."""
    state = fake_zfs.read()
    state["hooks"] = [{"after": ["zfs", "destroy"], "unset": ["tank/scratch", "org.zfsnas:scratch"]}]
    fake_zfs.write(state)
    db = tmp_path / "bench.sqlite"
    assert run(fake_zfs, db, str(matrix), "--dataset", "tank/scratch") == 2
    commands = fake_zfs.commands()
    [child] = {c[-1] for c in commands if c[:2] == ["zfs", "create"]}
    scratch_get = ["zfs", "get", "-Hp", "-o", "property,value,source",
                   "type,origin,available,mountpoint,org.zfsnas:scratch", "tank/scratch"]
    # The CLI's guard, the check before cell 1, cell 1 itself, the check before cell 2, and nothing else.
    assert [c[:2] if c != scratch_get else "scratch check" for c in commands
            if c[:2] not in (["zfs", "version"], ["zpool", "status"], ["zpool", "get"])] == [
        "scratch check", "scratch check",
        ["zfs", "get"], ["zfs", "create"], ["zfs", "get"], ["zpool", "sync"], ["zfs", "get"],
        ["zfs", "get"], ["zfs", "destroy"],
        "scratch check"]
    assert changing(commands) == [c for c in commands if c[:2] in (["zfs", "create"], ["zpool", "sync"],
                                                                   ["zfs", "destroy"])]
    assert [c[-1] for c in changing(commands)] == [child, "tank", child]
    assert list(fake_zfs.root.glob("tank/scratch/zfsnas-bench-*")) == []
    reason = ("tank/scratch no longer passes the scratch check ('tank/scratch' is not marked as scratch; "
              "run `zfsnas-bench init tank/scratch` first): run stopped")
    assert [(r["cell"], r["status"], r["error"]) for r in rows(db)] == [(1, "complete", None), (2, "aborted", reason)]
    assert sqlite3.connect(db).execute("SELECT status, cells FROM matrix_runs").fetchone() == ("aborted", 4)
    assert f"before cell 2: {reason}" in caplog.text


def _fio_processes(marker: str) -> list[int]:
    """Live fio processes (main and workers) whose command line names `marker` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if comm == "fio" and marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_sigkill_of_the_runner_kills_fio(fake_zfs, tmp_path):
    """The runner dies by SIGKILL in the middle of a 60 s fio job: no fio of that run survives it."""
    proc, db = _start_in_background(fake_zfs, tmp_path, 'job = "seq-write"\nsize = "4M"\nruntime = 60\n')
    run_id = sqlite3.connect(db).execute("SELECT id FROM matrix_runs").fetchone()[0]
    marker = f"zfsnas-bench-{run_id}"           # fio's --output names the run's results directory
    deadline = time.monotonic() + 10
    while len(_fio_processes(marker)) < 2:        # fio and its job worker (which calls setsid())
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while _fio_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _fio_processes(marker) == []


def test_next_run_stops_leftover_fio_of_a_dead_run_only(fake_zfs, tmp_path, small, caplog):
    """A fio that a dead run of this database left (marked ZFSNAS_BENCH_RUN=<its id>) is stopped
    first thing by the next run; an unrelated fio (no mark, another directory) runs on."""
    from zfsnas.store.database import Store

    db = tmp_path / "db"
    store = Store(db)
    store.start_matrix("20261124T000000-dead", "m", "tank/scratch", 1)
    store.close()
    argv = ["fio", "--name=leftover", "--filename=fio.dat", "--size=4M", "--rw=write", "--time_based",
            "--runtime=60"]
    ours_dir, other_dir = fake_zfs.root / "tank/scratch", tmp_path / "other"
    other_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ZFSNAS_BENCH_RUN"}
    leftover = subprocess.Popen(argv, cwd=ours_dir, env={**env, "ZFSNAS_BENCH_RUN": "20261124T000000-dead"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    unrelated = subprocess.Popen(argv, cwd=other_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not ((ours_dir / "fio.dat").exists() and (other_dir / "fio.dat").exists()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert run(fake_zfs, db, str(small), "--dataset", "tank/scratch") == 0
        assert leftover.wait(timeout=10) != 0            # stopped by the run, not ended by itself
        assert unrelated.poll() is None
        assert f"stopped a process left by a run that died: pid {leftover.pid} of run 20261124T000000-dead: fio " \
               f"--name=leftover" in caplog.text
        assert f"pid {unrelated.pid} " not in caplog.text
        assert [r["status"] for r in rows(db)] == ["complete", "complete"]
    finally:
        for p in (leftover, unrelated):
            p.kill()
            p.wait()


def test_the_token_reaches_grafana_but_no_child(fake_zfs, small, tmp_path, monkeypatch):
    """$ZFSNAS_GRAFANA_TOKEN authenticates the annotations; zfs, zpool and fio (real children that
    dump their environment) never see it, and see everything else."""
    token = "glsa_fromTheEnvironment_0123456789"
    dumps = tmp_path / "env"
    dumps.mkdir()
    wrap = tmp_path / "wrap"
    wrap.write_text(f'#!/bin/sh\nenv > "{dumps}/$1.$$"\nshift\nexec "$@"\n')
    wrap.chmod(0o755)
    monkeypatch.setenv("ZFSNAS_GRAFANA_TOKEN", token)
    monkeypatch.setenv("ZFSNAS_TEST_KEPT", "still-here")
    db = tmp_path / "db"
    with FakeGrafana(token) as grafana:
        flags = ["--db", str(db), "--zfs.command-prefix", f"{wrap} zfs {fake_zfs.prefix}",
                 "--jobs-dir", str(fake_zfs.flags(db)[-1]), "--fio", f"{wrap}-fio"]
        (tmp_path / "wrap-fio").write_text(f'#!/bin/sh\nexec {wrap} fio fio "$@"\n')
        (tmp_path / "wrap-fio").chmod(0o755)
        assert main(["run", str(small), "--dataset", "tank/scratch", *flags, "--no-direct",
                     "--grafana-url", grafana.url]) == 0
        assert len(grafana.annotations) == 2
        assert all(h["Authorization"] == f"Bearer {token}" for _, _, h, _ in grafana.requests)
    children = {name.name.split(".")[0]: 0 for name in dumps.iterdir()}
    for dump in dumps.iterdir():
        children[dump.name.split(".")[0]] += 1
        env = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
        assert "ZFSNAS_GRAFANA_TOKEN" not in env and token not in dump.read_text()
        assert env["ZFSNAS_TEST_KEPT"] == "still-here" and env["FAKEZFS_STATE"] == str(fake_zfs.state)
    assert children["zfs"] >= 10 and children["fio"] == 3     # fio --version, and one job per cell
