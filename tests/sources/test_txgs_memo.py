"""The txgs row memo (`kstat.parse_txgs(..., known)`) as the ring moves between scrapes: only new
rows are checked and built, the memo stays bounded, and the answer is always what a full parse of
the file says. The procfs source keeps one memo per pool and goes through it."""

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


def test_a_moved_ring_reuses_the_rows_it_saw_and_builds_the_new_ones():
    known: dict = {}
    first = parse_txgs(ring(1, 100), "txgs", known)
    assert len(known) == 100 and first == parse_txgs(ring(1, 100))
    second = parse_txgs(ring(3, 102), "txgs", known)  # two txgs synced, two born, two left the ring
    assert second == parse_txgs(ring(3, 102))
    assert [t.txg for t in second] == list(range(3, 103))
    assert second[0] is first[2] and second[95] is first[97]  # rows of synced txgs are the same objects
    assert (second[96].state, second[96].nwritten, second[96].stime) == ("C", 8192 * 99, 99_000_000)  # was syncing
    assert (second[99].state, second[99].ndirty) == ("O", 0)
    assert first[97].state == "C" and first[98].state == "S"  # what was handed out is not touched
    assert len(known) == 104  # the 100 rows read first and the 4 new ones: under twice the ring


def test_the_memo_stays_within_twice_the_ring_and_then_holds_only_the_last_read():
    known: dict = {}
    sizes = []
    for start in range(1, 400, 3):
        assert [t.txg for t in parse_txgs(ring(start, start + 99), "txgs", known)] == list(range(start, start + 100))
        sizes.append(len(known))
    assert sizes[:3] == [100, 105, 110]  # each move: 3 txgs born, 2 changed state
    assert 200 < max(sizes) <= 2 * 100 + 8  # grows to the bound ...
    assert sizes.count(100) > 1 and min(sizes) == 100  # ... and is cut back to this read's rows past it


def test_a_bad_new_row_fails_the_read_leaves_the_memo_and_the_next_good_one_serves():
    known: dict = {}
    parse_txgs(ring(1, 10), "txgs", known)
    before = dict(known)
    with pytest.raises(KstatFormatError, match="non-numeric value in txg row '11 1100 C 1 2 x"):
        parse_txgs(ring(1, 10) + row(12) + "\n11 1100 C 1 2 x 4 5 6 7 8 9\n", "txgs", known)
    with pytest.raises(KstatFormatError, match="row 12 has 5 columns, expected 12"):
        parse_txgs(ring(1, 10) + "11 1100 C 1 2\n", "txgs", known)
    assert known == before  # row 12 was good, but a read that fails keeps nothing of itself
    assert [t.txg for t in parse_txgs(ring(2, 11), "txgs", known)] == list(range(2, 12))


@pytest.mark.parametrize("text, error", [
    ("", "empty"),
    ("txg birth state\n1 2 C\n", "unexpected columns"),
])
def test_a_file_with_another_first_line_gets_the_full_check_and_its_errors(text, error):
    known: dict = {}
    parse_txgs(ring(1, 10), "txgs", known)
    with pytest.raises(KstatFormatError, match=error):
        parse_txgs(text, "txgs", known)


def test_blank_lines_and_a_kstat_header_line_read_as_a_full_parse_does():
    known: dict = {}
    assert parse_txgs(ring(1, 10).replace(row(5), row(5) + "\n\n   "), "txgs", known) == parse_txgs(ring(1, 10))
    assert "" not in known and "   " not in known
    kstat_header = "18 0 0x01 1 896 5104357236 66282138930\n"
    second = parse_txgs(kstat_header + ring(2, 11), "txgs", known)
    assert [t.txg for t in second] == list(range(2, 12)) and second[0] is known[row(2)]


def test_the_procfs_source_keeps_one_memo_per_pool(tmp_path):
    for pool, start in (("tank", 1), ("backup", 50)):
        (tmp_path / f"proc/spl/kstat/zfs/{pool}").mkdir(parents=True)
        (tmp_path / f"proc/spl/kstat/zfs/{pool}/txgs").write_text(ring(start, start + 9))
    src = ProcfsKstatSource(str(tmp_path / "proc"), str(tmp_path / "sys"))
    first = {pool: src.txgs(pool) for pool in ("tank", "backup")}
    (tmp_path / "proc/spl/kstat/zfs/tank/txgs").write_text(ring(2, 11))
    tank = src.txgs("tank")
    assert [t.txg for t in tank] == list(range(2, 12)) and tank[0] is first["tank"][1]
    assert [t.txg for t in src.txgs("backup")] == list(range(50, 60))
    assert {pool: len(memo) for pool, memo in src._txg_rows.items()} == {"tank": 13, "backup": 10}  # 3 rows new or changed
