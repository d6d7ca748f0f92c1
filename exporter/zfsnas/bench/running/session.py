"""A run's housekeeping around the Runner: everything `zfsnas-bench run` does besides its cells.

Owns, in this order: the run lock (two matrices never run at once on one database), putting right
what a run that died left behind (`clean_up_dead_runs`: its fio processes, module parameters, rows
left `running`, child datasets, fio outputs and key files), the run's own encryption key file and
fio outputs directory (made for the run, removed after it whatever happens), sending the
annotations earlier runs queued, and handing the plans to the Runner. The CLI parses and prints;
the runner runs the cells; this module holds what comes before and after.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...store.database import Store
from .annotate import Annotator, GrafanaClient
from .fiowatch import stop_leftovers
from .guard import Cleared
from .matrix import Matrix
from .parameters import Parameters, restore_pending
from .planner import PlanOptions, plan_cell, plan_matrix
from .racing import Race, RaceSettings
from .runner import RunLock, Runner, RunSettings
from .zfs import ZfsOps

log = logging.getLogger("zfsnas.bench")


@dataclass
class RunSession:
    """One run of a matrix on a scratch dataset the guard cleared, from taking the lock to removing
    the run's files. `client` makes the Grafana client (None: no annotations) once the lock is held."""
    store: Store
    zfs: ZfsOps
    params: Parameters
    cleared: Cleared
    settings: RunSettings
    lock_path: str
    client: Callable[[], GrafanaClient | None]
    stopped_by: str = ""      # why the guard stopped the run before its end (the runner's)
    verdict: list[str] = dataclasses.field(default_factory=list)    # the race's, with --until-decided

    def run(self, matrix: Matrix, opts: PlanOptions, encrypted: bool, race: RaceSettings | None = None) -> str:
        """Run every cell of `matrix` as `opts` plans it (with `race`: until the race is decided); the
        matrix status (complete, aborted, failed)."""
        with RunLock(self.lock_path):  # the same lock for every command on this database
            for line in clean_up_dead_runs(self.store, self.zfs, self.params, self.cleared, self.settings.procfs):
                log.warning("%s", line)
            with run_files(self.settings.run_id, opts.results_dir, encrypted) as key_file:
                planned = dataclasses.replace(opts, key_file=key_file, racing=race is not None)
                plans = plan_matrix(matrix, planned)
                annotator = Annotator(self.store, self.client())
                retry_queued(annotator)
                runner = Runner(self.zfs, self.store, annotator, self.settings, self.params, self.cleared)
                log.info("run %s: matrix %s, %d cells on %s%s", self.settings.run_id, matrix.name, len(plans),
                         self.settings.scratch, " (racing: each configuration once, then the contenders)" if race else "")
                racer = None if race is None else Race(race, lambda index, cell: plan_cell(index, cell, planned))
                status = runner.run(plans, racer)
                self.stopped_by = runner.stopped_by
                if racer is not None:
                    record = racer.to_record()
                    self.verdict = record["verdict"]
                    self.store.record_race(self.settings.run_id, record)
                return status


def retry_queued(annotator: Annotator) -> None:
    """What earlier runs could not send, to today's Grafana."""
    if annotator.client is None:
        return
    sent, failed = annotator.retry(annotator.client.url)
    if sent or failed:
        log.info("queued annotations: %d sent, %d still queued", sent, failed)


@contextmanager
def run_files(run_id: str, outputs: Path, encrypted: bool) -> Iterator[str]:
    """The run's fio outputs directory (0700) and, for encrypted cells, its key file (yielded; "" without
    encryption): both removed when the run ends, however it ends."""
    key_file = make_key_file(run_id) if encrypted else ""
    outputs.mkdir(mode=0o700)
    try:
        yield key_file
    finally:
        shutil.rmtree(outputs, ignore_errors=True)
        if key_file:
            os.unlink(key_file)


def results_dir(run_id: str) -> Path:
    """Where a run's fio writes its JSON (0700, removed at the run's end, or by the next run's
    housekeeping when it died)."""
    return Path(tempfile.gettempdir()) / f"zfsnas-bench-{run_id}"


def clean_up_dead_runs(store: Store, zfs: ZfsOps, params: Parameters, cleared: Cleared, procfs: str) -> list[str]:
    """What a run that died (kill -9, a power cut) left, put right before the next one starts; the
    caller holds the run lock, so no other run of this database is alive. Returns one line per
    thing done: fio processes stopped, module parameters restored, `running` rows marked
    `incomplete`, the children of dead runs destroyed (each through the guard with its own run
    id), their fio output directories and encryption key files removed."""
    done = [f"stopped a process left by a run that died: {line}"
            for line in stop_leftovers({r.id for r in store.matrix_runs()}, procfs)]
    done += [f"parameter restored before this run: {line}" for line in restore_pending(params, store)]
    if stale := store.mark_stale(holding_lock=True):
        done.append(f"{stale} result(s) left running by a run that died were marked incomplete")
    dead = store.dead_runs()
    done += [f"destroyed {child}, left behind by a run that died" for child in zfs.destroy_leftovers(cleared, dead)]
    for run_id in sorted(dead):
        done += _remove_run_files(run_id)
    return done


def _remove_run_files(run_id: str) -> list[str]:
    """A dead run's fio outputs directory and encryption key files, removed; one line per path."""
    done = []
    for path in [results_dir(run_id), *Path(tempfile.gettempdir()).glob(f"zfsnas-bench-key-{run_id}-*")]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {path}, the fio outputs of run {run_id} that died")
        elif path.exists():
            path.unlink()
            done.append(f"removed {path}, the encryption key file of run {run_id} that died")
    return done


def make_key_file(run_id: str = "") -> str:
    """A random hex key for encrypted cells, readable by root only, removed at exit by the caller
    (or, named after the run, by the next run's housekeeping when it died)."""
    fd, path = tempfile.mkstemp(prefix=f"zfsnas-bench-key-{run_id}-" if run_id else "zfsnas-bench-key-")
    os.write(fd, secrets.token_hex(32).encode())
    os.close(fd)
    os.chmod(path, 0o600)
    return path
