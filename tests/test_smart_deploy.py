"""What SMART needs from the deployments (docs/disks.md#smart): the systemd drop-in and the compose
override grant exactly that, read-only; the shipped unit and compose file stay without it."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DROP_IN = ROOT / "deploy" / "zfsnas-exporter-smart.conf"


def settings(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#")]


def test_systemd_drop_in_grants_smart_read_only_and_its_score_is_documented(tmp_path):
    assert sorted(settings(DROP_IN)) == [
        ("AmbientCapabilities", "CAP_SYS_RAWIO CAP_SYS_ADMIN"), ("CapabilityBoundingSet", "CAP_SYS_RAWIO CAP_SYS_ADMIN"),
        ("DeviceAllow", "block-blkext r"), ("DeviceAllow", "block-sd r"), ("SupplementaryGroups", "disk")]
    # Not beside the unit: systemd-analyze (and systemd) would read a zfsnas-exporter.service.d/ there.
    assert not (ROOT / "deploy" / "zfsnas-exporter.service.d").exists()
    binary = shutil.which("systemd-analyze")
    if not binary:
        pytest.skip("systemd-analyze is not installed")
    units = tmp_path / "etc" / "systemd" / "system"
    (units / "zfsnas-exporter.service.d").mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "zfsnas-exporter.service", units)
    shutil.copy(DROP_IN, units / "zfsnas-exporter.service.d" / "smart.conf")
    result = subprocess.run([binary, "security", "--offline=true", f"--root={tmp_path}", "--no-pager",
                             "zfsnas-exporter.service"], capture_output=True, text=True)
    assert "CapabilityBoundingSet=~CAP_SYS_RAWIO" in result.stdout  # the drop-in was read
    score = re.search(r"Overall exposure level for zfsnas-exporter.service: (\d+\.\d) (\w+)", result.stdout)
    assert score and float(score[1]) <= 2.0 and score[2] == "OK", result.stdout[-1000:]
    assert f"rates the unit **{score[1]} {score[2]}**" in (ROOT / "docs" / "disks.md").read_text()


def test_the_stack_reads_smart_with_raw_io_and_read_only_disks():
    """SMART is on in docker-compose.yml (issue 37): SYS_RAWIO and the disks read-only, nothing else
    writable but /dev/zfs; the old override changes nothing, so its documented command still works."""
    binary = shutil.which("docker-compose")
    if not binary:
        pytest.skip("docker-compose is not installed")
    env = {**os.environ, "GRAFANA_ADMIN_PASSWORD": "x"}
    merged = {}
    for files in (["docker-compose.yml"], ["docker-compose.yml", "deploy/docker-compose.smart.yml"]):
        result = subprocess.run([binary, *(f"-f{ROOT / f}" for f in files), "config"],
                                capture_output=True, text=True, env=env, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        merged[len(files)] = yaml.safe_load(result.stdout)["services"]["zfsnas-exporter"]
    exporter = merged[1]
    # the same service (compose merges and sorts lists when it reads an override: compare them as sets)
    as_sets = [{k: sorted(map(str, v)) if isinstance(v, list) else v for k, v in m.items()} for m in merged.values()]
    assert as_sets[0] == as_sets[1]
    assert sorted(exporter["cap_add"]) == ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE", "SYS_RAWIO"]
    rules = exporter["device_cgroup_rules"]
    assert "c 10:249 rw" in rules and "b 8:* r" in rules and "b 259:* r" in rules
    assert all(rule == "c 10:249 rw" or re.fullmatch(r"b \d+:\* r", rule) for rule in rules)  # disks read-only
