"""The failure states captured on live OpenZFS in the e2e guests (tests/e2e/guest/failures.py, by
`tests/e2e/run --capture-fixtures`) replay with no ZFS: each serves what that state looks like.
(Their whole /metrics is pinned by tests/golden/failure-*.prom, through tests/golden/test_golden.py.)"""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES, samples
from zfsnas.replay import ReplayExporter, open_capture
from zfsnas.wiring import default_config

CAPTURES = sorted((FIXTURES / "captures" / "failures").glob("*.tar.gz"))


def replayed(name: str) -> dict:
    matches = [p for p in CAPTURES if p.name.endswith(f"-{name}.tar.gz") and "2.3." in p.name]
    if not matches:
        pytest.fail(f"no failure capture {name}: run tests/e2e/run --capture-fixtures")
    capture = open_capture(matches[0])
    try:
        return samples(ReplayExporter(capture, default_config(), process_metrics=False).render())
    finally:
        capture.close()


def on(found: dict, metric: str, **labels: str) -> list[dict]:
    return [dict(k[1]) for k, v in found.items() if k[0] == metric and v == 1 and labels.items() <= dict(k[1]).items()]


def value(found: dict, metric: str, **labels: str) -> float:
    [v] = [v for k, v in found.items() if k[0] == metric and labels.items() <= dict(k[1]).items()]
    return v


def test_every_state_is_captured_for_both_flavours():
    names = {p.name for p in CAPTURES}
    for version in ("2.3.2", "2.1.11"):
        for state in ("removed", "resilvering", "readded", "faulted", "exported", "aux_missing", "data_errors",
                      "suspended"):
            assert f"linux-zfs-{version}-{state}.tar.gz" in names, (version, state)
    assert "linux-zfs-2.3.2-expanding.tar.gz" in names


def test_every_collector_succeeds_on_replay():
    for path in CAPTURES:
        capture = open_capture(path)
        try:
            found = samples(ReplayExporter(capture, default_config(), process_metrics=False).render())
        finally:
            capture.close()
        failed = [dict(k[1]) for k, v in found.items() if k[0] == "zfs_exporter_collector_success" and v != 1]
        assert failed == [], (path.name, failed)


def test_states_as_captured():
    removed = replayed("removed")
    assert {d["pool"] for d in on(removed, "zfs_pool_health", state="DEGRADED")} == {"tank", "fast"}
    assert len(on(removed, "zfs_vdev_state", state="REMOVED")) == 2
    resilvering = replayed("resilvering")
    assert {d["pool"] for d in on(resilvering, "zfs_pool_scan_info", function="resilver", state="scanning")} == {
        "tank", "fast"}
    assert on(resilvering, "zfs_vdev_state", pool="tank", role="spare", state="INUSE")
    assert [d for d in on(resilvering, "zfs_vdev_state", pool="fast") if d["vdev"].startswith("replacing-")]
    readded = replayed("readded")
    assert {d["pool"] for d in on(readded, "zfs_pool_health", state="ONLINE")} >= {"tank", "fast"}
    faulted = replayed("faulted")
    assert on(faulted, "zfs_vdev_state", pool="lab", state="FAULTED")
    assert {d["role"] for d in on(faulted, "zfs_vdev_state", pool="lab")} == {"data", "special", "log", "cache",
                                                                              "spare"}
    assert value(faulted, "zfs_vdev_allocated_bytes", pool="lab", role="special") > 0
    exported = replayed("exported")
    assert value(exported, "zfs_pool_expected_imported", pool="lab") == 0
    assert value(exported, "zfs_pool_expected_imported", pool="tank") == 1
    aux = replayed("aux_missing")
    assert on(aux, "zfs_pool_health", pool="lab", state="ONLINE")
    assert {d["role"] for d in on(aux, "zfs_vdev_state", pool="lab") if d["state"] != "ONLINE"} == {"cache", "spare"}
    data_errors = replayed("data_errors")
    assert value(data_errors, "zfs_pool_data_errors", pool="one") > 0
    suspended = replayed("suspended")
    assert on(suspended, "zfs_pool_state", pool="one", state="SUSPENDED")
    assert on(suspended, "zfs_pool_health", pool="one", state="SUSPENDED")
    expanding = replayed("expanding")
    [info] = on(expanding, "zfs_pool_expansion_info", pool="grow")
    assert info["state"] == "expanding" and 0 < value(expanding, "zfs_pool_expansion_copied_bytes", pool="grow") < \
        value(expanding, "zfs_pool_expansion_total_bytes", pool="grow")
