"""Run the real `zfsnas-exporter` console script as a subprocess for tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def exporter_command() -> list[str]:
    script = Path(sys.executable).with_name("zfsnas-exporter")
    return [str(script)] if script.exists() else [shutil.which("zfsnas-exporter") or "zfsnas-exporter"]


class ExporterProcess:
    def __init__(self, port: int, *flags: str, log_path: Path | None = None, env: dict | None = None,
                 command: list[str] | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen([*(command or exporter_command()), f"--web.listen-address=127.0.0.1:{port}", *flags],
                                     stdout=self._log, stderr=self._log, env={**os.environ, **(env or {})})

    def wait_ready(self, path: str = "/", timeout: float = 15.0, scheme: str = "http", **kwargs) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"exporter exited with {self.proc.returncode}: {self.log()}")
            try:
                urllib.request.urlopen(f"{scheme}://127.0.0.1:{self.port}{path}", timeout=2, **kwargs)
                return
            except urllib.error.HTTPError:
                return  # it answered
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        raise AssertionError(f"exporter did not answer within {timeout}s: {self.log()}")

    def get(self, path: str = "/metrics") -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return response.read().decode()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path and self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
