"""Background refresh for slow sources (the zfs/zpool commands): scrapes never wait for them.

A `BackgroundRefresher` calls its fetch function on its own interval in a daemon thread, one call
at a time, and keeps the last good value with its age, so a hung or failing command shows up as a
growing `zfs_exporter_source_age_seconds` and `zfs_exporter_source_success 0` while the previous
values keep being served. A refresh can also be asked for early (`request`, e.g. when a pool's
state kstat changes) and waited for with a bound (`wait_for`).

A `Follower` runs a long-lived command (`zpool events -f`) in a daemon thread, hands its lines to a
consumer as they come and starts it again when it ends, after a pause that grows while it keeps
failing. Both report the same way: `name` and `state()` (the `Source` contract the scrape reads).

`ForkedWork` runs the CPU-heavy part of a refresh (parsing and rendering 5,000 datasets, scanning
4,000 disks) in a forked child process. In a thread of the exporter that work holds the GIL against
the scrape: the scrape gets it back only at the 5 ms switch interval after each of its file reads
and socket writes, and shares it with the refresh besides. A forked child starts in about a
millisecond with everything already imported, runs on the other core, and hands back its result
(pickled) through a pipe. The child runs only pure parsing, rendering and file reading: never a
`zfs`/`zpool` command (those stay with the shared runner in the refresh thread), no lock that
another thread of the exporter might have held when it forked, and no import of a module not yet
imported (another thread may have held its import lock). See docs/performance.md,
"Background work and the scrape".
"""

from __future__ import annotations

import gc
import io
import logging
import os
import select
import signal
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
        self._dropped: dict[str, int] = {}  # reason -> what the parsers left out, over every refresh

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
    def tried(self) -> bool:
        """Whether a refresh has ended yet, well or not."""
        return self._tried

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
        """Add what one read's parsers left out (`zfs_exporter_source_values_dropped_total`); the
        first time a reason appears it is logged, with an example."""
        with self._lock:
            new = [reason for reason in dropped.counts if reason not in self._dropped]
            for reason, count in dropped.counts.items():
                self._dropped[reason] = self._dropped.get(reason, 0) + count
        for reason in new:
            log.warning("source %s: left out %d line(s) or field(s) (%s), e.g. %s; counted from now on in "
                        "zfs_exporter_source_values_dropped_total", self.name, dropped.counts[reason], reason,
                        dropped.examples.get(reason, ""))

    def dropped(self) -> dict[str, int]:
        """What the parsers of this source left out since start, by reason."""
        with self._lock:
            return dict(self._dropped)

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
    `state()`: success while it runs (age 0), else the seconds since it last ran and why it ended."""

    RESET_AFTER = 60.0  # a run this long was healthy: the next restart waits backoff[0] again

    def __init__(self, name: str, follow: Callable[[threading.Event], Iterable[str]], consume: Callable[[str], None],
                 backoff: tuple[float, float] = (1.0, 60.0), wait_for_start: bool = False):
        self.name = name
        self._follow = follow
        self._consume = consume
        self.backoff = backoff
        self.wait_for_start = wait_for_start
        self._lock = threading.Lock()
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

    def dropped(self) -> dict[str, int]:
        """Nothing is left out of a followed stream: an event that does not read is not counted."""
        return {}

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
                for line in self._follow(self._stop):
                    self._consume(line)
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


try:
    _MAX_FD = os.sysconf("SC_OPEN_MAX")
except (AttributeError, ValueError, OSError):
    _MAX_FD = 65536


CHILD_NICENESS = 10


class ForkedWork:
    """Runs work in forked child processes, one `run` at a time per caller, each bounded by
    `timeout` seconds; `close()` kills what runs and refuses what comes (the collector that made it
    calls it when it stops). The work's result or exception comes back pickled; a child that hangs
    is killed at its timeout and one that dies is reported, both as a `SourceError`."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running: set[int] = set()
        self._closed = False

    def run(self, work: Callable[..., T], what: str, feed: Iterable[bytes] | None = None) -> T:
        """`work()`'s result, computed in a child process; `what` names it in errors ("parsing zfs list").
        With `feed`, the child runs `work(reader)`: `reader` is a binary file that yields the bytes
        of `feed` as this thread writes them (a command's output, passed on as it comes). An error
        raised by `feed` kills the child and is raised here."""
        import pickle  # here, not at start-up: only a forked refresh needs it; imported before the fork

        from .sources.model import SourceError

        read_end, write_end = os.pipe()
        feed_read, feed_write = os.pipe() if feed is not None else (-1, -1)
        with self._lock:
            if self._closed:
                for fd in (read_end, write_end, feed_read, feed_write):
                    if fd >= 0:
                        os.close(fd)
                raise SourceError(f"{what}: exporter shutting down")
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child's coverage is not collected
                if feed is None:
                    _child(work, write_end, (write_end,))
                _child(lambda: work(os.fdopen(feed_read, "rb")), write_end, (write_end, feed_read))
            self._running.add(pid)
        os.close(write_end)
        if feed is not None:
            os.close(feed_read)
        outcome: str = "timeout"
        result: Any = None
        try:
            if feed is not None:
                try:
                    _feed(feed_write, feed, self.timeout)
                except BrokenPipeError:
                    pass  # the child stopped reading: its result says why
                finally:
                    os.close(feed_write)
            # Unpickled as it comes (a result of tens of MB is never held twice, as bytes and as objects).
            reader = _PipeReader(read_end, time.monotonic() + self.timeout)
            try:
                result = pickle.load(io.BufferedReader(reader, 1 << 16))
                outcome = "done"
            except (EOFError, pickle.UnpicklingError, ValueError, AttributeError):
                outcome = "died"
        except TimeoutError:  # the child stopped reading what it is fed, or took too long
            pass
        finally:
            os.close(read_end)
            with self._lock:
                self._running.discard(pid)
            if outcome != "done":
                _kill(pid)
            status = _reap(pid, wait=outcome == "done")
        if outcome == "timeout":
            raise SourceError(f"{what} took longer than {self.timeout:g}s in its child process and was killed")
        if outcome == "died":
            raise SourceError(f"{what}: its child process died ({_describe(status)})")
        ok, value = result
        if not ok:
            raise value
        return value

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = list(self._running)
        for pid in running:
            _kill(pid)


