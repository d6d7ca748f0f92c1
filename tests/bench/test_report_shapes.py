"""The answers for each experiment shape our users publish, beyond the FITS copy (tests/bench/seeds.py,
our numbers in the studies' directions, loaded through the store's public API): a zvol measured with
CrystalDiskMark from a client (volblocksize x NTFS cluster x the NAS's RAM, throughput only), the ISO
archive at lz4/zstd-3 x recordsize (on-disk size only), and the eight-disk study (mirror vs RAID-Z2 x
compression x encryption, whole disks vs partitions, CPU and disk traffic). Tables, A/B comparisons,
the recommend pick and its sentence, the CrystalDiskMark lines and the charts, value by value. The
findings that open each answer are tested sentence by sentence in test_report_findings.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from zfsnas.bench.answering import charts, compare
from zfsnas.bench.answering.axes import parse_selector
from zfsnas.bench.answering.recommend import recommend
from zfsnas.bench.answering.recommend import render as render_recommendation
from zfsnas.bench.answering.report import sections
from zfsnas.bench.answering.tables import axis_tables, cdm_tables, configurations_table, section_tables, space_table
from zfsnas.bench.cli import main

from .seeds import ARCHIVE_USED, seeded_store

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    path = tmp_path_factory.mktemp("shapes") / "bench.sqlite"
    store = seeded_store(path, ("zvol", "archive", "layouts"))
    found = {s.matrix: s for s in sections(store.results())}
    store.close()
    return found, path


def rows_of(table):
    return [dict(zip(table.headers, row)) for row in table.rows]


def titled(tables, start):
    [table] = [t for t in tables if t.title.startswith(start)]
    return table


# --- zvol volblocksize, CrystalDiskMark from a client -----------------------------------------------------

def test_zvol_tables_name_volblocksize_and_tell_every_group_apart(seeded):
    found, _ = seeded
    zvol = found["zvol-cdm"]
    table = configurations_table(zvol)
    assert table.headers == ["config", "workload", "volblocksize", "ntfs_cluster", "ram", "runs", "MB/s", "MiB/s",
                             "IOPS", "latency us"]
    every = section_tables(zvol)
    assert not any("recordsize" in t.title or "recordsize" in " ".join(t.headers) for t in every)
    assert len({t.title for t in every}) == len(every)          # no two tables look alike
    cdm_titles = [t.title for t in cdm_tables(zvol)]
    assert len(cdm_titles) == 12 and "zvol-cdm: CrystalDiskMark, volblocksize 16K, ntfs_cluster 4K, ram 16G" in cdm_titles


def test_zvol_workload_by_volblocksize_table_shows_the_finding(seeded):
    found, _ = seeded
    mbs = titled(axis_tables(found["zvol-cdm"]), "zvol-cdm: MB/s by workload and volblocksize")
    # 16K ran first: the columns are in the sizes' order all the same
    assert mbs.headers == ["ntfs_cluster", "ram", "workload", "volblocksize 4K", "volblocksize 8K", "volblocksize 16K"]
    rows = {(r["ntfs_cluster"], r["ram"], r["workload"]): r for r in rows_of(mbs)}
    assert len(rows) == 32
    q32 = rows["4K", "16G", "RND 4KiB Q32T1 write"]
    assert (q32["volblocksize 4K"], q32["volblocksize 8K"], q32["volblocksize 16K"]) == ("88.9", "41.2", "6.0")
    seq = rows["4K", "16G", "SEQ 1MiB Q8T1 read"]                 # flat at the link's speed
    assert (seq["volblocksize 4K"], seq["volblocksize 16K"]) == ("118.2", "118.4")
    ntfs = rows["64K", "16G", "RND 4KiB Q32T1 write"]             # 64K clusters: no collapse at 16K
    assert (ntfs["volblocksize 4K"], ntfs["volblocksize 16K"]) == ("86.2", "87.0")
    ram = rows["4K", "32G", "RND 4KiB Q32T1 read"]                # more ARC: random reads gain 40 %
    assert (ram["volblocksize 4K"], ram["volblocksize 16K"]) == ("85.8", "82.2")
    latency = titled(axis_tables(found["zvol-cdm"]), "zvol-cdm: latency us by workload and volblocksize")
    lat = {(r["ntfs_cluster"], r["ram"], r["workload"]): r for r in rows_of(latency)}["4K", "16G", "RND 4KiB Q32T1 write"]
    assert (lat["volblocksize 4K"], lat["volblocksize 16K"]) == ("1474.19", "21845.25")


def test_zvol_crystaldiskmark_lines_in_8_and_5(seeded):
    found, _ = seeded
    table = titled(cdm_tables(found["zvol-cdm"]), "zvol-cdm: CrystalDiskMark, volblocksize 16K, ntfs_cluster 4K, ram 16G")
    assert table.code[table.code.index("[Write]") + 3] == (
        "  RND    4KiB (Q= 32, T= 1):     6.000 MB/s [   1464.8 IOPS] < 21845.25 us>")
    five = titled(cdm_tables(found["zvol-cdm"], "5"), "zvol-cdm: CrystalDiskMark, volblocksize 16K, ntfs_cluster 4K, ram 16G")
    # 5.x has no 1 MiB Q8 test nor latencies: those it cannot print are named, nothing is invented.
    assert five.code[3:] == ["  Random Read 4KiB (Q= 32,T= 1) :    58.700 MB/s [ 14331.1 IOPS]",
                             " Random Write 4KiB (Q= 32,T= 1) :     6.000 MB/s [  1464.8 IOPS]",
                             "         Sequential Read (T= 1) :   112.000 MB/s",
                             "        Sequential Write (T= 1) :   107.700 MB/s",
                             "   Random Read 4KiB (Q= 1,T= 1) :     9.500 MB/s [  2319.3 IOPS]",
                             "  Random Write 4KiB (Q= 1,T= 1) :     5.300 MB/s [  1293.9 IOPS]"]
    assert "Not in CrystalDiskMark 5's lines: SEQ 1MiB Q8T1 read, SEQ 1MiB Q8T1 write" in five.note


def test_zvol_recommend_picks_per_setting_and_says_what_decides(seeded, capsys):
    found, path = seeded
    rec = recommend(found["zvol-cdm"])
    assert rec.shape == "throughput" and rec.pick is None and rec.answered
    # 4K clusters: 4K blocks (no read-modify-write); 64K clusters: 16K blocks (the sequential writes); RAM
    # changes neither.
    assert rec.reason == ("per setting: lz4 / volblocksize 4K with ntfs_cluster 4K; lz4 / volblocksize 16K with "
                          "ntfs_cluster 64K (ram does not change it).")
    assert [(where, pick.label) for where, pick in rec.conditional] == [
        ("ntfs_cluster 4K", "lz4 / volblocksize 4K"), ("ntfs_cluster 64K", "lz4 / volblocksize 16K")]
    assert rec.notes[0] == ("the pick depends on ntfs_cluster: no one configuration is best in every setting, so "
                            "choose by yours")
    lines = dict(rec.per_workload)
    assert lines["ntfs_cluster 4K, ram 16G: RND 4KiB Q32T1 write"] == (
        "lz4 / volblocksize 4K: 88.9 MB/s, the fastest; the slowest, lz4 / volblocksize 16K, reaches 6.0 MB/s (7 %).")
    assert lines["ntfs_cluster 64K, ram 16G: overall"].startswith("lz4 / volblocksize 16K: the fastest in 6 of 8 ")
    assert main(["recommend", "zvol-cdm", "--db", str(path)]) == 0       # it answers: exit 0
    out = capsys.readouterr().out
    assert "pick per setting: lz4 / volblocksize 4K with ntfs_cluster 4K;" in out
    # One workload asked for: its fastest, with the speed-only note; speed weight 0 has nothing to weigh.
    one = recommend(found["zvol-cdm"], workload="cdm-seq1m-q8t1-read")
    assert one.pick is not None and one.pick.label == "lz4 / volblocksize 16K"
    none = recommend(found["zvol-cdm"], speed_weight=0)
    assert none.pick is None and "no on-disk size was measured: --speed-weight 0 (space only) has nothing to weigh" \
        in none.reason
    assert recommend(found["zvol-cdm"], workload="cdm-rnd4k-q32t1-write", min_throughput=87.5e6).reason == (
        "per setting: lz4 / volblocksize 4K with ntfs_cluster 4K; no pick (no configuration reaches 87.5 MB/s; the "
        "fastest is lz4 / volblocksize 16K at 87.0 MB/s) with ntfs_cluster 64K (ram does not change it).")
    assert recommend(found["zvol-cdm"], min_throughput=200e6).pick is None


def test_zvol_compare_4k_vs_16k(seeded):
    _, path = seeded

    class Store:   # compare.resolve reads only complete results
        def __init__(self, found):
            from zfsnas.store.database import ReadOnlyStore
            self.store = ReadOnlyStore(found)

        def results(self, status):
            return self.store.results(status)
    store = Store(path)
    a = compare.resolve(store, "zvol-cdm:volblocksize=4K,ram=16G,ntfs_cluster=4K")
    b = compare.resolve(store, "zvol-cdm:volblocksize=16K,ram=16G,ntfs_cluster=4K")
    comparison = compare.compare(a, b, 0.15)
    assert comparison.changes == [] and comparison.differs == ["volblocksize: 4K -> 16K"]
    rows = {r["workload"]: r for r in rows_of(compare.pair_table(comparison))}
    q32 = rows["RND 4KiB Q32T1 write"]
    assert (q32["A MB/s"], q32["B MB/s"], q32["B-A MB/s"], q32["(B-A)/A MB/s"]) == ("88.9", "6.0", "-82.9", "-93.3 %")
    assert (q32["A IOPS"], q32["B IOPS"], q32["A latency us"], q32["B latency us"]) == (
        "21704.1", "1464.8", "1474.19", "21845.25")
    assert q32["throughput noise"] == "one run each: noise unknown"
    assert len(rows) == 8
    assert compare.finding_lines(comparison, a, b)[0] == (
        "volblocksize 16K vs 4K: throughput -93 % (6.0 vs 88.9 MB/s) in RND 4KiB Q32T1 write, -64 % (5.3 vs 14.7 MB/s) "
        "in RND 4KiB Q1T1 write, the other 6 workloads -4.2 to +3.4 %.")


def test_zvol_chart_has_a_panel_per_test_on_its_own_scale(seeded, tmp_path):
    found, _ = seeded
    charts.write([found["zvol-cdm"]], tmp_path, ("svg",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench-zvol-cdm-workloads.svg"]
    texts = [t.text or "" for t in ET.parse(tmp_path / "bench-zvol-cdm-workloads.svg").getroot().iter(f"{SVG}text")]
    joined = " ".join(texts)
    assert "throughput by volblocksize" in joined and "recordsize" not in joined
    assert all(workload in texts for workload in ("RND 4KiB Q32T1 write", "SEQ 1MiB Q8T1 read"))
    # the legend names every setting, under the names of the axes it is made of
    assert {"4K, 16G", "4K, 32G", "64K, 16G", "64K, 32G", "ntfs_cluster, ram"} <= set(texts) and "off" not in texts
    ticks = [t for t in texts if t in ("4K", "8K", "16K")]
    assert ticks[:3] == ["4K", "8K", "16K"]                        # the sizes' order, not 16K first as it ran


# --- the same ISO archive, lz4/zstd-3 x recordsize: on-disk size only -------------------------------------

def test_archive_space_in_one_unit_with_the_difference_in_its_own(seeded):
    found, _ = seeded
    archive = found["archive-recordsize"]
    table = configurations_table(archive)
    # GiB for hundreds of GiB, two decimals to tell them apart (not 487273.2 MiB, not nine-digit KiB)
    assert table.headers == ["config", "compression", "recordsize", "runs", "ratio", "on-disk GiB", "logical GiB",
                             "% of uncompressed"]
    [space] = space_table(archive)
    assert space.title == "archive-recordsize: space on disk (baseline: compression lz4, recordsize 128K)"
    got = [(r["compression"], r["recordsize"], r["on-disk GiB"], r["vs baseline MiB"], r["vs baseline %"])
           for r in rows_of(space)]
    assert got == [("lz4", "128K", "475.85", "+0.0", "+0.00"), ("lz4", "512K", "475.77", "-81.7", "-0.02"),
                   ("lz4", "1M", "475.76", "-96.7", "-0.02"), ("zstd-3", "128K", "471.52", "-4439.0", "-0.91"),
                   ("zstd-3", "512K", "471.36", "-4599.0", "-0.94"), ("zstd-3", "1M", "471.34", "-4623.0", "-0.95")]
    assert [f"{used / 2**30:.2f}" for used in ARCHIVE_USED.values()] == [g[2] for g in got]
    # Each row against its own compression's 128K
    [per] = space_table(archive, parse_selector("recordsize=128K"))
    assert [(r["compression"], r["recordsize"], r["vs baseline MiB"], r["vs baseline %"]) for r in rows_of(per)] == [
        ("lz4", "128K", "+0.0", "+0.00"), ("lz4", "512K", "-81.7", "-0.02"), ("lz4", "1M", "-96.7", "-0.02"),
        ("zstd-3", "128K", "+0.0", "+0.00"), ("zstd-3", "512K", "-160.0", "-0.03"), ("zstd-3", "1M", "-184.0", "-0.04")]
    assert per.title == "archive-recordsize: space on disk (baseline: recordsize=128K)"


def test_archive_recommend_space_only_and_its_honest_no_picks(seeded):
    found, _ = seeded
    rec = recommend(found["archive-recordsize"])
    assert rec.shape == "space"
    assert rec.reason == ("zstd-3 / 1M: the smallest on disk, 471.34 GiB (95.61 % of the logical size), 4.5 GiB "
                          "(0.95 %) less than lz4 / 128K (the first configuration).")
    assert rec.notes == ["no throughput was measured: the pick is on size alone"]
    speed = recommend(found["archive-recordsize"], speed_weight=1)
    assert speed.pick is None and speed.reason == (
        "no throughput was measured: --speed-weight 1 (speed only) has nothing to weigh")
    fast = recommend(found["archive-recordsize"], min_throughput=100e6)
    assert fast.pick is None and fast.reason.startswith("no throughput was measured, so no configuration can be "
                                                        "shown to reach 100.0 MB/s")


def test_archive_chart_is_the_space_one_without_throughput(seeded, tmp_path):
    found, _ = seeded
    paths = charts.write([found["archive-recordsize"]], tmp_path, ("svg",))
    assert [p.name for p in paths] == ["bench-archive-recordsize-space.svg"]
    texts = " ".join(t.text or "" for t in ET.parse(paths[0]).getroot().iter(f"{SVG}text"))
    assert "-4623.0 MiB" in texts and "-81.7 MiB" in texts and "against lz4, 128K" in texts


# --- the eight-disk study: mirror vs RAID-Z2 x compression x encryption, partitions, CPU and disks ----------

def test_layouts_compare_by_layout_with_cpu_cost_and_disk_traffic(seeded):
    found, _ = seeded
    comparison = compare.compare_by(found["eight-disk-study"], "layout")
    table = compare.pair_table(comparison)
    assert table.title == "compare: pool layout 4 x mirror 2-way (fast) vs each other pool layout"
    rows = {(r["workload"], r["compression"], r["encryption"], r["partition"]): r for r in rows_of(table)}
    write = rows["seq-write", "off", "off", "whole disk"]
    # RAID-Z2 writes slightly faster, beyond the repeats' spread
    assert (write["A MB/s"], write["B MB/s"], write["B-A MB/s"], write["(B-A)/A MB/s"]) == (
        "985.0 (977.1-993.9)", "1012.0 (1003.9-1021.1)", "+27.0", "+2.7 %")
    assert write["throughput noise"] == "beyond the repeats' spread (3 and 3 runs)"
    # with 5-10 points more system CPU; the mirrors write every byte twice, RAID-Z2 8/6 of it
    assert (write["A CPU system %"], write["B CPU system %"], write["B-A CPU system pp"]) == (
        "9.0 (8.8-9.3)", "16.5 (16.3-16.8)", "+7.5")
    assert (write["A disk written per byte"], write["B disk written per byte"]) == ("2.00", "1.33")
    read = rows["seq-read", "lz4", "aes-256-gcm", "whole disk"]
    # reads faster, and reads more from the disks than it delivers (parity)
    assert (read["A MB/s"], read["B MB/s"], read["(B-A)/A MB/s"]) == ("1232.4 (1222.5-1243.5)", "1577.9 (1565.3-1592.1)",
                                                                      "+28.0 %")
    assert (read["A disk read per byte"], read["B disk read per byte"]) == ("0.48", "0.58")
    assert (read["B-A CPU system pp"],) == ("+6.0",)
    enc = {(r["workload"], r["compression"], r["pool layout"]): r for r in rows_of(compare.pair_table(
        compare.compare_by(found["eight-disk-study"], "encryption")))}
    cost = enc["seq-write", "off", "4 x mirror 2-way (fast)"]
    # encryption: a little CPU, no throughput
    assert (cost["A CPU %"], cost["B CPU %"], cost["B-A CPU pp"], cost["(B-A)/A MB/s"]) == (
        "12.0 (11.8-12.3)", "14.5 (14.3-14.8)", "+2.5", "-0.4 %")
    assert cost["throughput noise"] == "within the repeats' spread: not a difference"
    part = {(r["workload"], r["compression"], r["pool layout"]): r for r in rows_of(compare.pair_table(
        compare.compare_by(found["eight-disk-study"], "partition")))}
    # a GPT partition under the pool changes nothing
    assert {r["throughput noise"] for r in part.values()} == {"within the repeats' spread: not a difference"}
    assert len(part) == 8


def test_layouts_cli_compare_cells_and_recommend(seeded, capsys):
    _, path = seeded
    db = ["--db", str(path)]
    assert main(["compare", "eight-disk-study:layout=mirror", "eight-disk-study:layout=raidz2", *db]) == 0
    out = capsys.readouterr().out
    assert "### compare: A vs B (pool layout: 4 x mirror 2-way -> raidz2 8-wide; pool: fast -> tank)" in out
    assert "| seq-read | off | off | whole disk | 1095.0 (1086.2-1104.9) | 1402.0 (1390.8-1414.6) | +307.0 | +28.0 % |" in out
    # the findings open the answer, the axis that tells A from B first
    assert out.splitlines()[0].startswith("- pool layout raidz2 8-wide (tank) vs 4 x mirror 2-way (fast): throughput "
                                          "+28 % (1402.0 vs 1095.0 MB/s) in seq-read, +2.7 % (1012.0 vs 985.0 MB/s) in "
                                          "seq-write; CPU +7.5 points")
    assert main(["recommend", "eight-disk-study", *db]) == 0
    out = capsys.readouterr().out
    assert "pick: lz4 / 1M in every one of the 6 settings (encryption, pool layout, partition)." in out
    assert main(["compare", "--by", "layout", "--baseline", "raidz2 8-wide (tank)", *db]) == 0
    assert "| seq-write | off | off | whole disk | raidz2 8-wide (tank) | 4 x mirror 2-way (fast) | 1012.0" in \
        capsys.readouterr().out
    assert main(["compare", "--by", "sync", *db]) == 2        # no matrix varies in it


def test_a_configuration_against_itself_is_its_newest_run_against_the_earlier(seeded, capsys):
    found, path = seeded
    mirror_write = found["eight-disk-study"].summaries[0]
    assert main(["compare", mirror_write.id, mirror_write.id, "--db", str(path)]) == 0
    out = capsys.readouterr().out
    # runs 985.0, 993.9 then 977.1: 977.1 against the median 989.5 of the two before, outside their range
    assert "| 989.5 (985.0-993.9) | 977.1 | -1.2 % | 98.8 % |" in out
    assert "| slower, beyond the noise of the repeats |" in out
    assert out.splitlines()[0] == (f"- seq-write (off / 1M, {mirror_write.id}): slower: the newest run 977.1 MB/s "
                                   "against the previous median 989.5 MB/s (-1.2 %).")


def test_recommend_render_for_each_shape(seeded):
    found, _ = seeded
    text = render_recommendation(recommend(found["zvol-cdm"]))
    assert text.splitlines()[2] == "per setting and workload (throughput):"
    assert "pick per setting: lz4 / volblocksize 4K with ntfs_cluster 4K;" in text
    space = render_recommendation(recommend(found["archive-recordsize"])).splitlines()
    assert space[2].startswith("pick: zstd-3 / 1M: the smallest on disk")


def test_html_report_carries_the_per_workload_picks(seeded):
    from zfsnas.bench.answering import html

    found, _ = seeded
    page = html.page([found["zvol-cdm"]])
    assert ("<li>ntfs_cluster 4K, ram 16G: RND 4KiB Q32T1 write: lz4 / volblocksize 4K: 88.9 MB/s, the fastest; "
            "the slowest, lz4 / volblocksize 16K, reaches 6.0 MB/s (7 %).</li>") in page
    assert ("Pick per setting: lz4 / volblocksize 4K with ntfs_cluster 4K; lz4 / volblocksize 16K with ntfs_cluster "
            "64K (ram does not change it); not decided in any of the 4 settings: one run each (noise unknown).") in page
