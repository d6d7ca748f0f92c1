"""Kstat parsers on every fixture version, and on broken input."""

import pytest

from tests.conftest import LINUX_VERSIONS, linux_tree
from zfsnas.sources.kstat import (
    KstatFormatError,
    NamedKstat,
    histogram_buckets,
    named_kstat_body,
    named_kstat_rows,
    parse_io_kstat,
    parse_named_body,
    parse_named_kstat,
    parse_named_rows,
    parse_txgs,
)

KSTAT = "proc/spl/kstat/zfs"
# Fields per version as OpenZFS publishes them: 2.1 has 123, 2.2 and later 147 (shared/NOTES.md).
ARC_FIELDS = {"0.8.6": 97, "2.0.7": 123, "2.1.11": 123, "2.2.7": 147, "2.3.2": 147}


def read(version, name):
    return (linux_tree(version) / KSTAT / name).read_text()


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_arcstats_every_version(version):
    arc = parse_named_kstat(read(version, "arcstats"))
    assert len(arc.values) == ARC_FIELDS[version]
    assert arc.values["hits"] == 48_211_907
    assert arc.values["size"] == 11_811_160_064
    assert arc.values["c_max"] == 16 << 30
    assert arc.values["anon_size"] == 137_363_456
    assert ("p" in arc.values) == (version < "2.2")
    assert ("iohits" in arc.values) == (version >= "2.2")
    assert arc.strings == {}


def test_arcstats_negative_int64_and_values_above_2_53():
    assert parse_named_kstat(read("2.2.7", "arcstats")).values["memory_available_bytes"] == -268_435_456
    assert parse_named_kstat(read("2.3.2", "arcstats")).values["l2_write_bytes"] == 2**53 + 12_345_678_901


def test_named_rows_with_spaces_in_name_and_data():
    text = ("5 1 0x01 3 816 1 2\nname                            type data\n"
            "1 ns                            4    17\n"
            "dataset_name                    7    tank/media files 2024\n"
            "128 ns                          4    0\n")
    named = parse_named_kstat(text)
    assert named.values == {"1 ns": 17, "128 ns": 0}
    assert named.strings == {"dataset_name": "tank/media files 2024"}


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_txgs_every_version(version):
    txgs = parse_txgs(read(version, "tank/txgs"))
    assert len(txgs) == 24
    assert [t.state for t in txgs[-2:]] == ["S", "O"]
    assert all(t.committed for t in txgs[:-2])
    first = txgs[0]
    assert (first.txg, first.birth, first.ndirty, first.nwritten, first.writes, first.stime) == (
        4_128_300, 1_139_000_000_000, 82_837_504, 93_192_192, 3, 180_000_000)
    assert txgs[-1].ndirty == 0 and txgs[-1].nwritten == 0  # the open txg is not filled in yet


@pytest.mark.parametrize("version", LINUX_VERSIONS)
def test_dmu_tx_assign_buckets(version):
    buckets = histogram_buckets(parse_named_kstat(read(version, "tank/dmu_tx_assign")))
    assert buckets[0] == (1, 0)
    assert [bound for bound, _ in buckets] == [2**i for i in range(30)]
    assert buckets[-1] == (2**29, 1)  # trailing empty buckets are trimmed by the kernel


def test_io_kstat_before_2_1():
    io = parse_io_kstat(read("2.0.7", "tank/io"))
    assert io["nread"] == 120_259_084_288 and io["nwritten"] == 98_784_247_808
    assert io["reads"] == 917_504 and io["rcnt"] == 1
    assert not (linux_tree("2.1.11") / KSTAT / "tank/io").exists()


GOOD = "1 1 0x01 2 544 1 2\nname                            type data\nhits                            4    5\n"


@pytest.mark.parametrize("text, reason", [
    ("", "truncated"),
    ("1 1 0x01 2 544 1 2\n", "truncated"),
    ("name type data\nhits 4 5\n", "missing kstat header"),
    ("1 1 0x01 2 544 1 2\nfield kind value\nhits 4 5\n", "second line"),
    (GOOD.replace("4    5", "9    5"), "unknown type code 9"),
    (GOOD.replace("4    5", "4    five"), "non-numeric value 'five'"),
    (GOOD + "garbage\n", "not 'name type data'"),
])
def test_named_kstat_bad_input(text, reason):
    with pytest.raises(KstatFormatError, match=reason):
        parse_named_kstat(text, "arcstats")


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("txg birth state\n1 2 C\n", "unexpected columns"),
    (read("2.3.2", "tank/txgs").rsplit("\n", 2)[0][:-30] + "\n", "columns, expected 12"),
    (read("2.3.2", "tank/txgs").replace("4128300 ", "41283x0 ", 1), "non-numeric"),
])
def test_txgs_bad_input(text, reason):
    with pytest.raises(KstatFormatError, match=reason):
        parse_txgs(text)


