"""Matrix files (TOML): which jobs to run with which dataset properties, sizes and repeats.

Owns parsing and validating a matrix into `Matrix`/`Cell` values; every mistake becomes a
`MatrixError` naming the file and the key. It runs nothing and touches no dataset.

A matrix has top-level defaults and optional `[[sweep]]` tables; each sweep inherits the
defaults and overrides any of them, and its cells are the cross product of its axes
(workload x compression x recordsize x encryption x size x compressibility x each module
parameter of `[parameters]`) times `repeats`. No sweep means one sweep made of the defaults.
`jobs`/`job` are accepted as older spellings of `workloads`/`workload`.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AXES = ("workload", "compression", "recordsize", "encryption", "size", "compressibility")
ALIASES = {"job": "workload"}    # matrices written before `workload` replaced `job`
KINDS = ("filesystem", "volume")
SCALAR_KEYS: dict[str, type | tuple[type, ...]] = {
    "repeats": int, "runtime": (int, float), "ramp_time": (int, float), "corpus": str, "kind": str, "direct": bool}
TOP_ONLY = {"name", "description", "dataset", "properties", "parameters", "sweep"}
_PARAMETER = re.compile(r"^[a-z][a-z0-9_]*$")
_SIZE = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGTP]?)(?:i?B)?$", re.IGNORECASE)
_DIRTY = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*x\s*dirty(?:_data_max)?$", re.IGNORECASE)
_PROPERTY = re.compile(r"^[a-z][a-z0-9_.:-]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.:+/-]+$")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


class MatrixError(ValueError):
    """The matrix is invalid; the message names the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One cell to run once: a child dataset with these properties, module parameters and one workload."""

    workload: str
    compression: str
    recordsize: str          # volblocksize for kind = "volume"
    encryption: str
    size: str                # as written: "70G", "4x dirty", or "all" (the whole corpus, copy job)
    repeat: int
    kind: str = "filesystem"
    runtime: float = 0.0     # fio time-based runtime in seconds; 0 = run until `size` is written
    ramp_time: float = 0.0
    corpus: str = ""
    compressibility: int = 50
    properties: tuple[tuple[str, str], ...] = ()
    direct: bool = True
    parameters: tuple[tuple[str, str], ...] = ()   # module parameter -> value as written ("1G", "30")


@dataclass(frozen=True)
class Matrix:
    name: str
    description: str
    dataset: str
    cells: tuple[Cell, ...]
    path: str = ""
    properties: tuple[tuple[str, str], ...] = field(default=())


def is_dirty_multiple(size: str) -> bool:
    """Whether a size is written as a multiple of zfs_dirty_data_max ("4x dirty")."""
    return _DIRTY.match(size) is not None


def parse_size(text: str, dirty_data_max: int | None = None) -> int:
    """Bytes of "70G", "512K", "1.5T" (powers of 1024) or "4x dirty" (x zfs_dirty_data_max)."""
    text = str(text).strip()
    if match := _DIRTY.match(text):
        if not dirty_data_max:
            raise MatrixError(f"size {text!r} needs zfs_dirty_data_max (not readable here; pass --dirty-data-max)")
        return int(float(match["number"]) * dirty_data_max)
    if match := _SIZE.match(text):
        return int(float(match["number"]) * UNITS[match["unit"].upper()])
    raise MatrixError(f"size {text!r}: expected a number with K/M/G/T or '<n>x dirty'")


def _list(where: str, key: str, value: object) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise MatrixError(f"{where}: {key} is empty")
    out = []
    for item in items:
        if not isinstance(item, (str, int, float)) or isinstance(item, bool):
            raise MatrixError(f"{where}: {key} must hold strings, got {item!r}")
        text = str(item)
        if key == "compressibility" and not (text.isdigit() and 0 <= int(text) <= 100):
            raise MatrixError(f"{where}: compressibility is a percentage (0-100), got {text!r}")
        if key != "size" and not _VALUE.match(text):
            raise MatrixError(f"{where}: {key} value {text!r} has characters a ZFS property value cannot take")
        out.append(text)
    return out


def _properties(where: str, table: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, dict):
        raise MatrixError(f"{where}: properties must be a table")
    out = []
    for key, value in table.items():
        if not _PROPERTY.match(key) or key.startswith("org.zfsnas:"):
            raise MatrixError(f"{where}: property {key!r} is not allowed")
        if key in ("compression", "recordsize", "volblocksize", "encryption", "keyformat", "keylocation"):
            raise MatrixError(f"{where}: property {key!r} is set by the matrix axes, not [properties]")
        if not _VALUE.match(str(value)):
            raise MatrixError(f"{where}: property {key} value {value!r} is not allowed")
        out.append((key, str(value)))
    return tuple(out)


def _settings(where: str, table: dict, base: dict) -> dict:
    settings = dict(base)
    for key, value in table.items():
        if key in TOP_ONLY:
            continue
        axis = key[:-1] if key.endswith("s") and key[:-1] in (*AXES, *ALIASES) else key  # "jobs" or "job"
        axis = ALIASES.get(axis, axis)
        if axis in AXES:
            settings[axis] = _list(where, key, value)
        elif key in SCALAR_KEYS:
            wanted = SCALAR_KEYS[key]
            if not isinstance(value, wanted) or (isinstance(value, bool) and wanted is not bool):
                raise MatrixError(f"{where}: {key} has the wrong type ({value!r})")
            settings[key] = value
        else:
            known = ", ".join(sorted([*AXES, *ALIASES, *SCALAR_KEYS, *TOP_ONLY]))
            raise MatrixError(f"{where}: unknown key {key!r} (known: {known})")
    return settings


DEFAULTS = {"workload": None, "compression": ["lz4"], "recordsize": ["128K"], "encryption": ["off"], "size": None,
            "repeats": 1, "runtime": 0, "ramp_time": 0, "corpus": "", "kind": "filesystem", "compressibility": ["50"],
            "direct": True}


def _parameters(where: str, table: object) -> tuple[tuple[str, list[str]], ...]:
    """`[parameters]`: module parameter name -> the values to sweep (sizes like "4G" allowed)."""
    if not isinstance(table, dict):
        raise MatrixError(f"{where}: parameters must be a table (name = [values])")
    out = []
    for name, values in table.items():
        if not _PARAMETER.match(name):
            raise MatrixError(f"{where}: parameter name {name!r} is not a ZFS module parameter name")
        out.append((name, _list(where, f"parameters.{name}", values)))
    return tuple(out)


def parse_matrix(text: str, where: str = "matrix", job_names: set[str] | None = None) -> Matrix:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{where}: not valid TOML: {exc}") from None
    name = data.get("name") or Path(where).stem
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_.-]+$", name):
        raise MatrixError(f"{where}: name {name!r} may hold only letters, digits, '.', '_' and '-'")
    dataset = data.get("dataset", "")
    if not isinstance(dataset, str):
        raise MatrixError(f"{where}: dataset must be a string")
    properties = _properties(where, data.get("properties", {}))
    base = _settings(where, data, DEFAULTS)
    sweeps = data.get("sweep", [{}])
    if not isinstance(sweeps, list) or not all(isinstance(s, dict) for s in sweeps):
        raise MatrixError(f"{where}: sweep must be an array of tables ([[sweep]])")
    cells: list[Cell] = []
    seen = set()
    for index, sweep in enumerate(sweeps, 1):
        here = f"{where} sweep {index}" if "sweep" in data else where
        settings = _settings(here, sweep, base)
        extra = properties + _properties(here, sweep.get("properties", {}))
        params = dict(_parameters(where, data.get("parameters", {})))
        params.update(_parameters(here, sweep.get("parameters", {})))
        _check_sweep(here, settings, job_names)
        for cell in _sweep_cells(settings, extra, params):
            if cell not in seen:  # sweeps may share a configuration (e.g. zstd-1 at 1M)
                seen.add(cell)
                cells.append(cell)
    return Matrix(name=name, description=str(data.get("description", "")), dataset=dataset,
                  cells=tuple(cells), path=where, properties=properties)


def _check_sweep(here: str, settings: dict[str, Any], job_names: set[str] | None) -> None:
    """Refuse a sweep that misses its workload or size, or gives a kind, repeat count, job or size
    that cannot run."""
    for key in ("workload", "size"):
        if not settings[key]:
            raise MatrixError(f"{here}: no {key} given")
    if settings["kind"] not in KINDS:
        raise MatrixError(f"{here}: kind must be one of {', '.join(KINDS)}")
    if settings["repeats"] < 1:
        raise MatrixError(f"{here}: repeats must be at least 1")
    for job in settings["workload"]:
        if job_names is not None and job not in job_names:
            raise MatrixError(f"{here}: unknown job {job!r} (known: {', '.join(sorted(job_names))})")
        if job == "copy" and not settings["corpus"]:
            raise MatrixError(f"{here}: job 'copy' needs corpus = '<directory of your own files>'")
    for size in settings["size"]:
        if size == "all":
            if settings["workload"] != ["copy"]:
                raise MatrixError(f"{here}: size 'all' (the whole corpus) is for the copy job only")
        elif not _DIRTY.match(size):
            parse_size(size)


def _sweep_cells(settings: dict[str, Any], extra: tuple[tuple[str, str], ...],
                 params: dict[str, list[str]]) -> Iterator[Cell]:
    """Every cell of one sweep: the product of its axes and its parameter values, each repeat."""
    names = sorted(params)
    for (job, compression, recordsize, encryption, size, compress), values in itertools.product(
            itertools.product(*(settings[axis] for axis in AXES)),
            itertools.product(*(params[n] for n in names))):
        for repeat in range(1, settings["repeats"] + 1):
            yield Cell(workload=job, compression=compression, recordsize=recordsize, encryption=encryption,
                       size=size, repeat=repeat, kind=settings["kind"], runtime=float(settings["runtime"]),
                       ramp_time=float(settings["ramp_time"]), corpus=settings["corpus"],
                       compressibility=int(compress), properties=extra, direct=settings["direct"],
                       parameters=tuple(zip(names, values)))


def load_matrix(path: str | Path, job_names: set[str] | None = None) -> Matrix:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise MatrixError(f"{path}: {exc.strerror or exc}") from None
    return parse_matrix(text, str(path), job_names)
