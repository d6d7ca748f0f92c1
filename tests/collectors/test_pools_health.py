"""The day a disk dies, seen through the `pools` collector on the zpool stand-in: health, vdev tree
and state kstat agree within one scrape of a change (default intervals), a hung zpool delays that
scrape by FRESH_WAIT at most, expected pools that are not imported, ZFS events counted and
refreshing the vdev tree, per-vdev space and a RAID-Z expansion."""

from __future__ import annotations

import json
import shlex
import shutil
import time
from pathlib import Path

import pytest

from tests.collectors.test_shared_runner import wait_until
from tests.conftest import exporter_args, linux_tree, samples, scrape_text, value, zfs_commands
from tests.fixtures.commands.generate import render_tree
from zfsnas.collectors.pools import FRESH_WAIT, expected_pools
from zfsnas.sources.zpool import LIST_POOLS, LIST_VDEVS, STATUS_GUIDS, STATUS_PATHS
from zfsnas.sources.zpool_events import FOLLOW_EVENTS
from zfsnas.wiring import build_exporter

ID = "/dev/disk/by-id/"
DISKS = (f"{ID}ata-ST4000VN008-2DR166_ZL2B0001-part1", f"{ID}ata-ST4000VN008-2DR166_ZL2B0002-part1")
GUIDS = ("4391187725563470651", "9904017316217300441")
SCAN_DONE = "  scan: resilvered 1.02G in 00:03:12 with 0 errors on Fri Nov 27 10:03:12 2026\n"
SCAN_NONE = "  scan: none requested\n"


def tank(state: str, second: str, scan: str = SCAN_NONE) -> dict[str, str]:
    """The recordings of one pool `tank`, a mirror whose second disk is `second` (ONLINE, REMOVED...)."""
    rows = [(0, "tank", "", state, (0, 0, 0), ""), (2, "mirror-0", "11830547290116452180", state, (0, 0, 0), ""),
            (4, DISKS[0], GUIDS[0], "ONLINE", (0, 0, 0), ""), (4, DISKS[1], GUIDS[1], second, (0, 0, 0), "")]
    head = f"  pool: tank\n state: {state}\n{scan}config:\n\n"
    return {
        "zpool-list.txt": f"tank\t3985729650688\t1394168324505\t2591561326183\t4\t34\t1.00\t{state}\n",
        "zpool-status-P.txt": head + render_tree(rows, by_guid=False) + "\nerrors: No known data errors\n",
        "zpool-status-g.txt": head + render_tree(rows, by_guid=True) + "\nerrors: No known data errors\n",
        "zpool-list-v.txt": f"tank\t3985729650688\t1394168324505\t2591561326183\t-\t-\t4\t34\t1.00\t{state}\t-\n"
                            f"\tmirror-0\t3985729650688\t1394168324505\t2591561326183\t-\t-\t4\t34\t-\t{state}\n"
                            f"\t{DISKS[0]}\t4000785104896\t-\t-\t-\t-\t-\t-\t-\tONLINE\n"
                            f"\t{DISKS[1]}\t4000785104896\t-\t-\t-\t-\t-\t-\t-\t{second}\n",
        "zpool-events.txt": "",
    }


def write_recordings(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    commands = {shlex.join(LIST_POOLS): "zpool-list.txt", shlex.join(STATUS_PATHS): "zpool-status-P.txt",
                shlex.join(STATUS_GUIDS): "zpool-status-g.txt", shlex.join(LIST_VDEVS): "zpool-list-v.txt"}
    (directory / "index.json").write_text(json.dumps(
        {"version": "2.3", "commands": commands, "follow": {shlex.join(FOLLOW_EVENTS): "zpool-events.txt"}}))
    return directory


def kstat_tree(tmp: Path, state: str) -> Path:
    root = tmp / "tree"
    shutil.copytree(linux_tree("2.3.2"), root)
    shutil.rmtree(root / "proc/spl/kstat/zfs/backup")
    (root / "proc/spl/kstat/zfs/tank/state").write_text(state + "\n")
    return root


def flags(root: Path, recordings: Path, *extra: str) -> list[str]:
    return ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"), "--collector.disable-defaults",
            "--collector.pools", "--collector.poolstats", *zfs_commands(recordings, *extra)]


def zpool_read(exporter) -> bool:
    """Every zpool source has been read once."""
    text = exporter.render()
    return all(f'zfs_exporter_source_success{{source="{s}"}} 1' in text
               for s in ("zpool_list", "zpool_status"))


def served_states(text: str) -> tuple[str, str, str]:
    """(state kstat, zpool list health, the root vdev's state) as one scrape serves them."""
    found = samples(text)

    def on(metric: str, **labels: str) -> list[str]:
        return [dict(k[1])["state"] for k, v in found.items()
                if k[0] == metric and v == 1 and labels.items() <= dict(k[1]).items()]

    [kstat] = on("zfs_pool_state", pool="tank")
    [health] = on("zfs_pool_health", pool="tank")
    [root] = on("zfs_vdev_state", pool="tank", vdev="tank")
    return kstat, health, root


