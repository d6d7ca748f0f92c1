"""`zfsnas-bench recommend MATRIX`: Pareto front, the pick and its one-sentence reason, the options,
and honesty when repeats overlap. FITS and ISO are the seeds' published figures (seeds.py)."""

from __future__ import annotations

import pytest

from zfsnas.bench.answering.recommend import RecommendError, parse_throughput, recommend
from zfsnas.bench.answering.report import sections
from zfsnas.bench.cli import main

from .seeds import fits_config, seeded_store


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeds") / "bench.sqlite"
    store = seeded_store(path)
    yield {s.matrix: s for s in sections(store.results())}, path
    store.close()


def test_fits_lands_on_zstd1_512k_and_says_why(seeded):
    found, _ = seeded
    rec = recommend(found["fits-copy"])
    assert rec.pick is not None and rec.pick.summary.id == fits_config("zstd-1", "512K").id
    # The post's own figures of the recordsize sweep (47.5 GiB at 512K), not 1M's borrowed
    assert rec.reason == ("zstd-1 / 512K: 99 % of the fastest (zstd-fast / 1M, 191.8 MB/s), 10 % smaller than "
                          "zstd-fast / 1M, 19 % smaller than lz4 / 1M.")
    # The write-size sweep measures another size: never a candidate against the full copy.
    assert rec.notes[0] == ("6 configuration(s) of fits-copy are the only option measured in their setting (size 70G, "
                            "30G, 20G, 15G, 10G, 5G): nothing to choose there")
    assert rec.notes[-1] == "one run per configuration: the noise is unknown; repeat the matrix to know it"
    assert [c.label for c in rec.front] == ["zstd-fast / 1M", "zstd-1 / 1M", "zstd-3 / 1M", "zstd-1 / 512K"]


def test_weights_and_minimum_throughput(seeded):
    found, _ = seeded
    assert recommend(found["fits-copy"], speed_weight=1).pick.label == "zstd-fast / 1M"
    assert recommend(found["fits-copy"], speed_weight=0).pick.label == "zstd-3 / 1M"
    # 1 GbE line rate (125 MB/s) rules out zstd-3 (82.3 MB/s); space-first then picks zstd-1 at 1M (ratio 1.48).
    assert recommend(found["fits-copy"], speed_weight=0, min_throughput=parse_throughput("1GbE")).pick.label == (
        "zstd-1 / 1M")
    none = recommend(found["fits-copy"], min_throughput=parse_throughput("2.5GbE"))
    assert none.pick is None
    assert none.reason == "no configuration reaches 312.5 MB/s; the fastest is zstd-fast / 1M at 191.8 MB/s"
    with pytest.raises(RecommendError):
        recommend(found["fits-copy"], speed_weight=1.5)


def test_iso_pick(seeded):
    found, _ = seeded
    rec = recommend(found["iso-rsync"])
    assert rec.reason == "zstd-3 / 1M: 99 % of the fastest (lz4 / 1M, 121.4 MB/s), 1 % smaller than lz4 / 1M."
    # `off` is bigger and slower than lz4; gzip-9 bigger and slower than zstd-3: neither on the front.
    assert [c.label for c in rec.front] == ["lz4 / 1M", "zstd-3 / 1M", "zstd-7 / 1M", "zstd-15 / 1M", "zstd-19 / 1M"]


def test_overlapping_repeats_are_said(seeded):
    found, _ = seeded
    rec = recommend(found["fio-seq"], speed_weight=1)
    assert rec.pick.label == "off / 1M"
    assert rec.notes[0] == ("the data cannot decide on speed between off / 1M and lz4 / 1M: their repeats overlap "
                            "(558.0-575.0 vs 552.0-571.0 MB/s)")
    balanced = recommend(found["fio-seq"])
    assert balanced.reason == "lz4 / 1M: 99 % of the fastest (off / 1M, 566.0 MB/s), 41 % smaller than off / 1M."
    assert balanced.notes == []      # runner-up zstd-3 / 1M (448-462) does not overlap lz4 / 1M (552-571)
    # CPU is an objective when known: the front keeps off / 1M for its 13.8 % CPU.
    assert [(c.label, round(c.cpu * 100, 1)) for c in balanced.front] == [
        ("lz4 / 1M", 20.1), ("zstd-3 / 1M", 38.4), ("off / 1M", 13.8)]


@pytest.mark.parametrize(("text", "bytes_per_second"), [("2.5GbE", 312.5e6), ("1 GbE", 125e6), ("300MB/s", 300e6),
                                                         ("250MiB/s", 250 * 2**20), ("10Gbit/s", 1.25e9), ("90", 90e6)])
def test_parse_throughput(text, bytes_per_second):
    assert parse_throughput(text) == bytes_per_second


def test_parse_throughput_rejects_nonsense():
    with pytest.raises(RecommendError, match="expected e.g. 2.5GbE"):
        parse_throughput("fast")


def test_cli(seeded, capsys):
    _, path = seeded
    assert main(["recommend", "fits-copy", "--db", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    # the findings first, the pick closing them (how sure it is included); then the details
    assert out[4] == ("- Pick: zstd-1 / 512K: 99 % of the fastest (zstd-fast / 1M, 191.8 MB/s), 10 % smaller than "
                      "zstd-fast / 1M, 19 % smaller than lz4 / 1M; not decided: +1.8 % on score over zstd-1 / 256K "
                      "from one run each (noise unknown).")
    details = out[out.index("recommend fits-copy"):]
    assert details[2] == "Pareto-optimal (throughput vs on-disk size):"
    assert details[3].startswith("  zstd-fast / 1M          191.8 MB/s   75.8 % of logical on disk")
    assert "pick: zstd-1 / 512K: 99 % of the fastest" in "\n".join(out)
    assert main(["recommend", "fits-copy", "--db", str(path), "--min-throughput", "2.5GbE"]) == 1
    assert "no pick: no configuration reaches 312.5 MB/s" in capsys.readouterr().out
    assert main(["recommend", "nothing", "--db", str(path)]) == 2       # an unknown matrix: said, with those there


def test_nothing_to_choose_between_is_said(seeded):
    found, _ = seeded
    rec = recommend(found["cdm-zvol"])      # eight CDM tests of one zvol: different workloads, no choice
    assert rec.pick is None
    assert rec.reason == ("nothing to choose between: cdm-zvol has no two configurations that differ only in dataset "
                          "properties (compression, recordsize or volblocksize)")
