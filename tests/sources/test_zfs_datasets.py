"""`zfs list` parsing, snapshot counting, and streaming command output with a timeout."""

import sys
import time

import pytest

from tests.conftest import FIXTURES
from zfsnas.sources.commands import CommandRunner
from zfsnas.sources.model import SourceError
from zfsnas.sources.zfs_datasets import DATASET_PROPERTIES, Snapshots, parse_datasets, summarise_snapshots

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


def test_bad_lines_fail_clearly():
    with pytest.raises(SourceError, match="line 1: 3 columns"):
        parse_datasets("a\tb\tc\n")
    row = ["tank", "filesystem", "lots"] + ["1"] * 11 + ["1.00", "1.00"] + ["x"] * 11
    with pytest.raises(SourceError, match="line 1"):
        parse_datasets("\t".join(row))


def test_summarise_snapshots():
    lines = ["tank@a\t1794873600\n", "tank/home docs@daily 1\t1794960000", "tank/home docs@daily 2\t1794900000",
             "tank/x@y@z\t-", "tank/y@no-time", "not-a-snapshot\t1794873600"]
    assert summarise_snapshots(iter(lines)) == {
        "tank": Snapshots(1, 1794873600), "tank/home docs": Snapshots(2, 1794960000),  # newest, not last
        "tank/x": Snapshots(1, None), "tank/y": Snapshots(1, None)}


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
    time.sleep(0.5)
    started = time.monotonic()
    runner.close()
    thread.join(10)
    assert time.monotonic() - started < 2 and errors and "exited with status -9" in errors[0]
    with pytest.raises(SourceError, match="shutting down"):
        runner.run([sys.executable, "-c", "pass"])
    with pytest.raises(SourceError, match="shutting down"):
        list(runner.lines([sys.executable, "-c", "pass"]))
