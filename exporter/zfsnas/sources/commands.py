"""Runs external commands (zfs, zpool, sysctl) safely: argument lists, no shell, hard limits.

Every command runs in its own process group with stdin closed, and is bounded three ways:
- time: at its timeout the whole process group is killed and our end of its pipes closed, so
  not even a leftover process that keeps the pipe open (or a child that escaped the group) can
  make us wait; once the command itself has exited we wait at most `EOF_GRACE` for the pipe;
- output: `run` reads at most `max_output` bytes (default `--zfs.command-max-output`; a command
  printing more is killed and its source fails with one line saying which limit to raise);
  `lines` and `chunks` stream (whoever reads them bounds what they keep) and `lines` caps each
  line at `MAX_LINE_BYTES`;
- error text: stderr is a pipe drained as it comes, of which only the last `MAX_STDERR` bytes are
  kept, for the one-line error: gigabytes of it cost neither memory nor disk.
A long-lived command (`zpool events -f`, through `follow`) has no timeout: it runs until it ends,
its `stop` event is set or the runner is closed, and it never takes the one-at-a-time turn below
(it holds no pool lock: it waits for the kernel's next event).
The optional prefix (e.g. `nsenter --target 1 --mount --`) lets an exporter in a container run
the host's own userland, which must match the host's kernel module.

One runner is shared by every collector, and it owns two rules of its own:
- one `zfs`/`zpool` command at a time, whichever collector (or refresh thread) asks: they take the
  pool configuration lock, and a NAS busy with a `zfs list` of thousands of snapshots should not
  get a `zpool iostat` on top. A command's timeout starts when its turn comes. Other commands
  (FreeBSD's `sysctl`, read on the scrape path) never wait behind them;
- its lifetime: `close()` kills what runs and refuses what comes; whoever created the runner (the
  exporter, at shutdown) calls it, once. A collector that stops never closes it for the others.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, NamedTuple

from .model import Explained, SourceError

if TYPE_CHECKING:
    import subprocess

# subprocess and shlex are imported by the first command, not at start-up: on Linux the
# kstat collectors run none, and the refreshers that do run off the scrape path (docs/performance.md).

DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
MAX_STDERR = 4096
EOF_GRACE = 1.0
REAP_GRACE = 2.0    # seconds to collect the status of a command known to have exited (another thread may be reaping it)
_CHUNK = 65536
ONE_AT_A_TIME = ("zfs", "zpool")  # programs the runner runs one at a time (see the module docstring)


# A NamedTuple, not a frozen dataclass: cheaper to make at start-up (see sources/model.py).
class Completed(NamedTuple):
    """One finished command: what `zfsnas-exporter capture` records and `--replay` answers with."""

    argv: tuple[str, ...]         # without the prefix
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def check(self) -> str:
        """stdout, or the SourceError `run` raises for a non-zero exit status."""
        if self.returncode != 0:
            raise command_failed(self.argv, self.returncode, self.stderr)
        return self.stdout


def command_failed(argv: Sequence[str], returncode: int, stderr: str) -> SourceError:
    message = stderr.strip().splitlines()
    detail = message[-1][:500] if message else "no error output"
    return SourceError(f"{_show(argv)} exited with status {returncode}: {detail}")


class _Exit:
    """How a command ended, filled in by `_chunks` for `complete`."""

    __slots__ = ("returncode", "stderr")

    def __init__(self) -> None:
        self.returncode = 0
        self.stderr = ""


class CommandRunner:
    """Runs commands for every collector; `one_at_a_time` names the programs (argv[0], before the
    prefix) that never run concurrently."""

    def __init__(self, prefix: Sequence[str] | str = (), timeout: float = 30.0,
                 max_output: int = DEFAULT_MAX_OUTPUT, one_at_a_time: Collection[str] = ONE_AT_A_TIME):
        self.prefix = _split(prefix) if isinstance(prefix, str) else list(prefix)
        self.timeout = timeout
        self.max_output = max_output
        self.one_at_a_time = frozenset(one_at_a_time)
        self._turn_lock = threading.Lock()   # held for the whole run of a one-at-a-time command
        self._state_lock = threading.Lock()  # guards _running and _closed: close() races starts
        self._running: set[subprocess.Popen] = set()
        self._closed = False
        self._announced: frozenset[str] = frozenset()

    @property
    def closed(self) -> bool:
        return self._closed

    def unavailable(self, programs: Collection[str]) -> dict[str, str]:
        """Which of `programs` cannot start here, and why: each one not on PATH, or all of them when
        the prefix's own program is missing. With a prefix the programs run elsewhere (the host's,
        through nsenter), so only the prefix is checked."""
        if self.prefix:
            return {} if _found(self.prefix[0]) else {p: f"{self.prefix[0]}: command not found" for p in programs}
        return {p: f"{p}: command not found" for p in programs if not _found(p)}

    def announce(self, unavailable: Collection[str]) -> None:
        """These programs' absence was said (the start-up line): failing to start one raises
        `Explained`, which its source logs at debug only."""
        self._announced = frozenset(self.prefix[:1] if self.prefix and unavailable else unavailable)

    def close(self) -> None:
        """Shutdown: kill every command still running and refuse new ones (a command waiting for its
        turn gives up too), so a hung `zpool` neither outlives the exporter nor holds up its exit."""
        with self._state_lock:
            self._closed = True
            running = list(self._running)
        for proc in running:
            _kill_group(proc)

    def run(self, argv: Sequence[str], timeout: float | None = None, max_output: int | None = None) -> str:
        """Run `argv` (after the prefix); return stdout or raise SourceError with one clear line."""
        return self.complete(argv, timeout, max_output).check()

    def complete(self, argv: Sequence[str], timeout: float | None = None,
                 max_output: int | None = None) -> Completed:
        """Run `argv` to its end whatever its exit status (what capture records and replay answers);
        a command that cannot start, times out or prints too much raises SourceError as `run` does."""
        limit = self.max_output if max_output is None else max_output
        started = time.monotonic()
        out = bytearray()
        status = _Exit()
        with closing(self._chunks(argv, timeout, status)) as chunks:
            for chunk in chunks:
                out += chunk
                if len(out) > limit:
                    raise SourceError(f"{_show(argv)} printed more than {limit} bytes (its output limit; "
                                      "--zfs.command-max-output raises it) and was killed")
        text = out.decode("utf-8", "surrogateescape")  # non-UTF-8 names reach the renderer, which escapes and counts them
        del out
        return Completed(tuple(argv), status.returncode, text, status.stderr, time.monotonic() - started)

    def lines(self, argv: Sequence[str], timeout: float | None = None,
              max_output: int | None = None) -> Iterator[str]:
        """Run `argv` and yield its stdout line by line (without the newline), for outputs too big
        to hold at once (a million snapshot names). A line longer than MAX_LINE_BYTES is cut there;
        `max_output` (default: none) bounds the total. Same timeout and errors as `run`, raised at the end."""
        with closing(self._chunks(argv, timeout)) as chunks:
            for line in split_lines(_bounded(chunks, argv, max_output), MAX_LINE_BYTES):
                yield line[:MAX_LINE_BYTES].decode("utf-8", "surrogateescape")

    def follow(self, argv: Sequence[str], stop: threading.Event) -> Iterator[str]:
        """Run a long-lived `argv` and yield its stdout line by line (each cut at MAX_LINE_BYTES)
        until it exits or `stop` is set (then it is killed); no timeout, no turn. A non-zero exit
        status raises SourceError at the end."""
        with closing(self._stream(argv, None, None, stop)) as chunks:
            for line in split_lines(chunks, MAX_LINE_BYTES):
                yield line[:MAX_LINE_BYTES].decode("utf-8", "surrogateescape")

    def chunks(self, argv: Sequence[str], timeout: float | None = None) -> Generator[bytes, None, None]:
        """Run `argv` and yield its stdout as it comes, in pieces of up to 64 KiB, for a reader that
        splits and bounds it itself (a parse child fed through a pipe). Same timeout and errors as
        `run`, raised at the end; closing the generator early kills the command."""
        return self._chunks(argv, timeout)

    @contextmanager
    def _turn(self, argv: Sequence[str]) -> Iterator[None]:
        """Wait for this command's turn (only `one_at_a_time` programs wait) and hold it until it ends."""
        if argv and argv[0] in self.one_at_a_time:
            with self._turn_lock:
                yield
        else:
            yield

    def _start(self, full: list[str]) -> subprocess.Popen:
        import subprocess

        with self._state_lock:
            if self._closed:  # the exporter's "shutting down" line says it
                raise Explained("exporter shutting down: command not started")
            try:
                proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True, env={**os.environ, "LC_ALL": "C"})
            except FileNotFoundError:
                error = Explained if full[0] in self._announced else SourceError
                raise error(f"{full[0]}: command not found") from None
            except OSError as exc:
                raise SourceError(f"{full[0]}: {exc.strerror or exc}") from None
            self._running.add(proc)
        return proc

    def _chunks(self, argv: Sequence[str], timeout: float | None,
                status: _Exit | None = None) -> Generator[bytes, None, None]:
        """The command's stdout as it comes. The command is killed and reaped whenever this ends,
        early or not; a timeout raises SourceError after the last chunk, and so does a non-zero exit
        status unless `status` is given to receive it (with the stderr tail)."""
        with self._turn(argv):
            yield from self._stream(argv, timeout, status)

    def _stream(self, argv: Sequence[str], timeout: float | None, status: _Exit | None,
                stop: threading.Event | None = None) -> Generator[bytes, None, None]:
        """With `stop` (a long-lived command) there is no deadline: it runs until it exits or `stop` is set."""
        limit = float("inf") if stop is not None else self.timeout if timeout is None else timeout
        proc = self._start([*self.prefix, *argv])
        pipes = _Pipes(proc)
        try:
            timed_out = yield from _drain(proc, pipes, time.monotonic() + limit, stop)
        finally:
            with self._state_lock:
                self._running.discard(proc)
            pipes.close()
            _kill_group(proc)
        if stop is not None and stop.is_set():
            return  # stopped on purpose: how it ended says nothing
        if timed_out:
            raise SourceError(f"{_show(argv)} timed out after {limit:g}s and was killed")
        _ended(argv, proc.returncode, pipes.tail, status)


