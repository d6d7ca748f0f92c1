"""docker-compose.yml brought up for real on a Docker engine, checked through the daemons' own APIs.

Images come from tests/stack/images.sh (Debian's prometheus, alertmanager and node_exporter in a
debootstrap base, the exporter from the repo's Dockerfile on that base): no registry is reachable
here. Grafana is left out: its image cannot be had here (its provisioning is checked in
test_stack.py). What runs is the compose file itself, with only the image variables, the benchmark
directory and Grafana's password set, on the default ports and the shipped configuration:
the example Alertmanager receiver (127.0.0.1:9099) is served by the test's webhook.

The exporter reads this host's /proc, /sys and a udev database put at /run/udev when the host has
none (removed afterwards); there is no ZFS here, so the bench store carries the alert.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import value
from tests.integration.prometheus import PrometheusClient
from tests.integration.test_stack import GiB, Webhook, store_result
from tests.stack.engine import Compose, Engine, build_images, docker
from tests.stack.test_stack import SMART_DISK_RULES

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ["zfsnas-exporter", "node-exporter", "prometheus", "alertmanager"]
PORTS = {"zfsnas-exporter": 9923, "node-exporter": 9100, "prometheus": 9090, "alertmanager": 9093}
UDEV = Path("/run/udev")
MAKE_SHARED = ["mount", "--make-shared", "/"]   # docs/stack.md#a-private-root-mount says this very command


def example_receiver() -> tuple[str, int]:
    """Host and port of the example webhook in deploy/alertmanager/alertmanager.yml."""
    config = yaml.safe_load((ROOT / "deploy/alertmanager/alertmanager.yml").read_text())
    url = urllib.parse.urlsplit(config["receivers"][0]["webhook_configs"][0]["url"])
    return url.hostname, url.port


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def http(method: str, url: str, body: dict | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def listeners() -> dict[int, set[str]]:
    """Listening TCP sockets of this host (the services share its network): port -> addresses."""
    found: dict[int, set[str]] = {}
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state != "0A":  # LISTEN
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))  # kernel order per 32-bit word
            found.setdefault(int(port, 16), set()).add(socket.inet_ntop(
                socket.AF_INET if size == 4 else socket.AF_INET6, words))
    return found


def fake_udev(tmp: Path) -> Path | None:
    """A udev database for the first disk of /sys/block, at /run/udev, when the host has none."""
    if UDEV.exists():
        return None
    disk = next(d for d in sorted(Path("/sys/block").iterdir()) if not d.name.startswith(("loop", "ram", "zram")))
    major_minor = (disk / "dev").read_text().strip()
    (UDEV / "data").mkdir(parents=True)
    (UDEV / "data" / f"b{major_minor}").write_text(
        "E:ID_SERIAL=ZFSNAS_STACK_TEST_DISK\nE:ID_SERIAL_SHORT=STACKTEST1\nE:ID_MODEL=STACK_TEST\n")
    return disk


def root_propagation() -> str:
    return subprocess.run(["findmnt", "-n", "-o", "PROPAGATION", "/"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("engine")
    if os.geteuid() != 0:
        pytest.fail("the stack test runs the compose file as root does (host PID namespace, /proc): run as root")
    host, receiver_port = example_receiver()
    busy = [p for p in (*PORTS.values(), receiver_port) if port_taken(p)]
    assert not busy, f"ports {busy} are in use on 127.0.0.1: the stack listens on its default ports"
    # node-exporter mounts / with rslave propagation, which Docker accepts only from a shared or
    # slave mount; systemd makes / shared at boot, this machine (no systemd) leaves it private:
    # the one command docs/stack.md gives for such hosts (the exporter's own mount needs none).
    propagation = root_propagation()
    if propagation == "private":
        subprocess.run(MAKE_SHARED, check=True)
    engine = Engine(tmp / "dockerd.log")
    compose = None
    udev_disk = None
    try:
        started = time.monotonic()
        images = build_images(sys.executable)
        built = time.monotonic() - started
        bench = tmp / "bench"
        bench.mkdir()
        now = time.time()
        for n, throughput in enumerate((1.00 * GiB, 1.04 * GiB, 0.98 * GiB, 0.70 * GiB)):
            store_result(bench / "bench.sqlite", throughput, now - 3600 * (4 - n))   # the last one regressed
        udev_disk = fake_udev(tmp)
        webhook = Webhook(receiver_port)
        compose = Compose(f"zfsnastest{os.getpid()}",
                          {**images, "ZFSNAS_BENCH_DIR": str(bench), "GRAFANA_ADMIN_PASSWORD": "unused-here"})
        compose("up", "-d", *SERVICES)
        prom = PrometheusClient("http://127.0.0.1:9090")
        yield {"compose": compose, "prom": prom, "webhook": webhook, "udev_disk": udev_disk, "tmp": tmp,
               "images": images, "build_seconds": built}
    finally:
        if compose:
            logs = subprocess_logs(compose)
            (tmp / "compose.log").write_text(logs)
            compose("down", "-v", "--remove-orphans")
        if udev_disk:
            shutil.rmtree(UDEV)
        engine.stop()
        if propagation == "private":
            subprocess.run(["mount", "--make-private", "/"], check=True)


def subprocess_logs(compose: Compose) -> str:
    try:
        return compose("logs", "--no-color", timeout=60)
    except AssertionError as exc:
        return str(exc)


def wait_for(prom: PrometheusClient, expr: str, timeout: float = 90) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if result := prom.query(expr):
                return result
        except OSError:
            pass  # Prometheus is still starting
        time.sleep(1)
    raise AssertionError(f"{expr} returned nothing within {timeout}s")


def test_targets_up_and_rules_loaded(stack):
    prom = stack["prom"]
    wait_for(prom, 'up{job="zfsnas"} == 1')
    wait_for(prom, 'up{job="node"} == 1')
    wait_for(prom, 'up{job="prometheus"} == 1')   # itself, for ZfsRemoteWriteStalled
    targets = prom.api("targets")["activeTargets"]
    assert sorted((t["labels"]["job"], t["scrapeUrl"], t["health"]) for t in targets) == [
        ("node", "http://127.0.0.1:9100/metrics", "up"), ("prometheus", "http://127.0.0.1:9090/metrics", "up"),
        ("zfsnas", "http://127.0.0.1:9923/metrics", "up")]
    shipped = yaml.safe_load((ROOT / "alerts/zfsnas.rules.yml").read_text())["groups"]
    deadline = time.monotonic() + 60   # one evaluation (15 s) gives every rule its health
    while True:
        loaded = prom.api("rules")["groups"]
        if all(r["health"] != "unknown" for g in loaded for r in g["rules"]):
            break
        assert time.monotonic() < deadline, "rules not evaluated within 60 s"
        time.sleep(1)
    assert sorted(g["name"] for g in loaded) == sorted(g["name"] for g in shipped)
    assert sum(len(g["rules"]) for g in loaded) == sum(len(g["rules"]) for g in shipped)
    assert not [r["name"] for g in loaded for r in g["rules"] if r["health"] != "ok"]
    # node_exporter in the host's PID namespace with / at /host: this host's boot time.
    assert float(prom.query('node_boot_time_seconds{instance="nas"}')[0]["value"][1]) == pytest.approx(
        time.time() - float(Path("/proc/uptime").read_text().split()[0]), abs=5)


def test_exporter_reads_the_hosts_proc_sys_and_udev(stack):
    disk = stack["udev_disk"]
    if disk is None:
        pytest.skip("this host has its own udev database: the fixture disk is not written")
    with urllib.request.urlopen("http://127.0.0.1:9923/metrics", timeout=10) as response:
        before = int(Path("/proc/diskstats").read_text().split(f" {disk.name} ")[1].split()[0])
        text = response.read().decode()
    after = int(Path("/proc/diskstats").read_text().split(f" {disk.name} ")[1].split()[0])
    reads = value(text, "zfs_disk_reads_total", device=disk.name)
    assert after - 1000 <= reads <= after and reads >= before - 1000   # /host/proc/diskstats, this host's
    assert value(text, "zfs_disk_identity_source", source="udev") == 1   # /host/run/udev/data
    info = [line for line in text.splitlines() if line.startswith(f'zfs_disk_info{{device="{disk.name}"')]
    assert len(info) == 1 and 'serial="STACKTEST1"' in info[0] and 'model="STACK_TEST"' in info[0], info
    rotational = (disk / "queue/rotational").read_text().strip()   # /host/sys
    assert f'rotational="{rotational}"' in info[0]
    assert value(text, "zfs_exporter_source_success", source="block_devices") == 1


def test_example_receiver_gets_the_regression_alert(stack):
    """The store's last run is 30 % below the median of the three before: Prometheus fires
    ZfsBenchThroughputRegression, Alertmanager routes it with the shipped timings (group_wait 30 s)
    to the example receiver. The exporter read the WAL store through a read-only mount."""
    prom, webhook = stack["prom"], stack["webhook"]
    wait_for(prom, "zfs_bench_throughput_bytes_per_second")
    assert prom.scalar('zfs_exporter_source_success{source="bench_db"}') == 1
    deadline = time.monotonic() + 120
    while not (fired := [a for a in webhook.alerts if a["labels"]["alertname"] == "ZfsBenchThroughputRegression"]):
        assert time.monotonic() < deadline, f"no alert at the example receiver; ALERTS: {prom.query('ALERTS')}"
        time.sleep(1)
    assert fired[0]["status"] == "firing" and fired[0]["labels"]["instance"] == "nas"
    assert "reached 70% of the median" in " ".join(fired[0]["annotations"]["description"].split())


def test_health_checks_pass(stack):
    status = stack["compose"].wait_healthy(SERVICES)
    assert status == {s: "healthy" for s in SERVICES}


def test_ports_listen_on_loopback_only(stack):
    found = listeners()
    for service, port in PORTS.items():
        assert found.get(port) == {"127.0.0.1"}, f"{service} listens on {found.get(port)}"
    assert 9094 not in found, "Alertmanager's cluster port must stay closed"


def test_admin_and_lifecycle_apis_are_off_and_retention_is_capped(stack):
    prom = stack["prom"]
    for path in ("api/v1/admin/tsdb/snapshot", "api/v1/admin/tsdb/delete_series?match[]=up", "-/reload", "-/quit"):
        code, body = http("POST", f"{prom.url}/{path}")
        assert code in (403, 405) or "disabled" in body.lower(), (path, code, body)
        assert code != 200, (path, code, body)
    flags = prom.api("status/flags")
    assert flags["web.enable-admin-api"] == "false" and flags["web.enable-lifecycle"] == "false"
    # Prometheus prints the size in its base-2 units: 20GB is 20 GiB.
    assert flags["storage.tsdb.retention.size"] == "20GiB" and flags["storage.tsdb.retention.time"] == "400d"
    assert prom.query("up")  # still serving after the refused /-/quit


def test_exporter_container_is_confined(stack):
    info = stack["compose"].inspect("zfsnas-exporter")
    # One read-only bind of the host's / (which every host has: compose creates no directory).
    assert [(m["Type"], m["Source"], m["Destination"], m["RW"]) for m in info["Mounts"]] == [("bind", "/", "/host", False)]
    host = info["HostConfig"]
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE",
                                                                      "SYS_RAWIO"]
    assert host["DeviceCgroupRules"] == ["c 10:249 rw", *SMART_DISK_RULES]     # the disks read-only: SMART
    assert not host["Privileged"] and host["ReadonlyRootfs"]
    # a read-only root, but a writable /tmp: the snapshot source spools through a temporary file
    spool = docker("exec", info["Id"], "/opt/zfsnas/bin/python", "-c",
                   "import tempfile; f = tempfile.TemporaryFile(); f.write(b'x' * 1048576); print(f.tell())")
    assert spool.stdout.strip() == "1048576"
    assert docker("exec", info["Id"], "touch", "/opt/zfsnas/x", check=False).returncode != 0
    for service in ("prometheus", "alertmanager", "node-exporter"):
        assert stack["compose"].inspect(service)["Config"]["User"] == "nobody", service


def test_nsenter_needs_root_and_each_capability(stack):
    """Why the exporter runs as root with exactly SYS_ADMIN, SYS_PTRACE and SYS_CHROOT: the switch into
    the host's mount namespace (how the host's zfs/zpool run) works for root with the three, and is
    refused to nobody and to root without any one of them. The target is this test's own process:
    here even the host's root may not open PID 1's namespace (this machine's PID 1 holds capabilities
    its root lacks); the kernel's checks are the same for any host process."""
    image = stack["images"]["ZFSNAS_EXPORTER_IMAGE"]
    needed = ["SYS_ADMIN", "SYS_PTRACE", "SYS_CHROOT"]

    def nsenter(user: str, caps: list[str]):
        return docker("run", "--rm", "--pid=host", "--cap-drop=ALL", *[f"--cap-add={c}" for c in caps],
                      "--security-opt=apparmor:unconfined", f"--user={user}", "--entrypoint=nsenter", image,
                      "--target", str(os.getpid()), "--mount", "--", "cat", "/proc/1/comm", check=False)

    as_root = nsenter("root", needed)
    assert as_root.returncode == 0, as_root.stderr
    assert as_root.stdout.strip() == Path("/proc/1/comm").read_text().strip()
    as_nobody = nsenter("nobody", needed)
    assert as_nobody.returncode != 0 and "/ns/mnt: Permission denied" in as_nobody.stderr, as_nobody.stderr
    for cap in needed:
        without = nsenter("root", [c for c in needed if c != cap])
        assert without.returncode != 0, f"{cap} is not needed after all"


