"""What `zfsnas-exporter` does between its start and its first answer: the zfs/zpool refreshes wait
for the first scrape (`Exporter.hold_refreshes`, `refresh.START`), so the imports and the bind are not
slowed by their commands and parses, while in-process sources are read at once (that scrape then
waits for them all: tests/integration/test_first_scrape.py); and it stops on SIGTERM however early."""

import re
import threading
import time

import pytest

from tests import registry
from tests.conftest import FIXTURES, linux_tree, value
from zfsnas.refresh import START, BackgroundRefresher
from zfsnas.wiring import build_exporter, build_parser


def kstat_exporter():
    tree = linux_tree("2.3.2")
    args = build_parser().parse_args([f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys",
                                      "--collector.disable-defaults", "--collector.arc"])
    return build_exporter(args)


def test_refreshes_wait_for_the_first_scrape_and_run_once_it_comes():
    exporter = kstat_exporter()
    fetched = threading.Event()
    refresher = BackgroundRefresher("probe", lambda: fetched.set() or 1, interval=60, wait_for_start=True)
    try:
        exporter.hold_refreshes(60)
        refresher.start()
        unheld = threading.Event()
        other = BackgroundRefresher("in-process", lambda: unheld.set() or 2, interval=60)
        other.start()
        assert unheld.wait(10)  # a source not made to wait is read at once
        other.stop()
        assert not fetched.wait(0.5)  # held
        assert "\nzfs_arc_size_bytes 11811160064\n" in exporter.render()
        assert fetched.wait(10)
        assert refresher.state().value == 1
    finally:
        START.release()
        refresher.stop()
        exporter.stop()


def test_a_hold_ends_by_itself_and_a_held_refresher_stops_without_refreshing():
    exporter = kstat_exporter()
    exporter.hold_refreshes(0.3)  # nobody renders: the refresh starts when the hold ends
    started = time.monotonic()
    fetched = threading.Event()
    refresher = BackgroundRefresher("probe", lambda: fetched.set() or 1, interval=60, wait_for_start=True)
    refresher.start()
    try:
        assert fetched.wait(10) and 0.25 <= time.monotonic() - started < 10
    finally:
        refresher.stop()
        exporter.stop()
    exporter = kstat_exporter()
    exporter.hold_refreshes(60)
    calls: list[int] = []
    refresher = BackgroundRefresher("probe", lambda: calls.append(1) or 1, interval=60, wait_for_start=True)
    refresher.start()
    started = time.monotonic()
    try:
        refresher.stop(timeout=10)  # stopped while held (an exporter stopped before its first page)
        assert time.monotonic() - started < 2 and refresher._thread is not None and not refresher._thread.is_alive()
        assert calls == []  # ended without a refresh: no command run, no failure logged at shutdown
    finally:
        START.release()
        exporter.stop()


def test_sigterm_right_after_the_first_answer_stops_the_exporter_every_time(tmp_path):
    """The signal may reach any of the exporter's threads; each start must still end on it (one in
    twenty hung for good when the main thread waited on an Event set by the handler)."""
    from tests.conftest import free_port
    from tests.integration.exporter_process import ExporterProcess

    tree = linux_tree("2.3.2")
    for _ in range(10):
        exporter = ExporterProcess(free_port(), f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys",
                                   "--path.udev.data=/nonexistent", "--zfs.command-prefix=/nonexistent")
        try:
            exporter.wait_ready("/metrics")
            exporter.proc.terminate()
            assert exporter.proc.wait(10) == 0
        finally:
            if exporter.proc.poll() is None:
                exporter.proc.kill()
                exporter.proc.wait()


def start_log(tmp_path, *flags: str) -> tuple[str, str]:
    """The log of an exporter started with `flags` and no `zfs`/`zpool` on its PATH, scraped twice
    while its refreshes (every 0.2 s) fail a few times, then stopped; and its last page."""
    from tests.conftest import free_port
    from tests.integration.exporter_process import ExporterProcess

    (tmp_path / "bin").mkdir()
    fast = [f"--{name}.refresh-interval=0.2" for name in ("datasets", "pools", "tunables")]
    with ExporterProcess(free_port(), *flags, *fast, "--bench.db", str(tmp_path / "none.sqlite"),
                         log_path=tmp_path / "log", env={"PATH": str(tmp_path / "bin")}) as exporter:
        exporter.wait_ready()
        exporter.get()
        time.sleep(1.0)
        page = exporter.get()
    return exporter.log(), page


def the_one_warning(log: str) -> str:
    """The log's only line above INFO, which must be a warning: the start-up line, without where it
    listens (its end: `; listening on http://127.0.0.1:<port>/metrics`)."""
    above_info = [line for line in log.splitlines() if "level=INFO" not in line]
    assert len(above_info) == 1 and "level=WARNING " in above_info[0], log
    line, listening = above_info[0].split("level=WARNING ", 1)[1].rsplit("; listening on ", 1)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", listening), listening
    return line


DISKS = FIXTURES / "linux-disks"
TREE = linux_tree("2.3.2")