class _Pipes:
    """A running command's stdout and stderr, both drained as they come: neither pipe can fill and
    block the other. Of stderr only the last MAX_STDERR bytes are kept (`tail`)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        self.poller = select.poll()
        for fd in (self.out_fd, err_fd):
            os.set_blocking(fd, False)
            self.poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.open_fds = {self.out_fd, err_fd}
        self.tail = b""

    def read(self, wait: float) -> Iterator[bytes]:
        """What stdout has within `wait` seconds, in chunks; stderr goes to `tail`."""
        for fd, _ in self.poller.poll(wait * 1000):
            try:
                chunk = os.read(fd, _CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                self.poller.unregister(fd)
                self.open_fds.discard(fd)
            elif fd == self.out_fd:
                yield chunk
            else:
                self.tail = (self.tail + chunk)[-MAX_STDERR:]

    def close(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()


def _drain(proc: subprocess.Popen, pipes: _Pipes, deadline: float,
           stop: threading.Event | None) -> Generator[bytes, None, bool]:
    """Yield the command's stdout until both pipes end and it exits, `deadline` passes, `stop` is
    set, or it exited EOF_GRACE ago while something else holds its pipes; True if it timed out."""
    exited_at = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            return True
        if not pipes.open_fds:  # end of both: the command gets the rest of its time to exit
            return not _wait_exit(proc, deadline if stop is None else now + 5 * EOF_GRACE)
        if stop is not None and stop.is_set():
            return False
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > EOF_GRACE:
            return False  # the command is done; whoever still holds its pipes is not waited for
        yield from pipes.read(min(deadline - now, 0.2))


def _ended(argv: Sequence[str], returncode: int, tail: bytes, status: _Exit | None) -> None:
    """A non-zero exit status raises SourceError with the stderr tail, unless `status` is given to receive both."""
    if returncode != 0:
        stderr = tail.decode("utf-8", "replace")
        if status is None:
            raise command_failed(argv, returncode, stderr)
        status.stderr = stderr
    if status is not None:
        status.returncode = returncode


def split_lines(chunks: Iterable[bytes], max_line: int) -> Iterator[bytes]:
    """The lines of a stream of chunks, without their newlines, holding at most `max_line` + 1
    bytes of any one: a longer line is yielded cut to `max_line` + 1 bytes (so the reader can tell
    it was cut, and drop or shorten it) and the rest of it skipped. A last line without a newline
    is yielded too."""
    pending = bytearray()
    skipping = False  # inside an over-long line, until its newline
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not skipping:
                    pending += chunk[start:start + max_line + 1 - len(pending)]
                    if len(pending) > max_line:
                        yield bytes(pending)
                        pending.clear()
                        skipping = True
                break
            if not skipping:
                if pending:
                    pending += chunk[start:min(end, start + max_line + 1 - len(pending))]
                    yield bytes(pending)
                    pending.clear()
                else:
                    yield chunk[start:min(end, start + max_line + 1)]
            skipping = False
            start = end + 1
    if pending and not skipping:
        yield bytes(pending)


def _bounded(chunks: Iterable[bytes], argv: Sequence[str], max_output: int | None) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if max_output is not None and total > max_output:
            raise SourceError(f"{_show(argv)} printed more than {max_output} bytes and was killed")
        yield chunk


def _wait_exit(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for the command to exit until `deadline`; True if it did. A pidfd wakes us the moment it
    exits (Popen.wait with a timeout polls in sleeps of up to 50 ms, which a runner of many short
    commands pays every time)."""
    import subprocess

    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel, FreeBSD) or already reaped
        pidfd = None
    try:
        if pidfd is not None:
            waiter = select.poll()
            waiter.register(pidfd, select.POLLIN)
            if not waiter.poll(max(0.0, deadline - time.monotonic()) * 1000):
                return False
            # It has exited: its status comes through wait(), not poll(), which answers None while
            # another thread holds Popen's reaping lock in its own wait (close() killing it). Seen:
            # a command killed at shutdown reported as timed out.
            proc.wait(timeout=max(REAP_GRACE, deadline - time.monotonic()))
            return True
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _found(program: str) -> bool:
    """Whether `program` would start: a path that is executable, or a name on PATH (as execvp looks)."""
    if "/" in program:
        return os.access(program, os.X_OK)
    return any(os.access(os.path.join(folder or ".", program), os.X_OK)
               for folder in os.environ.get("PATH", os.defpath).split(os.pathsep))


def _split(prefix: str) -> list[str]:
    if not prefix:
        return []
    import shlex

    return shlex.split(prefix)


def _show(argv: Sequence[str]) -> str:
    import shlex

    text = shlex.join(argv)
    return text if len(text) <= 200 else text[:200] + "..."


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the command's whole process group (whatever it started), then reap it, briefly:
    a process stuck in the kernel is left to subprocess' own later reaping rather than waited for."""
    import subprocess

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
