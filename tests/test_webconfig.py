"""Web config parsing (exporter/zfsnas/webconfig.py): one-line errors naming the field, duplicates
refused, and the same bcrypt work for an unknown user as for a wrong password."""

from __future__ import annotations

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


def test_verified_answers_cache_is_bounded(tmp_path):
    config = load(tmp_path, f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(b'x', bcrypt.gensalt(4)).decode()}'\n")
    for i in range(webconfig._CACHE_MAX + 50):
        config.authorized("prometheus", f"guess{i}")
    assert len(config._verified) == webconfig._CACHE_MAX


def test_scalars_become_strings_as_in_go(tmp_path):
    """`cert_file: 5` names the file "5" in exporter-toolkit: the same here (and it does not exist)."""
    with pytest.raises(WebConfigError) as err:
        load(tmp_path, "tls_server_config:\n  cert_file: 5\n  key_file: 6\n")
    assert "cannot load cert_file 5, key_file 6" in str(err.value)
