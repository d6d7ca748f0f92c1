#!/usr/bin/env python3
"""The `bench` collector against the size of the benchmark store (issue 43, case 1).

    .venv/bin/python benchmarks/bench_store_bench.py [--rounds 2] [--scrapes 40] [--baseline DIR]

Stores made with the store's schema (tests/collectors/test_bench_scale.py `bulk_store`): 100
results of 10 configurations; 1,000 configurations (the most served); 100,000 results of one
configuration; 100,000 results of 100,000 configurations (what a fio file of 100,000 jobs stored
before imports were bounded). For each, the real exporter (`--collector.bench` only) is started,
and measured: seconds from its start to the first page with the store's series, the scrape's
median over `--scrapes` scrapes once served, the page's size, the peak RSS of its process tree.
Rounds alternate the stores (2 shared cores: read ratios against the small store of the same
round, not milliseconds). `--baseline DIR`: the same against the exporter of another checkout
(its `exporter/` first on PYTHONPATH), e.g. main before issue 43 (`git archive`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.collectors.test_bench_scale import bulk_store  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.fuzz.treerss import TreePeak  # noqa: E402

STORES = (("100 results, 10 configurations", 10, 100), ("1,000 configurations", 1000, 1000),
          ("100,000 results, 1 configuration", 1, 100_000),
          ("100,000 results, 100,000 configurations", 100_000, 100_000))


def measure(db: Path, scrapes: int, code_root: Path | None, budget: float = 300.0) -> dict:
    port = free_port()
    env = dict(os.environ)
    if code_root is not None:
        env["PYTHONPATH"] = f"{code_root / 'exporter'}"
    argv = [sys.executable, "-c", "import sys; from zfsnas.cli import main; sys.exit(main())",
            f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults", "--collector.bench",
            "--bench.db", str(db)]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    out: dict = {}
    try:
        with TreePeak(proc.pid) as peak:
            page = ""
            while time.monotonic() - started < budget:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=budget) as response:
                        page = response.read().decode()
                except OSError:
                    time.sleep(0.2)
                    continue
                if "zfs_bench_runs_total{" in page:
                    break
                time.sleep(0.2)
            out["served_after"] = time.monotonic() - started
            times = []
            for _ in range(scrapes):
                begun = time.perf_counter()
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=budget) as response:
                    page = response.read().decode()
                times.append(time.perf_counter() - begun)
            out["p50"] = statistics.median(times)
            out["page"] = len(page)
            out["series"] = page.count("\nzfs_bench_runs_total{")
        out["rss"] = peak.peak_kib / 1024
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout whose exporter/ runs as 'before'")
    args = parser.parse_args()
    codes = [("now", None)] + ([("before", args.baseline)] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="zfsnas-store-bench-") as tmp:
        dbs = {}
        for name, configurations, results in STORES:
            dbs[name] = Path(tmp) / f"{configurations}-{results}.sqlite"
            bulk_store(dbs[name], configurations, results)
        for round_ in range(1, args.rounds + 1):
            for code, root in codes:
                base = None
                for name, _c, _r in STORES:
                    m = measure(dbs[name], args.scrapes, root)
                    base = base or m
                    print(f"round {round_} {code:6} {name:42} served after {m['served_after']:6.1f} s, scrape p50 "
                          f"{m['p50'] * 1000:8.1f} ms (x{m['p50'] / base['p50']:6.2f} of the small store), page "
                          f"{m['page'] / 1e6:6.2f} MB ({m['series']} configurations), peak RSS {m['rss']:6.1f} MiB",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
