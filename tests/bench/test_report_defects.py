"""The defects issue 38 found in the answering commands, one test each, on inputs of their own (the
charts' are in test_report_charts.py, CrystalDiskMark's in test_client_experiments.py, the seeds'
directions and the findings in test_report_findings.py)."""

from __future__ import annotations

import csv
import io
import os
import stat

import pytest

from zfsnas.bench.answering import compare
from zfsnas.bench.answering.recommend import recommend
from zfsnas.bench.answering.report import sections
from zfsnas.bench.answering.tables import configurations_table, space_table
from zfsnas.bench.cli import main
from zfsnas.bench.client.identity import configuration as measured_configuration
from zfsnas.store.configuration import UNKNOWN, pairs
from zfsnas.store.database import ReadOnlyStore, Store
from zfsnas.store.schema import ResultFigures

from .configs import configuration
from .seeds import ARCHIVE_USED, archive_config, fits_config, seeded_store, zvol_cdm_config, zvol_figures

GIB = 2**30


def rows_of(table):
    return [dict(zip(table.headers, row)) for row in table.rows]


def store_of(path, results, matrix="m"):
    """`results`: [(configuration, figures)] stored as one matrix run, in that order."""
    store = Store(path)
    store.start_matrix("r", matrix, "tank/scratch", len(results))
    for cell, (config, figures) in enumerate(results, 1):
        store.record_result("r", cell, config, started=1e9 + cell, finished=1e9 + cell + 1, figures=figures)
    store.finish_matrix("r", "complete")
    return store


def test_a_space_only_matrix_without_logical_size_still_gets_its_pick(tmp_path):
    """`recommend` said "neither throughput nor on-disk size was measured" above a chart of the sizes."""
    store = store_of(tmp_path / "b.sqlite", [(archive_config(c, r), ResultFigures(used_bytes=used))
                                              for (c, r), used in ARCHIVE_USED.items()], "archive-recordsize")
    [section] = sections(store.results())
    rec = recommend(section)
    assert rec.shape == "space" and rec.pick is not None
    assert rec.reason == ("zstd-3 / 1M: the smallest on disk, 471.34 GiB, 4.5 GiB (0.95 %) less than lz4 / 128K (the "
                          "first configuration).")      # no logical size: no "% of the logical size"


