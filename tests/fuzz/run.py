"""Run fuzz cases against the real exporter code and say what happened to each.

In-process (`run_cases`): each case gets a fresh copy of the base tree, one mutation, a fresh
exporter, and two scrapes through a real `zfsnas.server` on 127.0.0.1; a case that takes longer
than `CASE_SECONDS` is a hang. Every page goes through `promtool check metrics`.
Out of process (`measure_rss`): the case in a child process of its own (two renders), which
reports its own peak RSS (VmHWM).

    python -m tests.fuzz.run --one <tree>     (the child: prints what it rendered as JSON)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.corpus import ALL, Case, base_tree, flags

CASE_SECONDS = 30
PROMTOOL = shutil.which("promtool")


@dataclass
class Result:
    case: str
    klass: str
    outcome: str = "ok"           # ok, crash, hang, http-<code>
    detail: str = ""
    seconds: float = 0.0
    promtool_errors: int = 0
    dropped: float = 0.0
    rewritten: float = 0.0
    failing: list[str] = field(default_factory=list)   # collectors and sources reporting 0
    warnings_first: int = 0
    warnings_again: int = 0       # warnings the second scrape logged again (must be 0: logged once)
    rss_kb: int = 0


def indicators(text: str) -> tuple[float, float, list[str]]:
    dropped = rewritten = 0.0
    failing = []
    for line in text.splitlines():
        if line.startswith(("zfs_exporter_samples_dropped_total{", "zfs_exporter_source_values_dropped_total{")):
            dropped += float(line.rsplit(" ", 1)[1])
        elif line.startswith("zfs_exporter_label_values_rewritten_total{"):
            rewritten += float(line.rsplit(" ", 1)[1])
        elif line.startswith(("zfs_exporter_collector_success{", "zfs_exporter_source_success{")) and line.endswith(" 0"):
            failing.append(line.split("{", 1)[1].split('"')[1])
    return dropped, rewritten, sorted(failing)


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


class _Hang(Exception):
    pass


def _alarm(*_):
    raise _Hang()


def prepare(work: Path, case: Case | None) -> Path:
    tree = work / "tree"
    base = base_tree(work)
    # Hard links (mutations write new files): `cp -al` is ten times faster than shutil here.
    subprocess.run(["rm", "-rf", str(tree)], check=True)
    subprocess.run(["cp", "-al", str(base), str(tree)], check=True)
    if case is not None:
        case.apply(tree)
    return tree


def cleanup(tree: Path) -> None:
    pid_file = tree / "commands" / "leftover.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def scratch_dir() -> Path:
    """Where case trees are made: tmpfs when there is one (a case is ~150 files copied and removed)."""
    import tempfile

    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="zfsnas-fuzz-", dir=shm))


class _Promtool:
    """`promtool check metrics` on every page, a few at a time while the next cases run."""

    def __init__(self) -> None:
        self.pending: list[tuple[Result, subprocess.Popen]] = []

    def check(self, result: Result, text: str) -> None:
        if PROMTOOL is None:
            return
        proc = subprocess.Popen([PROMTOOL, "check", "metrics"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        proc.stdin.write(text.encode("utf-8"))
        proc.stdin.close()
        self.pending.append((result, proc))
        while len(self.pending) > 3:
            self._finish(*self.pending.pop(0))

    def wait(self) -> None:
        while self.pending:
            self._finish(*self.pending.pop(0))

    @staticmethod
    def _finish(result: Result, proc: subprocess.Popen) -> None:
        out = proc.stdout.read().decode("utf-8", "replace").strip()
        proc.stdout.close()
        if proc.wait(60) != 0:
            result.promtool_errors = max(1, len(out.splitlines()))
            result.detail = out[:300]


def run_cases(cases: list[Case], work: Path, progress=None) -> list[Result]:
    from zfsnas.server import make_server, serve_in_thread
    from zfsnas.wiring import build_exporter, build_parser

    current: dict = {}
    server = make_server("127.0.0.1:0", lambda: current["exporter"].render())
    serve_in_thread(server)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    logger = logging.getLogger("zfsnas")
    logger.setLevel(logging.INFO)
    results = []
    promtool = _Promtool()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in cases:
            result = Result(case.name, case.klass)
            warnings = _Warnings()
            logger.addHandler(warnings)
            tree = prepare(work, case)
            started = time.monotonic()
            signal.alarm(CASE_SECONDS)
            try:
                current["exporter"] = build_exporter(build_parser().parse_args(flags(tree, case.collectors)),
                                                     process_metrics=False)
                pages = []
                for scrape in range(2):
                    with urllib.request.urlopen(url, timeout=CASE_SECONDS) as response:
                        pages.append(response.read().decode("utf-8"))
                    if scrape == 0:
                        result.warnings_first, warnings.count = warnings.count, 0
                result.warnings_again = warnings.count
                signal.alarm(0)
                text = pages[-1]
                result.dropped, result.rewritten, result.failing = indicators(text)
                promtool.check(result, text)
            except _Hang:
                result.outcome = "hang"
            except urllib.error.HTTPError as exc:
                result.outcome, result.detail = f"http-{exc.code}", exc.read()[:200].decode("utf-8", "replace")
            except Exception as exc:
                result.outcome, result.detail = "crash", f"{type(exc).__name__}: {str(exc)[:200]}"
            finally:
                signal.alarm(0)
                logger.removeHandler(warnings)
                cleanup(tree)
            result.seconds = time.monotonic() - started
            results.append(result)
            if progress:
                progress(result)
        promtool.wait()
    finally:
        signal.signal(signal.SIGALRM, previous)
        server.shutdown()
    return results


def measure_rss(case: Case | None, work: Path) -> tuple[int, dict]:
    """(peak RSS in KiB, what the child rendered) of one case run in a process of its own."""
    tree = prepare(work, case)
    try:
        try:
            proc = subprocess.run([sys.executable, "-m", "tests.fuzz.run", "--one", str(tree),
                                   *(case.collectors if case else ALL)], capture_output=True,
                                  timeout=CASE_SECONDS * 2, cwd=Path(__file__).parent.parent.parent)
        except subprocess.TimeoutExpired:
            return 0, {"outcome": "hang"}
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            return 0, {"outcome": "crash", "detail": proc.stderr[-300:].decode("utf-8", "replace")}
        return report["rss_kb"], report
    finally:
        cleanup(tree)


def _one(tree: str, collectors: list[str]) -> None:
    """The child of measure_rss: no HTTP, no test libraries, just the exporter, twice."""
    from zfsnas.wiring import build_exporter, build_parser

    logging.basicConfig(level=logging.CRITICAL)
    exporter = build_exporter(build_parser().parse_args(flags(Path(tree), collectors)), process_metrics=False)
    text = ""
    for _ in range(2):
        text = exporter.render()
    dropped, rewritten, failing = indicators(text)
    # VmHWM is this process' own peak (wait4's ru_maxrss would include the parent it was forked from).
    with open("/proc/self/status") as status:
        peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(json.dumps({"outcome": "ok", "bytes": len(text), "dropped": dropped, "rewritten": rewritten,
                      "failing": failing, "rss_kb": peak_kb}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        _one(sys.argv[2], sys.argv[3:])