def test_histogram_bad_bucket_name():
    named = parse_named_kstat("1 1 0x01 1 272 1 2\nname type data\n1 us 4 3\n")
    with pytest.raises(KstatFormatError, match="not '<n> ns'"):
        histogram_buckets(named)


def _rows_one_by_one(text):
    return parse_named_rows(text.splitlines()[2:], "kstat")


def named_kstat_files():
    """Every named kstat file of the fixture trees, live captures included."""
    for version in (*LINUX_VERSIONS, "2.3.2-live", "2.1.11-live"):
        for path in sorted((linux_tree(version) / KSTAT).rglob("*")):
            if path.is_file() and path.read_text(errors="replace").split("\n", 2)[1:2] == [NAME_TYPE_DATA]:
                yield pytest.param(path, id=f"{version}/{path.relative_to(linux_tree(version) / KSTAT)}")


NAME_TYPE_DATA = "name                            type data"


@pytest.mark.parametrize("path", list(named_kstat_files()))
def test_whole_body_parse_equals_the_row_by_row_parse_on_every_fixture(path):
    """parse_named_kstat reads an all-numeric body in one pass: the same values, in the same order."""
    text = path.read_text()
    fast = parse_named_kstat(text)
    assert fast == _rows_one_by_one(text)
    assert list(fast.values) == list(_rows_one_by_one(text).values)


@pytest.mark.parametrize("body", [
    "hits 4 5\nmisses 4 -7\nhits 4 9\n",           # a repeated name keeps its first place, the last value
    "hits 4 5",                                     # no newline at the end
    "hits 4 5\n\nmisses 4 6\n",                     # an empty row is skipped
    "hits 4 5 \nmisses 4 6\n",                      # trailing blank
    "hits\t4\t5\n",                                 # tabs
    "hits 4 5\r\nmisses 4 6\r\n",                   # CR LF
    "hits 04 5\n", "hits 4 +5\n", "hits 4 ٣\n",     # what int() reads beyond plain digits
    "1 ns 4 3\nname 7 tank/a b\nc 0 x\n",          # a name with a space, strings, a char
    "",
    "dataset_name 7 tank/a b\nwrites 4 5\nnread 4 6\n",  # one string row first (an objset): then one pass
    "dataset_name 7\nwrites 4 5\n",                  # ... whose string is empty
    "writes 4 1\n1 ns 4 5\n",                        # ... or a numeric row the one pass does not read
    "writes 4 5\ndataset_name 7 tank\n",             # a string row last
    "dataset_name 7 a\nwrites 4 5\nwrites 4 6\n",   # a name repeated after the first row
])
def test_whole_body_parse_falls_back_to_rows_on_anything_unusual(body):
    text = "1 1 0x01 2 544 1 2\nname                            type data\n" + body
    assert parse_named_kstat(text) == _rows_one_by_one(text)


def test_parse_named_body_reads_what_named_kstat_body_split_off():
    text = "1 1 0x01 2 544 1 2\nname                            type data\ndataset_name 7 tank/x\nwrites 4 5\n"
    assert parse_named_body(named_kstat_body(text), text) == NamedKstat({"writes": 5}, {"dataset_name": "tank/x"})
    assert parse_named_body(None, text) == parse_named_kstat(text)  # None: the whole text, row by row
    with pytest.raises(KstatFormatError, match="objset: field 'writes' has non-numeric value 'x'"):
        parse_named_body("dataset_name 7 tank/x\nwrites 4 x\n", text, "objset")


@pytest.mark.parametrize("data, rows", [
    (b"23 1 0x01 24 6528 6183401374 1139722431937\nname type data\nwrites 4 5\n", b"name type data\nwrites 4 5\n"),
    (b"23 1 0x01 24 6528 6183401374 1139722431937\n", b""),
    (b"23  1 0x01 24 6528 6183401374 1139722431937\nname type data\n", None),  # valid, but not as the kernel prints it
    (b"23 1 0x01 24 6528 6183401374 1139722431937", None),                     # no line end: no rows to compare
    (b"name type data\nwrites 4 5\n", None),
    (b"", None),
])
def test_named_kstat_rows_are_what_follows_a_kernel_header(data, rows):
    assert named_kstat_rows(data) == rows
