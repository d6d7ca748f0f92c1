"""Datasets and pools collectors against `zfs get -Hp` / `zpool list -Hp` / `zpool status` at the same moment."""

from __future__ import annotations

import calendar
import re
import time

import pytest

from .conftest import parse_zfs_ratio, require_collector, vdev_guids

pytestmark = pytest.mark.e2e

# served metric -> `zfs get -p` property
DATASET_BYTES = {
    "zfs_dataset_used_bytes": "used",
    "zfs_dataset_available_bytes": "available",
    "zfs_dataset_referenced_bytes": "referenced",
    "zfs_dataset_logical_used_bytes": "logicalused",
    "zfs_dataset_logical_referenced_bytes": "logicalreferenced",
    "zfs_dataset_used_by_snapshots_bytes": "usedbysnapshots",
    "zfs_dataset_written_since_snapshot_bytes": "written",
}
POOL_BYTES = {"zfs_pool_size_bytes": 1, "zfs_pool_allocated_bytes": 2, "zfs_pool_free_bytes": 3}
HEALTH_STATES = ("ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "UNAVAIL", "REMOVED", "SUSPENDED")


def filesystems(cap):
    return {name: props for name, props in cap.zfs_get.items() if props.get("type") == "filesystem"}


def test_space_and_compressratio_per_dataset(steady, expect):
    require_collector(steady, "datasets")
    datasets = filesystems(steady)
    assert set(expect) <= set(datasets), f"scenario datasets missing from zfs get: {set(expect) - set(datasets)}"
    for name, props in datasets.items():
        pool = name.split("/")[0]
        for metric, prop in DATASET_BYTES.items():
            want = int(props[prop])
            got = steady.served(metric, pool=pool, dataset=name)
            assert got == want, f"{metric}{{dataset={name}}}: expected {want} (zfs get {prop}), served {got}"
        for metric, prop in (("zfs_dataset_compressratio", "compressratio"),
                             ("zfs_dataset_refcompressratio", "refcompressratio")):
            want = parse_zfs_ratio(props[prop])
            got = steady.served(metric, pool=pool, dataset=name)
            assert got == pytest.approx(want, abs=0.006), \
                f"{metric}{{dataset={name}}}: expected {want} (zfs get {prop}), served {got}"


def test_compressratio_orders_by_algorithm(steady):
    """Same text, same recordsize: zstd-3 >= zstd-1 >= lz4 (what ZFS measured, and what we served)."""
    props = steady.zfs_get
    order = ["tank/zstd-3", "tank/zstd-1", "tank/lz4"]
    ratios = [parse_zfs_ratio(props[d]["compressratio"]) for d in order]
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] > 1.2, f"zfs get compressratio {dict(zip(order, ratios))}"
    if steady.collector_enabled("datasets"):
        served = [steady.served("zfs_dataset_compressratio", pool="tank", dataset=d) for d in order]
        assert served == sorted(served, reverse=True), f"zfs_dataset_compressratio served {dict(zip(order, served))}"
    random = parse_zfs_ratio(props["tank/random"]["compressratio"])
    assert random < 1.05, f"random data should not compress, zfs get compressratio {random}"


@pytest.mark.parametrize("moment_name", ["steady", "degraded"])
def test_pool_space_and_health(moment, moment_name):
    cap = moment(moment_name)
    require_collector(cap, "pools")
    assert set(cap.zpool_list) == {"tank", "fast"}
    for pool, cols in cap.zpool_list.items():
        assert cap.served("zfs_pool_size_bytes", pool=pool) == int(cols[1]), \
            f"zfs_pool_size_bytes{{pool={pool}}}: expected {cols[1]} (zpool list -Hp), " \
            f"served {cap.served('zfs_pool_size_bytes', pool=pool)}"
        for metric, col in POOL_BYTES.items():
            # the capture settled the pools first (scenario.settle_pools: `zpool wait -t free`, a
            # synced txg); what may still move is a txg's metadata (a vdev label after an offline):
            # equal within 1 MiB
            got, want = cap.served(metric, pool=pool), int(cols[col])
            assert abs(got - want) <= 1 << 20, \
                f"{metric}{{pool={pool}}}: expected {want} (zpool list -Hp, within 1 MiB), served {got}"
        health = cols[9]
        for state in HEALTH_STATES:
            got = cap.served("zfs_pool_health", pool=pool, state=state)
            want = 1 if state == health else 0
            assert got == want, \
                f"zfs_pool_health{{pool={pool},state={state}}}: expected {want} (zpool list health {health}), served {got}"


