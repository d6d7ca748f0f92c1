"""fio: run a job with JSON output and read its real JSON into plain figures.

Owns `parse_fio_json` (bandwidth in bytes/s, IOPS, completion-latency percentiles, bytes, for
every job and direction, except jobs named `prefill*`, which only lay out the data a read reads)
and starting/stopping the fio process: through the watchdog of fiowatch.py (fio dies with the
runner), with the environment of childenv.py (no secret), and only for a run whose
scratch dataset the guard cleared (a `guard.Cleared` is required). Knows nothing else of ZFS.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field

from .childenv import child_environment
from .fiowatch import RUN_VARIABLE
from .guard import Cleared

PATTERN_FIXED = (3, 34)


@dataclass(frozen=True)
class FioResult:
    version: str
    bw_bytes: float                 # summed over jobs and directions
    iops: float
    io_bytes: int
    runtime_seconds: float          # the longest job's runtime (ramp excluded)
    clat_percentiles_ns: dict[str, float] = field(default_factory=dict)   # "99.000000" -> ns, worst direction
    directions: dict[str, dict[str, float]] = field(default_factory=dict)


def parse_fio_json(text: str) -> FioResult:
    """Figures of fio's `--output-format=json`; fio may print warnings before the JSON."""
    start = text.find("{")
    if start < 0:
        raise ValueError("fio printed no JSON")
    data = json.loads(text[start:])
    jobs = data.get("jobs") or []
    if not jobs:
        raise ValueError("fio JSON has no jobs")
    bw = iops = 0.0
    io_bytes = 0
    runtime = 0.0
    clat: dict[str, float] = {}
    directions: dict[str, dict[str, float]] = {}
    for job in jobs:
        if str(job.get("jobname", "")).startswith("prefill"):  # writes the data a read job reads
            continue
        if job.get("error"):
            raise ValueError(f"fio job {job.get('jobname')} failed with error {job['error']}")
        for direction in ("read", "write", "trim"):
            d = job.get(direction) or {}
            if not d.get("io_bytes"):
                continue
            bw += d.get("bw_bytes", d.get("bw", 0) * 1024)
            iops += d.get("iops", 0.0)
            io_bytes += d["io_bytes"]
            runtime = max(runtime, d.get("runtime", 0) / 1000)
            entry = directions.setdefault(direction, {"bw_bytes": 0.0, "iops": 0.0, "io_bytes": 0})
            entry["bw_bytes"] += d.get("bw_bytes", 0)
            entry["iops"] += d.get("iops", 0.0)
            entry["io_bytes"] += d["io_bytes"]
            for key, ns in ((d.get("clat_ns") or {}).get("percentile") or {}).items():
                clat[key] = max(clat.get(key, 0.0), float(ns))
    return FioResult(data.get("fio version", ""), bw, iops, io_bytes, runtime, clat, directions)


def fio_version(fio: str = "fio") -> tuple[str, tuple[int, int] | None]:
    try:
        out = subprocess.run([fio, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "", None
    match = re.search(r"(\d+)\.(\d+)", out)
    return out, (int(match[1]), int(match[2])) if match else None


# `buffer_pattern=<value>` in a job file (or `--buffer_pattern=` on fio's command line). fio reads
# a file for every single-quoted part of the value: 'file', 0xdeadbeef'file', "text"'file'
# (checked against the real fio 3.33 in tests/bench/test_fio.py).
_PATTERN_OPTION = re.compile(r"^\s*(?:--)?buffer_pattern\s*=(?P<value>.*)$", re.MULTILINE)


def reads_pattern_file(job_text: str) -> bool:
    for match in _PATTERN_OPTION.finditer(job_text):
        value = re.sub(r'"[^"]*"', "", match["value"])  # a quoted string may hold a ' of its own
        if "'" in value:
            return True
    return False


def pattern_warning(version: tuple[int, int] | None, job_text: str) -> str | None:
    """fio before 3.34 repeats only 512 bytes of a buffer_pattern file: say so."""
    if version is not None and version < PATTERN_FIXED and reads_pattern_file(job_text):
        return (f"fio {version[0]}.{version[1]} repeats only the first 512 bytes of a buffer_pattern file "
                f"(fixed in 3.34): the data is far more compressible than the file")
    return None


RESTOP_SECONDS = 1.0


class FioProcess:
    """A running fio under its watchdog, in a session of its own; `stop()` ends it (and its
    workers) from a signal handler. `cleared` is the guard's proof for the scratch dataset."""

    def __init__(self, argv: list[str], env: dict[str, str], cleared: Cleared, run_id: str):
        if not isinstance(cleared, Cleared):
            raise TypeError("FioProcess needs the guard's Cleared for the scratch dataset")
        self._stopping = False
        # The write end of this pipe stays here: the watchdog reads EOF when this process dies.
        self._alive_r, self._alive_w = os.pipe()
        watchdog = [sys.executable, "-m", "zfsnas.bench.running.fiowatch", str(self._alive_r), *argv]
        try:
            self.proc = subprocess.Popen(watchdog, env=child_environment({**env, RUN_VARIABLE: run_id}),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                         start_new_session=True, pass_fds=(self._alive_r,))
        except BaseException:
            os.close(self._alive_w)
            raise
        finally:
            os.close(self._alive_r)

    def wait(self) -> tuple[int, str, str]:
        try:
            while True:
                try:
                    out, err = self.proc.communicate(timeout=RESTOP_SECONDS)
                    break
                except subprocess.TimeoutExpired:   # retrying loses no output
                    if self._stopping:
                        self._terminate()
        finally:
            os.close(self._alive_w)
        return self.proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def stop(self) -> None:
        """SIGTERM to the watchdog's group (fio stops its workers itself), and again every
        RESTOP_SECONDS while `wait` waits: a SIGTERM that reaches fio while it is still starting (its
        handler not yet there, its jobs not yet made) can be lost, and the run would go on to its end."""
        self._stopping = True
        self._terminate()

    def _terminate(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
