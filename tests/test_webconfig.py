"""Web config parsing (exporter/zfsnas/webconfig.py): one-line errors naming the field, duplicates
refused, and the same bcrypt work for an unknown user as for a wrong password."""

from __future__ import annotations

import time

import bcrypt
import pytest

from zfsnas import webconfig
from zfsnas.webconfig import WebConfigError, load_web_config

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=5)).decode()


def load(tmp_path, text):
    (tmp_path / "web.yml").write_text(text)
    return load_web_config(str(tmp_path / "web.yml"))


@pytest.mark.parametrize("text, message", [
    (f"basic_auth_users:\n  a: '{HASH}'\n  a: '{HASH}'\n", "key 'a' given twice"),
    ("tls_server_config: {}\ntls_server_config: {}\n", "key 'tls_server_config' given twice"),
    ("basic_auth_users: [a, b]\n", "basic_auth_users must be a mapping, not a list"),
    ("tls_server_config:\n  prefer_server_cipher_suites: 'no'\n",
     "tls_server_config.prefer_server_cipher_suites must be true or false, not a string"),
    ("tls_server_config:\n  cipher_suites: TLS_AES_128_GCM_SHA256\n", "tls_server_config.cipher_suites must be a list"),
    ("tls_server_config:\n  client_allowed_sans: [a]\n", "unknown field tls_server_config.client_allowed_sans"),
    ("http_server_config: 3\n", "http_server_config must be a mapping, not a number"),
    ("tls_server_config:\n  cert_file: {a: 1}\n", "tls_server_config.cert_file must be a string, not a mapping"),
    ("a: [\n", "while parsing"),
])
def test_refused_with_one_line_naming_the_field(tmp_path, text, message):
    with pytest.raises(WebConfigError) as err:
        load(tmp_path, text)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_user_costs_the_same_bcrypt_work(tmp_path, monkeypatch):
    config = load(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    checked = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda pw, hashed: checked.append(hashed) or real(pw, hashed))
    assert config.authorized("prometheus", "s3cret") is True
    assert config.authorized("prometheus", "wrong") is False
    assert config.authorized("mallory", "s3cret") is False
    assert config.authorized("mallory", "s3cret") is False  # cached like any other answer
    assert len(checked) == 3
    costs = [int(h.decode().split("$")[2]) for h in checked]
    assert costs == [5, 5, 5]
    assert checked[2] != checked[0]  # a dummy hash, not a real user's


def test_remembered_answers_are_bounded_and_wrong_ones_never_push_out_right_ones(tmp_path):
    config = load(tmp_path, f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(b'x', bcrypt.gensalt(4)).decode()}'\n")
    assert config.cached("prometheus", "x") is None and config.authorized("prometheus", "x") is True
    for i in range(webconfig._BAD_MAX + 50):
        assert config.authorized("prometheus", f"guess{i}") is False
    assert len(config._bad) == webconfig._BAD_MAX
    assert config.cached("prometheus", "x") is True  # still known: no bcrypt for the scraper
    assert config.cached("prometheus", "guess0") is None and config.cached("prometheus", f"guess{i}") is False


def test_scalars_become_strings_as_in_go(tmp_path):
    """`cert_file: 5` names the file "5" in exporter-toolkit: the same here (and it does not exist)."""
    with pytest.raises(WebConfigError) as err:
        load(tmp_path, "tls_server_config:\n  cert_file: 5\n  key_file: 6\n")
    assert "cannot load cert_file 5, key_file 6" in str(err.value)


# --- what a valid file turns into (a real certificate from openssl, as tests/integration/test_server.py makes it)

@pytest.fixture(scope="module")
def certdir(tmp_path_factory):
    from tests.integration.test_server import make_cert

    directory = tmp_path_factory.mktemp("cert")
    make_cert(directory)
    return directory


NO_HTTP2 = "http_server_config:\n  http2: false\n"  # Go's HTTP/2 needs an AES-128-GCM suite in any list


def tls_config(certdir, extra: str = "", http: str = ""):
    text = f"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n{extra}{http}"
    (certdir / "web.yml").write_text(text)
    return load_web_config(str(certdir / "web.yml"))


def test_no_file_or_an_empty_one_means_plain_http_without_auth(tmp_path):
    for config in (load_web_config(None), load_web_config(""), load(tmp_path, ""),
                   load(tmp_path, "tls_server_config: {}\n")):
        assert config.tls is None and config.users == {} and config.headers == {}
        assert config.authorized("anyone", "anything") is True


def test_tls_defaults_as_exporter_toolkit(certdir):
    import ssl

    context = tls_config(certdir).tls
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2 and context.maximum_version == ssl.TLSVersion.TLSv1_3
    assert context.verify_mode == ssl.CERT_NONE
    assert context.options & ssl.OP_CIPHER_SERVER_PREFERENCE


