"""The server's workers (exporter/zfsnas/server.py) start as requests need them, up to WORKERS:
one request at a time keeps one worker, concurrent slow scrapes each get their own (another starts
when a request has waited WORKER_PATIENCE), and a worker that cannot be started costs that one
request, not the server."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest

from tests.conftest import wait_until
from zfsnas import server as server_module
from zfsnas.server import make_server, serve_in_thread


@pytest.fixture
def serve():
    servers = []

    def start(render):
        srv = make_server("127.0.0.1:0", render)
        serve_in_thread(srv)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()


def get(srv) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}/metrics", timeout=10) as response:
        return response.read()


def test_one_request_at_a_time_keeps_one_worker(serve):
    srv = serve(lambda: "up 1\n")
    assert srv._workers == []   # none before the first request
    # back to back: the client has the whole answer (Content-Length) and sends the next request a
    # moment before its worker has closed the connection and is free again
    assert [get(srv) for _ in range(100)] == [b"up 1\n"] * 100
    assert len(srv._workers) == 1


def test_concurrent_slow_scrapes_each_get_a_worker(serve):
    srv = serve(lambda: time.sleep(0.5) or "slow 1\n")
    bodies: list[bytes] = []
    clients = [threading.Thread(target=lambda: bodies.append(get(srv))) for _ in range(3)]
    started = time.monotonic()
    for client in clients:
        client.start()
    for client in clients:
        client.join(10)
    assert bodies == [b"slow 1\n"] * 3
    assert time.monotonic() - started < 1.4   # side by side: three in a row take 1.5 s
    assert len(srv._workers) == 3


def test_a_worker_that_cannot_start_costs_one_request(serve, monkeypatch):
    srv = serve(lambda: "up 1\n")

    class NoThreads(threading.Thread):
        def start(self):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(server_module.threading, "Thread", NoThreads)
    with pytest.raises(OSError):   # refused: closed without an answer
        get(srv)
    monkeypatch.undo()
    assert get(srv) == b"up 1\n"   # the event loop lives on
    assert len(srv._workers) == 1


def test_past_max_queued_scrapes_a_503_at_once(serve, monkeypatch):
    """Scrapes waiting for a worker are bounded, as node_exporter's --web.max-requests bounds them."""
    monkeypatch.setattr(server_module, "MAX_QUEUED", 2)
    release, rendering = threading.Event(), threading.Event()
    srv = serve(lambda: (rendering.set(), release.wait(20))[1] and "up 1\n")
    srv._max_workers = 1
    results: list = []

    def scrape():
        try:
            results.append(get(srv))
        except Exception as exc:  # urllib raises HTTPError for the 503
            results.append(getattr(exc, "code", exc))

    clients = [threading.Thread(target=scrape) for _ in range(3)]  # one rendering, two waiting
    clients[0].start()
    assert rendering.wait(30), "the first scrape never reached the render"
    for client in clients[1:]:
        client.start()
    wait_until(lambda: srv._requests.qsize() == 2, "two scrapes waiting for the worker")
    started = time.monotonic()
    scrape()
    assert results == [503] and time.monotonic() - started < 2
    release.set()
    for client in clients:
        client.join(10)
    assert results[1:] == [b"up 1\n"] * 3
