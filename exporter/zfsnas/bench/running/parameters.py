"""ZFS module parameters as a matrix axis: read, check, change and always restore them.

Owns the table of parameters a matrix may change (with each one's sane range), reading and
writing them (Linux: `<sysfs>/module/zfs/parameters/<name>`; FreeBSD: `sysctl vfs.zfs.<name>`),
and the restore discipline: the value in force is written to the store *before* a change, and
every change is undone after its cell, at the end of a run, on SIGINT/SIGTERM, and by
`zfsnas-bench restore` after a crash. It never changes a parameter that is not in the table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...store.configuration import IDENTITY_PARAMETERS
from .matrix import MatrixError, parse_size

if TYPE_CHECKING:
    from ...store.database import Store

log = logging.getLogger("zfsnas.bench")
MiB, GiB = 1 << 20, 1 << 30


class ParameterError(MatrixError):
    """A parameter change was refused: unknown name, out of range, or not allowed."""


@dataclass(frozen=True)
class Spec:
    kind: str                 # bytes, percent, count, seconds, bool
    low: int
    high: int | None          # None: bounded by RAM (bytes)
    freebsd: str              # the sysctl under vfs.zfs.
    ram_share: float = 0.0    # bytes: at most this share of RAM
    zero_ok: bool = False     # 0 means "the built-in default" (zfs_arc_max)


# Ranges are what a benchmark may sanely try, narrower than what the module accepts.
SPECS = {
    "zfs_dirty_data_max": Spec("bytes", 16 * MiB, None, "dirty_data_max", ram_share=0.5),
    "zfs_dirty_data_max_percent": Spec("percent", 1, 50, "dirty_data_max_percent"),
    "zfs_arc_max": Spec("bytes", 64 * MiB, None, "arc.max", ram_share=0.9, zero_ok=True),
    "zfs_arc_min": Spec("bytes", 32 * MiB, None, "arc.min", ram_share=0.5, zero_ok=True),
    "zfs_txg_timeout": Spec("seconds", 1, 60, "txg.timeout"),
    "zfs_vdev_async_write_max_active": Spec("count", 1, 1000, "vdev.async_write_max_active"),
    "zfs_vdev_async_write_min_active": Spec("count", 1, 1000, "vdev.async_write_min_active"),
    "zfs_delay_min_dirty_percent": Spec("percent", 1, 100, "delay_min_dirty_percent"),
    "zfs_prefetch_disable": Spec("bool", 0, 1, "prefetch.disable"),
}


def parameter_value(name: str, text: str, ram: int | None) -> int:
    """The number to write for `text` ("4G", "30"), checked against the parameter's range and RAM."""
    spec = SPECS.get(name)
    if spec is None:
        raise ParameterError(f"parameter {name}: not one zfsnas-bench may change (known: {', '.join(sorted(SPECS))})")
    try:
        value = parse_size(text) if spec.kind == "bytes" else int(text)
    except (MatrixError, ValueError):
        kind = "size" if spec.kind == "bytes" else "whole number"
        raise ParameterError(f"parameter {name}: {text!r} is not a {kind}") from None
    if value == 0 and spec.zero_ok:
        return 0
    if value < spec.low or (spec.high is not None and value > spec.high):
        high = spec.high if spec.high is not None else f"{spec.ram_share:.0%} of RAM"
        raise ParameterError(f"parameter {name}: {text} is outside the sane range {spec.low}..{high}")
    if spec.kind == "bytes":
        if not ram:
            raise ParameterError(f"parameter {name}: RAM size unknown, cannot check {text} against it: refused")
        if value > ram * spec.ram_share:
            raise ParameterError(f"parameter {name}: {text} is more than {spec.ram_share:.0%} of this host's "
                                 f"{ram / GiB:.1f} GiB of RAM: refused (at most {ram * spec.ram_share / GiB:.1f} GiB "
                                 "here: copy the matrix, lower the value in its [parameters] table and run the copy "
                                 "by its path; `zfsnas-bench plan COPY.toml` checks it first)")
    return value


class Parameters:
    """Read and write module parameters; the OS-specific part is `_read`/`_write`/`read_all`."""

    def read(self, name: str) -> str:
        raise NotImplementedError

    def write(self, name: str, value: str) -> None:
        raise NotImplementedError

    def read_all(self) -> dict[str, str]:
        raise NotImplementedError

    def shell(self, name: str, value: str) -> str:
        """The command a person would type to make the same change (for plan and --dry-run)."""
        raise NotImplementedError

    def ram(self) -> int | None:
        raise NotImplementedError

    def identity(self, extra: tuple[str, ...] = ()) -> dict[str, str]:
        """The values in force of IDENTITY_PARAMETERS and `extra`; absent ones say `absent`."""
        out = {}
        for name in (*IDENTITY_PARAMETERS, *extra):
            try:
                out[name] = self.read(name)
            except (OSError, ValueError, RuntimeError):
                out[name] = "absent"
        return out


