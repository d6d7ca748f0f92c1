"""The exporter's wiring: flags into typed settings, settings into sources, collectors and one `Exporter`.

Owns `build_parser` (every flag: the exporter's own, then each collector's switch and its
`settings_type`'s flags, the flags collectors share once), `ExporterConfig` (the parsed flags as
typed settings: what `build_exporter` is given; replay and capture change it by attribute, never by
a flag's destination name), `build_exporter` and `Exporter` (what the server serves: `render_parts`,
`start`, `stop`). Imported by `cli` (the daemon), `capture` and `replay`; it imports neither of them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import __version__
from .collectors import ALL
from .collectors.base import Collector, Context, Paths
from .collectors.filters import DeviceFilter, PoolFilter
from .exposition import ClientCollector
from .process import process_families
from .refresh import START
from .scrape import ScrapeCollector
from .settings import Settings, flag
from .sources.commands import DEFAULT_MAX_OUTPUT, CommandRunner

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .sources.model import KstatSource

# Start-up is imports (docs/performance.md): what only some runs need (the FreeBSD source, the web
# config's parser, replay and capture) is imported where those runs begin, not here.

DEFAULT_LISTEN = ":9923"
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,  # --log.level's choices
              "warning": logging.WARNING, "error": logging.ERROR}


class ServerSettings(Settings):
    """Where and how /metrics is served."""

    listen_address: str = flag("--web.listen-address", default=DEFAULT_LISTEN,
                               help=f"address to listen on (default {DEFAULT_LISTEN})")
    telemetry_path: str = flag("--web.telemetry-path", default="/metrics")
    web_config_file: str | None = flag("--web.config.file", help="exporter-toolkit web config YAML: TLS and basic auth")


class KstatSettings(Settings):
    """Where kstats come from."""

    source: str = flag("--kstat.source", dest="kstat_source", choices=("auto", "procfs", "sysctl"), default="auto",
                       help="where kstats come from: procfs (Linux), sysctl (FreeBSD); auto picks by platform")
    sysctl_file: str | None = flag("--path.sysctl-file", dest="sysctl_file",
                                   help="read FreeBSD sysctl output from this file instead of running sysctl (tests)")

    def kind(self) -> str:
        """procfs or sysctl: `auto` decided by the platform (os.uname() is what platform.system()
        reads, without importing platform)."""
        if self.source != "auto":
            return self.source
        return "sysctl" if self.sysctl_file or os.uname().sysname == "FreeBSD" else "procfs"


class CommandSettings(Settings):
    """How zfs, zpool and sysctl are run (one `CommandRunner` shared by every collector)."""

    prefix: str = flag("--zfs.command-prefix", dest="command_prefix", default="",
                       help="prefix for zfs/zpool/sysctl commands, e.g. 'nsenter --target 1 --mount --' in a container")
    timeout: float = flag("--zfs.command-timeout", dest="command_timeout", type=float, default=30.0,
                          help="seconds before a zfs/zpool/sysctl command is killed (default 30)")
    max_output: int = flag("--zfs.command-max-output", dest="command_max_output", type=int, default=DEFAULT_MAX_OUTPUT,
                           help="bytes of output read from one zfs/zpool/sysctl command before it is killed and its "
                                f"source fails (default {DEFAULT_MAX_OUTPUT}, about 60,000 datasets in zfs list; "
                                "the snapshot listing is streamed and not limited)")

    def runner(self) -> CommandRunner:
        return CommandRunner(self.prefix, self.timeout, self.max_output)


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
    stdout = sys.__stdout__  # None without a standard output at all
    if columns <= 0 and stdout is not None:
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zfsnas-exporter", formatter_class=_HelpFormatter,
                                     description="Prometheus exporter for ZFS: ARC/L2ARC, txgs and dirty data, "
                                                 "datasets, pools and disks.")
    parser.add_argument("--version", action="version", version=f"zfsnas-exporter {__version__}")
    for settings in (ServerSettings, Paths, KstatSettings, CommandSettings):
        settings.add_arguments(parser)
    parser.add_argument("--collector.disable-defaults", dest="disable_defaults", action="store_true",
                        help="enable only collectors named with --collector.<name>")
    shared: set[type[Settings]] = set()
    for cls in ALL:
        parser.add_argument(f"--collector.{cls.name}", dest=f"collector_{cls.name}",
                            action=argparse.BooleanOptionalAction, default=None,
                            help=f"{cls.description} (default {'on' if cls.default_enabled else 'off'})")
        for uses in cls.shared_settings:  # a filter several collectors read: declared at the first
            if uses not in shared:
                shared.add(uses)
                uses.add_arguments(parser)
        cls.settings_type.add_arguments(parser)
    parser.add_argument("--log.level", dest="log_level", default="info", choices=tuple(LOG_LEVELS))
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


class ExporterConfig:
    """The parsed flags as typed settings: the exporter's own, the shared filters, which collectors
    run and each one's settings. Built from a parser's Namespace once (`from_args`: a flag the
    parser lacks fails there, at start-up); replay and capture change attributes, not names."""

    def __init__(self, server: ServerSettings, paths: Paths, kstat: KstatSettings, commands: CommandSettings,
                 pool_filter: PoolFilter, device_filter: DeviceFilter, enabled: list[type[Collector]],
                 collector_settings: dict[type[Collector], Settings]):
        self.server = server
        self.paths = paths
        self.kstat = kstat
        self.commands = commands
        self.pool_filter = pool_filter
        self.device_filter = device_filter
        self.enabled = enabled
        self.collector_settings = collector_settings

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExporterConfig:
        return cls.from_values(vars(args), enabled_collectors(args))

    @classmethod
    def from_values(cls, values: dict[str, Any], enabled: list[type[Collector]]) -> ExporterConfig:
        """From every flag's destination (parsed flags; replay lays a capture's manifest over a
        whole config's `values()`, so a flag an older capture lacks keeps its value there)."""
        return cls(ServerSettings.from_values(values), Paths.from_values(values), KstatSettings.from_values(values),
                   CommandSettings.from_values(values), PoolFilter.from_values(values),
                   DeviceFilter.from_values(values), enabled, {c: c.settings_type.from_values(values) for c in ALL})

    def values(self) -> dict[str, Any]:
        """Every setting by its flag's destination (what a capture's manifest records)."""
        out: dict[str, Any] = {}
        for settings in (self.server, self.paths, self.kstat, self.commands, self.pool_filter, self.device_filter,
                         *self.collector_settings.values()):
            out.update(settings.values())
        return out

    def context(self, kstat: KstatSource, commands: CommandRunner, **shared: Any) -> Context:
        """The context collectors of these settings share (`shared`: what the collectors' `offer` would put there)."""
        return Context(kstat=kstat, commands=commands, paths=self.paths, pool_filter=self.pool_filter,
                       device_filter=self.device_filter, command_timeout=self.commands.timeout, **shared)

    def settings_of(self, cls: type[Collector]) -> Settings:
        return self.collector_settings.get(cls) or cls.settings_type()

    def kstat_source(self, runner: CommandRunner) -> KstatSource:
        if self.kstat.kind() == "sysctl":
            from .sources.freebsd import SysctlKstatSource

            return SysctlKstatSource(runner, path=self.kstat.sysctl_file)
        from .sources.linux import ProcfsKstatSource

        return ProcfsKstatSource(self.paths.procfs, self.paths.sysfs)


