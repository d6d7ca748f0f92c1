"""Debian-packaged daemons (prometheus, alertmanager, node_exporter) on 127.0.0.1 for tests: start, wait, stop by PID."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest


def wait_ready(proc: subprocess.Popen, url: str, log_path: Path, timeout: float = 30) -> None:
    """Until `url` answers; fails at once with the log's tail when the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited: {log_path.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{proc.args[0]} did not answer at {url} within {timeout}s")


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Daemon:
    def __init__(self, argv: list[str], log_path: Path, ready_url: str):
        binary = shutil.which(argv[0])
        if not binary:
            pytest.fail(f"{argv[0]} is not installed: run ./dev test, which installs it")
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([binary, *argv[1:]], stdout=self._log, stderr=self._log)
        wait_ready(self.proc, ready_url, log_path)

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()