def test_hundreds_of_gib_stay_gib_and_their_difference_gets_its_own_column(tmp_path):
    """A 0.1 MiB difference pushed a ~480 GiB table to nine-digit KiB (507137331.2)."""
    used = [480 * GIB + 1024**2 // 10 * k for k in (0, 1)]      # 480 GiB and 0.1 MiB more
    store = store_of(tmp_path / "b.sqlite", [(configuration(compression=c), ResultFigures(used_bytes=u))
                                             for c, u in zip(("lz4", "zstd-3"), used)])
    [section] = sections(store.results())
    table = configurations_table(section)
    assert [r["on-disk GiB"] for r in rows_of(table)] == ["480.000", "480.000"]   # the unit for the magnitude
    [space] = space_table(section)
    assert [(r["on-disk GiB"], r["vs baseline KiB"]) for r in rows_of(space)] == [("480.000", "+0.0"),
                                                                                  ("480.000", "+102.4")]


def test_published_gib_figures_are_not_turned_into_mib(tmp_path):
    """59.2, 47.4 and 47.5 GiB read 60620.8 MiB ... once two of them were 0.1 GiB apart."""
    store = store_of(tmp_path / "b.sqlite", [(fits_config(c, r), ResultFigures(used_bytes=int(gib * GIB)))
                                             for c, r, gib in (("lz4", "1M", 59.2), ("zstd-1", "1M", 47.4),
                                                               ("zstd-1", "512K", 47.5))], "fits-copy")
    [section] = sections(store.results())
    assert [r["on-disk GiB"] for r in rows_of(configurations_table(section))] == ["59.2", "47.4", "47.5"]


def test_a_percentage_from_a_two_digit_ratio_has_the_digits_the_ratio_has(tmp_path):
    """1 / 1.19 was printed 84.03 %: a ratio of 1.19 means 1.185 to 1.195, 83.7 to 84.4 %."""
    store = store_of(tmp_path / "b.sqlite", [(fits_config(c, "1M"), ResultFigures(used_bytes=int(gib * GIB),
                                                                                  compressratio=ratio))
                                             for c, ratio, gib in (("lz4", 1.19, 59.2), ("zstd-1", 1.48, 47.4))],
                     "fits-copy")
    [section] = sections(store.results())
    rows = rows_of(configurations_table(section))
    assert [(r["ratio"], r["% of uncompressed"]) for r in rows] == [("1.19", "84"), ("1.48", "68")]


def _local_and_iscsi(path):
    """CrystalDiskMark on the PC's own disk (nothing recorded but the label) and over iSCSI on zvols of
    4K and 16K volblocksize, each of the eight tests: what `import crystaldiskmark` stores."""
    store = Store(path)
    runs = [("local", {}), ("4K", {"volblocksize": "4K", "compression": "lz4"}),
            ("16K", {"volblocksize": "16K", "compression": "lz4"})]
    for n, (name, props) in enumerate(runs, 1):
        results = []
        for workload in ("cdm-seq1m-q8t1-read", "cdm-rnd4k-q32t1-write"):
            mbs, iops, latency = zvol_figures(workload, "4K" if name == "local" else name, "16G", "4K")
            settings = [*props.items(), ("client", "local-nvme" if name == "local" else "win11-iscsi")]
            config = measured_configuration("client-cdm", workload, "1GiB",
                                            {"source": "crystaldiskmark 8.0.4", "test_size": "1 GiB",
                                             "passes": "5"}, None, list(settings))
            results.append((config, ResultFigures(throughput_bytes_per_second=mbs * 1e6 * (3 if name == "local" else 1),
                                                  iops=iops, latency_us=latency)))
        store.import_results(f"import-{n}", "client-cdm", UNKNOWN, results, 1e9 + n, 1e9 + n)
    return store


def test_compare_by_client_against_a_local_disk_pairs_every_workload(tmp_path, capsys):
    """`compare --by client` said no workload was measured at both, though all of them were: the local
    run has no volblocksize, which tells it from nothing."""
    store = _local_and_iscsi(tmp_path / "b.sqlite")
    [section] = sections(store.results())
    comparison = compare.compare_by(section, "client", "local-nvme")
    got = sorted((p.a.workload, p.b.config.dataset_property("volblocksize"), p.values) for p in comparison.pairs)
    assert got == [(w, v, ("local-nvme (unknown)", "win11-iscsi (lz4)"))
                   for w in ("cdm-rnd4k-q32t1-write", "cdm-seq1m-q8t1-read") for v in ("16K", "4K")]
    store.close()
    assert main(["compare", "--by", "client", "--baseline", "local-nvme", "--db", str(tmp_path / "b.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "### compare: client local-nvme (unknown) vs each other client" in out
    assert ("| RND 4KiB Q32T1 write | 16K | local-nvme (unknown) | win11-iscsi (lz4) | 266.7 | 6.0 | -260.7 | -97.8 % |"
            in out)


def test_what_was_not_recorded_reads_unknown_in_compare_as_in_report(tmp_path):
    """compare wrote `(none)` where report writes `unknown`."""
    store = _local_and_iscsi(tmp_path / "b.sqlite")
    rows = store.results()
    local = [r for r in rows if r.run_id == "import-1"]
    zvol = [r for r in rows if r.run_id == "import-3"]
    differs = compare.compare(local, zvol, 0.15).differs
    assert "volblocksize: unknown -> 16K" in differs and not any("(none)" in d for d in differs)


def test_the_change_column_is_named_for_what_it_holds(tmp_path):
    """`B/A MB/s` held (B-A)/A."""
    store = store_of(tmp_path / "b.sqlite", [(configuration(compression=c), ResultFigures(throughput_bytes_per_second=t))
                                             for c, t in (("lz4", 500e6), ("zstd-3", 300e6))])
    rows = store.results()
    table = compare.pair_table(compare.compare(rows[:1], rows[1:], 0.15))
    row = dict(zip(table.headers, table.rows[0]))
    assert "B/A MB/s" not in table.headers and row["(B-A)/A MB/s"] == "-40.0 %"
    assert "(B-A)/A: the change from A to B in % of A" in table.note


def test_recommend_notes_a_setting_with_one_option_for_what_it_is(tmp_path):
    """The note said such configurations "differ in more than dataset properties"; they are the only
    option measured in their setting."""
    results = [(fits_config(c, "1M"), ResultFigures(throughput_bytes_per_second=t * 1e6, compressratio=r,
                                                    used_bytes=int(g * GIB)))
               for c, t, r, g in (("lz4", 138.0, 1.19, 59.2), ("zstd-1", 175.0, 1.48, 47.4))]
    results += [(fits_config("zstd-1", "512K", size), ResultFigures(throughput_bytes_per_second=t * 1e6))
                for size, t in (("70G", 190.6), ("5G", 477.9))]
    store = store_of(tmp_path / "b.sqlite", results, "fits-copy")
    [section] = sections(store.results())
    assert recommend(section).notes[0] == ("2 configuration(s) of fits-copy are the only option measured in their "
                                           "setting (size 70G, 5G): nothing to choose there")


def test_recommend_answers_with_a_pick_per_setting_when_the_settings_disagree(tmp_path, capsys):
    """It ended "no pick: the settings disagree" with exit status 1."""
    store = Store(tmp_path / "b.sqlite")
    for n, (volblocksize, ntfs) in enumerate((("4K", "4K"), ("16K", "4K"), ("4K", "64K"), ("16K", "64K")), 1):
        results = []
        for workload in ("cdm-seq1m-q1t1-write", "cdm-rnd4k-q32t1-write"):
            mbs, iops, latency = zvol_figures(workload, volblocksize, "16G", ntfs)
            results.append((zvol_cdm_config(workload, volblocksize, "16G", ntfs),
                            ResultFigures(throughput_bytes_per_second=mbs * 1e6, iops=iops, latency_us=latency)))
        store.import_results(f"i{n}", "zvol-cdm", "tank/vm", results, 1e9 + n, 1e9 + n)
    store.close()
    assert main(["recommend", "zvol-cdm", "--db", str(tmp_path / "b.sqlite")]) == 0
    out = capsys.readouterr().out
    assert ("pick per setting: lz4 / volblocksize 4K with ntfs_cluster 4K; lz4 / volblocksize 16K with ntfs_cluster "
            "64K.") in out
    assert "note: the pick depends on ntfs_cluster: no one configuration is best in every setting" in out


def test_a_clients_own_clock_is_not_listed_as_utc(tmp_path, capsys):
    """`list` showed a CrystalDiskMark file's date (the PC's local time) converted as if it were the
    NAS's and labelled `started (UTC)`."""
    from .test_client_experiments import CDM8

    path = tmp_path / "cdm.txt"
    path.write_text(CDM8)
    db = tmp_path / "b.sqlite"
    assert main(["import", "crystaldiskmark", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["list", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t")[:2] == ["id", "started"]
    assert {line.split("\t")[1] for line in lines[1:]} == {"2023/05/14 19:02:55 (the client's local time)"}


def test_csv_keeps_the_figures_precision(tmp_path, capsys):
    """CSV rounded MB/s to one decimal: 216.271 MB/s read 216.3."""
    store_of(tmp_path / "b.sqlite", [(configuration(compression=c), ResultFigures(throughput_bytes_per_second=t))
                                     for c, t in (("lz4", 216.271e6), ("zstd-3", 188.484e6))]).close()
    assert main(["report", "--db", str(tmp_path / "b.sqlite"), "--format", "csv"]) == 0
    text = capsys.readouterr().out
    rows = list(csv.reader(io.StringIO("\n".join(x for x in text.splitlines() if not x.startswith("# ")))))
    header = rows.index(["m: configurations"]) + 1
    table = [dict(zip(rows[header], r)) for r in rows[header + 1:header + 3]]
    assert [r["MB/s"] for r in table] == ["216.271", "188.484"]
    assert markdown_cell(tmp_path) == "216.3"       # the Markdown table: the digits a reader needs


def markdown_cell(tmp_path):
    [section] = sections(ReadOnlyStore(tmp_path / "b.sqlite").results())
    return rows_of(configurations_table(section))[0]["MB/s"]


def test_the_html_report_is_as_readable_as_the_charts_beside_it(tmp_path):
    """report -o wrote the page 0600 (mkstemp's) while --png wrote 0644."""
    seeded_store(tmp_path / "b.sqlite", ("iso",)).close()
    old = os.umask(0o022)
    try:
        assert main(["report", "--db", str(tmp_path / "b.sqlite"), "--format", "html", "-o", str(tmp_path / "r.html"),
                     "--png", str(tmp_path / "png")]) == 0
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [tmp_path / "r.html", *(tmp_path / "png").iterdir()]}
    assert set(modes.values()) == {0o644}, modes
    (tmp_path / "r.html").chmod(0o640)      # replacing a report keeps the mode it was given
    assert main(["report", "--db", str(tmp_path / "b.sqlite"), "-o", str(tmp_path / "r.html"), "--force"]) == 0
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o640


@pytest.mark.parametrize(("names", "kind"), [
    (["ata-X", "ata-Y"], "whole disk"), (["ata-X-part3", "ata-Y-part3"], "partition"),
    (["sda", "sdb1"], "mixed"), (["nvme0n1p2", "nvme1n1p2"], "partition"), (["ada0", "ada1"], "whole disk"),
    (["gpt/disk0", "gpt/disk1"], "partition"), (["ada0p3", "ada1p3"], "partition"),
    (["1f6d2d3a-58f3-4cbb-a6b5-86d3f83c9d4a", "0c0e4f2b-1d22-4a6a-9e3c-b6c7e0c2d1f0"], "partition"),
])
def test_the_layout_says_whole_disks_or_partitions(names, kind):
    """There was no way to record "GPT partition vs whole disk": `zpool status` without -P names a disk
    ZFS was given whole without the partition it made on it."""
    from zfsnas.store.configuration import pool_layout

    def status(leaves):
        rows = "".join(f"\t    {leaf}  ONLINE       0     0     0\n" for leaf in leaves)
        return (f"  pool: tank\n state: ONLINE\nconfig:\n\n\tNAME        STATE     READ WRITE CKSUM\n"
                f"\ttank        ONLINE       0     0     0\n\t  mirror-0  ONLINE       0     0     0\n{rows}\n"
                "errors: No known data errors\n")
    paths = [f"/dev/disk/by-id/{n}-part1" if "/" not in n and not n[0].isdigit() else f"/dev/{n}" for n in names]
    assert dict(pool_layout(status(paths), "tank", "12", None, status(names)))["partition"] == kind
    # results of a release that did not read it keep their layout, and so their ids
    assert "partition" not in dict(pool_layout(status(paths), "tank", "12"))


def test_the_partition_is_an_axis_of_the_report(tmp_path):
    layout = dict(pairs({"vdevs": "data:raidz2:8", "ashift": "12", "models": "HDD x8"}))
    results = [(configuration(layout=pairs({**layout, "partition": p})), ResultFigures(throughput_bytes_per_second=t))
               for p, t in (("whole disk", 1000e6), ("partition", 1002e6))]
    [section] = sections(store_of(tmp_path / "b.sqlite", results).results())
    assert [(a.name, a.values, a.reference) for a in section.axes] == [
        ("partition", ("whole disk", "partition"), "whole disk")]
