"""Experiments run from a client: `zfsnas-bench watch` measures from the NAS side a workload that
something else drives; `zfsnas-bench import` stores results measured elsewhere (CrystalDiskMark
text, fio JSON). Their results are configurations like a run's: report, compare, recommend, the
exporter's `bench` collector, the dashboards and the regression alert treat them alike.

Neither creates, writes or destroys anything but the results database: `watch` only reads (no
scratch mark needed) and refuses a dataset that does not exist; `import` checks its whole input
before storing any of it, in one transaction. Owns the flags, the wiring and what is printed; the
sampling is client/watch.py's, the formats client/importers.py's, the configuration's dataset part
client/identity.py's.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import platform
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from ..sources.commands import CommandRunner
from ..sources.model import SourceError
from ..store.configuration import UNKNOWN, Configuration
from ..store.database import Store
from ..store.schema import ResultFigures
from .client.identity import IdentityError, configuration, read_identity
from .client.importers import (
    DEFAULT_MAX_BYTES,
    Imported,
    ImportFormatError,
    Limits,
    crystaldiskmark_results,
    fio_results,
    read_input,
)
from .client.watch import Watched, Watcher, WatchError, figures, pool_disks
from .options import interval_seconds, key_value, name_text, positive, positive_int
from .running.annotate import Annotator, GrafanaClient, load_token
from .running.guard import check_dataset_name
from .running.parameters import FreeBsdParameters, LinuxParameters, Parameters
from .running.runner import RunLock, new_run_id
from .running.zfs import ZfsOps

log = logging.getLogger("zfsnas.bench")


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser,
                 grafana: argparse.ArgumentParser) -> None:
    labels = argparse.ArgumentParser(add_help=False)
    labels.add_argument("--set", dest="settings", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="what else defines the result: a ZFS property (volblocksize=16K, compression=lz4) or a "
                             "label (client=win11, protocol=smb, link=2x2.5GbE, ram=16G, ntfs_cluster=4K); repeatable")
    labels.add_argument("--label", type=name_text, default=None,
                        help="a free-text name of the experiment (part of the configuration; one line)")
    w = sub.add_parser("watch", parents=[common, grafana, labels],
                       help="measure from the NAS a workload a client drives (SMB/NFS copy, iSCSI CrystalDiskMark)")
    w.add_argument("--dataset", dest="datasets", action="append", required=True,
                   help="a filesystem or zvol the client writes to or reads from (repeatable)")
    w.add_argument("--matrix", type=name_text, default="watch", help="the matrix the results belong to (default watch)")
    w.add_argument("--workload", type=name_text, default="client", help="the workload's name in reports (default client)")
    w.add_argument("--duration", type=positive, default=None, help="stop after this many seconds")
    w.add_argument("--until-idle", type=positive, default=None, metavar="SECONDS",
                   help="stop once nothing moved for this long after the first byte (the client finished)")
    w.add_argument("--interval", type=interval_seconds, default=1.0,
                   help="seconds between full samples, 0.1 to 3600 (default 1)")
    w.add_argument("--settle-timeout", type=positive, default=30.0,
                   help="seconds to wait for the last byte's txg to sync before reading space (default 30)")
    imp = sub.add_parser("import", help="store results measured elsewhere (CrystalDiskMark text, fio JSON)")
    formats = imp.add_subparsers(dest="format", required=True)
    for name, helptext, default in (("crystaldiskmark", "CrystalDiskMark 5-8 text, saved or copied", "crystaldiskmark"),
                                    ("fio", "fio --output-format=json or json+ output", "fio")):
        p = formats.add_parser(name, parents=[common, labels], help=helptext)
        p.add_argument("file", type=Path)
        p.add_argument("--matrix", type=name_text, default=default,
                       help=f"the matrix the results belong to (default {default})")
        p.add_argument("--max-input-bytes", type=positive_int, default=DEFAULT_MAX_BYTES[name], metavar="BYTES",
                       help=f"refuse a file larger than this (default {DEFAULT_MAX_BYTES[name]})")
        p.add_argument("--max-results", type=positive_int, default=1000, metavar="N",
                       help="refuse a file of more results than this (default 1000)")
        p.add_argument("--read-timeout", type=positive, default=30.0, metavar="SECONDS",
                       help="give up reading the file (a FIFO, a slow mount) after this long (default 30)")
        if name == "crystaldiskmark":
            p.add_argument("--max-lines", type=positive_int, default=10_000, metavar="N",
                           help="refuse a text of more lines than this (default 10000; a result has under 100)")
        where = p.add_mutually_exclusive_group()
        where.add_argument("--dataset", default=None, help="the configuration of this filesystem (read now)")
        where.add_argument("--zvol", default=None, help="the configuration of this zvol (read now)")


def _host_parts(args: argparse.Namespace) -> tuple[ZfsOps, Parameters]:
    runner = CommandRunner(args.command_prefix, args.command_timeout)
    zfs = ZfsOps(runner, args.procfs, args.sysfs)
    params: Parameters = FreeBsdParameters(runner.run) if platform.system() == "FreeBSD" else \
        LinuxParameters(args.sysfs, args.procfs)
    return zfs, params


def _kstat_source(args: argparse.Namespace, runner: CommandRunner) -> Any:
    if platform.system() == "FreeBSD":
        from ..sources.freebsd import SysctlKstatSource

        return SysctlKstatSource(runner)
    from ..sources.linux import ProcfsKstatSource

    return ProcfsKstatSource(args.procfs, args.sysfs)


class WatchCommandError(Exception):
    pass


def cmd_watch(args: argparse.Namespace) -> int:
    if args.duration is None and args.until_idle is None:
        log.info("no --duration or --until-idle: Ctrl-C (or SIGTERM) ends the watch")
    for dataset in args.datasets:
        check_dataset_name(dataset, below_pool=False)    # before any zfs command: `-r` is no dataset
    zfs, params = _host_parts(args)
    host = platform.node()
    try:
        identities = [read_identity(zfs, params, d, host) for d in dict.fromkeys(args.datasets)]
    except IdentityError as exc:
        raise WatchCommandError(str(exc)) from None
    runner = CommandRunner(args.command_prefix, args.command_timeout)
    sysctl = zfs.sysctl if platform.system() == "FreeBSD" else None
    try:
        watcher = Watcher(_kstat_source(args, runner), [i.dataset for i in identities], args.procfs, args.sysfs,
                          sysctl, args.interval)
    except WatchError as exc:
        raise WatchCommandError(str(exc)) from None
    store = Store(args.db, wait=args.db_timeout)
    run_id = new_run_id()
    with RunLock(f"{args.db}.lock"):    # not beside a run (its start would mark this one stale)
        return WatchRun(args, store, run_id, watcher, zfs, params).run(identities)


@dataclass
class _Cell:
    """One watched dataset's result row."""
    identity: Any
    config: Configuration
    result_id: int
    before: dict[str, str] = field(default_factory=dict)   # its space before the watch
    done: bool = False                                     # its row is finished


