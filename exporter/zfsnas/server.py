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
- The event loop answers what costs nothing itself (the landing page, 401, 404, 405, 400, 500 for a
  web config that no longer loads). Credentials it has not seen verified go to `AuthGate`: one
  thread checks passwords (bcrypt) one at a time, taking requests from each client address in
  turn, at most `AUTH_PER_CLIENT` waiting per address and `AUTH_QUEUE` in all (past that: 429 or
  503, sent after `REFUSAL_DELAY`, so that a flood waits rather than spins). Right passwords are
  remembered apart from wrong ones (`webconfig.WebConfig`), so a flood of guesses neither pushes
  a scraper's out nor makes it wait behind them.
- Only the scrapes reach the `WORKERS` threads (past `MAX_QUEUED` waiting for one: 503 at once,
  as node_exporter's `--web.max-requests`), which render the page (within the scrape's
  deadline), send what the socket takes at once and hand the rest to the event loop, which writes
  it as the client reads, for at most `WRITE_TIMEOUT` seconds: a client that never reads costs its
  answer's memory for that long, never a worker. The page is sent as the pieces it is made of
  (the frozen texts of big families are not copied into one page, nor into bytes, per client).
- A scrape's deadline comes from Prometheus' `X-Prometheus-Scrape-Timeout-Seconds` (minus
  `SCRAPE_TIMEOUT_OFFSET`), as blackbox_exporter does, or is `DEFAULT_SCRAPE_TIMEOUT` without one:
  a collector whose read has not returned by then reports `success 0` and the page of the others
  is sent for it (`deliver`, see `scrape.ScrapeCollector.render_parts`); its worker, stuck in
  that read, is replaced meanwhile.
- Workers start as they are needed, up to `WORKERS`: the first with the first request, another
  whenever a request has waited `WORKER_PATIENCE` for a free one. A client scraping one request
  at a time (even back to back) keeps one worker and one malloc arena, not eight taking turns.
TLS (and so `ssl`) is loaded only when the web config asks for it; gzip, base64 and html when a
request first needs them: start-up is imports (docs/performance.md). Owns nothing about ZFS.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from . import __version__
from .exposition import CONTENT_TYPE

if TYPE_CHECKING:
    from .webconfig import WebConfig, WebConfigFile

log = logging.getLogger("zfsnas")

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}
MAX_LINE = 8192
MAX_HEADERS = 100
MAX_REQUEST = 64 * 1024   # request line and headers together
READ_TIMEOUT = 10.0       # seconds from accept to a complete request (TLS handshake included)
WRITE_TIMEOUT = 30.0      # seconds an answer may take to be read by its client
MAX_WRITING = 256         # answers being written at once; past it the oldest is dropped
WORKERS = 8
MAX_QUEUED = 64           # scrapes waiting for a worker; past it: 503 at once
MAX_PENDING = 1024        # connections still handshaking or sending their request
WORKER_PATIENCE = 0.01    # seconds a complete request waits for a free worker before another starts
SCRAPE_TIMEOUT_OFFSET = 0.5
DEFAULT_SCRAPE_TIMEOUT = 10.0  # Prometheus' default scrape_timeout: the deadline of a scrape without the header
AUTH_QUEUE = 64           # requests waiting for a password check, in all
AUTH_PER_CLIENT = 4       # ... from one client address
REFUSAL_DELAY = 1.0       # seconds before a 429/503 of the password check is sent: a flood waits, it does not spin
MAX_PARKED = 1024         # refusals waiting for their delay; past it the oldest is closed without one
SEND_PIECE = 65536        # characters of a page encoded and sent at a time
TLS_RECORD = 16384        # bytes given to one TLS send (a retry must repeat them)


def parse_listen_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--web.listen-address {address!r} is not [host]:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def scrape_deadline(headers: dict[str, str], now: float) -> float:
    """Monotonic deadline from Prometheus' scrape timeout header, or the default one without (a valid) one."""
    try:
        timeout = float(headers.get("x-prometheus-scrape-timeout-seconds", ""))
    except ValueError:
        timeout = DEFAULT_SCRAPE_TIMEOUT
    if not 0 < timeout < 86400:
        timeout = DEFAULT_SCRAPE_TIMEOUT
    return now + (timeout - SCRAPE_TIMEOUT_OFFSET if timeout > 2 * SCRAPE_TIMEOUT_OFFSET else timeout / 2)


