"""What each experiment found, first: the five published seeds' findings sentence by sentence (the
first five lines of `report` and of the HTML page), and, over seeded variations of every kind of
matrix, the invariants the findings keep whatever the shape: at most five sentences, every number a
cell of the table it summarizes, directions that agree with the figures, the noise said as the
repeats have it, values in their natural order. docs/benchmarks.md shows each seed's block as the
code writes it."""

from __future__ import annotations

import math
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from zfsnas.bench import html
from zfsnas.bench.axes import magnitude
from zfsnas.bench.cli import main
from zfsnas.bench.config import pairs
from zfsnas.bench.document import opening
from zfsnas.bench.findings import MOST
from zfsnas.bench.report import sections
from zfsnas.bench.store import ResultFigures, Store
from zfsnas.bench.tables import configurations_table, section_tables

from .configs import MIRRORS, RAIDZ2, configuration
from .seeds import LOADERS, seeded_store

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ("fits-copy", "eight-disk-study", "iso-rsync", "archive-recordsize", "zvol-cdm")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    path = tmp_path_factory.mktemp("findings") / "bench.sqlite"
    seeded_store(path, tuple(LOADERS)).close()
    store = Store(path)
    found = {s.matrix: s for s in sections(store.results())}
    store.close()
    return found, path


def report_lines(path: Path, matrix: str, capsys) -> list[str]:
    assert main(["report", "--db", str(path), "--matrix", matrix]) == 0
    return capsys.readouterr().out.splitlines()


class _Items(HTMLParser):
    """The page's first heading, the items of its first list of findings, and the order of its tags."""

    def __init__(self) -> None:
        super().__init__()
        self.h1 = ""
        self.items: list[str] = []
        self.order: list[str] = []
        self._in: str | None = None
        self._findings = self._done = False

    def handle_starttag(self, tag, attrs):
        self.order.append(tag)
        if tag == "h1" and not self.h1:
            self._in = "h1"
        elif tag == "ol" and dict(attrs).get("class") == "findings" and not self._done:
            self._findings = True
        elif tag == "li" and self._findings:
            self._in = "li"
            self.items.append("")

    def handle_endtag(self, tag):
        if tag in ("h1", "li"):
            self._in = None
        if tag == "ol" and self._findings:
            self._findings, self._done = False, True

    def handle_data(self, data):
        if self._in == "h1":
            self.h1 += data
        elif self._in == "li":
            self.items[-1] += data


def page_lines(section) -> tuple[str, list[str], list[str]]:
    parser = _Items()
    parser.feed(html.page([section]))
    return parser.h1, parser.items, parser.order


# --- the five published experiments, sentence by sentence ---------------------------------------------------

