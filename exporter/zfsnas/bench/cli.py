"""`zfsnas-bench`: init, plan, run, restore, annotate --retry; list, report, recommend, compare
(answer_commands.py); watch, import (client_commands.py); predict (predict_command.py).

Owns the command line and wiring (flags, environment, defaults) and what is printed; the work is
done by running/ (planner, session: a run's housekeeping, runner, annotate), the store
(`zfsnas.store`) and the commands above.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import platform
import re
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path

from .. import __version__
from ..sources.commands import CommandRunner
from ..sources.model import SourceError
from ..store.database import DEFAULT_WAIT, Store, StoreError
from ..store.reader import DEFAULT_BENCH_DB, default_bench_db
from . import answer_commands, client_commands, predict_command
from .options import OneLineParser, key_value, positive, positive_int, weight
from .running.annotate import Annotator, GrafanaClient, load_token
from .running.childenv import take_secrets
from .running.fio import fio_version, pattern_warning
from .running.guard import Cleared, GuardError, check_dataset_name
from .running.matrix import Matrix, MatrixError, load_matrix
from .running.parameters import FreeBsdParameters, LinuxParameters, Parameters, restore_pending
from .running.planner import PlanOptions, plan_matrix, render_plan
from .running.racing import RaceSettings, parse_duration
from .running.runner import RunError, RunLock, RunSettings, new_run_id
from .running.session import RunSession, results_dir
from .running.zfs import ZfsOps

log = logging.getLogger("zfsnas.bench")


def default_jobs_dir() -> Path:
    """$ZFSNAS_BENCH_JOBS, else the checkout's benchmark-jobs/, else the copy a wheel installs
    under <data>/share/zfsnas (the venv, /usr/local with Debian's pip, or /usr)."""
    if env := os.environ.get("ZFSNAS_BENCH_JOBS"):
        return Path(env)
    candidates = [Path(__file__).resolve().parents[3] / "benchmark-jobs"]
    for root in (sysconfig.get_paths()["data"], sys.prefix, "/usr/local", "/usr"):
        candidates.append(Path(root) / "share/zfsnas/benchmark-jobs")
    return next((c for c in candidates if c.is_dir()), candidates[1])


def job_names(jobs_dir: Path) -> set[str]:
    return {p.stem for p in jobs_dir.glob("*.fio")} | {"copy"}


def resolve_matrix(name: str, jobs_dir: Path) -> Path:
    """A path, or the name of a shipped matrix (`fits-copy` -> benchmark-jobs/matrices/fits-copy.toml);
    an unknown name is refused with the list of the shipped ones."""
    path = Path(name)
    if path.exists() or "/" in name or name.endswith(".toml"):
        return path
    shipped = jobs_dir / "matrices" / f"{name}.toml"
    if not shipped.exists():
        names = sorted(p.stem for p in (jobs_dir / "matrices").glob("*.toml"))
        raise MatrixError(f"no matrix {name!r}: the shipped ones are {', '.join(names) or 'none'} "
                          "(or give the path of a .toml)")
    return shipped


def build_parser() -> argparse.ArgumentParser:
    common = OneLineParser(add_help=False)
    common.add_argument("--db", default=default_bench_db(),
                        help=f"results database (default $ZFSNAS_BENCH_DB or {DEFAULT_BENCH_DB})")
    common.add_argument("--db-timeout", type=positive, default=DEFAULT_WAIT, metavar="SECONDS",
                        help=f"how long a command that writes waits for another one writing the database "
                             f"(default {DEFAULT_WAIT:g})")
    common.add_argument("--zfs.command-prefix", dest="command_prefix", default="",
                        help="prefix for zfs/zpool commands, e.g. 'nsenter --target 1 --mount --'")
    common.add_argument("--zfs.command-timeout", dest="command_timeout", type=positive, default=60.0)
    common.add_argument("--path.procfs", dest="procfs", default="/proc")
    common.add_argument("--path.sysfs", dest="sysfs", default="/sys")
    common.add_argument("--jobs-dir", type=Path, default=None, help="fio job files and matrices/")
    common.add_argument("--log.level", dest="log_level", default="info", choices=("debug", "info", "warn", "error"))
    grafana = OneLineParser(add_help=False)
    grafana.add_argument("--grafana-url", default=os.environ.get("ZFSNAS_GRAFANA_URL"),
                         help="Grafana base URL for annotations (default $ZFSNAS_GRAFANA_URL; none = no annotations)")
    grafana.add_argument("--grafana-token-file", default=os.environ.get("ZFSNAS_GRAFANA_TOKEN_FILE"),
                         help="file holding a Grafana service-account token (or $ZFSNAS_GRAFANA_TOKEN)")
    grafana.add_argument("--grafana-token", default=None, help="the token itself (visible in ps: prefer the file)")
    grafana.add_argument("--grafana-timeout", type=positive, default=5.0)

    parser = OneLineParser(prog="zfsnas-bench", description="Benchmark matrices on a ZFS scratch dataset.")
    parser.add_argument("--version", action="version", version=f"zfsnas-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", parents=[common], help="mark a dataset as scratch (after confirmation)")
    init.add_argument("dataset")
    init.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for name, helptext in (("plan", "print every command a matrix would run"), ("run", "run a matrix")):
        p = sub.add_parser(name, parents=[common, grafana], help=helptext)
        p.add_argument("matrix", help="a matrix file or the name of a shipped one (fits-copy, smoke, ...)")
        p.add_argument("--dataset", help="the scratch dataset (overrides the matrix's `dataset`)")
        p.add_argument("--keep", action="store_true", help="keep every child dataset")
        p.add_argument("--size-scale", type=positive, default=1.0, help="multiply every size (e.g. 0.01 for a try run)")
        p.add_argument("--time-scale", type=positive, default=1.0, help="multiply fio runtimes and ramp times")
        p.add_argument("--set", dest="labels", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="a label of this run (ram=16G, client=win11): part of each configuration, an axis of "
                            "the report; repeatable")
        p.add_argument("--dirty-data-max", type=positive_int, default=None,
                       help="bytes for '<n>x dirty' sizes (default: read zfs_dirty_data_max)")
        p.add_argument("--mountpoint", default="", help="the scratch dataset's mountpoint (default /<dataset>)")
        p.add_argument("--no-direct", dest="direct", action="store_false",
                       help="fio without O_DIRECT for every cell (a matrix sets it per sweep with `direct = false`)")
        p.add_argument("--allow-parameters", action="store_true",
                       help="let the matrix change ZFS module parameters ([parameters]); each is restored after its cell")
        p.add_argument("--zvol-root", default="/dev/zvol")
        p.add_argument("--corpus", default=None, help="the directory the copy job copies (overrides the matrix)")
        p.add_argument("--fio", default="fio", help="the fio binary")
        p.add_argument("--until-decided", action="store_true",
                       help="race: each configuration once, then only those that could still be the pick, until the "
                            "pick is decided (fio jobs end at steady state, copies at the sustained rate)")
        p.add_argument("--budget", type=_duration, default=None, metavar="DURATION",
                       help="with --until-decided: stop starting cells after this wall time (30m, 2h, 90s)")
        p.add_argument("--confidence", type=_confidence, default=0.95, help="with --until-decided: 95%% (default)")
        p.add_argument("--max-repeats", type=positive_int, default=10,
                       help="with --until-decided: runs of one configuration at most (default 10)")
        p.add_argument("--speed-weight", type=weight, default=0.5,
                       help="with --until-decided: recommend's weight of speed against space (default 0.5)")
        if name == "run":
            p.add_argument("--dry-run", action="store_true", help="print every zfs and fio command, run nothing")
    sub.add_parser("restore", parents=[common],
                   help="restore module parameters a run changed and could not restore (crash, power loss)")
    answer_commands.add_commands(sub, common)
    client_commands.add_commands(sub, common, grafana)
    predict_command.add_command(sub, common)
    ann = sub.add_parser("annotate", parents=[common, grafana], help="send queued Grafana annotations")
    ann.add_argument("--retry", action="store_true", required=True)
    return parser


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _confidence(text: str) -> float:
    value = text.strip().rstrip("%")
    try:
        number = float(value) / (100 if text.strip().endswith("%") or float(value) > 1 else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a confidence such as 95%") from None
    if not 0.5 <= number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a confidence from 50% to below 100%")
    return number


def _zfs(args: argparse.Namespace) -> ZfsOps:
    return ZfsOps(CommandRunner(args.command_prefix, args.command_timeout), args.procfs, args.sysfs)


def _freebsd() -> bool:
    return platform.system() == "FreeBSD"


def _parameters(args: argparse.Namespace) -> Parameters:
    if _freebsd():
        return FreeBsdParameters(CommandRunner(args.command_prefix, args.command_timeout).run)
    return LinuxParameters(args.sysfs, args.procfs)


def _client(args: argparse.Namespace) -> GrafanaClient | None:
    if not args.grafana_url:
        return None
    token = load_token(args.grafana_token, args.grafana_token_file, args.secrets)
    return GrafanaClient(args.grafana_url, token, args.grafana_timeout)


def cmd_init(args: argparse.Namespace) -> int:
    check_dataset_name(args.dataset)
    zfs = _zfs(args)
    if not zfs.get(args.dataset, "type"):  # before asking: a typo is not worth a "yes"
        raise GuardError(f"{args.dataset!r}: dataset does not exist")
    if not args.yes:
        sys.stderr.write(f"zfsnas-bench will create, fill and destroy child datasets under {args.dataset}.\n"
                         f"It never touches {args.dataset} itself or anything it did not create.\n"
                         f"Mark {args.dataset} as scratch? Type 'yes': ")
        sys.stderr.flush()
        if sys.stdin.readline().strip() != "yes":
            sys.stderr.write("not marked\n")
            return 1
    token = f"init-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    zfs.mark_scratch(args.dataset, token)
    print(f"{args.dataset} marked as scratch (org.zfsnas:scratch={token})")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """`plan` and `run`: print the plan, or run it (session.py does everything around the cells)."""
    jobs_dir = args.jobs_dir or default_jobs_dir()
    if not args.until_decided and args.budget is not None:
        raise MatrixError("--budget goes with --until-decided (a full run runs every cell)")
    matrix = _run_matrix(args, jobs_dir)
    scratch = args.dataset or matrix.dataset
    check_dataset_name(scratch)
    zfs, params = _zfs(args), _parameters(args)
    dry = args.command == "plan" or args.dry_run
    # Refuse an unmarked dataset before anything else, whatever the flags; only plan/--dry-run skip the guard.
    cleared = None if dry else zfs.scratch(scratch)
    opts = _plan_options(args, matrix, jobs_dir, scratch, zfs, params, cleared)
    plans = plan_matrix(matrix, opts)  # checks every parameter value against its range and RAM
    if dry:
        if args.until_decided:
            print(f"# racing: each configuration once (repeats of the matrix ignored), then only those whose "
                  f"{args.confidence * 100:g} % interval overlaps the leader's, until decided"
                  + (f" or {args.budget:g} s are spent" if args.budget else ""))
        sys.stdout.write(render_plan(matrix, plans, params, tuple(args.labels)))
        return 0
    version_text = _check_before_run(args, matrix, jobs_dir)
    store = Store(args.db, wait=args.db_timeout)
    if cleared is None:  # only `plan`/`--dry-run` skip the guard, and they returned above
        raise GuardError(f"{scratch}: not checked by the guard: refused")
    settings = RunSettings(matrix.name, scratch, opts.run_id, procfs=args.procfs, sysfs=args.sysfs,
                           fio_version=version_text, keep=args.keep, freebsd=_freebsd(), labels=tuple(args.labels))
    session = RunSession(store, zfs, params, cleared, settings, f"{args.db}.lock", lambda: _client(args))
    race = RaceSettings(args.confidence, args.budget, args.max_repeats, args.speed_weight) if args.until_decided \
        else None
    status = session.run(matrix, opts, encrypted=any(c.encryption != "off" for c in matrix.cells), race=race)
    for line in session.verdict:
        print(line)
    log.info("run %s %s; results in %s", opts.run_id, status, args.db)
    if session.stopped_by:
        return 2
    return {"complete": 0, "aborted": 130}.get(status, 1)


def _run_matrix(args: argparse.Namespace, jobs_dir: Path) -> Matrix:
    """The matrix to plan or run, with --corpus applied; a time-based job needs the matrix's runtime."""
    matrix = load_matrix(resolve_matrix(args.matrix, jobs_dir), job_names(jobs_dir))
    if args.corpus:
        matrix = dataclasses.replace(matrix, cells=tuple(dataclasses.replace(c, corpus=args.corpus)
                                                         for c in matrix.cells))
    for job in {c.workload for c in matrix.cells if c.workload != "copy" and not c.runtime}:
        if re.search(r"^\s*time_based", (jobs_dir / f"{job}.fio").read_text(), re.M):
            raise MatrixError(f"job {job} is time based: the matrix must give runtime = <seconds>")
    return matrix


def _plan_options(args: argparse.Namespace, matrix: Matrix, jobs_dir: Path, scratch: str, zfs: ZfsOps,
                  params: Parameters, cleared: Cleared | None) -> PlanOptions:
    """The flags, the scratch dataset's mountpoint (--mountpoint, else the cleared dataset's) and the
    host's figures a plan needs; a new run id."""
    mountpoint = args.mountpoint or (cleared.props["mountpoint"].value if cleared is not None else "")
    run_id = new_run_id()
    dirty = args.dirty_data_max or zfs.dirty_data_max()
    changing = any(c.parameters for c in matrix.cells)
    return PlanOptions(scratch=scratch, run_id=run_id, jobs_dir=jobs_dir, results_dir=results_dir(run_id),
                       mountpoint=mountpoint, dirty_data_max=dirty, size_scale=args.size_scale,
                       time_scale=args.time_scale, keep=args.keep, direct=args.direct, zvol_root=args.zvol_root,
                       fio=args.fio, ram=params.ram() if changing else None,
                       ioengine="posixaio" if _freebsd() else "libaio", racing=args.until_decided)


def _check_before_run(args: argparse.Namespace, matrix: Matrix, jobs_dir: Path) -> str:
    """What refuses a run before it changes anything (module parameters without --allow-parameters, a
    missing corpus) and warns about fio's patterns; fio's version line."""
    if any(c.parameters for c in matrix.cells) and not args.allow_parameters:
        names = sorted({name for c in matrix.cells for name, _ in c.parameters})
        raise MatrixError(f"matrix {matrix.name} changes host-wide ZFS module parameters ({', '.join(names)}): "
                          f"pass --allow-parameters (see `zfsnas-bench plan` for every change and its restore)")
    for corpus in {c.corpus for c in matrix.cells if c.workload == "copy"}:
        if not Path(corpus).is_dir():
            raise MatrixError(f"corpus {corpus} is not a directory (give your files with --corpus DIR)")
    version_text, version = fio_version(args.fio)
    for job in {c.workload for c in matrix.cells if c.workload != "copy"}:
        if warning := pattern_warning(version, (jobs_dir / f"{job}.fio").read_text()):
            log.warning("%s: %s", job, warning)
    return version_text


def cmd_restore(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():   # nothing recorded, nothing to restore: create no database for it
        print(f"no database at {args.db}: no parameter change was recorded, nothing to restore", file=sys.stderr)
        return 0
    store = Store(args.db, create=False, wait=args.db_timeout)
    with RunLock(f"{args.db}.lock"):  # never while a run is changing parameters
        done = restore_pending(_parameters(args), store)
    for line in done:
        print(f"restored {line}")
    print(f"{len(done)} parameter change(s) restored")
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        print(f"no database at {args.db}: no annotation is queued", file=sys.stderr)
        return 0
    store = Store(args.db, create=False, wait=args.db_timeout)
    client = _client(args) or GrafanaClient("", load_token(args.grafana_token, args.grafana_token_file, args.secrets),
                                            args.grafana_timeout)
    sent, failed = Annotator(store, client).retry(args.grafana_url)
    print(f"{sent} annotation(s) sent, {failed} still queued")
    return 0 if failed == 0 else 1


COMMANDS = {"init": cmd_init, "plan": cmd_run, "run": cmd_run, "restore": cmd_restore, "annotate": cmd_annotate,
            **answer_commands.COMMANDS, **client_commands.COMMANDS, **predict_command.COMMANDS}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.secrets = take_secrets()  # no child (fio, zfs, zpool) ever inherits the Grafana token
    level = {"warn": logging.WARNING}.get(args.log_level, getattr(logging, args.log_level.upper()))
    logging.basicConfig(level=level, format="zfsnas-bench: %(levelname)s %(message)s", stream=sys.stderr)
    try:
        return COMMANDS[args.command](args)
    except (MatrixError, GuardError, RunError, SourceError, StoreError, *answer_commands.ERRORS,
            *client_commands.ERRORS, *predict_command.ERRORS) as exc:
        log.error("%s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
