#!/usr/bin/env python3
"""The full fuzz run (issue 16): the seeded corpus of tests/fuzz/corpus.py at full size, 100 MB
command outputs included, then the HTTP side (silent clients, basic-auth timing); and issue 33's
hostile inputs: listings made to grow the exporter (peak RSS of its whole process tree), clients
that never read a 26 MB page, a flood of wrong passwords (both against node_exporter 1.5); and
issue 43's (`inputs`): what users bring to `zfsnas-bench import` (tests/fuzz/inputs.py), the store
under crashes, newer schemas, full disks and contention, `watch` when its dataset breaks and for an
hour of samples, the exporter over 100,000 stored results, nonsense values, hostile SMART output
and an event storm (tests/fuzz/run_inputs.py), every case in processes of its own, the peak RSS
of each one's whole tree measured. Prints the figures docs/reliability.md quotes.

    .venv/bin/python benchmarks/fuzz.py [--seed 16] [--per-class 300] [--rss-every 10] [--only hostile,slow,...]
                                        [--inputs-seed 43] [--inputs-per-kind 5]

Every case is scraped twice in-process through the real server and checked with
`promtool check metrics`; the big cases, every `--rss-every`-th case and an unchanged tree run
in a process of their own whose peak RSS (VmHWM) is reported.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import shutil
import socket
import statistics
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.corpus import generate  # noqa: E402
from tests.fuzz.run import measure_rss, run_cases, scratch_dir  # noqa: E402


def corpus_figures(args) -> None:
    cases = generate(args.seed, args.per_class, full=True)
    work = scratch_dir()
    started = time.monotonic()
    try:
        results = run_cases([c for c in cases if not c.big], work)
        by_case = {c.name: c for c in cases}
        rss = {}
        baseline_kb, _ = measure_rss(None, work)
        rss_cases = [c for i, c in enumerate(cases) if c.big or i % args.rss_every == 0]
        big_reports = {}
        for case in rss_cases:
            rss[case.name], report = measure_rss(case, work)
            if case.big:
                big_reports[case.name] = report
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - started
    classes = collections.Counter(c.klass for c in cases)
    outcomes = collections.Counter(r.outcome for r in results)
    outcomes.update(r.get("outcome", "?") for r in big_reports.values())
    signalled = sum(1 for r in results if r.dropped or r.rewritten or r.failing)
    signalled += sum(1 for r in big_reports.values() if r.get("dropped") or r.get("rewritten") or r.get("failing"))
    worst = max(rss, key=rss.get)
    print(f"corpus: seed {args.seed}, {len(cases)} cases ({', '.join(f'{k} {v}' for k, v in sorted(classes.items()))})")
    print(f"  run in {seconds:.0f} s")
    print(f"  crashes {outcomes.get('crash', 0)}, hangs {outcomes.get('hang', 0)}, "
          f"HTTP errors {sum(v for k, v in outcomes.items() if k.startswith('http'))}")
    print(f"  promtool check metrics: {sum(1 for r in results if r.promtool_errors)} pages with errors "
          f"of {len(results)}")
    print(f"  causes logged again on the second scrape: {sum(r.warnings_again for r in results)}")
    print(f"  samples dropped {sum(r.dropped for r in results):.0f}, label values rewritten "
          f"{sum(r.rewritten for r in results):.0f} (two scrapes a case)")
    print(f"  cases showing a drop, a rewrite or a failing collector/source: {signalled} of {len(cases)}")
    print(f"  peak RSS: unchanged tree {baseline_kb / 1024:.1f} MiB; max over {len(rss)} cases "
          f"{rss[worst] / 1024:.1f} MiB ({worst})")
    for name, report in big_reports.items():
        print(f"    {by_case[name].name:60.60} {rss[name] / 1024:6.1f} MiB  {report.get('failing') or ''}")
    slow = sorted(results, key=lambda r: r.seconds)[-3:]
    print("  slowest cases: " + ", ".join(f"{r.case} {r.seconds:.1f} s" for r in slow))


def http_figures() -> None:
    import tempfile

    import bcrypt

    from zfsnas.server import make_server, serve_in_thread
    from zfsnas.webconfig import load_web_config

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "web.yml"
        path.write_text(f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(b's3cret', bcrypt.gensalt(10)).decode()}'\n")
        web = load_web_config(str(path))
    server = make_server("127.0.0.1:0", lambda: "up 1\n" * 2000, web=web)
    serve_in_thread(server)
    port = server.server_address[1]

    def timed(user: str, password: str) -> float:
        auth = base64.b64encode(f"{user}:{password}".encode()).decode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Basic {auth}"})
        started = time.perf_counter()
        try:
            urllib.request.urlopen(request, timeout=10).read()
        except urllib.error.HTTPError:
            pass
        return time.perf_counter() - started

    wrong, unknown = [], []
    for i in range(30):  # interleaved, so that the load of a shared machine hits both alike
        wrong.append(timed("prometheus", f"guess{i}"))
        unknown.append(timed(f"mallory{i}", "s3cret"))
    print(f"basic auth (bcrypt cost 10): wrong password median {statistics.median(wrong) * 1000:.0f} ms, "
          f"unknown user {statistics.median(unknown) * 1000:.0f} ms, ratio "
          f"{statistics.median(unknown) / statistics.median(wrong):.2f}")
    timed("prometheus", "s3cret")

    def p99(n: int = 100) -> float:
        times = sorted(timed("prometheus", "s3cret") for _ in range(n))
        return times[int(n * 0.99) - 1]

    quiet = p99()
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
    for sock in silent[:50]:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
    loaded = p99()
    for sock in silent:
        sock.close()
    print(f"scrape p99: {quiet * 1000:.1f} ms alone, {loaded * 1000:.1f} ms with 150 silent and 50 slow "
          f"clients connected (ratio {loaded / quiet:.2f})")
    server.shutdown()


# --- issue 33: hostile listings, clients that never read, a password flood; node_exporter beside us ---

HOSTILE_CASES = [
    ("100,000 snapshots of 100,000 datasets, names of 200 characters",
     "--datasets 100000 --snapshots 100000 --name-length 200", (), "over_limit"),
    ("the same, both listings refreshed every second for 20 s",
     "--datasets 100000 --snapshots 100000 --name-length 200",
     ("--datasets.refresh-interval", "1", "--datasets.snapshot-interval", "1"), "20 s"),
    ("10 datasets, 100,000 snapshots of names of 1,000 characters",
     "--datasets 10 --snapshots 100000 --name-length 1000", (), "too_long"),
    ("85,000 datasets (15 MB: under the 16 MiB output limit)", "--datasets 85000 --name-length 4", (), "over_limit"),
    ("1,000,000 datasets, output limit raised to 1 GiB", "--datasets 1000000 --name-length 10",
     ("--zfs.command-max-output", str(1 << 30)), "over_limit"),
    ("an endless snapshot listing, 5 s timeout", "--datasets 10 --endless --name-length 200",
     ("--zfs.command-timeout", "5"), "timed out after 5s"),
    ("1.5 GB on stderr", "--stderr-mb 1500", (), "cannot open 'p/x'"),
]


def hostile_figures() -> None:
    """Peak RSS of the whole process tree for each hostile listing, and for --replay of a 1 GiB member."""
    import subprocess
    import tempfile

    from tests.conftest import free_port
    from tests.fuzz.listings import metric, run_exporter, zero_member_archive
    from tests.fuzz.treerss import TreePeak
    from tests.integration.exporter_process import exporter_command

    print("hostile listings: peak RSS of the whole process tree (exporter, parse children, the zfs stand-in)")
    crashes = 0
    for what, hostile, flags, expect in HOSTILE_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "exporter.log"

            def until(page: str, expect: str = expect, log: Path = log, started: float = time.monotonic()) -> bool:
                if expect == "20 s":
                    return time.monotonic() - started > 20
                if expect in ("over_limit", "too_long"):
                    return metric(page, "zfs_exporter_source_values_dropped_total", source="zfs_datasets",
                                  reason=expect) is not None
                return expect in log.read_text()

            begun = time.monotonic()
            try:
                peak, page, _ = run_exporter(Path(tmp), hostile, *flags, until=until, seconds=120)
            except AssertionError as exc:  # the exporter exited, or never served what was expected
                crashes += 1
                print(f"  {what:70} FAILED: {str(exc)[:300]}")
                continue
            print(f"  {what:70} {peak.peak_kib / 1024:6.1f} MiB  ({peak.describe()}; "
                  f"{page.count(chr(10) + 'zfs_dataset_used_bytes{')} datasets served, page {len(page) / 1e6:.1f} MB, "
                  f"{time.monotonic() - begun:.0f} s)")
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "capture.tar.gz"
        zero_member_archive(archive, 1 << 30)
        proc = subprocess.Popen([*exporter_command(), "--replay", str(archive),
                                 f"--web.listen-address=127.0.0.1:{free_port()}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with TreePeak(proc.pid) as peak:
            _, err = proc.communicate(timeout=120)
        print(f"  {'--replay of a ' + str(archive.stat().st_size // 1000) + ' kB archive with a 1 GiB member':70} "
              f"{peak.peak_kib / 1024:6.1f} MiB  (exit {proc.returncode}: {err.decode().strip()[-120:]})")
        crashes += proc.returncode != 2 or b"Traceback" in err
    print(f"  crashes (an exporter that exited, a traceback, nothing served): {crashes}")


def _node(args: list[str], port: int, log: Path):
    import shutil
    import subprocess

    binary = shutil.which("prometheus-node-exporter")
    if binary is None:
        return None
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}", *args], stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)
    _wait_port(port)
    return proc


@contextlib.contextmanager
def _side_by_side(ours: list[str], node_args: list[str], tmp: Path):
    """Ours (`ours`: its argv, `{port}` filled in) and Debian's node_exporter (`node_args`), started;
    yields [(name, port)], node_exporter's only where it is installed; both stopped after."""
    import subprocess

    from tests.conftest import free_port

    ours_port, node_port = free_port(), free_port()
    our_proc = subprocess.Popen([arg.format(port=ours_port) for arg in ours], stderr=subprocess.DEVNULL)
    _wait_port(ours_port)
    node = _node(node_args, node_port, tmp / "node.log")
    try:
        yield [("zfsnas", ours_port)] + ([("node_exporter 1.5", node_port)] if node else [])
    finally:
        for proc in (our_proc, node):
            if proc is not None:
                proc.terminate()
                proc.wait()


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def _get(port: int, headers: dict | None = None, source: str = "127.0.0.1", timeout: float = 120) -> tuple[int, float]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    started = time.monotonic()
    try:
        conn.request("GET", "/metrics", headers=headers or {})
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    except OSError:
        return 0, time.monotonic() - started
    finally:
        conn.close()


