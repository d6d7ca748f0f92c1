"""`zfsnas-exporter`: flags in node_exporter's style, wiring sources, collectors and the server."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import __version__
from .collectors import ALL
from .collectors.base import Collector, Context
from .exposition import ClientCollector
from .process import process_families
from .refresh import START
from .scrape import ScrapeCollector
from .server import make_server, serve_in_thread
from .sources.commands import DEFAULT_MAX_OUTPUT, CommandRunner

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .replay import ReplayExporter
    from .sources.model import KstatSource
    from .webconfig import WebConfig, WebConfigFile

# Start-up is imports (docs/performance.md): what only some runs need (the FreeBSD source, the web
# config's parser, replay and capture) is imported where those runs begin, not here.

log = logging.getLogger("zfsnas")
DEFAULT_LISTEN = ":9923"
START_HOLD = 1.0  # seconds zfs/zpool refreshes wait at start-up for the first scrape to be answered
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "warning": logging.WARNING, "error": logging.ERROR}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, sized as argparse sizes it, without importing shutil (and its bz2 and
    lzma) for every flag: `add_argument` makes a formatter to check each one, and a plain start
    never formats help (about 3 ms of start-up)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


def terminal_columns() -> int:
    """What `shutil.get_terminal_size().columns` says: $COLUMNS, else the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zfsnas-exporter", formatter_class=_HelpFormatter,
                                     description="Prometheus exporter for ZFS: ARC/L2ARC, txgs and dirty data, "
                                                 "datasets, pools and disks.")
    parser.add_argument("--version", action="version", version=f"zfsnas-exporter {__version__}")
    parser.add_argument("--web.listen-address", dest="listen_address", default=DEFAULT_LISTEN,
                        help=f"address to listen on (default {DEFAULT_LISTEN})")
    parser.add_argument("--web.telemetry-path", dest="telemetry_path", default="/metrics")
    parser.add_argument("--web.config.file", dest="web_config_file", default=None,
                        help="exporter-toolkit web config YAML: TLS and basic auth")
    parser.add_argument("--path.procfs", dest="procfs", default="/proc")
    parser.add_argument("--path.sysfs", dest="sysfs", default="/sys")
    parser.add_argument("--path.udev.data", dest="udev_data", default="/run/udev/data")
    parser.add_argument("--kstat.source", dest="kstat_source", choices=("auto", "procfs", "sysctl"), default="auto",
                        help="where kstats come from: procfs (Linux), sysctl (FreeBSD); auto picks by platform")
    parser.add_argument("--path.sysctl-file", dest="sysctl_file", default=None,
                        help="read FreeBSD sysctl output from this file instead of running sysctl (tests)")
    parser.add_argument("--zfs.command-prefix", dest="command_prefix", default="",
                        help="prefix for zfs/zpool/sysctl commands, e.g. 'nsenter --target 1 --mount --' in a container")
    parser.add_argument("--zfs.command-timeout", dest="command_timeout", type=float, default=30.0,
                        help="seconds before a zfs/zpool/sysctl command is killed (default 30)")
    parser.add_argument("--zfs.command-max-output", dest="command_max_output", type=int, default=DEFAULT_MAX_OUTPUT,
                        help="bytes of output read from one zfs/zpool/sysctl command before it is killed and its "
                             f"source fails (default {DEFAULT_MAX_OUTPUT}, about 60,000 datasets in zfs list; "
                             "the snapshot listing is streamed and not limited)")
    parser.add_argument("--collector.disable-defaults", dest="disable_defaults", action="store_true",
                        help="enable only collectors named with --collector.<name>")
    for cls in ALL:
        parser.add_argument(f"--collector.{cls.name}", dest=f"collector_{cls.name}",
                            action=argparse.BooleanOptionalAction, default=None,
                            help=f"{cls.description} (default {'on' if cls.default_enabled else 'off'})")
        cls.add_arguments(parser)
    parser.add_argument("--log.level", dest="log_level", default="info",
                        choices=("debug", "info", "warn", "warning", "error"))
    add_replay_arguments(parser)
    return parser


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """`--replay` and the capture subcommand's mention; replay.py itself is imported only to replay
    (it and capture.py pull in tarfile and urllib: 50 ms of start-up for every other run)."""
    parser.epilog = ("zfsnas-exporter capture OUT.tar.gz [--interval N] [--anonymize] [flags]: bundle what the "
                     "exporter reads on this NAS into one archive (see docs/capture.md)")
    parser.add_argument("--replay", dest="replay", default=None, metavar="CAPTURE.tar.gz",
                        help="serve /metrics from a capture made with `zfsnas-exporter capture` instead of this host")
    parser.add_argument("--replay.loop", dest="replay_loop", action="store_true",
                        help="after the last snapshot start again from the first (default: stay on the last)")


