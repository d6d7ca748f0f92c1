"""Fork-and-pipe: `ForkedWork` runs the CPU-heavy part of a refresh (parsing and rendering 5,000
datasets, scanning 4,000 disks) in a forked child process and hands its result back to the calling
thread. In a thread of the exporter that work holds the GIL against the scrape: the scrape gets it
back only at the 5 ms switch interval after each of its file reads and socket writes, and shares it
with the refresh besides. A forked child starts in about a millisecond with everything already
imported, runs on the other core at a lower priority, and hands back its result (pickled) through a
pipe; it may be fed a command's output as it comes.

This module owns the child's life: the fork, what the child may touch, the pipes both ways, the
timeout, killing and reaping. It knows nothing of sources, collectors or refreshing: when to run
work is the caller's (a collector's refresh, `refresh.BackgroundRefresher`). The child runs only
pure parsing, rendering and file reading: never a `zfs`/`zpool` command (those stay with the shared
runner in the refresh thread), no lock that another thread of the exporter might have held when it
forked, and no import of a module not yet imported (another thread may have held its import lock).
See docs/performance.md, "Background work and the scrape".
"""

from __future__ import annotations

import gc
import io
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


try:
    _MAX_FD = os.sysconf("SC_OPEN_MAX")
except (AttributeError, ValueError, OSError):
    _MAX_FD = 65536


CHILD_NICENESS = 10


