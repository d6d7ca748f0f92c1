"""What a benchmark configuration is: the one definition the store, report, `list`, the exporter's
`bench` collector, the Grafana annotation tags, the dashboards and the alerts all use.

A configuration is everything that shapes a result: the matrix, the workload (fio job or `copy`)
and its size, the data (fio compressibility, or the corpus path with its file count and bytes;
runtime, ramp), every dataset property the cell set, the pool's name and layout (vdev types and
widths, ashift, disk models), the ZFS module parameters that shape writes and caching, the
OpenZFS version, `direct` and the host. Its canonical form is sorted compact JSON; its id is the
first 12 hex digits of that form's SHA-256. Two results compare (median, previous median,
regression, report rows) only when their ids match; `differences` says what tells two apart.

Owns the canonical form, the id, the readable labels and tags, `differences`, turning `zpool
status`/`zpool get` output into a layout, and rebuilding the configuration of results stored
before configurations existed. Pure: no I/O, no prometheus_client. It sits in the store, below
both the bench wing and the exporter, because the runner's writer (database.py), the exporter's
reader (reader.py) and `capture --anonymize` all read configurations; it imports nothing from
`zfsnas.bench`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The module parameters that shape writes and caching: part of every configuration. The runner
# stores the full parameter set of each run besides (matrix_runs.parameters).
IDENTITY_PARAMETERS = ("zfs_dirty_data_max", "zfs_dirty_data_max_percent", "zfs_arc_max", "zfs_txg_timeout",
                       "zfs_vdev_async_write_max_active", "zfs_delay_min_dirty_percent")
# Labels of every zfs_bench_* series, in order. `workload` replaces the old `job`, which collided
# with Prometheus's target label (it arrived as `exported_job`).
LABELS = ("matrix", "workload", "config", "compression", "recordsize", "encryption", "size", "pool")
# Dataset properties that are the runner's bookkeeping, not part of what is measured.
_BOOKKEEPING = ("org.zfsnas:", "keyformat", "keylocation")
UNKNOWN = "unknown"
ID_LENGTH = 12

Pairs = tuple[tuple[str, str], ...]


def pairs(mapping: dict | Pairs | None) -> Pairs:
    """A dict (or pairs) as sorted (str, str) pairs: the hashable, order-free form."""
    items = mapping.items() if isinstance(mapping, dict) else (mapping or ())
    return tuple(sorted((str(k), str(v)) for k, v in items))


def measured_properties(properties: dict | Pairs) -> Pairs:
    """The dataset properties a cell set, less the runner's bookkeeping (run mark, key location)."""
    return pairs({k: v for k, v in dict(properties).items() if not str(k).startswith(_BOOKKEEPING)})


@dataclass(frozen=True)
class Configuration:
    matrix: str
    workload: str                 # the fio job's name or "copy"
    size: str                     # as the matrix wrote it: "16G", "4x dirty", "all"
    data: Pairs                   # compressibility, runtime, bytes, corpus, corpus_files, ...
    properties: Pairs             # every dataset property the cell set (compression, recordsize, ...)
    pool: str
    layout: Pairs                 # vdevs, ashift, models (see `pool_layout`)
    parameters: Pairs             # IDENTITY_PARAMETERS and any the matrix sets, values in force
    zfs_version: str
    direct: str                   # "1", "0" ("unknown" for results stored before configurations)
    host: str
    swept: tuple[str, ...] = field(default=(), compare=False)  # parameters the matrix set: tags only
    # What the user attached to a run with `--set KEY=VALUE` (RAM size, client, protocol, NTFS cluster,
    # link): part of the identity, so two RAM sizes are two configurations, and an axis of the report.
    user_labels: Pairs = ()

    def identity(self) -> dict:
        identity = {"matrix": self.matrix, "workload": self.workload, "size": self.size, "data": dict(self.data),
                    "properties": dict(self.properties), "pool": self.pool, "layout": dict(self.layout),
                    "parameters": dict(self.parameters), "zfs_version": self.zfs_version, "direct": self.direct,
                    "host": self.host}
        if self.user_labels:   # only when given: the ids of configurations without labels never move
            identity["labels"] = dict(self.user_labels)
        return identity

    def canonical(self) -> str:
        return json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))

    @property
    def id(self) -> str:
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:ID_LENGTH]

    def to_json(self) -> str:
        """What the store keeps: the canonical form plus the swept parameter names."""
        return json.dumps({**self.identity(), "swept": list(self.swept)}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Configuration:
        d = json.loads(text)
        return cls(matrix=d["matrix"], workload=d["workload"], size=d["size"], data=pairs(d["data"]),
                   properties=pairs(d["properties"]), pool=d["pool"], layout=pairs(d["layout"]),
                   parameters=pairs(d["parameters"]), zfs_version=d["zfs_version"], direct=d["direct"],
                   host=d["host"], swept=tuple(d.get("swept", ())), user_labels=pairs(d.get("labels")))

    def dataset_property(self, name: str, default: str = "") -> str:
        return dict(self.properties).get(name, default)

    @property
    def recordsize(self) -> str:
        props = dict(self.properties)
        return props.get("recordsize") or props.get("volblocksize") or ""

    @property
    def measured_elsewhere(self) -> bool:
        """Whether the result came from `watch` or `import` (data `source`), not from a run's cell."""
        return "source" in dict(self.data)

    @property
    def labels(self) -> dict[str, str]:
        """The labels of this configuration's zfs_bench_* series (LABELS, in order). A run's cell sets
        encryption only when on; a result measured elsewhere records what it was told or read, and a
        property it never recorded reads `unknown`, never a default it may not have had."""
        unset = UNKNOWN if self.measured_elsewhere else "off"
        return {"matrix": self.matrix, "workload": self.workload, "config": self.id,
                "compression": self.dataset_property("compression", UNKNOWN), "recordsize": self.recordsize or UNKNOWN,
                "encryption": self.dataset_property("encryption", unset), "size": self.size, "pool": self.pool}

    def tags(self) -> list[str]:
        """Grafana annotation tags: the labels and the parameters the matrix changed."""
        params = dict(self.parameters)
        return ["zfsnas-bench", *(f"{k}:{v}" for k, v in self.labels.items()),
                *(f"{name}:{params.get(name, UNKNOWN)}" for name in self.swept),
                *(f"{k}:{v}" for k, v in self.user_labels)]

    def flat(self) -> dict[str, str]:
        """Every identity field as one readable key, e.g. `parameter zfs_dirty_data_max`."""
        out = {"matrix": self.matrix, "workload": self.workload, "size": self.size, "pool": self.pool,
               "zfs_version": self.zfs_version, "direct": self.direct, "host": self.host}
        for prefix, group in (("data", self.data), ("property", self.properties), ("layout", self.layout),
                              ("parameter", self.parameters), ("label", self.user_labels)):
            out.update({f"{prefix} {k}": v for k, v in group})
        return out


def differences(a: Configuration, b: Configuration) -> list[str]:
    """What differs between two configurations, one readable item per field: `key: a -> b`."""
    fa, fb = a.flat(), b.flat()
    out = []
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key) != fb.get(key):
            out.append(f"{key}: {fa.get(key, '(none)')} -> {fb.get(key, '(none)')}")
    return out


