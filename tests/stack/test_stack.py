"""docker-compose.yml validates, mounts what the issue says and is secure by default (checked
without an engine; test_engine.py runs it on a real one, building the Dockerfile); the systemd unit
runs the console script."""

import configparser
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose(*args: str, **env: str) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if not binary:
        pytest.fail("docker-compose is not installed: run ./dev test, which installs Debian's docker-compose")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GRAFANA_", "ZFSNAS_"))}
    return subprocess.run([binary, "-f", str(ROOT / "docker-compose.yml"), *args], capture_output=True,
                          text=True, cwd=ROOT, env={**environ, **env})


def compose_config(**env: str) -> dict:
    env.setdefault("GRAFANA_ADMIN_PASSWORD", "s3cret")
    check = compose("config", "-q", **env)
    assert check.returncode == 0, check.stderr
    return yaml.safe_load(compose("config", **env).stdout)


SMART_DISK_RULES = [f"b {major}:* r" for major in (8, *range(65, 72), *range(128, 136), 259)]


def test_compose_file_is_valid_and_complete():
    config = compose_config()
    services = config["services"]
    assert set(services) == {"zfsnas-exporter", "node-exporter", "prometheus", "alertmanager", "grafana"}
    exporter = services["zfsnas-exporter"]
    assert exporter["build"]["context"] == str(ROOT) and exporter["pid"] == "host"
    assert exporter["user"] == "root" and exporter["cap_drop"] == ["ALL"]
    # live ZFS through nsenter (SYS_ADMIN, SYS_CHROOT, SYS_PTRACE) and SMART (SYS_RAWIO, issue 37)
    assert sorted(exporter["cap_add"]) == ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE", "SYS_RAWIO"]
    # /dev/zfs read-write; the SCSI/SATA and NVMe disks read-only (smartctl), no other device
    assert exporter["device_cgroup_rules"] == ["c 10:249 rw", *SMART_DISK_RULES]
    assert "--zfs.command-prefix=nsenter --target 1 --mount --" in exporter["command"]
    assert exporter["volumes"] == ["/:/host:ro"]   # the host's root, read-only, no propagation (a private / works)
    assert {"--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.udev.data=/host/run/udev/data",
            "--bench.db=/host/var/lib/zfsnas/bench.sqlite"} <= set(exporter["command"])
    moved = compose_config(ZFSNAS_BENCH_DIR="/tank/bench")["services"]["zfsnas-exporter"]["command"]
    assert "--bench.db=/host/tank/bench/bench.sqlite" in moved
    node = services["node-exporter"]
    assert node["pid"] == "host" and node["network_mode"] == "host" and "--path.rootfs=/host" in node["command"]
    assert set(config["volumes"]) == {"prometheus-data", "alertmanager-data", "grafana-data"}
    for service, path in (("prometheus", "/prometheus"), ("alertmanager", "/alertmanager"),
                          ("grafana", "/var/lib/grafana")):
        assert any(v.split(":")[1] == path and v.split(":")[0] in config["volumes"]
                   for v in services[service]["volumes"]), service


