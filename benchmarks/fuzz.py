#!/usr/bin/env python3
"""The full fuzz run (issue 16): the seeded corpus of tests/fuzz/corpus.py at full size, 100 MB
command outputs included, then the HTTP side (silent clients, basic-auth timing). Prints the
figures docs/reliability.md quotes.

    .venv/bin/python benchmarks/fuzz.py [--seed 16] [--per-class 300] [--rss-every 10]

Every case is scraped twice in-process through the real server and checked with
`promtool check metrics`; the big cases, every `--rss-every`-th case and an unchanged tree run
in a process of their own whose peak RSS (VmHWM) is reported.
"""

from __future__ import annotations

import argparse
import base64
import collections
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
    import bcrypt

    from zfsnas.server import make_server, serve_in_thread
    from zfsnas.webconfig import WebConfig

    web = WebConfig(users={"prometheus": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10))})
    web._make_dummy()
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--per-class", type=int, default=300)
    parser.add_argument("--rss-every", type=int, default=10)
    args = parser.parse_args()
    http_figures()
    corpus_figures(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
