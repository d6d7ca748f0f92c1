"""The HTTP side: `/metrics`, a landing page, TLS and basic auth from the web config.

A small HTTP/1.1 server on `socketserver` rather than `http.server`: the latter pulls in
`http.client`, `ssl` and `email`, about 10 MB of resident memory a NAS should not pay for an
exporter that answers GET requests. Each request is answered and the connection closed; TLS
(and so `ssl`) is loaded only when the web config asks for it. Owns nothing about ZFS.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import html
import logging
import socket
import socketserver
import threading
from collections.abc import Callable

from . import __version__
from .exposition import CONTENT_TYPE
from .webconfig import WebConfig

log = logging.getLogger("zfsnas")

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 431: "Request Header Fields Too Large", 500: "Internal Server Error"}
MAX_LINE = 8192
MAX_HEADERS = 100


def parse_listen_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--web.listen-address {address!r} is not [host]:port")
    return host.strip("[]") or "0.0.0.0", int(port)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address):
        # A client that hangs up or fails the TLS handshake is not the exporter's problem.
        log.debug("request from %s failed", client_address[0], exc_info=True)


def make_server(address: str, render: Callable[[], str], telemetry_path: str = "/metrics",
                web: WebConfig | None = None) -> socketserver.TCPServer:
    """An HTTP server whose telemetry path answers with `render()` (Prometheus text format)."""
    web = web or WebConfig()
    host, port = parse_listen_address(address)
    landing = _landing_page(telemetry_path).encode()

    class Handler(socketserver.StreamRequestHandler):
        timeout = 30

        def setup(self):
            if web.tls is not None:  # the handshake runs here, in the request's own thread
                self.request = web.tls.wrap_socket(self.request, server_side=True)
            super().setup()

        def handle(self):
            try:
                request = self._read_request()
                if request is not None:
                    self._dispatch(*request)
            except (OSError, ValueError) as exc:
                log.debug("%s: %s", self.client_address[0], exc)

        def _read_request(self):
            line = self.rfile.readline(MAX_LINE + 1)
            parts = line.decode("latin-1").split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/") or len(line) > MAX_LINE:
                self._reply(400, "text/plain; charset=utf-8", b"bad request\n")
                return None
            headers = {}
            for _ in range(MAX_HEADERS):
                raw = self.rfile.readline(MAX_LINE + 1)
                if raw in (b"\r\n", b"\n", b""):
                    return parts[0], parts[1], headers
                if len(raw) > MAX_LINE:
                    break
                name, _, value = raw.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            self._reply(431, "text/plain; charset=utf-8", b"too many or too long headers\n")
            return None

        def _dispatch(self, method: str, target: str, headers: dict[str, str]):
            if method not in ("GET", "HEAD"):
                self._reply(405, "text/plain; charset=utf-8", b"method not allowed\n", {"Allow": "GET, HEAD"})
                return
            if not self._authorized(headers):
                self._reply(401, "text/plain; charset=utf-8", b"unauthorized\n",
                            {"WWW-Authenticate": 'Basic realm="zfsnas-exporter"'})
                return
            path = target.split("?", 1)[0]
            head = method == "HEAD"
            if path == telemetry_path:
                try:
                    body = render().encode()
                except Exception as exc:  # collectors guard themselves; this is the last line of defence
                    log.error("rendering metrics failed: %s", exc)
                    self._reply(500, "text/plain; charset=utf-8", b"rendering metrics failed\n")
                    return
                if "gzip" in headers.get("accept-encoding", ""):
                    self._reply(200, CONTENT_TYPE, gzip.compress(body, 1), {"Content-Encoding": "gzip"}, head)
                else:
                    self._reply(200, CONTENT_TYPE, body, head=head)
            elif path == "/":
                self._reply(200, "text/html; charset=utf-8", landing, head=head)
            else:
                self._reply(404, "text/plain; charset=utf-8", b"404 page not found\n", head=head)

        def _authorized(self, headers: dict[str, str]) -> bool:
            if not web.users:
                return True
            scheme, _, encoded = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "basic":
                return False
            try:
                user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            return bool(user) and web.authorized(user, password)

        def _reply(self, code: int, content_type: str, body: bytes, headers: dict | None = None,
                   head: bool = False):
            lines = [f"HTTP/1.1 {code} {_REASONS[code]}", f"Content-Type: {content_type}",
                     f"Content-Length: {len(body)}", "Connection: close",
                     f"Server: zfsnas-exporter/{__version__}"]
            lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body))

    server_class = _Server
    if ":" in host:
        class _Server6(_Server):
            address_family = socket.AF_INET6
        server_class = _Server6
    return server_class((host, port), Handler)


def serve_in_thread(server: socketserver.TCPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return thread


def _landing_page(telemetry_path: str) -> str:
    path = html.escape(telemetry_path)
    return f"""<!DOCTYPE html>
<html><head><title>zfsnas exporter</title></head>
<body><h1>zfsnas exporter {html.escape(__version__)}</h1>
<p>ZFS ARC/L2ARC, txg and dirty data, datasets, pools and disks for Prometheus.</p>
<ul><li><a href="{path}">Metrics</a></li></ul>
</body></html>
"""
