"""Reads OpenZFS kstats and module parameters from Linux procfs and sysfs.

Owns the paths under `<procfs>/spl/kstat/zfs` and `<sysfs>/module/zfs`; parsing is left to
`kstat.py`. A missing file becomes a `SourceError` naming the path, never a crash.
"""

from __future__ import annotations

import os
from pathlib import Path

from .kstat import NamedKstat, Txg, parse_io_kstat, parse_named_kstat, parse_txgs
from .model import Objset, SourceError, read_bounded


class ProcfsKstatSource:
    kind = "procfs"

    def __init__(self, procfs: str = "/proc", sysfs: str = "/sys"):
        self.kstat_dir = Path(procfs) / "spl" / "kstat" / "zfs"
        self.module_dir = Path(sysfs) / "module" / "zfs"

    def refresh(self) -> None:
        pass

    def _read(self, path: Path) -> str:
        try:
            return read_bounded(path)
        except FileNotFoundError:
            raise SourceError(f"{path} does not exist") from None
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror or exc}") from None

    def _optional(self, path: Path) -> str | None:
        """The file's text, or None where this OpenZFS version does not have it."""
        try:
            return read_bounded(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror or exc}") from None

    def _pool_dir(self, pool: str) -> Path:
        path = self.kstat_dir / pool
        if not path.is_dir():
            raise SourceError(f"pool {pool!r} vanished: {path} does not exist")
        return path

    def zfs_loaded(self) -> bool:
        return self.kstat_dir.is_dir()

    def arcstats(self) -> NamedKstat:
        path = self.kstat_dir / "arcstats"
        return parse_named_kstat(self._read(path), str(path))

    def dmu_tx(self) -> NamedKstat:
        path = self.kstat_dir / "dmu_tx"
        return parse_named_kstat(self._read(path), str(path))

    def pools(self) -> list[str]:
        try:
            entries = os.scandir(self.kstat_dir)
        except OSError as exc:
            raise SourceError(f"{self.kstat_dir}: {exc.strerror or exc}") from None
        with entries:
            return sorted(entry.name for entry in entries if entry.is_dir())

    def txgs(self, pool: str) -> list[Txg]:
        path = self._pool_dir(pool) / "txgs"
        return parse_txgs(self._read(path), str(path))

    def tx_assign(self, pool: str) -> NamedKstat | None:
        path = self._pool_dir(pool) / "dmu_tx_assign"
        text = self._optional(path)
        if text is not None and not text.strip():
            # Seen live (OpenZFS 2.3.2, a pool with no tx assignment yet recorded): with every
            # bucket empty the kstat holds no rows and the file reads as nothing at all.
            return NamedKstat({}, {})
        return None if text is None else parse_named_kstat(text, str(path))

    def pool_state(self, pool: str) -> str:
        path = self._pool_dir(pool) / "state"
        state = self._read(path).strip()
        if not state or not state.isalpha():
            raise SourceError(f"{path}: unexpected content {state[:40]!r}")
        return state

    def pool_iostats(self, pool: str) -> NamedKstat | None:
        path = self._pool_dir(pool) / "iostats"
        text = self._optional(path)
        return None if text is None else parse_named_kstat(text, str(path))

    def pool_io(self, pool: str) -> dict[str, int] | None:
        path = self._pool_dir(pool) / "io"
        text = self._optional(path)
        return None if text is None else parse_io_kstat(text, str(path))

    def objsets(self, pool: str) -> list[Objset]:
        pool_dir = self._pool_dir(pool)
        try:
            names = sorted(name for name in os.listdir(pool_dir) if name.startswith("objset-0x"))
        except OSError as exc:
            raise SourceError(f"pool {pool!r} vanished: {exc.strerror or exc}") from None
        objsets = []
        for name in names:
            path = pool_dir / name
            text = self._optional(path)
            if text is None:  # the dataset was unmounted between listing and reading
                continue
            named = parse_named_kstat(text, str(path))
            dataset = named.strings.get("dataset_name")
            if not dataset:
                raise SourceError(f"{path}: no dataset_name")
            objsets.append(Objset(name[7:], dataset, named.values))
        return objsets

    def tunables(self) -> dict[str, str]:
        params = self.module_dir / "parameters"
        if not params.is_dir():
            raise SourceError(f"{params} does not exist")
        values = {}
        for path in sorted(params.iterdir()):
            try:
                values[path.name] = read_bounded(path, 65536).strip()
            except (OSError, SourceError):  # write-only or vanished parameter: nothing to report
                continue
        return values

    def version(self) -> str | None:
        text = self._optional(self.module_dir / "version")
        return None if text is None else text.strip() or None

    def _int_param(self, name: str) -> int | None:
        text = self._optional(self.module_dir / "parameters" / name)
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
