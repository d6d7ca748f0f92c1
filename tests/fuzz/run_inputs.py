"""Issue 43's surfaces under fuzz, each case in processes of its own whose tree's peak RSS is
measured (tests/fuzz/treerss.py): `zfsnas-bench import` of what tests/fuzz/inputs.py generates, the
store under crashes, newer schemas, full disks and contention, `watch` under failures and for
hours of samples, and the exporter over a store of 100,000 results, nonsense values, hostile
SMART output and an event storm with lines that do not read. For benchmarks/fuzz.py (`--only
inputs`) and tests/fuzz/test_inputs.py (a few per kind).

A case's outcome is `ok` when what came of it is what must (exit status, one line, nothing stored
or exactly what was given, the page's values) and no traceback was printed; otherwise `crash`
with what went wrong.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.treerss import TreePeak

ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
LIMIT_KIB = 256 * 1024


@dataclass
class Outcome:
    number: int            # the numbered failure (0: a control that must work)
    kind: str
    outcome: str           # ok | crash
    detail: str
    rss_kib: int
    seconds: float


def _env(extra: dict | None = None) -> dict:
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'exporter'}:{ROOT}", **(extra or {})}


def run(argv: list[str], limit_bytes: int | None = None, env: dict | None = None, timeout: float = 300,
        said: tuple[str, threading.Event] | None = None, pid: list[int] | None = None) \
        -> tuple[int, list[str], int, float]:
    """A process of its own (files limited to `limit_bytes`: a full disk): (exit status, stderr
    lines, its tree's peak RSS in KiB, seconds); a hang is exit status -1. `said`: an event set
    when a line of stderr holds the text; `pid`: a list its pid is appended to once it runs."""
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=_env(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=limited if limit_bytes is not None else None)
    if pid is not None:
        pid.append(proc.pid)
    lines: list[str] = []

    def drain() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            if said is not None and said[0] in line:
                said[1].set()
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with TreePeak(proc.pid) as peak:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = -1
    reader.join(30)
    return code, lines, peak.peak_kib, time.monotonic() - started


def cli(*argv: str, **kw) -> tuple[int, list[str], int, float]:
    return run([sys.executable, "-c", CLI, *argv], **kw)


def judge(number: int, kind: str, result: tuple[int, list[str], int, float], check: Callable[[int, list[str]], str]) \
        -> Outcome:
    code, err, rss, seconds = result
    problem = "a hang" if code == -1 else "a traceback" if any("Traceback" in line for line in err) else \
        check(code, err)
    if not problem and rss >= LIMIT_KIB:
        problem = f"peak RSS {rss // 1024} MiB"
    detail = problem or (err[-1][:160] if err else "")
    return Outcome(number, kind, "crash" if problem else "ok", detail, rss, seconds)


# --- imports ---------------------------------------------------------------------------------------

def import_outcomes(seed: int, per_kind: int, work: Path) -> list[Outcome]:
    from tests.fuzz.inputs import import_cases

    out = []
    for index, case in enumerate(import_cases(seed, per_kind)):
        directory = work / f"import-{index}"
        directory.mkdir()
        db = directory / "bench.sqlite"
        path = case.make(directory)

        def check(code: int, err: list[str], case=case, db=db) -> str:
            if not case.says:
                stored = _count_rows(db)
                return "" if code == 0 and stored == case.results else f"exit {code}, {stored} stored: {err[-1:]}"
            if code != 2 or len(err) != 1 or not any(f in err[0] for f in case.says):
                return f"exit {code}: {err[-2:]}"
            return "" if not db.exists() else "a database was made"
        out.append(judge(case.number, case.kind, cli("import", case.format, str(path), "--db", str(db), *case.flags),
                         check))
    return out


def _count_rows(db: Path) -> int:
    from tests.bench.test_store_hostile import rows

    return len(rows(db, "id")) if db.exists() else -1


# --- the store ---------------------------------------------------------------------------------------

def store_outcomes(seed: int, per_kind: int, work: Path) -> list[Outcome]:
    import tests.bench.test_store_hostile as store

    store.rng.seed(seed)
    out = []
    fio = store.fio_file(work)
    for n in range(per_kind):
        for kind in ("header-ahead", "torn-tail", "longer"):
            directory = work / f"crash-{kind}-{n}"
            directory.mkdir()
            path = store.crashed_mid_checkpoint(directory, kind)
            for argv in (["list"], ["report"], ["import", "fio", str(fio)]):
                out.append(judge(2, f"left mid-checkpoint ({kind}): {argv[0]}", cli(*argv, "--db", str(path)),
                                 lambda code, err: "" if code == 0 else f"exit {code}: {err[-1:]}"))
        for kind in ("user_version", "table", "column", "not-null column"):
            path = store.filled_store(work / f"newer-{kind}-{n}.sqlite")
            store._newer(path, kind)
            before = store.digest(path)

            def newer(code: int, err: list[str], path=path, before=before) -> str:
                if code != 2 or len(err) != 1 or "nothing written" not in err[0]:
                    return f"exit {code}: {err[-1:]}"
                return "" if store.digest(path) == before else "the file changed"
            out.append(judge(8, f"a newer schema ({kind})", cli("import", "fio", str(fio), "--db", str(path)), newer))
        path = store.filled_store(work / f"full-{n}.sqlite")
        before = store.rows(path)
        big = store.fio_file(work, jobs=store.rng.randint(200, 900), prefix=f"full{n}")
        limit = path.stat().st_size + store.rng.randint(0, 65536)
        out.append(judge(10, "a full disk", cli("import", "fio", str(big), "--db", str(path), limit_bytes=limit),
                         lambda code, err, path=path, before=before:
                         "" if code == 2 and len(err) == 1 and store.rows(path) == before else f"exit {code}: {err}"))
        new = work / f"create-{n}" / "x" / "bench.sqlite"
        out.append(judge(11, "a create on a full disk",
                         cli("import", "fio", str(fio), "--db", str(new), limit_bytes=store.rng.choice((0, 4096, 20000))),
                         lambda code, err, new=new: "" if code == 2 and not new.parent.parent.exists()
                         else f"exit {code}, left {list(new.parent.parent.rglob('*'))}"))
    path = store.filled_store(work / "locked.sqlite")
    holder = store._holder(path)
    try:
        out.append(judge(10, "a writer holding the database", cli("import", "fio", str(fio), "--db", str(path),
                                                                  "--db-timeout", "2"),
                         lambda code, err: "" if code == 2 and len(err) == 2 and "--db-timeout" in err[1]
                         else f"exit {code}: {err}"))
    finally:
        holder.kill()
        holder.wait()
    return out


# --- watch -------------------------------------------------------------------------------------------

def watch_outcomes(seed: int, work: Path) -> list[Outcome]:
    """Each breakage of tests/bench/test_watch_hostile.py against a real `zfsnas-bench watch`
    process, and a watch of an hour of samples (at 0.1 s) on a fake clock."""
    import tests.bench.test_watch_hostile as hostile
    from tests.bench.conftest import FakeZfs
    from tests.bench.test_client_experiments import WATCHING, tree

    hostile.rng.seed(seed)
    out = []
    breaks = {"vanished": (hostile._vanish, 2), "garbled": (hostile._garble, 2), "past uint64": (hostile._past_uint64, 2)}
    for name, (then, expect) in breaks.items():
        directory = work / f"watch-{name.replace(' ', '-')}"
        directory.mkdir()
        fake = FakeZfs(directory)
        hostile.lz4(fake)
        root = tree(directory)
        db = directory / "bench.sqlite"
        chunks = hostile.rng.randint(2, 5)
        ready = threading.Event()
        breaker = hostile.Breaker(root, ready, chunks, then)
        breaker.start()
        result = run([sys.executable, "-c", CLI, "watch", "--dataset", "tank/lz4", "--duration", "120",
                      "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), *fake.flags(db)],
                     env=fake.env, said=(WATCHING, ready))
        breaker.join()

        def ended(code: int, err: list[str], db=db, chunks=chunks, expect=expect) -> str:
            rows = _watch_rows(db)
            if code != expect or len(rows) != 1 or rows[0][0] != "failed" or not rows[0][1] or \
                    rows[0][1] % hostile.MiB or rows[0][1] > chunks * hostile.MiB:
                return f"exit {code}, rows {rows}: {err[-1:]}"
            return ""
        out.append(judge(4, f"watch: the dataset {name}", result, ended))
    out.append(_backwards(work, hostile, FakeZfs, tree, WATCHING))
    out.append(_killed(work, hostile, FakeZfs, tree, WATCHING))
    out.append(_long_watch(work))
    return out


def _watch_setup(work: Path, name: str, hostile, fake_zfs, tree) -> tuple:
    directory = work / f"watch-{name}"
    directory.mkdir()
    fake = fake_zfs(directory)
    hostile.lz4(fake)
    return fake, tree(directory), directory / "bench.sqlite"


def _watch_argv(fake, root: Path, db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", CLI, "watch", "--dataset", "tank/lz4", "--settle-timeout", "1", *extra,
            "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), *fake.flags(db)]


def _backwards(work: Path, hostile, fake_zfs, tree, watching: str) -> Outcome:
    """Case 5: the pool exported and imported mid-watch: its counters start again from 0."""
    fake, root, db = _watch_setup(work, "backwards", hostile, fake_zfs, tree)
    chunks = hostile.rng.randint(2, 5)

    def reimport(path: Path) -> None:
        hostile.set_counters(path, hostile.rng.randint(0, hostile.MiB), 1)
        time.sleep(0.5)
        hostile.set_counters(path, 50 * hostile.MiB, 100)
    ready = threading.Event()
    breaker = hostile.Breaker(root, ready, chunks, reimport)
    breaker.start()
    result = run(_watch_argv(fake, root, db, "--duration", "120"), env=fake.env, said=(watching, ready))
    breaker.join()

    def window(code: int, err: list[str]) -> str:
        rows = _watch_rows(db)
        if code != 0 or len(rows) != 1 or rows[0][0] != "complete" or not 0 < rows[0][1] <= chunks * hostile.MiB:
            return f"exit {code}, rows {rows}: {err[-1:]}"
        return ""
    return judge(5, "watch: counters going backwards mid-watch", result, window)


def _killed(work: Path, hostile, fake_zfs, tree, watching: str) -> Outcome:
    """Case 4: `kill -9` mid-watch: readers show the row incomplete, the next writer marks it."""
    fake, root, db = _watch_setup(work, "killed", hostile, fake_zfs, tree)
    ready, pid = threading.Event(), []

    def kill() -> None:
        if ready.wait(120):
            written, writes = hostile.base_counters(hostile.objset(root))
            hostile.set_counters(hostile.objset(root), written + hostile.MiB, writes + 1)
            time.sleep(1.0)
            os.kill(pid[0], signal.SIGKILL)
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    result = run(_watch_argv(fake, root, db), env=fake.env, said=(watching, ready), pid=pid)
    killer.join()
    listed = cli("list", "--db", str(db))
    fio = work / "killed.json"
    fio.write_text(json.dumps({"jobs": [{"jobname": "a", "write": {"io_bytes": 1, "bw_bytes": 1}}]}))
    imported = cli("import", "fio", str(fio), "--db", str(db))

    def marked(code: int, err: list[str]) -> str:
        if code != -signal.SIGKILL or listed[0] != 0 or imported[0] != 0:
            return f"exit {code}, list {listed[0]}, import {imported[0]}: {imported[1][-1:]}"
        return "" if _watch_rows(db)[0][0] == "incomplete" else f"rows {_watch_rows(db)}"
    return judge(4, "watch: kill -9, then list and an import", result, marked)


def _watch_rows(db: Path) -> list[tuple]:
    from tests.bench.test_store_hostile import rows

    return rows(db, "status, bytes")


LONG_WATCH = """
import gc, json, sys, time
from pathlib import Path
from tests.bench import test_watch_hostile as t
from zfsnas.bench.client import watch as w
from zfsnas.sources.linux import ProcfsKstatSource
root = Path(sys.argv[1])
clock = t.FakeTime()
w.time = clock
watcher = w.Watcher(ProcfsKstatSource(str(root / "proc"), str(root / "sys")), ["tank/lz4"], str(root / "proc"),
                    str(root / "sys"), interval=0.1)
reads = [0]
real = watcher._counters
def counters(target):
    reads[0] += 1
    base = real(target)
    return (base[0] + min(max(reads[0] - 30, 0), 30000) * 4096, *base[1:])
watcher._counters = counters
watched = watcher.watch(t.FakeStop(clock, float(sys.argv[2])))
kept = sum(1 for o in gc.get_objects() if isinstance(o, w.Sample))
started = time.process_time()
values = w.figures(watched, watched.targets[0], [], {}, {}, None)
print(json.dumps({"samples": watched.samples, "kept": kept, "figures_cpu_seconds": time.process_time() - started,
                  "bytes": values.bytes}), file=sys.stderr)
"""


def _long_watch(work: Path, seconds: float = 3600.0) -> Outcome:
    from tests.bench.test_client_experiments import tree

    directory = work / "long-watch"
    directory.mkdir()
    root = tree(directory)
    result = run([sys.executable, "-c", LONG_WATCH, str(root), str(seconds)], timeout=1800)

    def check(code: int, err: list[str]) -> str:
        report = json.loads(err[-1]) if code == 0 and err else {}
        if report.get("bytes") != 30000 * 4096 or report.get("kept", 10**9) > 40:
            return f"exit {code}: {err[-1:]}"
        return ""
    outcome = judge(7, f"watch: {int(seconds / 0.1)} samples (an hour at 0.1 s, fake clock)", result, check)
    if outcome.outcome == "ok":
        outcome.detail = result[1][-1]
    return outcome


# --- the exporter --------------------------------------------------------------------------------------

def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
        return response.read().decode()


def exporter_run(flags: list[str], until: Callable[[str], bool], seconds: float = 180,
                 during: Callable[[int, int], dict] | None = None) -> tuple[int, str, int, dict]:
    """The real exporter with `flags`, scraped until `until(page)`; (its tree's peak RSS in KiB, the
    last page, its exit status (-1 while running), what `during(port, pid)` measured then)."""
    from tests.conftest import free_port
    from tests.integration.exporter_process import exporter_command

    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([*exporter_command(), f"--web.listen-address=127.0.0.1:{port}", *flags],
                            stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT, env=_env())
    page, extra = "", {}
    try:
        with TreePeak(proc.pid) as peak:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    page = _get(port)
                except OSError:
                    page = ""
                if page and until(page):
                    break
                time.sleep(0.5)
            if during is not None and proc.poll() is None:
                extra = during(port, proc.pid)
                page = _get(port)
    finally:
        proc.terminate()
        code = proc.wait(30)
        log.seek(0)
        extra["log"] = log.read().decode(errors="replace")
    return peak.peak_kib, page, code, extra


def _sample(page: str, name: str, **labels: str) -> float | None:
    head = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "} "
    at = page.find("\n" + head)
    return None if at < 0 else float(page[at + 1 + len(head):page.index("\n", at + 1)])


def _scrape_seconds(port: int, count: int = 20) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        _get(port)
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def exporter_outcomes(seed: int, work: Path) -> list[Outcome]:
    rng = random.Random(seed)
    return [*_store_size(work), _nonsense(work, rng), _dead_watch(work), *_smart(work, rng), _events(work, rng)]


def _bench_flags(db: Path) -> list[str]:
    return ["--collector.disable-defaults", "--collector.bench", "--bench.db", str(db), "--bench.refresh-interval", "1"]


def _store_size(work: Path) -> list[Outcome]:
    """Case 1: 100,000 results, as one history and as 100,000 configurations; the scrape's time
    against a store of 100 results, in the same run."""
    from tests.collectors.test_bench_scale import bulk_store

    out = []
    small = work / "small.sqlite"
    bulk_store(small, 10, results=100)
    base_kib, _, _, base = exporter_run(_bench_flags(small), lambda p: "zfs_bench_runs_total{" in p,
                                        during=lambda port, pid: {"p50": _scrape_seconds(port)})
    for configurations in (1, 100_000):
        db = work / f"big-{configurations}.sqlite"
        bulk_store(db, configurations)
        started = time.monotonic()
        rss, page, code, extra = exporter_run(_bench_flags(db), lambda p: "zfs_bench_runs_total{" in p,
                                              during=lambda port, pid: {"p50": _scrape_seconds(port)})
        served = page.count("\nzfs_bench_runs_total{")
        ok = served == min(configurations, 1000) and code in (0, -15) and "Traceback" not in extra["log"]
        detail = (f"{served} configurations served, page {len(page) / 1e6:.1f} MB, scrape p50 "
                  f"{extra.get('p50', 0) * 1000:.1f} ms against {base.get('p50', 0) * 1000:.1f} ms with 100 results "
                  f"(ratio {extra.get('p50', 0) / max(base.get('p50', 1e-9), 1e-9):.2f}); first read within "
                  f"{time.monotonic() - started:.0f} s of the start; 100 results: {base_kib / 1024:.1f} MiB")
        out.append(Outcome(1, f"exporter over 100,000 results, {configurations} configuration(s)",
                           "ok" if ok and rss < LIMIT_KIB else "crash", detail, rss, 0.0))
    return out


def _nonsense(work: Path, rng: random.Random) -> Outcome:
    """Case 5: what an older release stored, as the issue found it: infinities, NaN, 1e300, text."""
    import sqlite3

    from tests.collectors.test_bench_scale import bulk_store

    db = work / "nonsense.sqlite"
    bulk_store(db, 20, results=40)
    con = sqlite3.connect(db)
    values = [float("inf"), float("-inf"), 1e300, 1e18, -5.0, "fast", b"\x00\xff"]
    for column in ("finished", "throughput_bytes_per_second", "compressratio", "cpu_busy_ratio", "duration_seconds"):
        con.execute(f"UPDATE results SET {column} = ? WHERE id % 3 = ?", (rng.choice(values), rng.randrange(3)))
    con.commit()
    con.close()
    rss, page, code, extra = exporter_run(_bench_flags(db), lambda p: "zfs_bench_runs_total{" in p)
    bench = [line for line in page.splitlines() if line.startswith("zfs_bench_")]
    bad = [line for line in bench if _nonsense_sample(line)]
    ok = bench and not bad and _sample(page, "zfs_exporter_source_success", source="bench_db") == 1
    return Outcome(5, "exporter over stored infinities, NaN, 1e300, text", "ok" if ok and rss < LIMIT_KIB else "crash",
                   f"{len(bench)} samples, none of them nonsense" if ok else f"served {bad[:2]}", rss, 0.0)


def _nonsense_sample(line: str) -> bool:
    """A zfs_bench_* sample that cannot be true (as the schema says what can: benchschema)."""
    from zfsnas.collectors.bench import FAMILIES
    from zfsnas.store.schema import figure_problem, stored_time_problem

    name, value = line.split("{", 1)[0], float(line.rsplit(" ", 1)[1])
    attribute = {metric: attr for metric, _kind, _help, attr in FAMILIES}.get(name)
    if attribute == "last_run_timestamp":
        return stored_time_problem(value) is not None
    if attribute in ("throughput_bytes_per_second", "compressratio", "cpu_busy_ratio", "duration_seconds"):
        return figure_problem(attribute, value) is not None
    return value != value or value in (float("inf"), float("-inf"))


def _dead_watch(work: Path) -> Outcome:
    """Case 4: a watch killed by `kill -9` left its row `running`; its lock is free."""
    from tests.bench.configs import configuration
    from zfsnas.bench.running.runner import RunLock
    from zfsnas.store.database import Store

    db = work / "dead-watch.sqlite"
    store = Store(db)
    store.start_matrix("r", "watch", "tank/x", 1)
    store.start_result("r", 1, configuration(matrix="watch"), 1, "tank/x")
    store.close()
    with RunLock(f"{db}.lock"):
        pass                                 # the lock file the watch made, held by no one now
    rss, page, _code, _extra = exporter_run(_bench_flags(db), lambda p: "zfs_bench_running{" in p)
    running = [line for line in page.splitlines() if line.startswith("zfs_bench_running{")]
    ok = running and all(line.endswith(" 0") for line in running)
    return Outcome(4, "exporter: the row of a watch killed by kill -9", "ok" if ok and rss < LIMIT_KIB else "crash",
                   running[0][-40:] if running else "not served", rss, 0.0)


def _smart(work: Path, rng: random.Random) -> list[Outcome]:
    """Case 6: every disk's smartctl prints 15 MB under the 16 MiB limit, of each hostile shape."""
    import shutil

    from tests.collectors.test_smart import PATHS, STANDIN
    from tests.conftest import FIXTURES
    from tests.sources.test_smart_hostile import KINDS, hostile

    out = []
    for kind in KINDS:
        directory = work / f"smart-{kind.replace(' ', '-')}"
        directory.mkdir()
        index = json.loads((FIXTURES / "smart" / "awake" / "index.json").read_text())
        (directory / "hostile.json").write_text(hostile(kind, 15 * (1 << 20)))
        for line in index["commands"]:
            index["commands"][line] = {"stdout": "hostile.json", "status": 0}
        (directory / "index.json").write_text(json.dumps(index))
        flags = [*PATHS, "--collector.disable-defaults", "--collector.disks", "--collector.smart",
                 "--zfs.command-prefix", f"{sys.executable} {STANDIN} {directory}"]
        rss, page, _code, extra = exporter_run(flags, lambda p: 'zfs_disk_smart_state{' in p)
        failed = page.count('state="failed"} 1')
        ok = failed >= 1 and "Traceback" not in extra["log"]
        out.append(Outcome(6, f"smartctl: 15 MB of {kind} a disk", "ok" if ok and rss < LIMIT_KIB else "crash",
                           f"{failed} disks failed, each said", rss, 0.0))
        shutil.rmtree(directory, ignore_errors=True)
    return out


def _events(work: Path, rng: random.Random) -> Outcome:
    """Case 9: `zpool events -fvH` prints 200,000 events as fast as the pipe takes them, with lines
    that do not read among them: the exporter's CPU while it reads, what it counts and leaves out."""
    from tests.collectors.test_pools_health import event, flags, kstat_tree, tank, write_recordings

    root = kstat_tree(work, "ONLINE")
    recordings = write_recordings(work / "zpool", tank("ONLINE", "ONLINE"))
    now = time.time() + 30
    bad = ["dropped " + "9" * 5000 + " events\n", "\x00\xff junk\n",
           event(now, 0, "ereport.fs.zfs.io").replace(f"0x{int(now):x} 0x0", "0x" + "f" * 400 + " 0x0")]
    with (recordings / "zpool-events.txt").open("w") as out:
        for eid in range(1, 200_001):
            out.write(event(now, eid, "ereport.fs.zfs.checksum"))
            if eid % 1000 == 0:
                out.write(rng.choice(bad))

    def cpu(port: int, pid: int) -> dict:
        def ticks() -> int:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        first, started = ticks(), time.monotonic()
        time.sleep(10)
        return {"cpu": (ticks() - first) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - started)}
    rss, page, _code, extra = exporter_run([*flags(root, recordings), "--pools.refresh-interval", "3600"],
                                           lambda p: 'class="checksum"' in p, during=cpu)
    counted = _sample(page, "zfs_pool_events_total", pool="tank", **{"class": "checksum"}) or 0
    dropped = sum(_sample(page, "zfs_exporter_source_values_dropped_total", source="zpool_events", reason=r) or 0
                  for r in ("malformed", "out_of_range"))
    ok = counted > 0 and dropped > 0 and _sample(page, "zfs_exporter_source_success", source="zpool_events") == 1
    return Outcome(9, "zpool events: a storm of 200,000 events with lines that do not read",
                   "ok" if ok and rss < LIMIT_KIB else "crash",
                   f"exporter CPU {extra.get('cpu', 0) * 100:.0f} % of a core while it reads; {counted:.0f} events "
                   f"counted, {dropped:.0f} lines left out in the first {10 + 0:.0f}+ s", rss, 0.0)