class Answer:
    """An HTTP answer as it is sent: the head, then the body's pieces (text encoded as it goes).
    `delayed`: sent only after REFUSAL_DELAY (a refusal of a client that floods)."""

    __slots__ = ("head", "body", "length", "delayed")

    def __init__(self, status: int, content_type: str, body: list[str | bytes] | bytes,
                 headers: dict[str, str] | None = None, head_only: bool = False):
        self.delayed = False
        pieces: list[str | bytes] = [body] if isinstance(body, bytes) else body
        self.length = sum(_encoded_length(p) for p in pieces)
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
                 f"Content-Length: {self.length}", "Connection: close", f"Server: zfsnas-exporter/{__version__}"]
        lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
        self.head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.body = [] if head_only else pieces

    def chunks(self) -> Iterator[bytes | memoryview]:
        yield self.head
        yield from _body_chunks(self.body)


def _body_chunks(pieces: list[str | bytes]) -> Iterator[bytes | memoryview]:
    """The pieces as bytes of about SEND_PIECE each: small pieces (a page is made of thousands of
    sample lines) gathered and encoded together, big ones (a frozen family's text) encoded a slice at
    a time, so that a page is never encoded whole and never sent a line per system call."""
    gathered: list[str] = []
    size = 0
    for piece in pieces:
        if isinstance(piece, str) and len(piece) < SEND_PIECE:
            gathered.append(piece)
            size += len(piece)
            if size >= SEND_PIECE:
                yield "".join(gathered).encode("utf-8", "backslashreplace")
                gathered.clear()
                size = 0
            continue
        if gathered:
            yield "".join(gathered).encode("utf-8", "backslashreplace")
            gathered.clear()
            size = 0
        if isinstance(piece, bytes):
            view = memoryview(piece)
            for start in range(0, len(piece), SEND_PIECE):
                yield view[start:start + SEND_PIECE]
        elif piece.isascii():
            for start in range(0, len(piece), SEND_PIECE):
                yield piece[start:start + SEND_PIECE].encode("ascii")
        else:
            for start in range(0, len(piece), SEND_PIECE // 4):
                yield piece[start:start + SEND_PIECE // 4].encode("utf-8", "backslashreplace")
    if gathered:
        yield "".join(gathered).encode("utf-8", "backslashreplace")


def _encoded_length(piece: str | bytes) -> int:
    if isinstance(piece, bytes) or piece.isascii():  # isascii is O(1) on a str
        return len(piece)
    # renderers emit valid UTF-8; a stray surrogate is shown, never a 500
    return len(piece.encode("utf-8", "backslashreplace"))


SCRAPE, CHECKING = "scrape", "checking"  # what `_Handler.route` says instead of an answer


class _Conn:
    __slots__ = ("sock", "address", "deadline", "handshaken", "buffer", "request", "out", "unsent", "web")

    def __init__(self, sock: Any, address: Any, deadline: float, handshaken: bool):
        # `sock`: a plain socket, or with TLS an ssl.SSLSocket whose do_handshake and pending are used
        self.sock, self.address, self.deadline = sock, address, deadline
        self.handshaken = handshaken
        self.buffer = bytearray()
        self.request: tuple[str, str, dict[str, str]] = ("", "", {})  # method, target, headers
        self.out: Iterator[bytes | memoryview] | None = None
        self.unsent: memoryview | None = None
        self.web: WebConfig | None = None  # the config the request was checked against


class Server:
    """Listening socket, event loop and workers; `serve_forever` in one thread, `shutdown` from another.
    Its `_Handler` says what each request gets (the event loop asks it first, a worker for a scrape)."""

    def __init__(self, address: tuple[str, int] | socket.socket, handler: _Handler,
                 web: WebConfig | WebConfigFile | None, workers: int = WORKERS):
        """`address` to bind and listen on, or a socket listening already (systemd's)."""
        if isinstance(address, socket.socket):
            self.socket = address
        else:
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
        self._handler = handler
        self._web = web
        self._tls = web is not None and web.current().tls is not None  # as node: TLS or not is decided at start
        self._pending: collections.OrderedDict[int, _Conn] = collections.OrderedDict()
        self._writing: collections.OrderedDict[int, tuple[_Conn, float]] = collections.OrderedDict()
        self._parked: collections.deque[tuple[float, _Conn, Answer]] = collections.deque()  # delayed refusals
        self._selector = selectors.DefaultSelector()
        self._requests: queue.SimpleQueue = queue.SimpleQueue()  # C: half the hand-over time of queue.Queue
        self._back: queue.SimpleQueue = queue.SimpleQueue()  # (what, conn) from other threads to the loop
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._max_workers = workers
        self._workers: list[threading.Thread] = []   # started by the event loop, as requests need them
        self._stuck = 0  # workers whose scrape the watchdog answered while they wait for a read
        self._waiting_since: float | None = None      # when the oldest request not yet taken was queued
        self._gate = AuthGate(lambda conn, right: self._give_back("verified" if right else "refused", conn))

    def serve_forever(self) -> None:
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in self._selector.select(timeout=self._select_timeout()):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._take_back()
                    elif key.data[1]:
                        self._write(key.data[0])
                    else:
                        self._advance(key.data[0])
                now = time.monotonic()
                self._grow(now)
                self._expire(now)
        finally:
            self._gate.close()
            for conn in [*self._pending.values(), *(c for c, _ in self._writing.values()), *(c for _, c, _ in self._parked)]:
                self._drop(conn)
            self._selector.close()
            self.socket.close()
            for _ in self._workers:
                self._requests.put(None)
            self._wake_r.close()
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        self._wake()
        self._stopped.wait(5)
        self._wake_w.close()

    # --- reading requests (event loop) --------------------------------------------------------

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
            if self._tls:
                context = self._handshake_context()
                if context is None:
                    sock.close()  # the web config no longer loads: no handshake, as exporter-toolkit
                    continue
                try:
                    sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except OSError:
                    sock.close()
                    continue
            conn = _Conn(sock, address, now + READ_TIMEOUT, not self._tls)
            self._pending[id(conn)] = conn
            self._selector.register(sock, selectors.EVENT_READ, (conn, False))

    def _handshake_context(self) -> Any:
        """The TLS context of the web config as it is now (read again when its files changed)."""
        from .webconfig import WebConfigError

        assert self._web is not None
        try:
            return self._web.current().tls
        except WebConfigError:
            return None

    def _advance(self, conn: _Conn) -> None:
        """Move a connection on as far as it goes without blocking: handshake, then request bytes."""
        tls = self._tls
        try:
            if not conn.handshaken:
                conn.sock.do_handshake()
                conn.handshaken = True
                self._selector.modify(conn.sock, selectors.EVENT_READ, (conn, False))
            while True:
                chunk = conn.sock.recv(16384)
                if not chunk:
                    self._drop(conn)
                    return
                conn.buffer += chunk
                if b"\r\n\r\n" in conn.buffer or b"\n\n" in conn.buffer or len(conn.buffer) > MAX_REQUEST:
                    self._selector.unregister(conn.sock)
                    del self._pending[id(conn)]
                    self._route(conn)
                    return
                if not (tls and conn.sock.pending()):
                    return
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if tls:
                import ssl

                if isinstance(exc, ssl.SSLWantReadError):
                    return
                if isinstance(exc, ssl.SSLWantWriteError):
                    self._selector.modify(conn.sock, selectors.EVENT_WRITE, (conn, False))
                    return
            log.debug("connection from %s: %s", conn.address[0], exc)
            self._drop(conn)

    def _route(self, conn: _Conn) -> None:
        """A whole request: answered here, sent to the password check, or queued for a worker."""
        try:
            answer = self._handler.route(conn, self._gate)
        except Exception:  # the last line of defence: one bad request never stops the loop
            log.exception("answering %s failed", conn.address[0])
            answer = Answer(500, "text/plain; charset=utf-8", b"internal error\n")
        if answer is SCRAPE:
            self._hand_over(conn)
        elif isinstance(answer, Answer) and answer.delayed:
            if len(self._parked) >= MAX_PARKED:
                self._drop(self._parked.popleft()[1])
            self._parked.append((time.monotonic() + REFUSAL_DELAY, conn, answer))
        elif isinstance(answer, Answer):
            self._send(conn, answer)
        # else CHECKING: the gate has it, and gives it back

    def _hand_over(self, conn: _Conn) -> None:
        if not self._workers and not self._start_worker():
            conn.sock.close()  # no thread at all to answer it: refused rather than queued forever
            return
        if self._requests.qsize() >= MAX_QUEUED:  # as node_exporter's --web.max-requests: 503, not a longer line
            self._send(conn, self._handler.reply(conn, 503, "text/plain; charset=utf-8",
                                                 b"too many scrapes waiting\n", {"Retry-After": "1"}))
            return
        if self._waiting_since is None or self._requests.empty():
            self._waiting_since = time.monotonic()
        self._requests.put(conn)

    # --- what other threads give back to the loop ---------------------------------------------

    def _late(self, conn: _Conn, answer: Answer) -> None:
        """A scrape's answer sent for a worker stuck in a read (from the scrape's watchdog): the loop
        writes it, and may start another worker meanwhile."""
        conn.out = answer.chunks()
        self._give_back("stuck", conn)

    def _give_back(self, what: str, conn: _Conn) -> None:
        self._back.put((what, conn))
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # full (the loop has wake-ups to read already) or closed at shutdown
            pass

    def _take_back(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError, OSError):
            pass
        while True:
            try:
                what, conn = self._back.get_nowait()
            except queue.Empty:
                return
            if what == "write":
                self._start_writing(conn)
            elif what == "stuck":
                self._stuck += 1
                self._start_writing(conn)
            elif what == "unstuck":
                self._stuck -= 1
            elif what == "verified":
                answer = self._handler.after_auth(conn)
                if isinstance(answer, Answer):
                    self._send(conn, answer)
                else:
                    self._hand_over(conn)
            else:
                self._send(conn, self._handler.refusal(conn))

    # --- writing answers ----------------------------------------------------------------------

    def _send(self, conn: _Conn, answer: Answer) -> None:
        """Send from the loop what the socket takes now; the rest as the client reads."""
        conn.out = answer.chunks()
        try:
            done = _send_some(conn, self._tls, 1 << 20)
        except OSError as exc:
            log.debug("answering %s: %s", conn.address[0], exc)
            conn.sock.close()
            return
        if done:
            _finish(conn)
        else:
            self._start_writing(conn)

    def _start_writing(self, conn: _Conn) -> None:
        if len(self._writing) >= MAX_WRITING:
            oldest, _ = next(iter(self._writing.values()))
            log.debug("dropping the answer to %s: more than %d answers being written", oldest.address[0], MAX_WRITING)
            self._drop(oldest)
        self._writing[id(conn)] = (conn, time.monotonic() + WRITE_TIMEOUT)
        self._selector.register(conn.sock, selectors.EVENT_WRITE, (conn, True))

    def _write(self, conn: _Conn) -> None:
        try:
            done = _send_some(conn, self._tls, 1 << 20)  # a MiB a turn: one fast reader never starves the loop
        except OSError as exc:
            log.debug("answering %s: %s", conn.address[0], exc)
            self._drop(conn)
            return
        if done:
            self._writing.pop(id(conn), None)
            self._selector.unregister(conn.sock)
            _finish(conn)

    # --- workers ------------------------------------------------------------------------------

    def _select_timeout(self) -> float:
        now = time.monotonic()
        wake = 0.5 if not self._parked else min(0.5, self._parked[0][0] - now)
        if self._waiting_since is not None:
            wake = min(wake, self._waiting_since + WORKER_PATIENCE - now)
        return max(0.0, wake)

    def _grow(self, now: float) -> None:
        """Another worker when a request has waited WORKER_PATIENCE for a free one."""
        if self._waiting_since is None:
            return
        if self._requests.empty():
            self._waiting_since = None
        elif now - self._waiting_since >= WORKER_PATIENCE:
            if len(self._workers) - self._stuck < self._max_workers:
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

    def _drop(self, conn: _Conn) -> None:
        self._pending.pop(id(conn), None)
        self._writing.pop(id(conn), None)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _expire(self, now: float) -> None:
        # Deadlines grow in accept (and hand-over) order, so the expired ones are at the front.
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now:
                break
            log.debug("connection from %s: no complete request within %gs", oldest.address[0], READ_TIMEOUT)
            self._drop(oldest)
        while self._writing:
            conn, deadline = next(iter(self._writing.values()))
            if deadline > now:
                break
            log.debug("answer to %s: not read within %gs", conn.address[0], WRITE_TIMEOUT)
            self._drop(conn)
        while self._parked and self._parked[0][0] <= now:
            _, conn, answer = self._parked.popleft()
            self._send(conn, answer)

    def _work(self) -> None:
        while True:
            conn = self._requests.get()
            if conn is None:
                return
            try:
                answer = self._handler.answer(conn, self._late)
                if answer is None:  # sent by the scrape's watchdog while this thread was stuck
                    self._give_back("unstuck", conn)
                    continue
                conn.out = answer.chunks()
                if _send_some(conn, self._tls, None):
                    _finish(conn)
                else:
                    self._give_back("write", conn)  # the rest as the client reads: not in this thread
            except OSError as exc:  # a client that hangs up is not the exporter's problem
                log.debug("answering %s: %s", conn.address[0], exc)
                conn.sock.close()
            except Exception:  # the last line of defence: one bad request never stops a worker
                log.exception("answering %s failed", conn.address[0])
                conn.sock.close()


def _send_some(conn: _Conn, tls: bool, budget: int | None) -> bool:
    """Send what the socket takes without blocking, up to `budget` bytes: True once all is sent.
    A TLS send that could not finish is repeated with the same bytes, as OpenSSL requires."""
    sent = 0
    assert conn.out is not None
    while True:
        if conn.unsent is None:
            chunk = next(conn.out, None)
            if chunk is None:
                return True
            conn.unsent = memoryview(chunk)
            if not conn.unsent:
                conn.unsent = None
                continue
        piece = conn.unsent[:TLS_RECORD] if tls else conn.unsent
        try:
            count = conn.sock.send(piece)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            if tls and _tls_would_block(exc):
                return False
            raise
        conn.unsent = conn.unsent[count:] if count < len(conn.unsent) else None
        sent += count
        if budget is not None and sent >= budget:
            return False


def _tls_would_block(exc: OSError) -> bool:
    import ssl

    return isinstance(exc, (ssl.SSLWantWriteError, ssl.SSLWantReadError))


def _finish(conn: _Conn) -> None:
    try:
        conn.sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    conn.sock.close()


class AuthGate:
    """Password checks for credentials not seen verified: one thread, one bcrypt at a time (as
    exporter-toolkit's lock), taking requests from each client address in turn, so that one
    address's flood delays another's request by one check, not by the flood. At most
    `AUTH_PER_CLIENT` requests wait per address and `AUTH_QUEUE` in all: `submit` says 429 or 503
    past that. `done(conn, right)` is called with each outcome, from the gate's thread."""

    def __init__(self, done: Callable[[_Conn, bool], None]):
        self._done = done
        self._waiting: collections.OrderedDict[str, collections.deque] = collections.OrderedDict()
        self._count = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, conn: _Conn, web: WebConfig, user: str, password: bytes) -> int | None:
        """Queue a check; None when queued, else the status to answer at once (429, 503)."""
        client = conn.address[0]
        with self._cond:
            line = self._waiting.get(client)
            if line is not None and len(line) >= AUTH_PER_CLIENT:
                return 429
            if self._count >= AUTH_QUEUE:
                return 503
            if line is None:
                line = self._waiting[client] = collections.deque()
            line.append((conn, web, user, password))
            self._count += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="auth", daemon=True)
                self._thread.start()
            self._cond.notify()
        return None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _next(self) -> tuple | None:
        with self._cond:
            while not self._count and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            client, line = next(iter(self._waiting.items()))
            item = line.popleft()
            self._count -= 1
            del self._waiting[client]
            if line:  # its next request waits behind every other address's
                self._waiting[client] = line
            return item

    def _run(self) -> None:
        while (item := self._next()) is not None:
            conn, web, user, password = item
            try:
                right = web.verify(user, password)
            except Exception:  # pragma: no cover - bcrypt raising on a valid config: refuse, never die
                log.exception("checking a password failed")
                right = False
            self._done(conn, right)


