"""What a configuration takes from a dataset that exists: the properties that shape I/O, the pool's
layout, the module parameters in force, the OpenZFS version and the host. Used by `watch` and by
`import --dataset/--zvol`, which measure (or were measured) against a dataset the runner did not
create; `run` builds its cells' configurations in planner.py.

Also turns `--set KEY=VALUE` into configuration parts: a ZFS property name (volblocksize,
compression, recordsize, ...) sets that property, anything else is a label (ram, client, protocol).
Reads through zfs.py and parameters.py; writes nothing, anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...sources.model import SourceError
from ...store.configuration import UNKNOWN, Configuration, Pairs, pairs
from ..running.parameters import Parameters
from ..running.zfs import ZfsOps

# Dataset properties that shape a workload's I/O: kept in the configuration of a watched or imported
# result (only those the dataset has: a volume has no recordsize, a filesystem no volblocksize).
IO_PROPERTIES = ("compression", "recordsize", "volblocksize", "encryption", "sync", "logbias", "primarycache",
                 "secondarycache", "dedup", "copies", "checksum", "atime", "special_small_blocks", "xattr",
                 "direct")
# Properties `--set` may give for a dataset that is not at hand (a result measured elsewhere).
SETTABLE = set(IO_PROPERTIES) | {"ashift"}


class IdentityError(Exception):
    pass


@dataclass(frozen=True)
class DatasetIdentity:
    dataset: str
    kind: str                 # filesystem or volume
    pool: str
    properties: Pairs
    layout: Pairs
    parameters: Pairs
    zfs_version: str
    host: str
    status: str               # `zpool status -P` of the pool, kept with the matrix run


def read_identity(zfs: ZfsOps, params: Parameters, dataset: str, host: str, want: str | None = None) \
        -> DatasetIdentity:
    """The identity of an existing dataset (IdentityError when it does not exist or is not of the
    `want`ed type: "filesystem" or "volume")."""
    try:
        props = zfs.get(dataset, ",".join(("type", *IO_PROPERTIES)))
    except SourceError as exc:
        raise IdentityError(f"{dataset}: {exc}") from None
    if not props:
        raise IdentityError(f"{dataset}: no such dataset (zfs list shows the ones there are)")
    kind = props["type"].value
    if kind not in ("filesystem", "volume"):
        raise IdentityError(f"{dataset} is a {kind}, not a filesystem or volume")
    if want is not None and kind != want:
        raise IdentityError(f"{dataset} is a {kind}, not a {want}")
    pool = dataset.split("/")[0]
    status, layout = zfs.pool_layout(pool)
    measured = {k: p.value for k, p in props.items() if k != "type" and p.value not in ("-", "")}
    return DatasetIdentity(dataset, kind, pool, pairs(measured), layout, pairs(params.identity(())),
                           zfs.versions() or UNKNOWN, host, status)


def split_settings(settings: list[tuple[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    """`--set` pairs as (dataset properties, labels)."""
    properties: dict[str, str] = {}
    labels: dict[str, str] = {}
    for key, value in settings:
        (properties if key in SETTABLE else labels)[key] = value
    return properties, labels


def configuration(matrix: str, workload: str, size: str, data: dict[str, str], identity: DatasetIdentity | None,
                  settings: list[tuple[str, str]], label: str | None = None, direct: str = UNKNOWN) -> Configuration:
    """A watched or imported result's configuration: the dataset's identity when there is one,
    `--set` properties over it, the other `--set` pairs and `--label` as labels."""
    properties, labels = split_settings(settings)
    if label:
        labels["label"] = label
    if identity is not None:
        props = {**dict(identity.properties), **properties}
        data = {"kind": identity.kind, **data}
        return Configuration(matrix=matrix, workload=workload, size=size, data=pairs(data), properties=pairs(props),
                             pool=identity.pool, layout=identity.layout, parameters=identity.parameters,
                             zfs_version=identity.zfs_version, direct=direct, host=identity.host,
                             user_labels=pairs(labels))
    pool = labels.pop("pool", UNKNOWN)
    return Configuration(matrix=matrix, workload=workload, size=size, data=pairs(data), properties=pairs(properties),
                         pool=pool, layout=pairs({"vdevs": UNKNOWN}), parameters=pairs({"recorded": UNKNOWN}),
                         zfs_version=UNKNOWN, direct=direct, host=labels.pop("host", UNKNOWN),
                         user_labels=pairs(labels))
