"""Grafana annotations: a region per cell (POST at start, PATCH timeEnd and figures at the end).

Owns talking to Grafana's HTTP API (`POST /api/annotations`, `PATCH /api/annotations/<id>`,
Bearer service-account token, times in epoch milliseconds) with short timeouts, and queuing in
the store whatever could not be sent. The token lives only in memory: it is never logged,
never stored, never put in an error message, never sent to another origin than the one asked
(a redirect elsewhere loses Authorization and cookies), never in a child's environment.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from http.client import HTTPMessage
from pathlib import Path
from typing import IO

from ...store.configuration import Configuration
from ...store.database import Store
from .childenv import TOKEN_VARIABLE

log = logging.getLogger("zfsnas.bench")
TIMEOUT = 5.0


class AnnotationError(RuntimeError):
    pass


def load_token(flag: str | None = None, token_file: str | None = None,
               taken: Mapping[str, str] | None = None) -> str | None:
    """The token from --grafana-token-file, else $ZFSNAS_GRAFANA_TOKEN (as `childenv.take_secrets`
    took it out of the environment, or still in it), else --grafana-token."""
    if token_file:
        return Path(token_file).read_text().strip() or None
    from_env = (taken or {}).get(TOKEN_VARIABLE) or os.environ.get(TOKEN_VARIABLE)
    return from_env or flag or None


def same_origin(a: str, b: str) -> bool:
    """Scheme, host and port equal (the port defaulted from the scheme)."""
    pa, pb = urllib.parse.urlsplit(a), urllib.parse.urlsplit(b)
    default = {"http": 80, "https": 443}

    def port(p: urllib.parse.SplitResult) -> int | None:
        try:
            return p.port or default.get(p.scheme.lower())
        except ValueError:
            return None

    return (pa.scheme.lower(), (pa.hostname or "").lower(), port(pa)) == \
        (pb.scheme.lower(), (pb.hostname or "").lower(), port(pb))


CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, except that credentials never cross origins: its default handler copies
    every header (Authorization included) to wherever Location points. 307/308 keep the method
    and body (RFC 9110), which urllib refuses for anything but GET/HEAD."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: HTTPMessage, newurl: str) -> urllib.request.Request | None:
        new: urllib.request.Request | None
        if code in (307, 308) and req.get_method() not in ("GET", "HEAD"):
            new = urllib.request.Request(newurl.replace(" ", "%20"), data=req.data, headers=dict(req.header_items()),
                                         origin_req_host=req.origin_req_host, unverifiable=True,
                                         method=req.get_method())
        else:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not same_origin(req.full_url, new.full_url):
            for name in list(new.headers):
                if name.lower() in CREDENTIAL_HEADERS:
                    del new.headers[name]
            for name in list(new.unredirected_hdrs):
                if name.lower() in CREDENTIAL_HEADERS:
                    del new.unredirected_hdrs[name]
        return new


_OPENER = urllib.request.build_opener(_Redirects)


@dataclass
class GrafanaClient:
    url: str
    token: str | None
    timeout: float = TIMEOUT

    def request(self, method: str, path: str, payload: dict) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url.rstrip("/") + path, data=json.dumps(payload).encode(),
                                     headers=headers, method=method)
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            raise AnnotationError(f"{method} {path}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AnnotationError(f"{method} {path}: {type(reason).__name__}: {reason}") from None
        try:
            return json.loads(body or b"{}")
        except ValueError:
            raise AnnotationError(f"{method} {path}: answer is not JSON") from None

    def post(self, payload: dict) -> int:
        answer = self.request("POST", "/api/annotations", payload)
        if not isinstance(answer.get("id"), int):
            raise AnnotationError(f"POST /api/annotations: no id in answer {answer}")
        return answer["id"]

    def patch(self, annotation_id: int, payload: dict) -> None:
        self.request("PATCH", f"/api/annotations/{annotation_id}", payload)


def tags(config: Configuration, run_id: str) -> list[str]:
    """The configuration's tags (store/configuration.py: matrix, workload, config id, readable labels, changed
    parameters) and the run."""
    return [*config.tags(), f"run:{run_id}"]


class Annotator:
    """Per-cell regions; any failure is queued and the benchmark goes on."""

    def __init__(self, store: Store, client: GrafanaClient | None):
        self.store = store
        self.client = client
        self._pending: dict[int, int] = {}   # result id -> queued POST id

    def start(self, result_id: int, started_ms: int, config: Configuration, run_id: str, text: str) -> None:
        if self.client is None:
            return
        payload = {"time": started_ms, "tags": tags(config, run_id), "text": text}
        try:
            self.store.set_annotation(result_id, self.client.post(payload))
        except AnnotationError as exc:
            log.warning("Grafana annotation queued: %s", exc)
            self._pending[result_id] = self.store.queue_annotation(
                result_id, self.client.url, "POST", "/api/annotations", payload, str(exc))

    def finish(self, result_id: int, annotation_id: int | None, started_ms: int, ended_ms: int,
               config: Configuration, run_id: str, text: str, move_start: bool = False) -> None:
        """End the region at `ended_ms`; `move_start` also moves its start to `started_ms` (a watch's
        region is its measured window, first byte to last, not the waiting before it)."""
        if self.client is None:
            return
        if result_id in self._pending:  # the start never arrived: queue one complete region instead
            payload = {"time": started_ms, "timeEnd": ended_ms, "tags": tags(config, run_id), "text": text}
            self.store.update_queued(self._pending.pop(result_id), payload)
            return
        if annotation_id is None:
            return
        payload = {"timeEnd": ended_ms, "text": text}
        if move_start:
            payload["time"] = started_ms
        try:
            self.client.patch(annotation_id, payload)
        except AnnotationError as exc:
            log.warning("Grafana annotation update queued: %s", exc)
            self.store.queue_annotation(result_id, self.client.url, "PATCH", f"/api/annotations/{annotation_id}",
                                        payload, str(exc))

    def retry(self, url: str | None = None) -> tuple[int, int]:
        """Send every queued annotation; (sent, still queued)."""
        sent = failed = 0
        token = self.client.token if self.client else None
        for row in self.store.pending_annotations():
            client = GrafanaClient(url or row.url, token, self.client.timeout if self.client else TIMEOUT)
            try:
                payload = json.loads(row.payload)
            except (ValueError, TypeError, RecursionError) as exc:   # a database written by hand: said, kept
                self.store.annotation_failed(row.id, f"its stored payload is not JSON: {exc}")
                failed += 1
                continue
            try:
                if row.method == "POST":
                    annotation_id = client.post(payload)
                    if row.result_id is not None:
                        self.store.set_annotation(row.result_id, annotation_id)
                else:
                    client.request(row.method, row.path, payload)
            except AnnotationError as exc:
                self.store.annotation_failed(row.id, str(exc))
                failed += 1
                continue
            self.store.annotation_sent(row.id)
            sent += 1
        return sent, failed
