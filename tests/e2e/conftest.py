"""Reading one guest run's results (ZFSNAS_E2E_RESULTS, set by tests/e2e/harness.py).

Every e2e test compares what the exporter served at a moment (`metrics.txt`) with what the guest
itself said at that moment (`commands/`, `tree_before/` and `tree/` kstats, `udev/`). Without a
results directory (plain `pytest`), the e2e tests are skipped: they need the QEMU run.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from functools import cached_property
from pathlib import Path

import pytest

from tests.conftest import samples

# filter="data" (refuse unsafe members) exists from Python 3.11.4; Debian 12's 3.11.2 lacks it. The archives are our guest's.
SAFE_EXTRACT = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


class Capture:
    """One moment of the scenario: results/<name>/."""

    def __init__(self, path: Path):
        if not (path / "metrics.txt").exists():
            pytest.fail(f"the guest scenario did not capture {path.name}: see {path.parent / 'scenario.log'}")
        self.path = path
        self.name = path.name
        archive = path / "capture.tar"
        if archive.exists() and not (path / "tree").exists():
            with tarfile.open(archive) as tar:
                tar.extractall(path, **SAFE_EXTRACT)

    @cached_property
    def metrics(self) -> dict:
        return samples((self.path / "metrics.txt").read_text())

    def served(self, metric: str, **labels) -> float:
        key = (metric, frozenset(labels.items()))
        if key not in self.metrics:
            near = sorted(str(dict(k[1])) for k in self.metrics if k[0] == metric)[:6]
            raise AssertionError(f"[{self.name}] {metric}{labels} not served; served label sets: {near or 'none'}")
        return self.metrics[key]

    def series(self, metric: str, **labels) -> list[tuple[dict, float]]:
        """Every sample of `metric` whose labels include `labels`."""
        want = set(labels.items())
        return [(dict(k[1]), v) for k, v in self.metrics.items() if k[0] == metric and want <= k[1]]

    def collector_enabled(self, name: str) -> bool:
        return ("zfs_exporter_collector_success", frozenset({("collector", name)})) in self.metrics

    def command(self, filename: str) -> str:
        return (self.path / "commands" / filename).read_text()

    def kstat(self, relpath: str, before: bool = False) -> dict[str, int | str]:
        """A named kstat file (`arcstats`, `tank/objset-0x36`) of tree/ (or tree_before/)."""
        tree = "tree_before" if before else "tree"
        out: dict[str, int | str] = {}
        lines = (self.path / tree / "proc/spl/kstat/zfs" / relpath).read_text().splitlines()
        for line in lines[2:]:
            parts = line.split(None, 2)
            if len(parts) == 3:
                out[parts[0]] = parts[2] if parts[1] == "7" else int(parts[2])
        return out

    def objsets(self, pool: str, before: bool = False) -> dict[str, dict]:
        """{dataset name: objset kstat} of a pool."""
        tree = "tree_before" if before else "tree"
        out = {}
        for path in sorted((self.path / tree / "proc/spl/kstat/zfs" / pool).glob("objset-0x*")):
            stats = self.kstat(f"{pool}/{path.name}", before)
            out[str(stats["dataset_name"])] = stats
        return out

    def txgs(self, pool: str) -> list[dict]:
        lines = (self.path / "tree/proc/spl/kstat/zfs" / pool / "txgs").read_text().splitlines()
        header = lines[0].split()
        return [dict(zip(header, line.split())) for line in lines[1:] if line.strip()]

    @cached_property
    def zfs_get(self) -> dict[str, dict[str, str]]:
        """{dataset: {property: value}} from `zfs get -Hp all`."""
        out: dict[str, dict[str, str]] = {}
        for line in self.command("zfs_get.txt").splitlines():
            name, prop, val, _source = line.split("\t")
            out.setdefault(name, {})[prop] = val
        return out

    @cached_property
    def zpool_list(self) -> dict[str, list[str]]:
        """{pool: columns} of `zpool list -Hp` (name size alloc free ckpoint expandsz frag cap dedup health altroot)."""
        return {line.split("\t")[0]: line.split("\t") for line in self.command("zpool_list.txt").splitlines()}

    @cached_property
    def udev(self) -> dict[str, dict]:
        """{block device: {"props": {KEY: value}, "links": [/dev/... links]}} from `udevadm info --export-db`."""
        out = {}
        for record in (self.path / "udev" / "export-db.txt").read_text().split("\n\n"):
            name, props, links, block = None, {}, [], False
            for line in record.splitlines():
                tag, _, rest = line.partition(": ")
                if tag == "P" and "/block/" in rest:
                    block = True
                elif tag == "N":
                    name = rest
                elif tag == "S":
                    links.append("/dev/" + rest)
                elif tag == "E" and "=" in rest:
                    key, _, val = rest.partition("=")
                    props[key] = val
            if block and name and name.startswith(("sd", "vd")):
                out[name] = {"props": props, "links": links}
        return out

    @cached_property
    def times(self) -> dict[str, float]:
        return json.loads((self.path / "times.json").read_text())


def parse_zfs_ratio(text: str) -> float:
    return float(text.rstrip("x"))


def vdev_guids(status_gP: str, status_P: str) -> dict[str, str]:
    """{leaf device path (zpool status -P): vdev guid (zpool status -g)}: the two print the same tree."""
    def rows(text):
        out, inside = [], False
        for line in text.splitlines():
            if re.match(r"\s+NAME\s+STATE", line):
                inside = True
                continue
            if inside and not line.strip():
                inside = False
            if inside and line.startswith("\t"):
                out.append(line.split()[0])
        return out

    return dict(zip(rows(status_P), rows(status_gP)))


@pytest.fixture(scope="session")
def results() -> Path:
    path = os.environ.get("ZFSNAS_E2E_RESULTS")
    if not path:
        pytest.skip("no guest results: run tests/e2e/run (or ./dev e2e)")
    return Path(path)


@pytest.fixture(scope="session")
def config(results) -> dict:
    return json.loads((results.parent / "config.json").read_text())


@pytest.fixture(scope="session")
def expect(results) -> dict:
    return json.loads((results / "expect.json").read_text())


@pytest.fixture(scope="session")
def moment(results):
    def get(name: str) -> Capture:
        return Capture(results / name)
    return get


@pytest.fixture(scope="session")
def steady(moment) -> Capture:
    return moment("steady")


def require_collector(capture: Capture, name: str) -> None:
    if not capture.collector_enabled(name):
        pytest.skip(f"collector {name!r} is not in this build of the exporter (not merged yet)")


def require_phase(config: dict, name: str) -> None:
    """Skip where this run's tier has no `name` phase for this flavour (config.json `phases`,
    tests/e2e/harness.py TIERS): the CI tier gives each feature one live run, `--full` all of them."""
    if name not in config.get("phases", (name,)):
        chosen = config.get("tier", "?")
        chosen = chosen if chosen.startswith("ZFSNAS_E2E_PHASES=") else f"{chosen}-tier"
        pytest.skip(f"no {name!r} phase in this {chosen} run of "
                    f"{os.environ.get('ZFSNAS_E2E_FLAVOUR', 'this flavour')} (`tests/e2e/run --full` runs it)")
