"""How sure every pick is (issue 40): recommend's confidence lines and the clause that closes the
findings' pick sentence, checked against the interval computed here by hand from the stored runs
(Student's t from the table, not from our code): one workload with three repeats, several workloads
with uneven repeats (a race's), several settings, the minimum throughput, a pick on size alone."""

from __future__ import annotations

import math
import statistics

import pytest

from zfsnas.bench.answering.recommend import parse_throughput, recommend
from zfsnas.bench.answering.report import sections
from zfsnas.bench.cli import main
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

from .configs import configuration
from .seeds import LAB_SEQ, seeded_store

GIB = 1 << 30
T_975 = {6: 2.446912, 12: 2.178813}         # Student's t, 97.5th percentile, from the table


def pct(log_ratio: float) -> str:
    return f"{(math.exp(log_ratio) - 1) * 100:+.1f} %"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    path = tmp_path_factory.mktemp("confidence") / "bench.sqlite"
    store = seeded_store(path, ("fits", "lab", "archive"))
    yield {s.matrix: s for s in sections(store.results())}, path
    store.close()


def by_hand(samples: dict[str, list[float]], pick: str, runner_up: str) -> tuple[float, float, float, int]:
    """(difference, low, high, degrees of freedom) of one workload's means with the pooled noise."""
    squares = sum((v - statistics.mean(vs)) ** 2 for vs in samples.values() for v in vs)
    df = sum(len(vs) - 1 for vs in samples.values())
    sd = math.sqrt(squares / df)
    a, b = samples[pick], samples[runner_up]
    diff = statistics.mean(a) - statistics.mean(b)
    half = T_975[df] * sd * math.sqrt(1 / len(a) + 1 / len(b))
    return diff, diff - half, diff + half, df


