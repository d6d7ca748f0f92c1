"""`zpool events -fvH` read event by event, and counted once each across restarts of the command."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from zfsnas.sources.zpool_events import Event, EventCounts, EventReader, changes_health, short_class

RECORDED = FIXTURES / "commands" / "zfs-2.3" / "zpool-events.txt"


def read(text: str) -> tuple[list[Event], EventReader]:
    reader = EventReader()
    events = [event for line in text.splitlines() for event in [reader.feed(line)] if event is not None]
    return events, reader


def test_recorded_events():
    events, _ = read(RECORDED.read_text())
    assert [(e.event_class, e.pool, e.eid) for e in events] == [
        ("history_event", "tank", 0x40), ("io", "tank", 0x41), ("checksum", "tank", 0x42),
        ("statechange", "tank", 0x43), ("vdev_spare", "tank", 0x44), ("resilver_start", "tank", 0x45),
        ("config_sync", "tank", 0x46)]
    # `time = 0x6b040389 0x7bbc0 `: seconds and nanoseconds (the header prints the same moment)
    assert events[0].time == pytest.approx(0x6B040389 + 0x7BBC0 / 1e9)
    # the detector's nested `pool = 0x3f0c...` (a guid, 16 spaces in) is not the event's pool
    assert all(e.pool == "tank" for e in events)


def test_blocks_without_blank_lines_fields_and_noise():
    text = ("Nov 27 2026 10:00:00.000000001\tsysevent.fs.zfs.scrub_start\n"
            '        pool_name = "backup"\n'
            "        eid = 0x7\n"
            "Nov 27 2026 10:00:01.000000002\tereport.fs.zfs.vdev.open_failed\n"   # no blank line between
            '        pool = "usb backup"\n'
            "        time = 0x6927a5c1 0x2 \n"
            "\n"
            "dropped 12 events\n"
            "Nov 27 2026 10:00:02.000000003\tereport.fs.zfs.deadman\n"
            "        eid = not-hex\n"
            '        pool = "no closing quote\n'
            "\n")
    events, reader = read(text)
    assert events == [Event("scrub_start", "backup", 7, None), Event("vdev.open_failed", "usb backup", None,
                                                                     0x6927A5C1 + 2e-9),
                      Event("deadman", "", None, None)]
    assert reader.dropped == 12


def test_short_class_and_what_changes_health():
    assert [short_class(c) for c in ("ereport.fs.zfs.checksum", "resource.fs.zfs.statechange",
                                     "sysevent.fs.zfs.resilver_finish", "something.else")] == [
        "checksum", "statechange", "resilver_finish", "something.else"]
    changing = [c for c in ("checksum", "io", "statechange", "removed", "resilver_start", "scrub_finish",
                            "vdev_attach", "config_sync", "history_event", "delay", "deadman", "trim_start")
                if changes_health(Event(c, "tank", 1, 1.0))]
    assert changing == ["checksum", "io", "statechange", "removed", "resilver_start", "scrub_finish",
                        "vdev_attach", "config_sync"]


def ev(cls: str, eid: int | None, at: float | None, pool: str = "tank") -> Event:
    return Event(cls, pool, eid, at)


def test_backlog_is_not_counted_and_restarts_count_each_event_once():
    counts = EventCounts()
    counts.started(now=1000.0)
    # the kernel's backlog, printed first: all from before the start
    assert [counts.add(ev("history_event", n, 900.0 + n)) for n in (1, 2, 3)] == [False] * 3
    assert counts.add(ev("checksum", 4, 1001.0)) and counts.add(ev("checksum", 5, 1002.0))
    assert counts.counts == {("tank", "checksum"): 2}
    # the command died and is started again at 1100: it prints its whole backlog again
    counts.started(now=1100.0)
    replay = [ev("history_event", n, 900.0 + n) for n in (1, 2, 3)] + [ev("checksum", 4, 1001.0), ev("checksum", 5, 1002.0)]
    assert not any(counts.add(e) for e in replay)
    # what happened while it was down (eid 6 at 1050) counts, then new events
    assert counts.add(ev("statechange", 6, 1050.0)) and counts.add(ev("io", 7, 1101.0))
    assert counts.counts == {("tank", "checksum"): 2, ("tank", "statechange"): 1, ("tank", "io"): 1}
    # the module was reloaded: ids start again from 1, but these happened after the start
    counts.started(now=2000.0)
    assert counts.add(ev("io", 1, 2001.0)) and not counts.add(ev("io", 1, 1999.0))
    assert counts.counts[("tank", "io")] == 2


def test_series_are_bounded():
    counts = EventCounts(max_series=2)
    counts.started(now=0.0)
    for n, pool in enumerate(("a", "b", "c", "a", "c"), 1):
        counts.add(ev("io", n, float(n), pool))
    assert counts.counts == {("a", "io"): 2, ("b", "io"): 1} and counts.dropped_series == 2