def test_health_vdev_tree_and_kstat_state_agree_within_one_scrape_of_a_change(tmp_path):
    """Default intervals (`zpool` every 60 s): a disk comes back and the pool is ONLINE again; the
    very next scrape serves ONLINE from the kstat, from zpool list and in the vdev tree, and the
    resilver that brought it back. Then the disk goes again: DEGRADED in all three at once."""
    root = kstat_tree(tmp_path, "DEGRADED")
    recordings = write_recordings(tmp_path / "zpool", tank("DEGRADED", "REMOVED"))
    exporter = build_exporter(exporter_args(*flags(root, recordings)), process_metrics=False)
    exporter.start()
    try:
        wait_until(lambda: zpool_read(exporter))
        assert served_states(exporter.render()) == ("DEGRADED", "DEGRADED", "DEGRADED")
        write_recordings(recordings, tank("ONLINE", "ONLINE", SCAN_DONE))
        (root / "proc/spl/kstat/zfs/tank/state").write_text("ONLINE\n")
        started = time.monotonic()
        text = exporter.render()
        took = time.monotonic() - started
        assert served_states(text) == ("ONLINE", "ONLINE", "ONLINE")
        assert value(text, "zfs_vdev_state", pool="tank", vdev=DISKS[1], vdev_guid=GUIDS[1], role="data",
                     parent="mirror-0", state="ONLINE") == 1
        assert value(text, "zfs_pool_scan_info", pool="tank", function="resilver", state="finished") == 1
        assert took < FRESH_WAIT, took   # the refresh ran at once; it was not waited out
        write_recordings(recordings, tank("DEGRADED", "REMOVED", SCAN_DONE))
        (root / "proc/spl/kstat/zfs/tank/state").write_text("DEGRADED\n")
        assert served_states(exporter.render()) == ("DEGRADED", "DEGRADED", "DEGRADED")
        # no change: no early refresh (the stand-in's answer changes, the served tree does not)
        write_recordings(recordings, tank("DEGRADED", "FAULTED", SCAN_DONE))
        text = exporter.render()
        assert value(text, "zfs_vdev_state", pool="tank", vdev=DISKS[1], vdev_guid=GUIDS[1], role="data",
                     parent="mirror-0", state="REMOVED") == 1
    finally:
        exporter.stop()


def test_a_hung_zpool_after_a_state_change_is_not_waited_for(tmp_path):
    """The pool suspends and every zpool hangs: the scrape that sees the new state waits FRESH_WAIT
    at most and serves the last values (the kstat already says SUSPENDED); the scrapes after it do
    not wait at all, and the hung source shows in its age."""
    root = kstat_tree(tmp_path, "ONLINE")
    recordings = write_recordings(tmp_path / "zpool", tank("ONLINE", "ONLINE"))
    hang = tmp_path / "hang"
    exporter = build_exporter(exporter_args(*flags(root, recordings, "--hang-if", str(hang)),
                                            "--no-pools.events"), process_metrics=False)
    exporter.start()
    try:
        wait_until(lambda: zpool_read(exporter))
        hang.touch()
        (root / "proc/spl/kstat/zfs/tank/state").write_text("SUSPENDED\n")
        started = time.monotonic()
        text = exporter.render()
        first = time.monotonic() - started
        assert FRESH_WAIT - 0.1 <= first < FRESH_WAIT + 1.0, first
        assert served_states(text) == ("SUSPENDED", "ONLINE", "ONLINE")
        started = time.monotonic()
        text = exporter.render()
        assert time.monotonic() - started < 0.5
        assert value(text, "zfs_exporter_source_age_seconds", source="zpool_status") >= FRESH_WAIT - 0.1
        assert value(text, "zfs_pool_state", pool="tank", state="SUSPENDED") == 1
    finally:
        hang.unlink()
        exporter.stop()


def test_expected_pools():
    assert expected_pools(["tank,usb-backup", " backup ", "tank"]) == ("tank", "usb-backup", "backup")
    root = linux_tree("2.3.2")
    text = scrape_text("--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                       "--collector.disable-defaults", "--collector.pools", *zfs_commands("2.3"),
                       "--pool.expected", "tank,usb-backup", "--pool.expected", "backup")
    assert [(dict(k[1])["pool"], v) for k, v in samples(text).items() if k[0] == "zfs_pool_expected_imported"] == [
        ("tank", 1), ("usb-backup", 0), ("backup", 1)]
    assert "zfs_pool_expected_imported" not in scrape_text("--path.procfs", str(root / "proc"), "--path.sysfs",
                                                           str(root / "sys"), "--collector.disable-defaults",
                                                           "--collector.pools", *zfs_commands("2.3"))