def enabled_collectors(args: argparse.Namespace) -> list[type[Collector]]:
    chosen = []
    for cls in ALL:
        flag = getattr(args, f"collector_{cls.name}")
        default = cls.default_enabled and not args.disable_defaults
        if (default if flag is None else flag):
            chosen.append(cls)
    return chosen


def kstat_source_kind(args: argparse.Namespace) -> str:
    kind = args.kstat_source
    if kind == "auto":
        # os.uname() is what platform.system() reads, without importing platform
        kind = "sysctl" if args.sysctl_file or os.uname().sysname == "FreeBSD" else "procfs"
    return kind


def kstat_source(args: argparse.Namespace, runner: CommandRunner) -> KstatSource:
    if kstat_source_kind(args) == "sysctl":
        from .sources.freebsd import SysctlKstatSource

        return SysctlKstatSource(runner, path=args.sysctl_file)
    from .sources.linux import ProcfsKstatSource

    return ProcfsKstatSource(args.procfs, args.sysfs)


class Exporter:
    """`render` is what the server serves; `registry` offers the same to prometheus_client users.
    `owned_runner` is the command runner this exporter created (None when the caller passed its
    own): `stop` closes it, once, after every collector has been told to stop."""

    def __init__(self, collectors: list[Collector], scrape: ScrapeCollector, process_metrics: bool = True,
                 owned_runner: CommandRunner | None = None):
        self.collectors = collectors
        self.scrape = scrape
        self.process_metrics = process_metrics
        self.owned_runner = owned_runner
        self._holding = False

    def render(self, deadline: float | None = None) -> str:
        """The page; `deadline` (time.monotonic()) is the scrape's, from Prometheus' timeout header."""
        return "".join(self.render_parts(deadline) or ())

    def render_parts(self, deadline: float | None = None,
                     deliver: Callable[[list[str]], None] | None = None) -> list[str] | None:
        """The page as its pieces, what the server sends; None when a read stuck past the deadline
        had the page sent through `deliver` instead (see `ScrapeCollector.render_parts`)."""
        page = self.scrape.render_parts(process_families().families() if self.process_metrics else (),
                                        deadline, deliver)
        if self._holding:  # the first page: held refreshes may run now (releasing twice is harmless)
            self._holding = False
            START.release()
        return page

    def hold_refreshes(self, seconds: float) -> None:
        """Start-up: the zfs/zpool refreshes start once the first page is rendered, or after `seconds`
        (`refresh.START`): that page comes sooner, and it could not have held their values anyway."""
        self._holding = True
        START.hold(seconds)

    @property
    def registry(self) -> CollectorRegistry:
        """A prometheus_client registry serving the same families (through `exposition.ClientCollector`)."""
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry(auto_describe=False)
        registry.register(ClientCollector(self.scrape.scrape))
        return registry

    def start(self) -> None:
        for collector in self.collectors:
            collector.start()

    def stop(self) -> None:
        """Stop every collector's threads; the runner is closed first so that a hung command is killed
        at once rather than waited for, and a collector that stops early cannot close it for the others."""
        runner, self.owned_runner = self.owned_runner, None
        if runner is not None:
            runner.close()
        for collector in self.collectors:
            collector.stop()


def build_exporter(args: argparse.Namespace, process_metrics: bool = True,
                   runner: CommandRunner | None = None) -> Exporter:
    """`runner` replaces the command runner (capture records through it, replay answers from it);
    its caller then owns it. Otherwise the exporter creates one and closes it in `stop`."""
    owned = None
    if runner is None:
        runner = owned = CommandRunner(args.command_prefix, args.command_timeout, args.command_max_output)
    kstat = kstat_source(args, runner)
    ctx = Context(kstat=kstat, commands=runner, args=args)
    collectors = [cls(ctx) for cls in enabled_collectors(args)]
    scrape = ScrapeCollector(collectors, kstat)
    for collector in collectors:
        if collector.needs_zfs:  # their sources' failures while ZFS is missing are said by the scrape
            for source in collector.sources():
                source.explained_while = scrape.zfs_said_missing
    return Exporter(collectors, scrape, process_metrics, owned)