def test_data_survives_down_and_up(stack):
    compose, prom = stack["compose"], stack["prom"]
    status, body = http("POST", "http://127.0.0.1:9093/api/v2/silences", {
        "matchers": [{"name": "alertname", "value": "ZfsPoolScrubOverdue", "isRegex": False}],
        "startsAt": "2020-01-01T00:00:00Z", "endsAt": "2099-01-01T00:00:00Z", "createdBy": "stack test",
        "comment": "kept across down/up"})
    assert status == 200, body
    silence = json.loads(body)["silenceID"]
    wait_for(prom, "count_over_time(up[10m]) > 2")
    mark = time.time()
    before = prom.api("query", query='up{job="zfsnas"}', time=f"{mark:.3f}")["result"]
    assert before and before[0]["value"][1] == "1"
    time.sleep(1)  # Alertmanager writes silences to its volume on shutdown
    compose("down")   # without -v: the named volumes stay
    assert compose("ps", "-q").strip() == ""
    compose("up", "-d", *SERVICES)
    wait_for(prom, 'up{job="zfsnas"} == 1')
    after = prom.api("query", query='up{job="zfsnas"}', time=f"{mark:.3f}")["result"]
    assert after == before
    deadline = time.monotonic() + 60   # Alertmanager may answer a little after Prometheus
    while True:
        try:
            status, body = http("GET", f"http://127.0.0.1:9093/api/v2/silence/{silence}")
            break
        except urllib.error.URLError:
            assert time.monotonic() < deadline, "Alertmanager did not come back after up"
            time.sleep(1)
    assert status == 200 and json.loads(body)["comment"] == "kept across down/up", body
