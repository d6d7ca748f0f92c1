#!/usr/bin/env python3
"""Cost of the `datasets`/`pools` background refresh, and proof that scrapes do not pay for it.

    .venv/bin/python benchmarks/refresh_bench.py [--scrapes N] [--reps N] [--busy-only]

Builds recorded `zfs`/`zpool` outputs (OpenZFS 2.3 format) for a NAS with 5,000 datasets and
50,000 snapshots, replayed by the test stand-in (tests/fixtures/commands/standin.py), and compares
with the small fixture (9 datasets, 9 snapshots), all in the same run:
1. refresh cost in-process: wall time and peak Python memory (tracemalloc) of one refresh of each
   source, and the snapshot count streamed line by line vs read as one string;
2. scrape latency (p50/p99) and RSS of the real exporter process: small fixture; large with
   snapshots counted; large with `--datasets.snapshots off`; large while every source refreshes
   back to back (interval 0, the worst case for the GIL); large while every command hangs 10 s.
3. issue 17's target, `--reps` times alternating: the large tree idle and refreshing back to back,
   for the exporter as it is and as it was (`old`: `zfs list` parsed and rendered in the refresh
   thread rather than a forked child). Per mode the medians of p50 and p99, busy p99 / idle p99,
   the median duration of one `zfs_datasets` refresh (from the exporter's debug log) and the CPU
   seconds the exporter process and its children (forked parsers, the `zfs` stand-ins) used per
   scrape.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
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
# The exporter as it was before issue 17: `zfs list` parsed and rendered in the refresh thread.
OLD = ("import sys; from zfsnas import cli; from zfsnas.collectors import datasets; "
       "datasets.DatasetsCollector.parse_in_child = False; sys.exit(cli.main())")
REFRESHED = re.compile(r"source zfs_datasets refreshed in ([0-9.]+)s")
BUSY = ["--pools.refresh-interval", "0", "--datasets.refresh-interval", "0", "--datasets.snapshot-interval", "0"]


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


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process' own utime+stime, that of its children it has waited for), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = [int(f) for f in fields[11:15]]
    return (ticks[0] + ticks[1]) / 100, (ticks[2] + ticks[3]) / 100


def stop(proc: subprocess.Popen) -> None:
    """Stop an exporter we started: SIGTERM, then SIGKILL after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def scrape_run(flags: list[str], scrapes: int, wait_sources: bool, old: bool = False) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    head = [sys.executable, "-c", OLD] if old else [str(Path(sys.executable).with_name("zfsnas-exporter"))]
    argv = [*head, f"--web.listen-address=127.0.0.1:{port}", "--path.procfs", str(KSTAT / "proc"),
            "--path.sysfs", str(KSTAT / "sys"), "--log.level", "debug", *flags]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    refreshes: list[float] = []
    counting = threading.Event()

    def watch_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if counting.is_set() and (match := REFRESHED.search(line)):
                refreshes.append(float(match.group(1)))

    threading.Thread(target=watch_log, daemon=True).start()
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
        counting.set()
        cpu_before = cpu_seconds(proc.pid)
        for _ in range(scrapes):
            started = time.perf_counter()
            text = get(url)
            times.append(time.perf_counter() - started)
        cpu_after = cpu_seconds(proc.pid)
        counting.clear()
        rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0]) * 1024
    finally:
        stop(proc)
    times.sort()
    return {"p50": statistics.median(times), "p99": times[min(len(times) - 1, int(len(times) * 0.99))],
            "rss": rss, "lines": text.count("\n"), "refresh": statistics.median(refreshes) if refreshes else None,
            "cpu": (cpu_after[0] - cpu_before[0]) / scrapes, "children_cpu": (cpu_after[1] - cpu_before[1]) / scrapes}


def gil_target(large: Path, scrapes: int, reps: int) -> None:
    """Issue 17: scrape p99 while `datasets`/`pools` refresh back to back, within 2x of idle p99."""
    fast = ["--pools.refresh-interval", "3600", "--datasets.refresh-interval", "3600"]
    modes = {(exporter, load): ([*(BUSY if load == "busy" else fast), "--zfs.command-prefix", prefix(large)],
                                exporter == "old")
             for exporter in ("old", "new") for load in ("idle", "busy")}
    runs: dict[tuple[str, str], list[dict]] = {mode: [] for mode in modes}
    for _ in range(reps):
        for mode, (flags, old) in modes.items():
            runs[mode].append(scrape_run(flags, scrapes, True, old))

    def median(mode: tuple[str, str], key: str) -> float:
        values = [r[key] for r in runs[mode] if r[key] is not None]
        return statistics.median(values) if values else float("nan")

    print(f"\n# 5k datasets/50k snapshots, idle vs refreshing back to back: {reps} x {scrapes} scrapes, alternating; "
          "medians over repetitions [min..max of p99]")
    print(f"{'exporter':9} {'load':5} {'p50 ms':>8} {'p99 ms':>8} {'p99 range':>17} {'busy/idle p99':>14} "
          f"{'refresh s':>10} {'CPU ms/scrape':>14} {'children':>9}")
    for (exporter, load) in modes:
        p99s = [r["p99"] * 1000 for r in runs[exporter, load]]
        ratio = median((exporter, load), "p99") / median((exporter, "idle"), "p99")
        refresh = median((exporter, load), "refresh")
        print(f"{exporter:9} {load:5} {median((exporter, load), 'p50') * 1000:8.1f} {statistics.median(p99s):8.1f} "
              f"{f'[{min(p99s):.0f}..{max(p99s):.0f}]':>17} {ratio:13.2f}x "
              f"{'' if refresh != refresh else f'{refresh:.3f}':>10} {median((exporter, load), 'cpu') * 1000:14.1f} "
              f"{median((exporter, load), 'children_cpu') * 1000:9.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5, help="repetitions of the idle/busy comparison (default 5)")
    parser.add_argument("--busy-only", action="store_true", help="only the idle/busy comparison (part 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        large = Path(tmp) / "large"
        build_large(large)
        small = COMMANDS / "zfs-2.3"
        if args.busy_only:
            gil_target(large, args.scrapes, args.reps)
            return 0
        print("# refresh cost (best of 3; peak = tracemalloc peak of one refresh)")
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
        gil_target(large, args.scrapes, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
