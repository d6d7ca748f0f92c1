"""Metric hygiene over the scrape of every fixture tree: `promtool check metrics` finds nothing to
lint, and no name clashes in OpenMetrics (a gauge `X` beside a counter `X_total`, or a family named
like another's `_bucket`/`_count`/`_sum`/`_total` sample)."""

import shutil
import subprocess

import pytest

from tests.conftest import FIXTURES, ZFS_COMMAND_VERSIONS, linux_tree, samples, scrape_text, types, zfs_commands
from tests.golden.render import ALL_CASES, render
from tests.integration.test_stack import GiB, store_result


def promtool_check(text: str) -> str:
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed: run ./dev test")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return (result.stdout + result.stderr).strip() if result.returncode else ""


def clashes(text: str) -> list[str]:
    kinds = types(text)
    derived = {}
    for name, kind in kinds.items():
        if kind == "counter":
            derived[name if name.endswith("_total") else name + "_total"] = name
        if kind == "histogram":
            derived.update({name + suffix: name for suffix in ("_bucket", "_count", "_sum")})
    out = [f"{name} ({kinds[name]}) beside {derived[name]} ({kinds[derived[name]]})"
           for name in kinds if name in derived and derived[name] != name]
    out += [f"gauge {name} beside counter {name}_total" for name, kind in kinds.items()
            if kind != "counter" and kinds.get(name + "_total") == "counter"]
    return out


def every_collector_scrape(version: str, tmp_path) -> list[str]:
    """datasets, pools, vdevlatency and bench on the command recordings; disks on the disk tree."""
    db = tmp_path / "bench.sqlite"
    for n, throughput in enumerate((1.0 * GiB, 0.8 * GiB)):
        store_result(db, throughput, 1_700_000_000 + 3600 * n)
    kstat = linux_tree("2.3.2" if version == "2.3" else "2.1.11")
    disks = FIXTURES / "linux-disks"
    return [scrape_text("--path.procfs", str(kstat / "proc"), "--path.sysfs", str(kstat / "sys"),
                       "--collector.vdevlatency", "--bench.db", str(db), *zfs_commands(version)), \
        scrape_text("--path.procfs", str(disks / "proc"), "--path.sysfs", str(disks / "sys"),
                    "--path.udev.data", str(disks / "udev" / "data"), "--collector.disable-defaults",
                    "--collector.disks", "--no-disks.hotplug")]


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_golden_cases(case):
    text = render(case)
    assert promtool_check(text) == ""
    assert clashes(text) == []


@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_every_collector(version, tmp_path):
    scrapes = every_collector_scrape(version, tmp_path)
    assert {"zfs_dataset_info", "zfs_pool_health", "zfs_vdev_latency_seconds", "zfs_disk_info",
            "zfs_bench_throughput_bytes_per_second"} <= {name for text in scrapes for name in types(text)}
    for text in scrapes:
        assert promtool_check(text) == ""
        assert clashes(text) == []


def state_values(text: str) -> dict[str, set[str]]:
    """The `state` label's values per family, for the families that describe a pool or a vdev."""
    out: dict[str, set[str]] = {}
    for (name, labels), _ in samples(text).items():
        state = dict(labels).get("state")
        if state is not None and name in ("zfs_pool_state", "zfs_pool_health", "zfs_vdev_state"):
            out.setdefault(name, set()).add(state)
    return out


@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_pool_states_read_the_same_in_every_family(version, tmp_path):
    """A pool's state is written as `zpool` prints it (ONLINE, DEGRADED, ...) in the kstat family and
    in the command family alike, so one selector (`state!="ONLINE"`) works on both."""
    [zfs, _] = every_collector_scrape(version, tmp_path)
    states = state_values(zfs)
    assert states["zfs_pool_state"] == states["zfs_pool_health"] == {
        "ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "REMOVED", "UNAVAIL", "SUSPENDED"}
    assert states["zfs_vdev_state"] <= states["zfs_pool_health"] | {"AVAIL", "INUSE"}
    assert "ONLINE" in states["zfs_vdev_state"]


def test_clashes_are_found():
    text = ("# TYPE zfs_x_bytes gauge\nzfs_x_bytes 1\n# TYPE zfs_x_bytes_total counter\nzfs_x_bytes_total 2\n"
            "# TYPE zfs_h_seconds histogram\nzfs_h_seconds_count 1\n# TYPE zfs_h_seconds_count gauge\n")
    assert clashes(text) == ["zfs_h_seconds_count (gauge) beside zfs_h_seconds (histogram)",
                             "gauge zfs_x_bytes beside counter zfs_x_bytes_total"]