def test_compose_creates_no_directory_on_the_host():
    """Docker creates the source of a bind mount that does not exist: every bind is of `/` (which
    every host has) or of a file of this checkout; data lives in named volumes."""
    config = compose_config(ZFSNAS_BENCH_DIR="/nowhere/bench")
    for name, service in config["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source in config["volumes"] or source == "/" or source.startswith(str(ROOT) + "/"), (name, volume)


def test_grafana_refuses_to_start_without_a_password():
    result = compose("config", "-q")
    assert result.returncode != 0 and "set GRAFANA_ADMIN_PASSWORD" in result.stderr, result.stderr
    grafana = compose_config(GRAFANA_ADMIN_PASSWORD="s3cret")["services"]["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret"
    assert "GRAFANA_ADMIN_PASSWORD:-" not in (ROOT / "docker-compose.yml").read_text()   # no fallback password


def listen_addresses(config: dict) -> dict[str, str]:
    return {name: next(f.split("=", 1)[1] for f in service.get("command", []) if f.startswith("--web.listen-address="))
            for name, service in config["services"].items() if name != "grafana"}


def test_ports_other_than_grafanas_are_on_loopback_unless_opened():
    assert listen_addresses(compose_config()) == {"zfsnas-exporter": "127.0.0.1:9923", "node-exporter": "127.0.0.1:9100",
                                                  "prometheus": "127.0.0.1:9090", "alertmanager": "127.0.0.1:9093"}
    opened = listen_addresses(compose_config(ZFSNAS_LISTEN_ADDRESS="0.0.0.0"))
    assert set(opened.values()) == {"0.0.0.0:9923", "0.0.0.0:9100", "0.0.0.0:9090", "0.0.0.0:9093"}
    for service in compose_config()["services"].values():   # every port is a listen address on the host
        assert service["network_mode"] == "host" and "ports" not in service


def test_prometheus_apis_off_and_retention_capped():
    command = compose_config()["services"]["prometheus"]["command"]
    assert not [f for f in command if f.startswith(("--web.enable-admin-api", "--web.enable-lifecycle"))]
    assert "--storage.tsdb.retention.time=400d" in command and "--storage.tsdb.retention.size=20GB" in command


def test_images_are_pinned_to_versions():
    images = {name: s["image"] for name, s in compose_config()["services"].items()}
    assert images.pop("zfsnas-exporter") == "zfsnas-exporter:local"   # built from this checkout
    for name, image in images.items():
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", image), f"{name}: {image} is not pinned to a version"
    assert re.search(r"^ARG BASE=python:\d+\.\d+\.\d+-slim-bookworm$", (ROOT / "Dockerfile").read_text(), re.M)


def test_every_service_has_a_health_check():
    for name, service in compose_config()["services"].items():
        assert service["healthcheck"]["test"][0] == "CMD", name


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


def test_systemd_unit_is_unprivileged_and_its_score_is_documented():
    unit = (ROOT / "deploy/zfsnas-exporter.service").read_text()
    settings = [tuple(line.split("=", 1)) for line in unit.splitlines() if "=" in line and not line.startswith("#")]
    assert not [k for k, _ in settings if k in ("SupplementaryGroups", "Group", "User")], "no groups: DynamicUser only"
    assert {("DeviceAllow", "/dev/zfs rw"), ("DevicePolicy", "closed")} <= set(settings)
    # one capability, for `zpool events` (the unit says why); no network socket of its own
    assert {("CapabilityBoundingSet", "CAP_SYS_ADMIN"), ("AmbientCapabilities", "CAP_SYS_ADMIN"),
            ("ReadOnlyPaths", "-/var/lib/zfsnas"), ("RestrictAddressFamilies", "AF_UNIX AF_NETLINK"),
            ("Requires", "zfsnas-exporter.socket"),
            # a filtered call fails, it does not kill: the forked scans' setpriority (tests/e2e/test_unit.py)
            ("SystemCallErrorNumber", "EPERM"),
            ("KillMode", "mixed")} <= set(settings)   # the exporter stops its own children (quietly)
    socket_unit = (ROOT / "deploy/zfsnas-exporter.socket").read_text()
    assert "\nListenStream=9923\n" in socket_unit and "\nWantedBy=sockets.target\n" in socket_unit
    binary = shutil.which("systemd-analyze")
    if not binary:
        pytest.skip("systemd-analyze is not installed")
    result = subprocess.run([binary, "security", "--offline=true", "--no-pager", str(ROOT / "deploy/zfsnas-exporter.service")],
                            capture_output=True, text=True)
    score = re.search(r"Overall exposure level for zfsnas-exporter.service: (\d+\.\d) (\w+)", result.stdout)
    assert score, result.stdout[-1000:] + result.stderr[-1000:]
    assert float(score[1]) <= 1.5 and score[2] == "OK", score[0]   # 1.5: the unit before issue 42
    assert f"exposure level **{score[1]} {score[2]}**" in (ROOT / "docs/stack.md").read_text(), \
        f"docs/stack.md must state the score systemd-analyze gives: {score[1]} {score[2]}"
