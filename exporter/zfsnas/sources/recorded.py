"""Recorded `zfs`/`zpool`/`sysctl` runs: written by `zfsnas-exporter capture`, answered by `--replay`.

Owns the two command runners that stand where `CommandRunner` stands (`Context.commands`, the
FreeBSD sysctl source), so capture and replay go through exactly the code the exporter runs:
- `RecordingRunner` runs each command for real (prefix, timeout, `LC_ALL=C` as usual) and keeps
  its exact argument list, stdout, stderr, exit status and duration;
- `ReplayRunner` answers each argument list from such a record, failing the way the live command
  failed (same `SourceError` text). Captures are a versioned contract: a command today's exporter
  runs that an older capture did not record is derived from what it did record where that is
  exact (a `zfs list`/`zpool list` with other `-o` columns: the columns it lacks read `-`, as ZFS
  prints a property that does not apply, so their metrics are absent), and otherwise answered
  with `NotRecorded`: that part of the capture is absent. Either is said once per capture.
And the on-disk form of a record set: `commands.json` (argument lists, exit status, stderr, seconds)
next to `commands/<n>.out` (stdout, byte for byte). Nothing here knows about archives or metrics.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path

from .commands import CommandRunner, Completed
from .model import NotRecorded, SourceError

log = logging.getLogger("zfsnas")

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
    """Answers commands from a record set; never starts a process. `said` holds the notes already
    logged (one set per capture, shared by its snapshots' runners)."""

    def __init__(self, records: Sequence[Completed], failures: Sequence[tuple[Sequence[str], str]] = (),
                 said: set[str] | None = None):
        super().__init__((), 0.0)
        self._records = {shlex.join(r.argv): r for r in records}
        self._failures = {shlex.join(argv): message for argv, message in failures}
        self._said = set() if said is None else said

    def complete(self, argv: Sequence[str], timeout: float | None = None,
                 max_output: int | None = None) -> Completed:
        key = shlex.join(argv)
        if key in self._failures:
            raise SourceError(self._failures[key])
        record = self._records.get(key)
        if record is not None:
            return record
        derived = derive_listing(tuple(argv), self.records)
        if derived is None:
            self._say(key, f"replay: this capture did not record `{key}`: what it feeds is served as absent "
                           "(its source's success 0)")
            raise NotRecorded(f"{key}: not recorded in this capture")
        record, source, missing = derived
        self._say(key, f"replay: `{key}` derived from the recorded `{shlex.join(source.argv)}`"
                       + (f" ({', '.join(missing)}: not in the capture, served as absent)" if missing else ""))
        return record

    @property
    def records(self) -> list[Completed]:
        """The successful and failed runs recorded (not those that could not run at all)."""
        return list(self._records.values())

    def _say(self, key: str, line: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.info("%s", line)


def _columns(argv: tuple[str, ...]) -> tuple[int, list[str]] | None:
    """Where the `-o` value of a `zfs list`/`zpool list -H` command line is, and its columns."""
    if argv[:1] not in (("zfs",), ("zpool",)) or argv[1:2] != ("list",) or "-o" not in argv[:-1]:
        return None
    if not any(a.startswith("-") and "H" in a and not a.startswith("--") for a in argv):
        return None  # tab-separated columns only (`-H`): a padded table cannot be cut apart exactly
    at = argv.index("-o") + 1
    return at, argv[at].split(",")


def derive_listing(argv: tuple[str, ...], records: Iterable[Completed]) -> tuple[Completed, Completed, list[str]] | None:
    """`argv` (a `zfs list`/`zpool list -H ... -o COLUMNS`) from a successful recorded run of the same
    command line with other columns: each row's columns picked by name, those the recording lacks
    as `-`. The recording must hold the first column (the name that keys every row). Returns the
    derived record, the one it came from and the columns it lacked; None when none qualifies."""
    wanted = _columns(argv)
    if wanted is None:
        return None
    at, columns = wanted
    best = None
    for record in records:
        found = _columns(record.argv)
        if (found is None or found[0] != at or record.returncode != 0 or record.argv[:at] != argv[:at]
                or record.argv[at + 1:] != argv[at + 1:] or columns[0] not in found[1]):
            continue
        have = sum(c in found[1] for c in columns)
        if best is None or have > best[0]:
            best = (have, record, found[1])
    if best is None:
        return None
    _, source, recorded = best
    index = {name: i for i, name in enumerate(recorded)}
    rows = []
    for line in _split(source.stdout):
        cells = line.split("\t")
        rows.append("\t".join(cells[index[c]] if c in index and index[c] < len(cells) else "-" for c in columns))
    stdout = "".join(row + "\n" for row in rows)
    missing = [c for c in columns if c not in index]
    return Completed(argv, 0, stdout, source.stderr, source.seconds), source, missing


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


def read_records(directory: Path, said: set[str] | None = None) -> ReplayRunner:
    """The runner for one recorded set (`said`: see ReplayRunner); a malformed index raises
    ValueError naming what is wrong."""
    index = directory / INDEX
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
        records = [Completed(tuple(e["argv"]), int(e["exit_status"]), _output(directory, e["stdout"]),
                             e.get("stderr", ""), float(e.get("seconds", 0.0)))
                   for e in data["commands"]]
        failures = [(e["argv"], e["error"]) for e in data.get("not_run", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{index.name}: {exc}") from None
    return ReplayRunner(records, failures, said)
