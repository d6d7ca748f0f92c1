"""The exporter process with the `zfs`/`zpool` stand-in: values, slow and hung commands, zfs missing."""

import time
from pathlib import Path

import pytest

from tests.conftest import ZFS_COMMAND_VERSIONS, linux_tree, samples, value, wait_until, zfs_commands
from tests.integration.exporter_process import ExporterProcess

ROOT = linux_tree("2.3.2")
KSTAT = ["--path.procfs", str(ROOT / "proc"), "--path.sysfs", str(ROOT / "sys")]
SOURCES = ("zfs_datasets", "zfs_snapshots", "zpool_list", "zpool_status")


def timed_get(exp):
    started = time.monotonic()
    text = exp.get()
    return text, time.monotonic() - started


def wait_for(exp, check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        text = exp.get()
        if check(samples(text)):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout}s; log: {exp.log()}")
        time.sleep(0.1)


def all_sources_ok(data):
    return all(data.get(("zfs_exporter_source_success", frozenset({("source", s)}))) == 1 for s in SOURCES)


@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_served_by_the_process(version, port, tmp_path):
    with ExporterProcess(port, *KSTAT, *zfs_commands(version), log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        text = wait_for(exp, all_sources_ok)
        assert value(text, "zfs_exporter_collector_success", collector="datasets") == 1
        assert value(text, "zfs_exporter_collector_success", collector="pools") == 1
        assert value(text, "zfs_dataset_compressratio", pool="tank", dataset="tank/home docs") == 1.48
        assert value(text, "zfs_pool_health", pool="tank", state="DEGRADED") == 1
        assert value(text, "zfs_pool_scan_info", pool="scratch", function="scrub", state="scanning") == 1
        assert value(text, "zfs_arc_size_bytes") > 0
    assert "Traceback" not in exp.log()


def test_slow_zfs_never_slows_a_scrape(port, tmp_path):
    """Every command takes 10 s: scrapes stay fast and say the sources are not there yet. (The first
    scrape after the start waits for the first reads, at most 3/4 of its time to its deadline:
    tests/integration/test_first_scrape.py; its 9.5 s end before the 10 s commands do.)"""
    with ExporterProcess(port, *KSTAT, *zfs_commands("2.3", "--sleep", "10"), log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        text, took = timed_get(exp)
        assert value(text, "zfs_exporter_collector_success", collector="pools") == 0
        first_age = None
        for _ in range(5):
            text, took = timed_get(exp)
            assert took < 0.5, f"scrape took {took:.2f}s while zfs sleeps"
            assert value(text, "zfs_exporter_source_success", source="zpool_status") == 0
            assert value(text, "zfs_exporter_collector_success", collector="pools") == 0
            assert value(text, "zfs_exporter_collector_success", collector="arc") == 1
            age = value(text, "zfs_exporter_source_age_seconds", source="zfs_datasets")
            first_age = age if first_age is None else first_age
            time.sleep(0.3)
        assert age > first_age + 1.0
        assert "zfs_pool_size_bytes" not in text


def test_hung_zfs_is_killed_and_last_values_are_served(port, tmp_path):
    hang = tmp_path / "hang"
    flags = [*KSTAT, *zfs_commands("2.3", "--hang-if", str(hang)), "--zfs.command-timeout", "3",
             "--pools.refresh-interval", "0.5", "--datasets.refresh-interval", "0.5",
             "--datasets.snapshot-interval", "0.5"]
    with ExporterProcess(port, *flags, log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        wait_for(exp, all_sources_ok)
        hang.touch()
        # One command at a time: zpool list gets its turn after the hung zfs commands are killed.
        text = wait_for(exp, lambda d: d[("zfs_exporter_source_success", frozenset({("source", "zpool_list")}))] == 0,
                        timeout=60.0)
        slowest = 0.0
        for _ in range(10):  # commands hang, are killed after 3 s, hang again...
            text, took = timed_get(exp)
            slowest = max(slowest, took)
            time.sleep(0.2)
        assert slowest < 1.0, f"a scrape took {slowest:.2f}s while zpool hangs"
        assert value(text, "zfs_exporter_source_age_seconds", source="zpool_list") > 3
        assert value(text, "zfs_exporter_collector_success", collector="pools") == 0
        assert value(text, "zfs_pool_size_bytes", pool="tank") == 47971736518656  # the last good value
        assert value(text, "zfs_dataset_used_bytes", pool="tank", dataset="tank") == 8640284672000
        hang.unlink()
        wait_for(exp, all_sources_ok, timeout=60.0)
    log = exp.log()
    assert "timed out after 3s and was killed" in log
    assert "source zpool_list recovered" in log
    assert "Traceback" not in log


def test_zfs_missing(port, tmp_path):
    env = {"PATH": "/nonexistent"}
    with ExporterProcess(port, *KSTAT, log_path=tmp_path / "log", env=env) as exp:
        exp.wait_ready()
        text = wait_for(exp, lambda d: d.get(("zfs_exporter_source_success", frozenset({("source", "zpool_list")})))
                        == 0 and "zpool: command not found" in exp.log())
        time.sleep(0.5)
        text = exp.get()
        assert value(text, "zfs_exporter_collector_success", collector="pools") == 0
        assert value(text, "zfs_exporter_collector_success", collector="datasets") == 0
        assert value(text, "zfs_exporter_collector_success", collector="arc") == 1
        assert value(text, "zfs_arc_size_bytes") > 0
        assert exp.proc.poll() is None
    # Said once, in the start-up line (with what is still served), not once per source.
    lines = [line for line in exp.log().splitlines() if "command not found" in line]
    assert len(lines) == 1 and "level=WARNING zfsnas-exporter" in lines[0], lines
    assert "zfs, zpool: command not found" in lines[0] and "not datasets, pools" in lines[0]
    assert not [line for line in exp.log().splitlines() if "level=WARNING source " in line]
    assert "Traceback" not in exp.log()


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (what `pgrep -f` does, without needing procps)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def test_shutdown_kills_hung_commands(port, tmp_path):
    hang = tmp_path / "hang-at-shutdown"
    hang.touch()
    exp = ExporterProcess(port, *KSTAT, *zfs_commands("2.3", "--hang-if", str(hang)), log_path=tmp_path / "log")
    exp.wait_ready()
    wait_until(lambda: processes_mentioning(str(hang)), "a stand-in command hanging")
    started = time.monotonic()
    exp.proc.terminate()
    exp.proc.wait(30)
    assert time.monotonic() - started < 3
    exp.stop()
    # killed at shutdown, they are gone once the kernel has reaped them (left alone, they hang an hour)
    wait_until(lambda: not processes_mentioning(str(hang)), "the hung stand-in commands gone", timeout=30)
