"""`zfsnas-exporter`: the daemon's entry point: parse the flags (`wiring.build_parser`), say the
one start-up line, serve (`server`) until SIGTERM/SIGINT, stop. `capture` and `--replay` start here
too; the wiring itself (settings, collectors, the `Exporter`) is `wiring.py`'s."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import __version__
from .server import describe_listener, make_server, serve_in_thread, systemd_socket
from .wiring import LOG_LEVELS, Exporter, ExporterConfig, build_exporter, build_parser

if TYPE_CHECKING:
    from typing import TextIO

    from .replay import ReplayExporter
    from .sources.commands import CommandRunner
    from .webconfig import WebConfig, WebConfigFile

# Start-up is imports (docs/performance.md): what only some runs need (the FreeBSD source, the web
# config's parser, replay and capture) is imported where those runs begin, not here.

log = logging.getLogger("zfsnas")
START_HOLD = 1.0  # seconds zfs/zpool refreshes wait at start-up for the first scrape to be answered


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


# syslog priorities of the logging levels: journald files each line under the one it begins with
PRIORITIES = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


class JournalFormatter(logging.Formatter):
    """`<priority>message`: journald takes the priority from the prefix (and stamps the time itself),
    so `journalctl -p warning -u zfsnas-exporter` shows the warnings and only them."""

    def format(self, record: logging.LogRecord) -> str:
        return f"<{PRIORITIES.get(record.levelno, 6)}>{record.getMessage()}"


def to_journal(stream: TextIO) -> bool:
    """Whether `stream` is journald's (systemd sets JOURNAL_STREAM to its device:inode)."""
    device, _, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return device.isdigit() and inode.isdigit() and (st.st_dev, st.st_ino) == (int(device), int(inode))


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JournalFormatter() if to_journal(sys.stderr)
                         else logging.Formatter("%(asctime)s level=%(levelname)s %(message)s"))
    logging.basicConfig(level=LOG_LEVELS[level], handlers=[handler])


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
    config = ExporterConfig.from_args(args)
    setup_logging(args.log_level)
    web: WebConfigFile | None = None
    if config.server.web_config_file:
        from .webconfig import WebConfigError, WebConfigFile

        try:
            web = WebConfigFile(config.server.web_config_file, on_change=web_config_changed)
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
            exporter = replay.ReplayExporter(capture, config, loop=args.replay_loop)
        except replay.CaptureError as exc:
            log.error("cannot replay: %s", exc)
            return 2
        log.info("replaying %s: %s", args.replay, replay.describe(capture))
        level, line = logging.INFO, (f"zfsnas-exporter {__version__}: collectors "
                                     f"{', '.join(c.name for c in exporter.collectors) or 'none'}")
    else:
        exporter = build_exporter(config)
        assert exporter.owned_runner is not None
        level, line = startup_line(exporter, exporter.owned_runner)
        exporter.hold_refreshes(START_HOLD)
    render = exporter.render_parts if isinstance(exporter, Exporter) else exporter.render
    where = config.server.listen_address
    try:
        listener = systemd_socket()
        where = "systemd's socket" if listener is not None else where
        server = make_server(listener or config.server.listen_address, render, config.server.telemetry_path, web)
    except (OSError, ValueError) as exc:
        log.log(level, "%s", line)
        log.error("cannot listen on %s: %s", where, exc)
        return 2
    # the one line of a start: what is served, and where (systemd's socket: `deploy/zfsnas-exporter.socket`);
    # before the collectors start, so that it opens the log
    log.log(level, "%s; listening on %s%s%s%s", line, "https://" if web and web.config.tls else "http://",
            describe_listener(server), config.server.telemetry_path,
            " (systemd's socket)" if listener is not None else "")
    exporter.start()
    # Long-lived objects made so far never become garbage: keep the collector from rescanning them.
    gc.freeze()
    stop_signals = catch_stop_signals()
    serve_in_thread(server)
    os.read(stop_signals, 1)
    log.info("shutting down")
    server.shutdown()
    exporter.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
