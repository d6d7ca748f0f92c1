"""The events follower through the exporter (issue 43, case 9): a `zpool events -fvH` whose output
holds a `time` of 400 hex digits and a `dropped <5000 digits> events` line among events that happen
now. Before, the first such line failed the follower, and the backlog repeated it at every restart:
no event was counted again. Now each is left out and counted, the follower runs on (started once)
and every other event is counted."""

from __future__ import annotations

import time

from tests.collectors.test_pools_health import event, flags, kstat_tree, tank, write_recordings, zpool_read
from tests.collectors.test_shared_runner import wait_until
from tests.conftest import exporter_args, samples, value
from zfsnas.wiring import build_exporter


def test_lines_that_do_not_read_are_counted_and_the_follower_goes_on(tmp_path):
    root = kstat_tree(tmp_path, "ONLINE")
    recordings = write_recordings(tmp_path / "zpool", tank("ONLINE", "ONLINE"))
    now = time.time() + 5            # after the follower's start: these happen while it runs
    bad_time = event(now, 3, "ereport.fs.zfs.io").replace(f"0x{int(now):x} 0x0", "0x" + "f" * 400 + " 0x0")
    (recordings / "zpool-events.txt").write_text(
        event(now, 1, "ereport.fs.zfs.checksum") + "dropped " + "9" * 5000 + " events\n" +
        event(now, 2, "ereport.fs.zfs.io") + bad_time + "\x00\xff garbage between events\n" +
        event(now, 4, "resource.fs.zfs.statechange") + event(now, 5, "ereport.fs.zfs.io"))
    exporter = build_exporter(exporter_args(*flags(root, recordings), "--pools.refresh-interval", "3600"),
                              process_metrics=False)
    exporter.start()
    try:
        wait_until(lambda: zpool_read(exporter))
        wait_until(lambda: 'class="statechange"' in exporter.render(), timeout=60)
        text = exporter.render()
        counted = {dict(k[1])["class"]: v for k, v in samples(text).items() if k[0] == "zfs_pool_events_total"}
        assert counted == {"checksum": 1, "io": 2, "statechange": 1}     # the event with no readable time is not
        dropped = {dict(k[1])["reason"]: v for k, v in samples(text).items()
                   if k[0] == "zfs_exporter_source_values_dropped_total" and dict(k[1])["source"] == "zpool_events"}
        assert dropped == {"out_of_range": 2, "malformed": 1}
        assert value(text, "zfs_exporter_source_success", source="zpool_events") == 1
        follower = next(c for c in exporter.collectors if c.name == "pools").events
        assert follower.runs == 1          # never failed, never started again
    finally:
        exporter.stop()