def default(*names: tuple[str, ...], but: tuple[str, ...] = ("smart",)) -> str:
    """The default collectors among `names`, in the registry's order, as the start-up line lists
    them (smart, with smartctl missing everywhere here, has its own part of the line)."""
    return ", ".join(n for n in registry.DEFAULT if any(n in group for group in names) and n not in but)


@pytest.mark.parametrize("flags, line, success", [
    # no ZFS at all: the disks and the bench store are still served
    ([f"--path.procfs={DISKS / 'proc'}", f"--path.sysfs={DISKS / 'sys'}", f"--path.udev.data={DISKS / 'udev' / 'data'}"],
     "zfsnas-exporter 0.1.0: no ZFS kernel module found (procfs); zfs, zpool: command not found: serving "
     f"{default(registry.NO_ZFS)}, self metrics; not {default(registry.KSTAT, registry.COMMANDS)} (their "
     "zfs_exporter_collector_success is 0 until that changes); smart serves nothing: smartctl: command not found "
     "(install smartmontools 7.0 or later; docs/disks.md#smart)",
     {"disks": 1, "bench": 1, "arc": 0, "datasets": 0, "smart": 0}),
    # the kstats but no zfs/zpool command (a container without --zfs.command-prefix): one line, not five
    ([f"--path.procfs={TREE}/proc", f"--path.sysfs={TREE}/sys", "--no-collector.disks"],
     "zfsnas-exporter 0.1.0: zfs, zpool: command not found (in a container: --zfs.command-prefix 'nsenter --target 1 "
     f"--mount --'): serving {default(registry.KSTAT, registry.NO_ZFS, but=('smart', 'disks'))}, self metrics; not "
     f"{default(registry.COMMANDS)} (their zfs_exporter_collector_success is 0 until that changes); smart serves "
     "nothing: smartctl: command not found (install smartmontools 7.0 or later; docs/disks.md#smart)",
     {"arc": 1, "datasets": 0, "pools": 0, "smart": 1}),
    # ZFS and its commands are there, smartctl is not: said once at start. This tree has no disks, so
    # nothing goes unread (success 1); with disks, success 0 and zfs_disk_smart_unavailable say it
    # (test_smart.py; the first case above, which has disks)
    ([f"--path.procfs={TREE}/proc", f"--path.sysfs={TREE}/sys", "--collector.disable-defaults", "--collector.arc",
      "--collector.smart"],
     "zfsnas-exporter 0.1.0: collectors arc; smart serves nothing: smartctl: command not found (install "
     "smartmontools 7.0 or later; docs/disks.md#smart)",
     {"arc": 1, "smart": 1}),
], ids=["no-zfs", "no-zfs-command", "no-smartctl"])
def test_without_zfs_one_line_says_what_is_and_is_not_served(tmp_path, flags, line, success):
    log, page = start_log(tmp_path, *flags)
    assert the_one_warning(log) == line
    assert {c: value(page, "zfs_exporter_collector_success", collector=c) for c in success} == success


def test_with_zfs_the_line_names_the_collectors(tmp_path):
    tree = linux_tree("2.3.2")
    log, _ = start_log(tmp_path, f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys",
                       "--collector.disable-defaults", "--collector.arc", "--collector.txg")
    # one line at start: what is served and where
    assert re.search(r"level=INFO zfsnas-exporter 0\.1\.0: collectors arc, txg; listening on http://127\.0\.0\.1:\d+/metrics$",
                     log.splitlines()[0]), log
    assert [line for line in log.splitlines() if "shutting down" not in line] == log.splitlines()[:1], log
    assert "WARNING" not in log


def test_stopping_says_nothing_but_that_it_stops(tmp_path):
    """The commands the stop kills (`zpool events -f`, which never ends by itself, and any refresh
    running) are no failure: the log of a start and stop is the start-up line and `shutting down`
    (under systemd every stop logged two warnings before)."""
    from tests.conftest import copy_commands, copy_tree, free_port, zfs_commands
    from tests.integration.exporter_process import ExporterProcess

    root = copy_tree(tmp_path / "tree", disks=True)
    commands = copy_commands(tmp_path / "commands")
    flags = ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), "--path.udev.data",
             str(root / "udev" / "data"), *zfs_commands(commands), "--no-collector.smart", "--bench.db",
             str(tmp_path / "none.sqlite"), "--pools.refresh-interval=0.2", "--datasets.refresh-interval=0.2"]
    with ExporterProcess(free_port(), *flags, log_path=tmp_path / "log") as exporter:
        exporter.wait_ready()
        page = exporter.get()
        assert value(page, "zfs_exporter_source_success", source="zpool_events") == 1   # following
        time.sleep(1.0)   # refreshes every 0.2 s: one is likely running when the stop comes
    lines = exporter.log().splitlines()
    assert "level=INFO zfsnas-exporter 0.1.0: collectors " in lines[0] and lines[1:] == [lines[-1]], lines
    assert lines[-1].endswith("level=INFO shutting down"), lines
