"""Budgets that scale with how busy the guest is (issue 42), for guest/scenario.py and failures.py.

The guests run under TCG: guest time is the host's CPU time, so on a busy host (another guest, an
image build, other people's tests) everything in the guest takes longer, by a factor that changes
during the run. A wait written as "at most 60 s" then fails because the host was busy, not because
anything went wrong. So every wait here is a `Budget` of *nominal* seconds (what the wait may take
on an idle 2-core host), spent at the pace the guest is running at: a probe thread times a fixed
piece of CPU work every few seconds, and a wall-clock second counts as 1/slowness nominal seconds,
where slowness is that time over the same work's time on an idle host (never below 1). A wait that
sees no progress for its whole budget at the measured pace still ends, with a clear message: a hung
command or a state that never comes is found, a slow host is waited for.

Standard library only (it runs on the guest's python3 before anything else is trusted).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

PROBE_EVERY = 5.0        # seconds between two probes
PROBE_LOOPS = 200_000    # the probe's work: a pure-Python loop
# Seconds PROBE_LOOPS take in the guest when the host is idle (measured under TCG on the 2-core
# test machine with nothing else running; calibrated from the probes of guest runs, timeline.json "pace").
# Slowness is the probe's time over this.
PROBE_IDLE_SECONDS = 0.1
MAX_SLOWNESS = 50.0      # a probe stalled this long counts this much (a hang is then still found)


def _work() -> float:
    started = time.perf_counter()
    total = 0
    for i in range(PROBE_LOOPS):
        total += i & 7
    return time.perf_counter() - started


class Pace:
    """The current slowness (>= 1), from the last probes; `nominal_between(a, b)` the nominal seconds
    between two wall-clock instants. `idle_seconds`: the probe's time on an idle machine (the guest's
    by default; the harness measures the host's with its own figure)."""

    def __init__(self, idle_seconds: float = PROBE_IDLE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._samples: list[tuple[float, float]] = []   # (wall time, slowness) of recent probes
        self.history: list[tuple[float, float]] = []   # every probe, for the run's record
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pace", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            took = _work()
            slowness = min(MAX_SLOWNESS, max(1.0, took / self.idle_seconds))
            now = time.time()
            with self._lock:
                self._samples = [*self._samples[-5:], (now, slowness)]
                self.history.append((now, round(slowness, 2), round(took, 4)))
            time.sleep(PROBE_EVERY)

    def nominal_between(self, start: float, end: float) -> float:
        """Nominal seconds between two wall-clock instants: each stretch between probes divided by the
        slowness the probe at its end measured (the stretch after the last probe by the current one)."""
        with self._lock:
            points = [(t, s) for t, s, *_ in self.history if start < t < end]
        total, at = 0.0, start
        for t, slowness in points:
            total += (t - at) / slowness
            at = t
        return total + max(0.0, end - at) / self.slowness()

    def slowness(self) -> float:
        """The median of the last probes (one stalled probe does not swing it), 1 before the first."""
        with self._lock:
            values = sorted(s for _, s in self._samples)
        return values[len(values) // 2] if values else 1.0


PACE = Pace()


class Budget:
    """`seconds` nominal seconds, spent at the guest's pace (or `pace`'s) from now: `left()` says how
    many remain, `spent()` whether none do. (Each check adds the time since the last one at the pace
    the probes measured meanwhile, so a stretch of heavy load in the middle of a wait counts slower.)"""

    def __init__(self, seconds: float, pace: Pace | None = None) -> None:
        self.seconds = seconds
        self.pace = pace or PACE
        self._used = 0.0
        self._last = time.time()
        self.started = self._last

    def _advance(self) -> None:
        now = time.time()
        self._used += self.pace.nominal_between(self._last, now)
        self._last = now

    def left(self) -> float:
        """Nominal seconds left (>= 0)."""
        self._advance()
        return max(0.0, self.seconds - self._used)

    @property
    def used(self) -> float:
        """Nominal seconds used at the last check."""
        return self._used

    def spent(self) -> bool:
        return self.left() <= 0

    def wall(self) -> float:
        """Wall-clock seconds since the budget started."""
        return time.time() - self.started

    def describe(self) -> str:
        return (f"{self.seconds:g} nominal s (at the measured pace: {self.wall():.0f} s of wall time, "
                f"slowness now {self.pace.slowness():.1f})")


class Stopwatch:
    """How long something took, in wall-clock seconds and in nominal seconds (each stretch of wall
    time divided by the slowness then): what a host test compares with a limit, so that a busy host
    does not fail a check of the exporter's own speed. The nominal figure is integrated over the
    probes taken meanwhile (call `nominal()` at the end)."""

    def __init__(self) -> None:
        self._budget = Budget(float("inf"))

    def wall(self) -> float:
        return round(self._budget.wall(), 3)

    def nominal(self) -> float:
        self._budget.left()
        return round(self._budget.used, 3)


def wait_until(what: str, check, seconds: float, step: float = 0.3):
    """`check()`'s first true result, polled every `step` seconds for a `Budget(seconds)`; TimeoutError
    naming `what` and the budget at its end."""
    budget = Budget(seconds)
    while True:
        result = check()
        if result:
            return result
        if budget.spent():
            raise TimeoutError(f"{what}: not within {budget.describe()}")
        time.sleep(step)


def wait_process(proc: subprocess.Popen, seconds: float, step: float = 0.2) -> int | None:
    """The exit status of `proc` once it ends within `Budget(seconds)`, else None (still running)."""
    budget = Budget(seconds)
    while proc.poll() is None:
        if budget.spent():
            return None
        time.sleep(step)
    return proc.returncode


def run_bounded(argv: list[str], seconds: float, **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, capture_output=True, text=True)` killed (its process group) once it has
    run for `Budget(seconds)`: then returncode None and what it printed so far is not kept."""
    import signal
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                **kwargs)
        rc = wait_process(proc, seconds)
        if rc is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, rc, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))
