"""ZFS events (`zpool events -fvH`): what the kernel reports as it happens, read as it comes.

Owns the command line the `pools` collector follows and the reading of its output, one event at a
time: a header line (`Nov 27 2026 10:00:00.123456789<TAB>ereport.fs.zfs.checksum`), the event's
fields one a line at eight spaces (`pool = "tank"`, `eid = 0x1a`, `time = 0x6925f0c8 0x1d4c1f0`;
nested lists deeper), a blank line. Ereports and resource events name their pool `pool`, sysevents
`pool_name`. `zpool events -f` first prints the events the kernel still holds (up to
`zfs_zevent_len_max`) and then waits for new ones; `EventCounts` counts each event once: not the
backlog of before the exporter started, not the backlog again when the command is started anew.
It must not build metrics nor run anything.

One line that does not read costs that line (or field), never the follower: it is left out and
counted in `EventReader.left_out` (`malformed`: a line outside any event, a field that does not
parse; `out_of_range`: an id, time or count past the kernel's 64 bits), and reading goes on. The
events the kernel says it dropped (its queue overflowed while we read slowly, as under a storm:
the follower reads at most `MAX_LINES_PER_SECOND`) are counted there too (`over_limit`).
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple

from .model import Dropped

FOLLOW_EVENTS = ("zpool", "events", "-fvH")
# `ereport.fs.zfs.checksum` -> `checksum`, `resource.fs.zfs.statechange` -> `statechange`,
# `sysevent.fs.zfs.resilver_start` -> `resilver_start`, `ereport.fs.zfs.vdev.open_failed` -> `vdev.open_failed`.
CLASS_PREFIXES = ("ereport.fs.zfs.", "resource.fs.zfs.", "sysevent.fs.zfs.")
# Events that leave `zpool status` as it was: no early refresh for them.
NO_HEALTH_CHANGE = ("history_event", "delay", "deadman", "trim_", "initialize_", "bootfs_vdev_attach")
MAX_SERIES = 1000          # distinct (pool, class) pairs counted; later new pairs are counted as dropped
MAX_FIELDS = 64            # top-level fields kept of one event (the few read are near the top)
MAX_LINES_PER_SECOND = 5000   # read at most this fast: an event storm costs a few % of a core, the kernel drops the rest
UINT64_HEX_DIGITS = 16

_HEADER = re.compile(r"[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{4} [0-9:]{8}\.[0-9]{9}\t(\S+)")
_FIELD = re.compile(r" {8}([a-z_]+) = (.*)")
_DROPPED = re.compile(r"dropped ([0-9]+) events")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


class Event(NamedTuple):
    """One event: `event_class` without its `*.fs.zfs.` prefix, its pool ("" when it names none),
    the kernel's event id and time (Unix seconds), None when not printed."""

    event_class: str
    pool: str
    eid: int | None
    time: float | None


def short_class(name: str) -> str:
    for prefix in CLASS_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def changes_health(event: Event) -> bool:
    """Whether the event can change what `zpool status`/`list` say (a vdev's state or errors, a scan)."""
    return not event.event_class.startswith(NO_HEALTH_CHANGE)


class EventReader:
    """Reads `zpool events -fvH` output line by line; `feed` returns an event once its block ends
    (at the blank line after it, or at the next header when a block has none). What does not read
    is left out and counted in `left_out` (the caller takes it and puts a new one)."""

    def __init__(self) -> None:
        self._class: str | None = None
        self._fields: dict[str, str] = {}
        self.dropped = 0   # events the kernel said it dropped (`dropped N events`: its queue overflowed)
        self.left_out = Dropped()

    def feed(self, line: str) -> Event | None:
        if header := _HEADER.fullmatch(line):
            done = self._finish()
            self._class, self._fields = short_class(header[1]), {}
            return done
        if not line.strip():
            return self._finish()
        if self._class is not None:
            field = _FIELD.fullmatch(line)
            if field and len(self._fields) < MAX_FIELDS:
                self._fields.setdefault(field[1], field[2])
        elif dropped := _DROPPED.fullmatch(line.strip()):
            if len(dropped[1]) > 20:          # no uint64 has more digits
                self.left_out.add("out_of_range", line)
            else:
                self.dropped += int(dropped[1])
                self.left_out.add("over_limit", f"the kernel dropped events: {line.strip()}", count=int(dropped[1]),
                                  line=False)
        else:
            self.left_out.add("malformed", line)
        return None

    def _finish(self) -> Event | None:
        if self._class is None:
            return None
        fields, name = self._fields, self._class
        self._class, self._fields = None, {}
        pool = self._string(fields, "pool") or self._string(fields, "pool_name")
        return Event(name, pool, self._hex("eid", fields.get("eid")), self._event_time(fields.get("time")))

    def _string(self, fields: dict[str, str], name: str) -> str:
        value = fields.get(name)
        if value is None:
            return ""
        if len(value) >= 2 and value[0] == value[-1] == '"':
            return value[1:-1]
        self.left_out.field("malformed", f"{name} = {value}")
        return ""

    def _hex(self, name: str, value: str | None) -> int | None:
        """A 64-bit number as zpool prints it (`0x1a`); None, counted, when it is not one."""
        if value is None:
            return None
        text = value.strip()
        if not _HEX.fullmatch(text):
            self.left_out.field("malformed", f"{name} = {value}")
            return None
        if len(text[2:].lstrip("0")) > UINT64_HEX_DIGITS:
            self.left_out.field("out_of_range", f"{name} = {value}")
            return None
        return int(text, 16)

    def _event_time(self, value: str | None) -> float | None:
        """`0x6925f0c8 0x1d4c1f0`: seconds and nanoseconds."""
        if value is None:
            return None
        parts = value.split()
        if len(parts) != 2:
            self.left_out.field("malformed", f"time = {value}")
            return None
        seconds, nanos = self._hex("time", parts[0]), self._hex("time", parts[1])
        if seconds is None or nanos is None:
            return None
        if nanos >= 1_000_000_000:
            self.left_out.field("out_of_range", f"time = {value}")
            return None
        return seconds + nanos / 1e9


class EventCounts:
    """Events counted by (pool, class), each once across restarts of the command. Nothing from
    before the first start counts: the backlog the kernel keeps is not this exporter's to count.
    After a restart an event counts when it happened after that start, or after the first start
    with an id above the highest seen (it happened while the command was down); the backlog seen
    before is not counted again, and ids that start again from 1 (the module was reloaded) count
    by their time."""

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.max_series = max_series
        self.dropped_series = 0     # events not counted because `max_series` pairs were taken
        self._last_eid: int | None = None
        self._first_start: float | None = None
        self._run_started = 0.0

    def started(self, now: float | None = None) -> None:
        """The command was (re)started at `now` (Unix seconds): what it prints of before is a backlog."""
        self._run_started = time.time() if now is None else now
        if self._first_start is None:
            self._first_start = self._run_started

    def add(self, event: Event) -> bool:
        """Count the event unless it is a backlog or was counted already; True if counted."""
        fresh = event.time is not None and event.time >= self._run_started
        unseen = event.eid is not None and (self._last_eid is None or event.eid > self._last_eid)
        if unseen:
            self._last_eid = event.eid
        missed = unseen and event.time is not None and event.time >= (self._first_start or 0.0)
        if not (fresh or missed):
            return False
        key = (event.pool, event.event_class)
        if key in self.counts:
            self.counts[key] += 1
        elif len(self.counts) < self.max_series:
            self.counts[key] = 1
        else:
            self.dropped_series += 1
            return False
        return True
