"""Reads OpenZFS kstats and tunables on FreeBSD / TrueNAS CORE from `sysctl` output.

FreeBSD publishes kstats as sysctls: `kstat.zfs.misc.arcstats.<field>`,
`kstat.zfs.<pool>.misc.state`, `kstat.zfs.<pool>.dataset.objset-0x<id>.<field>`, and the raw
kstats (`txgs`, `state`) as multi-line strings that a plain listing skips, so they are asked for
by name. Tunables are `vfs.zfs.*`. For tests, the whole output can come from a file.
"""

from __future__ import annotations

import re

from .commands import DEFAULT_MAX_OUTPUT, CommandRunner
from .kstat import IO_COLUMNS, KstatFormatError, KstatPath, NamedKstat, Txg, parse_txgs
from .model import Objset, SourceError, read_bounded

_ENTRY = re.compile(r"^(?P<name>(?:kstat|vfs)\.[^:]+):(?: (?P<value>.*))?$")


def parse_sysctl(text: str) -> dict[str, str]:
    """Map sysctl names to values; lines that do not start a new name continue the last value."""
    values: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = _ENTRY.match(line)
        if match:
            current = match["name"]
            values[current] = match["value"] or ""
        elif current is not None:
            values[current] += "\n" + line
        elif line.strip():
            raise KstatFormatError(f"sysctl output starts with {line[:60]!r}, not a name")
    return values


def _named(values: dict[str, str], prefix: str) -> NamedKstat | None:
    """The leaves below `prefix.` as a named kstat (sysctl carries no type codes: numbers or text)."""
    rows = {name[len(prefix) + 1:]: value for name, value in values.items() if name.startswith(prefix + ".")}
    if not rows:
        return None
    numbers, strings = {}, {}
    for field, value in rows.items():
        try:
            numbers[field] = int(value)
        except ValueError:
            strings[field] = value
    return NamedKstat(numbers, strings)


class SysctlKstatSource:
    kind = "sysctl"

    def __init__(self, runner: CommandRunner | None = None, path: str | None = None,
                 sysctl: str = "sysctl"):
        self._runner = runner or CommandRunner()
        self._path = path
        self._sysctl = sysctl
        self._values: dict[str, str] | None = None
        self._txg_rows: dict[str, dict[str, Txg]] = {}  # pool -> its txgs rows read, row text -> Txg (kstat.parse_txgs)

    def refresh(self) -> None:
        """Replace the snapshot at once: a background reader never sees half of one."""
        if self._path is not None:
            try:
                self._values = parse_sysctl(read_bounded(self._path, DEFAULT_MAX_OUTPUT))
            except OSError as exc:
                self._values = {}
                raise SourceError(f"{self._path}: {exc.strerror or exc}") from None
            return
        values = parse_sysctl(self._runner.run([self._sysctl, "kstat.zfs", "vfs.zfs"]))
        raw = [f"kstat.zfs.{pool}.misc.{name}" for pool in _pool_names(values) for name in ("txgs", "state")]
        if raw:  # -i: a pool exported since the listing is skipped, not an error
            values.update(parse_sysctl(self._runner.run([self._sysctl, "-i", *raw])))
        self._values = values

    @property
    def values(self) -> dict[str, str]:
        if self._values is None:
            self.refresh()
        assert self._values is not None
        return self._values

    def _get(self, name: str) -> str:
        try:
            return self.values[name]
        except KeyError:
            raise SourceError(f"sysctl {name} is missing") from None

    def named(self, kstat: KstatPath, pool: str | None = None) -> NamedKstat:
        """The named kstat (of `pool`, for a pool's); none of its sysctls is a SourceError."""
        prefix = kstat.sysctl_of(pool)
        named = _named(self.values, prefix)
        if named is None:
            raise SourceError(f"sysctl {prefix} is missing")
        return named

    def optional_named(self, kstat: KstatPath, pool: str | None = None) -> NamedKstat | None:
        """The named kstat, or None where this OpenZFS version does not publish it."""
        return _named(self.values, kstat.sysctl_of(pool))

    def zfs_loaded(self) -> bool:
        return any(name.startswith("kstat.zfs.") for name in self.values)

    def pools(self) -> list[str]:
        pools = _pool_names(self.values)
        for gone in self._txg_rows.keys() - set(pools):
            del self._txg_rows[gone]
        return pools

    def _check_pool(self, pool: str) -> None:
        if pool not in _pool_names(self.values):
            raise SourceError(f"pool {pool!r} vanished: no kstat.zfs.{pool} sysctls")

    def txgs(self, pool: str) -> list[Txg]:
        self._check_pool(pool)
        name = f"kstat.zfs.{pool}.misc.txgs"
        return parse_txgs(self._get(name), name, self._txg_rows.setdefault(pool, {}))

    def pool_state(self, pool: str) -> str:
        self._check_pool(pool)
        state = self._get(f"kstat.zfs.{pool}.misc.state").strip()
        if not state.isalpha():
            raise SourceError(f"kstat.zfs.{pool}.misc.state: unexpected content {state[:40]!r}")
        return state

    def pool_io(self, pool: str) -> dict[str, int] | None:
        text = self.values.get(f"kstat.zfs.{pool}.misc.io")
        if text is None:
            return None
        parts = text.split()
        if len(parts) != len(IO_COLUMNS) or not all(p.isdigit() for p in parts):
            raise KstatFormatError(f"kstat.zfs.{pool}.misc.io: expected {len(IO_COLUMNS)} numbers")
        return dict(zip(IO_COLUMNS, map(int, parts)))

    def objsets(self, pool: str) -> list[Objset]:
        self._check_pool(pool)
        prefix = f"kstat.zfs.{pool}.dataset."
        ids = sorted({name[len(prefix):].split(".", 1)[0] for name in self.values if name.startswith(prefix)})
        objsets = []
        for objset in ids:
            named = _named(self.values, prefix + objset)
            if named is None or not named.strings.get("dataset_name"):
                raise SourceError(f"{prefix}{objset}: no dataset_name")
            objsets.append(Objset(objset.removeprefix("objset-"), named.strings["dataset_name"], named.values))
        return objsets

    def tunables(self) -> dict[str, str]:
        tunables = {name.removeprefix("vfs.zfs."): value for name, value in self.values.items()
                    if name.startswith("vfs.zfs.")}
        if not tunables:
            raise SourceError("no vfs.zfs sysctls")
        return tunables

    def version(self) -> str | None:
        return self.values.get("vfs.zfs.version.module")

    def _int(self, name: str) -> int | None:
        text = self.values.get(name)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise SourceError(f"sysctl {name} is not an integer: {text[:40]!r}") from None

    def dirty_data_max(self) -> int | None:
        return self._int("vfs.zfs.dirty_data_max")

    def delay_min_dirty_percent(self) -> int | None:
        return self._int("vfs.zfs.delay_min_dirty_percent")


def _pool_names(values: dict[str, str]) -> list[str]:
    pools = {name.split(".")[2] for name in values if name.startswith("kstat.zfs.") and name.count(".") >= 3}
    pools.discard("misc")
    return sorted(pools)

