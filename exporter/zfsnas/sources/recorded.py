"""Recorded `zfs`/`zpool`/`sysctl` runs: written by `zfsnas-exporter capture`, answered by `--replay`.

Owns the two command runners that stand where `CommandRunner` stands (`Context.commands`, the
FreeBSD sysctl source), so capture and replay go through exactly the code the exporter runs:
- `RecordingRunner` runs each command for real (prefix, timeout, `LC_ALL=C` as usual) and keeps
  its exact argument list, stdout, stderr, exit status and duration;
- `ReplayRunner` answers each argument list from such a record, failing the way the live command
  failed (same `SourceError` text), and says plainly when a command was never recorded.
And the on-disk form of a record set: `commands.json` (argument lists, exit status, stderr, seconds)
next to `commands/<n>.out` (stdout, byte for byte). Nothing here knows about archives or metrics.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path

from .commands import CommandRunner, Completed
from .model import SourceError

INDEX = "commands.json"
OUTPUTS = "commands"


class _WholeOutputRunner(CommandRunner):
    """`lines` and `chunks` over `complete`: a recorded output is kept whole anyway, so it is read
    whole; the streams of `CommandRunner.lines` and `chunks` are for the live exporter."""

    def lines(self, argv: Sequence[str], timeout: float | None = None,
              max_output: int | None = None) -> Iterator[str]:
        done = self.complete(argv, timeout)
        yield from _split(done.stdout)
        done.check()

    def chunks(self, argv: Sequence[str], timeout: float | None = None) -> Generator[bytes, None, None]:
        done = self.complete(argv, timeout)
        yield done.stdout.encode("utf-8", "surrogateescape")
        done.check()


class RecordingRunner(_WholeOutputRunner):
    """A `CommandRunner` that remembers every command it ran, in order (timeouts included)."""

    def __init__(self, prefix: Sequence[str] | str = (), timeout: float = 30.0, max_output: int | None = None):
        super().__init__(prefix, timeout, *(() if max_output is None else (max_output,)))
        self.records: list[Completed] = []
        self.failures: list[tuple[tuple[str, ...], str]] = []  # commands that could not run at all

    def complete(self, argv: Sequence[str], timeout: float | None = None,
                 max_output: int | None = None) -> Completed:
        try:
            done = super().complete(argv, timeout, max_output)
        except SourceError as exc:  # not found, timed out: replayed as the same error
            self.failures.append((tuple(argv), str(exc)))
            raise
        self.records.append(done)
        return done



class ReplayRunner(_WholeOutputRunner):
    """Answers commands from a record set; never starts a process."""

    def __init__(self, records: Sequence[Completed], failures: Sequence[tuple[Sequence[str], str]] = ()):
        super().__init__((), 0.0)
        self._records = {shlex.join(r.argv): r for r in records}
        self._failures = {shlex.join(argv): message for argv, message in failures}

    def complete(self, argv: Sequence[str], timeout: float | None = None,
                 max_output: int | None = None) -> Completed:
        key = shlex.join(argv)
        if key in self._failures:
            raise SourceError(self._failures[key])
        record = self._records.get(key)
        if record is None:
            raise SourceError(f"{key}: not recorded in this capture")
        return record



def _split(stdout: str) -> list[str]:
    """Lines as `CommandRunner.lines` yields them: split on newlines only, no trailing empty line."""
    lines = stdout.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def write_records(directory: Path, runner: RecordingRunner) -> None:
    (directory / OUTPUTS).mkdir(parents=True, exist_ok=True)
    entries = []
    for number, record in enumerate(runner.records):
        out = f"{OUTPUTS}/{number}.out"
        (directory / out).write_bytes(record.stdout.encode("utf-8", "surrogateescape"))  # names as the bytes ZFS printed
        entries.append({"argv": list(record.argv), "exit_status": record.returncode, "stdout": out,
                        "stderr": record.stderr, "seconds": round(record.seconds, 3)})
    failures = [{"argv": list(argv), "error": message} for argv, message in runner.failures]
    (directory / INDEX).write_text(json.dumps({"commands": entries, "not_run": failures}, indent=1,
                                                ensure_ascii=False) + "\n")


def _output(directory: Path, name: str) -> str:
    path = (directory / name).resolve()
    if directory.resolve() not in path.parents:
        raise ValueError(f"output {name!r} lies outside the snapshot")
    return path.read_bytes().decode("utf-8", "surrogateescape")


def read_records(directory: Path) -> ReplayRunner:
    """The runner for one recorded set; a malformed index raises ValueError naming what is wrong."""
    index = directory / INDEX
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
        records = [Completed(tuple(e["argv"]), int(e["exit_status"]), _output(directory, e["stdout"]),
                             e.get("stderr", ""), float(e.get("seconds", 0.0)))
                   for e in data["commands"]]
        failures = [(e["argv"], e["error"]) for e in data.get("not_run", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{index.name}: {exc}") from None
    return ReplayRunner(records, failures)
