"""`zpool events -fvH` lines that do not read (issue 43, case 9): a `time` of 400 hex digits, a
`dropped <5000 digits> events` line, junk between events. Each is left out and counted, and
reading goes on: the events around it are read as before. A storm costs a bounded share of a core:
the follower takes at most MAX_LINES_PER_SECOND lines a second. Seeded variations of each kind."""

from __future__ import annotations

import random

import pytest

from tests.conftest import FIXTURES
from zfsnas.refresh import Follower
from zfsnas.sources.zpool_events import EventReader

RECORDED = (FIXTURES / "commands" / "zfs-2.3" / "zpool-events.txt").read_text()
rng = random.Random(43)


def read(lines: list[str]) -> tuple[list, EventReader]:
    reader = EventReader()
    events = [e for line in lines for e in [reader.feed(line)] if e is not None]
    return events, reader


def hex_digits(count: int) -> str:
    return "0x" + rng.choice("123456789abcdef") + "".join(rng.choice("0123456789abcdef") for _ in range(count - 1))


def spoiled(kind: str) -> tuple[list[str], str, int]:
    """The recorded stream with one thing spoiled: (its lines, the reason counted, the event spoiled
    (its index) or -1 when no event is)."""
    lines = RECORDED.splitlines()
    headers = [i for i, line in enumerate(lines) if "\t" in line]
    which = rng.randrange(len(headers))
    times = [i for i, line in enumerate(lines) if line.startswith("        time = ")]
    eids = [i for i, line in enumerate(lines) if line.startswith("        eid = ")]
    if kind == "time of hundreds of hex digits":
        lines[times[which]] = f"        time = {hex_digits(rng.randint(17, 5000))} 0x1 "
        return lines, "out_of_range", which
    if kind == "nanoseconds past a second":
        lines[times[which]] = f"        time = 0x6b040389 0x{rng.randint(10**9, 2**64 - 1):x} "
        return lines, "out_of_range", which
    if kind == "eid of hundreds of hex digits":
        lines[eids[which]] = f"        eid = {hex_digits(rng.randint(17, 400))}"
        return lines, "out_of_range", which
    if kind == "dropped of thousands of digits":
        lines.insert(headers[which], f"dropped {rng.randint(1, 9)}{'7' * rng.randint(20, 5000)} events")
        return lines, "out_of_range", -1
    junk = "".join(chr(rng.choice((rng.randint(33, 126), rng.randint(0x80, 0x2FF)))) for _ in range(rng.randint(1, 300)))
    lines.insert(headers[which], junk)
    return lines, "malformed", -1


KINDS = ["time of hundreds of hex digits", "nanoseconds past a second", "eid of hundreds of hex digits",
         "dropped of thousands of digits", "junk between events"]


@pytest.mark.parametrize("kind", KINDS * 3, ids=[f"{k}-{i // len(KINDS)}" for i, k in enumerate(KINDS * 3)])
def test_a_line_that_does_not_read_costs_that_line(kind):
    good, _ = read(RECORDED.splitlines())
    lines, reason, which = spoiled(kind)
    events, reader = read(lines)
    assert reader.left_out.counts.get(reason) == 1, reader.left_out.counts
    assert len(events) == len(good)
    for i, (got, want) in enumerate(zip(events, good)):
        if i != which:
            assert got == want
        elif "eid" in kind:
            assert got.eid is None and got.time == want.time
        else:
            assert got.time is None and got.eid == want.eid


def test_the_kernels_dropped_events_are_counted():
    count = rng.randint(1, 10**12)
    events, reader = read([f"dropped {count} events", *RECORDED.splitlines()])
    assert reader.dropped == count and reader.left_out.counts == {"over_limit": count}
    assert reader.left_out.lines == 0 and len(events) == 7


class FakeClock:
    """The follower's clock and its stop event's waits: advanced by the lines and the waits only."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False

    def is_set(self) -> bool:
        return False


def test_a_storm_is_read_at_a_bounded_rate():
    """100,000 lines as fast as they come: the follower takes MAX_LINES_PER_SECOND a second and
    waits the rest of each second (on a fake clock: the waits are counted, not slept)."""
    from zfsnas.sources.zpool_events import MAX_LINES_PER_SECOND

    clock = FakeClock()
    seen: list[str] = []
    lines = 100_000

    def follow(_stop):
        for i in range(lines):
            clock.now += 1e-6            # the lines come far faster than they are let through
            yield f"line {i}"

    follower = Follower("zpool_events", follow, seen.append, lines_per_second=MAX_LINES_PER_SECOND, clock=clock)
    follower._stop = clock            # type: ignore[assignment]  # its waits advance the fake clock
    follower._take(follow(clock))
    assert len(seen) == lines
    assert len(clock.waits) == lines // MAX_LINES_PER_SECOND
    assert follower.waited == pytest.approx(sum(clock.waits))
    assert clock.now >= lines / MAX_LINES_PER_SECOND - 1      # no faster than the rate, over the whole storm
