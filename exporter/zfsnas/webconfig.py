"""`--web.config.file`: the exporter-toolkit YAML the official exporters take, failing closed.

Owns reading that file into a `WebConfig` (a TLS context, the basic-auth users, extra response
headers), reading it again when it changes (`WebConfigFile`) and checking a user's password. The
contract is the exporter-toolkit version inside Debian 12's node_exporter 1.5 (tested side by side
in tests/integration/test_webconfig_node_exporter.py): every field it knows is honoured as it
honours it, or the exporter refuses to start with one line naming the field; every field it does
not know (`client_allowed_sans` among them), a duplicated key, a value of the wrong type, a header
value that would break the answer (CR, LF, anything outside ASCII) or a bcrypt cost outside 4..31
is refused too. What we refuse that node_exporter accepts, and why, is listed in docs/reliability.md.
As node_exporter, the file is read again for every request and handshake that comes after it (or
a file it names) changed: a new password counts at once, a broken or deleted file answers 500.

Basic auth costs the same bcrypt work for an unknown user as for a wrong password (a dummy hash
of the same cost), so response times do not tell which users exist. Right passwords are
remembered apart from wrong ones, so a flood of wrong guesses cannot push a scraper's out.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    import yaml

# yaml, bcrypt and ssl are imported only when a web config needs them: an exporter without one
# should not carry their memory.


class WebConfigError(ValueError):
    pass


_TLS_VERSIONS = {"TLS10": "TLSv1", "TLS11": "TLSv1_1", "TLS12": "TLSv1_2", "TLS13": "TLSv1_3"}
# exporter-toolkit's cipher names are Go's (IANA); OpenSSL spells them differently. Go offers only
# these "secure" suites; the TLS 1.3 ones cannot be chosen (neither in Go nor in OpenSSL's list).
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
_HTTP2_SUITES = {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
_CURVES = {"CurveP256": "P-256", "CurveP384": "P-384", "CurveP521": "P-521", "X25519": "X25519"}
# Python's ssl can require a client certificate only by verifying it; Go's RequestClientCert never
# looks at the certificate, which is the same as not asking for one. RequireAnyClientCert (accept any
# certificate, verified or not) cannot be reproduced and is refused at start.
_CLIENT_AUTH = {"": "CERT_NONE", "NoClientCert": "CERT_NONE", "RequestClientCert": "CERT_NONE",
                "VerifyClientCertIfGiven": "CERT_OPTIONAL", "RequireAndVerifyClientCert": "CERT_REQUIRED"}
_UNSUPPORTED_CLIENT_AUTH = {"RequireAnyClientCert", "RequireClientCert"}
# The response headers exporter-toolkit lets a config add, with the values it allows (None: any).
_HEADERS: dict[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None, "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"), "X-XSS-Protection": None, "Content-Security-Policy": None}
# Every form Go's bcrypt reads (node_exporter accepts them): `$2$`, `$2a$`, `$2b$`, `$2x$`, `$2y$`...
# Go computes them all alike, as Python's bcrypt computes `$2b$`; the cost is checked apart.
_BCRYPT = re.compile(r"\$2([a-z]?)\$([0-9][0-9])\$([./A-Za-z0-9]{53})")
_MIN_COST, _MAX_COST = 4, 31          # Go's bcrypt.MinCost, MaxCost: others refuse to start node_exporter
_HIGH_COST = 12                       # above it, each new password's check takes a second or more
_GOOD_MAX, _BAD_MAX = 64, 256         # right and wrong (user, password) digests remembered
_BCRYPT_MAX_PASSWORD = 72             # bytes bcrypt reads; Go ignores the rest, Python's bcrypt 5 refuses them

# Field schemas: the types exporter-toolkit's Go structs declare.
_STR, _BOOL, _STRLIST, _STRMAP = "a string", "a boolean", "a list of strings", "a map of strings"
_TOP = {"tls_server_config": dict, "basic_auth_users": _STRMAP, "http_server_config": dict}
_TLS_FIELDS = {"cert_file": _STR, "key_file": _STR, "client_ca_file": _STR, "client_auth_type": _STR,
               "min_version": _STR, "max_version": _STR, "cipher_suites": _STRLIST,
               "curve_preferences": _STRLIST, "prefer_server_cipher_suites": _BOOL}
_HTTP_FIELDS = {"http2": _BOOL, "headers": _STRMAP}


@dataclass
class WebConfig:
    tls: Any = None  # ssl.SSLContext
    users: dict[str, bytes] = field(default_factory=dict)  # bcrypt hashes, as `$2b$` (see _BCRYPT)
    headers: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # the files the TLS context was loaded from (a change means a reload)
    warnings: list[str] = field(default_factory=list)  # what the caller should log (a high bcrypt cost)
    _dummy_hash: bytes = b""
    _good: OrderedDict = field(default_factory=OrderedDict)
    _bad: OrderedDict = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _bcrypt_lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self) -> WebConfig:
        """This config (what `WebConfigFile.current` answers for a file that may change)."""
        return self

    def authorized(self, user: str, password: str | bytes) -> bool:
        """`cached`, else `verify`: the whole check, in this thread."""
        known = self.cached(user, password)
        return self.verify(user, password) if known is None else known

    def cached(self, user: str, password: str | bytes) -> bool | None:
        """The remembered answer for these credentials, None when bcrypt has to say (no users: True)."""
        if not self.users:
            return True
        key = self._key(user, password)
        with self._lock:
            if key in self._good:
                return True
            return False if key in self._bad else None

    def verify(self, user: str, password: str | bytes) -> bool:
        """bcrypt is slow on purpose; an unknown user is checked against a dummy hash of the same
        cost so that both answers take as long. One check at a time (as exporter-toolkit: a flood of
        guesses costs one core). Answers are remembered by digest, never in clear; right ones apart."""
        if not self.users:
            return True
        import bcrypt

        known = user in self.users
        hashed = self.users[user] if known else self._dummy_hash
        secret = _bytes(password)[:_BCRYPT_MAX_PASSWORD]  # what Go's bcrypt reads of it
        with self._bcrypt_lock:
            try:
                right = bcrypt.checkpw(secret, hashed) and known
            except ValueError:
                right = False
        key = self._key(user, password)
        with self._lock:
            kept = self._good if right else self._bad
            kept[key] = True
            if len(kept) > (_GOOD_MAX if right else _BAD_MAX):
                kept.popitem(last=False)
        return right

    def _key(self, user: str, password: str | bytes) -> bytes:
        hashed = self.users.get(user, self._dummy_hash)
        return hashlib.sha256(b"\0".join([user.encode("utf-8", "surrogateescape"), _bytes(password), hashed])).digest()


def _bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")


def _dummy_hash(cost: int) -> bytes:
    """A bcrypt hash of that cost that no password matches, made without hashing anything (a cost of
    17 would otherwise take seconds before the exporter listens): a fresh salt and a random digest."""
    import secrets

    import bcrypt

    alphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return bcrypt.gensalt(rounds=cost) + "".join(secrets.choice(alphabet) for _ in range(31)).encode()


def _password_hash(path: str, user: str, hashed: str, config: WebConfig) -> bytes:
    """The user's hash as Python's bcrypt reads it (`$2b$`); anything Go's bcrypt would refuse, refused."""
    match = _BCRYPT.fullmatch(hashed)
    if not match:
        raise WebConfigError(f"{path}: basic_auth_users: the password of {user!r} is not a bcrypt hash")
    cost = int(match[2])
    if not _MIN_COST <= cost <= _MAX_COST:
        raise WebConfigError(f"{path}: basic_auth_users: the bcrypt cost of {user!r} is {match[2]}, "
                             f"outside {_MIN_COST:02d}..{_MAX_COST}")
    if cost > _HIGH_COST:
        config.warnings.append(f"{path}: basic_auth_users: the bcrypt cost of {user!r} is {cost}: every new "
                               f"password (the first scrape, each wrong guess) takes about {2 ** (cost - 10)} times "
                               "as long to check as at cost 10 (10 to 12 is usual)")
    return f"$2b${match[2]}${match[3]}".encode()


