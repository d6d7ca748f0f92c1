"""`zfsnas-bench compare A B`: change per configuration, noise of the repeats, and the alert's
regression rule with the threshold of alerts/thresholds.toml."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pytest

from zfsnas.bench.answering import compare
from zfsnas.bench.cli import main
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

from .configs import MIRRORS, configuration
from .seeds import lab_seq_config, seeded_store

ROOT = Path(__file__).resolve().parents[2]
SHARED = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())


def test_threshold_is_the_alerts_one():
    assert compare.max_drop() == SHARED["bench_regression_max_drop"] == 0.15


def test_a_checkout_finds_its_own_thresholds_and_jobs(monkeypatch):
    """Run from the checkout, compare reads the checkout's alerts/thresholds.toml and the runner its
    benchmark-jobs/, wherever in the package the module that looks for them sits."""
    from zfsnas.bench.cli import default_jobs_dir

    monkeypatch.delenv("ZFSNAS_THRESHOLDS", raising=False)
    monkeypatch.delenv("ZFSNAS_BENCH_JOBS", raising=False)
    assert compare.thresholds_path() == ROOT / "alerts" / "thresholds.toml"
    assert default_jobs_dir() == ROOT / "benchmark-jobs"


def test_threshold_file_errors_are_clear(tmp_path, monkeypatch):
    bad = tmp_path / "thresholds.toml"
    bad.write_text("other = 1\n")
    with pytest.raises(compare.CompareError, match="no readable bench_regression_max_drop"):
        compare.max_drop(bad)
    monkeypatch.setenv("ZFSNAS_THRESHOLDS", str(tmp_path / "missing.toml"))
    assert compare.thresholds_path() == tmp_path / "missing.toml"
    with pytest.raises(compare.CompareError, match="missing.toml"):
        compare.max_drop()


@pytest.mark.parametrize(("newest", "median", "fires"), [(850, 1000, True), (860, 1000, False), (849.9, 1000, True),
                                                          (425e6, 500e6, True), (1000, 0, False)])
def test_the_rule_is_newest_over_previous_median_at_or_below_one_minus_drop(newest, median, fires):
    assert compare.is_regression(newest, median, 0.15) is fires


def history(tmp_path, runs, start: float | None = None):
    """[(run id, configuration, MB/s)] recorded a minute apart, ending about now (or from `start`)."""
    store = Store(tmp_path / "b.sqlite")
    start = time.time() - 60 * len(runs) - 60 if start is None else start
    for n, (run_id, config, mbs) in enumerate(runs):
        if run_id not in {r.id for r in store.matrix_runs()}:
            store.start_matrix(run_id, config.matrix, "tank/scratch", 1)
        store.record_result(run_id, 1, config, repeat=n + 1, started=start + 60 * n, finished=start + 30 + 60 * n,
                            figures=ResultFigures(throughput_bytes_per_second=mbs * 1e6, compressratio=1.5))
    return store


def test_verdicts(tmp_path):
    lz4, zstd = configuration(matrix="fio-seq"), configuration(matrix="fio-seq", compression="zstd-3")
    store = history(tmp_path, [("r1", lz4, 1000), ("r1", lz4, 1010), ("r1", lz4, 990),
                               ("r1", zstd, 600), ("r1", zstd, 610), ("r1", zstd, 590),
                               ("r2", lz4, 850), ("r2", zstd, 598), ("r2", zstd, 603)])
    changes = {c.config.id: c for c in
               compare.compare(compare.resolve(store, "r1"), compare.resolve(store, "r2"), 0.15).changes}
    assert changes[lz4.id].verdict == "regression"
    assert (changes[lz4.id].newest, changes[lz4.id].previous_median, changes[lz4.id].vs_previous) == (850e6, 1000e6, 0.85)
    # 598 and 603 lie inside 590-610: within noise, whatever the sign of the change.
    assert changes[zstd.id].verdict == "within noise"
    table = compare.table(list(changes.values()), 0.15)
    row = dict(zip(table.headers, table.rows[0]))
    assert (row["A MB/s"], row["B MB/s"], row["change"], row["newest vs previous median"]) == (
        "1000.0 (990.0-1010.0)", "850.0", "-15.0 %", "85.0 %")
    assert row["verdict"] == "regression: 85.0 % of the previous median, at or below the alert's 85 %"
    assert dict(zip(table.headers, table.rows[1]))["verdict"] == "within noise: the repeats' ranges overlap"


def test_beyond_noise_but_not_a_regression(seeded_lab):
    store, _path = seeded_lab
    lz4 = lab_seq_config("lz4", "1M")
    # Configuration against its newest run: 552 vs the earlier 560 and 571.
    [change] = compare.compare(compare.resolve(store, lz4.id), compare.resolve(store, "lab-seq-3"), 0.15).changes
    assert (change.verdict, change.newest, change.previous_median) == ("slower", 552e6, 565.5e6)


def test_different_configurations_are_compared_side_by_side_not_as_a_regression(tmp_path):
    mirror, raidz2 = configuration(matrix="fio-seq", layout=MIRRORS), configuration(matrix="fio-seq")
    store = history(tmp_path, [("m1", mirror, 500), ("m2", mirror, 500), ("z1", raidz2, 300)])
    comparison = compare.compare(compare.resolve(store, "m2"), compare.resolve(store, "z1"), 0.15)
    assert comparison.changes == []          # no regression verdict across configurations
    assert comparison.differs == ["pool layout: 4 x mirror 2-way -> raidz2 8-wide"]
    [pair] = comparison.pairs
    assert (pair.a.config.id, pair.b.config.id) == (mirror.id, raidz2.id)
    row = dict(zip(*(lambda t: (t.headers, t.rows[0]))(compare.pair_table(comparison))))
    assert (row["A MB/s"], row["B MB/s"], row["B-A MB/s"], row["(B-A)/A MB/s"]) == ("500.0", "300.0", "-200.0", "-40.0 %")
    assert row["throughput noise"] == "one run each: noise unknown"


def test_two_matrices_pair_their_twins(tmp_path):
    """Matrices named apart (a 128K run and a 1M run of the same job) still set each configuration
    beside its twin: the matrix's name is no difference."""
    small = [configuration(matrix="rs-128k", compression=c, recordsize="128K") for c in ("lz4", "zstd-3")]
    large = [configuration(matrix="rs-1m", compression=c, recordsize="1M") for c in ("lz4", "zstd-3")]
    store = history(tmp_path, [("s", small[0], 400), ("s", small[1], 300), ("l", large[0], 500), ("l", large[1], 330)])
    comparison = compare.compare(compare.resolve(store, "rs-128k"), compare.resolve(store, "rs-1m"), 0.15)
    assert comparison.differs == ["recordsize: 128K -> 1M"]
    assert [(p.a.config.id, p.b.config.id) for p in comparison.pairs] == [(small[0].id, large[0].id),
                                                                        (small[1].id, large[1].id)]
    rows = [dict(zip(compare.pair_table(comparison).headers, r)) for r in compare.pair_table(comparison).rows]
    assert [r["(B-A)/A MB/s"] for r in rows] == ["+25.0 %", "+10.0 %"]


