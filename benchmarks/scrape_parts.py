#!/usr/bin/env python3
"""Where one scrape of a running exporter goes, and where Python's own start-up floor lies.

    .venv/bin/python benchmarks/scrape_parts.py [--tree live-2.1.11] [--set default] [--scrapes 1500]
    .venv/bin/python benchmarks/scrape_parts.py --startup-floor
    .venv/bin/python benchmarks/scrape_parts.py --http-floor

Scrape parts: the exporter runs as `zfsnas-exporter` would, in a child process whose server and
scrape steps are wrapped with timers (`--serve` below); this process churns the tree as
`scrape_bench.Churn` does and scrapes it with the same urllib client, then prints the median of
each part: the client's whole turn, the server's (accept to hand-over, the answer, the send), the
render and its pieces, and each collector's own duration as the page reports it.

HTTP floor: our server answering a constant page of a 2.1.11 default scrape's size, against a
bare accept-recv-send loop serving the same bytes, each in its own process, scraped alternately by
the same client: what the server design costs beyond the least a Python server does.

Start-up floor: median of 15 starts each of bare Python, of Python importing only what any
socket server needs, and of `import zfsnas.cli` (compiled first, as an installed exporter has it),
to set against node_exporter's start-up in `./dev bench` (docs/performance.md). Then the least a
Python exporter can be (one socket, the kstat files sent back as read: no flags, parsing or
logging) against node_exporter, spawn to first answer, alternately, with `./dev bench`'s client.
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import functools
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def serve(out: str, argv: list[str]) -> int:
    """Run the exporter with timers around its scrape and server steps; medians go to `out` at exit."""
    from zfsnas import cli, process, server
    from zfsnas import scrape as scrape_module

    times: dict[str, list[float]] = {}

    def timed(owner: object, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                times.setdefault(label, []).append(time.perf_counter() - start)
        setattr(owner, attr, wrapper)

    timed(cli.Exporter, "render", "render: the whole page")
    timed(cli, "process_families", "render: process metrics")
    timed(scrape_module.ScrapeCollector, "_scrape", "render: every collector's collect")
    timed(scrape_module, "render", "render: the collectors' families (all of them)")
    timed(process, "read_bounded", "process metrics: /proc/self/stat")
    stamps: dict[str, float] = {}
    accept, hand_over, make_server = server.Server._accept, server.Server._hand_over, server.make_server

    def _accept(self):
        stamps["accepted"] = time.perf_counter()
        return accept(self)

    def _hand_over(self, pending):
        stamps["handed"] = time.perf_counter()
        times.setdefault("server: accept to hand-over", []).append(stamps["handed"] - stamps.get("accepted", stamps["handed"]))
        return hand_over(self, pending)

    def _make_server(*args, **kwargs):
        srv = make_server(*args, **kwargs)
        answer = srv._answer

        def timed_answer(raw, client):
            start = time.perf_counter()
            times.setdefault("server: hand-over to worker", []).append(start - stamps.get("handed", start))
            try:
                return answer(raw, client)
            finally:
                times.setdefault("server: the answer (render, encode)", []).append(time.perf_counter() - start)
        srv._answer = timed_answer
        return srv

    server.Server._accept, server.Server._hand_over = _accept, _hand_over
    cli.make_server = _make_server

    def report() -> None:
        with open(out, "w") as f:
            for label, values in times.items():
                per_scrape = sum(values) / max(1, len(times["render: the whole page"]))
                f.write(f"| {label} | {statistics.median(values) * 1e3:.3f} | {per_scrape * 1e3:.3f} |\n")
    atexit.register(report)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.argv = ["zfsnas-exporter", *argv]
    return cli.main()


def scrape_parts(tree_name: str, collectors: str, scrapes: int) -> None:
    sys.path.insert(0, str(HERE))
    import scrape_bench as sb

    commands, make_tree = sb.TREES[tree_name]
    with tempfile.TemporaryDirectory() as tmp:
        tree = make_tree(Path(tmp) / "tree")
        churn = sb.Churn(tree)
        out = Path(tmp) / "parts"
        ours = sb.ours_exporter(tree, commands, collectors)
        ours.argv = [sys.executable, __file__, "--serve", str(out), *ours.argv[1:]]
        duration = re.compile(r'^zfs_exporter_collector_duration_seconds\{collector="(\w+)"\} (\S+)$', re.M)
        per_collector: dict[str, list[float]] = {}
        ours.start()
        try:
            time.sleep(2)   # the first background refreshes
            ours.times.clear()
            for _ in range(scrapes):
                churn()
                for name, seconds in duration.findall(ours.scrape().decode()):
                    per_collector.setdefault(name, []).append(float(seconds))
        finally:
            ours.stop()
        print(f"{tree_name}, {collectors} collectors, {scrapes} scrapes, tree churning: medians in ms\n")
        print("| part | p50 ms | mean ms per scrape |\n|---|---|---|")
        print(f"| client: the whole scrape (urllib) | {statistics.median(ours.times) * 1e3:.3f} | "
              f"{statistics.fmean(ours.times) * 1e3:.3f} |")
        print(out.read_text(), end="")
        for name, values in per_collector.items():
            print(f"| collector {name} (its duration on the page) | {statistics.median(values) * 1e3:.3f} | "
                  f"{statistics.fmean(values) * 1e3:.3f} |")


def constant_server(kind: str, size: int) -> None:
    """Serve `size` bytes of metric-like text on a free port (printed first): `ours` through
    zfsnas.server, `bare` with a plain accept-recv-send loop."""
    import socket

    page = ("zfs_example_metric_total{pool=\"tank\"} 12345678901\n" * (size // 48 + 1))[:size]
    if kind == "ours":
        from zfsnas import server

        srv = server.make_server("127.0.0.1:0", lambda: page)
        print(srv.server_address[1], flush=True)
        srv.serve_forever()
        return
    body = page.encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(listener.getsockname()[1], flush=True)
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(head + body)


def http_floor(scrapes: int = 3000, size: int = 102_600) -> None:
    import urllib.request

    children, ports = [], {}
    try:
        for kind in ("ours", "bare"):
            child = subprocess.Popen([sys.executable, __file__, "--constant", kind, str(size)], stdout=subprocess.PIPE, text=True)
            children.append(child)
            ports[kind] = int(child.stdout.readline())  # type: ignore[union-attr]
        times: dict[str, list[float]] = {kind: [] for kind in ports}
        for i in range(scrapes):
            for kind in (("ours", "bare") if i % 2 else ("bare", "ours")):
                start = time.perf_counter()
                urllib.request.urlopen(f"http://127.0.0.1:{ports[kind]}/metrics", timeout=10).read()
                times[kind].append(time.perf_counter() - start)
    finally:
        for child in children:
            child.kill()
            child.wait()
    print(f"| server, constant {size} byte page | p50 ms |\n|---|---|")
    for kind, values in times.items():
        print(f"| {kind} | {statistics.median(values) * 1e3:.3f} |")


def startup_floor(rounds: int = 15) -> None:
    compileall.compile_dir(str(ROOT / "exporter/zfsnas"), quiet=1)
    python = sys.executable
    commands = {
        "python3 -I -S -c pass (no site)": ["/usr/bin/python3", "-I", "-S", "-c", "pass"],
        "venv python -c pass": [python, "-c", "pass"],
        "+ import socket, threading, selectors": [python, "-c", "import socket, threading, selectors"],
        "+ re, logging, argparse": [python, "-c", "import socket, threading, selectors, re, logging, argparse"],
        "import zfsnas.cli": [python, "-c", "import zfsnas.cli"],
    }
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(rounds):   # interleaved, so machine load falls on all alike
        for label, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True)
            times[label].append(time.perf_counter() - start)
    print_starts("start", times)
    least_exporter(rounds)


def print_starts(what: str, times: dict[str, list[float]]) -> None:
    """A table of start-up seconds: median and min in ms, a row per label."""
    print(f"| {what} | median ms | min ms |\n|---|---|---|")
    for label, values in times.items():
        print(f"| {label} | {statistics.median(values) * 1e3:.1f} | {min(values) * 1e3:.1f} |")


# The least a Python exporter can be: one socket, every kstat file read as bytes and sent back as
# the page, no parsing, no flags, no logging. Started as `python -c`, with the venv's site.
LEAST = """import socket, sys
port, files = int(sys.argv[1]), sys.argv[2:]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen()
while True:
    client, _ = server.accept()
    client.recv(65536)
    body = b"".join(open(name, "rb").read() for name in files)
    client.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
    client.close()