class WebConfigFile:
    """`--web.config.file` as node_exporter 1.5 reads it: at start (a bad file refuses the start with
    one line), then again for the first request or TLS handshake after the file, or a file it names,
    changed (seen by size, times and inode: a few `stat` calls a request), as exporter-toolkit
    reads it per request and the certificate per handshake. A file that is deleted or no longer
    loads makes `current` raise WebConfigError (the server answers 500, logged once) until it loads."""

    def __init__(self, path: str, on_change: Any = None):
        self.path = path
        self._config = load_web_config(path)
        self._signature = self._stat(self._config.files)
        self._error: str | None = None
        self._lock = threading.Lock()
        self._on_change = on_change  # called with (config or None, error or None) after a reload

    @property
    def config(self) -> WebConfig:
        """The config last loaded (at start, or the last good reload)."""
        return self._config

    def current(self) -> WebConfig:
        signature = self._stat(self._config.files)
        if signature != self._signature:
            with self._lock:
                if signature != self._signature:
                    self._reload(signature)
        if self._error is not None:
            raise WebConfigError(self._error)
        return self._config

    def _reload(self, signature: tuple) -> None:
        try:
            config = load_web_config(self.path)
        except WebConfigError as exc:
            self._signature, error = signature, str(exc)
            if error != self._error:
                self._error = error
                if self._on_change:
                    self._on_change(None, error)
            return
        self._config, self._error = config, None
        self._signature = self._stat(config.files)
        if self._on_change:
            self._on_change(config, None)

    def _stat(self, files: tuple[str, ...]) -> tuple:
        out: list[tuple[int, int, int, int] | None] = []
        for name in (self.path, *files):
            try:
                st = os.stat(name)
                out.append((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)


def load_web_config(path: str | None) -> WebConfig:
    if not path:
        return WebConfig()
    data = _load_yaml(path)
    if data is None:
        return WebConfig()
    if not isinstance(data, dict):
        raise WebConfigError(f"{path}: expected a mapping at the top level, found {_kind(data)}")
    _check_fields(path, "", data, _TOP)
    config = WebConfig()
    for user, hashed in (data.get("basic_auth_users") or {}).items():
        config.users[user] = _password_hash(path, user, hashed, config)
    if config.users:
        config._dummy_hash = _dummy_hash(max(int(h[4:6]) for h in config.users.values()))
    http = data.get("http_server_config") or {}
    _check_fields(path, "http_server_config.", http, _HTTP_FIELDS)
    # http2 only allows HTTP/2; this server answers HTTP/1.1, which every HTTP/2 client also speaks.
    config.headers.update(_headers(path, http.get("headers") or {}))
    tls = data.get("tls_server_config") or {}
    _check_fields(path, "tls_server_config.", tls, _TLS_FIELDS)
    # As exporter-toolkit: a tls_server_config without any of these four means plain HTTP.
    if any(tls.get(key) for key in ("cert_file", "key_file", "client_auth_type", "client_ca_file")):
        config.tls = _tls_context(tls, Path(path).parent, path, http.get("http2") is not False)
        config.files = tuple(str(Path(path).parent / tls[key]) for key in ("cert_file", "key_file", "client_ca_file")
                             if tls.get(key))
    return config


def _headers(path: str, headers: dict[str, str]) -> dict[str, str]:
    """http_server_config.headers, each a header exporter-toolkit lets a config set, with a value it
    allows that cannot break the answer."""
    for name, value in headers.items():
        allowed = _HEADERS.get(name, ())
        if allowed == ():
            raise WebConfigError(f"{path}: http_server_config.headers: HTTP header {name!r} can not be configured")
        if allowed is not None and value not in allowed:
            raise WebConfigError(f"{path}: http_server_config.headers: {name} must be one of "
                                 f"{', '.join(allowed)}, not {value!r}")
        if "\r" in value or "\n" in value:
            raise WebConfigError(f"{path}: http_server_config.headers: the value of {name} holds a line break "
                                 "(CR or LF), which would start a header of its own")
        if not (value.isascii() and value.isprintable()):
            raise WebConfigError(f"{path}: http_server_config.headers: the value of {name} holds a character "
                                 "outside printable ASCII")
    return headers


def _load_yaml(path: str) -> Any:
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """Refuses a key given twice in one mapping: PyYAML would keep the last one silently,
        which once turned a duplicated `tls_server_config` into plain HTTP."""

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} given twice", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep)

    try:
        with open(path, "rb") as stream:
            text = stream.read((1 << 20) + 1)
        if len(text) > 1 << 20:
            raise WebConfigError(f"{path}: larger than 1 MiB")
        return yaml.load(text, Loader=StrictLoader)
    except OSError as exc:
        raise WebConfigError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise WebConfigError(f"{path}: {' '.join(str(exc).split())}") from None


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "nothing"}.get(type(value), type(value).__name__)


