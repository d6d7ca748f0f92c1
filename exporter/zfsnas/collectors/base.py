"""The collector contract: what every collector is, is given and returns.

Owns `Collector` (a name that `--collector.<name>` switches, its typed `settings` (a
`settings.Settings` class declaring its own flags: defaults stated once, and named once, as the
collector's type parameter: `class TunablesCollector(RefreshingCollector[TunablesSettings])`), `setup`
(what it makes once from its context and settings), `offer` (what it shares with the others) and
`collect`, which returns `exposition.Family` objects: our families, rendered by `exposition.render`,
are the whole output contract), `RefreshingCollector` (a collector whose values come from background
`refresh.BackgroundRefresher`s, made with `add_refresher`), `Context` (what collectors are given, as
typed fields: the kstat source, the shared command runner, the host's paths, the shared pool and
device filters, and what collectors offer each other: the `pools` collector's `zpool status` and the
`disks` collector's disk identities, each put there by its collector's `offer`) and `Report` (how a
collector says what failed without stopping: any failure means `zfs_exporter_collector_success 0`
for it, and the rest is still served).
A collector does no I/O of its own beyond its sources and never closes what it did not create.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from ..exposition import Family
from ..refresh import BackgroundRefresher
from ..settings import NoSettings, Settings, flag
from ..sources.model import Explained
from .filters import DeviceFilter, PoolFilter

if TYPE_CHECKING:
    from ..refresh import Source
    from ..sources.blockdevices import DiskIdentity
    from ..sources.commands import CommandRunner
    from ..sources.model import KstatSource, VdevStatus
    from ..sources.zpool import ZpoolStatus

log = logging.getLogger("zfsnas")
T = TypeVar("T")
S = TypeVar("S", bound=Settings)  # a collector's settings class


class Paths(Settings):
    """Where the host's trees are read (`--path.*`): tests and replays point them at copies."""

    procfs: str = flag("--path.procfs", default="/proc", dest="procfs")
    sysfs: str = flag("--path.sysfs", default="/sys", dest="sysfs")
    udev_data: str = flag("--path.udev.data", default="/run/udev/data", dest="udev_data")


class Context:
    """What collectors are given, every field typed: the kstat source, the command runner (shared by
    every collector: it runs one zfs/zpool command at a time and is closed by the exporter at
    shutdown, never by a collector), the host's paths, the filters several collectors share, and
    what one collector offers others (put there by that collector's `offer`, None when it is
    off). (A plain class, not a dataclass: making a dataclass costs about half a millisecond of
    every start, and this one needs nothing of it.)"""

    def __init__(self, kstat: KstatSource, commands: CommandRunner, paths: Paths | None = None,
                 pool_filter: PoolFilter | None = None, device_filter: DeviceFilter | None = None,
                 zpool_status: BackgroundRefresher[ZpoolStatus] | None = None,
                 disk_identities: Callable[[float], list[DiskIdentity]] | None = None, command_timeout: float = 30.0):
        self.kstat = kstat
        self.commands = commands
        self.command_timeout = command_timeout  # seconds a command, or the parse of its output, may take
        self.paths = paths or Paths()
        self.pool_filter = pool_filter or PoolFilter()
        self.device_filter = device_filter or DeviceFilter()
        # The `pools` collector's `zpool status` source: read through `vdevs()` by `disks` (pool
        # membership by vdev guid) and `vdevlatency` (pool names).
        self.zpool_status = zpool_status
        # The `disks` collector's identities (its `current_identities`): `smart` reads these disks
        # and labels them as `zfs_disk_info` does.
        self.disk_identities = disk_identities
        self._scrape_pools: list[str] | None = None  # during a scrape: its pool list, once listed
        self._scrape_states: dict[str, str] = {}     # during a scrape: each pool's state, once read
        self._in_scrape = False

    @contextmanager
    def scrape(self) -> Iterator[None]:
        """One scrape of every collector: `pools()` lists the pools once for all of them (three
        collectors read per-pool kstats), not once each, and `pool_state()` reads each pool's state once."""
        self._in_scrape, self._scrape_pools, self._scrape_states = True, None, {}
        try:
            yield
        finally:
            self._in_scrape, self._scrape_pools, self._scrape_states = False, None, {}

    def pools(self) -> list[str]:
        """The pools with kstats: listed once per scrape inside `scrape()`, on every call outside it."""
        if not self._in_scrape:
            return self.kstat.pools()
        if self._scrape_pools is None:
            self._scrape_pools = self.kstat.pools()
        return list(self._scrape_pools)

    def pool_state(self, pool: str) -> str:
        """The pool's state kstat in upper case (`ONLINE`), read once per scrape inside `scrape()`
        (`pools` follows it for fresh health, `poolstats` serves it): one small read per pool. A
        failed read raises to every caller (nothing is kept of it)."""
        if not self._in_scrape:
            return self.kstat.pool_state(pool).upper()
        state = self._scrape_states.get(pool)
        if state is None:
            state = self._scrape_states[pool] = self.kstat.pool_state(pool).upper()
        return state

    def vdevs(self) -> list[VdevStatus]:
        """Every vdev of the last good `zpool status`: [] without the `pools` collector or before its first read."""
        if self.zpool_status is None:
            return []
        return list(self.zpool_status.state().value or ())


