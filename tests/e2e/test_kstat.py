"""Live kstats against what the exporter served: ARC/L2ARC, dirty data during a write, txgs, objsets.

The guest read the kstats right before (tree_before/) and right after (tree/) the scrape: a
counter served must lie between the two readings, a gauge near them.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

MiB = 1 << 20

ARC_EXACT = {  # do not move while nothing changes the module parameters
    "c_max": "zfs_arc_max_size_bytes",
    "c_min": "zfs_arc_min_size_bytes",
}
ARC_COUNTERS = {
    "hits": "zfs_arc_hits_total",
    "misses": "zfs_arc_misses_total",
    "l2_hits": "zfs_l2arc_hits_total",
    "l2_misses": "zfs_l2arc_misses_total",
    "l2_write_bytes": "zfs_l2arc_written_bytes_total",
    "l2_read_bytes": "zfs_l2arc_read_bytes_total",
}
ARC_GAUGES = {
    "size": "zfs_arc_size_bytes",
    "c": "zfs_arc_target_size_bytes",
    "anon_size": "zfs_arc_anon_size_bytes",
    "mru_size": "zfs_arc_mru_size_bytes",
    "mfu_size": "zfs_arc_mfu_size_bytes",
    "l2_size": "zfs_l2arc_size_bytes",
    "l2_asize": "zfs_l2arc_allocated_bytes",
    "l2_hdr_size": "zfs_l2arc_header_bytes",
}


def between(name, served, before, after, slack=0.0, floor=0):
    low, high = min(before, after), max(before, after)
    pad = max(slack * max(abs(low), abs(high)), floor)
    assert low - pad <= served <= high + pad, (
        f"{name}: expected between {before} (kstat before the scrape) and {after} (after), served {served}")


@pytest.mark.parametrize("moment_name", ["steady", "after_write", "degraded"])
def test_arc_values_match_arcstats(moment, moment_name):
    cap = moment(moment_name)
    before, after = cap.kstat("arcstats", before=True), cap.kstat("arcstats")
    for field, metric in ARC_EXACT.items():
        assert cap.served(metric) == after[field], \
            f"{metric}: expected {after[field]} (arcstats {field}), served {cap.served(metric)}"
    for field, metric in ARC_COUNTERS.items():
        between(metric, cap.served(metric), before[field], after[field])
    for field, metric in ARC_GAUGES.items():
        # the ARC moves a little on its own (the exporter's own reads); 2 % around the two readings
        # floor: a buffer or two in flight moves a gauge that reads 0 at rest (anon_size 0 -> 512 seen)
        between(metric, cap.served(metric), before[field], after[field], slack=0.02, floor=65536)


def test_l2arc_device_was_fed(moment):
    """tank has a cache device: by the end the L2ARC has been written to, as served and as kstat says."""
    cap = moment("degraded")
    served = cap.served("zfs_l2arc_written_bytes_total")
    kstat = cap.kstat("arcstats")["l2_write_bytes"]
    assert served > 0 and kstat > 0, f"zfs_l2arc_written_bytes_total: expected > 0 (arcstats {kstat}), served {served}"


def test_anon_bytes_rise_during_a_write(results):
    record = json.loads((results / "write" / "anon_samples.json").read_text())
    rest = [s["served"] for s in record["samples"] if s["phase"] == "rest"]
    during = [s for s in record["samples"] if s["phase"] == "write"]
    assert during, "no zfs_arc_anon_size_bytes sample taken during the write"
    peak = max(s["served"] for s in during)
    kstat_peak = max(max(s["kstat"], s["kstat_after"]) for s in during)
    assert peak >= 4 * MiB and peak > 4 * max(rest), (
        f"zfs_arc_anon_size_bytes: expected to rise during a {record['write_bytes'] // MiB} MiB write "
        f"(kstat anon_size peaked at {kstat_peak}, at rest {max(rest)}), served peak {peak}")
    # each served sample sits near the kstat readings taken around its scrape
    for s in during:
        low, high = min(s["kstat"], s["kstat_after"]), max(s["kstat"], s["kstat_after"])
        assert s["served"] <= max(high * 4, high + 64 * MiB), \
            f"zfs_arc_anon_size_bytes: expected about {low}..{high}, served {s['served']}"


def last_committed_txg(cap, pool) -> int:
    return max(int(t["txg"]) for t in cap.txgs(pool) if t["state"] == "C")


def test_txg_counters_advance_with_the_write(moment, results):
    before, after = moment("before_write"), moment("after_write")
    record = json.loads((results / "write" / "anon_samples.json").read_text())
    synced_before = before.served("zfs_pool_txgs_synced_total", pool="fast")
    synced_after = after.served("zfs_pool_txgs_synced_total", pool="fast")
    txgs = last_committed_txg(after, "fast") - last_committed_txg(before, "fast")
    assert txgs > 0, "the guest's txgs kstat shows no txg committed during the write"
    assert synced_after - synced_before >= min(txgs, 1), (
        f"zfs_pool_txgs_synced_total{{pool=fast}}: expected to advance by about {txgs} (txgs kstat), "
        f"served {synced_before} -> {synced_after}")
    written = after.served("zfs_pool_txg_written_bytes_total", pool="fast") - \
        before.served("zfs_pool_txg_written_bytes_total", pool="fast")
    assert written >= record["write_bytes"] // 2, (
        f"zfs_pool_txg_written_bytes_total{{pool=fast}}: expected to grow by at least "
        f"{record['write_bytes'] // 2} during a {record['write_bytes']} byte write, served growth {written}")


def test_dataset_written_bytes_match_objsets(steady, expect):
    for pool in ("tank", "fast"):
        before, after = steady.objsets(pool, before=True), steady.objsets(pool)
        assert after, f"no objset kstats for pool {pool}"
        for dataset, stats in after.items():
            served = steady.served("zfs_dataset_written_bytes_total", pool=pool, dataset=dataset)
            between(f"zfs_dataset_written_bytes_total{{dataset={dataset}}}", served,
                    before.get(dataset, stats)["nwritten"], stats["nwritten"])
            served_writes = steady.served("zfs_dataset_writes_total", pool=pool, dataset=dataset)
            between(f"zfs_dataset_writes_total{{dataset={dataset}}}", served_writes,
                    before.get(dataset, stats)["writes"], stats["writes"])
    for dataset, spec in expect.items():
        pool = dataset.split("/")[0]
        served = steady.served("zfs_dataset_written_bytes_total", pool=pool, dataset=dataset)
        assert served >= spec["written_bytes"], (
            f"zfs_dataset_written_bytes_total{{dataset={dataset}}}: expected >= {spec['written_bytes']} "
            f"(bytes the scenario wrote), served {served}")


@pytest.mark.parametrize("moment_name", ["steady", "after_write", "scrubbed", "bench", "degraded"])
def test_every_collector_and_source_succeeds(moment, moment_name):
    """On a live module nothing the exporter reads may fail (this caught the empty dmu_tx_assign of 2.3.2)."""
    cap = moment(moment_name)
    for metric in ("zfs_exporter_collector_success", "zfs_exporter_source_success"):
        failed = [labels for labels, v in cap.series(metric) if v != 1]
        assert not failed, f"{metric}: expected 1 everywhere, served 0 for {failed} (see exporter.log)"
    assert cap.series("zfs_exporter_collector_success"), "no zfs_exporter_collector_success served"
