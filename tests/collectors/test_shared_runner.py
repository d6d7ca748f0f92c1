"""The command runner every collector shares: one `zfs`/`zpool` command at a time (vdevlatency's
included), a collector that stops leaves it open for the others, and the exporter closes it once at
shutdown, killing a hung command. Real processes: the `zfs`/`zpool` stand-in
(tests/fixtures/commands/standin.py) logs when each command starts and ends."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import exporter_args, linux_tree, wait_until, zfs_commands
from tests.sources.test_commands import alive, waiting_for_a_turn
from zfsnas.wiring import build_exporter

ROOT = linux_tree("2.3.2")
KSTAT = ["--path.procfs", str(ROOT / "proc"), "--path.sysfs", str(ROOT / "sys")]
ONLY = ["--collector.disable-defaults", "--collector.datasets", "--collector.pools", "--collector.vdevlatency"]


def runs(log: Path) -> list[tuple[float, float, str, int]]:
    """(start, end, command, pid) of every stand-in run in the log; end is inf for one still running."""
    started: dict[int, tuple[float, str]] = {}
    ended: dict[int, float] = {}
    for line in log.read_text().splitlines():
        kind, pid, at, *command = line.split(" ", 3)
        if kind == "start":
            started[int(pid)] = (float(at), command[0] if command else "")
        else:
            ended[int(pid)] = float(at)
    return sorted((at, ended.get(pid, float("inf")), command, pid) for pid, (at, command) in started.items())


def sources_ok(exporter) -> bool:
    return all(s.state().success for c in exporter.collectors for s in c.sources())


def test_one_zfs_or_zpool_command_at_a_time_vdevlatency_included(tmp_path):
    """Six refresh threads start at once, each command takes 0.3 s: no two ever overlap. The
    events follower (`zpool events -fvH`, which waits for the kernel's next event and holds no
    pool lock) is the one command that runs beside them, started once and running throughout."""
    log = tmp_path / "commands.log"
    exporter = build_exporter(exporter_args(*KSTAT, *ONLY, *zfs_commands("2.3", "--sleep", "0.3", "--log", str(log))),
                              process_metrics=False)
    exporter.start()
    try:
        wait_until(lambda: sources_ok(exporter), "every source refreshed")
    finally:
        exporter.stop()
    followed = [run for run in runs(log) if run[2] == "zpool events -fvH"]
    done = [run for run in runs(log) if run not in followed]
    commands = [command for _, _, command, _ in done]
    # zfs list, zfs list -t snapshot, zpool list, zpool list -v, zpool status -P and -g, zpool iostat -w and -q
    assert len(done) == 8, commands
    assert sum("zpool iostat" in c for c in commands) == 2 and sum(c.startswith("zfs list") for c in commands) == 2
    for (_, end, before, _), (start, _, after, _) in zip(done, done[1:]):
        assert start >= end, f"{after!r} started while {before!r} still ran"
    assert done[-1][1] - done[0][0] >= 8 * 0.3
    [(start, end, _, _)] = followed
    assert start <= done[-1][0] and end >= done[-1][1]


def test_a_collector_that_stops_leaves_the_runner_to_the_others(tmp_path):
    log = tmp_path / "commands.log"
    exporter = build_exporter(exporter_args(*KSTAT, *ONLY, *zfs_commands("2.3", "--log", str(log))),
                              process_metrics=False)
    exporter.start()
    try:
        wait_until(lambda: sources_ok(exporter), "every source refreshed")
        datasets, pools, vdevlatency = exporter.collectors
        datasets.stop()
        vdevlatency.stop()
        runner = exporter.owned_runner
        assert runner is not None and not runner.closed
        before = len(runs(log))
        assert pools.pool_list.refresh_now() and pools.status.refresh_now()
        assert len(runs(log)) == before + 4  # zpool list, zpool status -P and -g, zpool list -v: really run
        assert pools.status.state().success and pools.status.state().error is None
    finally:
        exporter.stop()
    assert runner.closed


def test_shutdown_closes_the_runner_once_and_kills_the_hung_command(tmp_path, monkeypatch):
    """One command hangs (for an hour), the other refresh threads wait for their turn; stop() returns
    in seconds, the hung command is dead, no waiting command starts, and close() ran once."""
    log, hang = tmp_path / "commands.log", tmp_path / "hang"
    hang.touch()
    exporter = build_exporter(exporter_args(*KSTAT, *ONLY, *zfs_commands("2.3", "--hang-if", str(hang), "--log", str(log))),
                              process_metrics=False)
    runner = exporter.owned_runner
    closes = []
    close = runner.close
    monkeypatch.setattr(runner, "close", lambda: (closes.append(time.monotonic()), close()))
    exporter.start()
    wait_until(lambda: log.exists() and runs(log), "a command started")
    # zfs list, zpool list, status and iostat but the hung one wait for their turn (zfs list -t
    # snapshot waits for zfs list's answer)
    wait_until(lambda: waiting_for_a_turn() == 3, "three refresh threads waiting for their turn")
    [(_, end, command, pid)] = [run for run in runs(log) if run[2] != "zpool events -fvH"]
    assert end == float("inf") and alive(pid), command
    started = time.monotonic()
    exporter.stop()
    assert time.monotonic() - started < 3
    wait_until(lambda: not alive(pid), "the hung command killed")
    assert [run[2] for run in runs(log)] in ([command], [command, "zpool events -fvH"],
                                             ["zpool events -fvH", command])  # the waiting commands gave up
    assert runner.closed and len(closes) == 1
    exporter.stop()
    assert len(closes) == 1
    for collector in exporter.collectors:
        for source in collector.sources():
            assert source._thread is not None and not source._thread.is_alive(), source.name