class _Handler:
    """What a request gets: everything but the scrape answered by the event loop (`route`, and
    `after_auth` once the gate verified a password), the scrape by a worker (`answer`)."""

    def __init__(self, render: Callable[..., Any], telemetry_path: str, web: WebConfig | WebConfigFile | None):
        self.render = render
        self.telemetry_path = telemetry_path
        self.web = web
        self.takes_deadline = _takes(render, "deadline")
        self.takes_deliver = self.takes_deadline and _takes(render, "deliver")

    def reply(self, conn: _Conn, code: int, content_type: str, body: list[str | bytes] | bytes,
              headers: dict | None = None, head: bool = False) -> Answer:
        extra = conn.web.headers if conn.web is not None else {}
        return Answer(code, content_type, body, {**extra, **(headers or {})}, head)

    def route(self, conn: _Conn, gate: AuthGate) -> Answer | str:
        """In the event loop: the answer, or SCRAPE (a worker's) or CHECKING (the gate has it)."""
        request = _parse_request(bytes(conn.buffer))
        if isinstance(request, int):
            message = b"bad request\n" if request == 400 else b"too many or too long headers\n"
            return self.reply(conn, request, "text/plain; charset=utf-8", message)
        conn.request = request
        method, _, headers = request
        if self.web is not None:
            from .webconfig import WebConfigError

            try:
                conn.web = self.web.current()
            except WebConfigError:  # exporter-toolkit answers 500 while its file does not load (logged once)
                return self.reply(conn, 500, "text/plain; charset=utf-8", b"Internal Server Error\n")
        if method not in ("GET", "HEAD"):
            return self.reply(conn, 405, "text/plain; charset=utf-8", b"method not allowed\n", {"Allow": "GET, HEAD"})
        if conn.web is not None and conn.web.users:
            credentials = _credentials(headers)
            known = None if credentials is None else conn.web.cached(*credentials)
            if credentials is None or known is False:
                return self.refusal(conn)
            if known is None:
                status = gate.submit(conn, conn.web, *credentials)
                if status is None:
                    return CHECKING
                refusal = self.reply(conn, status, "text/plain; charset=utf-8", b"too many password checks waiting\n",
                                     {"Retry-After": "1"})
                refusal.delayed = True
                return refusal
        return self.after_auth(conn)

    def after_auth(self, conn: _Conn) -> Answer | str:
        """The answer of an authorized request, or SCRAPE."""
        method, target, _ = conn.request
        path = target.split("?", 1)[0]
        if path == self.telemetry_path:
            return SCRAPE
        head = method == "HEAD"
        if path == "/":
            return self.reply(conn, 200, "text/html; charset=utf-8", _landing_page(self.telemetry_path).encode(),
                              head=head)
        return self.reply(conn, 404, "text/plain; charset=utf-8", b"404 page not found\n", head=head)

    def refusal(self, conn: _Conn) -> Answer:
        return self.reply(conn, 401, "text/plain; charset=utf-8", b"Unauthorized\n",
                          {"WWW-Authenticate": 'Basic realm="zfsnas-exporter"'})

    def answer(self, conn: _Conn, late: Callable[[_Conn, Answer], None]) -> Answer | None:
        """The scrape, in a worker; None when a read stuck past the deadline had the page sent by
        `late(conn, answer)` from the scrape's watchdog instead."""
        method, _, headers = conn.request
        deadline = scrape_deadline(headers, time.monotonic())
        try:
            if self.takes_deliver:
                page = self.render(deadline=deadline, deliver=lambda pieces: late(conn, self.page(conn, pieces)))
            else:
                page = self.render(deadline=deadline) if self.takes_deadline else self.render()
        except TimeoutError as exc:  # the deadline passed while an earlier scrape still ran
            return self.reply(conn, 503, "text/plain; charset=utf-8", f"{exc}\n".encode())
        except Exception as exc:  # collectors guard themselves; this is the last line of defence
            log.error("rendering metrics failed: %s", str(exc)[:500])
            return self.reply(conn, 500, "text/plain; charset=utf-8", b"rendering metrics failed\n")
        return None if page is None else self.page(conn, page)

    def page(self, conn: _Conn, page: str | list[str | bytes]) -> Answer:
        """The answer of a page: gzipped when the client takes it."""
        method, _, headers = conn.request
        head = method == "HEAD"
        pieces: list[str | bytes] = [page] if isinstance(page, str) else page
        if "gzip" in headers.get("accept-encoding", ""):
            import zlib

            packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip at level 1, a page at a time
            packed = [packer.compress(chunk) for chunk in _body_chunks(pieces)]
            packed.append(packer.flush())
            return self.reply(conn, 200, CONTENT_TYPE, b"".join(packed), {"Content-Encoding": "gzip"}, head)
        return self.reply(conn, 200, CONTENT_TYPE, pieces, head=head)


