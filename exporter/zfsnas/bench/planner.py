"""Planner: a matrix's cells -> the ordered steps of a run, with the exact zfs/fio argv lists.

Owns what a run will do, so `--dry-run` can print it and the runner can execute exactly that.
It runs nothing. Per cell: create a child of the scratch dataset with the cell's properties and
the run mark, run the job (fio or a corpus copy), `zpool sync` and wait for the txg, read the
space properties, destroy the child (unless --keep).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .copy import corpus_bytes
from .guard import RUN_PROPERTY, child_name
from .matrix import Cell, Matrix, parse_size

SPACE_PROPERTIES = ("compressratio", "used", "logicalused", "referenced", "logicalreferenced")
MIN_SIZE = 4 << 20


@dataclass(frozen=True)
class Step:
    """One command of a run. `kind` is create, fio, copy, sync, space or destroy."""

    kind: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return (env + " " if env else "") + shlex.join(self.argv)


@dataclass(frozen=True)
class CellPlan:
    index: int
    cell: Cell
    child: str
    pool: str
    size_bytes: int
    target: str              # fio's filename or the copy destination
    properties: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]
    estimate_seconds: float = 0.0

    @property
    def config(self) -> dict[str, str]:
        return {**self.cell.labels, "pool": self.pool}


@dataclass
class PlanOptions:
    scratch: str
    run_id: str
    jobs_dir: Path
    results_dir: Path
    mountpoint: str = ""           # the scratch dataset's mountpoint; default "/<scratch>"
    dirty_data_max: int | None = None
    size_scale: float = 1.0
    time_scale: float = 1.0
    keep: bool = False
    direct: bool = True
    zvol_root: str = "/dev/zvol"
    key_file: str = ""
    fio: str = "fio"
    extra_env: dict[str, str] = field(default_factory=dict)


def fio_time(seconds: float) -> str:
    """fio reads "0.5" as 0 (and then refuses time_based): whole seconds, else milliseconds."""
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{round(seconds * 1000)}ms"


def cell_properties(cell: Cell, opts: PlanOptions) -> tuple[tuple[str, str], ...]:
    props = [(RUN_PROPERTY, opts.run_id), ("compression", cell.compression)]
    props.append(("volblocksize" if cell.kind == "volume" else "recordsize", cell.recordsize))
    if cell.encryption != "off":
        props += [("encryption", cell.encryption), ("keyformat", "hex"),
                  ("keylocation", f"file://{opts.key_file or '<generated key file>'}")]
    return tuple(props) + cell.properties


def plan_cell(index: int, cell: Cell, opts: PlanOptions) -> CellPlan:
    child = child_name(opts.scratch, opts.run_id, index)
    pool = opts.scratch.split("/", 1)[0]
    if cell.size == "all":
        size = corpus_bytes(cell.corpus) if Path(cell.corpus).is_dir() else 0
    else:
        size = int(parse_size(cell.size, opts.dirty_data_max) * opts.size_scale)
        if cell.job != "copy":  # fio needs room for its queue; a corpus prefix can be any size
            size = max(MIN_SIZE, size)
    props = cell_properties(cell, opts)
    create = ["zfs", "create"]
    if cell.kind == "volume":
        create += ["-s", "-V", str(size + size // 8 + MIN_SIZE)]
    for key, value in props:
        create += ["-o", f"{key}={value}"]
    steps = [Step("create", (*create, child))]
    leaf = child.rsplit("/", 1)[1]
    if cell.kind == "volume":
        target = f"{opts.zvol_root}/{child}"
    else:
        mount = (opts.mountpoint or "/" + opts.scratch).rstrip("/")
        target = f"{mount}/{leaf}/" + ("corpus" if cell.job == "copy" else "fio.dat")
    runtime = cell.runtime * opts.time_scale
    ramp = cell.ramp_time * opts.time_scale
    if cell.job == "copy":
        steps.append(Step("copy", ("zfsnas-bench-copy", cell.corpus, target, str(size))))
        estimate = 0.0
    else:
        env = {"ZFSNAS_FILE": target, "ZFSNAS_SIZE": str(size), "ZFSNAS_RUNTIME": fio_time(runtime),
               "ZFSNAS_RAMP": fio_time(ramp), "ZFSNAS_COMPRESS": str(cell.compressibility),
               "ZFSNAS_DIRECT": "1" if opts.direct else "0", **opts.extra_env}
        output = str(opts.results_dir / f"{leaf}.json")
        steps.append(Step("fio", (opts.fio, "--output-format=json", f"--output={output}",
                                  str(opts.jobs_dir / f"{cell.job}.fio")), tuple(env.items())))
        estimate = runtime + ramp
    steps.append(Step("sync", ("zpool", "sync", pool)))
    steps.append(Step("space", ("zfs", "get", "-Hp", "-o", "property,value", ",".join(SPACE_PROPERTIES), child)))
    if not opts.keep:
        steps.append(Step("destroy", ("zfs", "destroy", child)))
    return CellPlan(index, cell, child, pool, size, target, props, tuple(steps), estimate)


def plan_matrix(matrix: Matrix, opts: PlanOptions) -> list[CellPlan]:
    return [plan_cell(index, cell, opts) for index, cell in enumerate(matrix.cells, 1)]


def checks(scratch: str) -> list[Step]:
    """The read-only commands the runner issues before anything else."""
    return [Step("check", ("zfs", "get", "-Hp", "-o", "property,value,source",
                           "type,origin,available,mountpoint,org.zfsnas:scratch", scratch))]


def render_plan(matrix: Matrix, plans: list[CellPlan]) -> str:
    timed = sum(p.estimate_seconds for p in plans)
    largest = max((p.size_bytes for p in plans), default=0)
    lines = [f"# matrix {matrix.name}: {len(plans)} cells on {plans[0].child.rsplit('/', 1)[0] if plans else '-'}; "
             f"fio time-based runs alone take {timed / 60:.1f} min; the largest cell needs {largest / 2**30:.2f} GiB"]
    if plans:
        lines += [step.shell() for step in checks(plans[0].child.rsplit("/", 1)[0])]
    for plan in plans:
        c = plan.cell
        lines.append(f"# cell {plan.index}/{len(plans)}: job={c.job} compression={c.compression} "
                     f"{'volblocksize' if c.kind == 'volume' else 'recordsize'}={c.recordsize} "
                     f"encryption={c.encryption} size={c.size} ({plan.size_bytes} bytes) repeat={c.repeat}")
        lines += [step.shell() for step in plan.steps]
    return "\n".join(lines) + "\n"