@pytest.mark.parametrize("extra, check", [
    ("  min_version: TLS13\n", lambda c, ssl: c.minimum_version == ssl.TLSVersion.TLSv1_3),
    ("  max_version: TLS12\n", lambda c, ssl: c.maximum_version == ssl.TLSVersion.TLSv1_2),
    ("  prefer_server_cipher_suites: false\n", lambda c, ssl: not c.options & ssl.OP_CIPHER_SERVER_PREFERENCE),
    # only TLS 1.3 suites: Go has nothing for 1.2, so only 1.3 connects
    ("  cipher_suites: [TLS_AES_128_GCM_SHA256]\n" + NO_HTTP2, lambda c, ssl: c.minimum_version == ssl.TLSVersion.TLSv1_3),
    ("  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
     lambda c, ssl: {x["name"] for x in c.get_ciphers() if x["protocol"] == "TLSv1.2"} == {"ECDHE-RSA-AES128-GCM-SHA256"}),
    ("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: cert.pem\n",
     lambda c, ssl: c.verify_mode == ssl.CERT_REQUIRED),
    ("  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: cert.pem\n",
     lambda c, ssl: c.verify_mode == ssl.CERT_OPTIONAL),
    ("  client_auth_type: RequestClientCert\n", lambda c, ssl: c.verify_mode == ssl.CERT_NONE),
])
def test_tls_fields_set_the_context(certdir, extra, check):
    import ssl

    assert check(tls_config(certdir, extra).tls, ssl)


@pytest.mark.parametrize("extra, http, message", [
    ("  min_version: TLS13\n  max_version: TLS12\n", "", "min_version is above max_version"),
    ("  min_version: SSL3\n", "", "min_version: unknown TLS version 'SSL3'"),
    ("  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", NO_HTTP2, "unknown cipher 'TLS_RSA_WITH_RC4_128_SHA'"),
    ("  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n", "", "with http2 (the default) the list needs"),
    ("  cipher_suites: [TLS_AES_128_GCM_SHA256]\n  max_version: TLS12\n", NO_HTTP2, "only TLS 1.3 suites"),
    ("  curve_preferences: [CurveP192]\n", "", "unknown curve 'CurveP192'"),
    ("  client_auth_type: RequireAnyClientCert\n", "", "RequireAnyClientCert (a client certificate accepted"),
    ("  client_auth_type: Sometimes\n", "", "client_auth_type: invalid value 'Sometimes'"),
    ("  client_ca_file: cert.pem\n", "", "client_ca_file is set without client_auth_type"),
    ("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nothere.pem\n", "",
     "cannot load client_ca_file nothere.pem: No such file or directory"),
    ("", "http_server_config:\n  headers:\n    Server: zfsnas\n", "HTTP header 'Server' can not be configured"),
    ("", "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
     "X-Frame-Options must be one of deny, sameorigin, not 'allow'"),
])
def test_tls_and_http_mistakes_are_refused(certdir, extra, http, message):
    with pytest.raises(WebConfigError) as err:
        tls_config(certdir, extra, http)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_tls_section_without_key_file_is_refused(tmp_path):
    with pytest.raises(WebConfigError, match="tls_server_config: missing key_file"):
        load(tmp_path, "tls_server_config:\n  cert_file: cert.pem\n")