@pytest.fixture
def seeded_lab(tmp_path):
    path = tmp_path / "lab.sqlite"
    store = seeded_store(path, ("lab",))
    yield store, path
    store.close()


def test_cli_exit_status_and_unknown_ids(tmp_path, capsys, caplog):
    lz4 = configuration(matrix="fio-seq")
    history(tmp_path, [("r1", lz4, 1000), ("r2", lz4, 1000), ("r0", lz4, 1000), ("r3", lz4, 850)]).close()
    db = str(tmp_path / "b.sqlite")
    assert main(["compare", lz4.id, "r3", "--db", db]) == 1          # a regression: non-zero, for scripts
    out = capsys.readouterr().out
    assert "### compare: regression verdict" in out and "| regression: 85.0 % of the previous median" in out
    assert main(["compare", "r1", "r2", "--db", db]) == 0
    assert "one run each: noise unknown" in capsys.readouterr().out
    assert main(["compare", "r1", "r3", "--db", db, "--max-drop", "0.2"]) == 0   # 85 % is above 80 %
    assert main(["compare", "nope", "r3", "--db", db]) == 2
    assert "nope: no complete results of a run, configuration or matrix with this name" in caplog.text


def test_the_alerts_minimum_of_earlier_runs_and_its_age(tmp_path):
    """ZfsBenchThroughputRegression needs 3 earlier runs and resolves 3 days after the run (alerts/thresholds.toml)."""
    rule = compare.Rule.from_thresholds()
    assert (rule.max_drop, rule.min_previous_runs, rule.max_age_days) == (
        SHARED["bench_regression_max_drop"], SHARED["bench_regression_min_previous_runs"],
        SHARED["bench_regression_max_age_days"]) == (0.15, 3, 3)
    lz4 = configuration(matrix="fio-seq")
    store = history(tmp_path, [("r1", lz4, 1000), ("r2", lz4, 1000), ("r3", lz4, 850)])
    [change] = compare.compare(compare.resolve(store, lz4.id), compare.resolve(store, "r3"), rule).changes
    assert (change.verdict, change.detail) == ("too few runs", "2 earlier run(s)")
    row = dict(zip(*(lambda t: (t.headers, t.rows[0]))(compare.table([change], rule))))
    assert row["verdict"] == "too few runs: 85.0 % of the previous median, but the alert waits for 3 earlier runs " \
                             "(2 earlier run(s))"
    store.close()
    old = history(tmp_path / "old", [("o1", lz4, 1000), ("o2", lz4, 1000), ("o3", lz4, 1000), ("o4", lz4, 850)],
                  start=time.time() - 10 * 86400)
    [change] = compare.compare(compare.resolve(old, lz4.id), compare.resolve(old, "o4"), rule).changes
    assert change.verdict == "regression" and change.detail == "the newest run is 10 days old: the alert resolved after 3"
