#!/usr/bin/env python3
"""Cost of the `datasets`/`pools` background refresh, and proof that scrapes do not pay for it.

    .venv/bin/python benchmarks/refresh_bench.py [--scrapes N]

Builds recorded `zfs`/`zpool` outputs (OpenZFS 2.3 format) for a NAS with 5,000 datasets and
50,000 snapshots, replayed by the test stand-in (tests/fixtures/commands/standin.py), and compares
with the small fixture (9 datasets, 9 snapshots), all in the same run:
1. refresh cost in-process: wall time and peak Python memory (tracemalloc) of one refresh of each
   source, and the snapshot count streamed line by line vs read as one string;
2. scrape latency (p50/p99) and RSS of the real exporter process: small fixture; large with
   snapshots counted; large with `--datasets.snapshots off`; large while every source refreshes
   back to back (interval 0, the worst case for the GIL); large while every command hangs 10 s.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ROOT / "tests/fixtures/commands"
KSTAT = ROOT / "tests/fixtures/linux-zfs-2.3.2"
sys.path.insert(0, str(ROOT / "exporter"))
from zfsnas.collectors.datasets import build_families  # noqa: E402
from zfsnas.sources.commands import CommandRunner  # noqa: E402
from zfsnas.sources.zfs_datasets import LIST_SNAPSHOTS, read_datasets, summarise_snapshots  # noqa: E402
from zfsnas.sources.zpool import read_pools, read_status  # noqa: E402

DATASETS = 5_000
SNAPSHOTS = 50_000
SOURCES = ("zfs_datasets", "zfs_snapshots", "zpool_list", "zpool_status")


def build_large(out: Path) -> None:
    """The small fixture's pools, plus 5,000 datasets and 50,000 snapshots in `tank`."""
    shutil.copytree(COMMANDS / "zfs-2.3", out)
    small = (out / "zfs-list.txt").read_text().splitlines()
    template = next(line for line in small if line.startswith("tank/media\t")).split("\t")
    rows = small[:]
    for i in range(DATASETS - len(small)):
        fields = template[:]
        fields[0] = f"tank/share/project-{i:05d}"
        fields[2] = str(10**9 + i * 4096)
        rows.append("\t".join(fields))
    (out / "zfs-list.txt").write_text("".join(r + "\n" for r in rows))
    names = [r.split("\t", 1)[0] for r in rows]
    per = SNAPSHOTS // len(names) + 1
    snaps = (f"{name}@autosnap_2026-11-{1 + k % 28:02d}_{k:04d}_hourly\t{1794873600 + k * 3600}\n"
             for name in names for k in range(per))
    with open(out / "zfs-list-snapshots.txt", "w") as f:
        f.writelines(snap for _, snap in zip(range(SNAPSHOTS), snaps))


def prefix(directory: Path, *options: str) -> str:
    return shlex.join([sys.executable, str(COMMANDS / "standin.py"), *options, str(directory)])


def timed(fn, repeat: int = 3) -> tuple[float, int]:
    """Best wall time of `repeat` runs, and the peak traced memory of one run."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak


def refresh_costs(directory: Path) -> dict[str, tuple[float, int]]:
    runner = CommandRunner(prefix(directory))
    return {
        "zfs_datasets (zfs list + build families)": timed(lambda: build_families(read_datasets(runner.run))),
        "zfs_snapshots (streamed count)": timed(lambda: summarise_snapshots(runner.lines(list(LIST_SNAPSHOTS)))),
        "zfs_snapshots if read as one string": timed(
            lambda: summarise_snapshots(runner.run(list(LIST_SNAPSHOTS)).splitlines())),
        "zpool_list + zpool_status": timed(lambda: (read_pools(runner.run), read_status(runner.run))),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def scrape_run(flags: list[str], scrapes: int, wait_sources: bool) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    exe = Path(sys.executable).with_name("zfsnas-exporter")
    argv = [str(exe), f"--web.listen-address=127.0.0.1:{port}", "--path.procfs", str(KSTAT / "proc"),
            "--path.sysfs", str(KSTAT / "sys"), *flags]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                text = get(url)
                if not wait_sources or all(f'zfs_exporter_source_success{{source="{s}"}} 1' in text
                                           for s in SOURCES if f'source="{s}"' in text):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"exporter not ready: {argv}")
            time.sleep(0.2)
        times = []
        for _ in range(scrapes):
            started = time.perf_counter()
            text = get(url)
            times.append(time.perf_counter() - started)
        rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0]) * 1024
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    times.sort()
    return {"p50": statistics.median(times), "p99": times[min(len(times) - 1, int(len(times) * 0.99))],
            "rss": rss, "lines": text.count("\n")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        large = Path(tmp) / "large"
        build_large(large)
        small = COMMANDS / "zfs-2.3"
        print(f"# refresh cost (best of 3; peak = tracemalloc peak of one refresh)")
        print(f"{'source':44} {'small':>20} {'5k datasets/50k snaps':>24} {'ratio':>7}")
        small_costs, large_costs = refresh_costs(small), refresh_costs(large)
        for name, (t_small, m_small) in small_costs.items():
            t_large, m_large = large_costs[name]
            print(f"{name:44} {t_small * 1000:8.1f} ms {m_small / 1024:7.0f} KiB "
                  f"{t_large * 1000:10.1f} ms {m_large / 1024:8.0f} KiB {t_large / t_small:6.1f}x")
        fast = ["--pools.refresh-interval", "3600", "--datasets.refresh-interval", "3600"]
        modes = {
            "small fixture (baseline)": ([*fast, "--zfs.command-prefix", prefix(small)], True),
            "5k datasets, 50k snapshots counted": ([*fast, "--zfs.command-prefix", prefix(large)], True),
            "5k datasets, --datasets.snapshots off": (
                [*fast, "--datasets.snapshots", "off", "--zfs.command-prefix", prefix(large)], True),
            "5k/50k, refreshing back to back": (
                ["--pools.refresh-interval", "0", "--datasets.refresh-interval", "0",
                 "--datasets.snapshot-interval", "0", "--zfs.command-prefix", prefix(large)], True),
            "every command hanging (10 s)": (
                [*fast, "--zfs.command-prefix", prefix(large, "--sleep", "10")], False),
        }
        print(f"\n# scrape latency, {args.scrapes} scrapes each (exporter process, kstat fixture 2.3.2)")
        print(f"{'mode':40} {'lines':>7} {'p50 ms':>8} {'p99 ms':>8} {'RSS MiB':>8} {'p50 vs baseline':>16}")
        baseline = None
        for name, (flags, wait) in modes.items():
            result = scrape_run(flags, args.scrapes, wait)
            baseline = baseline or result
            print(f"{name:40} {result['lines']:7d} {result['p50'] * 1000:8.2f} {result['p99'] * 1000:8.2f} "
                  f"{result['rss'] / 2**20:8.1f} {result['p50'] / baseline['p50']:15.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
