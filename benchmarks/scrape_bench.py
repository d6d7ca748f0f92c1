#!/usr/bin/env python3
"""Scrape latency (p50/p99) and RSS of zfsnas-exporter against Debian's node_exporter (ZFS collector only).

    ./dev bench            # or: .venv/bin/python benchmarks/scrape_bench.py [--scrapes N]

Both exporters read the same kstat trees, built here in the exact OpenZFS 2.3 formats:
  realistic: 2 pools, 50 datasets, 24 txgs of history per pool
  large:     4 pools, 2,000 objsets, a full txg history (100 txgs) per pool
node_exporter runs with `--collector.disable-defaults --collector.zfs`, so it does strictly less
(no txgs, no tx-assign histogram, no dataset I/O typing). The ratios printed are ours / theirs,
measured in the same run on the same machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gen", ROOT / "tests/fixtures/generate_kstat_fixtures.py")
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)


def build_tree(root: Path, pools: int, objsets: int, history: int) -> None:
    """A 2.3-format tree: copy the fixture's global kstats, then write `pools` pools with `objsets` in all."""
    fixture = ROOT / "tests/fixtures/linux-zfs-2.3.2"
    shutil.copytree(fixture / "sys", root / "sys")
    kstat = root / "proc/spl/kstat/zfs"
    kstat.mkdir(parents=True)
    for name in ("arcstats", "dmu_tx", "fm"):
        shutil.copy(fixture / "proc/spl/kstat/zfs" / name, kstat / name)
    per_pool = objsets // pools
    for p in range(pools):
        pool = f"pool{p}"
        pdir = kstat / pool
        pdir.mkdir()
        (pdir / "state").write_text("ONLINE\n")
        (pdir / "txgs").write_text(gen.txgs_text(gen.txg_rows(1_000_000, history, 10**12, seed=p)))
        (pdir / "dmu_tx_assign").write_text(
            gen.named_kstat(100 + p, [(f"{1 << i} ns", 4, c) for i, c in enumerate(gen.tx_assign_counts(p))]))
        (pdir / "iostats").write_text(gen.named_kstat(200 + p, [(f, 4, 1000 + i) for i, f in enumerate(gen.IOSTATS_23)]))
        for d in range(per_pool):
            name = pool if d == 0 else f"{pool}/data/set{d:04d}"
            (pdir / f"objset-0x{d + 0x36:x}").write_text(
                gen.named_kstat(300 + d, gen.objset_fields("2.3", name, 10**9 + d, 2 * 10**9 + d)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not answer")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(argv: list[str], port: int, scrapes: int) -> dict:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_ready(url, proc)
        for _ in range(5):  # warm up
            body = urllib.request.urlopen(url).read()
        times = []
        for _ in range(scrapes):
            start = time.perf_counter()
            body = urllib.request.urlopen(url).read()
            times.append(time.perf_counter() - start)
        times.sort()
        return {"p50": statistics.median(times), "p99": times[min(len(times) - 1, int(len(times) * 0.99))],
                "rss": rss_bytes(proc.pid),
                "samples": sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))}
    finally:
        proc.terminate()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    node = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
    ours = str(Path(sys.executable).with_name("zfsnas-exporter"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, pools, objsets, history in (("realistic", 2, 50, 24), ("large", 4, 2000, 100)):
            tree = Path(tmp) / label
            build_tree(tree, pools, objsets, history)
            port = free_port()
            zfsnas = measure([ours, f"--web.listen-address=127.0.0.1:{port}", f"--path.procfs={tree}/proc",
                              f"--path.sysfs={tree}/sys", "--no-collector.datasets", "--no-collector.pools",
                              "--no-collector.disks", "--no-collector.bench"] if _has_flags(ours) else
                             [ours, f"--web.listen-address=127.0.0.1:{port}", f"--path.procfs={tree}/proc",
                              f"--path.sysfs={tree}/sys"], port, args.scrapes)
            port = free_port()
            theirs = measure([node, f"--web.listen-address=127.0.0.1:{port}", f"--path.procfs={tree}/proc",
                              f"--path.sysfs={tree}/sys", "--collector.disable-defaults", "--collector.zfs"],
                             port, args.scrapes)
            rows.append((label, zfsnas, theirs))
    print(f"{'tree':<10} {'exporter':<14} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>8} {'samples':>8}")
    for label, zfsnas, theirs in rows:
        for name, m in (("zfsnas", zfsnas), ("node_exporter", theirs)):
            print(f"{label:<10} {name:<14} {m['p50'] * 1e3:>8.2f} {m['p99'] * 1e3:>8.2f} {m['rss'] / 1e6:>8.1f} {m['samples']:>8}")
        print(f"{label:<10} {'ratio':<14} {zfsnas['p50'] / theirs['p50']:>8.2f} {zfsnas['p99'] / theirs['p99']:>8.2f} "
              f"{zfsnas['rss'] / theirs['rss']:>8.2f} {zfsnas['samples'] / theirs['samples']:>8.2f}")
    return 0


def _has_flags(ours: str) -> bool:
    """Collectors other than the kstat ones are switched off where this build has them."""
    out = subprocess.run([ours, "--help"], capture_output=True, text=True).stdout
    return "--collector.datasets" in out and "--collector.disks" in out and "--collector.bench" in out and "--collector.pools" in out


if __name__ == "__main__":
    sys.exit(main())
