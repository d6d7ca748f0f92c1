"""zfsnas-bench on live ZFS: a smoke matrix on a scratch dataset, results, cleanup, refusal elsewhere."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bench(results) -> dict:
    record = json.loads((results / "bench" / "record.json").read_text())
    if not record["present"] or not record["matrix_present"]:
        pytest.skip("zfsnas-bench or benchmark-jobs/ is not in this build (not merged yet)")
    return record


def step(bench, name):
    s = bench[name]
    return f"{' '.join(s['argv'])} -> exit {s['rc']}\nstdout: {s['stdout'][-1500:]}\nstderr: {s['stderr'][-1500:]}"


def test_smoke_matrix_runs_and_cleans_up(bench):
    assert bench["init"]["rc"] == 0, step(bench, "init")
    assert bench["run"]["rc"] == 0, step(bench, "run")
    left = bench["list_datasets"]["stdout"].split()
    assert left == ["fast/scratch"], f"datasets left under fast/scratch after the run: {left}"


def test_refuses_a_non_scratch_dataset(bench):
    assert bench["refuse"]["rc"] != 0, step(bench, "refuse")
    assert bench["list_after_refuse"]["stdout"].split() == ["tank/lz4", "tank/lz4@e2e-1", "tank/lz4@e2e-2"], \
        f"tank/lz4 changed after a refused run: {bench['list_after_refuse']['stdout']}"


def test_results_served(moment, bench):
    cap = moment("bench")
    throughput = cap.series("zfs_bench_throughput_bytes_per_second")
    assert throughput and all(v > 0 for _, v in throughput), f"zfs_bench_throughput_bytes_per_second: served {throughput}"
    assert all(labels.get("pool") == "fast" for labels, _ in throughput), throughput
    ratios: dict[str, float] = {}
    for labels, v in cap.series("zfs_bench_compressratio"):
        ratios[labels["compression"]] = max(v, ratios.get(labels["compression"], 0))
    assert ratios, "zfs_bench_compressratio: nothing served after a completed run"
    order = ["zstd-3", "zstd-1", "lz4"]  # guest/bench-e2e.toml: the same half-compressible data for each
    assert set(order) <= set(ratios), f"zfs_bench_compressratio: expected series for {order}, served {ratios}"
    values = [ratios[c] for c in order]
    assert values == sorted(values, reverse=True) and values[-1] > 1.0, \
        f"zfs_bench_compressratio: expected zstd-3 >= zstd-1 >= lz4 > 1, served {ratios}"
