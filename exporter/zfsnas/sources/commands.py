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
from collections.abc import Sequence

from .model import SourceError


class CommandRunner:
    def __init__(self, prefix: Sequence[str] | str = (), timeout: float = 30.0):
        self.prefix = shlex.split(prefix) if isinstance(prefix, str) else list(prefix)
        self.timeout = timeout

    def run(self, argv: Sequence[str], timeout: float | None = None) -> str:
        """Run `argv` (after the prefix); return stdout or raise SourceError with one clear line."""
        full = [*self.prefix, *argv]
        limit = self.timeout if timeout is None else timeout
        try:
            proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, "LC_ALL": "C"})
        except FileNotFoundError:
            raise SourceError(f"{full[0]}: command not found") from None
        except OSError as exc:
            raise SourceError(f"{full[0]}: {exc.strerror or exc}") from None
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise SourceError(f"{shlex.join(argv)} timed out after {limit:g}s and was killed") from None
        if proc.returncode != 0:
            message = err.decode("utf-8", "replace").strip().splitlines()
            detail = message[-1] if message else "no error output"
            raise SourceError(f"{shlex.join(argv)} exited with status {proc.returncode}: {detail}")
        return out.decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
