"""Background refresh for slow sources (the zfs/zpool commands): scrapes never wait for them.

A `BackgroundRefresher` calls its fetch function on its own interval in a daemon thread, one call
at a time, and keeps the last good value with its age, so a hung or failing command shows up as a
growing `zfs_exporter_source_age_seconds` and `zfs_exporter_source_success 0` while the previous
values keep being served. A refresh can also be asked for early (`request`, e.g. when a pool's
state kstat changes) and waited for with a bound (`wait_for`).

A `Follower` runs a long-lived command (`zpool events -f`) in a daemon thread, hands its lines to a
consumer as they come and starts it again when it ends, after a pause that grows while it keeps
failing. Both report the same way: `name` and `state()` (the `Source` contract the scrape reads).

What a refresh builds is kept for the scrapes (`RenderedOnce`; families rendered once in the
refresh are `exposition.Family.frozen()`'s). The CPU-heavy part of a
refresh runs in a forked child process: that machinery is `forked.ForkedWork`'s, not this module's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .sources.model import Explained, NotRecorded, SourceIncomplete

if TYPE_CHECKING:
    from .sources.model import Dropped

if TYPE_CHECKING:  # a Protocol costs start-up and checks nothing at run time
    from typing import Protocol

    class Source(Protocol):
        """What the scrape reports of a background source (`zfs_exporter_source_*{source}`) and
        how a collector starts and stops it."""

        name: str
        explained_while: Callable[[], bool] | None

        def state(self) -> SourceState: ...

        def dropped(self) -> dict[str, int]: ...

        def wait_tried(self, timeout: float) -> bool: ...

        def start(self) -> None: ...

        def request_stop(self) -> None: ...

        def stop(self, timeout: float = 5.0) -> None: ...

T = TypeVar("T")
log = logging.getLogger("zfsnas")


class SourceState(Generic[T]):
    """A source's last good value (None before the first), whether its last refresh succeeded, the
    seconds since that value was read (or since the source was made), and the last error;
    `explained` when that error was already said elsewhere (`Explained`, or while the refresher's
    `explained_while` holds), `absent` when it is a replay's capture lacking the input
    (`NotRecorded`), not a failure of the collector that reads the source. (A plain class: a frozen
    dataclass costs about half a millisecond of every start.)"""

    __slots__ = ("value", "success", "age_seconds", "error", "explained", "absent")

    def __init__(self, value: T | None, success: bool, age_seconds: float, error: str | None,
                 explained: bool = False, absent: bool = False):
        self.value = value
        self.success = success
        self.age_seconds = age_seconds
        self.error = error
        self.explained = explained
        self.absent = absent

    def __repr__(self) -> str:
        return (f"SourceState(value={self.value!r}, success={self.success!r}, "
                f"age_seconds={self.age_seconds!r}, error={self.error!r})")


class StartGate:
    """Holds the first refresh of the refreshers made with `wait_for_start` until `release()` or
    for at most the `seconds` given to `hold`. The exporter holds it from its start until its first
    page is rendered: the command sources' refreshes (their imports, `zfs`/`zpool` forks and
    parses) would otherwise compete for the GIL and the CPU with that first answer, which cannot
    hold their values anyway (a command takes longer). In-process sources (module parameters, the
    disk scan) are not held: a scrape right after the first one finds them read, as before.
    Open unless held, so a refresher made elsewhere (tests, capture) is unaffected."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self._until = 0.0

    def hold(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def wait(self, stop: threading.Event) -> None:
        """Until released, the hold ends, or `stop` is set (looked at every 50 ms: a refresher
        stopped while held ends without a refresh)."""
        while not self._open.wait(min(0.05, max(0.0, self._until - time.monotonic()))):
            if stop.is_set() or time.monotonic() >= self._until:
                return


START = StartGate()  # one per process: the exporter's own start


class DroppedCounts:
    """What one source's parsers left out since start, by reason
    (`zfs_exporter_source_values_dropped_total`); the first time a reason appears it is logged, with
    an example. Shared by the refreshers and the followers."""

    def __init__(self, name: str, lock: threading.Lock) -> None:
        self.name = name
        self._lock = lock
        self._counts: dict[str, int] = {}

    def add(self, dropped: Dropped) -> None:
        with self._lock:
            new = [reason for reason in dropped.counts if reason not in self._counts]
            for reason, count in dropped.counts.items():
                self._counts[reason] = self._counts.get(reason, 0) + count
        for reason in new:
            log.warning("source %s: left out %d line(s) or field(s) (%s), e.g. %s; counted from now on in "
                        "zfs_exporter_source_values_dropped_total", self.name, dropped.counts[reason], reason,
                        dropped.examples.get(reason, ""))

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class BackgroundRefresher(Generic[T]):
    def __init__(self, name: str, fetch: Callable[[], T], interval: float,
                 clock: Callable[[], float] = time.monotonic, wait_for_start: bool = False, min_gap: float = 0.0):
        """`wait_for_start`: the thread's first refresh waits for the exporter's first answer (`START`).
        `min_gap`: seconds between the starts of two refreshes however often one is requested, but
        for an `urgent` request (one a scrape waits for)."""
        self.name = name
        self.wait_for_start = wait_for_start
        self.interval = interval
        self.min_gap = min_gap
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._value: T | None = None
        self._good_at: float | None = None
        self._started_at = clock()
        self._success = False
        self._error: str | None = "not refreshed yet"
        self._explained = True   # a first refresh still to come is no news (docs/datasets-pools.md)
        self._absent = False
        # Set by whoever wires the exporter: failures while it returns True were said already (the
        # sources of collectors that need ZFS, while no ZFS module is loaded: the scrape says so).
        self.explained_while: Callable[[], bool] | None = None
        self._tried = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Early refreshes: `request` numbers each ask; `_covered` is the highest number a refresh
        # that started after it has answered. The loop sleeps on `_changed` until the interval ends,
        # an ask comes or it is stopped.
        self._changed = threading.Condition(self._lock)
        self._asked = 0
        self._urgent = 0   # the number of the last urgent ask
        self._covered = 0
        self._dropped = DroppedCounts(name, self._lock)  # what the parsers left out, over every refresh

    def request(self, urgent: bool = False) -> int:
        """Ask for a refresh now rather than at the next interval (in the background: a refresh
        running already finishes first, then another starts, `min_gap` after it started unless
        `urgent`); returns the ask's number for `wait_for`."""
        with self._changed:
            self._asked += 1
            if urgent:
                self._urgent = self._asked
            self._changed.notify_all()
            return self._asked

    def wait_for(self, ask: int, timeout: float) -> bool:
        """Wait at most `timeout` seconds for a refresh that started after ask `ask` to end (well or
        not); True if one did. Without a running thread nothing refreshes: False at once."""
        with self._changed:
            if self._thread is None:
                return self._covered >= ask
            return self._changed.wait_for(lambda: self._covered >= ask or self._stop.is_set(), timeout) \
                and self._covered >= ask

    @property
    def stopping(self) -> bool:
        """Whether the refresher was told to stop (what fails from now on is expected, not news)."""
        return self._stop.is_set()

    @property
    def tried(self) -> bool:
        """Whether a refresh has ended yet, well or not."""
        return self._tried

    def wait_tried(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the first refresh to end (well or not); True once one
        has. Without a running thread nothing refreshes: the answer at once."""
        with self._changed:
            if self._thread is None:
                return self._tried
            return self._changed.wait_for(lambda: self._tried or self._stop.is_set(), timeout) and self._tried

    def refresh_now(self) -> bool:
        """Fetch once, synchronously; True on success. A fetch that raises `SourceIncomplete` (a
        listing past its cap) publishes the value it carries and still reports failure."""
        started = time.perf_counter()
        try:
            value = self._fetch()
        except Exception as exc:
            error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
            explained = isinstance(exc, Explained) or (self.explained_while is not None and self.explained_while())
            with self._lock:
                first = error != self._error and not explained
                self._success, self._error, self._tried = False, error, True
                self._explained, self._absent = explained, isinstance(exc, NotRecorded)
                if isinstance(exc, SourceIncomplete):
                    self._value, self._good_at = exc.value, self._clock()  # type: ignore[assignment]
            quiet = not first or self._stop.is_set()  # a failure while shutting down is expected
            log.log(logging.DEBUG if quiet else logging.WARNING, "source %s failed: %s", self.name, error)
            return False
        with self._lock:
            recovered = not self._success and self._good_at is not None
            self._value, self._good_at, self._success, self._error, self._tried = value, self._clock(), True, None, True
            self._explained = self._absent = False
        if recovered:
            log.info("source %s recovered", self.name)
        log.debug("source %s refreshed in %.3fs", self.name, time.perf_counter() - started)
        return True

    def count_dropped(self, dropped: Dropped) -> None:
        """Add what one read's parsers left out (`zfs_exporter_source_values_dropped_total`)."""
        self._dropped.add(dropped)

    def dropped(self) -> dict[str, int]:
        """What the parsers of this source left out since start, by reason."""
        return self._dropped.counts()

    def state(self) -> SourceState[T]:
        with self._lock:
            since = self._good_at if self._good_at is not None else self._started_at
            return SourceState(self._value, self._success, max(0.0, self._clock() - since), self._error,
                               self._explained, self._absent)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"refresh-{self.name}", daemon=True)
            self._thread.start()

    def _asked_after(self, covered: int, urgent: bool = False) -> Callable[[], bool]:
        """What ends the loop's sleep: a stop, or an (urgent) ask after those the last refresh covered."""
        if urgent:
            return lambda: self._stop.is_set() or self._urgent > covered
        return lambda: self._stop.is_set() or self._asked > covered

    def request_stop(self) -> None:
        with self._changed:
            self._stop.set()
            self._changed.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        if self.wait_for_start:
            START.wait(self._stop)
        while not self._stop.is_set():
            started = time.monotonic()
            with self._lock:
                covering = self._asked
            self.refresh_now()
            with self._changed:
                self._covered = max(self._covered, covering)
                self._changed.notify_all()
                self._changed.wait_for(self._asked_after(covering), max(0.0, self.interval - (time.monotonic() - started)))
                # an early refresh keeps `min_gap` after the start of the one before, unless urgent
                self._changed.wait_for(self._asked_after(covering, urgent=True),
                                       max(0.0, self.min_gap - (time.monotonic() - started)))


class Follower:
    """Follows a long-lived command in a daemon thread: `follow(stop)` runs it and yields its lines
    until it ends (or `stop` is set), each handed to `consume`. When it ends it is started again
    after `backoff[0]` seconds, doubling up to `backoff[1]` while it keeps ending within a minute.
    At most `lines_per_second` lines are taken a second (none: no bound): under a storm the
    command's pipe fills and it waits, and the thread's CPU stays bounded. What `consume` leaves
    out is counted with `count_dropped`, as a refresher's parsers' is.
    `state()`: success while it runs (age 0), else the seconds since it last ran and why it ended."""

    RESET_AFTER = 60.0  # a run this long was healthy: the next restart waits backoff[0] again

    def __init__(self, name: str, follow: Callable[[threading.Event], Iterable[str]], consume: Callable[[str], None],
                 backoff: tuple[float, float] = (1.0, 60.0), wait_for_start: bool = False,
                 lines_per_second: int | None = None, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self._follow = follow
        self._consume = consume
        self.backoff = backoff
        self.wait_for_start = wait_for_start
        self.lines_per_second = lines_per_second
        self._clock = clock
        self.waited = 0.0   # seconds the line bound held the stream back, in all
        self._lock = threading.Lock()
        self._dropped = DroppedCounts(name, self._lock)
        self._running = False
        self._since = time.monotonic()   # when it last started or stopped running
        self._error: str | None = "not started yet"
        self._runs = 0
        self._logged: str | None = None   # the last reason for a restart that was logged
        self.explained_while: Callable[[], bool] | None = None   # as BackgroundRefresher's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def runs(self) -> int:
        """How many times the command was started."""
        return self._runs

    def count_dropped(self, dropped: Dropped) -> None:
        """Add what `consume` left out of the stream (`zfs_exporter_source_values_dropped_total`)."""
        self._dropped.add(dropped)

    def dropped(self) -> dict[str, int]:
        return self._dropped.counts()

    def wait_tried(self, timeout: float) -> bool:
        """A followed command has no first read to wait for (its first line may never come)."""
        return True

    def state(self) -> SourceState[None]:
        with self._lock:
            age = 0.0 if self._running else max(0.0, time.monotonic() - self._since)
            return SourceState(None, self._running, age, None if self._running else self._error)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"follow-{self.name}", daemon=True)
            self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self, timeout: float = 5.0) -> None:
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _set(self, running: bool, error: str | None) -> None:
        with self._lock:
            self._running, self._since, self._error = running, time.monotonic(), error

    def _loop(self) -> None:
        if self.wait_for_start:
            START.wait(self._stop)
        pause = self.backoff[0]
        while not self._stop.is_set():
            started = time.monotonic()
            self._runs += 1
            self._set(True, None)
            try:
                self._take(self._follow(self._stop))
                error = "ended"
                explained = False
            except Exception as exc:
                error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
                explained = isinstance(exc, Explained) or (self.explained_while is not None and self.explained_while())
            self._set(False, error)
            if self._stop.is_set():
                return
            pause = self.backoff[0] if time.monotonic() - started >= self.RESET_AFTER else pause
            # a reason is said once, and not at all when said elsewhere (`Explained`: the start-up line)
            level = logging.DEBUG if error == self._logged or explained else logging.WARNING
            self._logged = error
            log.log(level, "source %s failed: %s", self.name, error)
            log.debug("source %s: started again in %g s", self.name, pause)
            self._stop.wait(pause)
            pause = min(self.backoff[1], pause * 2)


    def _take(self, lines: Iterable[str]) -> None:
        """Each line to `consume`, at most `lines_per_second` a second: past them the thread waits
        for the second's end (the command's pipe fills meanwhile: it waits too)."""
        budget, second = self.lines_per_second, self._clock()
        for line in lines:
            self._consume(line)
            if budget is None:
                continue
            budget -= 1
            if budget <= 0:
                rest = 1.0 - (self._clock() - second)
                if rest > 0:
                    self.waited += rest
                    if self._stop.wait(rest):
                        return
                budget, second = self.lines_per_second, self._clock()


