"""The exporter over kstat trees captured from live OpenZFS guests (tests/fixtures/linux-zfs-*-live).

Those trees are what a real module wrote (tests/e2e/run --capture-fixtures regenerates them);
the values served must be the values in the files, and what the exporter served inside the
guest at that moment (commands/metrics.txt) must agree on the values that do not move.
"""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES, samples, scrape_text, value
from tests.registry import KSTAT as KSTAT_COLLECTORS

LIVE = sorted(p for p in FIXTURES.glob("linux-zfs-*-live") if (p / "proc").is_dir())


def named_kstat(path) -> dict[str, int | str]:
    out = {}
    for line in path.read_text().splitlines()[2:]:
        parts = line.split(None, 2)
        if len(parts) == 3:
            out[parts[0]] = parts[2] if parts[1] == "7" else int(parts[2])
    return out


@pytest.fixture(params=LIVE, ids=[p.name for p in LIVE])
def live(request):
    tree = request.param
    flags = ["--path.procfs", str(tree / "proc"), "--path.sysfs", str(tree / "sys"), "--collector.disable-defaults"]
    flags += [f"--collector.{name}" for name in KSTAT_COLLECTORS]
    return tree, samples(scrape_text(*flags))


def test_live_capture_present():
    versions = {p.name for p in LIVE}
    assert {"linux-zfs-2.3.2-live", "linux-zfs-2.1.11-live"} <= versions, f"live captures present: {sorted(versions)}"


def test_every_collector_succeeds(live):
    _, served = live
    for name in KSTAT_COLLECTORS:
        assert value(served, "zfs_exporter_collector_success", collector=name) == 1, name


def test_arc_values_are_the_files(live):
    tree, served = live
    arc = named_kstat(tree / "proc/spl/kstat/zfs/arcstats")
    for field, metric in (("c_max", "zfs_arc_max_size_bytes"), ("c_min", "zfs_arc_min_size_bytes"),
                          ("size", "zfs_arc_size_bytes"), ("anon_size", "zfs_arc_anon_size_bytes"),
                          ("hits", "zfs_arc_hits_total"), ("misses", "zfs_arc_misses_total"),
                          ("l2_size", "zfs_l2arc_size_bytes"), ("l2_write_bytes", "zfs_l2arc_written_bytes_total")):
        assert value(served, metric) == arc[field], f"{metric}: expected {arc[field]} (arcstats {field})"
    # what the exporter served in the guest at capture time agrees on what does not move
    in_guest = samples((tree / "commands" / "metrics.txt").read_text())
    assert value(in_guest, "zfs_arc_max_size_bytes") == arc["c_max"]


def test_every_objset_is_served(live):
    tree, served = live
    count = 0
    for pool_dir in sorted((tree / "proc/spl/kstat/zfs").iterdir()):
        for path in sorted(pool_dir.glob("objset-0x*")):
            stats = named_kstat(path)
            labels = {"pool": pool_dir.name, "dataset": stats["dataset_name"]}
            assert value(served, "zfs_dataset_written_bytes_total", **labels) == stats["nwritten"]
            assert value(served, "zfs_dataset_reads_total", **labels) == stats["reads"]
            count += 1
    assert count >= 10, f"only {count} objsets in the live capture"


def test_pool_state_and_txgs(live):
    tree, served = live
    for pool in ("tank", "fast"):
        txgs = (tree / f"proc/spl/kstat/zfs/{pool}/txgs").read_text().splitlines()
        assert txgs[0].split()[:3] == ["txg", "birth", "state"]
        assert value(served, "zfs_pool_txg_history_length", pool=pool) == len(txgs) - 1
