"""Experiments run from a client: `zfsnas-bench watch` measures from the NAS side a workload that
something else drives; `zfsnas-bench import` stores results measured elsewhere (CrystalDiskMark
text, fio JSON). Their results are configurations like a run's: report, compare, recommend, the
exporter's `bench` collector, the dashboards and the regression alert treat them alike.

Neither creates, writes or destroys anything but the results database: `watch` only reads (no
scratch mark needed) and refuses a dataset that does not exist; `import` checks its whole input
before storing any of it, in one transaction. Owns the flags, the wiring and what is printed; the
sampling is watch.py's, the formats importers.py's, the configuration's dataset part identity.py's.
"""

from __future__ import annotations

import argparse
import logging
import platform
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from ..sources.benchschema import ResultFigures
from ..sources.commands import CommandRunner
from ..sources.model import SourceError
from .annotate import Annotator, GrafanaClient, load_token
from .config import UNKNOWN
from .identity import IdentityError, configuration, read_identity
from .importers import Imported, ImportFormatError, crystaldiskmark_results, fio_results
from .options import key_value, positive
from .parameters import FreeBsdParameters, LinuxParameters, Parameters
from .runner import RunLock, new_run_id
from .store import Store
from .watch import Watcher, WatchError, figures, pool_disks
from .zfs import ZfsOps

log = logging.getLogger("zfsnas.bench")


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser,
                 grafana: argparse.ArgumentParser) -> None:
    labels = argparse.ArgumentParser(add_help=False)
    labels.add_argument("--set", dest="settings", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="what else defines the result: a ZFS property (volblocksize=16K, compression=lz4) or a "
                             "label (client=win11, protocol=smb, link=2x2.5GbE, ram=16G, ntfs_cluster=4K); repeatable")
    labels.add_argument("--label", default=None, help="a free-text name of the experiment (part of the configuration)")
    w = sub.add_parser("watch", parents=[common, grafana, labels],
                       help="measure from the NAS a workload a client drives (SMB/NFS copy, iSCSI CrystalDiskMark)")
    w.add_argument("--dataset", dest="datasets", action="append", required=True,
                   help="a filesystem or zvol the client writes to or reads from (repeatable)")
    w.add_argument("--matrix", default="watch", help="the matrix the results belong to (default watch)")
    w.add_argument("--workload", default="client", help="the workload's name in reports (default client)")
    w.add_argument("--duration", type=positive, default=None, help="stop after this many seconds")
    w.add_argument("--until-idle", type=positive, default=None, metavar="SECONDS",
                   help="stop once nothing moved for this long after the first byte (the client finished)")
    w.add_argument("--interval", type=positive, default=1.0, help="seconds between full samples (default 1)")
    w.add_argument("--settle-timeout", type=positive, default=30.0,
                   help="seconds to wait for the last byte's txg to sync before reading space (default 30)")
    imp = sub.add_parser("import", help="store results measured elsewhere (CrystalDiskMark text, fio JSON)")
    formats = imp.add_subparsers(dest="format", required=True)
    for name, helptext, default in (("crystaldiskmark", "CrystalDiskMark 5-8 text, saved or copied", "crystaldiskmark"),
                                    ("fio", "fio --output-format=json or json+ output", "fio")):
        p = formats.add_parser(name, parents=[common, labels], help=helptext)
        p.add_argument("file", type=Path)
        p.add_argument("--matrix", default=default, help=f"the matrix the results belong to (default {default})")
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
    store = Store(args.db)
    run_id = new_run_id()
    with RunLock(f"{args.db}.lock"):    # not beside a run (its start would mark this one stale)
        return _watch(args, store, run_id, watcher, identities, zfs, params)