class RenderedOnce:
    """What a collector builds from its sources' values (their families, rendered), made once and
    served to every scrape while the refreshers hand out the same objects. A refresh publishes a
    new object only when it has read its source again, so the objects' identity is the key: nothing
    is compared or hashed. The last `keep` results are kept: a refresh may build its new value's
    families a moment before it publishes the value, while scrapes still ask for the one before."""

    __slots__ = ("keep", "_kept")

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._kept: list[tuple[tuple[object, ...], Any]] = []

    def get(self, values: tuple[object, ...], build: Callable[[], Any]) -> Any:
        """The result kept for exactly these objects, else `build()`, kept for them from now on."""
        for known, result in self._kept:
            if len(known) == len(values) and all(a is b for a, b in zip(known, values)):
                return result
        result = build()
        self.put(values, result)
        return result

    def put(self, values: tuple[object, ...], result: Any) -> None:
        """Keep `result` for these objects (e.g. what a refresh built before publishing them)."""
        self._kept = [*self._kept[max(0, len(self._kept) - self.keep + 1):], (values, result)]  # one list swap: thread-safe


def stop_all(refreshers: Iterable[Source], timeout: float = 5.0) -> None:
    """Stop several refreshers within one shared `timeout`: a fetch stuck in each of them must not
    add up at shutdown. (A hung command is killed before this: the exporter closes the command
    runner first.)"""
    refreshers = list(refreshers)
    for refresher in refreshers:
        refresher.request_stop()
    deadline = time.monotonic() + timeout
    for refresher in refreshers:
        refresher.stop(timeout=max(0.0, deadline - time.monotonic()))


_MMAP_PINNED: list[bool] = []


def return_big_blocks() -> None:
    """Give every allocation over 128 KiB a mapping of its own, returned to the kernel when freed
    (glibc's M_MMAP_THRESHOLD, pinned). glibc raises that threshold after the first such block is
    freed and serves later ones from the heap, where fragmentation keeps them: a page of tens of MB
    rebuilt every refresh then grew the exporter by most of a page a refresh (60 to 144 MiB in 40 s
    with a 37 MB page refreshed every second). Called by a refresh about to build one (ctypes is
    imported then, not at start-up); does nothing where the C library is not glibc."""
    if _MMAP_PINNED:
        return
    _MMAP_PINNED.append(True)
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        m_mmap_threshold = -3
        libc.mallopt(m_mmap_threshold, 128 * 1024)
    except (OSError, AttributeError):
        pass