def slow_reader_figures() -> None:
    """A 26 MB page; 10 clients ask for it and never read: a scraper's time before and during.
    node_exporter serves the same page from its textfile collector."""
    import tempfile


    with tempfile.TemporaryDirectory() as tmp:
        prom = Path(tmp) / "big.prom"
        line = 'zfs_dataset_used_bytes{pool="tank",dataset="tank/projects/archive/2026/some-dataset-%06d"} 1048576\n'
        prom.write_text("# HELP zfs_dataset_used_bytes x\n# TYPE zfs_dataset_used_bytes gauge\n"
                        + "".join(line % i for i in range(260_000)))
        server = ("import sys\nfrom zfsnas.server import make_server\npage = open(sys.argv[1]).read()\n"
                  "make_server(sys.argv[2], lambda: page).serve_forever()\n")
        print(f"clients that never read a {prom.stat().st_size / 1e6:.0f} MB page: a scrape's seconds, median [max] of 5")
        with _side_by_side([sys.executable, "-c", server, str(prom), "127.0.0.1:{port}"],
                           ["--collector.disable-defaults", "--collector.textfile",
                            f"--collector.textfile.directory={tmp}"], Path(tmp)) as servers:
            for name, port in servers:
                quiet = [_get(port)[1] for _ in range(5)]
                slow = []
                for _ in range(10):
                    sock = socket.socket()
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    sock.connect(("127.0.0.1", port))
                    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                    slow.append(sock)
                time.sleep(1)
                loaded = [_get(port) for _ in range(5)]
                for sock in slow:
                    sock.close()
                print(f"  {name:18} alone {statistics.median(quiet):.2f} [{max(quiet):.2f}], with 10 that never read "
                      f"{statistics.median(t for _, t in loaded):.2f} [{max(t for _, t in loaded):.2f}] "
                      f"(statuses {sorted({s for s, _ in loaded})})")


