"""`pip install .` gives a working `zfsnas-bench` that finds its shipped jobs, matrices and the alert
thresholds `compare` judges by."""

import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_jobs_and_matrices(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("zfsnas-*.whl"))
    venv.create(tmp_path / "venv", with_pip=True)
    subprocess.run([str(tmp_path / "venv/bin/python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    out = subprocess.run([str(tmp_path / "venv/bin/zfsnas-bench"), "plan", "smoke", "--dataset", "tank/scratch",
                          "--db", str(tmp_path / "db")], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    jobs = tmp_path / "venv/share/zfsnas/benchmark-jobs"
    assert f"{jobs}/write-size.fio" in out.stdout and out.stdout.count("zfs create") == 4
    assert (jobs / "matrices/fits-copy.toml").exists()
    # compare's regression threshold is the alert's, read from the shipped alerts/thresholds.toml
    found = subprocess.run([str(tmp_path / "venv/bin/python"), "-c",
                            "from zfsnas.bench.answering.compare import thresholds_path, max_drop; "
                            "print(thresholds_path()); print(max_drop())"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert found.stdout.split() == [str(tmp_path / "venv/share/zfsnas/alerts/thresholds.toml"), "0.15"], found.stderr
