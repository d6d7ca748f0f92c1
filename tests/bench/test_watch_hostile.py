"""`zfsnas-bench watch` when things go wrong (issue 43, cases 4, 5, 7): a vanished or garbled
dataset, a failing `zfs get`, `kill -9`, counters that go backwards, a watch of thousands of
samples. Every result it started ends: `failed` with the bytes it saw (exit 2, one line), or
`complete` over the window it could measure; a dead watch's rows read `incomplete` and the exporter
does not call them running; memory does not grow with the watch's length."""

from __future__ import annotations

import gc
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from zfsnas.bench.cli import main
from zfsnas.bench.client import watch as watch_module
from zfsnas.store.database import ReadOnlyStore, StoreError
from zfsnas.store.reader import read_bench_db

from .test_client_experiments import MiB, Watching, set_counters, sync_txg, tree

ROOT = Path(__file__).resolve().parents[2]
rng = random.Random(43)


def lz4(fake_zfs) -> Path:
    state = fake_zfs.read()
    state["datasets"]["tank/lz4"] = {"type": "filesystem", "props": {"compression": "lz4"}}
    fake_zfs.write(state)
    files = fake_zfs.root / "tank/lz4"
    files.mkdir(parents=True, exist_ok=True)
    return files


def running(db: Path) -> bool:
    try:
        return bool(ReadOnlyStore(db).results(status="running"))
    except StoreError:
        return False


