"""Background refresh (exporter/zfsnas/refresh.py): the last good value is kept with its age, a
failure is reported (and logged once) without losing that value, and stopping is bounded."""

from __future__ import annotations

import threading
import time

from tests.conftest import wait_until
from zfsnas.refresh import BackgroundRefresher, Follower, RenderedOnce, stop_all


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_value_success_and_age_follow_the_fetches(caplog):
    clock = Clock()
    answers: list = [["tank"], RuntimeError("zpool list exited with status 1: no pools\nsecond line"),
                     RuntimeError("zpool list exited with status 1: no pools\nsecond line"), ["tank", "backup"]]

    def fetch():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    source = BackgroundRefresher("zpool_list", fetch, 60, clock=clock)
    state = source.state()
    assert (state.value, state.success, state.error) == (None, False, "not refreshed yet")
    clock.now += 7
    assert source.state().age_seconds == 7  # never refreshed: age since creation

    assert source.refresh_now() is True
    clock.now += 30
    state = source.state()
    assert (state.value, state.success, state.age_seconds, state.error) == (["tank"], True, 30, None)

    with caplog.at_level("DEBUG", logger="zfsnas"):
        assert source.refresh_now() is False
        clock.now += 45
        assert source.refresh_now() is False
    state = source.state()
    # the last good value stays, its age keeps growing, the error is the first line only
    assert (state.value, state.success, state.age_seconds) == (["tank"], False, 75)
    assert state.error == "zpool list exited with status 1: no pools"
    levels = [r.levelname for r in caplog.records if "source zpool_list failed" in r.getMessage()]
    assert levels == ["WARNING", "DEBUG"]  # the same error is said once

    with caplog.at_level("INFO", logger="zfsnas"):
        assert source.refresh_now() is True
    state = source.state()
    assert (state.value, state.success, state.age_seconds) == (["tank", "backup"], True, 0)
    assert any(r.getMessage() == "source zpool_list recovered" for r in caplog.records)


def test_an_exception_without_text_is_named_by_its_type():
    def fetch():
        raise TimeoutError()

    source = BackgroundRefresher("zfs_datasets", fetch, 60)
    assert not source.refresh_now() and source.state().error == "TimeoutError"


def test_the_thread_refreshes_on_its_interval_and_stops():
    calls: list[float] = []
    source = BackgroundRefresher("fast", lambda: calls.append(time.monotonic()) or len(calls), 0.1)
    source.start()
    source.start()  # a second start does not add a thread
    wait_until(lambda: len(calls) >= 3, "three refreshes at a 0.1 s interval")
    source.stop()
    assert 3 <= len(calls) <= 7, calls
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert all(gap >= 0.09 for gap in gaps), gaps  # never sooner than the interval
    count = len(calls)
    time.sleep(0.3)
    assert len(calls) == count and not source._thread.is_alive()
    assert source.state().value == count


def test_a_slow_fetch_shortens_the_wait_not_the_interval():
    """The interval runs from the start of one fetch to the start of the next."""
    calls: list[float] = []

    def fetch():
        calls.append(time.monotonic())
        time.sleep(0.15)

    source = BackgroundRefresher("slow", fetch, 0.25)
    source.start()
    wait_until(lambda: len(calls) >= 2, "a second refresh")
    source.stop()
    # 0.25 s apart, not 0.15 + 0.25 (some slack for a busy machine)
    assert len(calls) >= 2 and 0.24 <= calls[1] - calls[0] < 0.37, calls


def test_stop_all_shares_one_timeout():
    """Three refreshers each stuck in a fetch: stopping them takes the one timeout, not three."""
    release = threading.Event()
    entered = threading.Barrier(4)

    def stuck():
        entered.wait(5)
        release.wait(10)

    sources = [BackgroundRefresher(f"stuck{i}", stuck, 60) for i in range(3)]
    for source in sources:
        source.start()
    entered.wait(5)
    started = time.monotonic()
    stop_all(sources, timeout=0.6)
    took = time.monotonic() - started
    assert all(s._stop.is_set() for s in sources)
    assert 0.5 <= took < 1.2, took
    assert all(s._thread.is_alive() for s in sources)  # still stuck: not waited for beyond the timeout
    release.set()
    for source in sources:
        source._thread.join(5)
        assert not source._thread.is_alive()


def test_a_request_refreshes_now_and_can_be_waited_for():
    """An hour's interval: the second refresh comes only because it was asked for, and `wait_for`
    returns once a refresh that started after the ask has ended (not the one running at the ask)."""
    calls: list[float] = []
    gate = threading.Event()

    def fetch():
        calls.append(time.monotonic())
        if len(calls) == 2:
            gate.wait(5)   # the second refresh is slow
        return len(calls)

    source = BackgroundRefresher("asked", fetch, 3600)
    assert source.wait_for(source.request(), 0.1) is False  # no thread: nothing refreshes
    source.start()
    wait_until(lambda: calls, "the first refresh")
    ask = source.request()
    wait_until(lambda: len(calls) == 2, "the asked-for refresh starting")
    assert source.wait_for(ask, 0.3) is False  # running (held by the gate), not done
    later = source.request()   # asked while the second runs: a third refresh must start after it
    gate.set()
    assert source.wait_for(ask, 5) is True and source.state().value >= 2
    assert source.wait_for(later, 5) is True and len(calls) == 3 and source.state().value == 3
    time.sleep(0.2)
    assert len(calls) == 3   # nothing more asked: back to the hour's interval
    source.stop()
    assert source.wait_for(source.request(), 5) is False   # stopped: the wait ends at once


