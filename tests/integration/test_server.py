"""The real exporter process: landing page, 404, gzip, basic auth, TLS, web config errors, no ZFS."""

import base64
import gzip
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import bcrypt
import pytest

from tests.conftest import linux_tree, value
from tests.integration.exporter_process import ExporterProcess, exporter_command


def fixture_flags(version="2.3.2"):
    root = linux_tree(version)
    return ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys")]


def test_landing_metrics_404_gzip(port, tmp_path):
    with ExporterProcess(port, *fixture_flags(), log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        landing = exp.get("/")
        assert 'href="/metrics"' in landing
        text = exp.get("/metrics")
        assert value(text, "zfs_arc_size_bytes") == 11_811_160_064
        assert value(text, "zfs_exporter_collector_success", collector="txg") == 1
        assert value(text, "process_resident_memory_bytes") > 0
        with pytest.raises(urllib.error.HTTPError) as err:
            exp.get("/nothing")
        assert err.value.code == 404
        request = urllib.request.Request(exp.url + "/metrics", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request) as response:
            assert response.headers["Content-Encoding"] == "gzip"
            assert b"zfs_arc_hits_total" in gzip.decompress(response.read())


def test_custom_telemetry_path(port):
    with ExporterProcess(port, *fixture_flags(), "--web.telemetry-path=/zfs") as exp:
        exp.wait_ready()
        assert "zfs_arc_hits_total" in exp.get("/zfs")
        assert 'href="/zfs"' in exp.get("/")


def make_cert(tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                   check=True, capture_output=True)


def test_tls_and_basic_auth(port, tmp_path):
    make_cert(tmp_path)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    with ExporterProcess(port, *fixture_flags(), f"--web.config.file={tmp_path / 'web.yml'}",
                         log_path=tmp_path / "log") as exp:
        exp.wait_ready(scheme="https", context=context)
        url = f"https://127.0.0.1:{port}/metrics"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, context=context)
        assert err.value.code == 401 and "Basic" in err.value.headers["WWW-Authenticate"]
        for password, ok in ((b"wrong", False), (b"s3cret", True), (b"s3cret", True)):
            auth = base64.b64encode(b"prometheus:" + password).decode()
            request = urllib.request.Request(url, headers={"Authorization": f"Basic {auth}"})
            if ok:
                with urllib.request.urlopen(request, context=context) as response:
                    assert b"zfs_arc_size_bytes" in response.read()
            else:
                with pytest.raises(urllib.error.HTTPError):
                    urllib.request.urlopen(request, context=context)
        with pytest.raises(OSError):  # plain HTTP is not served (reset or refused)
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3)


@pytest.mark.parametrize("content, message", [
    ("basic_auth_users:\n  alice: plaintext\n", "not a bcrypt hash"),
    ("tls_server_config:\n  cert_file: nope.pem\n  key_file: nope.pem\n",
     "tls_server_config: cannot load cert_file nope.pem, key_file nope.pem: No such file or directory"),
    ("tls_server_confg: {}\n", "unknown field tls_server_confg"),
    # issue 33: a traceback (exit 1) before for these three; a raw Set-Cookie line or failing answers for the others
    *[(f"basic_auth_users:\n  p: '$2b${cost}$" + "a" * 53 + "'\n", f"the bcrypt cost of 'p' is {cost}, outside 04..31")
      for cost in ("03", "32", "99")],
    ('http_server_config:\n  headers:\n    X-XSS-Protection: "1\\r\\nSet-Cookie: pwn=1"\n',
     "the value of X-XSS-Protection holds a line break (CR or LF)"),
    ("http_server_config:\n  headers:\n    X-XSS-Protection: \u00e9\n", "holds a character outside printable ASCII"),
])
def test_bad_web_config_is_refused_at_start(tmp_path, content, message):
    (tmp_path / "web.yml").write_text(content)
    proc = subprocess.run([*exporter_command(), "--web.listen-address=127.0.0.1:0",
                           f"--web.config.file={tmp_path / 'web.yml'}"], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_high_bcrypt_cost_is_warned_about_and_the_start_not_held_up(port, tmp_path):
    """Before: cost 17 meant 8 s of bcrypt before listening, without a word."""
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$04$", "$17$", 1)
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    started = time.monotonic()
    with ExporterProcess(port, *fixture_flags(), f"--web.config.file={tmp_path / 'web.yml'}",
                         log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        assert time.monotonic() - started < 5
        assert "the bcrypt cost of 'prometheus' is 17" in exp.log()


def test_no_zfs_at_all_serves_self_metrics_and_says_so_once(port, tmp_path):
    with ExporterProcess(port, "--path.procfs", str(tmp_path), "--path.sysfs", str(tmp_path),
                         log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        for _ in range(3):
            text = exp.get()
        assert value(text, "zfs_exporter_collector_success", collector="arc") == 0
        assert value(text, "process_resident_memory_bytes") > 0
        assert "zfs_arc_size_bytes" not in text
        assert exp.proc.poll() is None
    assert exp.log().count("no ZFS kernel module found") == 1


def test_listen_address_in_use_is_a_clear_error(port):
    with ExporterProcess(port, *fixture_flags()) as first:
        first.wait_ready()
        proc = subprocess.run([*exporter_command(), f"--web.listen-address=127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=20)
        assert proc.returncode == 2 and "cannot listen on" in proc.stderr


def raw_request(port, payload: bytes) -> bytes:
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_protocol_edges(port):
    with ExporterProcess(port, *fixture_flags()) as exp:
        exp.wait_ready()
        assert raw_request(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 405 ")
        assert raw_request(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        head = raw_request(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
        too_many = b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(200)) + b"\r\n"
        assert raw_request(port, too_many).startswith(b"HTTP/1.1 431 ")
        get = raw_request(port, b"GET /metrics HTTP/1.0\r\n\r\n")
        header, _, body = get.partition(b"\r\n\r\n")
        assert b"Content-Type: text/plain; version=0.0.4" in header
        assert int(header.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
        assert exp.proc.poll() is None