def wait_for(what, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "not within its budget"
        time.sleep(0.05)


def objset(root: Path) -> Path:
    return root / "proc/spl/kstat/zfs/tank/objset-0x53"


def base_counters(path: Path) -> tuple[int, int]:
    text = path.read_text()
    return (int(re.search(r"^nwritten\s+4\s+(\d+)$", text, re.M)[1]),   # type: ignore[index]
            int(re.search(r"^writes\s+4\s+(\d+)$", text, re.M)[1]))     # type: ignore[index]


class Breaker(threading.Thread):
    """A client that writes `chunks` MiB once the watch samples (`ready` is set), then does `then`
    to the dataset."""

    def __init__(self, root: Path, ready: threading.Event, chunks: int, then):
        super().__init__(daemon=True)
        self.root, self.ready, self.chunks, self.then = root, ready, chunks, then

    def run(self) -> None:
        assert self.ready.wait(120), "the watch never started sampling"
        path = objset(self.root)
        written, writes = base_counters(path)
        for i in range(1, self.chunks + 1):
            set_counters(path, written + i * MiB, writes + i)
            time.sleep(0.25)       # more than the watch's 0.1 s step: each chunk seen on its own
        time.sleep(1.0)            # the last one read, even on a busy machine
        self.then(path)


def kept(row, chunks: int) -> bool:
    """What a broken watch kept: the whole MiB it saw of the `chunks` written (on a busy machine its
    last read may come after a chunk landed)."""
    return row.bytes is not None and 0 < row.bytes <= chunks * MiB and row.bytes % MiB == 0


def _vanish(path: Path) -> None:
    path.unlink()


def _garble(path: Path) -> None:
    junk = "".join(rng.choice("abc 0123456789\n\t-") for _ in range(rng.randint(1, 400)))
    path.write_text(rng.choice((junk, "", "12 1 0x01 7 2160 1 2\nname type data\nnwritten 4 12abc\n")))


def _past_uint64(path: Path) -> None:
    text = path.read_text()
    huge = str(rng.randint(1 << 64, 1 << 200))
    path.write_text(re.sub(r"^(nwritten\s+4\s+)\d+$", lambda m: m[1] + huge, text, flags=re.M))


@pytest.mark.parametrize("then, says", [(_vanish, "its objset counters cannot be read"),
                                        (_garble, "its objset counters cannot be read"),
                                        (_past_uint64, "are not uint64")], ids=["vanished", "garbled", "past-uint64"])
def test_a_watch_that_cannot_go_on_ends_failed_with_the_bytes_it_saw(then, says, fake_zfs, tmp_path, caplog):
    root = tree(tmp_path)
    lz4(fake_zfs)
    db = tmp_path / "bench.sqlite"
    chunks = rng.randint(2, 5)
    with Watching() as ready:
        breaker = Breaker(root, ready, chunks, then)
        breaker.start()
        code = main(["watch", "--dataset", "tank/lz4", "--duration", "120", "--path.procfs", str(root / "proc"),
                     "--path.sysfs", str(root / "sys"), *fake_zfs.flags(db)])
        breaker.join()
    assert code == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR" and "the watch ended" in r.getMessage()]
    [row] = ReadOnlyStore(db).results(status=None)
    assert says in line and f"1 result(s) recorded failed, {row.bytes} bytes seen kept" in line
    assert row.status == "failed" and says in row.error
    assert kept(row, chunks) and json.loads(row.details)["written_bytes"] == row.bytes
    assert ReadOnlyStore(db).matrix_runs()[0].status == "failed"
    assert not read_bench_db(db)       # no complete result, nothing running: the exporter serves nothing


def test_a_failing_zfs_get_at_the_end_keeps_the_bytes(fake_zfs, tmp_path, caplog):
    root = tree(tmp_path)
    lz4(fake_zfs)
    db = tmp_path / "bench.sqlite"

    def destroy(_path: Path) -> None:      # the dataset is gone when its space is read after the watch
        state = fake_zfs.read()
        del state["datasets"]["tank/lz4"]
        fake_zfs.write(state)
    with Watching() as ready:
        breaker = Breaker(root, ready, 3, destroy)
        breaker.start()
        code = main(["watch", "--dataset", "tank/lz4", "--until-idle", "3", "--duration", "120",
                     "--settle-timeout", "1", "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                     *fake_zfs.flags(db)])
        breaker.join()
    assert code == 2
    [row] = ReadOnlyStore(db).results(status=None)
    assert row.status == "failed" and row.bytes == 3 * MiB and "does not exist" in row.error


def test_counters_going_backwards_end_the_window_never_negative(fake_zfs, tmp_path):
    """A pool exported and imported mid-watch: its objset counters start again from 0."""
    root = tree(tmp_path)
    lz4(fake_zfs)
    db = tmp_path / "bench.sqlite"
    chunks = rng.randint(2, 5)

    def reimport(path: Path) -> None:
        set_counters(path, rng.randint(0, MiB), 1)         # back near 0
        time.sleep(0.5)
        set_counters(path, 50 * MiB, 100)                   # and on again: not this window's
    with Watching() as ready:
        breaker = Breaker(root, ready, chunks, reimport)
        breaker.start()
        code = main(["watch", "--dataset", "tank/lz4", "--duration", "120", "--settle-timeout", "1",
                     "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), *fake_zfs.flags(db)])
        breaker.join()
    assert code == 0
    [row] = ReadOnlyStore(db).results()
    assert kept(row, chunks) and row.throughput_bytes_per_second > 0
    details = json.loads(row.details)
    assert details["stopped_by"] == "counters-went-backwards" and "went backwards" in details["window_ended"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=["kill-9", "term", "hup"])
def test_a_watch_ended_by_a_signal(sig, fake_zfs, tmp_path):
    """SIGTERM and SIGHUP end it as asked (complete); after kill -9 its row reads incomplete, the
    exporter does not call it running, and the next command that writes records it so."""
    root = tree(tmp_path)
    lz4(fake_zfs)
    db = tmp_path / "bench.sqlite"
    code = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, **fake_zfs.env, "PYTHONPATH": f"{ROOT / 'exporter'}:{ROOT}"}
    proc = subprocess.Popen([sys.executable, "-c", code, "watch", "--dataset", "tank/lz4", "--settle-timeout", "1",
                             "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                             *fake_zfs.flags(db)], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: running(db))
    written, writes = base_counters(objset(root))
    set_counters(objset(root), written + 2 * MiB, writes + 2)
    time.sleep(0.5)
    sync_txg(objset(root).parent / "txgs")
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=120)
    [row] = ReadOnlyStore(db).results(status=None)
    if sig != signal.SIGKILL:
        assert proc.returncode == 0, err
        assert row.status == "complete" and row.bytes == 2 * MiB
        return
    assert row.status == "incomplete"                       # as read: nobody holds the lock, its run is gone
    [series] = read_bench_db(db) or [None]
    assert series is None or not series.running
    before = db.read_bytes()
    assert main(["list", "--db", str(db)]) == 0 and db.read_bytes() == before   # readers write nothing
    fio = tmp_path / "fio.json"
    fio.write_text(json.dumps({"jobs": [{"jobname": "a", "write": {"io_bytes": 1, "bw_bytes": 1}}]}))
    assert main(["import", "fio", str(fio), "--db", str(db)]) == 0              # a writer marks it
    import sqlite3
    assert sqlite3.connect(db).execute("SELECT status FROM results WHERE id = ?", (row.id,)).fetchone()[0] == \
        "incomplete"


# --- case 7: bounded samples, linear figures, a bounded interval ------------------------------------

class FakeTime:
    """The watch module's `time`, advanced only by waits: thousands of samples in a second."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_780_000_000.0 + self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def strftime(self, *args) -> str:
        return time.strftime(*args)


class FakeStop:
    def __init__(self, clock: FakeTime, seconds: float) -> None:
        self.clock, self.end = clock, clock.now + seconds

    def is_set(self) -> bool:
        return self.clock.now >= self.end

    def wait(self, seconds: float) -> bool:
        self.clock.now += seconds
        return self.is_set()


def test_a_long_watch_keeps_a_bounded_number_of_samples(tmp_path, monkeypatch):
    """6,000 samples (10 minutes at 0.1 s): what is kept does not grow with them (3.4 KiB a sample
    was kept before, and the figures took time quadratic in them)."""
    from zfsnas.sources.linux import ProcfsKstatSource

    root = tree(tmp_path)
    clock = FakeTime()
    monkeypatch.setattr(watch_module, "time", clock)
    watcher = watch_module.Watcher(ProcfsKstatSource(str(root / "proc"), str(root / "sys")), ["tank/lz4"],
                                   str(root / "proc"), str(root / "sys"), interval=0.1)
    reads = [0]
    start_byte, last_byte = 30, 4_500         # reads (10 a second): bytes from 3 s to 7.5 min
    real_counters = watcher._counters

    def counters(target):
        reads[0] += 1
        base = real_counters(target)
        moved = min(max(reads[0] - start_byte, 0), last_byte - start_byte)
        return (base[0] + moved * 4096, *base[1:])
    monkeypatch.setattr(watcher, "_counters", counters)
    watched = watcher.watch(FakeStop(clock, 600.0))
    kept = sum(1 for o in gc.get_objects() if isinstance(o, watch_module.Sample))
    assert kept <= 40, f"{kept} samples kept of {int(600 / 0.1)}"
    [target] = watched.targets
    values = watch_module.figures(watched, target, [], {}, {}, None)
    assert values.bytes == (last_byte - start_byte) * 4096
    assert values.duration_seconds == pytest.approx((last_byte - start_byte) / 10, rel=0.01)


@pytest.mark.parametrize("interval", ["0.000001", "0", "-1", "nan", "3601", "inf"])
def test_the_interval_is_bounded(interval, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["watch", "--dataset", "tank/lz4", "--interval", interval, "--db", str(tmp_path / "db")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--interval" in err and "between 0.1 and 3600 seconds" in err
    assert not (tmp_path / "db").exists()
