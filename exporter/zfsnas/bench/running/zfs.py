"""ZFS operations of the runner, through the exporter's CommandRunner (argv lists, no shell).

Owns reading properties, creating the planned child, waiting for a txg to sync, and destroying
a child; destroy asks guard.py first, every time. Every method that changes anything takes the
`guard.Cleared` that `scratch()` returns, so none can run before the scratch checks passed, but
`mark_scratch` (`init`'s: it sets the mark those checks look for, on a plain filesystem only). It
must not decide what to create: the planner does.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from ...sources.commands import CommandRunner
from ...sources.kstat import parse_txgs
from ...sources.model import SourceError
from ...store.configuration import leaf_paths, pool_layout
from .guard import (
    CHILD_PREFIX,
    RUN_PROPERTY,
    Cleared,
    GuardError,
    Prop,
    check_child_name,
    check_own_child,
    check_scratch,
    check_still_scratch,
)


class ZfsOps:
    SCRATCH_PROPERTIES = "type,origin,available,mountpoint,org.zfsnas:scratch"

    def __init__(self, runner: CommandRunner, procfs: str = "/proc", sysfs: str = "/sys"):
        self.runner = runner
        self.procfs = Path(procfs)
        self.sysfs = Path(sysfs)

    def get(self, name: str, properties: str) -> dict[str, Prop]:
        """{property: Prop} of `zfs get -Hp`; {} when the dataset does not exist."""
        try:
            out = self.runner.run(["zfs", "get", "-Hp", "-o", "property,value,source", properties, name])
        except SourceError as exc:
            if "does not exist" in str(exc):
                return {}
            raise
        props: dict[str, Prop] = {}
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                props[parts[0]] = Prop(parts[1], parts[2])
        return props

    def scratch(self, name: str) -> Cleared:
        """The scratch dataset, approved by guard.check_scratch (GuardError otherwise)."""
        return check_scratch(name, self.get(name, self.SCRATCH_PROPERTIES))

    def recheck(self, cleared: Cleared) -> Cleared:
        """The scratch dataset read again: still marked, with the same mark (GuardError otherwise)."""
        return check_still_scratch(cleared, self.get(cleared.dataset, self.SCRATCH_PROPERTIES))

    def mark_scratch(self, name: str, token: str) -> None:
        props = self.get(name, "type,origin")
        if not props:
            raise GuardError(f"{name!r}: dataset does not exist")
        if props["type"].value != "filesystem" or props.get("origin", Prop("-", "-")).value not in ("-", ""):
            raise GuardError(f"{name!r} is not a plain filesystem (type {props['type'].value}): refused")
        self.runner.run(["zfs", "set", f"org.zfsnas:scratch={token}", name])

    def create(self, cleared: Cleared, argv: tuple[str, ...]) -> None:
        check_child_name(cleared.dataset, argv[-1])
        if self.get(argv[-1], "type"):
            raise GuardError(f"{argv[-1]!r} already exists: refused")
        self.runner.run(list(argv), timeout=300)

    def destroy(self, cleared: Cleared, child: str, run_id: str, attempts: int = 5) -> None:
        check_own_child(cleared.dataset, child, run_id, self.get(child, "type,origin,org.zfsnas:bench-run"))
        for attempt in range(1, attempts + 1):
            try:
                self.runner.run(["zfs", "destroy", child], timeout=600)
                return
            except SourceError as exc:  # udev may still hold a fresh zvol for a moment
                if "busy" not in str(exc) or attempt == attempts:
                    raise
                time.sleep(attempt)

    def baseline(self, cleared: Cleared, child: str, run_id: str) -> tuple[int, int]:
        """(used, logicalused) of a child this run made, before a racing copy writes into it again
        (GuardError if it is not this run's own child)."""
        props = self.get(child, f"type,origin,{RUN_PROPERTY},used,logicalused")
        check_own_child(cleared.dataset, child, run_id, props)
        try:
            return int(props["used"].value), int(props["logicalused"].value)
        except (KeyError, ValueError):
            raise GuardError(f"{child!r}: no used/logicalused to start a copy's space from") from None

    def destroy_leftovers(self, cleared: Cleared, dead_runs: set[str]) -> list[str]:
        """Destroy children that runs which died (power cut, kill -9) left; each passes the guard
        with its own run's id. Children of live or unknown runs are left alone."""
        if not dead_runs:
            return []
        scratch = cleared.dataset
        out = self.runner.run(["zfs", "list", "-H", "-o", "name", "-d", "1", "-t", "filesystem,volume", scratch])
        destroyed: list[str] = []
        for child in out.split():
            if not child.startswith(f"{scratch}/{CHILD_PREFIX}"):
                continue
            mark = self.get(child, RUN_PROPERTY).get(RUN_PROPERTY)
            if mark is not None and mark.source == "local" and mark.value in dead_runs:
                self.destroy(cleared, child, mark.value)
                destroyed.append(child)
        return destroyed

    def space(self, argv: tuple[str, ...]) -> dict[str, str]:
        out = self.runner.run(list(argv))
        return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)

    def last_txg(self, pool: str) -> int | None:
        path = self.procfs / "spl/kstat/zfs" / pool / "txgs"
        try:
            txgs = parse_txgs(path.read_text(), str(path))
        except (OSError, ValueError):
            return None
        return max((t.txg for t in txgs), default=None)

    def committed(self, pool: str, txg: int) -> bool:
        path = self.procfs / "spl/kstat/zfs" / pool / "txgs"
        try:
            txgs = parse_txgs(path.read_text(), str(path))
        except (OSError, ValueError):
            return True
        return any(t.txg > txg or (t.txg == txg and t.committed) for t in txgs if t.committed)

    def sync(self, cleared: Cleared, pool: str, timeout: float = 600.0) -> float:
        """`zpool sync` then wait until the txg open before it has committed; seconds taken."""
        if pool != cleared.dataset.split("/")[0]:
            raise GuardError(f"pool {pool!r} is not the scratch dataset's pool: refused")
        started = time.monotonic()
        before = self.last_txg(pool)
        self.runner.run(["zpool", "sync", pool], timeout=timeout)
        while before is not None and not self.committed(pool, before):
            if time.monotonic() - started > timeout:
                raise SourceError(f"txg {before} of {pool} not committed after {timeout:g}s")
            time.sleep(0.1)
        return time.monotonic() - started

    def dirty_data_max(self) -> int | None:
        try:
            return int((self.sysfs / "module/zfs/parameters/zfs_dirty_data_max").read_text())
        except (OSError, ValueError):
            return None

    def versions(self) -> str:
        try:
            return " ".join(self.runner.run(["zfs", "version"]).split())
        except SourceError:
            try:
                return (self.sysfs / "module/zfs/version").read_text().strip()
            except OSError:
                return ""

    def pool_layout(self, pool: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        """`zpool status -P` (kept with the run) and the layout a configuration holds: vdev types
        and widths, `zpool get ashift`, the disk models of the leaves (from sysfs), and whether ZFS
        was given whole disks or partitions (`zpool status` without -P names them as it was given
        them)."""
        try:
            status = self.runner.run(["zpool", "status", "-P", pool])
        except SourceError as exc:
            status = f"unknown: {exc}"
        try:
            names = self.runner.run(["zpool", "status", pool])
        except SourceError:
            names = ""
        try:
            ashift = self.runner.run(["zpool", "get", "-Hp", "-o", "value", "ashift", pool]).strip()
        except SourceError:
            ashift = ""
        models = {leaf: self.disk_model(leaf) for leaf in leaf_paths(status, pool)}
        return status, pool_layout(status, pool, ashift, models, names)

    def disk_model(self, leaf: str) -> str:
        """The model of the whole disk under a leaf path (/dev/sda1, /dev/disk/by-id/...-part1)."""
        name = Path(os.path.realpath(leaf)).name if leaf.startswith("/") else leaf
        block = self.sysfs / "block"
        for candidate in (name, re.sub(r"p?\d+$", "", name)):
            path = block / candidate / "device" / "model"
            try:
                return " ".join(path.read_text().split()) or ""
            except OSError:
                continue
        return ""

    def sysctl(self, name: str) -> str:
        """`sysctl -n <name>` (FreeBSD)."""
        return self.runner.run(["sysctl", "-n", name])
