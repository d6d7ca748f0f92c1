"""Our `--web.config.file` side by side with Debian's node_exporter 1.5 (its exporter-toolkit) on the
same files: both must refuse the same configs at start, and on the configs both accept, every probe
(plain HTTP, TLS versions, curves, client certificates, basic auth, extra headers) must get the
same outcome. Where we knowingly refuse what node_exporter accepts, the case says why
(docs/reliability.md lists them); nowhere may we accept what it refuses, or serve what it refuses.
"""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from tests.conftest import free_port
from tests.integration.exporter_process import exporter_command

NODE_EXPORTER = shutil.which("prometheus-node-exporter")
pytestmark = pytest.mark.skipif(NODE_EXPORTER is None or shutil.which("openssl") is None,
                                reason="needs Debian's prometheus-node-exporter and openssl")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA, a server certificate for 127.0.0.1 it signed, a client it signed, and a self-signed client."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    for name, cn, ext in (("server", "127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                          ("client", "scraper", "subjectAltName=DNS:scraper.example")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=stranger",
            "-keyout", "stranger.key", "-out", "stranger.pem", cwd=d)
    return d


HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
TLS = "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
MTLS = TLS + "  client_ca_file: ca.pem\n"

# (case id, web config, what we do where node_exporter differs: None = same, else why we refuse)
CASES = [
    ("empty", "", None),
    ("tls", TLS, None),
    ("tls-empty-section", "tls_server_config: {}\n", None),
    ("tls13-only", TLS + "  min_version: TLS13\n", None),
    ("tls12-max", TLS + "  max_version: TLS12\n", None),
    ("ciphers", TLS + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n", None),
    ("ciphers-without-http2-suite", TLS + "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n", None),
    ("ciphers-http2-off", TLS + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n"
                          "http_server_config:\n  http2: false\n", None),
    ("ciphers-tls13-names-only", TLS + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"
                                 "http_server_config:\n  http2: false\n", None),
    ("curves", TLS + "  curve_preferences: [CurveP384]\n", None),
    ("prefer-server-ciphers-off", TLS + "  prefer_server_cipher_suites: false\n", None),
    ("mtls-require", MTLS + "  client_auth_type: RequireAndVerifyClientCert\n", None),
    ("mtls-if-given", MTLS + "  client_auth_type: VerifyClientCertIfGiven\n", None),
    ("ca-without-auth-type", MTLS, None),
    ("ca-with-no-client-cert", MTLS + "  client_auth_type: NoClientCert\n", None),
    ("request-client-cert", MTLS + "  client_auth_type: RequestClientCert\n", None),
    ("require-any-client-cert", MTLS + "  client_auth_type: RequireAnyClientCert\n",
     "an unverified client certificate proves nothing, and Python's ssl cannot require one without verifying it"),
    ("client-allowed-sans", MTLS + "  client_auth_type: RequireAndVerifyClientCert\n"
                                   "  client_allowed_sans: [scraper.example]\n", None),
    ("basic-auth", f"basic_auth_users:\n  prometheus: '{HASH}'\n", None),
    ("basic-auth-tls", TLS + f"basic_auth_users:\n  prometheus: '{HASH}'\n", None),
    ("duplicate-user", f"basic_auth_users:\n  prometheus: '{HASH}'\n  prometheus: '{HASH}'\n", None),
    ("duplicate-tls", TLS + "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n", None),
    ("headers", "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
                "    X-Content-Type-Options: nosniff\n    Strict-Transport-Security: max-age=60\n", None),
    ("header-not-allowed", "http_server_config:\n  headers:\n    Foo: bar\n", None),
    ("header-bad-value", "http_server_config:\n  headers:\n    X-Frame-Options: bogus\n", None),
    ("http-unknown-field", "http_server_config:\n  bogus: 1\n", None),
    ("unknown-top-field", "tls_server_confg: {}\n", None),
    ("wrong-type-users", "basic_auth_users: 5\n", None),
    ("wrong-type-bool", TLS + "  prefer_server_cipher_suites: 'yes'\n", None),
    ("wrong-type-list", "tls_server_config:\n  cert_file: [server.pem]\n  key_file: server.key\n", None),
    ("top-level-list", "- a\n", None),
    ("not-a-hash", "basic_auth_users:\n  alice: plaintext\n", None),
    ("unknown-cipher", TLS + "  cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256]\n", None),
    ("unknown-curve", TLS + "  curve_preferences: [P256]\n", None),
    ("unknown-version", TLS + "  min_version: TLS9\n", None),
    ("missing-key", "tls_server_config:\n  cert_file: server.pem\n", None),
    ("auth-type-without-cert", "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n", None),
    ("bad-auth-type", TLS + "  client_auth_type: Sometimes\n", None),
    ("missing-cert-file", "tls_server_config:\n  cert_file: nope.pem\n  key_file: server.key\n", None),
    ("min-above-max", TLS + "  min_version: TLS13\n  max_version: TLS12\n",
     "no client could ever connect: refused at start rather than failing every handshake"),
    # issue 33: every hash form Go's bcrypt reads, and the costs it refuses
    *[(f"hash-{prefix.strip('$')}", f"basic_auth_users:\n  prometheus: '{prefix}{HASH[4:]}'\n", None)
      for prefix in ("$2$", "$2a$", "$2x$", "$2y$")],
    ("cost-03", f"basic_auth_users:\n  prometheus: '{HASH[:4]}03{HASH[6:]}'\n", None),
    ("cost-32", f"basic_auth_users:\n  prometheus: '{HASH[:4]}32{HASH[6:]}'\n", None),
    ("header-crlf", 'http_server_config:\n  headers:\n    Strict-Transport-Security: "max-age=1\\r\\nSet-Cookie: a=1"\n',
     "a line break in a header value would start a header of its own (Go turns it into a space)"),
    ("header-non-ascii", "http_server_config:\n  headers:\n    Strict-Transport-Security: max-age=\u00e9t\u00e9\n",
     "a header value outside ASCII is not valid HTTP (every answer failed before)"),
]


def start(argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def accepted(proc: subprocess.Popen, port: int, log: Path, timeout: float = 20) -> bool:
    """True once it serves, False if the process exits first (it refused its config). node_exporter
    listens before it reads its web config: it serves once it has logged "TLS is enabled/disabled"."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if "node_exporter" in proc.args[0]:
            if "TLS is" not in log.read_text():
                time.sleep(0.05)
                continue
            time.sleep(0.3)  # it may still refuse right after (e.g. HTTP/2's cipher rule)
            if proc.poll() is not None:
                return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{proc.args[0]} neither served nor exited within {timeout}s")


def probe(port: int, pki: Path, *, https: bool, client: str | None = None, version: str | None = None,
          curve: str | None = None, user: str | None = None, password: str = "") -> tuple:
    """What a client sees: ("ok", configured headers), ("unauthorized", scheme) or ("refused",)."""
    url = f"{'https' if https else 'http'}://127.0.0.1:{port}/metrics"
    headers = {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    kwargs = {}
    if https:
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        if client:
            context.load_cert_chain(pki / f"{client}.pem", pki / f"{client}.key")
        if version:
            context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, version)
        if curve:
            context.set_ecdh_curve(curve)
        kwargs["context"] = context
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10, **kwargs) as response:
            shown = {k: response.headers[k] for k in ("X-Frame-Options", "X-Content-Type-Options",
                                                      "Strict-Transport-Security") if response.headers[k]}
            return "ok", shown
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return "unauthorized", exc.headers["WWW-Authenticate"].split()[0]
        return ("refused",)  # node_exporter answers plain HTTP on a TLS port with a 400; we hang up
    except (urllib.error.URLError, OSError):
        return ("refused",)


PROBES = {
    "plain http": dict(https=False),
    "https": dict(https=True),
    "https TLS 1.2": dict(https=True, version="TLSv1_2"),
    "https TLS 1.3": dict(https=True, version="TLSv1_3"),
    "https P-256 only": dict(https=True, version="TLSv1_2", curve="prime256v1"),
    "https client cert": dict(https=True, client="client"),
    "https stranger cert": dict(https=True, client="stranger"),
    "right password": dict(https=None, user="prometheus", password="s3cret"),
    "wrong password": dict(https=None, user="prometheus", password="nope"),
    "unknown user": dict(https=None, user="mallory", password="s3cret"),
}


def outcomes(port: int, pki: Path, tls: bool) -> dict:
    out = {}
    for name, kwargs in PROBES.items():
        kwargs = dict(kwargs)
        if kwargs["https"] is None:
            kwargs["https"] = tls
        elif not tls and kwargs["https"]:
            continue  # TLS probes say nothing about a plain HTTP server beyond "refused" on both
        out[name] = probe(port, pki, **kwargs)
    return out


def start_pair(web: Path, tmp_path: Path) -> tuple[subprocess.Popen, subprocess.Popen, int, int]:
    """node_exporter and ours on the web config `web`: (node, ours, node's port, our port)."""
    node_port, our_port = free_port(), free_port()
    node = start([NODE_EXPORTER, f"--web.config.file={web}", f"--web.listen-address=127.0.0.1:{node_port}",
                  "--collector.disable-defaults"], tmp_path / "node.log")
    ours = start([*exporter_command(), f"--web.config.file={web}", f"--web.listen-address=127.0.0.1:{our_port}",
                  "--collector.disable-defaults", f"--path.procfs={tmp_path}", f"--path.sysfs={tmp_path}"],
                 tmp_path / "ours.log")
    return node, ours, node_port, our_port


@pytest.mark.parametrize("case, config, we_refuse", CASES, ids=[c[0] for c in CASES])
def test_same_outcome_as_node_exporter(pki, tmp_path, case, config, we_refuse):
    web = pki / f"{case}.yml"
    web.write_text(config)
    node, ours, node_port, our_port = start_pair(web, tmp_path)
    try:
        node_ok, our_ok = accepted(node, node_port, tmp_path / "node.log"), accepted(ours, our_port, tmp_path / "ours.log")
        our_log = (tmp_path / "ours.log").read_text()
        if we_refuse:
            assert node_ok and not our_ok, f"expected node_exporter to accept and us to refuse: {our_log}"
            assert len(our_log.strip().splitlines()) == 1 and "Traceback" not in our_log
            return
        assert our_ok == node_ok, (f"node_exporter {'accepts' if node_ok else 'refuses'}, we "
                                   f"{'accept' if our_ok else 'refuse'}: {our_log}\n"
                                   f"{(tmp_path / 'node.log').read_text()[-600:]}")
        if not our_ok:
            assert ours.returncode == 2
            lines = our_log.strip().splitlines()
            assert len(lines) == 1 and "invalid web config" in lines[0] and "Traceback" not in our_log
            return
        tls = "cert_file" in config
        theirs = outcomes(node_port, pki, tls)
        mine = outcomes(our_port, pki, tls)
        assert mine == theirs
    finally:
        for proc in (node, ours):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)


def test_the_cases_cover_every_outcome(pki, tmp_path):
    """The probes must tell configs apart: on mTLS a stranger is refused and a signed client served,
    with basic auth only the right password is served (so a broken probe cannot make everything equal)."""
    web = pki / "check.yml"
    web.write_text(MTLS + "  client_auth_type: RequireAndVerifyClientCert\n" + f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    port = free_port()
    ours = start([*exporter_command(), f"--web.config.file={web}", f"--web.listen-address=127.0.0.1:{port}",
                  "--collector.disable-defaults", f"--path.procfs={tmp_path}", f"--path.sysfs={tmp_path}"],
                 tmp_path / "ours.log")
    try:
        assert accepted(ours, port, tmp_path / "ours.log")
        assert probe(port, pki, https=True, client="stranger", user="prometheus", password="s3cret") == ("refused",)
        assert probe(port, pki, https=True, client="client", user="prometheus", password="s3cret")[0] == "ok"
        assert probe(port, pki, https=True, client="client", user="prometheus", password="x") == ("unauthorized", "Basic")
        assert probe(port, pki, https=True, client="client", user="mallory", password="s3cret") == ("unauthorized", "Basic")
        assert probe(port, pki, https=False) == ("refused",)
    finally:
        ours.terminate()
        ours.wait(10)


# --- issue 33, case 5: the file read again as it changes ---------------------------------------------

def status(port: int, user: str, password: str, context: ssl.SSLContext | None = None) -> int | str:
    """The HTTP status a client gets, or "refused" (no answer: a handshake that failed)."""
    scheme = "https" if context else "http"
    headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{scheme}://127.0.0.1:{port}/metrics", headers=headers),
                                    timeout=10, context=context) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return "refused"


def served_certificate(port: int, pki: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def both(pki: Path, tmp_path: Path, config: str):
    web = tmp_path / "web.yml"
    web.write_text(config)
    node, ours, node_port, our_port = start_pair(web, tmp_path)
    assert accepted(node, node_port, tmp_path / "node.log") and accepted(ours, our_port, tmp_path / "ours.log")
    return web, {"node_exporter": node_port, "ours": our_port}, (node, ours)


def test_a_changed_deleted_or_broken_file_is_seen_as_node_exporter_sees_it(pki, tmp_path):
    """Before: after a password rotation our old password still got 200 (node: 401), and a deleted
    or broken file kept serving 200 (node: 500)."""
    rotated = bcrypt.hashpw(b"n3w", bcrypt.gensalt(rounds=4)).decode()
    web, ports, procs = both(pki, tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    try:
        def seen(user: str, password: str) -> dict:
            return {name: status(port, user, password) for name, port in ports.items()}

        assert seen("prometheus", "s3cret") == {"node_exporter": 200, "ours": 200}
        web.write_text(f"basic_auth_users:\n  prometheus: '{rotated}'\n")
        assert seen("prometheus", "s3cret") == {"node_exporter": 401, "ours": 401}
        assert seen("prometheus", "n3w") == {"node_exporter": 200, "ours": 200}
        web.write_text("basic_auth_users: [\n")
        assert seen("prometheus", "n3w") == {"node_exporter": 500, "ours": 500}
        web.unlink()
        assert seen("prometheus", "n3w") == {"node_exporter": 500, "ours": 500}
        web.write_text(f"basic_auth_users:\n  prometheus: '{rotated}'\n")
        assert seen("prometheus", "n3w") == {"node_exporter": 200, "ours": 200}
        log = (tmp_path / "ours.log").read_text()
        assert log.count("web config no longer loads") == 2 and "Traceback" not in log  # once per change
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def test_a_replaced_certificate_is_served_from_the_next_handshake_as_by_node_exporter(pki, tmp_path):
    """Before: the certificate loaded at start was served until a restart."""
    for name in ("server.pem", "server.key", "ca.pem"):
        (tmp_path / name).write_bytes((pki / name).read_bytes())
    web, ports, procs = both(pki, tmp_path, TLS)
    try:
        first = {name: served_certificate(port, pki) for name, port in ports.items()}
        assert first["ours"] == first["node_exporter"] == ssl.PEM_cert_to_DER_cert((pki / "server.pem").read_text())
        # a renewed certificate for the same name, signed by the same CA, in place of the old files
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "renewed.key",
                "-out", "renewed.csr", cwd=pki)
        openssl("x509", "-req", "-in", "renewed.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "server.ext", "-out", "renewed.pem", cwd=pki)
        (tmp_path / "server.key").write_bytes((pki / "renewed.key").read_bytes())
        (tmp_path / "server.pem").write_bytes((pki / "renewed.pem").read_bytes())
        renewed = ssl.PEM_cert_to_DER_cert((pki / "renewed.pem").read_text())
        assert {name: served_certificate(port, pki) == renewed for name, port in ports.items()} == \
            {"node_exporter": True, "ours": True}
        web.write_text("tls_server_config: [\n")  # broken: no handshake on either
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        assert {name: status(port, "a", "b", context) for name, port in ports.items()} == \
            {"node_exporter": "refused", "ours": "refused"}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