def _watch(args: argparse.Namespace, store: Store, run_id: str, watcher: Watcher, identities: list[Any],
           zfs: ZfsOps, params: Parameters) -> int:
    first = identities[0]
    store.start_matrix(run_id, args.matrix, first.dataset, len(identities), first.zfs_version, "",
                       platform.release(), first.status, params.read_all())
    client = None
    if args.grafana_url:
        client = GrafanaClient(args.grafana_url, load_token(args.grafana_token, args.grafana_token_file,
                                                            args.secrets), args.grafana_timeout)
    annotator = Annotator(store, client)
    started = time.time()
    rows = []
    for cell, identity in enumerate(identities, 1):
        config = configuration(args.matrix, args.workload, "-", {"source": "watch"}, identity, args.settings,
                               args.label)
        result_id = store.start_result(run_id, cell, config, 1, identity.dataset, started)
        annotator.start(result_id, int(started * 1000), config, run_id,
                        f"zfsnas-bench watch {identity.dataset}{f' ({args.label})' if args.label else ''} started")
        rows.append((identity, config, result_id, zfs.space(("zfs", "get", "-Hp", "-o", "property,value",
                                                             "used,logicalused", identity.dataset))))
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: ending the watch", signal.Signals(signum).name)
        stop.set()
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    names = ", ".join(i.dataset for i in identities)
    log.info("watching %s (run %s): start the client now%s", names, run_id,
             f"; the watch ends {args.until_idle:g} s after the last byte" if args.until_idle else "")
    try:
        watched = watcher.watch(stop, args.duration, args.until_idle,
                                on_first_byte=lambda: log.info("first byte seen"))
        watcher.settle(watched, args.settle_timeout)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    status = "complete"
    disks = {i.pool: pool_disks(i.status, i.pool, args.sysfs) for i in identities}
    dirty = zfs.dirty_data_max()
    for (identity, config, result_id, before), target in zip(rows, watched.targets):
        if target.first is None:
            seconds = time.time() - started
            error = f"no byte reached {identity.dataset} in the {seconds:.0f} s watched ({watched.stopped_by})"
            store.finish_result(result_id, "failed", figures=ResultFigures(error=error))
            annotator.finish(result_id, store.annotation_id(result_id), int(started * 1000), int(time.time() * 1000),
                             config, run_id, f"zfsnas-bench watch {identity.dataset}: {error}")
            log.error("%s", error)
            status = "failed"
            continue
        after = zfs.space(("zfs", "get", "-Hp", "-o", "property,value", "used,logicalused", identity.dataset))
        values = figures(watched, target, disks[identity.pool], before, after, dirty)
        assert values.details is not None   # figures() always says what the watch saw
        window = values.details["window"]
        store.finish_result(result_id, "complete", finished=window[1], figures=values, started=window[0])
        line = summary(identity.dataset, values)
        annotator.finish(result_id, store.annotation_id(result_id), round(window[0] * 1000), round(window[1] * 1000),
                         config, run_id, f"zfsnas-bench watch {line}", move_start=True)
        print(line)
    store.finish_matrix(run_id, status)
    log.info("run %s %s; results in %s", run_id, status, args.db)
    return 0 if status == "complete" else 1


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
    try:
        data = args.file.read_bytes()
    except OSError as exc:
        raise WatchCommandError(f"{args.file}: {exc.strerror or exc}") from None
    identity = None
    target = args.dataset or args.zvol
    if target:
        zfs, params = _host_parts(args)
        try:
            identity = read_identity(zfs, params, target, platform.node(), "volume" if args.zvol else "filesystem")
        except (IdentityError, SourceError) as exc:
            raise WatchCommandError(str(exc)) from None
    try:
        if args.format == "crystaldiskmark":
            imported: Imported = crystaldiskmark_results(data, args.matrix, identity, args.settings, args.label)
        else:
            imported = fio_results(data.decode("utf-8", "replace"), args.matrix, identity, args.settings, args.label)
    except ImportFormatError as exc:
        raise WatchCommandError(f"{args.file}: {exc}; nothing stored") from None
    when = imported.measured_at or time.time()
    run_id = new_run_id()
    store = Store(args.db)
    store.import_results(run_id, args.matrix, target or UNKNOWN, imported.results, when, when,
                         {**imported.details, "file": str(args.file)})
    print(f"imported {len(imported.results)} result(s) of {imported.source} from {args.file} into matrix "
          f"{args.matrix} (run {run_id}); zfsnas-bench report --matrix {args.matrix}")
    return 0


COMMANDS = {"watch": cmd_watch, "import": cmd_import}
ERRORS = (WatchCommandError, ImportFormatError, IdentityError, WatchError)