def test_allowed_headers_and_the_http2_cipher_rule_without_http2(certdir):
    config = tls_config(certdir, "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n",
                        "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
                        "    Strict-Transport-Security: max-age=31536000\n")
    assert config.headers == {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=31536000"}
    assert config.tls is not None


def test_password_that_is_not_a_bcrypt_hash_is_refused(tmp_path):
    with pytest.raises(WebConfigError, match="the password of 'prometheus' is not a bcrypt hash"):
        load(tmp_path, "basic_auth_users:\n  prometheus: s3cret\n")


def test_missing_or_huge_file_is_refused(tmp_path):
    with pytest.raises(WebConfigError, match="No such file or directory"):
        load_web_config(str(tmp_path / "absent.yml"))
    with pytest.raises(WebConfigError, match="larger than 1 MiB"):
        load(tmp_path, "# " + "x" * (1 << 20) + "\n")
    with pytest.raises(WebConfigError, match="expected a mapping at the top level, found a list"):
        load(tmp_path, "- a\n")


def test_passwords_and_users_beyond_ascii(tmp_path):
    hashed = bcrypt.hashpw("pässwörd".encode(), bcrypt.gensalt(rounds=4)).decode()
    config = load(tmp_path, f"basic_auth_users:\n  'zoë': '{hashed}'\n")
    assert config.authorized("zoë", "pässwörd") is True
    assert config.authorized("zoe", "pässwörd") is False
    assert config.authorized("zoë", "passwörd") is False


# --- issue 33, case 6: edge cases refused in one line, every hash form node_exporter takes ----------

@pytest.mark.parametrize("value, message", [
    ('"max-age=1\\r\\nSet-Cookie: pwn=1"', "the value of Strict-Transport-Security holds a line break (CR or LF)"),
    ('"max-age=1\\nX: y"', "holds a line break"),
    ("max-age=\u00e9t\u00e9", "the value of Strict-Transport-Security holds a character outside printable ASCII"),
    ('"max-age=1\\u0007"', "outside printable ASCII"),
])
def test_header_values_that_would_break_the_answer_are_refused(tmp_path, value, message):
    """Before: a CR/LF value wrote a raw `Set-Cookie: pwn=1` line, a non-ASCII one failed every answer."""
    with pytest.raises(WebConfigError) as err:
        load(tmp_path, f"http_server_config:\n  headers:\n    Strict-Transport-Security: {value}\n")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("cost", ["03", "32", "99", "00"])
def test_bcrypt_costs_outside_go_s_range_are_refused(tmp_path, cost):
    """Before: a traceback (exit 1) when the dummy hash was made at start."""
    hashed = HASH[:4] + cost + HASH[6:]
    with pytest.raises(WebConfigError) as err:
        load(tmp_path, f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    assert f"the bcrypt cost of 'prometheus' is {cost}, outside 04..31" in str(err.value)


def test_a_high_cost_is_warned_about_and_costs_nothing_at_start(tmp_path):
    """Before: cost 17 took 8 s of bcrypt before listening, and said nothing."""
    hashed = HASH[:4] + "17" + HASH[6:]
    started = time.monotonic()
    config = load(tmp_path, f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    assert time.monotonic() - started < 0.5
    [warning] = config.warnings
    assert "the bcrypt cost of 'prometheus' is 17" in warning and "about 128 times" in warning
    assert load(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n").warnings == []


@pytest.mark.parametrize("prefix", ["$2$", "$2a$", "$2b$", "$2x$", "$2y$"])
def test_every_hash_form_go_reads_checks_the_password_as_go_does(tmp_path, prefix):
    """Before: `$2$` was accepted at start, and the right password got 401."""
    config = load(tmp_path, f"basic_auth_users:\n  prometheus: '{prefix}{HASH[4:]}'\n")
    assert config.authorized("prometheus", "s3cret") is True
    assert config.authorized("prometheus", "s3cre") is False


def test_passwords_past_72_bytes_are_read_as_go_reads_them(tmp_path):
    """bcrypt reads 72 bytes of a password; Go ignores the rest, Python's bcrypt 5 refuses them."""
    long = "x" * 72
    config = load(tmp_path, f"basic_auth_users:\n  p: '{bcrypt.hashpw(long.encode(), bcrypt.gensalt(4)).decode()}'\n")
    assert config.authorized("p", long + "anything") is True and config.authorized("p", long[:71]) is False


# --- issue 33, case 5: read again as it changes, like node_exporter -----------------------------------

def test_the_file_is_read_again_when_it_changes(tmp_path):
    from zfsnas.webconfig import WebConfigFile

    changes = []
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    live = WebConfigFile(str(path), on_change=lambda config, error: changes.append(error))
    first = live.current()
    assert live.current() is first and first.authorized("prometheus", "s3cret")  # unchanged: not read again
    rotated = bcrypt.hashpw(b"n3w", bcrypt.gensalt(rounds=4)).decode()
    path.write_text(f"basic_auth_users:\n  prometheus: '{rotated}'\n")
    assert live.current().authorized("prometheus", "s3cret") is False  # the old password, refused at once
    assert live.current().authorized("prometheus", "n3w") is True
    path.write_text("basic_auth_users: [\n")
    for _ in range(2):
        with pytest.raises(WebConfigError, match="while parsing"):
            live.current()
    path.unlink()
    with pytest.raises(WebConfigError, match="No such file or directory"):
        live.current()
    path.write_text(f"basic_auth_users:\n  prometheus: '{rotated}'\n")
    assert live.current().authorized("prometheus", "n3w") is True
    assert [error is None for error in changes] == [True, False, False, True]  # each change said once


def test_a_replaced_certificate_is_used_by_the_next_handshake(tmp_path):
    from tests.integration.test_server import make_cert
    from zfsnas.webconfig import WebConfigFile

    make_cert(tmp_path)
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n")
    live = WebConfigFile(str(tmp_path / "web.yml"))
    before = live.current().tls
    assert live.current().tls is before
    make_cert(tmp_path)  # a new key and certificate under the same names
    after = live.current().tls
    assert after is not before
    (tmp_path / "key.pem").write_text("not a key\n")
    with pytest.raises(WebConfigError, match="cannot load cert_file cert.pem, key_file key.pem"):
        live.current()
