"""Report tables: the seeds' published figures, stored through the Store's public API, read back in
the shapes the posts printed them (tests/bench/seeds.py); repeats as median (min-max); look-alikes."""

from __future__ import annotations

import csv
import io

import pytest

from zfsnas.bench.answering.crystaldiskmark import CdmTest, line_v8
from zfsnas.bench.answering.document import markdown, to_csv
from zfsnas.bench.answering.report import sections, summarise
from zfsnas.bench.answering.tables import cdm_tables, configurations_table, pivot_tables, write_size_tables
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

from .configs import configuration
from .seeds import (
    FITS_COMPRESSION,
    ISO_COMPRESSION,
    fits_config,
    iso_config,
    lab_seq_config,
    seeded_store,
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    store = seeded_store(tmp_path_factory.mktemp("seeds") / "bench.sqlite")
    yield {s.matrix: s for s in sections(store.results())}
    store.close()


def by_config(table):
    return {row[0]: dict(zip(table.headers, row)) for row in table.rows}


def test_sections_are_matrices_in_run_order_and_configurations_in_matrix_order(seeded):
    assert list(seeded) == ["fits-copy", "iso-rsync", "fio-seq", "cdm-zvol"]
    assert seeded["fits-copy"].title == "fits-copy on astro"
    fits = [(s.compression, s.recordsize, s.config.size) for s in seeded["fits-copy"].summaries]
    assert fits[:7] == [("lz4", "1M", "all"), ("zstd-fast", "1M", "all"), ("zstd-1", "1M", "all"),
                        ("zstd-3", "1M", "all"), ("zstd-1", "512K", "all"), ("zstd-1", "256K", "all"),
                        ("zstd-1", "128K", "all")]
    assert [s.config.size for s in seeded["fits-copy"].summaries[7:]] == ["70G", "30G", "20G", "15G", "10G", "5G"]


def test_fits_compression_table_shows_the_post_figures(seeded):
    table = configurations_table(seeded["fits-copy"])
    # Only what differs among the matrix's configurations, then the figures; the post published no
    # logical size, so there is none (not one made up from on-disk size x ratio).
    assert table.headers == ["config", "compression", "recordsize", "size", "runs", "MB/s", "MiB/s", "wall s", "ratio",
                             "on-disk GiB", "% of uncompressed"]
    rows = by_config(table)
    cells = {c: rows[fits_config(c, "1M").id] for c in FITS_COMPRESSION}
    assert [(c, r["MB/s"], r["wall s"], r["ratio"], r["on-disk GiB"]) for c, r in cells.items()] == [
        ("lz4", "138.0", "540.0", "1.19", "59.2"), ("zstd-fast", "191.8", "388.0", "1.32", "53.1"),
        ("zstd-1", "175.0", "425.0", "1.48", "47.4"), ("zstd-3", "82.3", "905.0", "1.51", "46.6")]
    assert cells["lz4"]["MiB/s"] == "131.6"                  # 138.0e6 / 2^20
    # No `off` and no logical size: 1 / ratio, to the precision a two-decimal ratio has (84 %, not 84.03 %).
    assert cells["lz4"]["% of uncompressed"] == "84"
    # The recordsize sweep as published: 512K 1.47, 47.5 GiB, 391 s; 256K 1.47, 47.5, 405; 128K 1.44, 48.1, 412.
    sweep = [(r, rows[fits_config("zstd-1", r).id]) for r in ("512K", "256K", "128K")]
    assert [(r, row["MB/s"], row["ratio"], row["on-disk GiB"], row["wall s"]) for r, row in sweep] == [
        ("512K", "190.6", "1.47", "47.5", "391.0"), ("256K", "184.0", "1.47", "47.5", "405.0"),
        ("128K", "180.7", "1.44", "48.1", "412.0")]
    assert rows[fits_config("zstd-1", "512K", "70G").id]["on-disk GiB"] == "-"   # not published, not invented


def test_fits_recordsize_pivot(seeded):
    tables = {t.title.split(": ", 1)[1].split(" by")[0]: t for t in pivot_tables(seeded["fits-copy"])}
    mbs = tables["MB/s"]
    # recordsize in its natural order, whatever order the post ran it in
    assert mbs.headers == ["compression \\ recordsize (MB/s)", "128K", "256K", "512K", "1M"]
    assert mbs.rows == [["lz4", "-", "-", "-", "138.0"], ["zstd-fast", "-", "-", "-", "191.8"],
                        ["zstd-1", "180.7", "184.0", "190.6", "175.0"], ["zstd-3", "-", "-", "-", "82.3"]]
    assert tables["MiB/s"].rows[2] == ["zstd-1", "172.3", "175.5", "181.8", "166.9"]
    assert tables["on-disk GiB"].rows[2] == ["zstd-1", "48.1", "47.5", "47.5", "47.4"]
    assert tables["ratio"].rows[2] == ["zstd-1", "1.44", "1.47", "1.47", "1.48"]
    assert list(tables) == ["MB/s", "MiB/s", "wall s", "ratio", "on-disk GiB", "% of uncompressed"]


def test_fits_write_size_sweep_rows_carry_dirty_data_max(seeded):
    [table] = write_size_tables(seeded["fits-copy"])
    assert table.title == "fits-copy: throughput by total write size (zstd-1 / 512K)"
    assert table.headers == ["size", "total GiB", "zfs_dirty_data_max GiB", "x dirty", "runs", "MB/s", "MiB/s"]
    sweep = [row for row in table.rows if row[0] != "all"]
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in sweep] == [
        ("70G", "70.0", "16.0", "4.38", "190.6"), ("30G", "30.0", "16.0", "1.88", "222.5"),
        ("20G", "20.0", "16.0", "1.25", "262.0"), ("15G", "15.0", "16.0", "0.94", "292.2"),
        ("10G", "10.0", "16.0", "0.62", "381.9"), ("5G", "5.0", "16.0", "0.31", "477.9")]


