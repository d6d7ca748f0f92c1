"""A local HTTP server that enforces Grafana's documented annotation contract (see NOTES.md).

`POST /api/annotations` needs `Authorization: Bearer <token>` (401 otherwise) and JSON with
`text`; `time`/`timeEnd` are epoch milliseconds; the answer is {"message": "Annotation added",
"id": N}. `PATCH /api/annotations/<id>` changes text, tags, time, timeEnd (404 for an unknown
id). `fail_next` makes the next requests answer 500, `delay` makes them slow. `redirect(code,
prefix, to)` answers requests whose path starts with `prefix` with `code` and
`Location: <to><rest of the path>` (a reverse proxy moving Grafana, or one pointing elsewhere).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATCHABLE = {"text", "tags", "time", "timeEnd"}


class FakeGrafana:
    def __init__(self, token: str):
        self.token = token
        self.annotations: dict[int, dict] = {}
        self.requests: list[tuple[str, str, dict, dict]] = []   # method, path, headers, body
        self.fail_next = 0
        self.delay = 0.0
        self.redirects: list[tuple[int, str, str]] = []
        self._next = 1
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = None
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                for code, prefix, to in outer.redirects:
                    if self.path.startswith(prefix):
                        self.send_response(code)
                        self.send_header("Location", to + self.path[len(prefix):])
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return None
                if outer.delay:
                    time.sleep(outer.delay)
                if outer.fail_next:
                    outer.fail_next -= 1
                    return self._answer(500, {"message": "Internal Server Error"})
                if self.headers.get("Authorization") != f"Bearer {outer.token}":
                    return self._answer(401, {"message": "Unauthorized"})
                if not isinstance(body, dict):
                    return self._answer(400, {"message": "bad request data"})
                for key in ("time", "timeEnd"):
                    if key in body and (not isinstance(body[key], int) or body[key] < 10**12):
                        return self._answer(400, {"message": f"{key} must be epoch milliseconds"})
                if "tags" in body and not all(isinstance(t, str) for t in body["tags"]):
                    return self._answer(400, {"message": "bad request data"})
                if self.command == "POST" and self.path == "/api/annotations":
                    if not body.get("text"):
                        return self._answer(400, {"message": "Failed to save annotation: text is required"})
                    ident = outer._next
                    outer._next += 1
                    outer.annotations[ident] = dict(body)
                    return self._answer(200, {"message": "Annotation added", "id": ident})
                if self.command == "PATCH" and self.path.startswith("/api/annotations/"):
                    ident = int(self.path.rsplit("/", 1)[1])
                    if ident not in outer.annotations:
                        return self._answer(404, {"message": "Annotation not found"})
                    outer.annotations[ident].update({k: v for k, v in body.items() if k in PATCHABLE})
                    return self._answer(200, {"message": "Annotation patched"})
                return self._answer(404, {"message": "Not found"})

            do_POST = do_PATCH = do_GET = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def redirect(self, code: int, prefix: str, to: str) -> None:
        self.redirects.append((code, prefix, to))

    def __enter__(self) -> FakeGrafana:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
