"""Results measured elsewhere, turned into results of the store: CrystalDiskMark 5-8 text (saved or
copied on the client) and fio's JSON (`--output-format=json` or `json+`, from any machine).

Each input is read whole and checked before anything is stored: an unknown format, a truncated
file or a number that does not parse raises ImportError naming the line (or the fio job and
field), and the caller stores nothing. Every figure the input gives is kept, none is invented:
CrystalDiskMark 5/6 print no latency and no IOPS for sequential tests, so those stay empty.

What a user brings is bounded before the work it would cost (`Limits`; each past its bound is one
line naming it and the flag that raises it): the bytes read (`read_input`: a FIFO, /dev/zero or
/dev/urandom end at the byte or time bound, never hang or fill memory), CrystalDiskMark's lines,
fio JSON's values (counted before it is parsed: one per 32 bytes of the byte bound) and nesting,
and the results one import stores. Values are range-checked as they enter: figures finite and not
negative, byte counts below 2^63, times within `schema.time_problem`'s window, names one
line of at most `MAX_NAME_CHARS`, a configuration within what the exporter reads
(`reader.MAX_CONFIG_CHARS`).

Owns the mapping of those formats to configurations (identity.py gives the dataset's part) and
figures; the text formats themselves are crystaldiskmark.py's; nothing here writes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...store.configuration import UNKNOWN, Configuration
from ...store.reader import MAX_CONFIG_CHARS, MAX_LABEL_CHARS
from ...store.schema import ResultFigures, number_problem, stored_time_problem, time_problem
from ..answering import crystaldiskmark
from .identity import DatasetIdentity, configuration

MAX_NAME_CHARS = MAX_LABEL_CHARS   # a job, matrix or label name: what the exporter serves as a label
MAX_OPTION_CHARS = 4096            # one fio option's name or value
BYTES_PER_JSON_VALUE = 32          # fio JSON may hold one value per this many bytes of --max-input-bytes
MAX_INTEGER = (1 << 63) - 1        # SQLite's INTEGER


class ImportFormatError(ValueError):
    """The input is not what the importer reads; the message names where."""


@dataclass(frozen=True)
class Limits:
    """What one import may bring (`zfsnas-bench import` flags)."""
    max_bytes: int                 # --max-input-bytes
    seconds: float = 30.0          # --read-timeout: reading the input (a FIFO, a slow mount)
    max_results: int = 1000        # --max-results: results one import stores
    max_lines: int = 10_000        # --max-lines: CrystalDiskMark text (a result has under 100)


DEFAULT_MAX_BYTES = {"crystaldiskmark": 1 << 20, "fio": 16 << 20}


def read_input(path: Path, limits: Limits) -> bytes:
    """The file's bytes, read without blocking (a FIFO, a device) and within `limits`' bytes and
    seconds; ImportFormatError in one line past either, or when it is a directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ImportFormatError(f"{path}: {exc.strerror or exc}") from None
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise ImportFormatError(f"{path} is a directory: give a file")
        data = bytearray()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + limits.seconds
        while True:
            try:
                chunk = os.read(fd, min(1 << 16, limits.max_bytes + 1 - len(data)))
            except BlockingIOError:        # a FIFO whose writer has not written yet
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ImportFormatError(f"{path}: not read to its end within {limits.seconds:g} s "
                                            f"(--read-timeout raises it)") from None
                poller.poll(min(left, 1.0) * 1000)
                continue
            except OSError as exc:
                raise ImportFormatError(f"{path}: {exc.strerror or exc}") from None
            if not chunk:
                return bytes(data)
            data += chunk
            if len(data) > limits.max_bytes:
                raise ImportFormatError(f"{path} holds more than {limits.max_bytes} bytes "
                                        f"(--max-input-bytes raises it)")
            if time.monotonic() > deadline:
                raise ImportFormatError(f"{path}: not read to its end within {limits.seconds:g} s "
                                        f"(--read-timeout raises it)")
    finally:
        os.close(fd)


