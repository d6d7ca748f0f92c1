"""The HTTP side: `/metrics`, a landing page, TLS and basic auth from the web config.

A small HTTP/1.1 server on `selectors` and a fixed pool of worker threads rather than
`http.server`: the latter pulls in `http.client`, `ssl` and `email`, about 10 MB of resident
memory a NAS should not pay for an exporter that answers GET requests, and gives every
connection a thread for as long as the client cares to keep it.

How a connection is served, and why no client can hold the exporter up:
- One event-loop thread accepts connections, drives their TLS handshakes and reads their request
  line and headers without blocking. A connection that has not sent a whole request within
  `READ_TIMEOUT` seconds of being accepted is closed; past `MAX_PENDING` connections the oldest
  unfinished one is dropped. Silent or slow clients therefore never occupy a worker.
- Complete requests go to `WORKERS` threads that answer them (the scrape, then a write with
  `WRITE_TIMEOUT` seconds per send) and close the connection.
- A scrape's deadline comes from Prometheus' `X-Prometheus-Scrape-Timeout-Seconds` (minus
  `SCRAPE_TIMEOUT_OFFSET`), as blackbox_exporter does: collectors not reached by then report
  `success 0` instead of making Prometheus give up on the whole scrape.
- Workers start as they are needed, up to `WORKERS`: the first with the first request, another
  whenever a request has waited `WORKER_PATIENCE` for a free one. A client scraping one request
  at a time (even back to back) keeps one worker and one malloc arena, not eight taking turns.
TLS (and so `ssl`) is loaded only when the web config asks for it; gzip, base64 and html when a
request first needs them: start-up is imports (docs/performance.md). Owns nothing about ZFS.
"""

from __future__ import annotations

import collections
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import __version__
from .exposition import CONTENT_TYPE

if TYPE_CHECKING:
    from .webconfig import WebConfig

log = logging.getLogger("zfsnas")

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable"}
MAX_LINE = 8192
MAX_HEADERS = 100
MAX_REQUEST = 64 * 1024   # request line and headers together
READ_TIMEOUT = 10.0       # seconds from accept to a complete request (TLS handshake included)
WRITE_TIMEOUT = 30.0      # seconds a single send of the answer may block
WORKERS = 8
MAX_PENDING = 1024        # connections still handshaking or sending their request
WORKER_PATIENCE = 0.01    # seconds a complete request waits for a free worker before another starts
SCRAPE_TIMEOUT_OFFSET = 0.5


def parse_listen_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--web.listen-address {address!r} is not [host]:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def scrape_deadline(headers: dict[str, str], now: float) -> float | None:
    """Monotonic deadline from Prometheus' scrape timeout header; None without (a valid) one."""
    try:
        timeout = float(headers.get("x-prometheus-scrape-timeout-seconds", ""))
    except ValueError:
        return None
    if not 0 < timeout < 86400:
        return None
    return now + (timeout - SCRAPE_TIMEOUT_OFFSET if timeout > 2 * SCRAPE_TIMEOUT_OFFSET else timeout / 2)


class _Pending:
    __slots__ = ("sock", "address", "deadline", "handshaken", "buffer")

    def __init__(self, sock, address, deadline: float, handshaken: bool):
        self.sock, self.address, self.deadline = sock, address, deadline
        self.handshaken = handshaken
        self.buffer = bytearray()


