"""fio: real fio (Debian package) runs our job files on a temporary directory; its JSON is parsed."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from zfsnas.bench.fio import fio_version, parse_fio_json, pattern_warning
from zfsnas.bench.planner import fio_time

JOBS = Path(__file__).parents[2] / "benchmark-jobs"
pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (./dev test installs it)")


def run_job(tmp_path, job, size=8 << 20, runtime=1.0, compress=50):
    out = tmp_path / f"{job}.json"
    env = {**os.environ, "ZFSNAS_FILE": str(tmp_path / "fio.dat"), "ZFSNAS_SIZE": str(size),
           "ZFSNAS_RUNTIME": fio_time(runtime), "ZFSNAS_RAMP": "0s", "ZFSNAS_COMPRESS": str(compress),
           "ZFSNAS_DIRECT": "0"}
    subprocess.run(["fio", "--output-format=json", f"--output={out}", str(JOBS / f"{job}.fio")], env=env,
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
    result = parse_fio_json(run_job(tmp_path, "cdm-rnd4k-q1t1-read", size=4 << 20, runtime=1))
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


def test_buffer_pattern_warning():
    assert fio_version()[1] is not None
    job = "[a]\nbuffer_pattern='</srv/fits/sample.fits'\n"
    assert "512 bytes" in pattern_warning((3, 33), job)
    assert pattern_warning((3, 34), job) is None
    assert pattern_warning((3, 33), "[a]\nbuffer_compress_percentage=50\n") is None


@pytest.mark.parametrize("job", sorted(p.stem for p in JOBS.glob("*.fio")))
def test_every_shipped_job_runs_in_its_direction(tmp_path, job):
    text = run_job(tmp_path, job, size=4 << 20, runtime=0.3)
    result = parse_fio_json(text)
    direction = "read" if job.endswith("read") else "write"
    assert set(result.directions) == {direction} and result.io_bytes > 0
    if direction == "read":  # the data was written first by the unmeasured prefill job
        prefill = next(j for j in json.loads(text)["jobs"] if j["jobname"] == "prefill")
        assert prefill["write"]["io_bytes"] == 4 << 20
    if job != "write-size":
        assert 0.25 <= result.runtime_seconds <= 2      # time based: 300 ms, not 0 and not forever
