"""Workers no client can pin (issue 33, cases 2 to 4): clients that never read a big page, a flood
of wrong passwords, and a kstat that blocks do not delay a scraper (exporter/zfsnas/server.py,
scrape.py). The figures against node_exporter are benchmarks/fuzz.py's (docs/reliability.md)."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import statistics
import threading
import time
import urllib.request

import bcrypt
import pytest

from tests.conftest import copy_tree, value, wait_until
from tests.integration.exporter_process import ExporterProcess
from zfsnas import server as server_module
from zfsnas.server import make_server, serve_in_thread

PAGE_LINES = 260_000  # a 26 MB page, as a NAS with tens of thousands of datasets serves


def big_page() -> str:
    line = 'zfs_dataset_used_bytes{pool="tank",dataset="tank/projects/archive/2026/some-dataset-%06d"} 1048576\n'
    return "# HELP zfs_dataset_used_bytes x\n# TYPE zfs_dataset_used_bytes gauge\n" + \
        "".join(line % i for i in range(PAGE_LINES))


def slow_reader(port: int) -> socket.socket:
    """A client that asks for the page and never reads a byte of it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def timed_get(port: int, headers: dict | None = None, source: str = "127.0.0.1") -> tuple[int, bytes, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15, source_address=(source, 0))
    started = time.monotonic()
    try:
        conn.request("GET", "/metrics", headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), time.monotonic() - started
    finally:
        conn.close()


def test_ten_clients_that_never_read_a_26_mb_page_do_not_delay_a_scrape(monkeypatch):
    """Before: each held a worker in sendall for its 30 s write timeout; the 9th scrape waited 27 s."""
    page = big_page()
    srv = make_server("127.0.0.1:0", lambda: page)
    serve_in_thread(srv)
    port = srv.server_address[1]
    try:
        quiet = [timed_get(port)[2] for _ in range(3)]
        slow = [slow_reader(port) for _ in range(10)]
        # every one of them has its answer under way (a fixed pause was too short once on a loaded machine)
        wait_until(lambda: len(srv._writing) == 10, "ten answers being written")
        loaded = [timed_get(port) for _ in range(5)]
        assert [(status, len(body)) for status, body, _ in loaded] == [(200, len(page))] * 5
        assert max(t for *_, t in loaded) < max(quiet) * 3 + 0.5, (quiet, [t for *_, t in loaded])
        assert len(srv._writing) == 10  # they cost their answers, written as they read
        for sock in slow:  # gone: their answers are dropped
            sock.close()
        wait_until(lambda: not srv._writing, "the dropped answers gone")
        assert srv._writing == {}
        # one that stays is cut off at the write deadline (30 s; here 1.5 s), never having had the whole page
        monkeypatch.setattr(server_module, "WRITE_TIMEOUT", 1.5)
        late = slow_reader(port)
        wait_until(lambda: len(srv._writing) == 1, "the late reader's answer being written")
        started = time.monotonic()
        wait_until(lambda: not srv._writing, "the late reader cut off")
        assert time.monotonic() - started > 1.0  # cut at its write deadline, not at once
        late.settimeout(5)
        received = 0
        try:
            while chunk := late.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            pass
        assert received < len(page) and srv._writing == {}
    finally:
        srv.shutdown()


@pytest.fixture
def web_config(tmp_path):
    """A web config with two users at bcrypt cost 10 (node_exporter's documented example cost)."""
    hashes = {user: bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
              for user, password in (("prometheus", "right"), ("grafana", "other"))}
    path = tmp_path / "web.yml"
    path.write_text("basic_auth_users:\n" + "".join(f"  {u}: '{h}'\n" for u, h in hashes.items()))
    return path


def basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_a_flood_of_wrong_passwords_does_not_delay_a_scraper(tmp_path, port, web_config):
    """Before: every request waited in line for the one bcrypt lock, the scraper's too (5 s with 100
    flooding clients, node_exporter 53 ms)."""
    tree = copy_tree(tmp_path / "tree")
    with ExporterProcess(port, "--web.config.file", str(web_config), "--collector.disable-defaults",
                         "--collector.arc", "--path.procfs", str(tree / "proc"), "--path.sysfs", str(tree / "sys"),
                         log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        assert timed_get(port, basic("prometheus", "right"))[0] == 200  # its first check: remembered from now on
        quiet = statistics.median(timed_get(port, basic("prometheus", "right"))[2] for _ in range(5))
        stop = threading.Event()
        refused: list[int] = []

        def flood(number: int) -> None:
            guess = 0
            while not stop.is_set():
                guess += 1
                try:
                    refused.append(timed_get(port, basic("prometheus", f"guess-{number}-{guess}"))[0])
                except OSError:
                    pass

        flooders = [threading.Thread(target=flood, args=(n,), daemon=True) for n in range(40)]
        for thread in flooders:
            thread.start()
        try:
            wait_until(lambda: refused.count(401) >= 4, "the flood's guesses checked and refused")
            flooded = [timed_get(port, basic("prometheus", "right")) for _ in range(10)]
            # a password not checked before, from another address: its turn comes after one check
            # per flooding address, not after the flood
            other = timed_get(port, basic("grafana", "other"), source="127.0.0.2")
        finally:
            stop.set()
            for thread in flooders:
                thread.join(20)
        assert all(status == 200 for status, *_ in flooded)
        median = statistics.median(t for *_, t in flooded)
        assert median < quiet * 5 + 0.1, (quiet, median)
        started = time.monotonic()
        bcrypt.checkpw(b"x", web_config.read_text().split("'")[1].encode())
        one_check = time.monotonic() - started
        assert other[0] == 200 and other[2] < max(1.5, 10 * one_check), (other, one_check)
        assert set(refused) <= {401, 429} and refused.count(401) >= 4  # guesses were checked, in turn
        text = timed_get(port, basic("prometheus", "right"))[1].decode()
        assert value(text, "zfs_exporter_collector_success", collector="arc") == 1


def test_a_kstat_that_blocks_fails_its_collector_and_nothing_else(tmp_path, port):
    """arcstats replaced by a FIFO no one writes to: before, a scrape without the timeout header hung
    and, with 8 of them stuck, even `GET /` got nothing."""
    tree = copy_tree(tmp_path / "tree")
    arcstats = tree / "proc" / "spl" / "kstat" / "zfs" / "arcstats"
    arcstats.unlink()
    os.mkfifo(arcstats)
    with ExporterProcess(port, "--collector.disable-defaults", "--collector.arc", "--collector.txg",
                         "--path.procfs", str(tree / "proc"), "--path.sysfs", str(tree / "sys"),
                         log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        results: list = []

        def scrape() -> None:
            results.append(timed_get(port))

        clients = [threading.Thread(target=scrape) for _ in range(10)]
        for client in clients:
            client.start()
        started = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            assert response.status == 200 and b"Metrics" in response.read()
        for client in clients:
            client.join(15)
        assert time.monotonic() - started < 5
        assert [status for status, *_ in results] == [200] * 10
        text = results[0][1].decode()
        assert value(text, "zfs_exporter_collector_success", collector="arc") == 0
        assert value(text, "zfs_exporter_collector_success", collector="txg") == 1
        assert "arcstats: " in exp.log() and "Traceback" not in exp.log()
