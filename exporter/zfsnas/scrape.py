"""The scrape loop: every enabled collector once per scrape, and the self metrics.

Owns `ScrapeCollector`, which runs each collector in turn (one scrape at a time, within the
scrape's deadline) and adds `zfs_exporter_collector_success`, `zfs_exporter_collector_duration_seconds`,
`zfs_exporter_source_age_seconds`, `zfs_exporter_source_success`, and what rendering had to leave
out or change: `zfs_exporter_samples_dropped_total{collector,reason}` and
`zfs_exporter_label_values_rewritten_total{collector,reason}` (each cause logged once).
It must not read the OS itself: that is the sources' job.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

from .collectors.base import Collector, Report, one_line
from .exposition import Families, Family, FieldLayout, RenderIssues, render_pieces, settle

if TYPE_CHECKING:
    from .sources.model import KstatSource

log = logging.getLogger("zfsnas")


Outcome = tuple[Iterable[Family], Report, float]  # a collector's families, its report, its seconds
JOIN_BELOW = 1 << 20  # characters of a collector's page joined into one piece
# The first scrape of a started exporter waits for every source's first read for at most this share
# of its time to the deadline: the rest is left for the collectors and the answer.
FIRST_READS_SHARE = 0.75
ZFS_CHECK = "(zfs check)"  # what `_blocked` calls the look for ZFS kstats that starts each scrape


class _Job:
    """One scrape with a deadline, run in the caller's thread and watched by `_Watchdog`: the
    caller's `start`/`finish` of each collector, its `complete` and the watchdog's `rescue` are
    ordered by one lock, so that exactly one of them answers the scrape, and after a rescue the
    caller starts nothing more."""

    __slots__ = ("lock", "outcomes", "abandoned", "finished", "current", "deadline", "extra", "deliver")

    def __init__(self, deadline: float, extra: Iterable[Family], deliver: Callable[[list[str]], None]):
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.abandoned = False   # the watchdog answered: the caller's results go nowhere
        self.finished = False    # the caller got through every collector: it answers
        self.current: tuple[str, float] | None = None  # the collector running, since when
        self.deadline, self.extra, self.deliver = deadline, extra, deliver

    def start(self, name: str) -> bool:
        with self.lock:
            if self.abandoned:
                return False
            self.current = (name, time.monotonic())
            return True

    def finish(self, name: str) -> bool:
        """False when the watchdog answered the scrape while `name` was still in its collect."""
        with self.lock:
            self.current = None
            return not self.abandoned

    def complete(self) -> bool:
        """The caller's: True when it answers (every collector ran in time or not stuck), False when
        the watchdog already did."""
        with self.lock:
            self.finished = not self.abandoned
            return self.finished

    def rescue(self, blocked: dict[str, float]) -> str | None:
        """The watchdog's: the collector stuck past the deadline, marked in `blocked` (the job is
        then the watchdog's to answer), or None when the caller is not in a collector or has
        finished. Marked under the lock: the caller, back from that read, unmarks it only after."""
        with self.lock:
            if self.finished or self.abandoned or self.current is None:
                return None
            self.abandoned = True
            name, since = self.current
            blocked[name] = since
            return name


class _Watchdog:
    """One thread, started by the first scrape that can be answered without its caller, that looks
    at the scrape in progress every `PERIOD` seconds: past its deadline with a collector's read not
    returned, it answers that scrape itself (`ScrapeCollector._rescue`). A scrape costs nothing of
    it (no hand-over to another thread: the caller runs the collectors)."""

    PERIOD = 0.25

    def __init__(self, scrape: ScrapeCollector):
        self._scrape = scrape
        threading.Thread(target=self._run, name="scrape-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(self.PERIOD)
            job = self._scrape._job
            if job is not None and time.monotonic() > job.deadline:
                try:
                    self._scrape._rescue(job)
                except Exception:  # pragma: no cover - the watchdog must outlive anything
                    log.exception("answering a stuck scrape failed")


class ScrapeCollector:
    """Runs every enabled collector once per scrape, one scrape at a time, and adds the self metrics."""

    MAX_LOGGED = 1000  # distinct (collector, reason) causes logged; the counters go on regardless

    def __init__(self, collectors: Sequence[Collector], kstat: KstatSource | None = None):
        self.collectors = list(collectors)
        self.kstat = kstat
        self._lock = threading.Lock()
        self._last_errors: dict[str, list[str]] = {}
        self._zfs_reason: str | None = None
        self._dropped: dict[tuple[str, str], int] = {}
        self._rewritten: dict[tuple[str, str], int] = {}
        self._logged: set[tuple[str, str]] = set()
        self._job: _Job | None = None  # the scrape in progress, when the watchdog can answer it
        self._watchdog: _Watchdog | None = None
        self._blocked: dict[str, float] = {}  # collector -> since when a read of it has not returned
        self._first_reads = False  # the next scrape with a deadline waits for the sources' first reads

    def await_first_reads(self) -> None:
        """The collectors have started: the next scrape with a deadline waits, at most
        FIRST_READS_SHARE of its time, for each source's first read to end, so that the first
        answer after a start (or restart) holds every family (a disk scan or a `zpool status` not
        done yet would leave theirs out, and their series would blink stale until the next scrape)."""
        self._first_reads = True

    def _wait_first_reads(self, deadline: float) -> None:
        self._first_reads = False
        until = time.monotonic() + FIRST_READS_SHARE * max(0.0, deadline - time.monotonic())
        for collector in self.collectors:
            for source in collector.sources():
                source.wait_tried(max(0.0, until - time.monotonic()))

    def render(self, extra: Iterable[Family] = (), deadline: float | None = None) -> str:
        """The whole page: every collector's families, `extra` ones (e.g. process metrics), then the
        self metrics, which count what this very render had to drop. Raises TimeoutError when the
        `deadline` (time.monotonic()) passes while another scrape still runs."""
        return "".join(self.render_parts(extra, deadline) or ())

    def render_parts(self, extra: Iterable[Family] = (), deadline: float | None = None,
                     deliver: Callable[[list[str]], None] | None = None) -> list[str] | None:
        """`render`'s page as the pieces it is made of, unjoined (what the server sends: the frozen
        texts of big families are sent as they are kept, not copied into one page). With a
        `deadline` and `deliver`, a collector whose read has not returned by the deadline does not
        hold the answer: the watchdog sends the page of the others through `deliver` (this one
        reported failed, and skipped, failed, by later scrapes until that read returns) and this
        call, when the read returns, gives None."""
        extra = extra if isinstance(extra, Families) else list(extra)   # a Families keeps its laid-out text
        self._acquire(deadline)
        if self._first_reads and deadline is not None:
            self._wait_first_reads(deadline)
        job = None if deadline is None or deliver is None else _Job(deadline, extra, deliver)
        try:
            if job is not None:
                self._job = job
                if self._watchdog is None:
                    self._watchdog = _Watchdog(self)
            outcomes = self._collect_all(job)
            if job is not None and not job.complete():
                return None  # the watchdog answered, and let the next scrape in
            return self._page(outcomes, extra)
        finally:
            if job is None or job.finished:
                self._job = None
                self._lock.release()

    def _page(self, outcomes: list[Outcome], extra: Iterable[Family]) -> list[str]:
        per_collector, families = self._self_metrics(outcomes)
        out: list[str] = []
        for name, items in [*per_collector, ("exporter", extra)]:
            problems = RenderIssues()
            pieces: list[str] = []
            render_pieces(items, pieces, problems)
            # A collector's small text (lines of samples) is joined now, in C, for the server to
            # send in few pieces; a big one (frozen families of thousands of datasets) is sent as kept.
            if len(pieces) > 1 and sum(map(len, pieces)) < JOIN_BELOW:
                out.append("".join(pieces))
            else:
                out += pieces
            if problems:
                self._count(name, problems)
        self._problem_metrics(families)
        render_pieces(families, out)
        return out

    def _rescue(self, job: _Job) -> None:
        """The watchdog's answer to a scrape stuck in a collector past its deadline: that collector
        failed (and blocked until its read returns), the ones after it not run, the others served."""
        name = job.rescue(self._blocked)
        if name is None:
            return
        log.warning("collector %s: a read has not returned by the scrape's deadline; skipped until it does", name)
        outcomes = list(job.outcomes)
        for collector in self.collectors[len(outcomes):]:
            report = Report(collector.name)
            if collector.name == name:
                report.fail("blocked", "still reading at the scrape's deadline: skipped until that read returns")
            else:
                report.fail("scrape deadline", "not run: the scrape's deadline (X-Prometheus-Scrape-Timeout-Seconds "
                                               "or the default) had passed")
            self._log_changes(collector.name, report.errors)
            outcomes.append(([], report, 0.0))
        page = self._page(outcomes, job.extra)
        self._job = None
        self._lock.release()  # the stuck caller never will: the next scrape goes on without it
        job.deliver(page)

    def scrape(self, deadline: float | None = None) -> list[Family]:
        """Every family of one scrape (the self metrics last), e.g. for `exposition.ClientCollector`."""
        self._acquire(deadline)
        try:
            per_collector, families = self._self_metrics(self._collect_all(None))
            self._problem_metrics(families)
            return [item for _, items in per_collector for item in items] + families.families()
        finally:
            self._lock.release()

    def _acquire(self, deadline: float | None) -> None:
        """The scrape lock (one scrape at a time); TimeoutError when `deadline` passes first."""
        wait = -1 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._lock.acquire(timeout=wait):
            raise TimeoutError("the scrape deadline passed while another scrape was running")

    def _self_metrics(self, outcomes: list[Outcome]) -> tuple[list[tuple[str, Iterable[Family]]], Families]:
        out: list[tuple[str, Iterable[Family]]] = []
        families = Families()
        names, ok, seconds = [], [], []
        for collector, (result, report, took) in zip(self.collectors, outcomes):
            names.append(collector.name)
            ok.append(1 if report.ok else 0)
            seconds.append(took)
            out.append((collector.name, result))
        if names:   # laid out once per collector list: a scrape fills in the numbers
            families.add_fields(_collector_layout(tuple(names)), [*ok, *seconds])
        self._source_metrics(families)
        return out, families

    def _collect_all(self, job: _Job | None) -> list[Outcome]:
        """Every collector once, in this thread: (families, report, seconds) each. In a `job` (a
        scrape with a deadline the watchdog keeps) each outcome is put there as it comes, and the
        run stops where the watchdog answered in its place."""
        outcomes: list[Outcome] = []
        with ExitStack() as scrape:
            for ctx in {id(c.ctx): c.ctx for c in self.collectors}.values():
                scrape.enter_context(ctx.scrape())
            if job is not None and not job.start(ZFS_CHECK):
                return outcomes
            zfs_missing = self._zfs_missing()
            if job is not None and not job.finish(ZFS_CHECK):
                self._blocked.pop(ZFS_CHECK, None)
                return outcomes
            for collector in self.collectors:
                report = Report(collector.name)
                started = time.perf_counter()
                result: Iterable[Family] = []
                if zfs_missing and collector.needs_zfs:
                    report.fail("zfs", zfs_missing)  # said once by _zfs_missing, not per collector
                elif collector.name in self._blocked:
                    report.fail("blocked", "not run: a read of an earlier scrape has not returned")
                elif job is not None and not job.start(collector.name):
                    return outcomes  # the watchdog answered without us
                else:
                    with report.guard("collect"):
                        result = settle(collector.collect(report))
                    if job is not None and not job.finish(collector.name):
                        self._blocked.pop(collector.name, None)  # it has returned: run it again from now on
                        return outcomes
                if not (zfs_missing and collector.needs_zfs):  # that is said once by _zfs_missing
                    self._log_changes(collector.name, report.errors, report.explained)
                outcome = (result, report, time.perf_counter() - started)
                outcomes.append(outcome)
                if job is not None:
                    job.outcomes.append(outcome)
        return outcomes

    def _count(self, collector: str, problems: RenderIssues) -> None:
        """Add one render's drops and rewrites to the totals; each new cause is logged once."""
        for counts, totals, what in ((problems.dropped, self._dropped, "dropped"),
                                     (problems.rewritten, self._rewritten, "rewrote the label values of")):
            for (family, reason), count in counts.items():
                key = (collector, reason)
                totals[key] = totals.get(key, 0) + count
                cause = (collector, reason)  # one line per cause, however many families it touches
                if cause not in self._logged and len(self._logged) < self.MAX_LOGGED:
                    self._logged.add(cause)
                    log.warning("collector %s: %s %d sample(s) of %s (%s), e.g. %s; counted from now on in "
                                "zfs_exporter_%s_total", collector, what, count, family, reason,
                                problems.examples.get((family, reason), ""),
                                "samples_dropped" if counts is problems.dropped else "label_values_rewritten")

    def _problem_metrics(self, families: Families) -> None:
        for (collector, reason), count in sorted(self._dropped.items()):
            families.counter("zfs_exporter_samples_dropped_total",
                             "Samples left out of the exposition because their value or names could not be "
                             "written (reason: out_of_range, not_a_number, invalid_metric_name, ...).",
                             {"collector": collector, "reason": reason}, count)
        for (collector, reason), count in sorted(self._rewritten.items()):
            families.counter("zfs_exporter_label_values_rewritten_total",
                             "Samples served with a label value changed to be valid: too_long (cut at "
                             "1024 characters, ending in ...[cut <digest of the whole value>]) or invalid_utf8 "
                             "(bytes shown as \\xNN).",
                             {"collector": collector, "reason": reason}, count)
    def zfs_missing(self) -> str | None:
        """Why ZFS kstats cannot be read right now (None when they can)."""
        if self.kstat is None:
            return None
        try:
            self.kstat.refresh()
            return None if self.kstat.zfs_loaded() else f"no ZFS kernel module found ({self.kstat.kind})"
        except Exception as exc:
            return f"reading kstats failed: {one_line(exc)}"

    def zfs_said_missing(self) -> bool:
        """Whether the last word on ZFS (start-up line or scrape) was that it is missing."""
        return self._zfs_reason is not None

    def said(self, zfs_missing: str | None) -> None:
        """The start-up line said this about ZFS: the first scrape does not say it again."""
        self._zfs_reason = zfs_missing

    def _zfs_missing(self) -> str | None:
        """`zfs_missing`, said once per change (or that looking for the kstats is stuck)."""
        if ZFS_CHECK in self._blocked:
            reason: str | None = "looking for the ZFS kstats has not returned since an earlier scrape"
        else:
            reason = self.zfs_missing()
        if reason != self._zfs_reason:
            if reason:
                names = ", ".join(c.name for c in self.collectors if c.needs_zfs)
                log.warning("%s: %s serve nothing until it is back", reason, names or "no collector")
            else:
                log.info("ZFS kstats readable")
            self._zfs_reason = reason
        return reason

    def _source_metrics(self, families: Families) -> None:
        sources = [source for collector in self.collectors for source in collector.sources()]
        if not sources:
            return
        states = [source.state() for source in sources]
        families.add_fields(_source_layout(tuple(source.name for source in sources)),
                            [*(state.age_seconds for state in states), *(1 if state.success else 0 for state in states)])
        for source in sources:
            for reason, count in sorted(source.dropped().items()):
                families.counter("zfs_exporter_source_values_dropped_total",
                                 "Lines or fields of a source's input left out because they could not be "
                                 "read or be true (reason: malformed, not_a_number, negative, too_long) or "
                                 "lay past what the source may hold (over_limit); the rest was served.",
                                 {"source": source.name, "reason": reason}, count)

    def _log_changes(self, name: str, errors: list[str], explained: set[str] | frozenset = frozenset()) -> None:
        """A new failure is logged once as a warning; repeats, and failures said elsewhere
        (`explained`: the start-up line, a replay's note), go to debug; recovery is logged."""
        before = self._last_errors.get(name, [])
        for error in errors:
            level = logging.DEBUG if error in before or error in explained else logging.WARNING
            log.log(level, "collector %s failed: %s", name, error)
        if before and not errors:
            log.info("collector %s recovered", name)
        self._last_errors[name] = errors