def test_pool_degraded_after_offline(moment):
    cap = moment("degraded")
    require_collector(cap, "pools")
    assert cap.zpool_list["tank"][9] == "DEGRADED", f"zpool list says {cap.zpool_list['tank'][9]}"
    got = cap.served("zfs_pool_health", pool="tank", state="DEGRADED")
    assert got == 1, f"zfs_pool_health{{pool=tank,state=DEGRADED}}: expected 1 after zpool offline, served {got}"
    offline = [labels for labels, v in cap.series("zfs_vdev_state", pool="tank") if v == 1 and labels.get("state") == "OFFLINE"]
    assert len(offline) == 1, f"zfs_vdev_state{{pool=tank,state=OFFLINE}}: expected one vdev at 1, served {offline}"


SCAN_DONE = re.compile(r"scan: scrub repaired \S+ in \S+ with (\d+) errors on (.+)$", re.M)


def test_scrub_end_time(moment):
    cap = moment("scrubbed")
    require_collector(cap, "pools")
    status = cap.command("zpool_status_P.txt")
    for pool in ("tank", "fast"):
        section = status.split(f"pool: {pool}\n", 1)[1]
        match = SCAN_DONE.search(section)
        assert match, f"zpool status of {pool} shows no finished scrub:\n{section[:600]}"
        # the guest runs in UTC; zpool status prints ctime() local time
        want = calendar.timegm(time.strptime(match[2].strip(), "%a %b %d %H:%M:%S %Y"))
        series = cap.series("zfs_pool_scan_end_timestamp_seconds", pool=pool)
        series = [(labels, v) for labels, v in series if labels.get("function", "scrub") == "scrub"]
        assert len(series) == 1, f"zfs_pool_scan_end_timestamp_seconds{{pool={pool},function=scrub}}: served {series}"
        got = series[0][1]
        assert abs(got - want) <= 1, (
            f"zfs_pool_scan_end_timestamp_seconds{{pool={pool}}}: expected {want} ({match[2].strip()} in zpool status), "
            f"served {got}")
        assert want <= cap.times["commands_start"] + 1


def leaf_states(status_P: str) -> dict[str, str]:
    """{leaf device path: state} from `zpool status -P` (rows whose name is a /dev path)."""
    out = {}
    for line in status_P.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("/dev/"):
            out[parts[0]] = parts[1]
    return out


@pytest.mark.parametrize("moment_name", ["steady", "degraded"])
def test_vdev_states_match_zpool_status(moment, moment_name):
    cap = moment(moment_name)
    require_collector(cap, "pools")
    guids = vdev_guids(cap.command("zpool_status_gP.txt"), cap.command("zpool_status_P.txt"))
    states = leaf_states(cap.command("zpool_status_P.txt"))
    assert len(states) == 18, f"zpool status -P lists {len(states)} leaf vdevs: {sorted(states)}"
    for path, state in states.items():
        series = [labels for labels, v in cap.series("zfs_vdev_state", vdev=path) if v == 1]
        assert len(series) == 1, f"zfs_vdev_state{{vdev={path}}}: expected one series at 1, served {series}"
        assert series[0]["state"] == state and series[0]["vdev_guid"] == guids[path], (
            f"zfs_vdev_state{{vdev={path}}}: expected state {state}, vdev_guid {guids[path]} (zpool status -P/-g), "
            f"served {series[0]}")


def test_vdev_latency_for_every_written_leaf(steady):
    require_collector(steady, "vdevlatency")
    states = leaf_states(steady.command("zpool_status_P.txt"))
    spare = [p for p, s in states.items() if s == "AVAIL"]  # spares are never written
    for path in set(states) - set(spare):
        series = steady.series("zfs_vdev_latency_seconds_count", vdev=path, type="total_wait", io="write")
        assert len(series) == 1 and series[0][1] > 0, \
            f"zfs_vdev_latency_seconds_count{{vdev={path},type=total_wait,io=write}}: expected > 0 writes, served {series}"


def test_snapshot_counts(steady):
    require_collector(steady, "datasets")
    counts: dict[str, int] = {}
    for name in steady.zfs_get:
        if "@" in name:
            counts[name.split("@")[0]] = counts.get(name.split("@")[0], 0) + 1
    assert counts["tank/lz4"] == 2 and counts["fast/db"] == 1, counts
    for name in filesystems(steady):
        want = counts.get(name, 0)
        got = steady.served("zfs_dataset_snapshots", pool=name.split("/")[0], dataset=name)
        assert got == want, f"zfs_dataset_snapshots{{dataset={name}}}: expected {want} (zfs get), served {got}"