@dataclass
class WatchRun:
    """One watch, from its rows `running` to every one of them finished: `complete` as asked (its
    end, SIGINT, SIGTERM or SIGHUP), or `failed` with what was seen (the bytes kept) when anything
    goes wrong (an error, a KeyboardInterrupt outside the sampling)."""
    args: argparse.Namespace
    store: Store
    run_id: str
    watcher: Watcher
    zfs: ZfsOps
    params: Parameters
    cells: list[_Cell] = field(default_factory=list)

    def run(self, identities: list[Any]) -> int:
        args = self.args
        first = identities[0]
        self.store.start_matrix(self.run_id, args.matrix, first.dataset, len(identities), first.zfs_version, "",
                                platform.release(), first.status, self.params.read_all())
        stop, hurry = threading.Event(), threading.Event()
        sampling = [True]

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("%s: %s", signal.Signals(signum).name, "ending the watch" if sampling[0] else "not settling")
            (stop if sampling[0] else hurry).set()
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            self.annotator = Annotator(self.store, self._client())
            self.started = time.time()
            for cell, identity in enumerate(identities, 1):
                self._start(cell, identity)
            log.info("watching %s (run %s): start the client now%s", ", ".join(i.dataset for i in identities),
                     self.run_id, f"; the watch ends {args.until_idle:g} s after the last byte" if args.until_idle
                     else "")
            watched = self.watcher.watch(stop, args.duration, args.until_idle,
                                         on_first_byte=lambda: log.info("first byte seen"))
            sampling[0] = False
            self.watcher.settle(watched, args.settle_timeout, hurry)
            status = self._finish(watched)
        except BaseException as exc:
            reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else \
                (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            failed = self._fail(reason)
            if isinstance(exc, (WatchError, SourceError, OSError, ValueError, KeyboardInterrupt)):
                raise WatchCommandError(f"the watch ended: {reason}; {failed}") from None
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("run %s %s; results in %s", self.run_id, status, args.db)
        return 0 if status == "complete" else 1

    def _client(self) -> GrafanaClient | None:
        args = self.args
        if not args.grafana_url:
            return None
        return GrafanaClient(args.grafana_url, load_token(args.grafana_token, args.grafana_token_file, args.secrets),
                             args.grafana_timeout)

    def _start(self, number: int, identity: Any) -> None:
        args = self.args
        config = configuration(args.matrix, args.workload, "-", {"source": "watch"}, identity, args.settings,
                               args.label)
        result_id = self.store.start_result(self.run_id, number, config, 1, identity.dataset, self.started)
        cell = _Cell(identity, config, result_id)
        self.cells.append(cell)
        self.annotator.start(result_id, int(self.started * 1000), config, self.run_id,
                             f"zfsnas-bench watch {identity.dataset}{f' ({args.label})' if args.label else ''} started")
        cell.before = self._space(identity.dataset)

    def _space(self, dataset: str) -> dict[str, str]:
        return self.zfs.space(("zfs", "get", "-Hp", "-o", "property,value", "used,logicalused", dataset))

    def _finish(self, watched: Watched) -> str:
        status = "complete"
        disks = {c.identity.pool: pool_disks(c.identity.status, c.identity.pool, self.args.sysfs) for c in self.cells}
        dirty = self.zfs.dirty_data_max()
        for cell, target in zip(self.cells, watched.targets):
            if target.first is None:
                seconds = time.time() - self.started
                self._end(cell, "failed", ResultFigures(error=f"no byte reached {cell.identity.dataset} in the "
                                                              f"{seconds:.0f} s watched ({watched.stopped_by})"))
                status = "failed"
                continue
            after = self._space(cell.identity.dataset)
            values = figures(watched, target, disks[cell.identity.pool], cell.before, after, dirty)
            self._end(cell, "complete", values)
            print(summary(cell.identity.dataset, values))
        self.store.finish_matrix(self.run_id, status)
        return status

    def _fail(self, reason: str) -> str:
        """Every row not finished yet, `failed` with `reason` and what was seen of it (the bytes
        that reached it until then); the run `failed`. What it says of them, for the error line."""
        watched = self.watcher.watched
        kept = 0
        failed = 0
        for cell in (c for c in self.cells if not c.done):
            target = next((t for t in watched.targets if t.dataset == cell.identity.dataset), None) if watched else None
            values = ResultFigures(error=reason)
            if watched is not None and target is not None and target.first is not None:
                watched.error = reason
                try:
                    values = dataclasses.replace(figures(watched, target, [], cell.before, {}, None), error=reason)
                except Exception as exc:     # what was seen cannot be figured: its bytes at least
                    values = ResultFigures(error=f"{reason} (and its figures: {exc})",
                                           bytes=target.bytes_moved(target.previous))
                kept += values.bytes or 0
            try:
                self._end(cell, "failed", values)
                failed += 1
            except Exception as exc:      # the store itself failed: the next command that writes marks it
                log.error("%s: its result could not be recorded: %s", cell.identity.dataset, exc)
        try:
            self.store.finish_matrix(self.run_id, "failed")
        except Exception as exc:
            log.error("run %s could not be recorded as failed: %s", self.run_id, exc)
        return f"{failed} result(s) recorded failed, {kept} bytes seen kept"

    def _end(self, cell: _Cell, status: str, values: ResultFigures) -> None:
        """Finish one row and its annotation; a complete one spans its window, first byte to last."""
        window = (values.details or {}).get("window")
        if window and status == "complete":
            self.store.finish_result(cell.result_id, status, finished=window[1], figures=values, started=window[0])
        else:
            self.store.finish_result(cell.result_id, status, figures=values)
        cell.done = True
        start, end = (round(window[0] * 1000), round(window[1] * 1000)) if window else \
            (int(self.started * 1000), int(time.time() * 1000))
        text = f"zfsnas-bench watch {summary(cell.identity.dataset, values)}" if values.details else \
            f"zfsnas-bench watch {cell.identity.dataset}: {values.error}"
        if status != "complete":
            log.error("%s: %s", cell.identity.dataset, values.error)
        self.annotator.finish(cell.result_id, self.store.annotation_id(cell.result_id), start, end, cell.config,
                              self.run_id, text, move_start=bool(window))


def summary(dataset: str, values: ResultFigures) -> str:
    """The line a watch prints per dataset; `values` as `watch.figures` made them (all set but ratio)."""
    d = values.details or {}
    ratio = values.compressratio
    peak = d.get("peak_dirty_bytes")
    throughput = values.throughput_bytes_per_second or 0.0
    return (f"{dataset}: {values.bytes} bytes in {values.duration_seconds or 0.0:.2f} s: "
            f"{throughput / 1e6:.1f} MB/s ({throughput / 2**20:.1f}"
            f" MiB/s), {values.iops or 0.0:.1f} IOPS; written {d['written_bytes']}, read {d['read_bytes']}; compression "
            f"{'unknown' if ratio is None else f'{ratio:.2f}x'}; peak dirty "
            f"{'unknown' if peak is None else f'{peak / 2**20:.1f} MiB'}; {d['txgs_synced']} txg(s) synced; "
            f"CPU busy {(values.cpu_busy_ratio or 0.0) * 100:.1f} %")


# --- import -----------------------------------------------------------------------------------------

def cmd_import(args: argparse.Namespace) -> int:
    limits = Limits(int(args.max_input_bytes), args.read_timeout, int(args.max_results),
                    int(getattr(args, "max_lines", 10_000)))
    try:
        data = read_input(args.file, limits)
    except ImportFormatError as exc:
        raise WatchCommandError(f"{exc}; nothing stored") from None
    identity = None
    target = args.dataset or args.zvol
    if target:
        check_dataset_name(target, below_pool=False)    # before any zfs command: `-r` is no dataset
        zfs, params = _host_parts(args)
        try:
            identity = read_identity(zfs, params, target, platform.node(), "volume" if args.zvol else "filesystem")
        except (IdentityError, SourceError) as exc:
            raise WatchCommandError(str(exc)) from None
    try:
        if args.format == "crystaldiskmark":
            imported: Imported = crystaldiskmark_results(data, args.matrix, identity, args.settings, args.label, limits)
        else:
            imported = fio_results(data.decode("utf-8", "replace"), args.matrix, identity, args.settings, args.label,
                                   limits)
    except ImportFormatError as exc:
        raise WatchCommandError(f"{args.file}: {exc}; nothing stored") from None
    when = imported.measured_at or time.time()
    run_id = new_run_id()
    store = Store(args.db, wait=args.db_timeout)
    store.import_results(run_id, args.matrix, target or UNKNOWN, imported.results, when, when,
                         {**imported.details, "file": str(args.file)})
    print(f"imported {len(imported.results)} result(s) of {imported.source} from {args.file} into matrix "
          f"{args.matrix} (run {run_id}); zfsnas-bench report --matrix {args.matrix}")
    return 0


COMMANDS = {"watch": cmd_watch, "import": cmd_import}
ERRORS = (WatchCommandError, ImportFormatError, IdentityError, WatchError)