def enabled_collectors(args: argparse.Namespace) -> list[type[Collector]]:
    chosen = []
    for cls in ALL:
        switch = getattr(args, f"collector_{cls.name}")  # the switches' names are made from ALL, as above
        default = cls.default_enabled and not args.disable_defaults
        if (default if switch is None else switch):
            chosen.append(cls)
    return chosen


class Exporter:
    """`render_parts` is what the server serves (the page as its pieces); `render` joins them into
    one text (capture, replay, tests); `registry` offers the same families to prometheus_client users.
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
        if self._holding:  # the first scrape: held refreshes run now, and that scrape waits for them
            self._holding = False
            START.release()
        return self.scrape.render_parts(process_families() if self.process_metrics else (),
                                        deadline, deliver)

    def hold_refreshes(self, seconds: float) -> None:
        """Start-up: the zfs/zpool refreshes start when the first scrape comes, or after `seconds`
        (`refresh.START`): the imports, the bind and the in-process reads have the CPU to themselves."""
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
        self.scrape.await_first_reads()

    def stop(self) -> None:
        """Stop every collector's threads; the runner is closed first so that a hung command is killed
        at once rather than waited for, and a collector that stops early cannot close it for the others.
        Every source is told to stop before that: the commands the close kills are then no failure to
        log (seen under systemd: `zpool events` and `zfs list` "failed" at every stop)."""
        for collector in self.collectors:
            for source in collector.sources():
                source.request_stop()
        runner, self.owned_runner = self.owned_runner, None
        if runner is not None:
            runner.close()
        for collector in self.collectors:
            collector.stop()


def build_exporter(config: ExporterConfig | argparse.Namespace, process_metrics: bool = True,
                   runner: CommandRunner | None = None) -> Exporter:
    """`runner` replaces the command runner (capture records through it, replay answers from it);
    its caller then owns it. Otherwise the exporter creates one and closes it in `stop`."""
    if isinstance(config, argparse.Namespace):
        config = ExporterConfig.from_args(config)
    owned = None
    if runner is None:
        runner = owned = config.commands.runner()
    kstat = config.kstat_source(runner)
    ctx = config.context(kstat, runner)
    collectors = [cls(ctx, config.settings_of(cls)) for cls in config.enabled]
    for collector in collectors:
        collector.offer(ctx)  # what one collector shares with the others (Collector.offer)
    scrape = ScrapeCollector(collectors, kstat)
    for collector in collectors:
        if collector.needs_zfs:  # their sources' failures while ZFS is missing are said by the scrape
            for source in collector.sources():
                source.explained_while = scrape.zfs_said_missing
    return Exporter(collectors, scrape, process_metrics, owned)


def default_config(argv: list[str] | None = None) -> ExporterConfig:
    """The settings of `zfsnas-exporter [argv]` (none: every default), for tests and embedding."""
    return ExporterConfig.from_args(build_parser().parse_args(argv or []))
