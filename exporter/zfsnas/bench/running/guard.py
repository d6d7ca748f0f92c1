"""Safety: the runner touches only children it created under a dataset marked as scratch.

Owns every yes/no decision about a dataset name or its properties; each refusal is a
`GuardError` with one clear sentence, raised before any command that changes anything runs.
It runs no command itself: zfs.py fetches the properties and asks here.

Order is structural: `check_scratch` is the only maker of a `Cleared`, and every code path that
creates or destroys a dataset, syncs a pool or runs fio (zfs.py's create/destroy/sync, fio.py's
FioProcess, the Runner) takes a `Cleared` as an argument, so it cannot be reached before every
check on the scratch dataset passed. Two kinds of write take none, by design: `init`'s
`zfs set org.zfsnas:scratch` (`zfs.mark_scratch`, on a plain filesystem only: it sets the mark the
checks look for), and the module-parameter writes of parameters.py (`ParameterSwitch`,
`restore_pending`). A run changes parameters only through its Runner, which is built from a
`Cleared`; `zfsnas-bench restore` writes the recorded originals back without any scratch dataset.

The rules:
- the scratch dataset is a filesystem (not a pool's root, snapshot, bookmark or clone) whose
  `org.zfsnas:scratch` user property was set on it directly (`source` local), by `init`;
- a child is exactly `<scratch>/<leaf>` with a plain leaf (no `..`, `@`, `#`, `/`), so
  `tank/scratchX` or `tank/scratch/../home` are never children of `tank/scratch`;
- a child is destroyed only if it carries, set locally, `org.zfsnas:bench-run` equal to the run
  id that created it, and is not a clone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

SCRATCH_PROPERTY = "org.zfsnas:scratch"
RUN_PROPERTY = "org.zfsnas:bench-run"
CHILD_PREFIX = "zfsnas-bench-"
# fullmatch, never `$`: `$` also matches before a trailing newline ("tank/scratch\n").
_COMPONENT = re.compile(r"[A-Za-z0-9_.:-]+")
_LEAF = re.compile(r"zfsnas-bench-[A-Za-z0-9_.-]+")
_KEY = object()   # only this module can make a Cleared


class GuardError(RuntimeError):
    """A refusal: the message says what was refused and why."""


@dataclass(frozen=True)
class Prop:
    value: str
    source: str  # zfs get's source column: local, default, inherited from X, received, -


@dataclass(frozen=True)
class Cleared:
    """Proof that `dataset` passed every scratch check, with the properties it was judged on.

    Only `check_scratch` makes one (a Cleared built anywhere else raises); the functions that
    change anything take it, which is what puts the checks before the first change. It guards
    against mistakes in our own order of calls, not against code set on forging one
    (`dataclasses.replace` copies the key)."""

    dataset: str
    mark: str                       # the value of org.zfsnas:scratch when it was checked
    props: Mapping[str, Prop]
    key: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.key is not _KEY:
            raise GuardError("a Cleared is made only by guard.check_scratch: refused")


def check_dataset_name(name: str, below_pool: bool = True) -> None:
    """A dataset name below a pool, made of plain components; never a snapshot, bookmark or pool
    (`below_pool=False`: a pool's root too, for what only reads it: watch, import)."""
    if not name:
        raise GuardError("no scratch dataset given (use --dataset or `dataset =` in the matrix)")
    if "@" in name:
        raise GuardError(f"{name!r} is a snapshot, not a dataset: refused")
    if "#" in name:
        raise GuardError(f"{name!r} is a bookmark, not a dataset: refused")
    if "%" in name:
        raise GuardError(f"{name!r} names a temporary clone: refused")
    if name.endswith("\n"):
        raise GuardError(f"{name!r} ends with a newline: refused")
    parts = name.split("/")
    if len(parts) < 2 and below_pool:
        raise GuardError(f"{name!r} is a pool's root dataset; use a dedicated child such as {name}/scratch")
    for part in parts:
        if part in ("", ".", ".."):
            raise GuardError(f"{name!r} has an empty, '.' or '..' component: refused")
        if part.startswith("-"):
            raise GuardError(f"{name!r} has a component starting with '-' ({part!r}), which reads as an option: refused")
        if not _COMPONENT.fullmatch(part):
            raise GuardError(f"{name!r} has characters outside [A-Za-z0-9_.:-] in {part!r}: refused")


def check_child_name(scratch: str, child: str) -> None:
    """`child` must be exactly one level below `scratch` and named like the runner names its children."""
    check_dataset_name(scratch)
    check_dataset_name(child)
    prefix = scratch + "/"
    if not child.startswith(prefix):
        raise GuardError(f"{child!r} is not inside the scratch dataset {scratch!r}: refused")
    leaf = child[len(prefix):]
    if "/" in leaf:
        raise GuardError(f"{child!r} is not a direct child of {scratch!r}: refused")
    if not _LEAF.fullmatch(leaf):
        raise GuardError(f"{child!r} was not named by zfsnas-bench ({CHILD_PREFIX}*): refused")


def _check_plain(name: str, props: Mapping[str, Prop], kinds: tuple[str, ...]) -> None:
    """Exists, is one of `kinds`, and is not a clone."""
    kind = props.get("type")
    if kind is None:
        raise GuardError(f"{name!r}: dataset does not exist")
    if kind.value not in kinds:
        raise GuardError(f"{name!r} is a {kind.value}, not a {' or '.join(kinds)}: refused")
    origin = props.get("origin")
    if origin is not None and origin.value not in ("-", ""):
        raise GuardError(f"{name!r} is a clone of {origin.value}: refused")


def _local_mark(name: str, props: Mapping[str, Prop], prop: str, missing: str) -> str:
    """The value of user property `prop`, which must be set on `name` itself (source local)."""
    mark = props.get(prop)
    if mark is None or mark.value in ("-", ""):
        raise GuardError(f"{name!r} {missing}")
    if mark.source != "local":
        where = mark.source if mark.source not in ("-", "") else "not set here"
        raise GuardError(f"{name!r}: {prop} is {where}, not set on the dataset itself: refused")
    return mark.value


def check_scratch(name: str, props: Mapping[str, Prop]) -> Cleared:
    """Refuse unless `name` is a scratch filesystem marked by `init`; the Cleared that proves it."""
    check_dataset_name(name)
    _check_plain(name, props, ("filesystem",))
    mark = _local_mark(name, props, SCRATCH_PROPERTY,
                       f"is not marked as scratch; run `zfsnas-bench init {name}` first")
    return Cleared(name, mark, dict(props), _KEY)


def check_still_scratch(cleared: Cleared, props: Mapping[str, Prop]) -> Cleared:
    """Between cells: the dataset must still pass every check and carry the same mark."""
    try:
        again = check_scratch(cleared.dataset, props)
    except GuardError as exc:
        raise GuardError(f"{cleared.dataset} no longer passes the scratch check ({exc}): run stopped") from None
    if again.mark != cleared.mark:
        raise GuardError(f"{cleared.dataset}: {SCRATCH_PROPERTY} changed from {cleared.mark} to {again.mark} "
                         f"during the run: run stopped")
    return again


def check_own_child(scratch: str, child: str, run_id: str, props: Mapping[str, Prop]) -> None:
    """Refuse to write to or destroy `child` unless this run created it."""
    check_child_name(scratch, child)
    _check_plain(child, props, ("filesystem", "volume"))
    mark = _local_mark(child, props, RUN_PROPERTY, f"was not created by zfsnas-bench (no {RUN_PROPERTY}): refused")
    if mark != run_id:
        raise GuardError(f"{child!r} belongs to run {mark}, not to this run {run_id}: refused")


def child_name(scratch: str, run_id: str, index: int) -> str:
    name = f"{scratch}/{CHILD_PREFIX}{run_id}-{index}"
    check_child_name(scratch, name)
    return name