"""


def least_exporter(rounds: int) -> None:
    """Spawn to first answer of LEAST against node_exporter's (zfs collector only) on the
    live-2.3.2 tree, alternately, with the client `./dev bench` times start-up with."""
    sys.path.insert(0, str(HERE))
    import scrape_bench as sb

    def least_argv(tree: Path, port: int) -> list[str]:
        return [sys.executable, "-c", LEAST, str(port), *map(str, sb.floor_files(tree))]

    with tempfile.TemporaryDirectory() as tmp:
        tree = sb.TREES["live-2.3.2"][1](Path(tmp) / "tree")
        times: dict[str, list[float]] = {"least Python exporter": [], "node_exporter": []}
        for i in range(rounds):
            pair = [("least Python exporter", sb.Exporter.on_free_port("least", least_argv, tree)),
                    ("node_exporter", sb.Exporter.on_free_port("node_exporter", sb.node_argv, tree))]
            try:
                for label, exporter in pair if i % 2 == 0 else pair[::-1]:
                    times[label].append(exporter.start())
            finally:
                for _, exporter in pair:
                    exporter.stop()
    least, node = (statistics.median(values) for values in times.values())
    print(f"\nlive-2.3.2, spawn to first answer, {rounds} rounds alternately\n")
    print_starts("exporter", times)
    print(f"\nleast Python exporter / node_exporter: {least / node:.2f}")


def main() -> int:
    if sys.argv[1:2] == ["--serve"]:
        return serve(sys.argv[2], sys.argv[3:])
    if sys.argv[1:2] == ["--constant"]:
        constant_server(sys.argv[2], int(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default="live-2.1.11", choices=["live-2.3.2", "live-2.1.11", "large"])
    parser.add_argument("--set", dest="collectors", default="default", choices=["kstat", "default"])
    parser.add_argument("--scrapes", type=int, default=1500)
    parser.add_argument("--startup-floor", action="store_true", help="only Python's start-up floor")
    parser.add_argument("--http-floor", action="store_true", help="only the server against a bare loop, constant page")
    args = parser.parse_args()
    if args.startup_floor:
        startup_floor()
    elif args.http_floor:
        http_floor()
    else:
        scrape_parts(args.tree, args.collectors, args.scrapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
