"""Runs a plan: per cell parameters -> create -> prefill -> job -> sync -> space -> destroy ->
restore, measuring and storing each.

Owns the order of a run, the lock (two matrices never run at once; session.py takes it and does
the housekeeping before and after a run), the signal handling (SIGINT/SIGTERM stop fio, destroy
our child, restore module parameters, record `aborted`), the scratch check before every cell (a
mark removed mid-run stops the run before the next cell, as `aborted` with the reason) and the
progress line. A Runner is built from the guard's `Cleared`.
Only the measured step is timed and probed: the prefill and its sync are figures of their own.
Every zfs command goes through zfs.py (which asks guard.py); every module parameter through
parameters.py; every figure goes to the store (`zfsnas.store.database`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import platform
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from ...sources.zfs_datasets import parse_compressratio
from ...store.configuration import Configuration
from ...store.database import Store
from ...store.schema import ResultFigures
from . import probes
from .annotate import Annotator
from .copy import CopyResult, SustainedRate, copy_corpus, copy_sampled
from .fio import FioProcess, parse_fio_json
from .guard import Cleared, GuardError
from .parameters import Parameters, ParameterSwitch
from .planner import CellPlan, Environment, Step, cell_text, configuration, in_kept_child, varying_fields
from .racing import Race
from .zfs import ZfsOps

log = logging.getLogger("zfsnas.bench")


class RunError(RuntimeError):
    pass


class Aborted(Exception):
    pass


class RunLock:
    """An exclusive flock next to the database: a second run refuses instead of waiting."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            holder = self.path.read_text().strip() or "another process"
            raise RunError(f"another benchmark is running ({holder}; lock {self.path}): refused") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"pid {os.getpid()}\n".encode())
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class Progress:
    """One line on stderr: a bar over the whole matrix, the current cell, elapsed and ETA."""

    def __init__(self, plans: list[CellPlan], stream: TextIO = sys.stderr):
        self.plans, self.stream = plans, stream
        self.fields = varying_fields(plans) + ["size"]   # the size always: after --size-scale it is news
        self.started = time.monotonic()
        self.done_seconds: list[float] = []
        self.tty = stream.isatty()

    def eta(self, index: int, cell_elapsed: float) -> float:
        mean = sum(self.done_seconds) / len(self.done_seconds) if self.done_seconds else 0.0
        left = 0.0
        for plan in self.plans[index - 1:]:
            guess = plan.estimate_seconds + 5 if plan.estimate_seconds else mean
            left += guess
        return max(0.0, left - cell_elapsed)

    def show(self, index: int, cell_elapsed: float = 0.0, final: bool = False) -> None:
        total = len(self.plans)
        done = index - 1 + (1 if final else 0)
        width = 24
        bar = "#" * (width * done // total) + "-" * (width - width * done // total)
        plan = self.plans[min(index, total) - 1]
        elapsed = time.monotonic() - self.started
        line = (f"[{bar}] {done}/{total} {cell_text(plan, self.fields)} "
                f"elapsed {_hms(elapsed)} ETA {_hms(self.eta(index + 1, 0) if final else self.eta(index, cell_elapsed))}")
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if final and index == total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class RunSettings:
    matrix: str
    scratch: str
    run_id: str
    procfs: str = "/proc"
    fio_version: str = ""
    sysfs: str = "/sys"
    keep: bool = False
    freebsd: bool = False      # CPU from `sysctl kern.cp_time` instead of /proc/stat
    labels: tuple[tuple[str, str], ...] = ()   # `--set KEY=VALUE`: part of every configuration of the run


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


class Runner:
    def __init__(self, zfs: ZfsOps, store: Store, annotator: Annotator, settings: RunSettings,
                 params: Parameters, cleared: Cleared):
        if not isinstance(cleared, Cleared) or cleared.dataset != settings.scratch:
            raise GuardError(f"{settings.scratch}: the runner needs the guard's approval of this dataset: refused")
        self.zfs, self.store, self.annotator, self.s = zfs, store, annotator, settings
        self.cleared = cleared
        self.stopped_by = ""   # why the run stopped before its end, when the guard stopped it
        self.params = params
        self.switch = ParameterSwitch(params, store, settings.run_id)
        self.stop = threading.Event()
        self.fio: FioProcess | None = None
        self.env: Environment | None = None
        # a race's copies: the child each configuration's first cell kept, for its repeats
        self.kept: dict[str, CellPlan] = {}
        self.racing = False

    def environment(self, plans: list[CellPlan]) -> tuple[Environment, str]:
        """The host's part of every configuration, read once at run start; and `zpool status -P`."""
        pool = self.s.scratch.split("/")[0]
        status, layout = self.zfs.pool_layout(pool)
        swept = tuple(sorted({c.name for p in plans for c in p.changes}))
        return Environment(pool, layout, self.params.identity(swept), self.zfs.versions(), self.store.host,
                           self.s.labels), status

    def configuration(self, plan: CellPlan) -> Configuration:
        assert self.env is not None
        return configuration(self.s.matrix, plan, self.env)

    def _signal(self, signum: int, _frame: FrameType | None) -> None:
        log.warning("%s received: stopping the current job", signal.Signals(signum).name)
        self.stop.set()
        if self.fio is not None:
            self.fio.stop()

    def run(self, plans: list[CellPlan], race: Race | None = None) -> str:
        """Run every cell (with a race: the first round, then what the race asks for, until it is
        decided or its budget is spent); returns the matrix status (complete, aborted, failed)."""
        self._check_space(plans, int(self.cleared.props["available"].value))
        self.racing = race is not None
        self.env, status_text = self.environment(plans)
        self.store.start_matrix(self.s.run_id, self.s.matrix, self.s.scratch, len(plans), self.env.zfs_version,
                                self.s.fio_version, platform.release(), status_text, self.params.read_all())
        previous = {sig: signal.signal(sig, self._signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        progress = Progress(list(plans))
        status = "complete"
        try:
            queue = list(plans)
            while queue and status != "aborted":
                status = self._round(queue, progress, race, status)
                queue = race.next_cells(len(progress.plans) + 1) if race and status != "aborted" and not race.outcome \
                    else []
                progress.plans += queue
        except BaseException:
            status = "failed"  # something unforeseen (the database, a bug): never recorded as complete
            raise
        finally:
            try:
                self.switch.restore()  # at the end, also after an error or a signal
            finally:
                self._destroy_kept()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                self.store.finish_matrix(self.s.run_id, status)
                if race is not None and not race.outcome:
                    race.stop("stopped")
        return status

    def _round(self, plans: list[CellPlan], progress: Progress, race: Race | None, status: str) -> str:
        """Run `plans` in order; the matrix status after them (aborted stops the round)."""
        for plan in plans:
            if self.stop.is_set():
                return "aborted"
            if race is not None and not race.allows(plan, self.configuration(plan).id):
                race.stop("budget")
                return status
            try:
                self.cleared = self.zfs.recheck(self.cleared)
            except GuardError as exc:
                self._stopped(plan, str(exc))
                return "aborted"
            if race is not None:
                plan = self._into_kept(plan)
            started = time.monotonic()
            ticker = _Ticker(progress, plan.index, started)
            try:
                cell_status, figures = self._cell(plan)
            finally:
                ticker.stop()
                self.switch.restore()  # after each cell, also when it failed or was stopped
            seconds = time.monotonic() - started
            progress.done_seconds.append(seconds)
            progress.show(plan.index, final=True)
            if race is not None:
                race.record(plan, self.configuration(plan), cell_status, figures, seconds)
            if cell_status == "aborted":
                return "aborted"
            if cell_status == "failed":
                status = "failed"
        return status

    def _into_kept(self, plan: CellPlan) -> CellPlan:
        """A racing copy's repeat goes into the child its configuration kept (planner.in_kept_child),
        when the scratch dataset has room for the whole corpus once more; else that child goes and
        the repeat makes its own."""
        kept = self.kept.get(self.configuration(plan).id)
        if kept is None or plan.cell.workload != "copy":
            return plan
        if int(self.cleared.props["available"].value) >= plan.size_bytes + plan.size_bytes // 10:
            return in_kept_child(plan, kept)
        self._destroy_kept(kept.child)
        return plan

    def _keeps(self, plan: CellPlan, added: int | None) -> bool:
        """Whether this cell's child stays for its configuration's repeats: a racing copy's, when what
        it `added` leaves the scratch dataset room for another cell (the whole corpus once more)."""
        if not (self.racing and plan.cell.workload == "copy") or added is None:
            return False
        room = int(self.cleared.props["available"].value) - added
        return room >= plan.size_bytes + plan.size_bytes // 10

    def _destroy_kept(self, child: str | None = None) -> None:
        """Destroy the kept children (or the one named) unless --keep; at the run's end, however it ends."""
        for cid, kept in list(self.kept.items()):
            if child is not None and kept.child != child:
                continue
            del self.kept[cid]
            if self.s.keep:
                continue
            try:
                self.zfs.destroy(self.cleared, kept.child, self.s.run_id)
            except Exception as exc:  # the others still go; the error is said
                log.error("could not destroy %s: %s", kept.child, exc)

    def _stopped(self, plan: CellPlan, reason: str) -> None:
        """The cell that never started, recorded `aborted` with the one-line reason."""
        self.stopped_by = reason
        log.error("before cell %d: %s", plan.index, reason)
        result_id = self.store.start_result(self.s.run_id, plan.index, self.configuration(plan), plan.cell.repeat,
                                            plan.child, time.time())
        self.store.finish_result(result_id, "aborted", figures=ResultFigures(error=reason))

    def _check_space(self, plans: list[CellPlan], available: int) -> None:
        sizes = [p.size_bytes for p in plans]
        need = sum(sizes) if self.s.keep else max(sizes, default=0)
        need = need + need // 10
        if need > available:
            raise RunError(f"{self.s.scratch} has {available / 2**30:.1f} GiB available, the matrix needs "
                           f"{need / 2**30:.1f} GiB{' (--keep keeps every child)' if self.s.keep else ''}: refused")

    def _cell(self, plan: CellPlan) -> tuple[str, ResultFigures]:
        config = self.configuration(plan)
        started = time.time()
        result_id = self.store.start_result(self.s.run_id, plan.index, config, plan.cell.repeat, plan.child, started)
        started_ms = int(started * 1000)
        self.annotator.start(result_id, started_ms, config, self.s.run_id,
                             f"zfsnas-bench {self.s.matrix}: {_describe(plan)} running")
        cell = _CellState({"properties": dict(plan.properties)})
        status = self._steps(plan, cell)
        ended = time.time()
        figures = ResultFigures.of(cell.figures)
        self.store.finish_result(result_id, status, ended, figures=figures)
        self.annotator.finish(result_id, self.store.annotation_id(result_id), started_ms, int(ended * 1000), config,
                              self.s.run_id, _headline(self.s.matrix, plan, status, figures))
        return status, figures

    def _steps(self, plan: CellPlan, cell: _CellState) -> str:
        """Run the cell's steps, gathering their figures; the cell's status. A child the cell created
        and did not destroy is destroyed when the cell did not complete (unless --keep)."""
        status = "complete"
        try:
            self.switch.apply(list(plan.changes))
            for step in plan.steps:
                if self.stop.is_set():
                    raise Aborted()
                self._step(plan, step, cell)
            if self.stop.is_set():
                raise Aborted()
        except Aborted:
            status = "aborted"
        except (GuardError, RunError, OSError, ValueError, RuntimeError) as exc:
            status = "aborted" if self.stop.is_set() else "failed"   # aborted: the job broke off because we stopped it
            cell.figures["error"] = str(exc)
            log.error("cell %d (%s) failed: %s", plan.index, _describe(plan), exc)
        if status != "complete" and any(k.child == plan.child for k in self.kept.values()):
            self._destroy_kept(plan.child)     # a kept child a repeat broke off in: not written again
        elif cell.created and status != "complete" and not self.s.keep:
            self._destroy_child(plan, cell)
        return status

    def _step(self, plan: CellPlan, step: Step, cell: _CellState) -> None:
        figures = cell.figures
        if step.kind == "create":
            self.zfs.create(self.cleared, step.argv)
            cell.created = True
            self._prepare_target(plan)
        elif step.kind == "prefill":
            figures["prefill_seconds"] = self._prefill(step)
        elif step.kind == "settle":
            figures["prefill_seconds"] = figures.get("prefill_seconds", 0.0) + self.zfs.sync(self.cleared, plan.pool)
        elif step.kind in ("fio", "copy"):
            figures.update(self._job(plan, step))
        elif step.kind == "sync":
            figures["sync_seconds"] = self.zfs.sync(self.cleared, plan.pool)
        elif step.kind == "baseline":
            cell.baseline = self.zfs.baseline(self.cleared, plan.child, self.s.run_id)
        elif step.kind == "space":
            space = self.zfs.space(step.argv)
            figures["compressratio"] = _compressratio_or_none(space.get("compressratio"))
            used, logical = _int(space.get("used")), _int(space.get("logicalused"))
            if cell.baseline is not None and used is not None and logical is not None:
                # what this copy added: a kept child also holds its configuration's earlier copies
                used, logical = used - cell.baseline[0], logical - cell.baseline[1]
                figures.setdefault("details", {})["space"] = (
                    f"used and logicalused are what this copy added to {plan.child} (they were {cell.baseline[0]} "
                    f"and {cell.baseline[1]} bytes before it); compressratio is the child's")
            figures["used_bytes"], figures["logicalused_bytes"] = used, logical
        elif step.kind == "destroy":
            if self._keeps(plan, figures.get("used_bytes")):
                self.kept[self.configuration(plan).id] = self.kept.get(self.configuration(plan).id, plan)
                cell.created = False
                return
            self.zfs.destroy(self.cleared, plan.child, self.s.run_id)
            # a kept child this repeat filled too far goes too: the next repeat makes its own
            self.kept = {cid: kept for cid, kept in self.kept.items() if kept.child != plan.child}
            cell.created = False

    def _destroy_child(self, plan: CellPlan, cell: _CellState) -> None:
        try:
            self.zfs.destroy(self.cleared, plan.child, self.s.run_id)
        except Exception as exc:  # keep the record honest even if cleanup fails
            cell.figures["error"] = (cell.figures.get("error", "") + f"; cleanup failed: {exc}").lstrip("; ")
            log.error("could not destroy %s: %s", plan.child, exc)

    def _run_fio(self, step: Step) -> tuple[int, str, str]:
        self.fio = FioProcess(list(step.argv), dict(step.env), self.cleared, self.s.run_id)
        if self.stop.is_set():  # a signal that came while fio was starting found no fio to stop
            self.fio.stop()
        code, out, err = self.fio.wait()
        self.fio = None
        if self.stop.is_set():
            raise Aborted()
        if code != 0:
            detail = (err.strip().splitlines() or ["no error output"])[-1]
            raise RunError(f"fio exited with status {code}: {detail}")
        return code, out, err

    def _prefill(self, step: Step) -> float:
        """Lay out the data the measured job reads or overwrites; only its wall time is kept."""
        started = time.monotonic()
        self._run_fio(step)
        return time.monotonic() - started

    def _prepare_target(self, plan: CellPlan) -> None:
        if plan.cell.kind == "volume":  # udev creates /dev/zvol/... a moment after `zfs create`
            deadline = time.monotonic() + 30
            while not Path(plan.target).exists():
                if time.monotonic() > deadline:
                    raise RunError(f"{plan.target} did not appear within 30 s of creating {plan.child}")
                time.sleep(0.2)
            return
        mountpoint = self.zfs.get(plan.child, "mountpoint").get("mountpoint")
        expected = str(Path(plan.target).parent)
        if mountpoint is None or mountpoint.value != expected:
            got = mountpoint.value if mountpoint else "none"
            raise RunError(f"{plan.child} is mounted at {got}, not {expected} (set the scratch dataset's mountpoint "
                           f"or pass --mountpoint): refused")

    def _copy(self, step: Step) -> CopyResult:
        """The copy step: the whole corpus (or its first `size` bytes), or the racing copy's flags:
        `--stratified`, `--window=<bytes>` and `--until-sustained=<zfs_dirty_data_max>`."""
        corpus, target, size, *flags = step.argv[1:]
        if "--stratified" not in flags:
            return copy_corpus(corpus, target, self.stop, int(size))
        value = {k: int(v) for k, _, v in (f.partition("=") for f in flags) if v}
        buffer = value.get("--until-sustained")
        until = SustainedRate(buffer) if buffer else None
        return copy_sampled(corpus, target, self.stop, int(size), until, window=value.get("--window", 1 << 20))

    def _job(self, plan: CellPlan, step: Step) -> dict[str, Any]:
        sysctl = self.zfs.sysctl if self.s.freebsd else None
        before = probes.snapshot(self.s.procfs, self.s.sysfs, sysctl)
        started = time.monotonic()
        figures: dict[str, Any] = {}
        if step.kind == "copy":
            result = self._copy(step)
            seconds = time.monotonic() - started
            rate = result.sustained if result.sustained else result.bytes / seconds if seconds else 0.0
            figures.update(bytes=result.bytes, throughput_bytes_per_second=rate)
            if result.sustained:
                figures["details"] = {"sustained": f"the rate once the dirty data buffer was full; {result.bytes} "
                                                   f"bytes of the corpus copied, its windows in stratified order"}
        else:
            _code, out, err = self._run_fio(step)
            seconds = time.monotonic() - started
            output = next(a.split("=", 1)[1] for a in step.argv if a.startswith("--output="))
            text = Path(output).read_text() if Path(output).exists() else out
            detail = (err.strip().splitlines() or ["no error output"])[-1]
            try:
                fio = parse_fio_json(text)
            except ValueError as exc:  # fio can exit 0 having refused its job file
                raise RunError(f"fio: {exc} ({detail})") from None
            figures.update(bytes=fio.io_bytes, throughput_bytes_per_second=fio.bw_bytes, iops=fio.iops,
                           clat_ns=fio.clat_percentiles_ns, fio_json=text[text.find("{"):])
            if steady := steady_state_of(text):
                figures["details"] = {"steady_state": steady}
        after = probes.snapshot(self.s.procfs, self.s.sysfs, sysctl)
        figures.update(duration_seconds=seconds, **probes.deltas(before, after).figures())
        return figures


@dataclass
class _CellState:
    """What a cell has gathered so far: its figures (by ResultFigures field) and whether its child exists."""
    figures: dict[str, Any]
    created: bool = False
    baseline: tuple[int, int] | None = None     # the child's (used, logicalused) before a racing copy


class _Ticker:
    """Refreshes the progress line every second while a cell runs."""

    def __init__(self, progress: Progress, index: int, started: float):
        self._stop = threading.Event()
        self.progress, self.index, self.started = progress, index, started
        progress.show(index)
        if progress.tty:
            self.thread = threading.Thread(target=self._loop, daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.progress.show(self.index, time.monotonic() - self.started)

    def stop(self) -> None:
        self._stop.set()


def _describe(plan: CellPlan) -> str:
    return cell_text(plan)


def _headline(matrix: str, plan: CellPlan, status: str, f: ResultFigures) -> str:
    parts = [f"zfsnas-bench {matrix}: {_describe(plan)} {status}"]
    if f.throughput_bytes_per_second is not None:
        parts.append(f"{f.throughput_bytes_per_second / 1e6:.1f} MB/s")
    if f.duration_seconds is not None:
        parts.append(f"{f.duration_seconds:.1f} s")
    if f.compressratio is not None:
        parts.append(f"ratio {f.compressratio:.2f}")
    if f.cpu_busy_ratio is not None:
        parts.append(f"CPU {100 * f.cpu_busy_ratio:.0f}%")
    return ", ".join(parts)


def steady_state_of(fio_text: str) -> str | None:
    """What fio's steady-state detection said (a racing cell), e.g. `bw_slope:1% attained after 12.3 s`."""
    import json

    try:
        jobs = json.loads(fio_text[fio_text.find("{"):]).get("jobs") or []
    except ValueError:
        return None
    for job in jobs:
        ss = job.get("steadystate")
        if isinstance(ss, dict) and ss.get("ss"):
            runtime = (job.get("job_runtime") or 0) / 1000
            return f"{ss['ss']} {'attained' if ss.get('attained') else 'not attained'} after {runtime:.1f} s"
    return None


def _compressratio_or_none(text: str | None) -> float | None:
    """The dataset's compressratio as a figure; None when zfs gave none or garbage (a figure is
    then missing, the run goes on)."""
    try:
        return None if text is None else parse_compressratio(text)
    except ValueError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
