"""`zfs list` parsing, snapshot counting, and streaming command output with a timeout."""

import sys
import time

import pytest

from tests.conftest import FIXTURES, wait_until
from zfsnas.sources.commands import CommandRunner, split_lines
from zfsnas.sources.model import Dropped, SourceError
from zfsnas.sources.zfs_datasets import DATASET_PROPERTIES, NUMBERS, Snapshots, parse_datasets, summarise_snapshots

COMMANDS = FIXTURES / "commands"


@pytest.mark.parametrize("version", ("2.1", "2.3"))
def test_parse_recorded_datasets(version):
    datasets = {d.name: d for d in parse_datasets((COMMANDS / f"zfs-{version}" / "zfs-list.txt").read_text())}
    home = datasets["tank/home docs"]
    assert (home.pool, home.type) == ("tank", "filesystem")
    assert home.ratios == {"compressratio": 1.48, "refcompressratio": 1.48}
    assert home.numbers["logicalused"] == 635655159808 and home.numbers["reservation"] == 107374182400
    assert home.numbers["volsize"] is None
    assert home.settings["encryption"] == "aes-256-gcm"
    vol = datasets["tank/vm-disk0"]
    assert (vol.type, vol.numbers["volsize"], vol.numbers["quota"]) == ("volume", 1099511627776, None)
    assert (vol.settings["recordsize"], vol.settings["volblocksize"]) == ("-", "16384")
    assert datasets["tank/db:pg.main_16"].settings["special_small_blocks"] == "16384"


def test_odd_names_and_ratio_suffix():
    name = "tank/it's \"quoted\" 100% ünïcode  two  spaces"
    row = [name, "filesystem"] + ["1"] * 12 + ["2.00x", "1.5"] + ["x"] * 12
    [ds] = parse_datasets("\t".join(row) + "\n")
    assert ds.name == name and ds.ratios["compressratio"] == 2.0 and ds.ratios["refcompressratio"] == 1.5
    assert len(row) == len(DATASET_PROPERTIES)


def row(name="tank/a", numbers=("1",) * 12, ratios=("1.00", "1.00")):
    """A `zfs list` line of every property we ask for, the settings after the numbers and ratios."""
    return "\t".join([name, "filesystem", *numbers, *ratios, *["x"] * (len(DATASET_PROPERTIES) - 16)])


def test_a_listing_of_another_format_fails_clearly():
    with pytest.raises(SourceError, match=f"no line could be read .*line 1: 3 columns, expected {len(DATASET_PROPERTIES)}"):
        parse_datasets("a\tb\tc\n")


def test_one_bad_line_costs_that_line():
    dropped = Dropped()
    datasets = parse_datasets("\n".join([row("tank/a"), "a\tb\tc", row("tank/" + "n" * 300), row("tank/c")]), dropped)
    assert [d.name for d in datasets] == ["tank/a", "tank/c"]
    assert dropped.counts == {"malformed": 1, "too_long": 1} and dropped.lines == 2


@pytest.mark.parametrize("text, reason", [
    ("1e400", "not_a_number"), ("NaN", "not_a_number"), ("0x10", "not_a_number"), ("\u00b2", "not_a_number"),
    ("+5", "not_a_number"), ("1_000", "not_a_number"), (" 5", "not_a_number"), ("-5", "negative"), ("-0", "negative")])
def test_one_bad_column_costs_that_field(text, reason):
    """Before issue 33, `int()` failed the whole listing on any of these (and served -5 and -0 as sizes)."""
    dropped = Dropped()
    numbers = ["1"] * 12
    numbers[NUMBERS.index("used")] = text
    [ds] = parse_datasets(row(numbers=numbers), dropped)
    assert ds.numbers["used"] is None and ds.numbers["referenced"] == 1
    assert dropped.counts == {reason: 1} and dropped.lines == 0


@pytest.mark.parametrize("text, reason", [("NaN", "not_a_number"), ("inf", "not_a_number"),
                                          ("1e400", "not_a_number"), ("-1.50", "negative"), ("1.5.0", "not_a_number")])
