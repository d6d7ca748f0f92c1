"""The server's limits (exporter/zfsnas/server.py): silent and slow clients never hold up a scrape,
unfinished connections are closed at the read deadline, the scrape deadline comes from
Prometheus' timeout header; and the scrape loop skips what it cannot finish in time."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import wait_until
from tests.integration.test_server import make_cert
from zfsnas import server as server_module
from zfsnas.collectors.base import Collector, Context, Report
from zfsnas.scrape import ScrapeCollector
from zfsnas.server import make_server, serve_in_thread
from zfsnas.webconfig import WebConfig


@pytest.fixture
def serving(request):
    servers = []

    def start(render, web=None):
        srv = make_server("127.0.0.1:0", render, web=web)
        serve_in_thread(srv)
        servers.append(srv)
        return srv.server_address[1]

    yield start
    for srv in servers:
        srv.shutdown()


def get(port, scheme="http", context=None, headers=None):
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}/metrics", headers=headers or {})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        body = response.read()
    return body, time.monotonic() - started


def test_200_silent_and_50_slow_clients_do_not_delay_a_scrape(serving, tmp_path):
    make_cert(tmp_path)
    web = WebConfig(tls=ssl.create_default_context(ssl.Purpose.CLIENT_AUTH))
    web.tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    port = serving(lambda: "up 1\n", web)
    client = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    quiet = [get(port, "https", client)[1] for _ in range(10)]
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]  # no ClientHello, ever
    slow = []
    for _ in range(50):  # a TLS handshake, then a request that never ends
        sock = client.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
        sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        slow.append(sock)
    try:
        loaded = [get(port, "https", client) for _ in range(20)]
        assert all(body == b"up 1\n" for body, _ in loaded)
        # more clients stuck than there are workers (8), yet each scrape takes what it took before
        assert max(t for _, t in loaded) < max(quiet) + 0.5, (quiet, [t for _, t in loaded])
    finally:
        for sock in silent + slow:
            sock.close()


def test_unfinished_connections_are_closed_at_the_read_deadline(serving, monkeypatch):
    monkeypatch.setattr(server_module, "READ_TIMEOUT", 0.5)
    port = serving(lambda: "up 1\n")
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /metr")
    sock.settimeout(5)
    started = time.monotonic()
    assert sock.recv(100) == b""  # closed by the server, without an answer
    assert 0.4 < time.monotonic() - started < 2.5
    sock.close()
    assert get(port)[0] == b"up 1\n"


def test_more_connections_than_the_pending_limit_drop_the_oldest(serving, monkeypatch):
    monkeypatch.setattr(server_module, "MAX_PENDING", 20)
    port = serving(lambda: "up 1\n")
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
    try:
        assert get(port)[0] == b"up 1\n"
        silent[0].settimeout(5)
        assert silent[0].recv(10) == b""  # the oldest made room
    finally:
        for sock in silent:
            sock.close()


def test_scrape_deadline_comes_from_prometheus_header(serving):
    seen = []

    def render(deadline=None):
        seen.append(None if deadline is None else deadline - time.monotonic())
        return "up 1\n"

    port = serving(render)
    get(port, headers={"X-Prometheus-Scrape-Timeout-Seconds": "4"})
    get(port)
    get(port, headers={"X-Prometheus-Scrape-Timeout-Seconds": "bogus"})
    assert 3.0 < seen[0] <= 3.5  # the timeout less half a second, as blackbox_exporter does
    # without (a valid) one, Prometheus' default scrape timeout: 10 s, less the same half second
    assert all(9.0 < left <= 9.5 for left in seen[1:]), seen


def test_deadline_is_given_only_to_renders_that_take_it(serving):
    class Page:
        def render(self, deadline=None):
            return f"deadline_given {int(deadline is not None)}\n"

    def local_named_deadline():
        deadline = 1  # a local of that name is not a parameter
        return f"up {deadline}\n"

    header = {"X-Prometheus-Scrape-Timeout-Seconds": "10"}
    assert get(serving(Page().render), headers=header)[0] == b"deadline_given 1\n"  # a bound method
    assert get(serving(local_named_deadline), headers=header)[0] == b"up 1\n"
    assert get(serving(lambda: "up 2\n"), headers=header)[0] == b"up 2\n"


class Sleeper(Collector):
    name = "sleeper"
    needs_zfs = False

    def collect(self, report: Report):
        time.sleep(0.3)
        return []


class Second(Sleeper):
    name = "second"

    def collect(self, report: Report):
        return []


class Blocking(Collector):
    """A collector whose read blocks until `release` is set (a kstat read stuck in the kernel)."""

    name = "blocking"
    needs_zfs = False

    def __init__(self, ctx):
        super().__init__(ctx)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def collect(self, report: Report):
        self.calls += 1
        self.entered.set()
        self.release.wait(30)
        return []


def success(text, name):
    return text.split(f'zfs_exporter_collector_success{{collector="{name}"}} ', 1)[1].split("\n", 1)[0]


def successes(text):
    return [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith("zfs_exporter_collector_success{")]


def timed_scrape(port, timeout_header):
    started = time.monotonic()
    body, _ = get(port, headers={"X-Prometheus-Scrape-Timeout-Seconds": timeout_header})
    return body.decode(), time.monotonic() - started


def test_a_read_that_blocks_fails_its_collector_at_the_deadline_and_is_skipped_until_it_returns(serving):
    ctx = Context(kstat=None, commands=None)
    blocking = Blocking(ctx)
    scrape = ScrapeCollector([Second(ctx), blocking, Second(ctx)])
    port = serving(scrape.render_parts)
    text, took = timed_scrape(port, "1")  # a deadline of 0.5 s
    assert took < 1.5  # answered by the watchdog at the deadline, not when the read returns
    assert successes(text) == ["1", "0", "0"]
    # the next scrape does not wait for it again: skipped (failed) at once, the others served
    text, took = timed_scrape(port, "5")
    assert took < 1 and blocking.calls == 1
    assert successes(text) == ["1", "0", "1"]
    blocking.release.set()  # the read returns: from the next scrape on it runs again
    deadline = time.monotonic() + 5
    while success(timed_scrape(port, "5")[0], "blocking") != "1":
        assert time.monotonic() < deadline
    assert blocking.calls == 2


def test_collectors_not_reached_by_the_deadline_report_failure(serving):
    ctx = Context(kstat=None, commands=None)
    scrape = ScrapeCollector([Second(ctx), Sleeper(ctx), Second(ctx)])
    port = serving(scrape.render_parts)
    text, _ = timed_scrape(port, "0.2")  # a deadline of 0.1 s: the sleeper (0.3 s) is still asleep
    assert successes(text) == ["1", "0", "0"]
    assert "not run: the scrape's deadline" not in text  # reasons go to the log, once
    wait_until(lambda: "sleeper" not in scrape._blocked, "the sleeper's read returned")
    assert success(scrape.render(), "sleeper") == "1"  # without a deadline: in line, as long as it takes


def test_waiting_for_an_earlier_scrape_past_the_deadline_is_a_503(serving):
    ctx = Context(kstat=None, commands=None)
    blocking = Blocking(ctx)
    scrape = ScrapeCollector([blocking])
    port = serving(lambda deadline=None: scrape.render(deadline=deadline))
    first = threading.Thread(target=get, args=(port,))
    first.start()
    assert blocking.entered.wait(30), "the first scrape never reached its collector"
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            get(port, headers={"X-Prometheus-Scrape-Timeout-Seconds": "0.1"})
    finally:
        blocking.release.set()
    assert err.value.code == 503
    first.join()
