"""Background refresh for slow sources (the zfs/zpool commands): scrapes never wait for them.

A `BackgroundRefresher` calls its fetch function on its own interval in a daemon thread, one call
at a time, and keeps the last good value with its age, so a hung or failing command shows up as a
growing `zfs_exporter_source_age_seconds` and `zfs_exporter_source_success 0` while the previous
values keep being served.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("zfsnas")


@dataclass(frozen=True)
class SourceState(Generic[T]):
    value: T | None
    success: bool
    age_seconds: float
    error: str | None


class BackgroundRefresher(Generic[T]):
    def __init__(self, name: str, fetch: Callable[[], T], interval: float,
                 clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.interval = interval
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._value: T | None = None
        self._good_at: float | None = None
        self._started_at = clock()
        self._success = False
        self._error: str | None = "not refreshed yet"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh_now(self) -> bool:
        """Fetch once, synchronously; True on success."""
        try:
            value = self._fetch()
        except Exception as exc:
            error = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            with self._lock:
                first = error != self._error
                self._success, self._error = False, error
            log.log(logging.WARNING if first else logging.DEBUG, "source %s failed: %s", self.name, error)
            return False
        with self._lock:
            recovered = not self._success and self._good_at is not None
            self._value, self._good_at, self._success, self._error = value, self._clock(), True, None
        if recovered:
            log.info("source %s recovered", self.name)
        return True

    def state(self) -> SourceState[T]:
        with self._lock:
            since = self._good_at if self._good_at is not None else self._started_at
            return SourceState(self._value, self._success, max(0.0, self._clock() - since), self._error)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"refresh-{self.name}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            self.refresh_now()
            self._stop.wait(max(0.0, self.interval - (self._clock() - started)))


def stop_all(refreshers: Iterable[BackgroundRefresher], timeout: float = 5.0) -> None:
    """Stop several refreshers within one shared `timeout`: a fetch stuck in each of them must not
    add up at shutdown. (A hung command is killed before this: the exporter closes the command
    runner first.)"""
    refreshers = list(refreshers)
    for refresher in refreshers:
        refresher._stop.set()
    deadline = time.monotonic() + timeout
    for refresher in refreshers:
        refresher.stop(timeout=max(0.0, deadline - time.monotonic()))