def test_a_ratio_that_cannot_be_true_is_dropped(text, reason):
    dropped = Dropped()
    [ds] = parse_datasets(row(ratios=(text, "2.00x")), dropped)
    assert ds.ratios == {"compressratio": None, "refcompressratio": 2.0} and dropped.counts == {reason: 1}


def test_summarise_snapshots():
    lines = ["tank@a\t1794873600\n", "tank/home docs@daily 1\t1794960000", "tank/home docs@daily 2\t1794900000",
             "tank/x@y@z\t-", "tank/y@no-time", "not-a-snapshot\t1794873600"]
    dropped = Dropped()
    assert summarise_snapshots(iter(lines), dropped) == {
        "tank": Snapshots(1, 1794873600), "tank/home docs": Snapshots(2, 1794960000),  # newest, not last
        "tank/x": Snapshots(1, None), "tank/y": Snapshots(1, None)}
    assert dropped.counts == {"malformed": 1}


def test_a_bad_creation_costs_that_time_only():
    """`\u00b2` passes str.isdigit, not int(): before issue 33 it failed every snapshot count."""
    dropped = Dropped()
    lines = ["tank/a@1\t\u00b2", "tank/a@2\t1794873600", "tank/b@1\t-7"]
    assert summarise_snapshots(lines, dropped) == {"tank/a": Snapshots(2, 1794873600), "tank/b": Snapshots(1, None)}
    assert dropped.counts == {"not_a_number": 1, "negative": 1}


def test_snapshots_are_counted_for_known_datasets_and_bounded_without():
    lines = [f"tank/{i}@s\t1" for i in range(10)] + ["tank/" + "n" * 300 + "@s\t1"]
    assert summarise_snapshots(lines, known={"tank/3", "tank/4"}) == {"tank/3": Snapshots(1, 1), "tank/4": Snapshots(1, 1)}
    dropped = Dropped()
    assert len(summarise_snapshots(lines, dropped, limit=4)) == 4
    assert dropped.counts == {"over_limit": 7}


def test_split_lines_bounds_every_line():
    chunks = [b"a\nbb", b"b\n" + b"x" * 10, b"y" * 10 + b"\nlast"]
    assert list(split_lines(chunks, 5)) == [b"a", b"bbb", b"xxxxxx", b"last"]  # the long one cut to 5 + 1 bytes


def test_lines_streams_and_reports_failures():
    runner = CommandRunner(timeout=5)
    script = "import sys\nfor i in range(100000): print(f'tank/fs{i % 7}@s{i}')"
    counts = summarise_snapshots(runner.lines([sys.executable, "-c", script]))
    assert sum(c.count for c in counts.values()) == 100000 and counts["tank/fs3"].count == 14286
    with pytest.raises(SourceError, match="exited with status 3: broken"):
        list(runner.lines([sys.executable, "-c", "import sys; print('a'); sys.exit('broken') if 0 else "
                                                 "(sys.stderr.write('broken\\n'), sys.exit(3))"]))
    with pytest.raises(SourceError, match="command not found"):
        list(runner.lines(["/nonexistent/zfs", "list"]))


def test_lines_kills_at_timeout():
    runner = CommandRunner(timeout=0.5)
    started = time.monotonic()
    with pytest.raises(SourceError, match="timed out after 0.5s and was killed"):
        list(runner.lines([sys.executable, "-c", "import time; print('x', flush=True); time.sleep(30)"]))
    assert time.monotonic() - started < 5


def test_close_kills_running_commands_and_refuses_new_ones():
    import threading

    runner = CommandRunner(timeout=30)
    errors = []

    def hang():
        try:
            runner.run([sys.executable, "-c", "import time; time.sleep(30)"])
        except SourceError as exc:
            errors.append(str(exc))

    thread = threading.Thread(target=hang)
    thread.start()
    wait_until(lambda: runner._running, "the command running")
    started = time.monotonic()
    runner.close()
    thread.join(10)
    assert time.monotonic() - started < 2 and errors and "exited with status -9" in errors[0]
    with pytest.raises(SourceError, match="shutting down"):
        runner.run([sys.executable, "-c", "pass"])
    with pytest.raises(SourceError, match="shutting down"):
        list(runner.lines([sys.executable, "-c", "pass"]))
