"""Shared test helpers: fixture trees, running the exporter in-process, reading exposition text."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from zfsnas.cli import build_exporter, build_parser

FIXTURES = Path(__file__).parent / "fixtures"
LINUX_VERSIONS = ("0.8.6", "2.0.7", "2.1.11", "2.2.7", "2.3.2")
FREEBSD_VERSIONS = ("13.2", "14.1")


def linux_tree(version: str) -> Path:
    return FIXTURES / f"linux-zfs-{version}"


def freebsd_sysctl(version: str) -> Path:
    return FIXTURES / f"freebsd-{version}" / "sysctl.txt"


def exporter_args(*flags: str):
    return build_parser().parse_args(list(flags))


def scrape_text(*flags: str) -> str:
    """One scrape of an exporter built from these flags, without process metrics."""
    exporter = build_exporter(exporter_args(*flags), process_metrics=False)
    text = exporter.render()
    # The prometheus_client path must serve the same samples as the fast renderer.
    assert samples(generate_latest(exporter.registry).decode()).keys() == samples(text).keys()
    return text


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(sample name, frozenset of label pairs): value} of an exposition text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(text_or_samples, metric: str, /, **labels) -> float:
    data = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    key = (metric, frozenset(labels.items()))
    if key not in data:
        near = sorted(str(dict(k[1])) for k in data if k[0] == metric)[:5]
        raise AssertionError(f"{metric}{labels} not served; served label sets: {near}")
    return data[key]


def types(text: str) -> dict[str, str]:
    """{family name as written in # TYPE: type}."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            out[name] = kind
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


ZFS_COMMAND_VERSIONS = ("2.1", "2.3")


def zfs_commands(version: str, *options: str) -> list[str]:
    """Flags that make `zfs`/`zpool` the stand-in replaying tests/fixtures/commands/zfs-<version>/."""
    import shlex
    import sys

    commands = FIXTURES / "commands"
    prefix = [sys.executable, str(commands / "standin.py"), *options, str(commands / f"zfs-{version}")]
    return ["--zfs.command-prefix", shlex.join(prefix)]
