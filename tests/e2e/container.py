"""Host side of the guest's container step (2.3 flavour): what the guest needs to run the stack's
exporter container on live ZFS the way TrueNAS SCALE runs a custom app (Docker, started by systemd,
brings the compose file up), put on the 9p share under container/ (Docker and docker-compose are in
the guest image, tests/e2e/image.sh):

  exporter.tar   `docker save` of the exporter image tests/stack/images.sh builds from the repo's
                 Dockerfile (cached, keyed by the image ID)
  compose/       docker-compose.yml as it is in the checkout (and the Dockerfile its `build:` names),
                 brought up with `docker-compose up -d --no-build zfsnas-exporter`
  run.json       the image, the compose environment, and the exporter service of
                 docker-compose.yml as `docker run` arguments, exactly (any setting this conversion
                 does not know fails here), for the variants that prove two privileges are needed:
                 without the /dev/zfs device rule, as nobody

The guest side is `container_phase` in guest/scenario.py; tests/e2e/test_container.py reads what
it recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ZFSNAS_STACK_CACHE", "/var/cache/zfsnas-stack"))
IGNORED = {"build", "image", "restart", "healthcheck"}   # how the service is made and kept, not its privileges


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} e2e container: {msg}", file=sys.stderr, flush=True)


def exporter_image() -> tuple[str, Path]:
    """The exporter image (built or reused by tests/stack/images.sh) saved as a tar, cached by ID."""
    from tests.stack.engine import Engine, build_images, docker

    engine = Engine(CACHE / "dockerd-e2e.log")
    try:
        image = build_images(sys.executable)["ZFSNAS_EXPORTER_IMAGE"]
        image_id = docker("image", "inspect", "-f", "{{.Id}}", image).stdout.strip().split(":")[-1][:12]
        tar = CACHE / f"exporter-{image_id}.tar"
        if not tar.exists():
            for old in CACHE.glob("exporter-*.tar"):
                old.unlink()
            docker("save", "-o", str(tar.with_suffix(".tmp")), image)
            tar.with_suffix(".tmp").rename(tar)
        return image, tar
    finally:
        engine.stop()


def compose_service(name: str = "zfsnas-exporter") -> dict:
    env = {**os.environ, "GRAFANA_ADMIN_PASSWORD": "unused-here"}
    for key in [k for k in env if k.startswith("ZFSNAS_")]:
        del env[key]
    out = subprocess.run(["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    import yaml

    return yaml.safe_load(out)["services"][name]


def run_arguments(service: dict) -> list[str]:
    """`docker run` options for every setting of the compose service (its command follows the image)."""
    unknown = set(service) - IGNORED - {"network_mode", "user", "pid", "cap_drop", "cap_add", "device_cgroup_rules",
                                        "security_opt", "read_only", "tmpfs", "volumes", "command"}
    if unknown:
        raise SystemExit(f"e2e container: docker-compose.yml's exporter has settings this step does not carry: {unknown}")
    args = [f"--network={service['network_mode']}", f"--user={service['user']}", f"--pid={service['pid']}"]
    args += [f"--cap-drop={c}" for c in service.get("cap_drop", [])]
    args += [f"--cap-add={c}" for c in service.get("cap_add", [])]
    args += [f"--device-cgroup-rule={r}" for r in service.get("device_cgroup_rules", [])]
    args += [f"--security-opt={o}" for o in service.get("security_opt", [])]
    args += ["--read-only"] if service.get("read_only") else []
    args += [f"--tmpfs={t}" for t in service.get("tmpfs", [])]
    args += [f"--volume={v}" for v in service.get("volumes", [])]
    return args


def prepare(share: Path) -> float:
    """Fill share/container/; returns the seconds it took."""
    started = time.time()
    dest = share / "container"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    (dest / "compose").mkdir()
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy(ROOT / name, dest / "compose" / name)
    image, tar = exporter_image()
    try:
        os.link(tar, dest / "exporter.tar")
    except OSError:
        shutil.copy(tar, dest / "exporter.tar")
    service = compose_service()
    args = run_arguments(service)
    variants = {
        "no_device_rule": [a for a in args if not a.startswith("--device-cgroup-rule=")],
        "as_nobody": [a if not a.startswith("--user=") else "--user=nobody" for a in args],
    }
    # what a user sets (docs/stack.md): the Grafana password the file requires, and the image to use
    compose_env = {"ZFSNAS_EXPORTER_IMAGE": image, "GRAFANA_ADMIN_PASSWORD": "e2e-not-used"}
    (dest / "run.json").write_text(json.dumps({"image": image, "command": service["command"], "variants": variants,
                                               "compose_env": compose_env}, indent=1))
    seconds = time.time() - started
    log(f"share/container ready in {seconds:.0f} s ({image})")
    return seconds
