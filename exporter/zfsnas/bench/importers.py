"""Results measured elsewhere, turned into results of the store: CrystalDiskMark 5-8 text (saved or
copied on the client) and fio's JSON (`--output-format=json` or `json+`, from any machine).

Each input is read whole and checked before anything is stored: an unknown format, a truncated
file or a number that does not parse raises ImportError naming the line (or the fio job and
field), and the caller stores nothing. Every figure the input gives is kept, none is invented:
CrystalDiskMark 5/6 print no latency and no IOPS for sequential tests, so those stay empty.

Owns the mapping of those formats to configurations (identity.py gives the dataset's part) and
figures; the text formats themselves are crystaldiskmark.py's; nothing here writes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from ..sources.benchschema import ResultFigures
from . import crystaldiskmark
from .config import UNKNOWN, Configuration
from .identity import DatasetIdentity, configuration


class ImportFormatError(ValueError):
    """The input is not what the importer reads; the message names where."""


@dataclass(frozen=True)
class Imported:
    source: str                                   # "crystaldiskmark 8.0.4", "fio-3.33"
    results: list[tuple[Configuration, ResultFigures]]
    measured_at: float | None                     # epoch seconds, when the input says
    details: dict[str, Any]


def crystaldiskmark_results(data: bytes, matrix: str, identity: DatasetIdentity | None,
                            settings: list[tuple[str, str]], label: str | None = None) -> Imported:
    try:
        parsed = crystaldiskmark.parse(crystaldiskmark.decode(data))
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
        except ValueError:
            raise ImportFormatError(f"date {parsed.date!r} does not parse (expected YYYY/MM/DD H:MM:SS)") from None
    details = {"source": source, "date": parsed.date, "interval_seconds": parsed.interval_seconds,
               "measure_seconds": parsed.measure_seconds, **{k.lower(): v for k, v in parsed.other.items()}}
    return Imported(source, results, measured, details)


# --- fio ---------------------------------------------------------------------------------------------

def _number(job: str, path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImportFormatError(f"fio job {job!r}: {path} is {value!r}, not a number")
    return float(value)


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
        moved = _number(name, f"{direction}.io_bytes", d.get("io_bytes", 0))
        if not moved:
            continue
        bw += _number(name, f"{direction}.bw_bytes", d.get("bw_bytes", _number(name, f"{direction}.bw", d.get("bw", 0))
                                                                 * 1024))
        iops += _number(name, f"{direction}.iops", d.get("iops", 0))
        io_bytes += int(moved)
        runtime = max(runtime, _number(name, f"{direction}.runtime", d.get("runtime", 0)) / 1000)
        percentiles = (d.get("clat_ns") or {}).get("percentile") or {}
        for key, ns in percentiles.items():
            clat[key] = max(clat.get(key, 0.0), _number(name, f"{direction}.clat_ns.percentile.{key}", ns))
    if not io_bytes:
        raise ImportFormatError(f"fio job {name!r} moved no data (no read, write or trim io_bytes)")
    figures = ResultFigures(throughput_bytes_per_second=bw, iops=iops, bytes=io_bytes, duration_seconds=runtime,
                            clat_ns=dict(clat) if clat else None)
    return figures, str(job.get("error", 0))


def fio_results(text: str, matrix: str, identity: DatasetIdentity | None, settings: list[tuple[str, str]],
                label: str | None = None) -> Imported:
    start = text.find("{")
    if start < 0:
        raise ImportFormatError("not fio JSON: no '{' (run fio with --output-format=json or json+)")
    try:
        data = json.loads(text[start:])
    except json.JSONDecodeError as exc:
        line = text[:start].count("\n") + exc.lineno
        raise ImportFormatError(f"not fio JSON (truncated?): line {line}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        raise ImportFormatError("fio JSON without jobs (is it fio --output-format=json output?)")
    version = str(data.get("fio version") or UNKNOWN)
    global_options = data.get("global options") or {}
    results = []
    names: set[str] = set()
    for index, job in enumerate(data["jobs"], 1):
        if not isinstance(job, dict):
            raise ImportFormatError(f"fio JSON job {index} is not an object")
        name = str(job.get("jobname") or f"job{index}")
        if name in names:
            raise ImportFormatError(f"fio job {name!r} appears twice (group_reporting or distinct job names, please)")
        names.add(name)
        figures, error = _job_figures(job, name)
        if error not in ("0", ""):
            raise ImportFormatError(f"fio job {name!r} ended with error {error}: its figures are not a result")
        options = {**{str(k): str(v) for k, v in global_options.items()},
                   **{str(k): str(v) for k, v in (job.get("job options") or {}).items()}}
        data_keys = {"source": version, **{f"fio {k}": v for k, v in sorted(options.items())
                                           if k not in ("filename", "directory", "name")}}
        config = configuration(matrix, name, options.get("size", UNKNOWN), data_keys, identity, settings, label,
                               direct=options.get("direct", UNKNOWN))
        one = {"fio version": version, "global options": global_options, "jobs": [job]}
        results.append((config, dataclasses.replace(figures, fio_json=json.dumps(one, sort_keys=True),
                                                    details={"source": version})))
    measured = data.get("timestamp")
    return Imported(version, results, float(measured) if isinstance(measured, (int, float)) else None,
                    {"source": version, "time": str(data.get("time", ""))})
