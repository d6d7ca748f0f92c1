"""Command-line plumbing shared by every `zfsnas-bench` command: range-checked numeric options,
`--set KEY=VALUE` labels, one-line usage errors, and writing an output file without ever
overwriting a database or (without --force) anything else.

Owns those checks only; the commands live in cli.py, answer_commands.py and client_commands.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..store.database import is_sqlite_file


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (what was wrong and where to read more), exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(2)


def _number(kind: str, check: Callable[[float], bool], convert: Callable[[str], float] = float) \
        -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value != value or not check(value):   # NaN is no number of anything
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}")
        return value
    parse.__name__ = kind    # argparse names the type in its message
    return parse


positive = _number("a number above 0", lambda v: 0 < v < float("inf"))
interval_seconds = _number("between 0.1 and 3600 seconds", lambda v: 0.1 <= v <= 3600)
positive_int = _number("a whole number above 0", lambda v: v > 0, int)
fraction = _number("between 0 and 1 (exclusive), e.g. 0.15", lambda v: 0 < v < 1)
weight = _number("between 0 and 1", lambda v: 0 <= v <= 1)


def key_value(text: str) -> tuple[str, str]:
    """`--set ram=16G`: a label name (letters, digits, `_ . : -`) and a value without a newline."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not value.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. ram=16G or client=win11")
    if not all(ch.isalnum() or ch in "_.:-" for ch in key) or "\n" in value or len(value) > 200:
        raise argparse.ArgumentTypeError(f"{text!r}: KEY takes letters, digits and _ . : -; VALUE one line")
    return key, value.strip()


MAX_NAME_CHARS = 256     # a name a user gives becomes a label (the exporter serves at most this)


def name_text(text: str) -> str:
    """`--label`, `--matrix`, `--workload`: one line of printable text (a line break would start a
    heading in the Markdown report, a tab a column in `list`), at most MAX_NAME_CHARS."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: empty")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: holds a control character (a line break, a tab)")
    if len(text) > MAX_NAME_CHARS:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}...: longer than {MAX_NAME_CHARS} characters")
    return text


class OutputError(Exception):
    pass


def check_output_file(path: str | Path, force: bool, protected: list[str | Path]) -> Path:
    """The file a report may be written to: never an SQLite database (--force or not) nor one of
    `protected` (the database being read); an existing file only with --force; its directory must
    exist and be writable. Raises OutputError in one line."""
    path = Path(path)
    for other in protected:
        try:
            if path.exists() and os.path.samefile(path, other):
                raise OutputError(f"{path} is the database being read: refusing to overwrite it")
        except OSError:
            pass
    if path.is_dir():
        raise OutputError(f"{path} is a directory: give a file name")
    if path.exists() and is_sqlite_file(path):
        raise OutputError(f"{path} is an SQLite database: refusing to overwrite it (--force does not apply)")
    if path.exists() and not force:
        raise OutputError(f"{path} exists: refusing to overwrite it (--force replaces it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{parent} does not exist: create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{parent} is not writable")
    return path


def write_output(path: Path, text: str) -> None:
    """Write `text` whole or not at all: a temporary file beside `path`, renamed over it. The file gets
    the mode of the one it replaces, else what the umask gives a new file (0644 under 022, like the
    charts beside it): mkstemp's 0600 would hide a report from the people it is for."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_chart_dir(directory: str | Path) -> Path:
    """Where charts go: a directory (created when missing), never an existing file."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path} exists and is not a directory: --png/--svg take a directory")
    if not path.exists() and not path.parent.is_dir():
        raise OutputError(f"{path.parent} does not exist: create it first")
    return path
