"""What a set of configurations varies in, named for a reader, and picking configurations by it.

An axis is one identity field of `config.Configuration.flat()` or several that always change
together (a pool's name with its layout and disks; a size with its bytes), named the way users say
it and never renamed into another: `volblocksize` is never "recordsize", a label attached with
`--set ram=16G` is the axis `ram`. The workload is not an axis: tables put it in their rows.

Owns axis detection, readable values (a layout `data:raidz2:8` reads `raidz2 8-wide`), the order
of an axis's values (sizes and numbers in their natural order, 4K < 8K < 16K < 128K < 1M; anything
else as the matrix ran it) and its reference value (`off`, a whole disk, else the first), workload
names as CrystalDiskMark prints its tests, and selectors (`compression=lz4,volblocksize=16K`,
`layout=mirror`) that `report --baseline`, `compare` and `recommend` use to pick configurations.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...store.configuration import UNKNOWN, Configuration

# Identity fields that follow from another (a size's bytes, a corpus's file count): shown only when
# nothing else tells the configurations apart.
CONSEQUENCES = ("data bytes", "data corpus_bytes", "data corpus_files")
# Axis order in tables and charts: what users sweep most first.
_ORDER = ("property compression", "property recordsize", "property volblocksize", "property encryption",
          "data compressibility", "property ", "label ", "parameter ", "layout vdevs", "pool", "layout partition",
          "layout ", "size", "data ", "direct", "zfs_version", "host", "matrix")
_NAMES = {"layout vdevs": "pool layout", "layout models": "disk models", "layout partition": "partition",
          "zfs_version": "OpenZFS", "direct": "O_DIRECT"}
# Values an axis is measured against when it has one: what a user changes *from*.
REFERENCES = ("off", "none", "whole disk", "disabled")
_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[KMGTP]?)(?:i?B)?$", re.IGNORECASE)
_POWERS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def short_name(key: str) -> str:
    """`property volblocksize` -> `volblocksize`, `label ram` -> `ram`, `layout vdevs` -> `pool layout`."""
    if key in _NAMES:
        return _NAMES[key]
    return key.split(" ", 1)[1] if " " in key else key


def layout_text(vdevs: str) -> str:
    """`data:mirror:2` x4 -> `4 x mirror 2-way`; `data:raidz2:8` -> `raidz2 8-wide`; other roles follow
    with a `+` (`+ cache`, `+ log mirror 2-way`, `+ 2 spares`)."""
    if vdevs == UNKNOWN or not vdevs:
        return vdevs
    data, extra = [], []
    for spec, n in Counter(vdevs.split(",")).items():
        parts = spec.split(":")
        if len(parts) != 3:
            return vdevs
        role, kind, width = parts
        if kind == "disk":
            text = f"{n} {role if role != 'data' else 'disk'}{'s' if n > 1 else ''}"
        else:
            shape = f"mirror {width}-way" if kind == "mirror" else f"{kind} {width}-wide"
            text = (f"{n} x " if n > 1 else "") + (shape if role == "data" else f"{role} {shape}")
        if role == "data":
            data.append(text)
        else:
            extra.append("+ " + (text[2:] if text.startswith("1 ") else text))
    return ", ".join(sorted(data)) + "".join(f" {e}" for e in sorted(extra))


def readable(key: str, value: str) -> str:
    return layout_text(value) if key == "layout vdevs" else value


def magnitude(value: str) -> float | None:
    """The number a value names: `16K` -> 16384, `1M`, `32G`, `1 GiB`, `65` -> 65; None for words
    (`lz4`, `all`, `unknown`) and for an axis value with more in it (`4 x mirror 2-way`)."""
    m = _SIZE.match(value.strip())
    return float(m["n"]) * _POWERS[m["unit"].upper()] if m else None


def natural(values: Iterable[str]) -> tuple[str, ...]:
    """`values` (distinct, in first-seen order) with the ones naming a size or number sorted by it
    (4K < 8K < 16K < 128K < 1M) ahead of the others, which keep their order."""
    values = list(dict.fromkeys(values))
    sized = sorted((v for v in values if magnitude(v) is not None), key=lambda v: magnitude(v) or 0.0)
    return (*sized, *(v for v in values if magnitude(v) is None))


def reference(values: Sequence[str]) -> str:
    """The value the others are set against: `off` (or none, a whole disk, ...) when there, else the
    first (the smallest of sizes, the first the matrix ran of the rest)."""
    lowered = {v.lower(): v for v in values}
    return next((lowered[r] for r in REFERENCES if r in lowered), values[0])


_CDM = re.compile(r"^cdm-(?P<kind>seq|rnd)(?P<block>\d+)(?P<unit>[km])-q(?P<q>\d+)t(?P<t>\d+)-(?P<dir>read|write)$")


def cdm_test(workload: str) -> tuple[str, str, int, int, str] | None:
    """(SEQ/RND, block as CrystalDiskMark writes it, queue depth, threads, read/write) of a cdm-* workload."""
    m = _CDM.match(workload)
    if not m:
        return None
    return m["kind"].upper(), f"{m['block']}{m['unit'].upper()}iB", int(m["q"]), int(m["t"]), m["dir"]


def cdm_workload(kind: str, block_kib: int, queues: int, threads: int, direction: str) -> str:
    """The workload name of a CrystalDiskMark test: ("SEQ", 1024, 8, 1, "read") -> cdm-seq1m-q8t1-read."""
    block = f"{block_kib // 1024}m" if block_kib >= 1024 and block_kib % 1024 == 0 else f"{block_kib}k"
    return f"cdm-{kind.lower()}{block}-q{queues}t{threads}-{direction}"


def workload_text(workload: str) -> str:
    """`cdm-rnd4k-q32t1-write` -> `RND 4KiB Q32T1 write`, as CrystalDiskMark names its tests."""
    test = cdm_test(workload)
    if test is None:
        return workload
    kind, block, q, t, direction = test
    return f"{kind} {block} Q{q}T{t} {direction}"


@dataclass(frozen=True)
class Axis:
    """One thing the configurations vary in: its name, the identity fields it spans (the first is
    the one its values are read from) and its values in their natural order (`natural`)."""

    name: str
    keys: tuple[str, ...]
    values: tuple[str, ...]

    def value(self, config: Configuration) -> str:
        return axis_value(self.keys, config.flat())

    @property
    def reference(self) -> str:
        return reference(self.values)


def axis_value(keys: Sequence[str], flat: dict[str, str]) -> str:
    first = readable(keys[0], flat.get(keys[0], UNKNOWN))
    others = [readable(k, flat.get(k, UNKNOWN)) for k in keys[1:] if k not in CONSEQUENCES]
    return first + (f" ({', '.join(others)})" if others else "")


def _rank(key: str) -> tuple[int, str]:
    for i, prefix in enumerate(_ORDER):
        if key == prefix or (prefix.endswith(" ") and key.startswith(prefix)):
            return i, key
    return len(_ORDER), key


def axes(configs: Iterable[Configuration]) -> list[Axis]:
    """The axes of `configs` (in their order): every identity field but the workload whose value
    differs among them, fields that partition them the same way merged into one axis, named after
    the first of them (in `_ORDER`) that every configuration recorded."""
    configs = list(configs)
    flats = [c.flat() for c in configs]
    keys = sorted({k for f in flats for k in f}, key=_rank)
    signatures: dict[tuple[int, ...], list[str]] = {}
    for key in keys:
        if key in ("workload", "matrix"):
            continue
        values = [f.get(key, UNKNOWN) for f in flats]
        if len(set(values)) < 2:
            continue
        order = list(dict.fromkeys(values))
        signatures.setdefault(tuple(order.index(v) for v in values), []).append(key)
    out = []
    for group in signatures.values():
        # Named after a field every configuration recorded (the `--set client=` a user gave), before
        # fields some of them lack (the properties of a zvol a client's local disk does not have).
        primary = sorted([k for k in group if k not in CONSEQUENCES] or group,
                         key=lambda k: (any(f.get(k, UNKNOWN) == UNKNOWN for f in flats), _rank(k)))
        ordered = primary + [k for k in group if k not in primary]
        out.append(Axis(short_name(ordered[0]), tuple(ordered), natural(axis_value(ordered, f) for f in flats)))
    return sorted(out, key=lambda a: _rank(a.keys[0]))


def unrecorded(value: str) -> bool:
    """An axis value that records nothing: `unknown`, or `unknown (unknown, unknown)` of a merged axis."""
    return not set(re.split(r"[ (),]+", value)) - {"", UNKNOWN}


def agreement(a: Sequence[str], b: Sequence[str]) -> int | None:
    """How many values two settings (the same axes' values) share, None when one differs. A value one
    side did not record (a client's local disk has no volblocksize) tells nothing apart: no difference."""
    same = 0
    for x, y in zip(a, b):
        if x == y:
            same += 1
        elif not (unrecorded(x) or unrecorded(y)):
            return None
    return same


# --- selectors ---------------------------------------------------------------------------------------

class SelectorError(ValueError):
    pass


Selector = tuple[tuple[str, str], ...]


def parse_selector(text: str) -> Selector:
    """`compression=lz4,volblocksize=16K` -> ((compression, lz4), (volblocksize, 16K))."""
    out = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise SelectorError(f"{text!r}: expected NAME=VALUE[,NAME=VALUE...] (e.g. volblocksize=16K, layout=mirror)")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def keys_named(name: str, flat: dict[str, str]) -> list[str]:
    """The identity fields a selector name means: the field itself (`property compression`), its
    short name (`compression`, `ram`, `zfs_dirty_data_max`), or `layout` for the pool layout."""
    if name in flat:
        return [name]
    wanted = {"layout": "layout vdevs", "pool layout": "layout vdevs"}.get(name)
    if wanted:
        return [wanted]
    return [k for k in flat if short_name(k) == name or k.split(" ", 1)[-1] == name]


def _value_matches(key: str, have: str, want: str) -> bool:
    if have.lower() == want.lower() or readable(key, have).lower() == want.lower():
        return True
    if key == "layout vdevs":   # `layout=mirror`, `layout=raidz2`: the vdev type
        return want.lower() in {spec.split(":")[1] for spec in have.split(",") if spec.count(":") == 2}
    return False


def matches(config: Configuration, selector: Selector) -> bool:
    flat = config.flat()
    for name, want in selector:
        keys = keys_named(name, flat)
        if not keys or not any(_value_matches(k, flat[k], want) for k in keys):
            return False
    return True


def selector_keys(selector: Selector, configs: Iterable[Configuration]) -> set[str]:
    """The identity fields a selector's names mean among `configs` (unknown names raise)."""
    out: set[str] = set()
    flats = [c.flat() for c in configs]
    for name, _value in selector:
        found = {k for f in flats for k in keys_named(name, f)}
        if not found:
            known = sorted({short_name(k) for f in flats for k in f} - {"workload", "matrix"})
            raise SelectorError(f"no configuration has {name!r}; these do: {', '.join(known)}")
        out |= found
    return out
