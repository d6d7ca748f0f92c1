"""Collector `tunables`: the OpenZFS version and every numeric module parameter.

Owns `zfs_version_info{version}` and `zfs_module_parameter{name}`. On Linux `name` is the file
name under /sys/module/zfs/parameters (`zfs_arc_max`); on FreeBSD it is the sysctl name after
`vfs.zfs.` (`arc.max`). Non-numeric parameters (strings, lists) are left out.
A real system has about 300 parameters that change only when someone tunes them, so they are
read in the background (`--tunables.refresh-interval`, source `module_parameters`), not on
every scrape; their families are rendered once per read (`Families.frozen`), so a scrape copies text.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..exposition import Families, Family
from ..refresh import RenderedOnce
from ..settings import Settings, interval
from .base import RefreshingCollector, Report


def numeric(text: str) -> int | None:
    try:
        return int(text, 10)
    except ValueError:
        return None


class TunablesSettings(Settings):
    namespace = "tunables"
    refresh_interval: float = interval("--tunables.refresh-interval", 30.0, "reads of the module parameters")


class TunablesCollector(RefreshingCollector[TunablesSettings]):
    name = "tunables"
    description = "OpenZFS version and numeric module parameters"

    def setup(self) -> None:
        self.refresher = self.add_refresher("module_parameters", self._read, self.settings.refresh_interval)
        self._rendered = RenderedOnce(1)  # the last read's families

    def _read(self) -> tuple[str | None, dict[str, int]]:
        kstat = self.ctx.kstat
        parameters = {name: value for name, text in kstat.tunables().items()
                      if (value := numeric(text.strip())) is not None}
        return kstat.version(), dict(sorted(parameters.items()))

    def collect(self, report: Report) -> Iterable[Family]:
        read = self.current(self.refresher, report)
        if read is None:
            return []
        return self._rendered.get((read,), lambda: frozen_families(*read))  # rendered once per read


def frozen_families(version: str | None, parameters: dict[str, int]) -> list[Family]:
    families = Families()
    if version:
        families.gauge("zfs_version_info", "OpenZFS kernel module version.", {"version": version}, 1)
    for name, value in parameters.items():
        families.gauge("zfs_module_parameter", "Numeric OpenZFS module parameter (tunable).", {"name": name}, value)
    return families.frozen()
