"""Reads OpenZFS kstats and module parameters from Linux procfs and sysfs.

Owns the paths under `<procfs>/spl/kstat/zfs` and `<sysfs>/module/zfs`; parsing is left to
`kstat.py`. A missing file becomes a `SourceError` naming the path, never a crash.
Files that stay the same between scrapes (an idle dataset's objset rows, synced txg rows) are not
parsed again: the parse of the last read is kept, for the files of that read only, and used only
when the rows are the same text.
"""

from __future__ import annotations

import os

from .kstat import (
    KstatPath,
    NamedKstat,
    Txg,
    named_kstat_body,
    named_kstat_rows,
    parse_io_kstat,
    parse_named_body,
    parse_named_kstat,
    parse_txgs,
)
from .model import MAX_FILE_BYTES, Objset, SourceError, read_bounded, read_bounded_bytes


class ProcfsKstatSource:
    kind = "procfs"

    def __init__(self, procfs: str = "/proc", sysfs: str = "/sys"):
        # Paths are strings, joined as strings: a Path join per file costs about as much as reading
        # the file, and pathlib itself (with urllib.parse) a few milliseconds of every start.
        self._kstat = os.path.join(procfs, "spl", "kstat", "zfs")
        self._module = os.path.join(sysfs, "module", "zfs")
        self._params = f"{self._module}/parameters/"  # + a parameter's name
        self._txg_rows: dict[str, dict[str, Txg]] = {}  # pool -> its last txgs read, row text -> Txg
        self._objsets: dict[str, dict[str, tuple[bytes, Objset]]] = {}  # pool -> file name -> (rows, Objset)
        # Pools without an `io` kstat (removed in OpenZFS 2.1): not looked for again while the pool is
        # listed and the module loaded (a kstat is made when its pool is imported, never later).
        self._no_io: set[str] = set()

    def refresh(self) -> None:
        pass

    def _read(self, path: str, pool: str | None = None) -> str:
        try:
            return read_bounded(path)
        except FileNotFoundError:
            self._check_pool(pool)
            raise SourceError(f"{path} does not exist") from None
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror or exc}") from None

    def _optional(self, path: str, pool: str | None = None) -> str | None:
        """The file's text, or None where this OpenZFS version does not have it."""
        try:
            return read_bounded(path)
        except FileNotFoundError:
            self._check_pool(pool)
            return None
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror or exc}") from None

    def _check_pool(self, pool: str | None) -> None:
        """A pool file that is missing because the whole pool is gone says so (checked only then:
        a stat per file read would cost more than the reads of an unchanged file)."""
        if pool is not None and not os.path.isdir(self._pool_dir(pool)):
            raise SourceError(f"pool {pool!r} vanished: {self._pool_dir(pool)} does not exist")

    def _pool_dir(self, pool: str) -> str:
        return f"{self._kstat}/{pool}"

    def zfs_loaded(self) -> bool:
        loaded = os.path.isdir(self._kstat)
        if not loaded:   # another module may come: nothing known of the pools holds
            self._no_io.clear()
        return loaded

    def named(self, kstat: KstatPath, pool: str | None = None) -> NamedKstat:
        """The named kstat (of `pool`, for a pool's); a missing file is a SourceError."""
        path = f"{self._kstat}/{kstat.procfs_of(pool)}"
        return parse_named_kstat(self._read(path, pool), path)

    def optional_named(self, kstat: KstatPath, pool: str | None = None) -> NamedKstat | None:
        """The named kstat, or None where this OpenZFS version does not publish it."""
        path = f"{self._kstat}/{kstat.procfs_of(pool)}"
        text = self._optional(path, pool)
        if text is None:
            return None
        if kstat.blank_is_empty and not text.strip():
            return NamedKstat({}, {})
        return parse_named_kstat(text, path)

    def pools(self) -> list[str]:
        try:
            entries = os.scandir(self._kstat)
        except OSError as exc:
            raise SourceError(f"{self._kstat}: {exc.strerror or exc}") from None
        with entries:
            pools = sorted(entry.name for entry in entries if entry.is_dir())
        for memo in (self._txg_rows, self._objsets):
            for gone in memo.keys() - set(pools):
                del memo[gone]
        self._no_io &= set(pools)
        return pools

    def txgs(self, pool: str) -> list[Txg]:
        path = f"{self._kstat}/{pool}/txgs"
        return parse_txgs(self._read(path, pool), path, self._txg_rows.setdefault(pool, {}))

    def pool_state(self, pool: str) -> str:
        path = f"{self._kstat}/{pool}/state"
        state = self._read(path, pool).strip()
        if not state or not state.isalpha():
            raise SourceError(f"{path}: unexpected content {state[:40]!r}")
        return state

    def pool_io(self, pool: str) -> dict[str, int] | None:
        if pool in self._no_io:
            return None
        path = f"{self._kstat}/{pool}/io"
        text = self._optional(path, pool)
        if text is None:
            self._no_io.add(pool)
            return None
        return parse_io_kstat(text, path)

    def objsets(self, pool: str) -> list[Objset]:
        pool_dir = self._pool_dir(pool)
        try:
            names = sorted(name for name in os.listdir(pool_dir) if name.startswith("objset-0x"))
        except OSError as exc:
            raise SourceError(f"pool {pool!r} vanished: {exc.strerror or exc}") from None
        known = self._objsets.get(pool, {})
        seen: dict[str, tuple[bytes, Objset]] = {}
        objsets = []
        for name in names:
            path = f"{pool_dir}/{name}"
            data = self._objset_bytes(path, pool)
            if data is None:  # the dataset was unmounted between listing and reading
                continue
            rows = named_kstat_rows(data)
            last = known.get(name)
            if rows is not None and last is not None and last[0] == rows:
                objset = last[1]
            else:
                text = data.decode("utf-8", "surrogateescape")
                named = parse_named_body(named_kstat_body(text, path), text, path)
                dataset = named.strings.get("dataset_name")
                if not dataset:
                    raise SourceError(f"{path}: no dataset_name")
                objset = Objset(name[7:], dataset, named.values)
            if rows is not None:
                seen[name] = (rows, objset)
            objsets.append(objset)
        self._objsets[pool] = seen
        return objsets

    def _objset_bytes(self, path: str, pool: str) -> bytes | None:
        """`_optional` for the objset files, thousands of which a big NAS's scrape reads: the same
        size bound and errors, the bytes decoded only when parsed."""
        try:
            # MAX_FILE_BYTES looked up at every call: a test lowers it in this module
            return read_bounded_bytes(path, MAX_FILE_BYTES)
        except FileNotFoundError:
            self._check_pool(pool)
            return None
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror or exc}") from None

    def tunables(self) -> dict[str, str]:
        try:
            names = sorted(os.listdir(self._params))
        except (FileNotFoundError, NotADirectoryError):
            raise SourceError(f"{self._module}/parameters does not exist") from None
        except OSError as exc:
            raise SourceError(f"{self._module}/parameters: {exc.strerror or exc}") from None
        values = {}
        for name in names:
            try:
                values[name] = read_bounded(self._params + name, 65536).strip()
            except (OSError, SourceError):  # write-only or vanished parameter: nothing to report
                continue
        return values

    def version(self) -> str | None:
        text = self._optional(f"{self._module}/version")
        return None if text is None else text.strip() or None

    def _int_param(self, name: str) -> int | None:
        text = self._optional(self._params + name)
        if text is None:
            return None
        try:
            return int(text.strip())
        except ValueError:
            raise SourceError(f"module parameter {name} is not an integer: {text.strip()[:40]!r}") from None

    def dirty_data_max(self) -> int | None:
        return self._int_param("zfs_dirty_data_max")

    def delay_min_dirty_percent(self) -> int | None:
        return self._int_param("zfs_delay_min_dirty_percent")

