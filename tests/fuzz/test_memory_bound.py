"""Memory bounded by design, not by input (issue 33, case 1): the real exporter, its parse children
and the hostile `zfs` standing in for the host's (tests/fuzz/hostile.py) stay under 256 MiB of peak
RSS together (tests/fuzz/treerss.py) whatever the listing: long names, endless listings, more
datasets than the page may hold, the output limit raised as its error message suggests, gigabytes
of stderr; and `--replay` of an archive with a 1 GiB member. Each case also checks what the user
reads: the datasets served, the source's 0 and what was dropped."""

from __future__ import annotations

import subprocess
import tarfile

import pytest

from tests.conftest import free_port
from tests.fuzz.listings import metric, run_exporter, served, zero_member_archive
from tests.fuzz.treerss import TreePeak
from tests.integration.exporter_process import exporter_command

LIMIT_KIB = 256 * 1024


REFRESH_EVERY_SECOND = ("--datasets.refresh-interval", "1", "--datasets.snapshot-interval", "1")


@pytest.mark.parametrize("hostile, flags, expect", [
    # 100,000 datasets of 200-character names, each with a snapshot: more than the page may hold;
    # refreshed every second (until three refreshes were counted), so an old page and its new one meet
    ("--datasets 100000 --snapshots 100000 --name-length 200", REFRESH_EVERY_SECOND, "over_limit"),
    # names longer than ZFS allows: every line dropped, the listing fails (as another format would)
    ("--datasets 10 --snapshots 100000 --name-length 1000", (), "too_long"),
    # 300,000 short-named datasets (54 MB; 85,000 of them, 15 MB, fit the 16 MiB output limit of before
    # and took 581 MiB; a million took 3 GB), the output limit raised as its message once suggested:
    # streamed, the same bound (benchmarks/fuzz.py runs the million)
    ("--datasets 300000 --name-length 10", ("--zfs.command-max-output", str(1 << 30)), "over_limit"),
], ids=["snapshots-long-names", "names-past-zfs-limit", "300k-datasets-limit-raised"])
def test_hostile_listings_stay_under_256_mib(tmp_path, hostile, flags, expect):
    refreshes = 3 if flags == REFRESH_EVERY_SECOND else 1

    def until(page):
        dropped = metric(page, "zfs_exporter_source_values_dropped_total", source="zfs_datasets", reason=expect)
        return dropped is not None and dropped >= refreshes * (dropped_once.setdefault("count", dropped))

    dropped_once: dict[str, float] = {}

    peak, page, log = run_exporter(tmp_path, hostile, *flags, until=until)
    assert peak.peak_kib < LIMIT_KIB, peak.describe()
    if expect == "over_limit":  # the first ~13,000 datasets are served, the source says 0 and why
        assert served(page) >= 4000  # 4096 with names of 200 characters, 13,000 with short ones
        assert metric(page, "zfs_exporter_source_success", source="zfs_datasets") == 0
        assert "left out: their families would pass --datasets.max-page-bytes" in log
    else:
        assert "zfs list: no line could be read" in log


def test_an_endless_snapshot_listing_is_killed_at_its_timeout_within_the_bound(tmp_path):
    def until(page):
        return "timed out after 5s" in (tmp_path / "exporter.log").read_text()

    peak, page, log = run_exporter(tmp_path, "--datasets 10 --endless --name-length 200",
                                   "--zfs.command-timeout", "5", until=until)
    assert peak.peak_kib < LIMIT_KIB, peak.describe()
    assert served(page) == 10 and metric(page, "zfs_exporter_source_success", source="zfs_snapshots") == 0


def test_gigabytes_of_stderr_cost_neither_memory_nor_disk(tmp_path):
    import shutil

    free_before = shutil.disk_usage("/tmp").free

    def until(page):
        return "cannot open 'p/x'" in (tmp_path / "exporter.log").read_text()

    peak, _, log = run_exporter(tmp_path, "--stderr-mb 1500", until=until)
    assert peak.peak_kib < LIMIT_KIB, peak.describe()
    assert "exited with status 1: cannot open 'p/x': dataset does not exist" in log  # the last line, kept
    assert free_before - shutil.disk_usage("/tmp").free < 100 << 20  # nothing spooled (1.5 GB before)


def test_replay_of_an_archive_with_a_1_gib_member_is_refused_within_the_bound(tmp_path):
    archive = tmp_path / "capture.tar.gz"
    zero_member_archive(archive, 1 << 30)
    assert archive.stat().st_size < 5 << 20
    with tarfile.open(archive) as tar:  # a real archive: tar reads its member's header
        member = tar.next()
        assert member is not None and (member.name, member.size) == ("zfsnas-capture/snapshots/0/commands/0.out", 1 << 30)
    proc = subprocess.Popen([*exporter_command(), "--replay", str(archive), f"--web.listen-address=127.0.0.1:{free_port()}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with TreePeak(proc.pid) as peak:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "holds 1073741824 bytes, more than 67108864" in lines[0], lines
    assert peak.peak_kib < LIMIT_KIB, peak.describe()


def test_zero_member_archive_is_what_it_says(tmp_path):
    """The generator above, checked on a small size: tarfile reads back every zero."""
    archive = tmp_path / "small.tar.gz"
    zero_member_archive(archive, 64 << 20)
    with tarfile.open(archive) as tar:
        member = tar.next()
        data = tar.extractfile(member).read()
    assert len(data) == 64 << 20 and data.count(0) == len(data)
