"""Planner: a matrix's cells -> the ordered steps of a run, with the exact zfs/fio argv lists.

Owns what a run will do, so `--dry-run` can print it and the runner can execute exactly that.
It runs nothing. Per cell: set the cell's module parameters (if any), create a child of the
scratch dataset with the cell's properties and the run mark, lay out the data (the job file's
`[prefill]` section, then `zpool sync`: outside every measured figure), run the measured job (fio
or a corpus copy), `zpool sync` and wait for the txg, read the space properties, destroy the
child (unless --keep), restore the parameters. It also builds each cell's `Configuration`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...store.configuration import Configuration, measured_properties, pairs
from .copy import corpus_bytes, corpus_stats
from .guard import RUN_PROPERTY, child_name
from .matrix import Cell, Matrix, is_dirty_multiple, parse_size
from .parameters import Change, Parameters, changes

SPACE_PROPERTIES = ("compressratio", "used", "logicalused", "referenced", "logicalreferenced")
BASELINE_PROPERTIES = ("type", "origin", RUN_PROPERTY, "used", "logicalused")
MIN_SIZE = 4 << 20


@dataclass(frozen=True)
class Step:
    """One command of a run. `kind` is create, baseline (a racing copy's child's space before the
    copy), prefill, settle (the sync after a prefill), fio, copy, sync, space or destroy."""

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
    direct: bool = True
    changes: tuple[Change, ...] = ()      # module parameters set for this cell, restored after it
    data: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Environment:
    """What a configuration takes from the host at run start (`zpool status`/`zpool get`, the
    module parameters in force, `zfs version`, the host name)."""

    pool: str
    layout: tuple[tuple[str, str], ...]
    parameters: dict[str, str]
    zfs_version: str
    host: str
    labels: tuple[tuple[str, str], ...] = ()    # `--set KEY=VALUE` of the run


def configuration(matrix: str, plan: CellPlan, env: Environment) -> Configuration:
    """The configuration of one planned cell on this host: the one place a cell becomes one."""
    params = dict(env.parameters)
    params.update({c.name: c.value for c in plan.changes})
    return Configuration(matrix=matrix, workload=plan.cell.workload, size=plan.cell.size, data=plan.data,
                         properties=measured_properties(plan.properties), pool=plan.pool, layout=env.layout,
                         parameters=pairs(params), zfs_version=env.zfs_version, direct="1" if plan.direct else "0",
                         host=env.host, swept=tuple(c.name for c in plan.changes), user_labels=pairs(env.labels))


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
    ram: int | None = None         # bytes, for the size checks of module parameters
    ioengine: str = "libaio"       # posixaio on FreeBSD, where libaio does not exist
    racing: bool = False           # `run --until-decided`: cells end once their rate is steady


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


def has_prefill(job_file: Path) -> bool:
    """Whether a fio job file lays out its data first in a `[prefill]` section."""
    try:
        return re.search(r"^\s*\[prefill\]", job_file.read_text(), re.M) is not None
    except OSError:
        return False


def corpus_data(corpus: str) -> dict[str, str]:
    files, total = corpus_stats(corpus)
    return {"corpus": corpus, "corpus_files": str(files), "corpus_bytes": str(total)}


def plan_cell(index: int, cell: Cell, opts: PlanOptions) -> CellPlan:
    child = child_name(opts.scratch, opts.run_id, index)
    pool = opts.scratch.split("/", 1)[0]
    if cell.size == "all":
        size = corpus_bytes(cell.corpus) if Path(cell.corpus).is_dir() else 0
    else:
        size = int(parse_size(cell.size, opts.dirty_data_max) * opts.size_scale)
        if cell.workload != "copy":  # fio needs room for its queue; a corpus prefix can be any size
            size = max(MIN_SIZE, size)
    direct = cell.direct and opts.direct
    wanted = tuple(changes(cell.parameters, opts.ram))
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
        target = f"{mount}/{leaf}/" + ("corpus" if cell.workload == "copy" else "fio.dat")
    runtime = cell.runtime * opts.time_scale
    ramp = cell.ramp_time * opts.time_scale
    data = {"bytes": str(size), "kind": cell.kind}
    if cell.workload == "copy":
        data.update(corpus_data(cell.corpus) if Path(cell.corpus).is_dir() else {"corpus": cell.corpus})
        if opts.racing:
            steps.append(baseline_step(child))
        steps.append(Step("copy", ("zfsnas-bench-copy", cell.corpus, target, str(size), *racing_copy(opts, cell))))
        estimate = 0.0
    else:
        data.update(compressibility=str(cell.compressibility), runtime=f"{runtime:g}", ramp_time=f"{ramp:g}")
        env = tuple({"ZFSNAS_FILE": target, "ZFSNAS_SIZE": str(size), "ZFSNAS_RUNTIME": fio_time(runtime),
                     "ZFSNAS_RAMP": fio_time(ramp), "ZFSNAS_COMPRESS": str(cell.compressibility),
                     "ZFSNAS_DIRECT": "1" if direct else "0", "ZFSNAS_IOENGINE": opts.ioengine,
                     **opts.extra_env}.items())
        job_file = opts.jobs_dir / f"{cell.workload}.fio"
        fio: tuple[str, ...] = (opts.fio, "--output-format=json")
        if has_prefill(job_file):  # laid out first, timed and probed apart from the measured job
            steps.append(Step("prefill", (*fio, f"--output={opts.results_dir / f'{leaf}-prefill.json'}",
                                          "--section=prefill", str(job_file)), env))
            steps.append(Step("settle", ("zpool", "sync", pool)))
            fio += (f"--section={cell.workload}",)
        fio += steady_state(cell, runtime) if opts.racing else ()
        steps.append(Step("fio", (*fio, f"--output={opts.results_dir / f'{leaf}.json'}", str(job_file)), env))
        estimate = runtime + ramp
    steps.append(Step("sync", ("zpool", "sync", pool)))
    steps.append(Step("space", ("zfs", "get", "-Hp", "-o", "property,value", ",".join(SPACE_PROPERTIES), child)))
    if not opts.keep:
        steps.append(Step("destroy", ("zfs", "destroy", child)))
    return CellPlan(index, cell, child, pool, size, target, props, tuple(steps), estimate, direct, wanted,
                    pairs(data))


def steady_state(cell: Cell, runtime: float) -> tuple[str, ...]:
    """fio's own steady-state detection for a racing cell whose job allows it: a time-based job (a
    runtime) that is no write-size experiment; the job ends once its bandwidth's slope over the
    last quarter of the runtime (2-30 s) stays within 1 % of its mean."""
    if runtime <= 0 or is_dirty_multiple(cell.size):
        return ()
    duration = min(30.0, max(2.0, runtime / 4))
    ramp = min(10.0, max(1.0, runtime / 10))
    if duration + ramp >= runtime:
        return ()
    return ("--steadystate=bw_slope:1%", f"--steadystate_duration={fio_time(duration)}",
            f"--steadystate_ramp_time={fio_time(ramp)}")


def racing_copy(opts: PlanOptions, cell: Cell) -> tuple[str, ...]:
    """A racing copy copies the corpus window by window in stratified order (every prefix holds each
    stratum's share of the bytes, as the whole corpus does; a window is 1 MiB, or the recordsize
    when larger: whole records) and ends at the sustained rate, once the dirty data buffer has filled."""
    if not opts.racing:
        return ()
    window = max(1 << 20, int(parse_size(cell.recordsize)))
    return ("--stratified", f"--window={window}",
            *([f"--until-sustained={opts.dirty_data_max}"] if opts.dirty_data_max else []))


def baseline_step(child: str) -> Step:
    """A racing copy's child read before the copy: its space (the cell's own is what the copy adds)
    and its mark (a kept child is written again only when this run made it)."""
    return Step("baseline", ("zfs", "get", "-Hp", "-o", "property,value,source", ",".join(BASELINE_PROPERTIES), child))


def in_kept_child(plan: CellPlan, kept: CellPlan) -> CellPlan:
    """A racing copy's repeat, planned into the child its configuration's earlier cell kept (`kept`):
    no create and no destroy (the runner destroys kept children when the run ends), the copy into a
    directory of its own beside the earlier copies, its space what it adds to the child's. A copy
    writes new files only, whose blocks follow the child's compression and recordsize as a fresh
    child's would; what a repeat saves is a `zfs create` and a `zfs destroy` (each a txg sync, and the
    destroy's frees would run during the next cell's copy)."""
    if plan.cell.workload != "copy" or kept.cell.workload != "copy":
        raise ValueError("only a copy's repeat goes into a kept child")
    copy = next(s for s in plan.steps if s.kind == "copy")
    target = f"{kept.target}-r{plan.cell.repeat}"
    steps = [baseline_step(kept.child), Step("copy", (copy.argv[0], copy.argv[1], target, *copy.argv[3:]))]
    steps += [Step(s.kind, s.argv[:-1] + (kept.child,)) if s.kind in ("space", "destroy") else s
              for s in plan.steps if s.kind in ("sync", "space", "destroy")]
    return replace(plan, child=kept.child, target=target, steps=tuple(steps))


def plan_matrix(matrix: Matrix, opts: PlanOptions) -> list[CellPlan]:
    """The cells of `matrix`; racing plans each configuration once (the race asks for repeats)."""
    cells = [c for c in matrix.cells if c.repeat == 1] if opts.racing else list(matrix.cells)
    return [plan_cell(index, cell, opts) for index, cell in enumerate(cells, 1)]


def checks(scratch: str) -> list[Step]:
    """The read-only commands the runner issues before anything else."""
    return [Step("check", ("zfs", "get", "-Hp", "-o", "property,value,source",
                           "type,origin,available,mountpoint,org.zfsnas:scratch", scratch))]


def direct_note(plan: CellPlan) -> str | None:
    """A dirty-data experiment run with O_DIRECT measures something else: say so in the plan."""
    c = plan.cell
    if plan.direct and (is_dirty_multiple(c.size) or any(n.startswith("zfs_dirty_data") for n, _ in c.parameters)):
        return (f"# note: cell {plan.index} runs with direct=1, which bypasses the dirty-data buffering it sweeps; "
                f"set direct = false in the matrix or pass --no-direct")
    return None


def parameter_lines(plan: CellPlan, params: Parameters | None) -> tuple[list[str], list[str]]:
    """The change lines before a cell and the restore lines after it, with the value now in force."""
    before, after = [], []
    for change in plan.changes:
        try:
            now = params.read(change.name) if params else "unknown"
        except (OSError, RuntimeError, ValueError):
            now = "unknown"
        set_cmd = params.shell(change.name, change.value) if params else f"{change.name}={change.value}"
        back_cmd = params.shell(change.name, now) if params else f"{change.name}={now}"
        before.append(f"# parameter {change.name}: {now} -> {change.value} ({change.written}); "
                      f"the value in force is saved to the database first")
        before.append(set_cmd)
        after.append(f"# restore {change.name}: {change.value} -> {now}")
        after.append(back_cmd)
    return before, after


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def cell_fields(plan: CellPlan) -> dict[str, str]:
    """What a cell is, field by field, as a plan or progress line names it."""
    c = plan.cell
    size = c.size if c.size == "all" and not plan.size_bytes else f"{c.size} ({_bytes(plan.size_bytes)})"
    fields = {"workload": c.workload, "compression": c.compression,
              "volblocksize" if c.kind == "volume" else "recordsize": c.recordsize, "encryption": c.encryption,
              "size": size}
    if c.workload != "copy":
        fields["compressibility"] = f"{c.compressibility}%"
    fields.update({k: v for k, v in c.properties})
    fields.update({change.name: change.written for change in plan.changes})
    fields["direct"] = str(int(plan.direct))
    fields["repeat"] = str(c.repeat)
    return fields


def varying_fields(plans: list[CellPlan]) -> list[str]:
    """The fields that tell a matrix's cells apart (the workload always, and the repeat when repeated)."""
    all_fields = [cell_fields(p) for p in plans]
    keys = list(dict.fromkeys(k for f in all_fields for k in f))
    return [k for k in keys if k == "workload" or len({f.get(k) for f in all_fields}) > 1]


