#!/usr/bin/env python3
"""`./dev demo`: real NAS data without a NAS. Replays captures with `zfsnas-exporter --replay` and
starts a local Prometheus (Debian's `prometheus`, with our alert rules) scraping them.

    demo/replay_demo.py [--port 9090] [--scrape-interval 5s] [--once] [CAPTURE.tar.gz ...]

Without arguments it replays the captures committed under tests/fixtures/captures/ (taken by the
e2e guests on live OpenZFS: every collector) and, for each committed live tree
tests/fixtures/linux-zfs-*-live/, a capture made from that tree on the spot (its kstats and module
parameters: those trees hold no exact `zfs`/`zpool` command lines, so only the kstat collectors
serve there). Each replay is one NAS to Prometheus: its `nas` and `instance` labels are the
capture's name. Snapshots are stepped through one per scrape and looped (`--replay.loop`: counters
go on, timestamps move with the clock, so nothing resets and no age alert fires that the NAS did not
have). `--once` waits until Prometheus has scraped every capture, prints what it would serve, then
stops. The printed URLs are the pages of the Prometheus started here (Debian's 2.42 serves its
classic UI only: `/classic/alerts`, not `/alerts`); with a Grafana, add it as a data source and
import dashboards/*.json.
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
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT / "tests" / "fixtures"
KSTAT_COLLECTORS = ["--collector.disable-defaults", "--collector.arc", "--collector.txg", "--collector.objset",
                    "--collector.poolstats", "--collector.tunables"]
# What zfsnas adds to a NAS's monitoring, one query each (docs/capture.md#the-demo).
LOOK_AT = (
    ("txgs synced per second and pool, from the txg history node_exporter does not read",
     "rate(zfs_pool_txgs_synced_total[1m])"),
    ("the ARC hit ratio, a recording rule of alerts/zfsnas.rules.yml",
     "instance:zfs_arc_hit_ratio:rate5m"),
    ("compression per dataset as ZFS prints it (1.48 = 1.48x), from `zfs list` run off the scrape path",
     "zfs_dataset_compressratio"),
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def capture_name(capture: Path) -> str:
    name = capture.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        name = name.removesuffix(suffix)
    return name


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
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/healthy", timeout=5).read()
            return proc
        except urllib.error.HTTPError:
            return proc  # it answers
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"replay of {capture} exited:\n{log.read_text()}")
            time.sleep(0.2)
    raise SystemExit(f"replay of {capture} did not answer within 60 s")


def replay_problems(work: Path) -> list[str]:
    """The warnings and errors the replays logged (their logs live in the demo's temporary directory)."""
    return [f"{log.stem.removeprefix('replay-')}: {line}" for log in sorted(work.glob("replay-*.log"))
            for line in log.read_text(errors="replace").splitlines() if " level=WARNING " in line or " level=ERROR " in line]


def ui_prefix(url: str) -> str:
    """Where this Prometheus serves its pages: "" (the React UI: /alerts) or "/classic" (Debian's
    2.42 ships without the React UI: /alerts is a 404 there, /classic/alerts works)."""
    try:
        urllib.request.urlopen(f"{url}/alerts", timeout=10).read()
        return ""
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "/classic"
        raise


def graph_url(url: str, prefix: str, expr: str) -> str:
    query = urllib.parse.urlencode({"g0.expr": expr, "g0.tab": "0", "g0.range_input": "15m"})
    return f"{url}{prefix}/graph?{query}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captures", nargs="*", type=Path)
    parser.add_argument("--port", type=int, default=9090, help="Prometheus port (default 9090)")
    parser.add_argument("--scrape-interval", default="5s", help="Prometheus scrape and rule interval (default 5s)")
    parser.add_argument("--once", action="store_true", help="stop once every capture has been scraped")
    args = parser.parse_args()
    from tests.integration.prometheus import Prometheus

    work = Path(tempfile.mkdtemp(prefix="zfsnas-demo-"))
    procs: list[subprocess.Popen] = []
    prometheus = None
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        captures = args.captures or default_captures(work)
        names = [capture_name(c) for c in captures]
        if len(set(names)) != len(names):
            raise SystemExit("two captures have the same name: rename one (the name is its nas label)")
        targets = {}
        for capture, name in zip(captures, names):
            port = free_port()
            procs.append(start_replay(capture, port, work / f"replay-{name}.log"))
            targets[f"127.0.0.1:{port}"] = {"nas": name, "instance": name}
        prometheus = Prometheus(work / "prometheus", args.port, targets, scrape_interval=args.scrape_interval,
                                rule_files=[str(ROOT / "alerts" / "zfsnas.rules.yml")])
        prefix = ui_prefix(prometheus.url)
        for target, labels in targets.items():
            print(f"replaying {labels['nas']}: http://{target}/metrics  (nas=\"{labels['nas']}\")")
        print(f"Prometheus: {graph_url(prometheus.url, prefix, 'zfs_arc_size_bytes')}")
        for page in ("alerts", "targets", "rules"):
            print(f"  {page}: {prometheus.url}{prefix}/{page}")
        print("What to look at:")
        for number, (what, expr) in enumerate(LOOK_AT, 1):
            print(f"  {number}. {what}: {expr}\n     {graph_url(prometheus.url, prefix, expr)}")
        print(f"Grafana: add {prometheus.url} as a Prometheus data source and import dashboards/*.json")
        sys.stdout.flush()
        up = prometheus.wait_for('count(up{job="zfsnas"} == 1) == ' + str(len(targets)), timeout=60)
        if args.once:
            for row in prometheus.query("zfs_arc_size_bytes"):
                print(f"{row['metric']['nas']} zfs_arc_size_bytes {row['value'][1]}")
            return 0 if up else 1
        print("Ctrl-C stops the demo", flush=True)
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
        for line in replay_problems(work):
            print(line, file=sys.stderr)
        if prometheus is not None:
            prometheus.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
