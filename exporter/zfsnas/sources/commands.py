"""Runs external commands (zfs, zpool, sysctl) safely: argument lists, no shell, a hard timeout.

A command that hangs is killed with its whole process group when its timeout passes. The
optional prefix (e.g. `nsenter --target 1 --mount --`) lets an exporter in a container run the
host's own userland, which must match the host's kernel module.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .model import SourceError


@dataclass(frozen=True)
class Completed:
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
    detail = message[-1] if message else "no error output"
    return SourceError(f"{shlex.join(argv)} exited with status {returncode}: {detail}")


class CommandRunner:
    def __init__(self, prefix: Sequence[str] | str = (), timeout: float = 30.0):
        self.prefix = shlex.split(prefix) if isinstance(prefix, str) else list(prefix)
        self.timeout = timeout
        self._running: set[subprocess.Popen] = set()
        self._closed = False

    def close(self) -> None:
        """Shutdown: kill every command still running and refuse new ones, so a hung `zpool` neither
        outlives the exporter nor holds up its exit."""
        self._closed = True
        for proc in list(self._running):
            _signal_group(proc)

    def _start(self, full: list[str], **kwargs) -> subprocess.Popen:
        if self._closed:
            raise SourceError("exporter shutting down: command not started")
        try:
            proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, "LC_ALL": "C"}, **kwargs)
        except FileNotFoundError:
            raise SourceError(f"{full[0]}: command not found") from None
        except OSError as exc:
            raise SourceError(f"{full[0]}: {exc.strerror or exc}") from None
        self._running.add(proc)
        return proc

    def run(self, argv: Sequence[str], timeout: float | None = None) -> str:
        """Run `argv` (after the prefix); return stdout or raise SourceError with one clear line."""
        return self.complete(argv, timeout).check()

    def complete(self, argv: Sequence[str], timeout: float | None = None) -> Completed:
        """Run `argv` to its end whatever its exit status; a command that cannot start or times out
        raises SourceError as `run` does."""
        full = [*self.prefix, *argv]
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        proc = self._start(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise SourceError(f"{shlex.join(argv)} timed out after {limit:g}s and was killed") from None
        finally:
            self._running.discard(proc)
        return Completed(tuple(argv), proc.returncode, out.decode("utf-8", "replace"),
                         err.decode("utf-8", "replace"), time.monotonic() - started)

    def lines(self, argv: Sequence[str], timeout: float | None = None) -> Iterator[str]:
        """Run `argv` and yield its stdout line by line (without the newline), for outputs too big
        to hold at once (50,000 snapshot names); same timeout and errors as `run`, raised at the end."""
        full = [*self.prefix, *argv]
        limit = self.timeout if timeout is None else timeout
        with tempfile.TemporaryFile() as err:  # a file, not a pipe: stderr can never block stdout
            proc = self._start(full, stdout=subprocess.PIPE, stderr=err)
            timed_out = threading.Event()

            def expire() -> None:
                timed_out.set()
                _signal_group(proc)

            timer = threading.Timer(limit, expire)
            timer.daemon = True
            timer.start()
            try:
                assert proc.stdout is not None
                for raw in proc.stdout:
                    yield raw.decode("utf-8", "replace").rstrip("\n")
                proc.wait()
            finally:
                self._running.discard(proc)
                timer.cancel()
                if proc.poll() is None:  # the caller stopped early
                    _signal_group(proc)
                    proc.wait()
                proc.stdout.close()
            if timed_out.is_set():
                raise SourceError(f"{shlex.join(argv)} timed out after {limit:g}s and was killed")
            if proc.returncode != 0:
                err.seek(0)
                raise command_failed(argv, proc.returncode, err.read().decode("utf-8", "replace"))


def _signal_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