class Report:
    """Collects a collector's failures during one scrape; any failure means success 0."""

    def __init__(self, collector: str):
        self.collector = collector
        self.errors: list[str] = []
        self.explained: set[str] = set()  # errors already said elsewhere: logged at debug only

    def guard(self, what: str) -> _Guard:
        """Run a block; an `Exception` raised in it becomes a recorded failure (`fail(what, exc)`) and
        the collector goes on after the block. Nothing is undone: what the block added to its families
        before it raised is served, so a block adds its samples once it has read what they need."""
        return _Guard(self, what)

    def fail(self, what: str, exc: BaseException | str, explained: bool = False) -> None:
        reason = exc[:MAX_REASON] if isinstance(exc, str) else one_line(exc)
        self.errors.append(f"{what}: {reason}")
        if explained or isinstance(exc, Explained):
            self.explained.add(self.errors[-1])
        if isinstance(exc, BaseException):
            log.debug("collector %s: %s", self.collector, what, exc_info=exc)

    @property
    def ok(self) -> bool:
        return not self.errors


class _Guard:
    """`Report.guard`'s context manager: a class rather than a generator, as a scrape enters a few
    dozen of them and a generator-based one costs three times as much."""

    __slots__ = ("report", "what")

    def __init__(self, report: Report, what: str):
        self.report, self.what = report, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if not isinstance(exc, Exception):  # no exception, or one that must stop us (KeyboardInterrupt)
            return False
        self.report.fail(self.what, exc)  # the exporter must outlive any bad input
        return True


MAX_REASON = 500  # characters of an error kept and logged: a runaway line of input stays out of memory and logs


def one_line(exc: BaseException) -> str:
    """An exception as one bounded line, for logs and `Report`."""
    text = str(exc)[:MAX_REASON * 4].strip().splitlines()
    return text[0][:MAX_REASON] if text else type(exc).__name__


class _CapLength(logging.Filter):
    """Every log line of the exporter is at most MAX_LOG_LINE characters, whatever it quotes."""

    MAX_LOG_LINE = 2000

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > self.MAX_LOG_LINE:
            record.msg, record.args = message[:self.MAX_LOG_LINE] + f"...[{len(message)} characters]", None
        return True


if not any(isinstance(f, _CapLength) for f in log.filters):
    log.addFilter(_CapLength())