COLLECTOR_SUCCESS = ("zfs_exporter_collector_success", "1 if the collector's last scrape read everything it tried, else 0.",
                     "gauge", ("collector",))
COLLECTOR_DURATION = ("zfs_exporter_collector_duration_seconds", "How long the collector took in the last scrape.",
                      "gauge", ("collector",))
SOURCE_AGE = ("zfs_exporter_source_age_seconds", "Seconds since the background source last refreshed successfully.",
              "gauge", ("source",))
SOURCE_SUCCESS = ("zfs_exporter_source_success", "1 if the background source's last refresh succeeded, else 0.",
                  "gauge", ("source",))


@functools.lru_cache(maxsize=8)
def _collector_layout(names: tuple[str, ...]) -> FieldLayout:
    """Each collector's success, then each one's duration (numbers in that order)."""
    return FieldLayout([*((COLLECTOR_SUCCESS, (name,), 1) for name in names),
                        *((COLLECTOR_DURATION, (name,), 1) for name in names)])


@functools.lru_cache(maxsize=8)
def _source_layout(names: tuple[str, ...]) -> FieldLayout:
    """Each source's age, then each one's success (numbers in that order)."""
    return FieldLayout([*((SOURCE_AGE, (name,), 1) for name in names), *((SOURCE_SUCCESS, (name,), 1) for name in names)])