def check_name(what: str, value: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name that reaches labels, tags and reports: one line of printable text, at most `limit`."""
    if len(value) > limit:
        raise ImportFormatError(f"{what} is {len(value)} characters long (at most {limit})")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ImportFormatError(f"{what} {value[:60]!r} holds a control character (a line break, a tab)")
    return value


def check_configurations(results: list[tuple[Configuration, ResultFigures]], limits: Limits) -> None:
    """What the exporter and the reports will read of each result, checked before any is stored."""
    if len(results) > limits.max_results:
        raise ImportFormatError(f"{len(results)} results in one import (at most {limits.max_results}; "
                                f"--max-results raises it)")
    for config, _figures in results:
        for name, value in config.labels.items():
            check_name(f"{config.workload[:60]!r}: {name}", value)
        if len(text := config.to_json()) > MAX_CONFIG_CHARS:
            raise ImportFormatError(f"{config.workload[:60]!r}: its configuration takes {len(text)} characters "
                                    f"(at most {MAX_CONFIG_CHARS}: too many or too long options)")


@dataclass(frozen=True)
class Imported:
    source: str                                   # "crystaldiskmark 8.0.4", "fio-3.33"
    results: list[tuple[Configuration, ResultFigures]]
    measured_at: float | None                     # epoch seconds, when the input says
    details: dict[str, Any]


def crystaldiskmark_results(data: bytes, matrix: str, identity: DatasetIdentity | None,
                            settings: list[tuple[str, str]], label: str | None = None,
                            limits: Limits | None = None) -> Imported:
    limits = limits or Limits(DEFAULT_MAX_BYTES["crystaldiskmark"])
    try:
        text = crystaldiskmark.decode(data)
        crystaldiskmark.check_size(text, limits.max_lines)
        parsed = crystaldiskmark.parse(text)
    except crystaldiskmark.CdmError as exc:
        raise ImportFormatError(f"not CrystalDiskMark 5-8 text: {exc}") from None
    source = f"crystaldiskmark {parsed.version}"
    data_keys = {"source": source, "test_size": parsed.test_size or UNKNOWN, "passes": parsed.passes or UNKNOWN}
    if parsed.profile:
        data_keys["profile"] = parsed.profile
    if parsed.mix_ratio:
        data_keys["mix"] = parsed.mix_ratio
    size = parsed.test_size.replace(" ", "") if parsed.test_size else UNKNOWN
    results = []
    for test in parsed.tests:
        config = configuration(matrix, test.workload, size, data_keys, identity, settings, label)
        figures = ResultFigures(throughput_bytes_per_second=None if test.mb_per_s is None else test.mb_per_s * 1e6,
                                iops=test.iops, latency_us=test.latency_us, details={"source": source})
        results.append((config, figures))
    measured = None
    if parsed.date:
        try:
            measured = time.mktime(time.strptime(parsed.date, "%Y/%m/%d %H:%M:%S"))   # the client's local time
        except (ValueError, OverflowError):
            raise ImportFormatError(f"date {parsed.date!r} does not parse (expected YYYY/MM/DD H:MM:SS)") from None
        _check_time(f"date {parsed.date!r}", measured)
    details = {"source": source, "date": parsed.date, "interval_seconds": parsed.interval_seconds,
               "measure_seconds": parsed.measure_seconds, **{k.lower(): v for k, v in parsed.other.items()}}
    check_configurations(results, limits)
    return Imported(source, results, measured, details)


def _check_time(what: str, value: float) -> None:
    if time_problem(value):
        when = time.strftime("%Y-%m-%d", time.gmtime(value)) if not stored_time_problem(value) else f"{value:g}"
        raise ImportFormatError(f"{what} is {when}: not a time a result can have (from 2000 to tomorrow)")


# --- fio ---------------------------------------------------------------------------------------------

def _number(job: str, path: str, value: Any, integer: bool = False) -> float:
    """A figure of fio's: a finite number, not negative (a byte count an integer below 2^63)."""
    problem = number_problem(value)
    if problem == "not_a_number":
        shown = f"an integer of {value.bit_length()} bits" if isinstance(value, int) and not isinstance(value, bool) \
            else f"{value!r:.60}"
        raise ImportFormatError(f"fio job {job!r}: {path} is {shown}, not a finite number")
    if problem == "negative":
        raise ImportFormatError(f"fio job {job!r}: {path} is {value!r}: it cannot be negative")
    if integer and (not isinstance(value, int) or value > MAX_INTEGER):
        raise ImportFormatError(f"fio job {job!r}: {path} is {value!r:.60}, not a byte count (a whole number below 2^63)")
    return value if integer else float(value)   # a byte count past 2^53 keeps its every unit


def _object(job: str, path: str, value: Any) -> dict[str, Any]:
    """A JSON object where fio prints one (absent: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ImportFormatError(f"fio job {job!r}: {path} is a {type(value).__name__}, not an object")
    return value


def _options(job: str, path: str, value: Any) -> dict[str, str]:
    """fio's options (names and values it prints as strings), each one line within MAX_OPTION_CHARS."""
    out = {}
    for key, option in _object(job, path, value).items():
        if isinstance(option, (dict, list)):
            raise ImportFormatError(f"fio job {job!r}: {path}.{key} is a {type(option).__name__}, not an option value")
        where = f"fio job {job!r}: {path}.{key[:60]}"
        out[check_name(where, str(key), MAX_OPTION_CHARS)] = check_name(where, str(option), MAX_OPTION_CHARS)
    return out


def _job_figures(job: dict[str, Any], name: str) -> tuple[ResultFigures, str]:
    bw = iops = 0.0
    io_bytes = 0
    runtime = 0.0
    clat: dict[str, float] = {}
    for direction in ("read", "write", "trim"):
        d = job.get(direction)
        if d is None:
            continue
        if not isinstance(d, dict):
            raise ImportFormatError(f"fio job {name!r}: {direction} is not an object")
        moved = _number(name, f"{direction}.io_bytes", d.get("io_bytes", 0), integer=True)
        if not moved:
            continue
        bw += _number(name, f"{direction}.bw_bytes", d.get("bw_bytes", _number(name, f"{direction}.bw", d.get("bw", 0))
                                                                 * 1024))
        iops += _number(name, f"{direction}.iops", d.get("iops", 0))
        io_bytes += int(moved)
        runtime = max(runtime, _number(name, f"{direction}.runtime", d.get("runtime", 0)) / 1000)
        percentiles = _object(name, f"{direction}.clat_ns.percentile",
                              _object(name, f"{direction}.clat_ns", d.get("clat_ns")).get("percentile"))
        for key, ns in percentiles.items():
            key = check_name(f"fio job {name!r}: {direction}.clat_ns.percentile key", str(key), 32)
            clat[key] = max(clat.get(key, 0.0), _number(name, f"{direction}.clat_ns.percentile.{key}", ns))
    if not io_bytes:
        raise ImportFormatError(f"fio job {name!r} moved no data (no read, write or trim io_bytes)")
    if io_bytes > MAX_INTEGER:
        raise ImportFormatError(f"fio job {name!r}: io_bytes add up to {io_bytes}, past 2^63")
    figures = ResultFigures(throughput_bytes_per_second=bw, iops=iops, bytes=io_bytes, duration_seconds=runtime,
                            clat_ns=dict(clat) if clat else None)
    return figures, str(job.get("error", 0))


def _no_constant(name: str) -> Any:
    raise ImportFormatError(f"fio JSON holds {name}, which fio never prints (and JSON has no such number)")


def load_fio_json(text: str, limits: Limits) -> Any:
    """fio's JSON object, its values counted before it is parsed (one per BYTES_PER_JSON_VALUE bytes
    of the byte bound: their memory, not the text's, is what grows), nesting within Python's."""
    start = text.find("{")
    if start < 0:
        raise ImportFormatError("not fio JSON: no '{' (run fio with --output-format=json or json+)")
    values = text.count(",", start) + text.count("{", start) + text.count("[", start)
    if values > (most := limits.max_bytes // BYTES_PER_JSON_VALUE):
        raise ImportFormatError(f"fio JSON of about {values} values (at most {most}: one per {BYTES_PER_JSON_VALUE} "
                                f"bytes of --max-input-bytes, which raises it)")
    try:
        return json.loads(text[start:], parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        line = text[:start].count("\n") + exc.lineno
        raise ImportFormatError(f"not fio JSON (truncated?): line {line}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ImportFormatError("fio JSON nested deeper than Python reads (fio nests a few levels)") from None
    except ValueError as exc:    # an integer of more digits than Python converts
        raise ImportFormatError(f"not fio JSON: {str(exc).splitlines()[0][:120]}") from None


def fio_results(text: str, matrix: str, identity: DatasetIdentity | None, settings: list[tuple[str, str]],
                label: str | None = None, limits: Limits | None = None) -> Imported:
    limits = limits or Limits(DEFAULT_MAX_BYTES["fio"])
    data = load_fio_json(text, limits)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        raise ImportFormatError("fio JSON without jobs (is it fio --output-format=json output?)")
    if len(data["jobs"]) > limits.max_results:
        raise ImportFormatError(f"fio JSON of {len(data['jobs'])} jobs (at most {limits.max_results} results in one "
                                f"import; --max-results raises it)")
    version = check_name("fio version", str(data.get("fio version") or UNKNOWN))
    global_options = _options("(global)", "global options", data.get("global options"))
    results = []
    names: set[str] = set()
    for index, job in enumerate(data["jobs"], 1):
        if not isinstance(job, dict):
            raise ImportFormatError(f"fio JSON job {index} is not an object")
        if isinstance(job.get("jobname"), (dict, list)):
            raise ImportFormatError(f"fio JSON job {index}: jobname is a {type(job['jobname']).__name__}")
        name = check_name(f"fio job {index}'s name", str(job.get("jobname") or f"job{index}"))
        if name in names:
            raise ImportFormatError(f"fio job {name!r} appears twice (group_reporting or distinct job names, please)")
        names.add(name)
        figures, error = _job_figures(job, name)
        if error not in ("0", ""):
            raise ImportFormatError(f"fio job {name!r} ended with error {error[:40]}: its figures are not a result")
        options = {**global_options, **_options(name, "job options", job.get("job options"))}
        data_keys = {"source": version, **{f"fio {k}": v for k, v in sorted(options.items())
                                           if k not in ("filename", "directory", "name")}}
        config = configuration(matrix, name, options.get("size", UNKNOWN), data_keys, identity, settings, label,
                               direct=options.get("direct", UNKNOWN))
        one = {"fio version": version, "global options": global_options, "jobs": [job]}
        results.append((config, dataclasses.replace(figures, fio_json=json.dumps(one, sort_keys=True),
                                                    details={"source": version})))
    check_configurations(results, limits)
    measured = data.get("timestamp")
    if measured is not None:
        if number_problem(measured) or isinstance(measured, bool):
            raise ImportFormatError(f"fio JSON timestamp {measured!r:.60} is not a number of seconds")
        _check_time("fio JSON timestamp", float(measured))
    return Imported(version, results, None if measured is None else float(measured),
                    {"source": version, "time": check_name("fio JSON time", str(data.get("time", "")))})