def test_iso_table_on_disk_percent_of_uncompressed_and_mib_s(seeded):
    table = configurations_table(seeded["iso-rsync"])
    assert table.headers == ["config", "compression", "runs", "MB/s", "MiB/s", "ratio", "on-disk GiB", "logical GiB",
                             "% of uncompressed"]
    rows = by_config(table)
    got = {c: (rows[iso_config(c).id]["on-disk GiB"], rows[iso_config(c).id]["% of uncompressed"],
               rows[iso_config(c).id]["MiB/s"]) for c in ISO_COMPRESSION}
    assert got == {c: (f"{gib:.1f}", f"{pct:.1f}", f"{mib:.1f}") for c, (gib, pct, mib) in ISO_COMPRESSION.items()}
    assert got["off"] == ("502.4", "100.0", "108.9") and got["lz4"] == ("483.6", "96.3", "115.8")
    # Three decimals tell zstd-3, zstd-7, zstd-15 and gzip-9 apart (all "1.05" at two).
    assert [rows[iso_config(c).id]["ratio"] for c in ("zstd-3", "zstd-7", "zstd-15", "gzip-9")] == [
        "1.053", "1.054", "1.055", "1.049"]


def test_repeats_are_median_with_spread_and_cpu_percent(seeded):
    rows = by_config(configurations_table(seeded["fio-seq"]))
    lz4 = rows[lab_seq_config("lz4", "1M").id]
    assert (lz4["runs"], lz4["MB/s"]) == ("3", "560.0 (552.0-571.0)")
    # 3.6 s user and 12.5 s system of 80 CPU-seconds.
    assert (lz4["CPU user %"], lz4["CPU system %"]) == ("4.5", "15.6")
    assert lz4["ratio"] == "1.684"          # identical in every repeat: no spread shown


def test_crystaldiskmark_lines_in_its_own_format(seeded):
    [table] = cdm_tables(seeded["cdm-zvol"])
    assert table.code[:2] == ["* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]",
                              "* KB = 1000 bytes, KiB = 1024 bytes"]
    read = table.code[table.code.index("[Read]") + 1]
    # Best of three passes, as CrystalDiskMark reports: pass 2 (216.271 MB/s), with its IOPS and latency.
    assert read == "  SEQ    1MiB (Q=  8, T= 1):   216.271 MB/s [    206.3 IOPS] < 38555.55 us>"
    write = table.code[table.code.index("[Write]") + 3]
    assert write == "  RND    4KiB (Q= 32, T= 1):     2.851 MB/s [    696.0 IOPS] < 45480.73 us>"
    assert len([line for line in table.code if line.startswith("  ")]) == 8
    seq = next(r for r in table.rows if r[:2] == ["SEQ 1MiB Q8T1", "read"])
    assert seq[2:] == ["3", "216.271", "212.500 (210.004-216.271)", "202.7 (200.3-206.3)", "39470.10 (38555.55-39911.02)"]


