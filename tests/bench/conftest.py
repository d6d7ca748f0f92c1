"""Fixtures of the benchmark runner's tests: a fake ZFS (tests/bench/fakezfs.py) on a tmp dir."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).parent / "fakezfs.py"
JOBS = Path(__file__).parents[2] / "benchmark-jobs"


class FakeZfs:
    def __init__(self, tmp: Path):
        self.root = tmp / "root"
        self.state = tmp / "zfs.json"
        self.root.mkdir()
        self.write({"datasets": {
            "tank": {"type": "filesystem", "props": {}},
            "tank/scratch": {"type": "filesystem", "props": {"org.zfsnas:scratch": "init-test"}},
            "tank/scratchX": {"type": "filesystem", "props": {}},
            "tank/home": {"type": "filesystem", "props": {}},
        }})
        for name in ("tank/scratch", "tank/scratchX", "tank/home"):
            (self.root / name).mkdir(parents=True)

    @property
    def env(self) -> dict[str, str]:
        return {"FAKEZFS_STATE": str(self.state), "FAKEZFS_ROOT": str(self.root)}

    @property
    def prefix(self) -> str:
        return f"{sys.executable} {FAKE}"

    def read(self) -> dict:
        return json.loads(self.state.read_text())

    def write(self, state: dict) -> None:
        temporary = self.state.with_name(self.state.name + ".test")
        temporary.write_text(json.dumps(state))
        temporary.replace(self.state)  # atomic: the fake zfs may read it at any moment

    def datasets(self) -> dict:
        return self.read()["datasets"]

    def commands(self) -> list[list[str]]:
        return self.read().get("log", [])

    def flags(self, db: Path) -> list[str]:
        return ["--db", str(db), "--zfs.command-prefix", self.prefix, "--jobs-dir", str(JOBS)]


@pytest.fixture
def fake_zfs(tmp_path, monkeypatch) -> FakeZfs:
    fake = FakeZfs(tmp_path)
    for key, val in fake.env.items():
        monkeypatch.setenv(key, val)
    return fake


def free_port_url() -> str:
    """A URL where nothing listens (Grafana down)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
