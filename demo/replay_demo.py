#!/usr/bin/env python3
"""`./dev demo`: real NAS data without a NAS. Replays captures with `zfsnas-exporter --replay` and
starts a local Prometheus (Debian's `prometheus`, with our alert rules) scraping them.

    demo/replay_demo.py [--port 9090] [--once] [CAPTURE.tar.gz ...]

Without arguments it replays the captures committed under tests/fixtures/captures/ (taken by the
e2e guests on live OpenZFS: every collector) and, for each committed live tree
tests/fixtures/linux-zfs-*-live/, a capture made from that tree on the spot (its kstats and module
parameters: those trees hold no exact `zfs`/`zpool` command lines, so only the kstat collectors
serve there). Snapshots are
stepped through one per scrape and started over (`--replay.loop`). `--once` waits until
Prometheus has scraped every capture, prints what it would serve, then stops (tests use it).
Open the printed Prometheus URL for graphs; with a Grafana, add it as a data source and import
dashboards/*.json.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT / "tests" / "fixtures"
KSTAT_COLLECTORS = ["--collector.disable-defaults", "--collector.arc", "--collector.txg", "--collector.objset",
                    "--collector.poolstats", "--collector.tunables"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def default_captures(work: Path) -> list[Path]:
    captures = sorted((FIXTURES / "captures").glob("*.tar.gz"))
    for tree in sorted(FIXTURES.glob("linux-zfs-*-live")):
        out = work / f"{tree.name}.tar.gz"
        subprocess.run([sys.executable, "-m", "zfsnas.cli", "capture", str(out), "--path.procfs", str(tree / "proc"),
                        "--path.sysfs", str(tree / "sys"), "--path.udev.data", str(work / "no-udev"),
                        "--capture.metrics-url", "", *KSTAT_COLLECTORS], check=True, capture_output=True)
        captures.append(out)
    return captures


def start_replay(capture: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "zfsnas.cli", "--replay", str(capture), "--replay.loop",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"replay of {capture} exited:\n{log.read_text()}")
            time.sleep(0.2)
    raise SystemExit(f"replay of {capture} did not answer within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captures", nargs="*", type=Path)
    parser.add_argument("--port", type=int, default=9090, help="Prometheus port (default 9090)")
    parser.add_argument("--once", action="store_true", help="stop once every capture has been scraped")
    args = parser.parse_args()
    from tests.integration.prometheus import Prometheus

    work = Path(tempfile.mkdtemp(prefix="zfsnas-demo-"))
    procs: list[subprocess.Popen] = []
    prometheus = None
    try:
        captures = args.captures or default_captures(work)
        targets = {}
        for capture in captures:
            port = free_port()
            procs.append(start_replay(capture, port, work / f"replay-{port}.log"))
            targets[f"127.0.0.1:{port}"] = capture
        prometheus = Prometheus(work / "prometheus", args.port, list(targets), scrape_interval="5s",
                                rule_files=[str(ROOT / "alerts" / "zfsnas.rules.yml")])
        for target, capture in targets.items():
            print(f"replaying {capture.name}: http://{target}/metrics")
        print(f"Prometheus: {prometheus.url}/graph?g0.expr=zfs_arc_size_bytes&g0.tab=0  (alerts: {prometheus.url}/alerts)")
        print(f"Grafana: add {prometheus.url} as a Prometheus data source and import dashboards/*.json")
        up = prometheus.wait_for('count(up{job="zfsnas"} == 1) == ' + str(len(targets)), timeout=60)
        if args.once:
            for row in prometheus.query("zfs_arc_size_bytes"):
                print(f"{row['metric']['instance']} zfs_arc_size_bytes {row['value'][1]}")
            return 0 if up else 1
        print("Ctrl-C stops the demo")
        stopped = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopped.set())
        try:
            while not stopped.wait(1):
                pass
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if prometheus is not None:
            prometheus.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
