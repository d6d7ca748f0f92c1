"""`pip install .` gives a working `zfsnas-exporter`: build the wheel, install it into a fresh venv, run it."""

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from tests.conftest import free_port, linux_tree, value
from tests.integration.exporter_process import ExporterProcess

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_installs_and_serves(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("zfsnas-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "zfsnas/cli.py" in names and not any(n.startswith("tests/") for n in names)
    venv.create(tmp_path / "venv", with_pip=True)
    subprocess.run([str(tmp_path / "venv/bin/python"), "-m", "pip", "install", "-q", str(wheel)],
                   check=True, capture_output=True)
    script = str(tmp_path / "venv/bin/zfsnas-exporter")
    version = subprocess.run([script, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("zfsnas-exporter ")
    root = linux_tree("2.3.2")
    with ExporterProcess(free_port(), f"--path.procfs={root / 'proc'}", f"--path.sysfs={root / 'sys'}",
                         command=[script]) as exporter:
        exporter.wait_ready()
        assert value(exporter.get(), "zfs_arc_size_bytes") == 11_811_160_064
