"""CommandRunner's hard limits (sources/commands.py): whole process group killed at the timeout,
leftover pipe holders not waited for, output and line sizes bounded."""

from __future__ import annotations

import os
import sys
import time

import pytest

from tests.conftest import wait_until
from zfsnas.sources.commands import MAX_LINE_BYTES, CommandRunner
from zfsnas.sources.model import SourceError


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (its parent, not us, must reap it).
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def waiting_for_a_turn() -> int:
    """Threads blocked in `CommandRunner._turn`, waiting for the one-at-a-time lock (the command that
    holds it runs outside that frame)."""
    turn = CommandRunner._turn.__wrapped__.__code__
    count = 0
    for frame in sys._current_frames().values():
        while frame is not None and frame.f_code is not turn:
            frame = frame.f_back
        count += frame is not None
    return count


def test_timeout_kills_the_whole_process_group(tmp_path):
    """The command starts a grandchild that holds its stdout and ignores SIGTERM: both are gone at the timeout."""
    pidfile = tmp_path / "pid"
    script = ("import os, signal, subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
              f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
              "print('started', flush=True); time.sleep(60)\n")
    runner = CommandRunner(timeout=1)
    started = time.monotonic()
    with pytest.raises(SourceError, match="timed out after 1s and was killed"):
        runner.run([sys.executable, "-c", script])
    assert time.monotonic() - started < 4
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_a_leftover_holding_the_pipe_does_not_stall(tmp_path):
    """zpool exits at once but a process in another session keeps its stdout open for 60 s: the
    output is returned about EOF_GRACE after the exit, not when the leftover lets go."""
    pidfile = tmp_path / "pid"
    script = ("import subprocess, sys\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
              f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
              "print('pool\\tONLINE', flush=True)\n")
    runner = CommandRunner(timeout=30)
    started = time.monotonic()
    try:
        assert runner.run([sys.executable, "-c", script]) == "pool\tONLINE\n"
        assert time.monotonic() - started < 5
        assert list(runner.lines([sys.executable, "-c", script])) == ["pool\tONLINE"]
    finally:
        os.kill(int(pidfile.read_text()), 9)