def test_cdm_line_widths():
    assert line_v8(CdmTest("SEQ", 1024, 8, 1, "read", 5024.997, 4792.2, 1667.96)) == (
        "  SEQ    1MiB (Q=  8, T= 1):  5024.997 MB/s [   4792.2 IOPS] <  1667.96 us>")
    assert line_v8(CdmTest("RND", 4, 32, 16, "read", 0.64, 156.2, 199524.93)) == (
        "  RND    4KiB (Q= 32, T=16):     0.640 MB/s [    156.2 IOPS] <199524.93 us>")


def test_markdown_and_csv_carry_the_same_cells(seeded):
    text = markdown([seeded["iso-rsync"]])
    assert "## iso-rsync on tank" in text
    assert f"| {iso_config('lz4').id} | lz4 | 1 | 121.4 | 115.8 | 1.039 | 483.6 | 502.4 | 96.3 |" in text
    lines = to_csv([seeded["iso-rsync"]]).splitlines()
    comments = [line for line in lines if line.startswith("# ")]
    assert lines[:len(comments)] == comments and len(comments) == 3      # the findings first
    rows = list(csv.reader(io.StringIO("\n".join(lines[len(comments):]))))
    start = rows.index(["iso-rsync: configurations"])
    lz4 = rows[start + 2]
    # CSV is for programs: every figure to 6 decimals, not the one a reader needs
    assert lz4[:3] == [iso_config("lz4").id, "lz4", "1"]
    assert lz4[3] == f"{115.8 * 2**20 / 1e6:.6f}".rstrip("0") == "121.425101"
    assert (lz4[4], lz4[6], lz4[7]) == ("115.8", "483.6", "502.4")


def test_configurations_that_look_alike_are_two_rows_that_say_what_differs(tmp_path):
    """A run before and after a zfs_dirty_data_max change: not one row of both."""
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r", "dirty-data", "tank/scratch", 2)
    before = configuration(workload="write-size")
    after = configuration(workload="write-size", parameters={"zfs_dirty_data_max": str(16 << 30)})
    for config, throughput in ((before, 400e6), (after, 250e6)):
        store.record_result("r", 1, config, figures=ResultFigures(throughput_bytes_per_second=throughput))
    rows = summarise(store.results())
    assert [(r.id, r.runs, r.mb_per_s) for r in rows] == [(before.id, 1, 400.0), (after.id, 1, 250.0)]
    assert rows[0].differs == f"vs {after.id}: parameter zfs_dirty_data_max: 17179869184 -> 4294967296"
    [section] = sections(store.results())
    table = configurations_table(section)
    # What tells them apart is a column of its own; a `differs` column would only repeat it.
    assert table.headers[:3] == ["config", "zfs_dirty_data_max", "runs"] and "differs" not in table.headers
    assert [row[1] for row in table.rows] == ["4294967296", "17179869184"]


def test_record_result_is_a_complete_row(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r", "m", "tank/scratch", 1)
    rid = store.record_result("r", 3, configuration(), repeat=2, started=100.0, finished=160.0,
                              figures=ResultFigures(throughput_bytes_per_second=5e8, compressratio=1.5))
    row = store.results()[0]
    assert (row.id, row.status, row.cell, row.repeat, row.started, row.finished) == (
        rid, "complete", 3, 2, 100.0, 160.0)
    assert (row.throughput_bytes_per_second, row.compressratio, row.dataset) == (5e8, 1.5, "tank/imported")
    with pytest.raises(ValueError, match="bogus"):
        store.record_result("r", 1, configuration(), figures=ResultFigures.of({"bogus": 1}))
    assert len(store.results(status=None)) == 1      # the bad call left no `running` row