class Collector(Generic[S]):
    """One named group of metric families, switched by `--collector.<name>`. Its settings class is
    its type parameter (`Collector[TunablesSettings]`; none: `NoSettings`): `settings_type` is
    read from it and `self.settings` is typed by it."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_enabled: ClassVar[bool] = True
    needs_zfs: ClassVar[bool] = True
    programs: ClassVar[tuple[str, ...]] = ()  # the commands it runs (`zfs`, `zpool`): without them it serves nothing
    # commands without which it serves nothing but needs no ZFS (smartctl): the start-up line says so,
    # with `missing_hint` (what to install), and the collector itself reports the failure after that
    # (smart: success 0 beside zfs_disk_smart_unavailable{reason}), logged at debug as already said
    optional_programs: ClassVar[tuple[str, ...]] = ()
    missing_hint: ClassVar[str] = ""
    # Its own flags (named `--<name>.<option>`): the class given as its type parameter, read from it
    # when the class is made (`__init_subclass__`); an instance is `self.settings`.
    settings_type: ClassVar[type[Settings]] = NoSettings
    # The filters it reads from `Context` that other collectors read too (declared once, in filters.py).
    shared_settings: ClassVar[tuple[type[Settings], ...]] = ()

    settings: S

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):  # `Collector[TunablesSettings]`, as written
            parameter = next(iter(getattr(base, "__args__", ())), None)
            if isinstance(parameter, type) and issubclass(parameter, Settings):
                cls.settings_type = parameter

    def __init__(self, ctx: Context, settings: S | None = None):
        """`settings` None: every flag at its default (tests, embedding). Then `setup()`."""
        if settings is not None and type(settings) is not self.settings_type:
            raise TypeError(f"collector {self.name} takes {self.settings_type.__name__}, "
                            f"not {type(settings).__name__}")
        self.ctx = ctx
        self.settings = cast(S, self.settings_type() if settings is None else settings)
        self.setup()

    def setup(self) -> None:
        """What the collector makes once, from `self.ctx` and `self.settings`: its refreshers
        (`add_refresher`), memos, compiled patterns. Nothing by default."""

    def offer(self, ctx: Context) -> None:
        """Put what this collector offers the others on the context they share (called once every
        collector is made; see `Context`'s fields). Nothing by default."""

    def collect(self, report: Report) -> Iterable[Family]:
        """This scrape's families (a `Families` builder can be returned as it is). No I/O of its own
        beyond the sources; a failure goes to `report` and the families read so far are still served."""
        raise NotImplementedError

    def list_pools(self, report: Report) -> list[str]:
        """The pools with kstats; a failure to list them is reported and means none."""
        with report.guard("listing pools"):
            return self.ctx.pools()
        return []

    def sources(self) -> Sequence[Source]:
        """Background sources whose age and success the exporter reports."""
        return ()

    def continue_from(self, earlier: Collector) -> None:
        """A replay's next snapshot: take over what `earlier` (this collector in the snapshot before)
        built across scrapes, as one live exporter would have kept it. Nothing by default."""

    def start(self) -> None:
        """Start background work (refresh threads, monitors)."""

    def stop(self) -> None:
        """Stop background work."""


class RefreshingCollector(Collector[S]):
    """A collector whose values all come from its `sources()` (BackgroundRefreshers), read with
    `current`: scrapes take the last good value and never wait for a refresh."""

    _started = False
    _refreshers: list[BackgroundRefresher] | None = None

    def add_refresher(self, name: str, read: Callable[[], T], interval: float,
                      wait_for_start: bool = False, min_gap: float = 0.0) -> BackgroundRefresher[T]:
        """A background source of this collector (`name` is its `zfs_exporter_source_*{source}`),
        refreshed every `interval` seconds and listed by `sources()`, in the order made."""
        made = BackgroundRefresher(name, read, interval, wait_for_start=wait_for_start, min_gap=min_gap)
        if self._refreshers is None:
            self._refreshers = []
        self._refreshers.append(made)
        return made

    def sources(self) -> Sequence[Source]:
        return tuple(self._refreshers or ())

    def start(self) -> None:
        self._started = True
        for source in self.sources():
            source.start()

    def stop(self) -> None:
        """Stop this collector's refresh threads. The shared command runner stays open for the other
        collectors: the exporter closes it (killing a hung command) once, at shutdown."""
        from ..refresh import stop_all

        stop_all(self.sources())

    def current(self, source: BackgroundRefresher[T], report: Report) -> T | None:
        """The source's last good value (None if none yet); a failed or pending refresh fails the
        report, unless what failed is absent from a replay's capture (`SourceState.absent`)."""
        state = source.state()
        if state.value is None and not state.success and not self._started:
            source.refresh_now()  # no refresh thread (tests, one-shot renders): read once, in line
            state = source.state()
        if not state.success and not state.absent:  # absent: a replay's capture lacks it (its source says so)
            report.fail(f"source {source.name}", state.error or "not read yet", state.explained)
        return state.value