def in_words(previous: Configuration, current: Configuration, limit: int = 6) -> str:
    """What changed from `previous` to `current` as a reader says it, one item per field: a module
    parameter or dataset property by its name, a size in bytes (a whole number of at least 1 MiB,
    not a time or a percentage) in binary units: `zfs_dirty_data_max 4 GiB -> 16 GiB, sync
    standard -> always`; more than `limit` items end in "and N more"."""
    before, after = previous.flat(), current.flat()
    items = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            kind, _, name = key.partition(" ")
            shown = name if kind in ("parameter", "property") and name else key
            old, new = (_readable(shown, side.get(key, "(not set)")) for side in (before, after))
            items.append(f"{shown} {old} -> {new}")
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def _readable(name: str, value: str) -> str:
    if not value.isdigit() or int(value) < 1 << 20 or int(value) % 1024 or name.endswith(("_ms", "_percent", "_pct")):
        return value
    units = ("KiB", "MiB", "GiB", "TiB")
    number, n = float(value) / 1024, 0
    while number >= 1024 and n < len(units) - 1:
        number, n = number / 1024, n + 1
    return f"{number:.3g} {units[n]}"


def look_alikes(configs: list[Configuration]) -> dict[str, list[tuple[str, list[str]]]]:
    """For each id, the other configurations that share its readable labels (they would look like
    one row or one series to a reader) with what differs: {id: [(other id, differences)]}."""
    by_labels: dict[tuple, dict[str, Configuration]] = {}
    for c in configs:
        key = tuple(v for k, v in c.labels.items() if k != "config")
        by_labels.setdefault(key, {})[c.id] = c
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for group in by_labels.values():
        for cid, c in group.items():
            out[cid] = [(oid, differences(o, c)) for oid, o in group.items() if oid != cid]
    return out


def differs_text(alikes: list[tuple[str, list[str]]]) -> str:
    """One configuration's `look_alikes` as one table cell: "vs <id>: <differences>; ..."."""
    return "; ".join(f"vs {other}: " + ", ".join(diff) for other, diff in alikes)


# --- the pool's layout, from `zpool status -P` and `zpool get ashift` -----------------------------

