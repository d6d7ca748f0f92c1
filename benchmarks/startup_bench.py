#!/usr/bin/env python3
"""Start-up and resident memory of zfsnas-exporter against Debian's node_exporter, interleaved.

    .venv/bin/python benchmarks/startup_bench.py [--rounds 9] [--scrapes 20] [--importtime 15]

Method: the trees, argv and exporters of scrape_bench.py (live-2.3.2 and live-2.1.11; `kstat`
and `default` collector sets). A round starts ours, then node_exporter (the order flips every
round), each timed from spawn to its first complete /metrics answer, scrapes each `--scrapes`
times and reads VmRSS, then stops both. Printed: median start-up of each, their ratio, median
RSS of each and the ratio, with [min..max] over the rounds. `--importtime N` also prints the N
modules with the largest own import time of ours with the default collectors in its first 0.5 s
(`-X importtime`), never scraped: the start path alone, since background refreshes wait up to 1 s
for the first answer (refresh.START) and the modules they need come after it.
The package's bytecode is compiled first (compileall), as pip does on install and Python on a
first run: with PYTHONDONTWRITEBYTECODE set (as in this machine's environment) every start would
otherwise compile our modules anew (40-70 ms here), which no installed exporter pays.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

spec = importlib.util.spec_from_file_location("scrape_bench", Path(__file__).with_name("scrape_bench.py"))
bench = sys.modules["scrape_bench"] = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(bench)  # type: ignore[union-attr]


def spread(values: list[float], scale: float = 1.0) -> str:
    return f"{statistics.median(values) * scale:.1f} [{min(values) * scale:.1f}..{max(values) * scale:.1f}]"


def rounds(tree: Path, commands: str, collectors: str, count: int, scrapes: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("start_ours", "start_theirs", "rss_ours", "rss_theirs")}
    for i in range(count):
        ours = bench.ours_exporter(tree, commands, collectors)
        theirs = bench.Exporter.on_free_port("node_exporter", bench.node_argv, tree)
        pair = [("ours", ours), ("theirs", theirs)]
        try:
            for key, exporter in pair if i % 2 == 0 else pair[::-1]:
                out[f"start_{key}"].append(exporter.start())
            for _ in range(scrapes):
                for _, exporter in pair:
                    exporter.scrape()
            for key, exporter in pair:
                out[f"rss_{key}"].append(exporter.rss_bytes())
        finally:
            ours.stop()
            theirs.stop()
    return out


def importtime(tree: Path, top: int) -> None:
    """The modules with the largest own import time in the first 0.5 s of ours (then it is stopped)."""
    argv = bench.ours_argv(tree, "2.3", "default", bench.free_port())
    code = ("import sys, threading; sys.argv = sys.argv[:1] + sys.argv[2:]; from zfsnas import cli; "
            "threading.Timer(0.5, lambda: __import__('os').kill(__import__('os').getpid(), 15)).start(); cli.main()")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *argv], capture_output=True, text=True)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self" not in line:
            own, total, name = line.removeprefix("import time:").split("|")
            rows.append((int(own), int(total), name.rstrip()))
    print(f"\n{len(rows)} modules imported, {sum(r[0] for r in rows) / 1e3:.1f} ms in all; largest own times:")
    for own, total, name in sorted(rows, reverse=True)[:top]:
        print(f"  {own / 1e3:6.2f} ms own {total / 1e3:6.2f} ms cumulative  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--scrapes", type=int, default=20, help="scrapes of each before RSS is read (default 20)")
    parser.add_argument("--trees", nargs="+", default=["live-2.3.2", "live-2.1.11"], choices=["live-2.3.2", "live-2.1.11"])
    parser.add_argument("--sets", nargs="+", default=["kstat", "default"], choices=bench.SETS)
    parser.add_argument("--importtime", type=int, default=0, metavar="N", help="also the N slowest imports")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(bench.ROOT / "exporter/zfsnas")], check=True)
    print("| tree | zfsnas collectors | start-up ms ours | theirs | ratio | RSS MB ours | theirs | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label in args.trees:
            commands, build = bench.TREES[label]
            tree = build(Path(tmp) / label)
            for collectors in args.sets:
                r = rounds(tree, commands, collectors, args.rounds, args.scrapes)
                start = [a / b for a, b in zip(r["start_ours"], r["start_theirs"])]
                rss = [a / b for a, b in zip(r["rss_ours"], r["rss_theirs"])]
                print(f"| {label} | {collectors} | {spread(r['start_ours'], 1e3)} | {spread(r['start_theirs'], 1e3)} "
                      f"| {spread(start)} | {spread(r['rss_ours'], 2**-20)} | {spread(r['rss_theirs'], 2**-20)} "
                      f"| {statistics.median(rss):.2f} [{min(rss):.2f}..{max(rss):.2f}] |", flush=True)
        if args.importtime:
            importtime(tree, args.importtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