def flood_figures(clients: int = 100, seconds: float = 5.0) -> None:
    """`clients` clients sending wrong passwords, each a new one (bcrypt cost 10), as fast as they are
    answered: a scraper's time with its right (already checked) password, and a second user's first
    request from another address. Against node_exporter 1.5 on the same web config."""
    import tempfile
    import threading

    import bcrypt
    from tests.conftest import copy_tree

    def basic(user: str, password: str) -> dict:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    with tempfile.TemporaryDirectory() as tmp:
        web = Path(tmp) / "web.yml"
        web.write_text("basic_auth_users:\n" + "".join(
            f"  {user}: '{bcrypt.hashpw(password, bcrypt.gensalt(10)).decode()}'\n"
            for user, password in (("prometheus", b"right"), ("grafana", b"other"))))
        tree = copy_tree(Path(tmp) / "tree")
        print(f"a flood of wrong passwords ({clients} clients, bcrypt cost 10, {seconds:.0f} s): a scraper's ms")
        with _side_by_side([str(Path(sys.executable).with_name("zfsnas-exporter")), "--web.listen-address=127.0.0.1:{port}",
                            f"--web.config.file={web}", "--collector.disable-defaults", "--collector.arc",
                            f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys"],
                           [f"--web.config.file={web}", "--collector.disable-defaults", "--collector.zfs",
                            f"--path.procfs={tree}/proc"], Path(tmp)) as servers:
            for name, port in servers:
                _get(port, basic("prometheus", "right"))
                quiet = [_get(port, basic("prometheus", "right"))[1] for _ in range(10)]
                stop = threading.Event()
                answered: list[int] = []

                def flood(number: int, port: int = port, stop: threading.Event = stop,
                          answered: list[int] = answered) -> None:
                    guess = 0
                    while not stop.is_set():
                        guess += 1
                        answered.append(_get(port, basic("prometheus", f"g{number}-{guess}"), timeout=30)[0])

                threads = [threading.Thread(target=flood, args=(n,), daemon=True) for n in range(clients)]
                for thread in threads:
                    thread.start()
                time.sleep(1)
                started = time.monotonic()
                loaded = []
                while time.monotonic() - started < seconds:
                    loaded.append(_get(port, basic("prometheus", "right"), timeout=60))
                other = _get(port, basic("grafana", "other"), source="127.0.0.2", timeout=60)
                stop.set()
                for thread in threads:
                    thread.join(60)
                times = sorted(t for _, t in loaded)
                print(f"  {name:18} alone {statistics.median(quiet) * 1000:.1f}, flooded median "
                      f"{statistics.median(times) * 1000:.1f} p90 {times[int(len(times) * 0.9)] * 1000:.1f} "
                      f"({len(times)} scrapes, statuses {sorted({s for s, _ in loaded})}); a new password from "
                      f"another address {other[1] * 1000:.0f} ({other[0]}); flood answers "
                      f"{dict(sorted(collections.Counter(answered).items()))}")


def input_figures(args) -> None:
    """Issue 43: every numbered case's kind, `--inputs-per-kind` seeded variations of each."""
    import tempfile

    from tests.fuzz import run_inputs

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zfsnas-inputs-") as tmp:
        work = Path(tmp)
        parts = {"imports": lambda: run_inputs.import_outcomes(args.inputs_seed, args.inputs_per_kind, work / "i"),
                 "store": lambda: run_inputs.store_outcomes(args.inputs_seed, max(1, args.inputs_per_kind // 2),
                                                            work / "s"),
                 "watch": lambda: run_inputs.watch_outcomes(args.inputs_seed, work / "w"),
                 "exporter": lambda: run_inputs.exporter_outcomes(args.inputs_seed, work / "e")}
        outcomes = []
        for name, part in parts.items():
            (work / name[0]).mkdir()
            begun = time.monotonic()
            try:
                found = part()
            except Exception as exc:     # the harness itself: said as a crash of that part, the others run
                found = [run_inputs.Outcome(0, f"the {name} part", "crash", f"{type(exc).__name__}: {exc}", 0, 0.0)]
            outcomes += found
            print(f"  {name}: {len(found)} cases in {time.monotonic() - begun:.0f} s", flush=True)
    by_number = collections.defaultdict(list)
    for outcome in outcomes:
        by_number[outcome.number].append(outcome)
    print(f"issue 43 inputs: seed {args.inputs_seed}, {len(outcomes)} cases in {time.monotonic() - started:.0f} s; "
          f"crashes {sum(o.outcome != 'ok' for o in outcomes)}; peak RSS of each case's whole process tree:")
    for number in sorted(by_number):
        cases = by_number[number]
        worst = max(cases, key=lambda o: o.rss_kib)
        crashed = [o for o in cases if o.outcome != "ok"]
        print(f"  case {number or 'controls'}: {len(cases)} cases, {len(crashed)} crashes, worst {worst.rss_kib / 1024:.1f}"
              f" MiB ({worst.kind})")
        for o in crashed[:5]:
            print(f"      CRASH {o.kind}: {o.detail}")
    print("  the exporter's cases and the long watch:")
    for o in outcomes:
        if o.number in (1, 4, 5, 6, 9) and "exporter" in o.kind or o.number in (6, 9) or "samples" in o.kind:
            print(f"    {o.number}: {o.kind:62.62} {o.rss_kib / 1024:6.1f} MiB  {o.outcome}  {o.detail[:220]}")


PARTS = ("http", "hostile", "slow", "flood", "corpus", "inputs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--per-class", type=int, default=300)
    parser.add_argument("--rss-every", type=int, default=10)
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts to run: {', '.join(PARTS)}")
    parser.add_argument("--inputs-seed", type=int, default=43)
    parser.add_argument("--inputs-per-kind", type=int, default=5)
    args = parser.parse_args()
    parts = args.only.split(",")
    if "http" in parts:
        http_figures()
    if "hostile" in parts:
        hostile_figures()
    if "slow" in parts:
        slow_reader_figures()
    if "flood" in parts:
        flood_figures()
    if "corpus" in parts:
        corpus_figures(args)
    if "inputs" in parts:
        input_figures(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
