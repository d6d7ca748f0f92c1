"""`zfsnas-bench compare` and ZfsBenchThroughputRegression agree, case by case, on the same histories.

One store, written through the runner's Store API, is read by `compare` (newest run of each
configuration against the configuration's earlier runs) and by the real exporter's bench
collector, scraped by a real Prometheus (Debian's package) evaluating alerts/zfsnas.rules.yml.
Cases: 850 MB/s after a median of 1000 (fires); 860 after 1000 (silent, though slower); a mirror then RAID-Z2
under one pool name and labels (silent: different configurations); a run inside the noise of
its repeats (silent). The threshold both use is alerts/thresholds.toml's.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.bench.configs import MIRRORS, configuration

# The real exporter (bench collector, 1 s refresh) scraped by a real Prometheus with our rules.
from tests.integration.test_bench_prometheus import prometheus  # noqa: F401 (a fixture)
from zfsnas.bench.answering import compare
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

ALERT = 'ALERTS{alertname="ZfsBenchThroughputRegression", alertstate="firing"}'
FIRES = configuration(matrix="fio-seq", compression="lz4")
SILENT = configuration(matrix="fio-seq", compression="zstd-3")
NOISE = configuration(matrix="fio-seq", compression="zstd-1")
MIRROR = configuration(matrix="eight-disk", layout=MIRRORS)
RAIDZ2 = configuration(matrix="eight-disk")
# name: (history [(config, MB/s)] oldest first, A for compare, B for compare, compare's verdict)
CASES = {
    "850 after a median of 1000": ([(FIRES, 1000), (FIRES, 990), (FIRES, 1010), (FIRES, 850)],
                                   FIRES.id, "run-fires-3", "regression"),
    # Slower than both earlier runs (beyond their noise), yet above the alert's 85 %: no regression.
    "860 after a median of 1000": ([(SILENT, 1000), (SILENT, 1000), (SILENT, 860)], SILENT.id, "run-silent-2",
                                   "slower"),
    "inside the repeats' spread": ([(NOISE, 700), (NOISE, 640), (NOISE, 660), (NOISE, 650)], NOISE.id, "run-noise-3",
                                   "within noise"),
    "mirror then RAID-Z2, one name": ([(MIRROR, 500), (MIRROR, 500), (RAIDZ2, 300)], "run-mirror-1", "run-raidz2-0",
                                      "different configuration"),
}


def record(store: Store, run_id: str, config, mbs: float, finished: float) -> None:
    store.start_matrix(run_id, config.matrix, "tank/scratch", 1)
    store.record_result(run_id, 1, config, started=finished - 60, finished=finished,
                        figures=ResultFigures(throughput_bytes_per_second=mbs * 1e6))
    store.finish_matrix(run_id, "complete")


def write_histories(db: Path) -> None:
    store = Store(db)
    t = time.time() - 3600
    for runs, *_rest in CASES.values():
        counters: dict[str, int] = {}
        for config, mbs in runs:
            kind = {FIRES.id: "fires", SILENT.id: "silent", NOISE.id: "noise", MIRROR.id: "mirror"}.get(config.id,
                                                                                                      "raidz2")
            n = counters.get(kind, 0)
            counters[kind] = n + 1
            t += 60
            record(store, f"run-{kind}-{n}", config, mbs, t)
    store.close()


def test_compare_and_the_alert_agree_case_by_case(prometheus):  # noqa: F811
    prom, db = prometheus          # the exporter reads `db` every second: it starts empty
    write_histories(db)
    drop = compare.max_drop()
    assert drop == 0.15   # alerts/thresholds.toml; tests/alerts/test_thresholds.py ties the rule to it
    store = Store(db)
    verdicts = {}
    for name, (_runs, a, b, expected) in CASES.items():
        comparison = compare.compare(compare.resolve(store, a), compare.resolve(store, b), drop)
        if expected == "different configuration":   # side by side (A vs B), never a regression verdict
            assert comparison.changes == [] and len(comparison.pairs) == 1, name
            verdicts[name] = {p.b.config.id: "A vs B" for p in comparison.pairs if p.b}
            continue
        verdicts[name] = {c.config.id: c.verdict for c in comparison.changes}
        assert list(verdicts[name].values()) == [expected], name
    store.close()

    prom.wait_for("count(zfs_bench_runs_total) == 5")
    # Every configuration that has a previous median has its ratio evaluated before we read ALERTS.
    prom.wait_for("count(config:zfs_bench_throughput_vs_previous_median:ratio) == 4")
    firing = {a["metric"]["config"] for a in prom.wait_for(ALERT, timeout=45)}
    time.sleep(3)  # further rule evaluations: nothing else starts firing
    firing |= {a["metric"]["config"] for a in prom.query(ALERT)}
    for name, per_config in verdicts.items():
        for config_id, verdict in per_config.items():
            assert (verdict == "regression") == (config_id in firing), (name, config_id, verdict, firing)
    assert firing == {FIRES.id}
    ratio = prom.scalar(f'config:zfs_bench_throughput_vs_previous_median:ratio{{config="{FIRES.id}"}}')
    assert ratio == 0.85
    assert prom.scalar(f'config:zfs_bench_throughput_vs_previous_median:ratio{{config="{SILENT.id}"}}') == 0.86
