"""The compose file's `wget` health checks, run as written against stand-ins that answer as each
service's published health contract, with both wget families an image may carry.

The engine test (test_engine.py) runs the checks for real, but on our Debian-built images, whose
`wget` is GNU wget. The images the compose file names by default carry BusyBox's `wget`
(Grafana's Alpine-based image, and the Prometheus projects' busybox-based images), and Grafana's
image cannot be had here at all. So each check's exact argv runs here twice: with GNU wget and
with Debian's BusyBox applet. Debian's BusyBox is built without wget's `-T` (it crashes on it),
and which build an upstream image carries is theirs to change: the checks therefore use only
`-q -O`, and a hung service is cut off by compose's own `timeout:`, which is asserted below.

Contracts (from each project's documentation): Grafana `GET /api/health` answers 200 with
`{"commit", "database": "ok", "version"}`, and 503 with `"database": "failing"` when its database
is unusable; Prometheus and Alertmanager `GET /-/healthy` answer 200 with a line of text;
node_exporter answers 200 on `/`.
"""

from __future__ import annotations

import http.server
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.conftest import free_port
from tests.stack.test_stack import compose_config

HEALTHY = {
    "/api/health": (200, "application/json", json.dumps({"commit": "0123abc", "database": "ok", "version": "11.6.0"})),
    "/-/healthy": (200, "text/plain", "Healthy.\n"),
    "/": (200, "text/html", "<html><body>Node Exporter</body></html>"),
}
GRAFANA_DB_FAILING = (503, "application/json", json.dumps({"commit": "0123abc", "database": "failing", "version": "11.6.0"}))


@contextmanager
def stand_in(answers: dict[str, tuple[int, str, str]]) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 answering each path as given (404 for others); yields its port."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, kind, body = answers.get(self.path.split("?")[0], (404, "text/plain", "not found\n"))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def wget_checks() -> dict[str, tuple[list[str], dict]]:
    """service -> (the check's argv after CMD, its healthcheck block), for every wget check."""
    out = {}
    for name, service in compose_config()["services"].items():
        check = service.get("healthcheck", {})
        test = check.get("test", [])
        if test[:2] == ["CMD", "wget"]:
            out[name] = (test[1:], check)
    return out


def wgets() -> list[tuple[str, list[str]]]:
    gnu = shutil.which("wget") or pytest.fail("wget is not installed: run ./dev test")
    busybox = shutil.which("busybox") or pytest.fail("busybox is not installed: run ./dev test, which installs it")
    return [("GNU wget", [gnu]), ("BusyBox wget", [busybox, "wget"])]


def run_check(argv: list[str], wget: list[str], port: int) -> int:
    """The check's argv with its wget and its URL's port replaced; the exit status docker would judge."""
    args = [re.sub(r"^(http://[^/:]+):\d+", rf"\g<1>:{port}", a) for a in argv[1:]]
    return subprocess.run([*wget, *args], capture_output=True, timeout=30).returncode


def test_the_checks_are_the_ones_we_think():
    checks = wget_checks()
    assert set(checks) == {"node-exporter", "prometheus", "alertmanager", "grafana"}
    assert checks["grafana"][0] == ["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:3000/api/health"]
    for name, (argv, check) in checks.items():
        # only options every wget has: no -T (Debian's BusyBox crashes on it), no --spider
        assert [a for a in argv if a.startswith("-")] == ["-q", "-O"], name
        # a hung service is cut off by the engine: the timeout must end a check before the next starts
        assert _seconds(check["timeout"]) < _seconds(check["interval"]), name


@pytest.mark.parametrize("service", ["node-exporter", "prometheus", "alertmanager", "grafana"])
def test_a_healthy_service_passes_with_either_wget(service):
    argv, _ = wget_checks()[service]
    with stand_in(HEALTHY) as port:
        assert {name: run_check(argv, wget, port) for name, wget in wgets()} == {"GNU wget": 0, "BusyBox wget": 0}


def test_grafana_with_a_failing_database_is_unhealthy_with_either_wget():
    argv, _ = wget_checks()["grafana"]
    with stand_in({**HEALTHY, "/api/health": GRAFANA_DB_FAILING}) as port:
        codes = {name: run_check(argv, wget, port) for name, wget in wgets()}
    assert all(code not in (0, 139) for code in codes.values()), codes   # 139: a crash is not a verdict


@pytest.mark.parametrize("service", ["prometheus", "grafana"])
def test_nothing_listening_is_unhealthy_with_either_wget(service):
    argv, _ = wget_checks()[service]
    port = free_port()   # bound and released: nothing listens there
    codes = {name: run_check(argv, wget, port) for name, wget in wgets()}
    assert all(code not in (0, 139) for code in codes.values()), codes


def test_the_old_timeout_option_crashes_debian_busybox():
    """Why the checks carry no -T: keep this true, or the reason is gone and -T may come back."""
    busybox = dict(wgets())["BusyBox wget"]
    with stand_in(HEALTHY) as port:
        code = subprocess.run([*busybox, "-q", "-T", "5", "-O", "/dev/null", f"http://127.0.0.1:{port}/-/healthy"],
                              capture_output=True, timeout=30).returncode
    assert code != 0


def _seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text):
        total += float(number) * units[unit]
    return total
