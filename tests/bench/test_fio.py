"""fio: real fio (Debian package) runs our job files on a temporary directory; its JSON is parsed."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zfsnas.bench.running.fio import (
    FioProcess,
    fio_version,
    parse_fio_json,
    pattern_warning,
    reads_pattern_file,
)
from zfsnas.bench.running.guard import Prop, check_scratch
from zfsnas.bench.running.planner import fio_time, has_prefill

JOBS = Path(__file__).parents[2] / "benchmark-jobs"
pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (./dev test installs it)")


def run_job(tmp_path, job, size=8 << 20, runtime=1.0, compress=50, section=None):
    """fio on a job file as the planner runs it (one section when given)."""
    out = tmp_path / f"{job}-{section}.json"
    env = {**os.environ, "ZFSNAS_FILE": str(tmp_path / "fio.dat"), "ZFSNAS_SIZE": str(size),
           "ZFSNAS_RUNTIME": fio_time(runtime), "ZFSNAS_RAMP": "0s", "ZFSNAS_COMPRESS": str(compress),
           "ZFSNAS_DIRECT": "0", "ZFSNAS_IOENGINE": "libaio"}
    sections = [f"--section={section}"] if section else []
    subprocess.run(["fio", "--output-format=json", *sections, f"--output={out}", str(JOBS / f"{job}.fio")], env=env,
                   check=True, timeout=60, capture_output=True)
    return out.read_text()


def test_size_based_write_parsed(tmp_path):
    text = run_job(tmp_path, "write-size", size=8 << 20)
    result = parse_fio_json(text)
    raw = json.loads(text)["jobs"][0]["write"]
    assert result.io_bytes == 8 << 20 == raw["io_bytes"]
    assert result.bw_bytes == raw["bw_bytes"] > 0
    assert result.iops == pytest.approx(raw["iops"])
    assert result.version.startswith("fio-3.")
    assert set(result.directions) == {"write"}
    assert float(result.clat_percentiles_ns["99.000000"]) == raw["clat_ns"]["percentile"]["99.000000"]
    assert (tmp_path / "fio.dat").stat().st_size == 8 << 20


def test_time_based_read_parsed(tmp_path):
    run_job(tmp_path, "cdm-rnd4k-q1t1-read", size=4 << 20, section="prefill")
    result = parse_fio_json(run_job(tmp_path, "cdm-rnd4k-q1t1-read", size=4 << 20, runtime=1,
                                    section="cdm-rnd4k-q1t1-read"))
    assert set(result.directions) == {"read"}
    assert 0.9 <= result.runtime_seconds <= 3
    assert result.io_bytes > 0 and result.iops > 0


def test_written_data_has_the_stated_compressibility(tmp_path):
    import zlib

    run_job(tmp_path, "write-size", size=4 << 20, compress=50)
    data = (tmp_path / "fio.dat").read_bytes()
    ratio = len(data) / len(zlib.compress(data, 1))
    assert 1.5 < ratio < 2.6      # about half compressible, not zeros (ratio in the hundreds)


def test_warnings_before_json_and_failed_jobs():
    assert parse_fio_json('fio: warning\n{"fio version": "fio-3.33", "jobs": [{"jobname": "a", "error": 0, '
                          '"write": {"io_bytes": 10, "bw_bytes": 5, "iops": 1.0, "runtime": 2000}}]}').bw_bytes == 5
    with pytest.raises(ValueError, match="error 5"):
        parse_fio_json('{"jobs": [{"jobname": "a", "error": 5}]}')
    with pytest.raises(ValueError, match="no JSON"):
        parse_fio_json("fio: engine libaio not loadable")


# buffer_pattern values; fio reads the file for the single-quoted part. Some forms fio refuses.
PATTERN_FORMS = ["buffer_pattern='{f}'", "buffer_pattern ='{f}'", "\tbuffer_pattern='{f}'",
                 "buffer_pattern=0xdeadbeef'{f}'", "buffer_pattern=\"abc\"'{f}'", "buffer_pattern='${{PATTERN}}'",
                 "buffer_pattern=\"{f}\"", "buffer_pattern=0xdeadbeef", "buffer_pattern=<{f}", "buffer_pattern={f}",
                 "buffer_pattern= '{f}'", "buffer_pattern='{f}'0xaa"]


def fio_with_pattern(tmp_path, line) -> bytes | None:
    """The bytes the real fio writes with this buffer_pattern line; None if fio refuses it."""
    out = tmp_path / "out.dat"
    out.unlink(missing_ok=True)
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={out}\nsize=64k\nbs=64k\nrw=write\n{line}\n")
    done = subprocess.run(["fio", "--output=/dev/null", str(tmp_path / "j.fio")], capture_output=True, timeout=60,
                          env={**os.environ, "PATTERN": str(tmp_path / "pattern.bin")})
    return out.read_bytes() if done.returncode == 0 and out.exists() else None


def test_buffer_pattern_warning_for_every_form_the_real_fio_accepts(tmp_path):
    """A 4 KiB pattern file whose second 512 bytes differ from its first: fio 3.33 repeats only
    the first 512 bytes of it. The warning fires exactly for the forms the installed fio reads a
    file for; forms it refuses never reach a run."""
    version = fio_version()[1]
    assert version is not None
    pattern = bytes(range(256)) * 2 + bytes(255 - b for b in range(256)) * 2 + os.urandom(3072)
    (tmp_path / "pattern.bin").write_bytes(pattern)
    read, refused = [], []
    for form in PATTERN_FORMS:
        line = form.format(f=tmp_path / "pattern.bin")
        data = fio_with_pattern(tmp_path, line)
        if data is None:
            refused.append(form)
            continue
        read_file = pattern[:64] in data
        if read_file:
            read.append(form)
            if version < (3, 34):
                assert data[512:1024] == data[:512] != pattern[512:1024]   # the defect the warning is about
        assert reads_pattern_file(f"[j]\n{line}\n") == read_file, form
        assert (pattern_warning(version, f"[j]\n{line}\n") is not None) == (read_file and version < (3, 34)), form
    if version < (3, 34):  # what fio 3.33 (Debian 12) does with each form
        assert read == PATTERN_FORMS[:6]
        assert refused == PATTERN_FORMS[8:]


def test_buffer_pattern_warning_versions():
    job = "[a]\nbuffer_pattern='/srv/fits/sample.fits'\n"
    assert "512 bytes" in pattern_warning((3, 33), job)
    assert pattern_warning((3, 34), job) is None
    assert pattern_warning((3, 33), "[a]\nbuffer_compress_percentage=50\n") is None
    assert pattern_warning((3, 33), "[a]\n; buffer_pattern='/x'\nbuffer_pattern=\"it's\"\n") is None


@pytest.mark.parametrize("job", sorted(p.stem for p in JOBS.glob("*.fio")))
def test_every_shipped_job_runs_in_its_direction(tmp_path, job):
    direction = "read" if job.endswith("read") else "write"
    # Reads, and CrystalDiskMark's writes, lay their file out in a prefill step of its own.
    assert has_prefill(JOBS / f"{job}.fio") == (direction == "read" or job.startswith("cdm-"))
    if has_prefill(JOBS / f"{job}.fio"):
        prefill = json.loads(run_job(tmp_path, job, size=4 << 20, section="prefill"))["jobs"]
        assert [(j["jobname"], j["write"]["io_bytes"]) for j in prefill] == [("prefill", 4 << 20)]
        assert (tmp_path / "fio.dat").stat().st_size == 4 << 20
        section = job
    else:
        section = None
    text = run_job(tmp_path, job, size=4 << 20, runtime=0.3, section=section)
    result = parse_fio_json(text)
    assert [j["jobname"] for j in json.loads(text)["jobs"]] == [job]  # the measured step runs nothing else
    assert set(result.directions) == {direction} and result.io_bytes > 0
    if job != "write-size":
        # time based: at least its 300 ms, and it ends (a last I/O may take seconds on a busy machine:
        # 2.011 s seen at a load of 18, so the bound is generous; a job that never ends hits run_job's timeout)
        assert 0.25 <= result.runtime_seconds <= 60


CLEARED = check_scratch("tank/scratch", {"type": Prop("filesystem", "-"), "org.zfsnas:scratch": Prop("init-1", "local")})


def _live_fio(marker: str) -> list[int]:
    """Pids of live fio processes (main and workers) whose environment holds `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "comm").read_text().strip() != "fio" or \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return pids


def test_fio_under_its_watchdog_answers_like_fio(tmp_path):
    proc = FioProcess(["fio", "--output-format=json", "--name=w", f"--filename={tmp_path / 'f'}", "--size=1M",
                       "--rw=write"], {}, CLEARED, "run-ok")
    code, out, _err = proc.wait()
    assert code == 0 and parse_fio_json(out).io_bytes == 1 << 20
    code, _out, err = FioProcess(["fio", "--name=bad", "--rw=sideways"], {}, CLEARED, "run-bad").wait()
    assert code == 1 and "sideways" in err


def test_fio_needs_the_guards_proof():
    with pytest.raises(TypeError, match="Cleared"):
        FioProcess(["fio", "--version"], {}, "tank/scratch", "run-x")   # type: ignore[arg-type]


def test_the_runner_gone_means_fio_and_its_workers_gone(tmp_path):
    """The watchdog reads EOF when the runner's end of the pipe closes (as when the runner dies):
    fio's main process and its setsid() job workers are all killed."""
    proc = FioProcess(["fio", "--name=long", f"--filename={tmp_path / 'f'}", "--size=4M", "--rw=write",
                       "--time_based", "--runtime=60", "--numjobs=2"], {}, CLEARED, "run-gone")
    try:
        deadline = time.monotonic() + 10
        while len(_live_fio("ZFSNAS_BENCH_RUN=run-gone")) < 3:     # fio and 2 workers
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.close(proc._alive_w)
        assert proc.proc.wait(timeout=5) == 137
        deadline = time.monotonic() + 5
        while _live_fio("ZFSNAS_BENCH_RUN=run-gone") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _live_fio("ZFSNAS_BENCH_RUN=run-gone") == []
    finally:
        proc.stop()
        proc.proc.communicate()


def test_stop_says_it_again_until_fio_ends(tmp_path):
    """A SIGTERM that reaches fio while it is still starting can be lost (no handler yet, no jobs to
    end): stop() sends it again every RESTOP_SECONDS while `wait` waits. The stand-in fio lets the
    first SIGTERM pass, as a starting fio can, and ends on the second; it gives up by itself after
    20 s (a run that went on to its end)."""
    ready = tmp_path / "ready"
    standin = tmp_path / "fio.py"
    standin.write_text(
        "import signal, sys, time\n"
        "terms = []\n"
        "def term(*_):\n"
        "    terms.append(time.monotonic())\n"
        "    if len(terms) == 2:\n"
        "        print(f'terms={len(terms)}', flush=True)\n"
        "        sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, term)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "deadline = time.monotonic() + 20\n"
        "while time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print(f'terms={len(terms)}', flush=True)\n")
    proc = FioProcess([sys.executable, str(standin)], {}, CLEARED, "run-restop")
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < deadline, "the stand-in never started"
        time.sleep(0.02)
    started = time.monotonic()
    proc.stop()
    code, out, _err = proc.wait()
    assert (code, out.strip()) == (0, "terms=2")
    assert time.monotonic() - started < 10
