"""Background refresh (exporter/zfsnas/refresh.py): the last good value is kept with its age, a
failure is reported (and logged once) without losing that value, and stopping is bounded."""

from __future__ import annotations

import threading
import time


from zfsnas.refresh import BackgroundRefresher, stop_all


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
    time.sleep(0.55)
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
    time.sleep(0.65)
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
