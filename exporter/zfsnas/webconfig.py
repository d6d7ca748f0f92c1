"""`--web.config.file`: the exporter-toolkit YAML the official exporters take.

Supported: `tls_server_config` (cert_file, key_file, client_ca_file, client_auth_type,
min_version, max_version) and `basic_auth_users` (user: bcrypt hash). Unknown keys are an error
at start-up, as in exporter-toolkit, so a typo never silently leaves the exporter open.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# yaml, bcrypt, hashlib and ssl are imported only when a web config needs them: an exporter without one
# should not carry their memory.


class WebConfigError(ValueError):
    pass


_TLS_VERSIONS = {"TLS10": "TLSv1", "TLS11": "TLSv1_1", "TLS12": "TLSv1_2", "TLS13": "TLSv1_3"}
_CLIENT_AUTH = {"NoClientCert": "CERT_NONE", "RequestClientCert": "CERT_OPTIONAL",
                "RequireAnyClientCert": "CERT_REQUIRED", "VerifyClientCertIfGiven": "CERT_OPTIONAL",
                "RequireAndVerifyClientCert": "CERT_REQUIRED"}
_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version",
             "cipher_suites", "curve_preferences", "prefer_server_cipher_suites", "client_allowed_sans"}


@dataclass
class WebConfig:
    tls: Any = None  # ssl.SSLContext
    users: dict[str, bytes] = field(default_factory=dict)
    _verified: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorized(self, user: str, password: str) -> bool:
        """bcrypt is slow on purpose; a verified pair is remembered by its digest, not in clear."""
        if not self.users:
            return True
        hashed = self.users.get(user)
        if hashed is None:
            return False
        import hashlib

        key = hashlib.sha256(b"\0".join([user.encode(), password.encode(), hashed])).digest()
        with self._lock:
            if key in self._verified:
                return True
        import bcrypt

        try:
            ok = bcrypt.checkpw(password.encode(), hashed)
        except ValueError:
            return False
        if ok:
            with self._lock:
                self._verified.add(key)
        return ok


def load_web_config(path: str | None) -> WebConfig:
    if not path:
        return WebConfig()
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise WebConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise WebConfigError(f"{path}: expected a mapping at the top level")
    unknown = set(data) - {"tls_server_config", "basic_auth_users", "http_server_config"}
    if unknown:
        raise WebConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    config = WebConfig()
    users = data.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise WebConfigError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise WebConfigError(f"{path}: the password of {user!r} is not a bcrypt hash")
        config.users[str(user)] = hashed.encode()
    if data.get("tls_server_config"):
        config.tls = _tls_context(data["tls_server_config"], Path(path).parent, path)
    return config


def _tls_context(tls: dict, base: Path, path: str):
    import ssl

    unknown = set(tls) - _TLS_KEYS
    if unknown:
        raise WebConfigError(f"{path}: unknown tls_server_config key(s) {', '.join(sorted(unknown))}")
    if not tls.get("cert_file") or not tls.get("key_file"):
        raise WebConfigError(f"{path}: tls_server_config needs cert_file and key_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    minimum = _TLS_VERSIONS.get(tls.get("min_version", "TLS12")) or _bad(path, "min_version", tls)
    context.minimum_version = getattr(ssl.TLSVersion, minimum)
    if "max_version" in tls:
        context.maximum_version = getattr(ssl.TLSVersion, _TLS_VERSIONS.get(tls["max_version"]) or _bad(path, "max_version", tls))
    try:
        context.load_cert_chain(base / tls["cert_file"], base / tls["key_file"])
        auth = tls.get("client_auth_type", "NoClientCert")
        if auth not in _CLIENT_AUTH:
            _bad(path, "client_auth_type", tls)
        context.verify_mode = getattr(ssl, _CLIENT_AUTH[auth])
        if tls.get("client_ca_file"):
            context.load_verify_locations(base / tls["client_ca_file"])
        elif auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert"):
            raise WebConfigError(f"{path}: client_auth_type {auth} needs client_ca_file")
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(f"{path}: TLS: {exc}") from None
    return context


def _bad(path: str, key: str, tls: dict):
    raise WebConfigError(f"{path}: tls_server_config {key} {tls.get(key)!r} is not valid")