EXPECTED = {
    "fits-copy": [
        # 1: what moves what: the write size and compression move throughput most, recordsize little;
        #    compression moves the size; nobody repeated the copies
        "Ranked by how much they move each figure (one run per configuration: whether this exceeds the noise is "
        "unknown): throughput size 2.51x, compression 2.33x, recordsize 1.09x; on-disk size compression 1.27x, "
        "recordsize 1.01x.",
        # 2: writes larger than zfs_dirty_data_max run at the disk's speed: 477.9 MB/s at 5G, 190.6 at 70G
        "size: throughput (at compression zstd-1, recordsize 512K): falls from 477.9 MB/s at 5G to 190.6 MB/s at "
        "70G (-60 %), past zfs_dirty_data_max (16.0 GiB).",
        # 3: the post's compression table: zstd-fast fastest, zstd-3 slowest and smallest, lz4 the biggest
        "compression: throughput (at recordsize 1M, size all): zstd-fast 191.8 > zstd-1 175.0 > lz4 138.0 > "
        "zstd-3 82.3 MB/s; on-disk size (at recordsize 1M, size all): zstd-3 46.6 < zstd-1 47.4 < zstd-fast 53.1 "
        "< lz4 59.2 GiB.",
        # 4: the recordsize sweep the post published: 512K fastest (190.6), sizes within 1.5 % (47.4-48.1 GiB)
        "recordsize: throughput (at compression zstd-1, size all): 512K 190.6 > 256K 184.0 > 128K 180.7 > 1M "
        "175.0 MB/s; on-disk size (at compression zstd-1, size all): falls from 48.1 GiB at 128K to 47.4 GiB at 1M "
        "(-1.5 %).",
        # 5: the post's conclusion: zstd-1 with 512K records
        "Pick: zstd-1 / 512K: 99 % of the fastest (zstd-fast / 1M, 191.8 MB/s), 10 % smaller than zstd-fast / 1M, "
        "19 % smaller than lz4 / 1M.",
    ],
    "eight-disk-study": [
        # 1: compression moves throughput, size and CPU most; the layout throughput, CPU and disk traffic;
        #    encryption a little CPU; the partition nothing (not in the ranking)
        "Ranked by how much they move each figure: throughput compression 1.60x, pool layout 1.28x; on-disk size "
        "compression 2.46x; CPU compression 40.0 points, pool layout 7.5 points, encryption 2.5 points; disk "
        "writes per byte written compression 2.46x, pool layout 1.52x; disk reads per byte read compression "
        "2.47x, pool layout 1.21x.",
        # 2: lz4 is the fastest; zstd-fast-10 reads slower than no compression; zstd-3 compresses best at the
        #    lowest throughput; CPU vs none: lz4 +20 writing/+10 reading, zstd-fast-10 +30/+13, zstd-3 +40/+13
        "compression: throughput: seq-write lz4 1152.4 > zstd-fast-10 1054.0 > off 985.0 > zstd-3 719.0 MB/s, "
        "seq-read lz4 1237.3 > off 1095.0 > zstd-fast-10 1007.4 > zstd-3 897.9 MB/s; on-disk size: zstd-3 6.5 < "
        "lz4 7.6 < zstd-fast-10 8.6 < off 16.0 GiB; CPU vs off: lz4 +20.0/+10.0, zstd-fast-10 +30.0/+13.0, zstd-3 "
        "+40.0/+13.0 points (seq-write/seq-read); all beyond the repeats' spread.",
        # 3: RAID-Z2 reads faster and writes slightly faster, with 5-10 more points of (system) CPU; the
        #    mirrors write every byte to two disks, RAID-Z2 8/6 of it; RAID-Z2 reads more than it delivers
        "pool layout raidz2 8-wide (tank) vs 4 x mirror 2-way (fast): throughput +28 % (1402.0 vs 1095.0 MB/s) "
        "in seq-read, +2.7 % (1012.0 vs 985.0 MB/s) in seq-write; CPU +7.5 points (19.5 vs 12.0 %) in seq-write, "
        "+6.0 points (14.0 vs 8.0 %) in seq-read; disk writes per byte written -34 % (1.33 vs 2.00) in seq-write; "
        "disk reads per byte read +21 % (1.21 vs 1.00) in seq-read; all beyond the repeats' spread.",
        # 4: encryption costs a little CPU and no throughput; a GPT partition changes nothing
        "encryption aes-256-gcm vs off: CPU +2.5 points (beyond the repeats' spread), throughput at most -0.4 % "
        "(within the repeats' spread); partition vs whole disk: throughput at most +0.2 %, CPU at most +0.1 "
        "points (within the repeats' spread).",
        # 5: the compression to choose on either layout
        "Pick: lz4 / 1M in every one of the 6 settings (encryption, pool layout, partition).",
    ],
    "iso-rsync": [
        # 1: the post's table in one line: lz4 and zstd-3 as fast as no compression, zstd-19 a fifth of it;
        #    every compression 4-5 % smaller than off (502.4 GiB), zstd-19 the smallest (475.3)
        "compression: throughput: lz4 121.4 > zstd-3 120.6 > zstd-7 116.4 > off 114.2 > zstd-15 105.3 > gzip-9 "
        "75.1 > zstd-19 25.7 MB/s; on-disk size: zstd-19 475.3 < zstd-15 476.3 < zstd-7 476.5 < zstd-3 477.3 < "
        "gzip-9 478.8 < lz4 483.6 < off 502.4 GiB.",
        # 2: one copy each
        "One run per configuration: whether these differences exceed the noise is unknown (repeat the matrix to "
        "know).",
        # 3: zstd-3: lz4's speed, 1 % smaller
        "Pick: zstd-3 / 1M: 99 % of the fastest (lz4 / 1M, 121.4 MB/s), 1 % smaller than lz4 / 1M.",
    ],
    "archive-recordsize": [
        # 1: zstd-3 saves 0.9 % against lz4 (GiB for hundreds of GiB, two decimals to show it)
        "compression zstd-3 vs lz4: on-disk size -0.9 % (471.52 vs 475.85 GiB).",
        # 2: recordsize next to nothing
        "recordsize: on-disk size at most -0.04 %.",
        "One run per configuration: whether these differences exceed the noise is unknown (repeat the matrix to "
        "know).",
        # 4: the smallest, with what it saves
        "Pick: zstd-3 / 1M: the smallest on disk, 471.34 GiB (95.61 % of the logical size), 4.5 GiB (0.95 %) less "
        "than lz4 / 128K (the first configuration).",
    ],
    "zvol-cdm": [
        # 1: volblocksize and the NTFS cluster move throughput by 15x, RAM by 1.4x
        "Ranked by how much they move each figure (one run per configuration: whether this exceeds the noise is "
        "unknown): throughput volblocksize 14.8x, ntfs_cluster 14.5x, ram 1.40x.",
        # 2: the decisive finding: RND 4K Q32 writes 88.9 -> 6.0 MB/s (-93 %) when volblocksize 16K meets NTFS
        #    4K clusters, and not with 64K clusters (volblocksize x NTFS cluster)
        "volblocksize: throughput (at ntfs_cluster 4K): RND 4KiB Q32T1 write falls from 88.9 MB/s at 4K to 6.0 "
        "MB/s at 16K (-93 %), but with ntfs_cluster 64K 86.2 to 87.0 MB/s (+0.9 %), RND 4KiB Q1T1 write falls "
        "from 14.7 MB/s at 4K to 5.3 MB/s at 16K (-64 %), the other 6 workloads -4.2 to +3.4 %.",
        # 3: the same interaction from the cluster's side
        "ntfs_cluster 64K vs 4K: throughput (at volblocksize 16K) +1350 % (87.0 vs 6.0 MB/s) in RND 4KiB Q32T1 "
        "write, but with volblocksize 4K 88.9 to 86.2 MB/s (-3.0 %), +175 % (14.6 vs 5.3 MB/s) in RND 4KiB Q1T1 "
        "write, the other 6 workloads -3.0 to 0 %.",
        # 4: RAM x workload: more RAM speeds up random reads, nothing else
        "ram 32G vs 16G: throughput +40 % (85.8 vs 61.3 MB/s) in RND 4KiB Q32T1 read, +30 % (12.7 vs 9.8 MB/s) in "
        "RND 4KiB Q1T1 read, the other 6 workloads 0 to +1.0 %.",
        # 5: recommend answers per setting: 4K blocks with 4K clusters, 16K with 64K; RAM does not decide
        "Pick per setting: lz4 / volblocksize 4K with ntfs_cluster 4K; lz4 / volblocksize 16K with ntfs_cluster "
        "64K (ram does not change it).",
    ],
}