def _check_fields(path: str, prefix: str, data: Any, schema: Mapping[str, object]) -> None:
    """Unknown fields and wrong types are refused with the field's full name. Scalars become strings
    where Go's YAML decoder would turn them into one (`cert_file: 5` is the file "5")."""
    if not isinstance(data, dict):
        raise WebConfigError(f"{path}: {prefix.rstrip('.')} must be a mapping, not {_kind(data)}")
    for key in list(data):
        name = f"{prefix}{key}"
        if key not in schema:
            raise WebConfigError(f"{path}: unknown field {name} (not supported by exporter-toolkit's web config)")
        if data[key] is not None:
            data[key] = _checked(path, name, schema[key], data[key])


def _checked(path: str, name: str, expected: object, value: Any) -> Any:
    """Field `name`'s `value` as its schema type `expected` takes it (a mapping or a boolean as it
    is, strings made of scalars), or WebConfigError."""
    if expected is dict or expected == _STRMAP:
        if not isinstance(value, dict):
            raise WebConfigError(f"{path}: {name} must be a mapping, not {_kind(value)}")
        if expected is dict:
            return value
        return {_scalar(path, name, k): ("" if v is None else _scalar(path, f"{name}.{k}", v)) for k, v in value.items()}
    if expected == _BOOL:
        if not isinstance(value, bool):
            raise WebConfigError(f"{path}: {name} must be true or false, not {_kind(value)}")
        return value
    if expected == _STR:
        return _scalar(path, name, value)
    if expected == _STRLIST:
        if not isinstance(value, list):
            raise WebConfigError(f"{path}: {name} must be a list, not {_kind(value)}")
        return [_scalar(path, name, item) for item in value]
    return value


