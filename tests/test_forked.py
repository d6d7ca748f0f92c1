"""Forked work (exporter/zfsnas/forked.py): a child's result or error comes back, a hung child is
killed at its timeout and a dead one reported, `close` kills what runs, a fed child reads its feed,
and the child holds no descriptor of the parent's and runs at a lower priority."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.conftest import wait_until
from zfsnas.forked import CHILD_NICENESS, ForkedWork
from zfsnas.sources.model import SourceError


def test_forked_work_returns_the_result_and_raises_the_error_of_its_child():
    work = ForkedWork(timeout=10)
    parent = os.getpid()
    assert work.run(lambda: (os.getpid() != parent, {"tank": [1, 2**70]}), "counting") == (True, {"tank": [1, 2**70]})

    def bad():
        raise SourceError("zfs list line 3: 2 columns, expected 27")

    with pytest.raises(SourceError, match="^zfs list line 3: 2 columns, expected 27$"):
        work.run(bad, "parsing zfs list")
    with pytest.raises(SourceError, match=r"^parsing zfs list: its child process died \(exit status 3\)$"):
        work.run(lambda: os._exit(3), "parsing zfs list")


def test_a_hung_child_is_killed_at_its_timeout_and_reported(tmp_path):
    pid_file = tmp_path / "pid"

    def hang():
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    started = time.monotonic()
    with pytest.raises(SourceError, match=r"^scanning block devices took longer than 0.5s in its child process "
                                          r"and was killed$"):
        ForkedWork(timeout=0.5).run(hang, "scanning block devices")
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left behind
        os.kill(int(pid_file.read_text()), 0)


def test_close_kills_a_running_child_and_refuses_more_work(tmp_path):
    work = ForkedWork(timeout=60)
    errors: list[str] = []
    running = tmp_path / "running"

    def run():
        try:
            work.run(lambda: (running.touch(), time.sleep(60)), "parsing zfs list")
        except SourceError as exc:
            errors.append(str(exc))

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(running.exists, "the child running its work")
    started = time.monotonic()
    work.close()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 5
    assert errors == ["parsing zfs list: its child process died (killed by signal 9)"]
    with pytest.raises(SourceError, match="exporter shutting down"):
        work.run(lambda: 1, "parsing zfs list")


def test_a_fed_child_reads_the_feed_and_a_feed_error_is_raised():
    work = ForkedWork(timeout=10)
    pieces = [b"tank@a\t1\n", b"tank@b\t2\nta", b"nk/x@c\t3\n"] * 10_000  # more than a pipe holds
    assert work.run(lambda fed: [line for line in fed][:4], "counting", feed=iter(pieces)) == \
        [b"tank@a\t1\n", b"tank@b\t2\n", b"tank/x@c\t3\n", b"tank@a\t1\n"]

    def failing():
        yield b"tank@a\t1\n"
        raise SourceError("zfs list -Hp -t snapshot -o name,creation timed out after 30s and was killed")

    with pytest.raises(SourceError, match="timed out after 30s"):
        work.run(lambda fed: sum(1 for _ in fed), "counting snapshots", feed=failing())


def test_a_child_holds_no_descriptor_of_the_parent_but_its_own():
    """A pipe another thread has open must see its end of file when that thread closes it, not
    when the child exits (subprocess.Popen waits so for exec; a command's reader for its output)."""

    read_end, write_end = os.pipe()
    try:
        open_in_child = ForkedWork(timeout=10).run(lambda: sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
                                                   "listing")
    finally:
        os.close(write_end)
        os.close(read_end)
    assert write_end not in open_in_child and read_end not in open_in_child
    assert len(open_in_child) <= 5  # stdin, stdout, stderr, its result pipe, the listing itself


def test_a_child_runs_at_a_lower_priority_than_the_exporter():
    assert ForkedWork(timeout=10).run(lambda: os.nice(0), "niceness") == min(19, os.nice(0) + CHILD_NICENESS)