class LinuxParameters(Parameters):
    def __init__(self, sysfs: str | Path = "/sys", procfs: str | Path = "/proc"):
        self.dir = Path(sysfs) / "module/zfs/parameters"
        self.procfs = Path(procfs)

    def read(self, name: str) -> str:
        return (self.dir / name).read_text().strip()

    def write(self, name: str, value: str) -> None:
        path = self.dir / name
        if not path.exists():  # never create a file in sysfs' place
            raise ParameterError(f"parameter {name}: {path} does not exist (is the zfs module loaded?)")
        path.write_text(f"{value}\n")

    def read_all(self) -> dict[str, str]:
        out = {}
        try:
            for path in sorted(self.dir.iterdir()):
                try:
                    out[path.name] = path.read_text().strip()
                except OSError:
                    continue
        except OSError:
            return {}
        return out

    def shell(self, name: str, value: str) -> str:
        return f"echo {value} > {self.dir / name}"

    def ram(self) -> int | None:
        try:
            for line in (self.procfs / "meminfo").read_text().splitlines():
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None


class FreeBsdParameters(Parameters):
    """`sysctl -n vfs.zfs.<name>` to read, `sysctl vfs.zfs.<name>=<value>` to write (FreeBSD 13/14,
    TrueNAS CORE). Tested on recorded outputs: FreeBSD cannot boot here."""

    def __init__(self, run: Callable[[list[str]], str]):
        self.run = run

    @staticmethod
    def sysctl_name(name: str) -> str:
        spec = SPECS.get(name)
        return "vfs.zfs." + (spec.freebsd if spec else name.removeprefix("zfs_"))

    def read(self, name: str) -> str:
        return self.run(["sysctl", "-n", self.sysctl_name(name)]).strip()

    def write(self, name: str, value: str) -> None:
        self.run(["sysctl", f"{self.sysctl_name(name)}={value}"])

    def read_all(self) -> dict[str, str]:
        from ...sources.freebsd import parse_sysctl

        try:
            return {k: v.strip() for k, v in parse_sysctl(self.run(["sysctl", "vfs.zfs"])).items()}
        except (RuntimeError, ValueError):
            return {}

    def shell(self, name: str, value: str) -> str:
        return f"sysctl {self.sysctl_name(name)}={value}"

    def ram(self) -> int | None:
        try:
            return int(self.run(["sysctl", "-n", "hw.physmem"]).strip())
        except (RuntimeError, ValueError):
            return None


@dataclass(frozen=True)
class Change:
    name: str
    value: str        # the number written
    written: str      # as the matrix wrote it ("4G")


def changes(cell_parameters: tuple[tuple[str, str], ...], ram: int | None) -> list[Change]:
    """The checked changes of one cell (every value against its range and RAM, before anything runs)."""
    return [Change(name, str(parameter_value(name, text, ram)), text) for name, text in cell_parameters]


class ParameterSwitch:
    """Applies a cell's changes and undoes them; each original value is in the store before the write."""

    def __init__(self, params: Parameters, store: Store, run_id: str):
        self.params, self.store, self.run_id = params, store, run_id

    def apply(self, wanted: list[Change]) -> None:
        for change in wanted:
            original = self.params.read(change.name)
            self.store.record_parameter(self.run_id, change.name, original, change.value)  # committed first
            self.params.write(change.name, change.value)
            now = self.params.read(change.name)
            if now != change.value:
                raise ParameterError(f"parameter {change.name}: wrote {change.value}, reads back {now}")
            log.info("parameter %s: %s -> %s (restored after the cell)", change.name, original, change.value)

    def restore(self) -> list[str]:
        return restore_pending(self.params, self.store, self.run_id)


def restore_pending(params: Parameters, store: Store, run_id: str | None = None) -> list[str]:
    """Write back every original value still pending (of one run, or of every run of this host),
    newest change first so the oldest original wins; returns what was restored, readable."""
    done = []
    for row in store.pending_parameters(run_id):
        params.write(row.name, row.original)
        store.parameter_restored(row.id)
        done.append(f"{row.name} {row.value} -> {row.original}")
        log.info("parameter %s restored to %s", row.name, row.original)
    return done