def _scalar(path: str, name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise WebConfigError(f"{path}: {name} must be a string, not {_kind(value)}")


def _tls_context(tls: dict[str, Any], base: Path, path: str, http2: bool) -> ssl.SSLContext:
    import ssl

    where = f"{path}: tls_server_config"
    if not tls.get("cert_file"):
        raise WebConfigError(f"{where}: missing cert_file")
    if not tls.get("key_file"):
        raise WebConfigError(f"{where}: missing key_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = _tls_versions(tls, where)
    _set_cipher_options(context, tls, versions, where, http2)
    context.verify_mode = getattr(ssl, _CLIENT_AUTH[_client_auth_type(tls, where)])
    _load_files(context, tls, base, where)
    if not tls.get("client_ca_file") and context.verify_mode != ssl.CERT_NONE:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Go verifies against the system roots then
    return context


def _tls_versions(tls: dict[str, Any], where: str) -> dict[str, ssl.TLSVersion]:
    """min_version and max_version (TLS12 and TLS13 when not given), checked."""
    import ssl

    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = tls.get(key) or default
        if name not in _TLS_VERSIONS:
            raise WebConfigError(f"{where}.{key}: unknown TLS version {name!r} (TLS10, TLS11, TLS12, TLS13)")
        versions[key] = getattr(ssl.TLSVersion, _TLS_VERSIONS[name])
    if versions["min_version"] > versions["max_version"]:
        raise WebConfigError(f"{where}: min_version is above max_version: no client could connect")
    return versions


def _set_cipher_options(context: ssl.SSLContext, tls: dict[str, Any], versions: dict[str, ssl.TLSVersion], where: str,
                        http2: bool) -> None:
    """Cipher suites (which may raise min_version to TLS 1.3), the versions, server preference, curves."""
    import ssl

    if tls.get("cipher_suites"):
        if http2 and not _HTTP2_SUITES & set(tls["cipher_suites"]):
            # Go's HTTP/2 server refuses to start then; exporter-toolkit passes that on.
            raise WebConfigError(f"{where}.cipher_suites: with http2 (the default) the list needs "
                                 f"{' or '.join(sorted(_HTTP2_SUITES))}")
        _set_ciphers(context, tls["cipher_suites"], versions, where)
    context.minimum_version, context.maximum_version = versions["min_version"], versions["max_version"]
    if tls.get("prefer_server_cipher_suites", True):
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    if tls.get("curve_preferences"):
        _set_curves(context, tls["curve_preferences"], where)


def _client_auth_type(tls: dict[str, Any], where: str) -> str:
    """client_auth_type ("" when not given), checked against client_ca_file."""
    auth: str = tls.get("client_auth_type") or ""
    if auth in _UNSUPPORTED_CLIENT_AUTH:
        raise WebConfigError(f"{where}.client_auth_type: {auth} (a client certificate accepted without "
                             "verification) is not supported; use RequireAndVerifyClientCert with client_ca_file")
    if auth not in _CLIENT_AUTH:
        raise WebConfigError(f"{where}.client_auth_type: invalid value {auth!r}")
    if tls.get("client_ca_file") and auth in ("", "NoClientCert"):
        # exporter-toolkit's own rule: a CA with no policy would check nothing, so it is an error.
        raise WebConfigError(f"{where}: client_ca_file is set without client_auth_type "
                             "(Client CA's have been configured without a Client Auth Policy)")
    return auth


def _load_files(context: ssl.SSLContext, tls: dict[str, Any], base: Path, where: str) -> None:
    """The certificate with its key, and the client CA when there is one; a file that does not load is named."""
    import ssl

    for fields, load in ((("cert_file", "key_file"), lambda: context.load_cert_chain(base / tls["cert_file"],
                                                                                     base / tls["key_file"])),
                         (("client_ca_file",), lambda: context.load_verify_locations(base / tls["client_ca_file"])
                          if tls.get("client_ca_file") else None)):
        try:
            load()
        except (OSError, ssl.SSLError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            files = ", ".join(f"{f} {tls[f]}" for f in fields)
            raise WebConfigError(f"{where}: cannot load {files}: {detail}") from None


def _set_ciphers(context: ssl.SSLContext, names: list[str], versions: dict[str, ssl.TLSVersion], where: str) -> None:
    import ssl

    unknown = [n for n in names if n not in _CIPHERS and n not in _TLS13_SUITES]
    if unknown:
        raise WebConfigError(f"{where}.cipher_suites: unknown cipher {unknown[0]!r}")
    chosen = [_CIPHERS[n] for n in names if n in _CIPHERS]
    if not chosen:
        # Only TLS 1.3 suites listed: Go then has no suite for TLS 1.2 and below, so only 1.3 connects.
        versions["min_version"] = ssl.TLSVersion.TLSv1_3
        if versions["max_version"] < ssl.TLSVersion.TLSv1_3:
            raise WebConfigError(f"{where}.cipher_suites: only TLS 1.3 suites, but max_version is below TLS13")
        return
    try:
        context.set_ciphers(":".join(chosen))
    except ssl.SSLError as exc:
        raise WebConfigError(f"{where}.cipher_suites: {exc}") from None


def _set_curves(context: ssl.SSLContext, names: list[str], where: str) -> None:
    """Python's ssl sets a single curve only; the groups list goes to OpenSSL directly (CPython's
    SSLContext keeps its SSL_CTX pointer right after the object header). Anything else: refused."""
    unknown = [n for n in names if n not in _CURVES]
    if unknown:
        raise WebConfigError(f"{where}.curve_preferences: unknown curve {unknown[0]!r}")
    groups = ":".join(_CURVES[n] for n in dict.fromkeys(names)).encode()
    try:
        import ctypes
        import ssl
        import sys

        if sys.implementation.name != "cpython" or ssl.OPENSSL_VERSION_INFO < (1, 1, 1):
            raise OSError("needs CPython with OpenSSL 1.1.1 or newer")
        # The very libssl the ssl module uses: dlsym on _ssl's handle searches its dependencies.
        libssl = ctypes.CDLL(getattr(sys.modules["_ssl"], "__file__", None))
        libssl.SSL_CTX_ctrl.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_char_p)
        libssl.SSL_CTX_ctrl.restype = ctypes.c_long
        ctx_pointer = ctypes.c_void_p.from_address(id(context) + ctypes.sizeof(ctypes.c_ssize_t) * 2).value
        SSL_CTRL_SET_GROUPS_LIST = 92
        if libssl.SSL_CTX_ctrl(ctx_pointer, SSL_CTRL_SET_GROUPS_LIST, 0, groups) != 1:
            raise OSError("OpenSSL refused the list")
    except (OSError, AttributeError) as exc:
        raise WebConfigError(f"{where}.curve_preferences: cannot be applied here ({exc})") from None