def cell_text(plan: CellPlan, fields: list[str] | None = None) -> str:
    """`workload=... compression=... size=1G (10.2 MiB)`: every field, or those of `fields`."""
    return " ".join(f"{k}={v}" for k, v in cell_fields(plan).items() if fields is None or k in fields)


def render_plan(matrix: Matrix, plans: list[CellPlan], params: Parameters | None = None,
                labels: tuple[tuple[str, str], ...] = ()) -> str:
    timed = sum(p.estimate_seconds for p in plans)
    largest = max((p.size_bytes for p in plans), default=0)
    lines = [f"# matrix {matrix.name}: {len(plans)} cells on {plans[0].child.rsplit('/', 1)[0] if plans else '-'}; "
             f"fio time-based runs alone take {timed / 60:.1f} min; the largest cell needs {largest / 2**30:.2f} GiB"]
    if plans:
        lines += [step.shell() for step in checks(plans[0].child.rsplit("/", 1)[0])]
    varying = varying_fields(plans)
    if plans:
        lines.append(f"# the cells differ in: {', '.join(varying)}")
    if labels:
        lines.append(f"# labels of every configuration (--set): {' '.join(f'{k}={v}' for k, v in labels)}")
    for plan in plans:
        lines.append(f"# cell {plan.index}/{len(plans)}: {cell_text(plan)}")
        if note := direct_note(plan):
            lines.append(note)
        before, after = parameter_lines(plan, params)
        lines += before + [step.shell() for step in plan.steps] + after
    return "\n".join(lines) + "\n"