def event(at: float, eid: int, name: str, pool: str = "tank") -> str:
    stamp = time.strftime("%b %d %Y %H:%M:%S", time.localtime(at)) + ".000000000"
    key = "pool_name" if name.startswith("sysevent.") else "pool"
    return (f'{stamp}\t{name}\n        class = "{name}"\n        {key} = "{pool}"\n'
            f"        time = 0x{int(at):x} 0x0 \n        eid = 0x{eid:x}\n\n")


def test_events_are_counted_and_a_state_change_refreshes_the_vdev_tree(tmp_path):
    """`zpool events -fvH` prints the kernel's backlog (not counted) and then what happens: a disk
    removed. The events are counted by pool and class, and the removal refreshes `zpool status`
    at once, an hour before its interval."""
    root = kstat_tree(tmp_path, "ONLINE")
    recordings = write_recordings(tmp_path / "zpool", tank("ONLINE", "ONLINE"))
    log = tmp_path / "commands.log"
    exporter = build_exporter(exporter_args(*flags(root, recordings, "--log", str(log)),
                                            "--pools.refresh-interval", "3600"), process_metrics=False)
    exporter.start()
    try:
        wait_until(lambda: zpool_read(exporter))
        wait_until(lambda: "zfs_pool_events_total" in exporter.render())  # once the follower runs
        # born at 0 for the imported pool, so that increase() sees the first event (issue 37)
        assert {(dict(k[1])["pool"], dict(k[1])["class"]): v for k, v in samples(exporter.render()).items()
                if k[0] == "zfs_pool_events_total"} == {("tank", c): 0 for c in ("checksum", "io", "delay", "deadman")}
        assert value(exporter.render(), "zfs_exporter_source_success", source="zpool_events") == 1
        write_recordings(recordings, tank("DEGRADED", "REMOVED"))
        now = time.time()
        (recordings / "zpool-events.txt").write_text(
            event(now - 3600, 1, "sysevent.fs.zfs.history_event") + event(now - 60, 2, "ereport.fs.zfs.io") +
            event(now + 1, 3, "ereport.fs.zfs.io") + event(now + 1, 4, "resource.fs.zfs.removed") +
            event(now + 1, 5, "resource.fs.zfs.statechange") + event(now + 1, 6, "sysevent.fs.zfs.history_event") +
            event(now + 2, 7, "sysevent.fs.zfs.scrub_start", "backup"))
        follower = next(c for c in exporter.collectors if c.name == "pools").events
        runs = follower.runs
        for proc in list(exporter.owned_runner._running):   # the stand-in's `zpool events`: it starts again
            if "events" in " ".join(proc.args):
                proc.kill()
        wait_until(lambda: follower.runs > runs and "zfs_pool_events_total" in exporter.render())
        wait_until(lambda: 'state="REMOVED"} 1' in exporter.render(), timeout=10)
        text = exporter.render()
        counted = {(dict(k[1])["pool"], dict(k[1])["class"]): v for k, v in samples(text).items()
                   if k[0] == "zfs_pool_events_total"}
        # the second start's backlog is everything up to now; what happened after it started counts
        assert counted == {("tank", "io"): 1, ("tank", "removed"): 1, ("tank", "statechange"): 1,
                           ("tank", "history_event"): 1, ("backup", "scrub_start"): 1,
                           ("tank", "checksum"): 0, ("tank", "delay"): 0, ("tank", "deadman"): 0}
        assert "# TYPE zfs_pool_events_total counter" in text
        assert value(text, "zfs_vdev_state", pool="tank", vdev=DISKS[1], vdev_guid=GUIDS[1], role="data",
                     parent="mirror-0", state="REMOVED") == 1
        assert sum("zpool status -Pp" in line for line in log.read_text().splitlines() if line.startswith("start")) >= 2
    finally:
        exporter.stop()


@pytest.mark.parametrize("version", ("2.1", "2.3"))
def test_vdev_space_and_scan_progress_served(version):
    root = linux_tree("2.3.2")
    text = scrape_text("--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                       "--collector.disable-defaults", "--collector.pools", *zfs_commands(version))
    assert value(text, "zfs_vdev_allocated_bytes", pool="tank", vdev="raidz2-0", role="data") == 11730456035328
    assert value(text, "zfs_vdev_fragmentation_ratio", pool="tank", vdev="mirror-1", role="special") == 0.12
    assert value(text, "zfs_vdev_capacity_ratio", pool="tank", role="cache",
                 vdev=f"{ID}ata-Samsung_SSD_860_EVO_500GB_S4EVNF0M200001-part1") == 0.82
    assert value(text, "zfs_vdev_size_bytes", pool="tank", role="log",
                 vdev=f"{ID}ata-INTEL_SSDSC2BB120G7_BTDV7261000B-part1") == 120031511040
    assert value(text, "zfs_pool_scan_rate_bytes_per_second", pool="tank", function="resilver") == 236 * 2**20
    assert value(text, "zfs_pool_scan_remaining_seconds", pool="tank", function="resilver") == 46205
    assert value(text, "zfs_exporter_source_success", source="zpool_status") == 1