def test_output_limit_kills_and_names_the_flag():
    runner = CommandRunner(timeout=30, max_output=100_000)
    started = time.monotonic()
    with pytest.raises(SourceError) as err:
        runner.run([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"])
    assert "printed more than 100000 bytes" in str(err.value) and "--zfs.command-max-output" in str(err.value)
    assert time.monotonic() - started < 5
    assert runner.run([sys.executable, "-c", "print('a' * 99_999)"], max_output=100_000) == "a" * 99_999 + "\n"


def test_lines_caps_each_line_and_keeps_the_rest():
    runner = CommandRunner(timeout=30)
    script = f"print('tank@a'); print('z' * {3 * MAX_LINE_BYTES}); print('tank@b')"
    lines = list(runner.lines([sys.executable, "-c", script]))
    assert lines == ["tank@a", "z" * MAX_LINE_BYTES, "tank@b"]


def test_stderr_is_read_from_its_end_only():
    runner = CommandRunner(timeout=30)
    script = "import sys; sys.stderr.write('noise ' * 1_000_000 + '\\ncannot open tank: no such pool\\n'); sys.exit(1)"
    with pytest.raises(SourceError) as err:
        runner.run([sys.executable, "-c", script])
    assert str(err.value).endswith("exited with status 1: cannot open tank: no such pool")


def timed_threads(runner: CommandRunner, argv: list[str], count: int) -> tuple[float, list]:
    """Run `argv` from `count` threads at once; (seconds until all ended, results or errors)."""
    import threading

    results: list = []

    def one() -> None:
        try:
            results.append(runner.run(argv))
        except SourceError as exc:
            results.append(exc)

    threads = [threading.Thread(target=one) for _ in range(count)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return time.monotonic() - started, results


def test_one_at_a_time_programs_wait_for_each_other_others_do_not():
    sleeper = [sys.executable, "-c", "import time; time.sleep(0.4); print('ok')"]
    serial, results = timed_threads(CommandRunner(timeout=30, one_at_a_time={sys.executable}), sleeper, 3)
    assert results == ["ok\n"] * 3 and serial >= 3 * 0.4
    # the default set is zfs and zpool: anything else (FreeBSD's sysctl on the scrape path) never waits
    parallel, results = timed_threads(CommandRunner(timeout=30), sleeper, 3)
    assert results == ["ok\n"] * 3 and parallel < 2 * 0.4


def test_close_kills_the_running_command_and_refuses_the_waiting_ones():
    import threading

    runner = CommandRunner(timeout=60, one_at_a_time={sys.executable})
    hung = [sys.executable, "-c", "import time; print('hung', flush=True); time.sleep(60)"]
    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.append(timed_threads(runner, hung, 3)))
    thread.start()
    wait_until(lambda: len(runner._running) == 1 and waiting_for_a_turn() == 2, "one running, two waiting their turn")
    started = time.monotonic()
    runner.close()
    thread.join(10)
    assert time.monotonic() - started < 5
    _, results = outcome[0]
    assert all(isinstance(r, SourceError) for r in results), results
    assert sum(str(r) == "exporter shutting down: command not started" for r in results) == 2
    assert sum("exited with status -9" in str(r) for r in results) == 1  # the hung one, killed
    with pytest.raises(SourceError, match="exporter shutting down"):
        runner.run(["true"])


def test_a_command_that_exits_while_another_thread_reaps_it_is_seen_to_exit():
    """close() kills a command and reaps it in its own thread; the command's reader, woken by the
    command's pidfd at that moment, found Popen.poll() answering None (the other thread held Popen's
    reaping lock) and reported the kill as a timeout. The status must come through once it is known."""
    import subprocess
    import threading

    from zfsnas.sources import commands

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    held, release = threading.Event(), threading.Event()

    def reaping_elsewhere():
        with proc._waitpid_lock:  # what a wait() in another thread holds while it reaps
            held.set()
            release.wait(5)

    holder = threading.Thread(target=reaping_elsewhere)
    holder.start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    try:
        assert commands._wait_exit(proc, time.monotonic() + 10)
        assert proc.returncode == 0
    finally:
        release.set()
        holder.join(5)


def test_follow_streams_a_long_lived_command_without_timeout_or_turn(tmp_path):
    """`zpool events -f` runs for the exporter's life: past the runner's timeout, beside a one-at-a-time
    command, until its stop event is set (then killed, its end no error) or it exits (a failure raised)."""
    import threading

    # Waits are on what the command printed, not on sleeps: under load a Python start alone can take
    # longer than a fixed pause (seen: fewer events than the pause allowed for, 'beside' timed out).
    runner = CommandRunner(timeout=1.0, one_at_a_time={sys.executable})
    events = [sys.executable, "-c", "import time\nfor n in range(100):\n print('event', n, flush=True); time.sleep(0.1)"]
    stop = threading.Event()
    seen: list[str] = []  # list.extend appends each line as the generator yields it

    def printed(count: int) -> None:
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            time.sleep(0.02)

    follower = threading.Thread(target=lambda: seen.extend(runner.follow(events, stop)))
    follower.start()
    printed(1)
    assert runner.run([sys.executable, "-c", "print('beside')"]) == "beside\n"   # the turn is not held
    printed(13)   # 12 events 0.1 s apart after the first: past the 1 s timeout
    [proc] = runner._running
    stop.set()
    follower.join(5)
    assert not follower.is_alive() and seen[:3] == ["event 0", "event 1", "event 2"] and len(seen) >= 13
    assert proc.poll() is not None and not runner._running
    failing = [sys.executable, "-c", "import sys; print('last'); sys.exit('no /dev/zfs')"]
    out: list[str] = []
    with pytest.raises(SourceError, match="exited with status 1: no /dev/zfs"):
        for line in runner.follow(failing, threading.Event()):
            out.append(line)
    assert out == ["last"]
