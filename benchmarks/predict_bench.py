#!/usr/bin/env python3
"""How long `zfsnas-bench predict` takes on a 10 GiB corpus with its default sample, and how much
memory it holds, against reading the whole corpus once (the floor of any tool that looks at every
byte) measured in the same run.

    .venv/bin/python benchmarks/predict_bench.py [--gib 10] [--small-gib 1] [--dir /var/tmp] [--keep]

Generates the corpus with tests/e2e/guest/corpusgen.py (text, FITS-like images, already-compressed
files, sparse files, tiny files; seeded) under --dir, then, alternating twice: `cat`-like reading of
every file (64 KiB reads), and `zfsnas-bench predict --corpus DIR --no-store` with its defaults
(2 % sample; off, lz4, zstd-fast-1, zstd-1, zstd-3; 128K and 1M; every CPU). Prints the medians,
predict / full read, and the peak resident memory of predict's largest process; the same on a
--small-gib corpus shows that memory does not grow with the corpus. The corpora are deleted after
(unless --keep). The page cache is not dropped: both sides read what is cached alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("corpusgen", ROOT / "tests/e2e/guest/corpusgen.py")
assert _spec is not None and _spec.loader is not None
corpusgen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpusgen)
BIN = Path(sys.executable).parent / "zfsnas-bench"


def read_all(root: Path) -> float:
    started = time.monotonic()
    for directory, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                while f.read(1 << 16):
                    pass
    return time.monotonic() - started


def predict(root: Path) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) of the largest process, and the printed headline."""
    started = time.monotonic()
    script = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
              "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); "
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", script, str(BIN), "predict", "--corpus", str(root), "--no-store"],
                          capture_output=True, text=True, check=True)
    seconds = time.monotonic() - started
    return seconds, int(proc.stderr.strip().splitlines()[-1]), proc.stdout.splitlines()[0]


def measure(root: Path, rounds: int) -> dict[str, float]:
    reads, predicts, rss = [], [], []
    headline = ""
    for _ in range(rounds):
        reads.append(read_all(root))
        seconds, peak, headline = predict(root)
        predicts.append(seconds)
        rss.append(peak)
    print(f"  {headline}")
    return {"read": statistics.median(reads), "predict": statistics.median(predicts), "rss_mib": max(rss) / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=10.0)
    parser.add_argument("--small-gib", type=float, default=1.0)
    parser.add_argument("--dir", default="/var/tmp")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    base = Path(args.dir) / f"zfsnas-predict-bench-{os.getpid()}"
    results = {}
    try:
        for gib in (args.small_gib, args.gib):
            root = base / f"{gib:g}GiB"
            started = time.monotonic()
            paths = corpusgen.generate(root, int(gib * 2**30), seed=40)
            print(f"corpus {gib:g} GiB: {len(paths)} files, generated in {time.monotonic() - started:.0f} s")
            results[gib] = measure(root, args.rounds)
            if not args.keep:
                shutil.rmtree(root)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    for gib, r in results.items():
        print(f"{gib:g} GiB: predict {r['predict']:.1f} s (default sample), reading every byte {r['read']:.1f} s, "
              f"predict / full read {r['predict'] / r['read']:.2f}; peak RSS of predict's largest process "
              f"{r['rss_mib']:.0f} MiB")
    print(f"CPUs {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}; own rusage {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
