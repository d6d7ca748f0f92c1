"""Filters several collectors share, declared once: which pools (`--pools.include`/`--pools.exclude`:
the `pools` and `datasets` collectors) and which block devices (`--disks.device-exclude`: the `disks`
and `smart` collectors). The exporter parses each once and hands the same object to every
collector that uses it (`Context.pool_filter`, `Context.device_filter`).
"""

from __future__ import annotations

import re
from typing import Any

from ..settings import Settings, flag

DEFAULT_DEVICE_EXCLUDE = r"^(loop|ram|zram|dm-|sr|fd)\d+$|^nvme\d+c\d+n\d+$"


def compile_pattern(text: str | None, flag_name: str) -> re.Pattern | None:
    """A filter flag's regular expression (None: no filter); an invalid one stops the start."""
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise SystemExit(f"zfsnas-exporter: {flag_name}: invalid regular expression: {exc}") from None


def name_selected(name: str, include: re.Pattern | None, exclude: re.Pattern | None) -> bool:
    """Whole-name regular expressions (pools', datasets'): exclude wins."""
    return (include is None or include.fullmatch(name) is not None) and not (exclude and exclude.fullmatch(name))


class PoolFilter(Settings):
    """`--pools.include` / `--pools.exclude`: which pools the pools and datasets collectors serve."""

    namespace = "pools"
    # `--pool.include` / `--pool.exclude` are the spellings of the first releases, kept as aliases.
    include: str | None = flag("--pools.include", "--pool.include",
                               help="regular expression on the whole pool name: only these pools (pools and datasets)")
    exclude: str | None = flag("--pools.exclude", "--pool.exclude",
                               help="regular expression on the whole pool name: leave these pools out "
                                    "(pools and datasets)")

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self._include = compile_pattern(self.include, "--pools.include")
        self._exclude = compile_pattern(self.exclude, "--pools.exclude")

    def selected(self, pool: str) -> bool:
        return name_selected(pool, self._include, self._exclude)


class DeviceFilter(Settings):
    """`--disks.device-exclude`: kernel device names the disks and smart collectors leave out."""

    namespace = "disks"
    device_exclude: str = flag("--disks.device-exclude", default=DEFAULT_DEVICE_EXCLUDE,
                               help=f"regex of kernel device names to leave out (default {DEFAULT_DEVICE_EXCLUDE!r})")

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self.pattern = re.compile(self.device_exclude)

    def excluded(self, device: str) -> bool:
        return self.pattern.search(device) is not None
