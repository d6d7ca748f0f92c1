"""The procfs source's txgs reads as the ring moves between scrapes: only new rows are parsed, and
the answer is always what a full parse of the file says."""

import pytest

from zfsnas.sources.kstat import TXG_COLUMNS, KstatFormatError, parse_txgs
from zfsnas.sources.linux import ProcfsKstatSource

COLUMNS = "".join(f"{name:<13}" for name in TXG_COLUMNS)  # padded as the kernel pads them


def row(txg, state="C"):
    synced = state == "C"
    return (f"{txg:<8} {1000 * txg:<16} {state:<5} {4096 * txg if synced else 0:<12} 0            "
            f"{8192 * txg if synced else 0:<12} 0        {txg if synced else 0:<8} 5000         60000        700000       "
            f"{1_000_000 * txg if synced else 0:<12}")


def ring(first, last):
    """The txgs file with committed txgs first..last-2, a syncing and an open one."""
    rows = [row(t) for t in range(first, last - 1)] + [row(last - 1, "S"), row(last, "O")]
    return "\n".join([COLUMNS, *rows]) + "\n"


@pytest.fixture
def tank(tmp_path):
    pool = tmp_path / "proc/spl/kstat/zfs/tank"
    pool.mkdir(parents=True)
    return ProcfsKstatSource(str(tmp_path / "proc"), str(tmp_path / "sys")), pool / "txgs"


def test_a_moved_ring_reuses_the_rows_it_saw_and_parses_the_new_ones(tank):
    src, path = tank
    path.write_text(ring(1, 100))
    first = src.txgs("tank")
    path.write_text(ring(3, 102))  # two txgs synced, two born, two left the ring
    second = src.txgs("tank")
    assert second == parse_txgs(ring(3, 102))
    assert [t.txg for t in second] == list(range(3, 103))
    assert second[0] is first[2] and second[95] is first[97]  # rows of synced txgs are the same objects
    assert (second[96].state, second[96].nwritten, second[96].stime) == ("C", 8192 * 99, 99_000_000)  # was syncing
    assert (second[99].state, second[99].ndirty) == ("O", 0)
    assert first[97].state == "C" and first[98].state == "S"  # what was handed out is not touched


def test_the_memo_stays_within_twice_the_ring(tank):
    src, path = tank
    for start in range(1, 400, 3):
        path.write_text(ring(start, start + 99))
        assert [t.txg for t in src.txgs("tank")] == list(range(start, start + 100))
        assert len(src._txg_rows["tank"]) <= 2 * 100 + 8


def test_a_bad_new_row_fails_the_read_and_the_next_good_one_serves(tank):
    src, path = tank
    path.write_text(ring(1, 10))
    src.txgs("tank")
    path.write_text(ring(1, 10) + "11 1100 C 1 2 x 4 5 6 7 8 9\n")
    with pytest.raises(KstatFormatError, match="non-numeric value in txg row '11 1100 C 1 2 x"):
        src.txgs("tank")
    path.write_text(ring(1, 10) + "11 1100 C 1 2\n")
    with pytest.raises(KstatFormatError, match="has 5 columns, expected 12"):
        src.txgs("tank")
    path.write_text(ring(2, 11))
    assert [t.txg for t in src.txgs("tank")] == list(range(2, 12))


@pytest.mark.parametrize("text, error", [
    ("", "empty"),
    ("txg birth state\n1 2 C\n", "unexpected columns"),
])
def test_a_file_with_another_first_line_gets_the_full_parse_and_its_errors(tank, text, error):
    src, path = tank
    path.write_text(ring(1, 10))
    src.txgs("tank")
    path.write_text(text)
    with pytest.raises(KstatFormatError, match=error):
        src.txgs("tank")


def test_blank_lines_and_a_kstat_header_line_read_as_a_full_parse_does(tank):
    src, path = tank
    path.write_text(ring(1, 10).replace(row(5), row(5) + "\n\n   "))
    assert src.txgs("tank") == parse_txgs(ring(1, 10))
    kstat_header = "18 0 0x01 1 896 5104357236 66282138930\n"
    path.write_text(kstat_header + ring(2, 11))
    assert [t.txg for t in src.txgs("tank")] == list(range(2, 12))
