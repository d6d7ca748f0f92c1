"""Collector `poolstats`: pool state and I/O from each pool's kstats, on the fixture trees of every version."""

import pytest

from tests.conftest import (
    LINUX_VERSIONS,
    samples,
    scrape_tree,
    types,
    value,
)


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_pool_state(version):
    text = scrape_tree(version, "poolstats")
    assert value(text, "zfs_pool_state", pool="tank", state="ONLINE") == 1
    assert value(text, "zfs_pool_state", pool="tank", state="DEGRADED") == 0
    assert value(text, "zfs_pool_state", pool="backup", state="DEGRADED") == 1
    states = {dict(labels)["state"] for (name, labels) in samples(text) if name == "zfs_pool_state"}
    assert states == {"ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "REMOVED", "UNAVAIL", "SUSPENDED"}



def test_pool_io_before_2_1_and_iostats_after():
    old = scrape_tree("2.0.7", "poolstats")
    assert value(old, "zfs_pool_read_bytes_total", pool="tank") == 120_259_084_288
    assert value(old, "zfs_pool_run_time_seconds_total", pool="tank") == 88.0
    assert types(old)["zfs_pool_run_queue_length"] == "gauge"
    new = scrape_tree("2.3.2", "poolstats")
    assert "zfs_pool_read_bytes_total" not in types(new)
    assert value(new, "zfs_pool_arc_write_bytes_total", pool="tank") == 98_784_247_808
    assert types(new)["zfs_pool_trim_written_bytes_total"] == "counter"
