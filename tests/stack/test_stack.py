"""docker-compose.yml validates and mounts what the issue says; the Dockerfile's build steps work; the systemd unit runs the console script."""

import configparser
import glob
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import free_port, linux_tree, value
from tests.integration.exporter_process import ExporterProcess

ROOT = Path(__file__).resolve().parents[2]


def compose_config() -> dict:
    binary = shutil.which("docker-compose")
    if not binary:
        pytest.fail("docker-compose is not installed: run ./dev test, which installs Debian's docker-compose")
    check = subprocess.run([binary, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                           capture_output=True, text=True, cwd=ROOT)
    assert check.returncode == 0, check.stderr
    resolved = subprocess.run([binary, "-f", str(ROOT / "docker-compose.yml"), "config"],
                              capture_output=True, text=True, cwd=ROOT, check=True)
    return yaml.safe_load(resolved.stdout)


def test_compose_file_is_valid_and_complete():
    config = compose_config()
    services = config["services"]
    assert set(services) == {"zfsnas-exporter", "node-exporter", "prometheus", "alertmanager", "grafana"}
    exporter = services["zfsnas-exporter"]
    assert exporter["build"]["context"] == str(ROOT) and exporter["pid"] == "host"
    assert {"SYS_ADMIN", "SYS_PTRACE"} <= set(exporter["cap_add"])
    assert "--zfs.command-prefix=nsenter --target 1 --mount --" in exporter["command"]
    mounts = {v.split(":")[0]: v for v in exporter["volumes"]}
    for host in ("/proc", "/sys", "/dev", "/run/udev"):
        assert mounts[host].endswith(":ro"), f"{host} must be mounted read-only"
    node = services["node-exporter"]
    assert node["pid"] == "host" and node["network_mode"] == "host" and "--path.rootfs=/host" in node["command"]
    assert set(config["volumes"]) == {"prometheus-data", "alertmanager-data", "grafana-data"}
    for service, path in (("prometheus", "/prometheus"), ("alertmanager", "/alertmanager"),
                          ("grafana", "/var/lib/grafana")):
        assert any(v.split(":")[1] == path and v.split(":")[0] in config["volumes"]
                   for v in services[service]["volumes"]), service


def test_compose_mounts_exist_in_the_repo():
    for service in yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{source} is mounted but missing"


def test_grafana_provisioning():
    datasource = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/zfsnas.yml").read_text())
    assert datasource["datasources"][0]["type"] == "prometheus" and datasource["datasources"][0]["isDefault"]
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/zfsnas.yml").read_text())["providers"][0]
    assert provider["folder"] == "ZFS" and provider["options"]["path"] == "/etc/grafana/dashboards/zfsnas"
    grafana = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["grafana"]
    assert "./dashboards:/etc/grafana/dashboards/zfsnas:ro" in grafana["volumes"]


def dockerfile_steps() -> tuple[list[str], list[str], list[str]]:
    """(RUN commands, ENTRYPOINT, CMD) of the Dockerfile's final image and its build stage."""
    runs, entrypoint, cmd = [], [], []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("RUN "):
            runs.append(line[4:])
        elif line.startswith("ENTRYPOINT "):
            entrypoint = json.loads(line[len("ENTRYPOINT "):])
        elif line.startswith("CMD "):
            cmd = json.loads(line[4:])
    return runs, entrypoint, cmd


def test_dockerfile_build_steps(tmp_path):
    """Runs the Dockerfile's RUN steps on this machine with its paths moved under tmp_path, then the
    image's ENTRYPOINT and CMD against a fixture tree in place of the host's /proc and /sys."""
    runs, entrypoint, cmd = dockerfile_steps()
    assert len(runs) == 2 and entrypoint == ["/opt/zfsnas/bin/zfsnas-exporter"]
    src = tmp_path / "src"
    src.mkdir()
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", (ROOT / "Dockerfile").read_text(), re.M):
        for name in copied.split():
            target = src / name
            (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, target)
    python_dir = Path(sys.executable).parent
    for step in runs:
        step = step.replace("/wheels", str(tmp_path / "wheels")).replace("/opt/zfsnas", str(tmp_path / "opt/zfsnas"))
        step = re.sub(r"^pip ", f"{python_dir / 'python'} -m pip ", step)
        step = step.replace("python -m venv", "/usr/bin/python3 -m venv")
        result = subprocess.run(step, shell=True, cwd=src, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"RUN {step}\n{result.stderr[-2000:]}"
    assert not glob.glob(str(tmp_path / "wheels" / "*.whl")), "the wheel stays out of the final image"
    script = str(tmp_path / "opt/zfsnas/bin/zfsnas-exporter")
    tree = linux_tree("2.3.2")
    flags = [f.replace("/host/proc", str(tree / "proc")).replace("/host/sys", str(tree / "sys")) for f in cmd]
    assert "--zfs.command-prefix=nsenter --target 1 --mount --" in flags
    with ExporterProcess(free_port(), *flags, command=[script]) as exporter:
        exporter.wait_ready()
        assert value(exporter.get(), "zfs_arc_size_bytes") == 11_811_160_064


def test_systemd_unit_runs_the_console_script():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string((ROOT / "deploy/zfsnas-exporter.service").read_text())
    argv = shlex.split(unit["Service"]["ExecStart"])
    assert Path(argv[0]).name == "zfsnas-exporter"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'zfsnas-exporter = "zfsnas.cli:main"' in pyproject
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert unit["Service"]["Restart"] == "on-failure"