def test_three_repeats_of_one_workload(seeded, capsys):
    found, path = seeded
    rec = recommend(found["fio-seq"])
    assert rec.pick.label == "lz4 / 1M"
    # recommend's score in log space: half log(throughput), half -log(on-disk share), per run
    samples = {f"{c} / {r}": [0.5 * math.log(m * 1e6) - 0.5 * math.log(int(gib * GIB) / (16 * GIB)) for m in mbs]
               for (c, r), (mbs, _u, _s, gib) in LAB_SEQ.items()}
    runner_up = max((k for k in samples if k != "lz4 / 1M"), key=lambda k: statistics.mean(samples[k]))
    diff, low, high, df = by_hand(samples, "lz4 / 1M", runner_up)
    assert runner_up == "zstd-3 / 1M" and df == 12 and low < 0 < high
    assert rec.confidence == [
        f"confidence: lz4 / 1M is {pct(diff)} on score over the runner-up zstd-3 / 1M (95 % interval {pct(low)} to "
        f"{pct(high)}; 3 and 3 run(s), noise pooled over 6 repeated configuration(s), 12 degree(s) of freedom): "
        "not decided: the interval includes no difference"]
    assert rec.sentence.endswith(f"; not decided: {pct(diff)} on score over zstd-3 / 1M, 95 % interval {pct(low)} "
                                 f"to {pct(high)} (3 runs each).")
    # the same, as recommend prints it: the findings' last line, and the line under the pick
    assert main(["recommend", "fio-seq", "--db", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("") - 1] == f"- {rec.sentence}"
    assert out[out.index(f"pick: {rec.reason}") + 1] == rec.confidence[0]
    # on speed alone (speed weight 1): the runner-up is the fastest other, off / 1M, and it is throughput
    fast = recommend(found["fio-seq"], speed_weight=1)
    speed = {k: [0.5 * math.log(m * 1e6) * 2 for m in v_mbs] for k, v_mbs in
             ((f"{c} / {r}", mbs) for (c, r), (mbs, *_rest) in LAB_SEQ.items())}
    diff, low, high, _ = by_hand(speed, "off / 1M", "lz4 / 1M")
    assert fast.pick.label == "off / 1M"
    assert fast.confidence[0].startswith(f"confidence: off / 1M is {pct(diff)} on throughput over the runner-up "
                                         f"lz4 / 1M (95 % interval {pct(low)} to {pct(high)};")


def test_the_minimum_throughput_leaves_out_the_runner_up_it_excludes(seeded):
    found, _ = seeded
    rec = recommend(found["fio-seq"], min_throughput=parse_throughput("500MB/s"))
    assert rec.pick.label == "lz4 / 1M"
    runner_up = rec.confidences[0][1].runner_up
    assert runner_up != "zstd-3 / 1M" and runner_up in {"off / 1M", "off / 128K", "lz4 / 128K"}


def load_runs(store: Store, matrix: str, runs: dict[tuple[str, str, str], list[float]]) -> None:
    """One run of `matrix`: (workload, pool, compression) -> MB/s of each repeat; throughput only."""
    store.start_matrix(f"{matrix}-1", matrix, "tank/scratch", sum(len(v) for v in runs.values()))
    cell = 0
    for (workload, pool, compression), values in runs.items():
        for repeat, mbs in enumerate(values, 1):
            cell += 1
            config = configuration(matrix=matrix, workload=workload, pool=pool, compression=compression)
            store.record_result(f"{matrix}-1", cell, config, repeat=repeat, started=1.8e9 + cell,
                                finished=1.8e9 + cell + 1, figures=ResultFigures(throughput_bytes_per_second=mbs * 1e6))
    store.finish_matrix(f"{matrix}-1", "complete")


def load_two_workloads(store: Store) -> dict[str, dict[str, list[float]]]:
    """Two workloads, two options, uneven repeats as a race leaves them."""
    runs = {"seq-write": {"lz4": [100.0, 104.0, 98.0], "zstd-3": [90.0, 93.0]},
            "seq-read": {"lz4": [200.0, 190.0], "zstd-3": [180.0, 185.0, 178.0]}}
    load_runs(store, "mw", {(w, "tank", c): v for w, options in runs.items() for c, v in options.items()})
    return runs


def test_several_workloads_with_uneven_repeats(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    runs = load_two_workloads(store)
    [section] = sections(store.results())
    store.close()
    rec = recommend(section)
    assert rec.pick.label == "lz4 / 1M"
    logs = {w: {c: [math.log(v * 1e6) for v in vs] for c, vs in o.items()} for w, o in runs.items()}
    diff = statistics.mean(statistics.mean(o["lz4"]) - statistics.mean(o["zstd-3"]) for o in logs.values())
    squares = sum((v - statistics.mean(vs)) ** 2 for o in logs.values() for vs in o.values() for v in vs)
    sd = math.sqrt(squares / 6)                                     # (3-1) + (2-1) + (2-1) + (3-1)
    half = T_975[6] * sd * math.sqrt((1 / 3 + 1 / 2) + (1 / 2 + 1 / 3)) / 2
    assert rec.confidence == [
        f"confidence: lz4 / 1M is {pct(diff)} on throughput (mean over 2 workloads) over the runner-up zstd-3 / 1M "
        f"(95 % interval {pct(diff - half)} to {pct(diff + half)}; at least 2 and 2 run(s) per workload, noise pooled "
        "over 4 repeated configuration(s), 6 degree(s) of freedom): decided"]
    assert rec.certainty == (f"decided: {pct(diff)} on throughput over zstd-3 / 1M, 95 % interval {pct(diff - half)} "
                             f"to {pct(diff + half)} (at least 2 runs each per workload)")


def test_several_settings_say_how_many_are_decided(tmp_path):
    """Two pool layouts, lz4 clearly ahead on one (decided), a near tie on the other (not decided):
    the sentence counts them and names the least sure."""
    store = Store(tmp_path / "b.sqlite")
    load_runs(store, "ms", {("seq-write", "tank", "lz4"): [200, 202, 198], ("seq-write", "tank", "off"): [150, 151, 149],
                            ("seq-write", "fast", "lz4"): [200, 190, 210], ("seq-write", "fast", "off"): [199, 205, 192]})
    [section] = sections(store.results())
    store.close()
    rec = recommend(section)
    assert [c.verdict for _where, c in rec.confidences] == ["decided", "not decided"]
    where, fast = rec.confidences[1]
    assert "fast" in where
    assert rec.certainty == f"decided in 1 of 2 settings; the least sure, with {where}: {fast.clause()}"
    assert fast.clause().startswith("not decided: ") and "(3 runs each)" in fast.clause()
    assert len(rec.confidence) == 2 and rec.confidence[1].startswith(f"{where}: confidence: ")


def test_a_pick_on_size_alone_states_no_interval(seeded):
    found, _ = seeded
    rec = recommend(found["archive-recordsize"])
    assert rec.pick is not None and rec.confidences == [] and rec.certainty == ""
    assert "decided" not in rec.sentence


def test_one_run_each_names_the_runner_up_and_the_unknown_noise(seeded):
    found, _ = seeded
    rec = recommend(found["fits-copy"])
    [(_where, sure)] = rec.confidences
    assert (sure.pick, sure.runner_up, sure.interval, sure.runs) == ("zstd-1 / 512K", "zstd-1 / 256K", None, (1, 1))
    # score in log space from the post's figures as stored: throughput, and the on-disk share (1 / ratio)
    by_label = {s.label: s for s in found["fits-copy"].summaries if s.config.size == "all"}
    a, b = by_label["zstd-1 / 512K"], by_label["zstd-1 / 256K"]

    def score(s):
        return 0.5 * math.log(s.median("throughput")) + 0.5 * math.log(s.median("ratio"))
    assert sure.clause() == f"not decided: {pct(score(a) - score(b))} on score over zstd-1 / 256K from one run each " \
                            "(noise unknown)"