class ForkedWork:
    """Runs work in forked child processes, one `run` at a time per caller, each bounded by
    `timeout` seconds; `close()` kills what runs and refuses what comes (the collector that made it
    calls it when it stops). The work's result or exception comes back pickled; a child that hangs
    is killed at its timeout and one that dies is reported, both as a `SourceError`."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running: set[int] = set()
        self._closed = False

    def run(self, work: Callable[..., T], what: str, feed: Iterable[bytes] | None = None) -> T:
        """`work()`'s result, computed in a child process; `what` names it in errors ("parsing zfs list").
        With `feed`, the child runs `work(reader)`: `reader` is a binary file that yields the bytes
        of `feed` as this thread writes them (a command's output, passed on as it comes). An error
        raised by `feed` kills the child and is raised here."""
        from .sources.model import SourceError

        read_end, write_end = os.pipe()
        feed_read, feed_write = os.pipe() if feed is not None else (-1, -1)
        pid = self._start(work, what, write_end, feed_read, feed_write, read_end)
        os.close(write_end)
        if feed is not None:
            os.close(feed_read)
        outcome: str = "timeout"
        result: Any = None
        try:
            if feed is not None:
                _feed(feed_write, feed, self.timeout)
            outcome, result = _receive(read_end, self.timeout)
        except TimeoutError:  # the child stopped reading what it is fed, or took too long
            pass
        finally:
            os.close(read_end)
            status = self._end(pid, outcome)
        if outcome == "timeout":
            raise SourceError(f"{what} took longer than {self.timeout:g}s in its child process and was killed")
        if outcome == "died":
            raise SourceError(f"{what}: its child process died ({_describe(status)})")
        ok, value = result
        if not ok:
            raise value
        return value

    def _start(self, work: Callable[..., object], what: str, write_end: int, feed_read: int, *also_close: int) -> int:
        """Fork the child that runs `work` (given a reader of `feed_read` when that is a pipe) and
        writes to `write_end`; its pid. Once closed, no child: the pipes (`also_close` too) are closed and SourceError raised."""
        # here, not at start-up (only a forked refresh needs it), and before the fork: the child's is a lookup
        import pickle  # noqa: F401

        from .sources.model import SourceError

        job, keep = (work, (write_end,)) if feed_read < 0 else \
            ((lambda: work(os.fdopen(feed_read, "rb"))), (write_end, feed_read))
        with self._lock:
            if self._closed:
                for fd in (write_end, feed_read, *also_close):
                    if fd >= 0:
                        os.close(fd)
                raise SourceError(f"{what}: exporter shutting down")
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child's coverage is not collected
                _child(job, write_end, keep)
            self._running.add(pid)
        return pid

    def _end(self, pid: int, outcome: str) -> int:
        """The child's wait status, once it is killed (unless it finished) and reaped."""
        with self._lock:
            self._running.discard(pid)
        if outcome != "done":
            _kill(pid)
        return _reap(pid, wait=outcome == "done")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = list(self._running)
        for pid in running:
            _kill(pid)


def _child(work: Callable[[], object], write_end: int, keep: tuple[int, ...]) -> None:  # pragma: no cover
    """The child's whole life: run `work`, write (ok, result or exception) pickled, exit at once
    (no atexit handlers, no flushing of buffers copied from the parent)."""
    import pickle  # already imported by `ForkedWork._start` before the fork: a lookup, no import lock

    status = 0
    try:
        _close_inherited(keep)
        try:  # background work: the scheduler gives the scrape (and the NAS) the core first
            os.nice(CHILD_NICENESS)
        except OSError:
            pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        gc.disable()  # short-lived: refcounting frees its garbage, and a collection would copy pages
        try:
            result: tuple[bool, object] = (True, work())
        except Exception as exc:
            result = (False, exc)
        if result[0]:  # plain data: pickled straight into the pipe, never whole in memory
            with os.fdopen(write_end, "wb", buffering=1 << 16) as out:
                pickle.dump(result, out, pickle.HIGHEST_PROTOCOL)
            return
        try:
            data = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an exception that does not pickle: its text does
            data = pickle.dumps((False, RuntimeError(str(exc) if result[0] else str(result[1]))))
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view):]
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _close_inherited(keep: tuple[int, ...]) -> None:  # pragma: no cover - runs in the child
    """Close every descriptor but stdin/out/err and `keep`. Without this the child would hold
    whatever pipe another thread of the exporter had open when it forked: the write end of a
    command's output (whose reader then waits for the child to exit) or of the pipe through which
    `subprocess.Popen` learns that exec succeeded (and blocks, holding the command runner's turn)."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, _MAX_FD)


def _feed(fd: int, feed: Iterable[bytes], stall: float) -> None:
    """Write every piece of `feed` to the pipe `fd`, then close it; TimeoutError if the child reads
    nothing for `stall` seconds. A child that stops reading is no error here: its result says why."""
    try:
        _write_all(fd, feed, stall)
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def _write_all(fd: int, feed: Iterable[bytes], stall: float) -> None:
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    for piece in feed:
        view = memoryview(piece)
        while view:
            if not poller.poll(stall * 1000):
                raise TimeoutError
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue


def _receive(fd: int, timeout: float) -> tuple[str, Any]:
    """("done", the child's (ok, value)) unpickled from the pipe `fd` as it comes (a result of tens
    of MB is never held twice, as bytes and as objects), or ("died", None) when what came does not
    unpickle; TimeoutError when it has not all come within `timeout` seconds."""
    import pickle  # imported before the fork (`ForkedWork._start`)

    reader = _PipeReader(fd, time.monotonic() + timeout)
    try:
        return "done", pickle.load(io.BufferedReader(reader, 1 << 16))
    except (EOFError, pickle.UnpicklingError, ValueError, AttributeError):
        return "died", None


class _PipeReader(io.RawIOBase):
    """The child's end of the result pipe as a file, each read waiting no later than `deadline`
    (TimeoutError then)."""

    def __init__(self, fd: int, deadline: float):
        self.fd, self.deadline = fd, deadline
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN | select.POLLHUP)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if self.poller.poll(left * 1000):
                return os.readv(self.fd, [buffer])


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int, wait: bool) -> int:
    """The child's wait status. One that closed its pipe (`wait`) is exiting: waited for in one
    call. A killed one may be stuck in the kernel (a dead disk's sysfs read): looked at for at most
    2 s and then left behind."""
    if wait:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0
    deadline = time.monotonic() + 2
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done or time.monotonic() > deadline:
            return status
        time.sleep(0.001)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
