"""The stack's exporter container on live ZFS (2.3 guest), run the way TrueNAS SCALE runs a custom
app: Docker started by systemd in the guest, docker-compose.yml brought up as it is
(`docker-compose up -d zfsnas-exporter`; tests/e2e/container.py carries it and the image,
guest/scenario.py `container_phase` runs it). It serves the live pools, datasets, vdev latencies
and disks with every collector succeeding, as docs/stack.md says of that path; the service's
settings as `docker run` lose the pools without the /dev/zfs device rule or as a user other than root."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import samples
from tests.e2e.conftest import require_phase

pytestmark = pytest.mark.e2e


# module scope: it must skip before the module's own module-scoped fixtures fail on missing results
@pytest.fixture(scope="module", autouse=True)
def _phase_in_this_run(config):
    require_phase(config, "container")


SOURCES = ("zpool_list", "zpool_status", "zfs_datasets", "zpool_iostat")
VARIANTS = ("compose", "no_device_rule", "as_nobody")
# docs/stack.md: through nsenter the container runs the host's zfs/zpool, so every collector works;
# since issue 37 the stack reads SMART by default (SYS_RAWIO, the disks read-only): smart succeeds too
COMPOSE_COLLECTORS = ("arc", "txg", "objset", "poolstats", "tunables", "datasets", "pools", "disks", "smart", "bench",
                      "vdevlatency")


@pytest.fixture(scope="module")
def served(results):
    if os.environ.get("ZFSNAS_E2E_FLAVOUR") != "2.3":
        pytest.skip("the container step runs in the 2.3 guest only")
    out = results / "container"
    missing = [v for v in VARIANTS if not (out / f"{v}.txt").exists()]
    if missing:
        pytest.fail(f"the guest's container step recorded nothing for {missing}: {why_not(results)}")
    return {variant: samples((out / f"{variant}.txt").read_text()) for variant in VARIANTS}


def why_not(results) -> str:
    """What the guest said about its container step (CI shows this message, not the guest's files)."""
    timeline = json.loads((results / "timeline.json").read_text()) if (results / "timeline.json").exists() else {}
    if "container_seconds" not in timeline:
        return f"the step did not run; the scenario ended before it (see {results / 'scenario.log'})"
    error = results / "container" / "error.txt"
    if error.exists():
        return "\n" + error.read_text()[-4000:]
    return f"no error recorded; see {results / 'scenario.log'}"


def series(data: dict, metric: str, **labels) -> list[dict]:
    return [dict(key[1]) for key, v in data.items()
            if key[0] == metric and all(dict(key[1]).get(k) == val for k, val in labels.items())]


def test_compose_settings_serve_live_pools_datasets_and_vdev_latency(served, expect, results):
    data = served["compose"]
    for source in (*SOURCES, "zpool_events", "block_devices"):
        assert data[("zfs_exporter_source_success", frozenset({("source", source)}))] == 1, source
    success = {dict(labels)["collector"]: v for (name, labels), v in data.items() if name == "zfs_exporter_collector_success"}
    assert set(COMPOSE_COLLECTORS) <= set(success) and {c: success[c] for c in COMPOSE_COLLECTORS} == dict.fromkeys(
        COMPOSE_COLLECTORS, 1.0), success
    # the pools as the scenario left them: after the failure phases (guest/failures.py) both
    # ONLINE again; without them tank with one disk offline (the degraded moment)
    last = results / "failures" / "readded" if (results / "failures" / "readded").is_dir() else results / "degraded"
    health = {line.split("\t")[0]: line.split("\t")[9] for line in
              (last / "commands" / "zpool_list.txt").read_text().splitlines()}
    for pool in ("tank", "fast"):
        assert data[("zfs_pool_health", frozenset({("pool", pool), ("state", health[pool])}))] == 1, (pool, health)
    datasets = {s["dataset"] for s in series(data, "zfs_dataset_used_bytes")}
    assert {"tank/lz4", "tank/zstd-3", "fast/db", "fast/nocomp"} <= datasets, datasets
    latency_pools = {s["pool"] for s in series(data, "zfs_vdev_latency_seconds_count")}
    assert latency_pools == {"tank", "fast"}, latency_pools
    # disk identities through /host/run/udev/data (the host's / mounted read-only): the SATA disks' serials
    serials = {s["serial"] for s in series(data, "zfs_disk_info")}
    assert {"ZNS0001", "ZNC0001", "ZNV0002"} <= serials, serials


@pytest.mark.parametrize("variant", ["no_device_rule", "as_nobody"])
def test_each_privilege_is_needed(served, variant):
    """Without `device_cgroup_rules: [c 10:249 rw]` libzfs cannot open /dev/zfs; as nobody nsenter
    cannot enter the host's mount namespace: either way the zfs/zpool sources fail."""
    data = served[variant]
    for source in SOURCES:
        assert data[("zfs_exporter_source_success", frozenset({("source", source)}))] == 0, (variant, source)
    assert not series(data, "zfs_pool_health"), variant
    assert data[("zfs_exporter_collector_success", frozenset({("collector", "arc")}))] == 1   # kstats still served


def test_container_step_cost(results, served):   # `served`: skipped where no container step ran
    timings = json.loads((results / "container" / "timings.json").read_text())
    assert set(timings) >= {"dockerd_seconds", "load_seconds", "compose_seconds"}
    print(f"container step in the guest: {timings}")


def test_exporter_stops_promptly_on_sigterm(results):
    """Before the container step the scenario stops the guest's exporter with SIGTERM, as `docker
    stop` does: it must exit well inside docker's 10 s grace period, or every container stop
    would end in SIGKILL."""
    if os.environ.get("ZFSNAS_E2E_FLAVOUR") != "2.3":
        pytest.skip("the container step runs in the 2.3 guest only")
    timeline = json.loads((results / "timeline.json").read_text())
    assert "exporter_stop" in timeline, why_not(results)
    # nominal seconds (tests/e2e/guest/pace.py): docker's grace period is wall-clock, but the
    # exporter's own promptness is what is checked, not the host's load at that moment
    assert timeline["exporter_stop"]["nominal_seconds"] < 10, timeline["exporter_stop"]
