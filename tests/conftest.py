"""Shared test helpers: fixture trees (and writable copies), the zfs/zpool stand-in, running the
exporter in-process, reading exposition text. Daemons (the exporter process, Prometheus) and
threads that play the kernel are in tests/integration/."""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from zfsnas.wiring import ExporterConfig, build_exporter, build_parser

FIXTURES = Path(__file__).parent / "fixtures"
LINUX_VERSIONS = ("0.8.6", "2.0.7", "2.1.11", "2.2.7", "2.3.2")
FREEBSD_VERSIONS = ("13.2", "14.1")


def linux_tree(version: str) -> Path:
    return FIXTURES / f"linux-zfs-{version}"


def freebsd_sysctl(version: str) -> Path:
    return FIXTURES / f"freebsd-{version}" / "sysctl.txt"


def copy_tree(dest: Path, version: str | None = "2.3.2", disks: bool = False) -> Path:
    """A writable copy at `dest` of the kstat tree of OpenZFS `version` (None: no kstats), with the
    disk tree (proc/diskstats, sys/block, udev/data of tests/fixtures/linux-disks) laid over it
    when `disks`. Returns `dest`, the `--path.procfs`/`--path.sysfs` root."""
    if version is not None:
        shutil.copytree(linux_tree(version), dest)
    if disks:
        for part in ("proc", "sys", "udev"):
            shutil.copytree(FIXTURES / "linux-disks" / part, dest / part, dirs_exist_ok=True)
    return dest


def copy_commands(dest: Path, recordings: str = "zfs-2.3", iostat: str | None = None,
                  smart: str | None = None) -> Path:
    """A writable copy at `dest` of the stand-in's recordings (tests/fixtures/commands/<recordings>),
    with the `zpool iostat -w/-q` captures of tests/fixtures/linux-disks/<iostat> and the smartctl
    answers for the disk tree of tests/fixtures/smart/<smart> added when given, so that one stand-in
    directory answers every command the collectors run."""
    shutil.copytree(FIXTURES / "commands" / recordings, dest)
    index = json.loads((dest / "index.json").read_text())
    if iostat is not None:
        for flag, name in (("-HpPvw", "iostat-w.txt"), ("-HpPvq", "iostat-q.txt")):
            shutil.copy(FIXTURES / "linux-disks" / iostat / name, dest / name)
            index["commands"][f"zpool iostat {flag}"] = name
    if smart is not None:
        for line, entry in json.loads((FIXTURES / "smart" / smart / "index.json").read_text())["commands"].items():
            name = Path(entry["stdout"]).name
            shutil.copy(FIXTURES / "smart" / smart / entry["stdout"], dest / name)
            index["commands"][line] = {**entry, "stdout": name}
    (dest / "index.json").write_text(json.dumps(index, indent=1))
    return dest


def exporter_args(*flags: str):
    return build_parser().parse_args(list(flags))


def make_collector(cls, args, commands=None, kstat=None, **shared):
    """A collector of class `cls` as the exporter builds it from parsed flags `args` (its typed
    settings, the host paths and shared filters); `shared`: zpool_status, disk_identities."""
    config = ExporterConfig.from_args(args)
    return cls(config.context(kstat, commands, **shared), config.settings_of(cls))


def only_collectors(root: Path, *collectors: str) -> list[str]:
    """Flags for only these collectors, reading the fixture tree at `root`."""
    return ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), "--collector.disable-defaults",
            *(f"--collector.{c}" for c in collectors)]


def tree_exporter(root: Path, *collectors: str):
    """An exporter of only these collectors on the fixture tree at `root` (without process metrics)."""
    return build_exporter(exporter_args(*only_collectors(root, *collectors)), process_metrics=False)


def scrape_tree(version: str, *collectors: str) -> str:
    """One scrape of only these collectors on the Linux fixture tree of `version`."""
    return scrape_text(*only_collectors(linux_tree(version), *collectors))


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


def wait_until(condition: Callable[[], object], what: str = "the awaited condition", timeout: float = 60.0,
               pace: float = 0.02) -> None:
    """Wait for `condition()` to hold, looking every `pace` seconds, instead of sleeping and hoping it
    held meanwhile. `timeout` only bounds a test whose condition never comes (generous: the CI machine
    is busy and slow); it never measures anything. Fails saying that `what` did not happen."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {timeout:g} s")
        time.sleep(pace)


ZFS_COMMAND_VERSIONS = ("2.1", "2.3")


def zfs_commands(recordings: str | Path, *options: str) -> list[str]:
    """Flags that make `zfs`/`zpool` the stand-in replaying tests/fixtures/commands/zfs-<version>/
    (`recordings` a version such as "2.3") or a directory of such recordings (a `copy_commands`)."""
    commands = FIXTURES / "commands"
    directory = recordings if isinstance(recordings, Path) else commands / f"zfs-{recordings}"
    prefix = [sys.executable, str(commands / "standin.py"), *options, str(directory)]
    return ["--zfs.command-prefix", shlex.join(prefix)]


def collected(collector) -> list:
    """One collect of `collector` as a list of families; every read must have succeeded."""
    from zfsnas.collectors.base import Report

    report = Report(collector.name)
    families = list(collector.collect(report))
    assert report.ok, report.errors
    return families


def rendered_from_samples(families) -> str:
    """What the renderer writes from the families' samples: what text kept for them (frozen, laid
    out, a row table's) must equal."""
    from zfsnas.exposition import Family, render

    plain = []
    for family in families:
        copy = Family(family.name, family.documentation, family.kind, family.labelnames)
        copy.samples = list(family.samples)
        plain.append(copy)
    return render(plain)


# --- the generated lives of tests/alerts/test_lives.py ------------------------------------------

LIVES = "tests/alerts/test_lives.py::test_hundreds_of_lives_raise_exactly_their_alerts"


def pytest_collection_finish(session: pytest.Session) -> None:
    """The 600 generated lives take promtool some 1,500 CPU seconds: when their test is to run, the
    lives start now, in the background at the lowest priority (the CPU the other tests leave idle),
    and the test runs last, waiting for them."""
    lives = [item for item in session.items if item.nodeid == LIVES]
    if lives and not session.config.option.collectonly and shutil.which("promtool"):
        session.items[:] = [item for item in session.items if item.nodeid != LIVES] + lives
        from tests.alerts.test_lives import start_in_background
        start_in_background()


def pytest_sessionfinish(session: pytest.Session) -> None:
    lives = sys.modules.get("tests.alerts.test_lives")
    if lives is not None:
        lives.stop_background()