class Server:
    """Listening socket, event loop and workers; `serve_forever` in one thread, `shutdown` from another."""

    def __init__(self, address: tuple[str, int], answer: Callable[[bytes, str], bytes], web: WebConfig | None,
                 workers: int = WORKERS):
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(128)
        except OSError:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self._answer = answer
        self._tls = web.tls if web else None
        self._pending: collections.OrderedDict[int, _Pending] = collections.OrderedDict()
        self._selector = selectors.DefaultSelector()
        self._requests: queue.SimpleQueue = queue.SimpleQueue()  # C: half the hand-over time of queue.Queue
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._max_workers = workers
        self._workers: list[threading.Thread] = []   # started by the event loop, as requests need them
        self._waiting_since: float | None = None      # when the oldest request not yet taken was queued

    def serve_forever(self) -> None:
        self._selector.register(self.socket, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in self._selector.select(timeout=self._select_timeout()):
                    if key.fileobj is self.socket:
                        self._accept()
                    else:
                        self._advance(key.data)
                now = time.monotonic()
                self._grow(now)
                self._expire(now)
        finally:
            for pending in list(self._pending.values()):
                self._drop(pending)
            self._selector.close()
            self.socket.close()
            for _ in self._workers:
                self._requests.put(None)
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        self._stopped.wait(5)

    def _accept(self) -> None:
        now = time.monotonic()
        for _ in range(64):
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: drop the oldest and go on
                log.debug("accept failed: %s", exc)
                if self._pending:
                    self._drop(next(iter(self._pending.values())))
                return
            if len(self._pending) >= MAX_PENDING:
                self._drop(next(iter(self._pending.values())))
            sock.setblocking(False)
            if self._tls is not None:
                try:
                    sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except OSError:
                    sock.close()
                    continue
            pending = _Pending(sock, address, now + READ_TIMEOUT, self._tls is None)
            self._pending[id(pending)] = pending
            self._selector.register(sock, selectors.EVENT_READ, pending)

    def _advance(self, pending: _Pending) -> None:
        """Move a connection on as far as it goes without blocking: handshake, then request bytes."""
        import_ssl = self._tls is not None
        try:
            if not pending.handshaken:
                pending.sock.do_handshake()
                pending.handshaken = True
                self._selector.modify(pending.sock, selectors.EVENT_READ, pending)
            while True:
                chunk = pending.sock.recv(16384)
                if not chunk:
                    self._drop(pending)
                    return
                pending.buffer += chunk
                if b"\r\n\r\n" in pending.buffer or b"\n\n" in pending.buffer or len(pending.buffer) > MAX_REQUEST:
                    self._hand_over(pending)
                    return
                if not (import_ssl and pending.sock.pending()):
                    return
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if import_ssl:
                import ssl

                if isinstance(exc, ssl.SSLWantReadError):
                    return
                if isinstance(exc, ssl.SSLWantWriteError):
                    self._selector.modify(pending.sock, selectors.EVENT_WRITE, pending)
                    return
            log.debug("connection from %s: %s", pending.address[0], exc)
            self._drop(pending)

    def _hand_over(self, pending: _Pending) -> None:
        self._selector.unregister(pending.sock)
        del self._pending[id(pending)]
        if not self._workers and not self._start_worker():
            pending.sock.close()  # no thread at all to answer it: refused rather than queued forever
            return
        if self._waiting_since is None or self._requests.empty():
            self._waiting_since = time.monotonic()
        self._requests.put(pending)

    def _select_timeout(self) -> float:
        if self._waiting_since is None:
            return 0.5
        return max(0.0, self._waiting_since + WORKER_PATIENCE - time.monotonic())

    def _grow(self, now: float) -> None:
        """Another worker when a request has waited WORKER_PATIENCE for a free one."""
        if self._waiting_since is None:
            return
        if self._requests.empty():
            self._waiting_since = None
        elif now - self._waiting_since >= WORKER_PATIENCE:
            if len(self._workers) < self._max_workers:
                self._start_worker()
            self._waiting_since = now

    def _start_worker(self) -> bool:
        worker = threading.Thread(target=self._work, name=f"http-{len(self._workers)}", daemon=True)
        try:
            worker.start()
        except RuntimeError as exc:  # out of threads: the request waits for a running worker
            log.warning("cannot start another HTTP worker: %s", exc)
            return False
        self._workers.append(worker)
        return True

    def _drop(self, pending: _Pending) -> None:
        self._pending.pop(id(pending), None)
        try:
            self._selector.unregister(pending.sock)
        except (KeyError, ValueError):
            pass
        pending.sock.close()

    def _expire(self, now: float) -> None:
        # Deadlines grow in accept order, so the expired ones are at the front.
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now:
                return
            log.debug("connection from %s: no complete request within %gs", oldest.address[0], READ_TIMEOUT)
            self._drop(oldest)

    def _work(self) -> None:
        while True:
            pending = self._requests.get()
            if pending is None:
                return
            sock = pending.sock
            try:
                sock.settimeout(WRITE_TIMEOUT)
                sock.sendall(self._answer(bytes(pending.buffer), pending.address[0]))
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            except OSError as exc:  # a client that hangs up is not the exporter's problem
                log.debug("answering %s: %s", pending.address[0], exc)
            except Exception:  # the last line of defence: one bad request never stops a worker
                log.exception("answering %s failed", pending.address[0])
            finally:
                sock.close()


def make_server(address: str, render: Callable[..., str], telemetry_path: str = "/metrics",
                web: WebConfig | None = None) -> Server:
    """An HTTP server whose telemetry path answers with `render()` (Prometheus text format);
    `render(deadline=...)` is given the scrape's monotonic deadline when it takes one."""
    host, port = parse_listen_address(address)
    extra_headers = web.headers if web else {}
    takes_deadline = _takes_deadline(render)

    def reply(code: int, content_type: str, body: bytes, headers: dict | None = None, head: bool = False) -> bytes:
        lines = [f"HTTP/1.1 {code} {_REASONS[code]}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(body)}", "Connection: close", f"Server: zfsnas-exporter/{__version__}"]
        lines += [f"{key}: {value}" for key, value in {**extra_headers, **(headers or {})}.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)

    def answer(raw: bytes, client: str) -> bytes:
        request = _parse_request(raw)
        if isinstance(request, int):
            message = b"bad request\n" if request == 400 else b"too many or too long headers\n"
            return reply(request, "text/plain; charset=utf-8", message)
        method, target, headers = request
        if method not in ("GET", "HEAD"):
            return reply(405, "text/plain; charset=utf-8", b"method not allowed\n", {"Allow": "GET, HEAD"})
        if not _authorized(web, headers):
            return reply(401, "text/plain; charset=utf-8", b"Unauthorized\n",
                         {"WWW-Authenticate": 'Basic realm="zfsnas-exporter"'})
        path = target.split("?", 1)[0]
        head = method == "HEAD"
        if path == telemetry_path:
            deadline = scrape_deadline(headers, time.monotonic())
            try:
                text = render(deadline=deadline) if takes_deadline else render()
                body = text.encode("utf-8", "backslashreplace")  # renderers emit valid UTF-8; never a 500 for it
            except TimeoutError as exc:  # the deadline passed while an earlier scrape still ran
                return reply(503, "text/plain; charset=utf-8", f"{exc}\n".encode())
            except Exception as exc:  # collectors guard themselves; this is the last line of defence
                log.error("rendering metrics failed: %s", str(exc)[:500])
                return reply(500, "text/plain; charset=utf-8", b"rendering metrics failed\n")
            if "gzip" in headers.get("accept-encoding", ""):
                import gzip

                return reply(200, CONTENT_TYPE, gzip.compress(body, 1), {"Content-Encoding": "gzip"}, head)
            return reply(200, CONTENT_TYPE, body, head=head)
        if path == "/":
            return reply(200, "text/html; charset=utf-8", _landing_page(telemetry_path).encode(), head=head)
        return reply(404, "text/plain; charset=utf-8", b"404 page not found\n", head=head)

    return Server((host, port), answer, web)


def _takes_deadline(render: Callable[..., str]) -> bool:
    """Whether `render` has a `deadline` parameter. Read from its code object (a bound method
    lends its function's): `inspect.signature` would import inspect, with dis and ast, at start-up."""
    code = getattr(render, "__code__", None)
    return code is not None and "deadline" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def _parse_request(raw: bytes) -> tuple[str, str, dict[str, str]] | int:
    """(method, target, headers with lower-case names) or the status code that refuses the request."""
    head = raw.replace(b"\r\n", b"\n").split(b"\n\n", 1)
    lines = head[0].split(b"\n")
    parts = lines[0].decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/") or len(lines[0]) > MAX_LINE:
        return 400
    if len(head) < 2 or len(lines) - 1 > MAX_HEADERS or any(len(line) > MAX_LINE for line in lines):
        return 431
    headers = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


def _authorized(web: WebConfig | None, headers: dict[str, str]) -> bool:
    if web is None or not web.users:
        return True
    import base64
    import binascii

    scheme, _, encoded = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, _, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return bool(user) and web.authorized(user, password)


def serve_in_thread(server: Server) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return thread


def _landing_page(telemetry_path: str) -> str:
    import html

    path = html.escape(telemetry_path)
    return f"""<!DOCTYPE html>
<html><head><title>zfsnas exporter</title></head>
<body><h1>zfsnas exporter {html.escape(__version__)}</h1>
<p>ZFS ARC/L2ARC, txgs and dirty data, datasets, pools and disks for Prometheus.</p>
<ul><li><a href="{path}">Metrics</a></li></ul>
</body></html>
"""
