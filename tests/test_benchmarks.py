"""benchmarks/scrape_bench.py's perturbation estimator: fio's bandwidth windows cut into blocks at
fio's time zero, and scraped blocks set against their quiet neighbours. The fio runs themselves
are `./dev bench --perturbation`'s (a benchmark, not a test)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("scrape_bench", Path(__file__).parents[1] / "benchmarks/scrape_bench.py")
bench = sys.modules.setdefault("scrape_bench", importlib.util.module_from_spec(spec))  # type: ignore[arg-type]
spec.loader.exec_module(bench)  # type: ignore[union-attr]


def windows(values: list[float]) -> list[tuple[float, float]]:
    """fio's log: one window every WINDOW seconds, stamped at its end (a few ms late, as fio does)."""
    return [((i + 1) * bench.WINDOW + 0.003, v) for i, v in enumerate(values)]


def test_blocks_are_cut_at_fios_time_zero_and_marked_by_the_scrapes_in_them():
    assert (bench.BLOCK, bench.WINDOW) == (2, 0.5)
    started = 1000.0
    # 10 s: blocks 0..4, four windows each; block 0 (warm-up) is left out
    log = windows([9.0] * 4 + [90.0, 90.0, 94.0, 94.0] + [100.0] * 4 + [96.0] * 4 + [50.0] * 3)
    scrapes = [started + 2.25, started + 3.25, started + 6.25, started + 7.25]   # blocks 1 and 3
    # block 4 lost a window (fio stalled, or the run ended): not a whole block, not used
    assert bench.block_means(started, log, scrapes, 10) == [(92.0, True), (100.0, False), (96.0, True)]


def test_scraped_blocks_against_quiet_neighbours_and_the_noise_of_quiet_ones():
    blocks = [(100.0, False), (99.0, True), (100.0, False), (98.0, True), (102.0, False), (101.0, True), (98.0, False)]
    diffs, noise = bench.paired(blocks)
    assert diffs == pytest.approx([-1.0, -2.970297, 1.0], rel=1e-5)   # 99/100, 98/101, 101/100
    # quiet blocks 2 and 4 against the quiet blocks two either side: 100 vs (100+102)/2, 102 vs (100+98)/2
    assert noise == pytest.approx([100 * (100 / 101 - 1), 100 * (102 / 99 - 1)], rel=1e-5)


def test_cpu_bound_counts_every_exporter_second_against_the_scraped_seconds_alone():
    # 60 scraped seconds of a 120 s run: the exporter's 0.3 s (refreshes in quiet blocks included)
    # and the client's 0.12 s are shares of one core over those 60 s
    assert bench.cpu_share(0.3, 0.12, 60) == pytest.approx((0.5, 0.2))


def test_the_scraper_notes_each_scrape_and_the_cpu_it_spent_in_odd_blocks_only(monkeypatch):
    class Counting:
        def __init__(self):
            self.scrapes = 0

        def scrape(self):
            self.scrapes += 1
            sum(range(20000))   # some CPU for thread_time to see

    monkeypatch.setattr(bench.time, "sleep", lambda seconds: None)
    exporter, scrapes, cpu = Counting(), [], []
    bench.scrape_odd_blocks(exporter, 8, scrapes, cpu, bench.time.time())
    # seconds 0..7 in 2 s blocks: blocks 1 and 3 (seconds 2, 3, 6, 7) are scraped
    assert exporter.scrapes == len(scrapes) == len(cpu) == 4
    assert all(c > 0 for c in cpu)