def startup_line(exporter: Exporter, runner: CommandRunner) -> tuple[int, str]:
    """The one line that opens the log: the version and collectors, and, where ZFS or its commands
    are missing, what is served and what is not. What it says is not said again by the first scrape
    or the sources (`ScrapeCollector.said`, `CommandRunner.announce`)."""
    zfs = exporter.scrape.zfs_missing()
    exporter.scrape.said(zfs)
    unavailable = runner.unavailable(sorted({p for c in exporter.collectors for p in c.programs}))
    optional = runner.unavailable(sorted({p for c in exporter.collectors for p in c.optional_programs}))
    runner.announce({**unavailable, **optional})
    off = [c.name for c in exporter.collectors if (zfs and c.needs_zfs) or any(p in unavailable for p in c.programs)]
    idle = [c for c in exporter.collectors
            if c.name not in off and any(p in optional for p in c.optional_programs)]
    on = [c.name for c in exporter.collectors if c.name not in off and c not in idle]
    head = f"zfsnas-exporter {__version__}"
    extras = "".join(f"; {c.name} serves nothing: "
                     f"{'; '.join(sorted({optional[p] for p in c.optional_programs if p in optional}))}"
                     f"{f' ({c.missing_hint})' if c.missing_hint else ''}" for c in idle)
    if not off:
        return (logging.WARNING if idle else logging.INFO), f"{head}: collectors {', '.join(on) or 'none'}{extras}"
    missing = (sorted(set(unavailable.values())) if runner.prefix else
               [f"{', '.join(sorted(unavailable))}: command not found"] if unavailable else [])
    reasons = ([zfs] if zfs else []) + missing
    hint = (" (in a container: --zfs.command-prefix 'nsenter --target 1 --mount --')"
            if unavailable and not zfs and not runner.prefix else "")
    return logging.WARNING, (f"{head}: {'; '.join(reasons)}{hint}: serving {', '.join(on + ['self metrics'])}; "
                             f"not {', '.join(off)} (their zfs_exporter_collector_success is 0 until that changes)"
                             f"{extras}")


def catch_stop_signals() -> int:
    """A pipe's read end that yields a byte once SIGTERM or SIGINT arrives. The Python handlers do
    nothing: the signal's number reaches the reader through the wakeup pipe, written by the
    interpreter's C-level handler in whichever thread the kernel picked. (Waiting on a
    `threading.Event` set by the handler can hang for good: when the signal goes to one of the
    worker or refresh threads, the main thread asleep in the Event's lock is never woken to run
    the handler. Seen under the start-up benchmark, which stops the exporter right after its
    first answer.)"""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    return read_end


def web_config_changed(config: WebConfig | None, error: str | None) -> None:
    """`--web.config.file` read again after a change: said once per change."""
    if config is None:
        log.error("web config no longer loads, answering 500 until it does: %s", error)
        return
    log.info("web config changed: read again")
    for warning in config.warnings:
        log.warning("%s", warning)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["capture"]:
        from .capture import main as capture_main

        return capture_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=LOG_LEVELS[args.log_level],
                        format="%(asctime)s level=%(levelname)s %(message)s", stream=sys.stderr)
    web: WebConfigFile | None = None
    if args.web_config_file:
        from .webconfig import WebConfigError, WebConfigFile

        try:
            web = WebConfigFile(args.web_config_file, on_change=web_config_changed)
        except WebConfigError as exc:
            log.error("invalid web config: %s", exc)
            return 2
        for warning in web.config.warnings:
            log.warning("%s", warning)
    exporter: Exporter | ReplayExporter
    if args.replay:
        from . import replay

        try:
            capture = replay.open_capture(args.replay)
            exporter = replay.ReplayExporter(capture, args, loop=args.replay_loop)
        except replay.CaptureError as exc:
            log.error("cannot replay: %s", exc)
            return 2
        log.info("replaying %s: %s", args.replay, replay.describe(capture))
        log.info("zfsnas-exporter %s: collectors %s", __version__,
                 ", ".join(c.name for c in exporter.collectors) or "none")
    else:
        exporter = build_exporter(args)
        assert exporter.owned_runner is not None
        log.log(*startup_line(exporter, exporter.owned_runner))
        exporter.hold_refreshes(START_HOLD)
    render = exporter.render_parts if isinstance(exporter, Exporter) else exporter.render
    try:
        server = make_server(args.listen_address, render, args.telemetry_path, web)
    except (OSError, ValueError) as exc:
        log.error("cannot listen on %s: %s", args.listen_address, exc)
        return 2
    exporter.start()
    # Long-lived objects made so far never become garbage: keep the collector from rescanning them.
    gc.freeze()
    log.info("listening on %s%s, metrics at %s", "https://" if web and web.config.tls else "http://",
             args.listen_address, args.telemetry_path)
    stop_signals = catch_stop_signals()
    serve_in_thread(server)
    os.read(stop_signals, 1)
    log.info("shutting down")
    server.shutdown()
    exporter.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
