"""A real Docker engine for the stack tests: Debian's dockerd (started here as root when none runs,
stopped again by PID), the images of tests/stack/images.sh, and docker-compose.yml brought up with
Debian's docker-compose under a project name of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.daemon import stop_process

ROOT = Path(__file__).resolve().parents[2]
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")


def docker(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode:
        raise AssertionError(f"docker {' '.join(args)}: {result.stderr[-2000:]}")
    return result


def engine_answers() -> bool:
    return shutil.which(DOCKER) is not None and docker("info", check=False, timeout=30).returncode == 0


class Engine:
    """The running dockerd, or one started here (and stopped by `stop`)."""

    def __init__(self, log_path: Path):
        self.proc = None
        if engine_answers():
            return
        if not shutil.which("dockerd"):
            pytest.fail("dockerd is not installed: run ./dev test, which installs Debian's docker.io")
        if os.geteuid() != 0:
            pytest.fail("no Docker engine answers and only root can start dockerd")
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(["dockerd"], stdout=self._log, stderr=self._log)
        deadline = time.monotonic() + 60
        while not engine_answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"dockerd did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc, timeout=60)
            self._log.close()
            self.proc = None


def build_images(python: str) -> dict[str, str]:
    """tests/stack/images.sh: the compose file's image variables, pointing at the local images."""
    result = subprocess.run([str(ROOT / "tests/stack/images.sh")], capture_output=True, text=True,
                            timeout=1800, env={**os.environ, "DOCKER": DOCKER, "PYTHON": python})
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(line.split("=", 1) for line in result.stdout.split())


class Compose:
    """docker-compose.yml of the repo, as a user runs it, under project `name` with `env`."""

    def __init__(self, name: str, env: dict[str, str]):
        binary = shutil.which("docker-compose")
        if not binary:
            pytest.fail("docker-compose is not installed: run ./dev test, which installs Debian's docker-compose")
        self.argv = [binary, "-p", name, "-f", str(ROOT / "docker-compose.yml")]
        self.env = {**os.environ, **env}
        self.name = name

    def __call__(self, *args: str, timeout: float = 300) -> str:
        result = subprocess.run([*self.argv, *args], capture_output=True, text=True, cwd=ROOT, env=self.env,
                                timeout=timeout)
        assert result.returncode == 0, f"docker-compose {' '.join(args)}:\n{result.stderr[-3000:]}"
        return result.stdout

    def container(self, service: str) -> str:
        return self("ps", "-q", service).strip()

    def inspect(self, service: str) -> dict:
        return json.loads(docker("inspect", self.container(service)).stdout)[0]

    def wait_healthy(self, services: list[str], timeout: float = 120) -> dict[str, str]:
        """Until every service's health check passes; the last status of each otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            status = {s: self.inspect(s)["State"].get("Health", {}).get("Status", "none") for s in services}
            if all(v == "healthy" for v in status.values()) or time.monotonic() > deadline:
                return status
            time.sleep(1)