def _child(work: Callable[[], object], write_end: int, keep: tuple[int, ...]) -> None:  # pragma: no cover
    """The child's whole life: run `work`, write (ok, result or exception) pickled, exit at once
    (no atexit handlers, no flushing of buffers copied from the parent)."""
    import pickle  # already imported by `ForkedWork.run` before the fork: a lookup, no import lock

    status = 0
    try:
        _close_inherited(keep)
        try:  # background work: the scheduler gives the scrape (and the NAS) the core first
            os.nice(CHILD_NICENESS)
        except OSError:
            pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        gc.disable()  # short-lived: refcounting frees its garbage, and a collection would copy pages
        try:
            result: tuple[bool, object] = (True, work())
        except Exception as exc:
            result = (False, exc)
        if result[0]:  # plain data: pickled straight into the pipe, never whole in memory
            with os.fdopen(write_end, "wb", buffering=1 << 16) as out:
                pickle.dump(result, out, pickle.HIGHEST_PROTOCOL)
            return
        try:
            data = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an exception that does not pickle: its text does
            data = pickle.dumps((False, RuntimeError(str(exc) if result[0] else str(result[1]))))
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view):]
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _close_inherited(keep: tuple[int, ...]) -> None:  # pragma: no cover - runs in the child
    """Close every descriptor but stdin/out/err and `keep`. Without this the child would hold
    whatever pipe another thread of the exporter had open when it forked: the write end of a
    command's output (whose reader then waits for the child to exit) or of the pipe through which
    `subprocess.Popen` learns that exec succeeded (and blocks, holding the command runner's turn)."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, _MAX_FD)


def _feed(fd: int, feed: Iterable[bytes], stall: float) -> None:
    """Write every piece of `feed` to the pipe `fd`; TimeoutError if the child reads nothing for `stall` seconds."""
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    for piece in feed:
        view = memoryview(piece)
        while view:
            if not poller.poll(stall * 1000):
                raise TimeoutError
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue


class _PipeReader(io.RawIOBase):
    """The child's end of the result pipe as a file, each read waiting no later than `deadline`
    (TimeoutError then)."""

    def __init__(self, fd: int, deadline: float):
        self.fd, self.deadline = fd, deadline
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN | select.POLLHUP)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if self.poller.poll(left * 1000):
                return os.readv(self.fd, [buffer])


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int, wait: bool) -> int:
    """The child's wait status. One that closed its pipe (`wait`) is exiting: waited for in one
    call. A killed one may be stuck in the kernel (a dead disk's sysfs read): looked at for at most
    2 s and then left behind."""
    if wait:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0
    deadline = time.monotonic() + 2
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done or time.monotonic() > deadline:
            return status
        time.sleep(0.001)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