@pytest.mark.parametrize("matrix", PUBLISHED)
def test_the_first_lines_of_report_state_the_experiments_conclusion(seeded, matrix, capsys):
    _, path = seeded
    lines = report_lines(path, matrix, capsys)
    expected = EXPECTED[matrix]
    assert lines[:len(expected)] == [f"- {sentence}" for sentence in expected]
    assert lines[len(expected)] == ""            # then the details
    assert "# zfsnas-bench report" in lines


@pytest.mark.parametrize("matrix", PUBLISHED)
def test_the_html_page_opens_with_the_same_sentences(seeded, matrix):
    found, _ = seeded
    h1, items, order = page_lines(found[matrix])
    assert h1 == found[matrix].title
    assert items == EXPECTED[matrix]
    # nothing between the title and the findings: no chart, no table first
    body = order[order.index("h1"):]
    assert body[1] == "ol" and "img" not in body[:body.index("ol")] and "table" not in body[:body.index("ol")]


def test_csv_opens_with_the_findings_as_comments(seeded, capsys):
    _, path = seeded
    assert main(["report", "--db", str(path), "--matrix", "zvol-cdm", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [f"# {sentence}" for sentence in EXPECTED["zvol-cdm"]]
    assert lines[5] == "zvol-cdm: the findings' evidence"


def test_a_report_of_several_matrices_opens_with_each_ones_findings(seeded, capsys):
    _, path = seeded
    assert main(["report", "--db", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[:lines.index("")]
    for matrix in PUBLISHED:
        assert [line for line in head if line.startswith(f"- {matrix}: ")] == [
            f"- {matrix}: {sentence}" for sentence in EXPECTED[matrix]]


def test_compare_and_recommend_open_with_findings_too(seeded, capsys):
    _, path = seeded
    assert main(["compare", "--by", "volblocksize", "zvol-cdm", "--db", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"- {EXPECTED['zvol-cdm'][1]}"      # the axis asked about first
    assert main(["recommend", "fits-copy", "--db", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[:5] == [f"- {s}" for s in EXPECTED["fits-copy"]]


def test_the_docs_show_each_experiments_findings_as_the_code_writes_them(seeded):
    """docs/benchmarks.md quotes each seed's block in a ```findings fence under a line naming the matrix."""
    found, _ = seeded
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    blocks = dict(re.findall(r"<!-- findings: ([a-z0-9-]+) -->\n```\n(.*?)\n```", docs, re.S))
    assert set(blocks) >= set(PUBLISHED)
    for matrix in PUBLISHED:
        assert blocks[matrix].splitlines() == [f"- {line}" for line in opening(found[matrix]).lines()], matrix


# --- invariants over seeded variations of every kind of matrix ----------------------------------------------

SIZES = ("4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M")
AXES = {
    "compression": ("off", "lz4", "zstd-1", "zstd-3", "zstd-fast-10", "gzip-9"),
    "recordsize": SIZES[4:],
    "volblocksize": SIZES[:5],
    "encryption": ("off", "aes-256-gcm"),
    "ram": ("8G", "16G", "32G", "64G"),
    "ntfs_cluster": ("4K", "64K"),
    "layout": ("mirror", "raidz2"),
    "partition": ("whole disk", "partition"),
    "size": ("5G", "10G", "20G", "70G"),
}
WORKLOADS = ("seq-write", "seq-read", "cdm-rnd4k-q32t1-write", "cdm-seq1m-q8t1-read", "copy")


def variation(seed: int):
    """A matrix of a random shape: 1-3 axes (never recordsize with volblocksize), 1-3 workloads, cells
    dropped at random, run in a shuffled order, one or three repeats, and figures from random effects
    (each value of each axis a factor, one random interaction), some figures not measured at all."""
    rng = random.Random(seed)
    names = [n for n in AXES if n != "volblocksize"] if rng.random() < 0.5 else [n for n in AXES if n != "recordsize"]
    chosen = rng.sample(names, rng.randint(1, 3))
    values = {n: rng.sample(AXES[n], rng.randint(2, min(4, len(AXES[n])))) for n in chosen}
    workloads = rng.sample(WORKLOADS, rng.randint(1, 3))
    effect = {(n, v): math.exp(rng.gauss(0, 0.4)) for n in chosen for v in values[n]}
    twist = (rng.choice(chosen), rng.choice(workloads), math.exp(rng.gauss(0, 1.0)))
    repeats = rng.choice((1, 3))
    measured = {"used": rng.random() < 0.6, "cpu": rng.random() < 0.5, "disks": rng.random() < 0.3,
                "ratio": rng.random() < 0.5}
    cells = [dict(zip(chosen, combo)) for combo in _product([values[n] for n in chosen])]
    cells = [(w, c) for w in workloads for c in cells if rng.random() < 0.85]
    rng.shuffle(cells)
    return chosen, cells, effect, twist, repeats, measured, rng


def _product(lists):
    out = [[]]
    for values in lists:
        out = [o + [v] for o in out for v in values]
    return [tuple(o) for o in out]


def _config(workload: str, cell: dict[str, str]):
    props = {"compression": cell.get("compression", "lz4"), "encryption": cell.get("encryption", "off")}
    if "volblocksize" in cell:
        props.update(recordsize="", volblocksize=cell["volblocksize"])
    layout = dict(MIRRORS if cell.get("layout") == "mirror" else RAIDZ2)
    if "partition" in cell:
        layout["partition"] = cell["partition"]
    labels = {k: cell[k] for k in ("ram", "ntfs_cluster") if k in cell}
    return configuration(matrix="variation", workload=workload, recordsize=cell.get("recordsize", "1M"),
                         size=cell.get("size", "16G"), properties=props, layout=pairs(layout),
                         pool="fast" if cell.get("layout") == "mirror" else "tank",
                         user_labels=pairs(labels))


def load_variation(store: Store, seed: int) -> None:
    chosen, cells, effect, twist, repeats, measured, rng = variation(seed)
    run = f"var-{seed}"
    store.start_matrix(run, "variation", "tank/scratch", len(cells))
    for n, (workload, cell) in enumerate(cells, 1):
        factor = math.prod(effect[a, v] for a, v in cell.items())
        if workload == twist[1] and twist[0] in cell and cell[twist[0]] == sorted(cell and [cell[twist[0]]])[0]:
            factor *= twist[2]
        base = {"seq-write": 800.0, "seq-read": 1100.0, "copy": 180.0}.get(workload, 90.0)
        for repeat in range(repeats):
            jitter = 1 + (rng.uniform(-0.02, 0.02) if repeats > 1 else 0)
            mbs = base * factor * jitter
            logical = 16 * 2**30
            ratio = round(1 + 1.5 * effect.get(("compression", cell.get("compression", "")), 0.5) % 1.5, 2)
            figures = dict(throughput_bytes_per_second=mbs * 1e6, bytes=int(mbs * 1e6 * 60))
            if measured["used"]:
                figures.update(used_bytes=int(logical / ratio), logicalused_bytes=logical)
            if measured["ratio"]:
                figures.update(compressratio=ratio)
            if measured["cpu"]:
                busy = min(90.0, 10 * factor * jitter)
                figures.update(cpu_user_seconds=busy * 0.3, cpu_system_seconds=busy * 0.7, cpu_iowait_seconds=2.0,
                               cpu_idle_seconds=98.0 - busy)
            if measured["disks"]:
                written = mbs * 1e6 * 60 * (2.0 if cell.get("layout") == "mirror" else 1.34)
                figures.update(disks={"sda": {"written_bytes": int(written / 2), "read_bytes": 0},
                                      "sdb": {"written_bytes": int(written / 2), "read_bytes": 0}})
            store.record_result(run, n, _config(workload, cell), repeat=repeat + 1, started=1e9 + n * 100 + repeat,
                                finished=1e9 + n * 100 + repeat + 60, figures=ResultFigures(**figures))
    store.finish_matrix(run, "complete")


NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])")


def _cells(table) -> dict[str, dict[str, str]]:
    return {row[0]: dict(zip(table.headers, row)) for row in table.rows}


def _median(cell: str) -> str:
    return cell.split(" (")[0]


def check_invariants(section) -> None:
    block = opening(section)
    assert 1 <= len(block.sentences) <= MOST
    config = _cells(configurations_table(section))
    tables = {t.title: t for t in section_tables(section)}
    names = {v for a in section.axes for v in a.values} | {a.name for a in section.axes} | {
        "RND 4KiB Q32T1 write", "SEQ 1MiB Q8T1 read", "seq-write", "seq-read", "copy"} | {
        s.label for s in section.summaries}
    for finding in block.sentences:
        text = finding.text
        # every comparison cited: its figures are the configurations table's cells
        for c in finding.evidence:
            header = next(h for h in config[c.a.id] if h == _column(c.measure.figure, config[c.a.id]))
            assert _median(config[c.a.id][header]) == c.a_text, (text, header)
            assert _median(config[c.b.id][header]) == c.b_text, (text, header)
        # every number it says is one it cites (from the evidence, or a named table's cell)
        for title, column, cell in finding.elsewhere:
            assert any(row[tables[title].headers.index(column)] == cell for row in tables[title].rows)
        if finding.about in ("pick", "noise", "nothing"):
            continue
        stripped = re.sub(r"\b\d+ (workloads|settings)\b", " ", text)     # counts, not figures
        for name in sorted(names, key=len, reverse=True):
            stripped = stripped.replace(name, " ")
        cited = {n.lstrip("+-") for n in finding.numbers} | {x[2] for x in finding.elsewhere}
        for token in NUMBER.findall(stripped):
            assert token.lstrip("+-") in cited, (token, text)
        # directions agree with the figures: `+x % (b vs a` and `-x % (b vs a`
        for pct, b, a in re.findall(r"([-+]\d+(?:\.\d+)?) % \((\d+(?:\.\d+)?) vs (\d+(?:\.\d+)?)", text):
            assert (float(pct) > 0) == (float(b) > float(a)), text
            assert abs(float(pct) - (float(b) / float(a) - 1) * 100) <= 0.51 + 100 * 0.05 / float(a), text
        for pts, b, a in re.findall(r"([-+]\d+(?:\.\d+)?) points \((\d+(?:\.\d+)?) vs (\d+(?:\.\d+)?)", text):
            assert abs(float(pts) - (float(b) - float(a))) <= 0.11, text
        for a, b, pct in re.findall(r"(\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) (?:MB/s|GiB|MiB|KiB|%)? ?\(([-+]\d+(?:\.\d+)?) %\)",
                                    text):
            assert (float(pct) > 0) == (float(b) > float(a)), text
        for chain in re.findall(r"(?:[\w./-]+ \d+(?:\.\d+)? [<>] )+[\w./-]+ \d+(?:\.\d+)?", text):
            figures = [float(x) for x in re.findall(r" (\d+(?:\.\d+)?)(?: [<>]|$)", chain)]
            assert figures == sorted(figures, reverse=">" in chain), chain
        for kind, start, end in re.findall(r"(rises|falls) from (\d+(?:\.\d+)?) \S* ?at \S+ to (\d+(?:\.\d+)?)", text):
            assert (float(end) > float(start)) == (kind == "rises"), text
        # the noise said as the repeats have it
        if all(s.runs < 2 for s in section.summaries):
            assert "repeats' spread" not in text
        if "beyond the repeats' spread" in text:
            assert any(c.noise == "beyond" for c in finding.evidence), text
        if "within the repeats' spread" in text:
            assert any(c.noise == "within" for c in finding.evidence), text
    # the axes' values in their natural order, in the tables too
    for axis in section.axes:
        sized = [v for v in axis.values if magnitude(v) is not None]
        assert sized == sorted(sized, key=magnitude)
    for table in tables.values():
        sized = [h.rsplit(" ", 1)[-1] for h in table.headers if magnitude(h.rsplit(" ", 1)[-1]) is not None
                 and " " in h and h.split(" ")[0] in {a.name for a in section.axes}]
        assert sized == sorted(sized, key=magnitude), table.title


def _column(figure: str, row: dict[str, str]) -> str:
    wanted = {"throughput": "MB/s", "used": "on-disk", "ratio": "ratio", "cpu": "CPU %",
              "disk_written": "disk written per byte", "disk_read": "disk read per byte"}[figure]
    return next(h for h in row if h == wanted or h.startswith(f"{wanted} "))


@pytest.mark.parametrize("seed", range(40))
def test_findings_of_any_shape_keep_their_invariants(seed, tmp_path):
    store = Store(tmp_path / "b.sqlite")
    load_variation(store, seed)
    [section] = sections(store.results())
    store.close()
    check_invariants(section)


@pytest.mark.parametrize("matrix", PUBLISHED + ("fio-seq", "cdm-zvol"))
def test_the_seeds_keep_the_same_invariants(seeded, matrix):
    found, _ = seeded
    check_invariants(found[matrix])