def pool_layout(status_text: str, pool: str, ashift: str = "", models: dict[str, str] | None = None,
                names_text: str | None = None) -> Pairs:
    """(vdevs, ashift, models[, partition]) of `pool`. vdevs: each top-level vdev as `role:type:width`,
    sorted (`data:raidz2:8`, `data:mirror:2`, `cache:disk:1`); models: `<model> x<count>` of the
    leaves, `models` mapping a leaf's path to its disk model. `names_text` is `zpool status POOL`
    without -P: ZFS prints a disk it was given whole without the partition it made on it (`ata-X`,
    `sda`; -P prints `ata-X-part1`), a partition it was given with its own (`ata-X-part3`, `sda3`,
    `nvme0n1p2`, `ada0p3`, a `gpt/` label or a partuuid); from both, `partition` says `whole disk`,
    `partition`, `mixed` or `file` (file vdevs). Without `names_text` (results of a release that did
    not read it) there is no `partition` field, so their ids stay. Unknown parts say `unknown`."""
    from ..sources.zpool import parse_status  # the exporter's parser: one reading of `zpool status`

    try:
        statuses = [s for s in parse_status(status_text) if s.name == pool]
    except (ValueError, IndexError):
        statuses = []
    if not statuses:
        return pairs({"vdevs": UNKNOWN, "ashift": ashift or UNKNOWN, "models": UNKNOWN,
                      **({"partition": UNKNOWN} if names_text is not None else {})})
    vdevs = statuses[0].vdevs
    children = Counter(v.parent for v in vdevs)
    tops = []
    for v in vdevs:
        if v.parent != pool:
            continue
        kind = "disk" if v.is_leaf else v.name.rsplit("-", 1)[0]
        tops.append(f"{v.role}:{kind}:{1 if v.is_leaf else children[v.name]}")
    leaves = [v.name for v in vdevs if v.is_leaf and v.role not in ("cache", "spare")]
    counted = Counter((models or {}).get(leaf) or UNKNOWN for leaf in leaves)
    layout = {"vdevs": ",".join(sorted(tops)) or UNKNOWN, "ashift": ashift or UNKNOWN,
              "models": ",".join(f"{m} x{n}" for m, n in sorted(counted.items())) or UNKNOWN}
    if names_text is not None:
        layout["partition"] = _partitioning(vdevs, names_text, pool)
    return pairs(layout)


# A partition as `zpool status` names it without -P: Linux `-partN` (by-id, by-path), `sdaN`,
# `vdbN`, `nvme0n1pN`, `mmcblk0pN`; FreeBSD `ada0p3`, `da1s1a`, `gpt/<label>`, `gptid/<uuid>`; a
# partuuid (`/dev/disk/by-partuuid/<uuid>`, as TrueNAS SCALE builds its pools).
_PARTITION_NAME = re.compile(r"(-part\d+$|^(?:x?[shv]d[a-z]+)\d+$|^(?:nvme\d+n\d+|mmcblk\d+|nbd\d+)p\d+$"
                             r"|^(?:ada|da|nvd|nda|vtbd|mfid|ad)\d+(?:p\d+|s\d+[a-h]?)$|^(?:gpt|gptid|label)/"
                             r"|^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)", re.IGNORECASE)
_PARTITION_DIRS = ("/dev/disk/by-partuuid/", "/dev/disk/by-partlabel/", "/dev/gpt/", "/dev/gptid/")


def _partitioning(vdevs: list[Any], names_text: str, pool: str) -> str:
    """`whole disk`, `partition`, `mixed` or `file` for the data leaves of `pool` (cache and spares
    aside), pairing the -P paths with the names `zpool status` prints by position."""
    from ..sources.zpool import parse_status

    try:
        named = [s for s in parse_status(names_text) if s.name == pool]
    except (ValueError, IndexError):
        named = []
    leaves = [v for v in vdevs if v.is_leaf]
    names = [v for v in named[0].vdevs if v.is_leaf] if named else []
    if len(names) != len(leaves):
        return UNKNOWN
    kinds = set()
    for path, name in zip(leaves, names):
        if path.role in ("cache", "spare"):
            continue
        if path.name.startswith("/") and not path.name.startswith("/dev/"):
            kinds.add("file")
        elif path.name.startswith(_PARTITION_DIRS) or _PARTITION_NAME.search(name.name.rsplit("/dev/", 1)[-1]):
            kinds.add("partition")
        else:
            kinds.add("whole disk")
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else UNKNOWN


def leaf_paths(status_text: str, pool: str) -> list[str]:
    from ..sources.zpool import parse_status

    try:
        return [v.name for s in parse_status(status_text) if s.name == pool for v in s.vdevs if v.is_leaf]
    except (ValueError, IndexError):
        return []


# --- results stored before configurations existed -----------------------------------------------

def legacy_configuration(row: Mapping[str, Any], run: Mapping[str, Any] | None) -> Configuration:
    """The configuration of a result row written before this module existed: what the row and its
    matrix run recorded (labels, properties, `zpool status`, version, host); parameters, data
    settings and `direct` were not recorded and say `unknown`, so these never merge with new runs."""
    try:
        props = json.loads(row.get("properties") or "{}")
    except ValueError:
        props = {}
    props = dict(measured_properties(props))
    props.setdefault("compression", row["compression"])
    if "volblocksize" not in props:
        props.setdefault("recordsize", row["recordsize"])
    props.setdefault("encryption", row.get("encryption") or "off")
    run = run or {}
    return Configuration(
        matrix=row["matrix"], workload=row.get("workload") or row.get("job") or UNKNOWN, size=row["size"],
        data=pairs({"settings": UNKNOWN}), properties=pairs(props), pool=row["pool"],
        layout=pool_layout(run.get("pool_layout") or "", row["pool"]), parameters=pairs({"recorded": UNKNOWN}),
        zfs_version=run.get("zfs_version") or UNKNOWN, direct=UNKNOWN, host=row.get("host") or UNKNOWN)