def make_server(address: str | socket.socket, render: Callable[..., Any], telemetry_path: str = "/metrics",
                web: WebConfig | WebConfigFile | None = None) -> Server:
    """An HTTP server whose telemetry path answers with `render()`: the page in the Prometheus text
    format, as one string or a list of its pieces. `render(deadline=...)` is given the scrape's
    monotonic deadline when it takes one. `web`: a `WebConfig`, or a `WebConfigFile` read again
    as it changes. `address`: host:port, or a listening socket (`systemd_socket()`)."""
    listen = address if isinstance(address, socket.socket) else parse_listen_address(address)
    return Server(listen, _Handler(render, telemetry_path, web), web)


SD_LISTEN_FDS_START = 3   # sd_listen_fds(3): the first socket systemd passes


def systemd_socket() -> socket.socket | None:
    """The listening socket systemd passed (socket activation: `deploy/zfsnas-exporter.socket`),
    else None. Taken when LISTEN_PID is this process and LISTEN_FDS at least 1, and the variables
    are then removed, so that no child (zfs, zpool, smartctl) takes them for its own. With it the
    unit needs no network socket of its own (RestrictAddressFamilies without AF_INET), and scrapes
    that come while the exporter restarts wait in the socket's queue instead of being refused."""
    pid, fds = os.environ.pop("LISTEN_PID", ""), os.environ.pop("LISTEN_FDS", "")
    os.environ.pop("LISTEN_FDNAMES", None)
    if pid != str(os.getpid()) or not fds.isdigit() or int(fds) < 1:
        return None
    listener = socket.socket(fileno=SD_LISTEN_FDS_START)
    if listener.type != socket.SOCK_STREAM:
        listener.detach()
        raise ValueError("the socket systemd passed is not a stream socket (ListenStream=)")
    return listener


def describe_listener(server: Server) -> str:
    """host:port the server answers on, as a user would write it."""
    host, port = server.server_address[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _takes(render: Callable[..., Any], parameter: str) -> bool:
    """Whether `render` has that parameter. Read from its code object (a bound method lends its
    function's): `inspect.signature` would import inspect, with dis and ast, at start-up."""
    code = getattr(render, "__code__", None)
    return code is not None and parameter in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


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


def _credentials(headers: dict[str, str]) -> tuple[str, bytes] | None:
    """(user, password) of a Basic Authorization header; None without a readable one."""
    import base64
    import binascii

    scheme, _, encoded = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(encoded.strip(), validate=True).partition(b":")
        name = user.decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (name, password) if name else None


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
