"""The collectors as the tests group them, all derived from the registry (`zfsnas.collectors.ALL`):
a collector registered there is in every list below, and in every golden page, fuzz case, replay
and start-up check that uses them, without a test to edit.

- `KSTAT`: the collectors that read kstats only (they need ZFS and run no program): they run on
  every fixture tree (tests/fixtures/linux-zfs-*, freebsd-*), live captures included;
- `COMMANDS`: the ones that need ZFS and run `zfs`/`zpool` (answered by the stand-in's recordings);
- `NO_ZFS`: the ones that serve without ZFS (disks, bench, smart);
- `DEFAULT`: the ones a plain start runs; `NAMES`: all of them, in the registry's order (the
  order of a page, of `--help` and of the start-up line).
"""

from __future__ import annotations

from zfsnas.collectors import ALL

NAMES = tuple(c.name for c in ALL)
KSTAT = tuple(c.name for c in ALL if c.needs_zfs and not c.programs)
COMMANDS = tuple(c.name for c in ALL if c.needs_zfs and c.programs)
NO_ZFS = tuple(c.name for c in ALL if not c.needs_zfs)
DEFAULT = tuple(c.name for c in ALL if c.default_enabled)
MODULES = frozenset(c.__module__ for c in ALL)


def only(*names: str) -> list[str]:
    """The flags that run these collectors and no other."""
    return ["--collector.disable-defaults", *(f"--collector.{name}" for name in names)]