def test_asks_in_a_storm_keep_the_minimum_gap_an_urgent_ask_does_not_wait():
    calls: list[float] = []
    source = BackgroundRefresher("storm", lambda: calls.append(time.monotonic()), 3600, min_gap=0.2)
    source.start()
    stop = time.monotonic() + 0.9
    while time.monotonic() < stop or len(calls) < 3:   # a storm of asks for 0.9 s, and until 3 refreshes
        last = source.request()
        time.sleep(0.005)
    storm = time.monotonic() - (stop - 0.9)
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    # at most one refresh per 0.2 s of the storm (however long a busy machine made it), never closer
    assert 3 <= len(calls) <= storm / 0.2 + 2 and all(gap >= 0.19 for gap in gaps), (gaps, storm)
    assert source.wait_for(last, 30)   # the storm's last ask answered: nothing more to come
    count = len(calls)
    source.request()   # starts the gap again...
    wait_until(lambda: len(calls) == count + 1, "the refresh asked for after the storm")
    asked = time.monotonic()
    assert source.wait_for(source.request(urgent=True), 5)   # ...which an urgent ask does not wait out
    source.stop()
    assert len(calls) == count + 2 and calls[-1] - asked < 0.15, (calls[-2:], asked)


def test_a_follower_hands_on_its_lines_and_restarts_with_a_growing_pause(caplog):
    runs: list[float] = []
    lines: list[str] = []

    def follow(stop):
        runs.append(time.monotonic())
        yield f"run {len(runs)}"
        if len(runs) == 1:
            raise RuntimeError("zpool events -fvH exited with status 1: boom\nmore")
        # the later runs end at once, without error

    follower = Follower("zpool_events", follow, lines.append, backoff=(0.1, 0.25))
    assert follower.state().success is False and follower.state().error == "not started yet"
    with caplog.at_level("DEBUG", logger="zfsnas"):
        follower.start()
        wait_until(lambda: len(runs) >= 4, "four runs of the follower")
        follower.stop()
    assert lines[:3] == ["run 1", "run 2", "run 3"]
    # the pauses it chose (its debug line) double up to the bound; the clock shows each was waited out
    # (no upper bound: a busy machine may wake the thread late)
    chosen = [float(r.getMessage().split(" in ")[1].split()[0]) for r in caplog.records if "started again" in r.getMessage()]
    assert chosen[:3] == [0.1, 0.2, 0.25] and set(chosen[3:]) <= {0.25}, chosen
    pauses = [round(b - a, 2) for a, b in zip(runs, runs[1:])]
    assert all(pause >= wanted - 0.01 for pause, wanted in zip(pauses, chosen)), (pauses, chosen)
    state = follower.state()
    assert state.success is False and state.error in ("ended", "zpool events -fvH exited with status 1: boom")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["source zpool_events failed: zpool events -fvH exited with status 1: boom",
                        "source zpool_events failed: ended"]  # each reason once


def test_a_running_follower_is_healthy_and_stops_with_its_command():
    started = threading.Event()

    def follow(stop):
        started.set()
        while not stop.wait(0.02):
            yield "waiting"

    follower = Follower("zpool_events", follow, lambda line: None)
    follower.start()
    assert started.wait(5)
    time.sleep(0.1)
    state = follower.state()
    assert (state.success, state.age_seconds, state.error) == (True, 0.0, None)
    stop_all([follower], timeout=2)
    assert not follower._thread.is_alive() and follower.runs == 1
    time.sleep(0.1)
    assert follower.state().success is False and follower.state().age_seconds >= 0.09




def test_rendered_once_builds_once_per_objects_and_keeps_the_last_ones():
    builds = []

    def build(tag):
        builds.append(tag)
        return f"families of {tag}"

    kept = RenderedOnce(2)
    first, second, third = [1], [1], [1]   # equal, not the same: identity is the key
    assert kept.get((first,), lambda: build("first")) == "families of first"
    assert kept.get((first,), lambda: build("again")) == "families of first"
    assert kept.get((second,), lambda: build("second")) == "families of second"
    assert kept.get((first,), lambda: build("again")) == "families of first"   # two are kept
    kept.put((third,), "put by a refresh")
    assert kept.get((third,), lambda: build("third")) == "put by a refresh"
    assert kept.get((first,), lambda: build("first, rebuilt")) == "families of first, rebuilt"   # pushed out
    assert builds == ["first", "second", "first, rebuilt"]
    # a pair is one key: the same names with other snapshots is another result
    pair = RenderedOnce(1)
    names, snaps, other = ["tank"], {}, {}
    assert pair.get((names, snaps), lambda: "a") == "a"
    assert pair.get((names, other), lambda: "b") == "b"
    assert pair.get((names, snaps), lambda: "c") == "c"   # keep 1: only the last pair
