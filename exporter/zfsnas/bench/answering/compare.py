"""`zfsnas-bench compare`: two kinds of comparison, never confused.

- **A vs B** (configurations that differ: mirror vs RAID-Z2, volblocksize 4K vs 16K, lz4 vs
  zstd-7, SMB vs NFS): both sides' figures per workload and setting (MB/s, IOPS, latency, ratio,
  on-disk size, CPU user and system), the difference in % and absolute, exactly what differs
  between the sides, and whether the throughput difference exceeds the spread of the repeats (with
  one run each: the noise is unknown). `compare A B` pairs each configuration of B with the one of A
  that equals it in everything but what tells the two sides apart; `compare --by AXIS [REF]` pairs,
  within each matrix, every value of one axis with its baseline (the first value, or --baseline).
- **Regression** (the same configuration over time): B's newest complete result against the
  median of every earlier one of that configuration in A and B, regression when
  `newest / previous median <= 1 - bench_regression_max_drop` and at least
  `bench_regression_min_previous_runs` runs came before: ZfsBenchThroughputRegression's rule, its
  thresholds read from alerts/thresholds.toml (the file the rules are tested against). So
  `compare CONFIG NEWEST-RUN` and the alert say the same thing about the same history (the alert
  also resolves `bench_regression_max_age_days` after the run: the verdict says when that passed).

A and B are each a run id, a configuration id (or a unique prefix of one), a matrix name, or a
matrix cell `MATRIX:NAME=VALUE[,NAME=VALUE]` (`cdm-zvol:volblocksize=4K`). Owns the verdicts, the
pairing and their tables; reads the store, writes nothing.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...store.configuration import UNKNOWN, Configuration, differences
from ...store.schema import ResultRow
from .axes import (
    Axis,
    SelectorError,
    agreement,
    axes,
    keys_named,
    matches,
    natural,
    parse_selector,
    readable,
    short_name,
    workload_text,
)
from .findings import MOST, findings
from .report import Section, Stat, Summary, sections, summarise
from .tables import MISSING, Table, fmt, size_digits, size_unit

THRESHOLD = "bench_regression_max_drop"
MIN_PREVIOUS = "bench_regression_min_previous_runs"
MAX_AGE = "bench_regression_max_age_days"


class CompareError(Exception):
    pass


def thresholds_path() -> Path | None:
    """$ZFSNAS_THRESHOLDS, else the checkout's alerts/thresholds.toml, else a copy under
    <prefix>/share/zfsnas/alerts/."""
    if env := os.environ.get("ZFSNAS_THRESHOLDS"):
        return Path(env)
    candidates = [Path(__file__).resolve().parents[4] / "alerts" / "thresholds.toml"]   # the checkout
    for root in (sysconfig.get_paths()["data"], sys.prefix, "/usr/local", "/usr"):
        candidates.append(Path(root) / "share/zfsnas/alerts/thresholds.toml")
    return next((c for c in candidates if c.is_file()), None)


def threshold(name: str, path: Path | None = None) -> float:
    """A number of the alert's rule from alerts/thresholds.toml (CompareError when unreadable)."""
    path = path or thresholds_path()
    if path is None:
        raise CompareError("alerts/thresholds.toml not found (set $ZFSNAS_THRESHOLDS or pass --max-drop 0.15)")
    try:
        value = tomllib.loads(path.read_text())[name]
    except (OSError, ValueError, KeyError) as exc:
        raise CompareError(f"{path}: no readable {name} ({exc})") from None
    return float(value)


def max_drop(path: Path | None = None) -> float:
    """The regression threshold the alert uses (bench_regression_max_drop, e.g. 0.15)."""
    return threshold(THRESHOLD, path)


@dataclass(frozen=True)
class Rule:
    """ZfsBenchThroughputRegression's rule: the drop, the earlier runs it needs, how long it fires."""
    max_drop: float
    min_previous_runs: int = 3
    max_age_days: float = 3.0

    @classmethod
    def from_thresholds(cls, drop: float | None = None, path: Path | None = None) -> Rule:
        return cls(max_drop(path) if drop is None else drop, int(threshold(MIN_PREVIOUS, path)),
                   threshold(MAX_AGE, path))


def is_regression(newest: float, previous_median: float, drop: float) -> bool:
    """ZfsBenchThroughputRegression's expression, the same float arithmetic:
    `newest / (previous_median > 0) <= 1 - drop`."""
    return previous_median > 0 and newest / previous_median <= 1 - drop


def _order(row: ResultRow) -> tuple[float, int]:
    # The exporter's order (store/reader.py): by finish time, then id.
    return (float(row.finished or 0), int(row.id))


# --- what A and B are ---------------------------------------------------------------------------------

def resolve(store: Any, ref: str) -> list[ResultRow]:
    """The complete results `ref` names: a run, a configuration (id or unique prefix), a matrix, or
    `MATRIX:NAME=VALUE,...` / `NAME=VALUE,...` (configurations matching the selector)."""
    rows: list[ResultRow] = store.results("complete")
    if found := resolve_rows(rows, ref):
        return found
    matrices = list(dict.fromkeys(r.matrix for r in rows))
    matrix, sep, rest = ref.partition(":")
    if "=" in ref:
        scope = [r for r in rows if r.matrix == matrix] if sep else rows
        if sep and not scope:
            raise CompareError(f"{ref}: no matrix {matrix!r} (matrices: {', '.join(matrices) or 'none'})")
        try:
            selector = parse_selector(rest if sep else ref)
        except SelectorError as exc:
            raise CompareError(str(exc)) from None
        found = [r for r in scope if matches(r.configuration, selector)]
        if not found:
            raise CompareError(f"{ref}: no complete result matches (`zfsnas-bench report` shows each matrix's axes)")
        return found
    prefixed = {r.config_id for r in rows if len(ref) >= 4 and r.config_id.startswith(ref)}
    if len(prefixed) == 1:
        return [r for r in rows if r.config_id in prefixed]
    hint = f"; {len(prefixed)} configurations start with it" if len(prefixed) > 1 else ""
    raise CompareError(f"{ref}: no complete results of a run, configuration or matrix with this name{hint} "
                       f"(`zfsnas-bench list` shows ids; matrices: {', '.join(matrices) or 'none'})")


def resolve_rows(rows: list[ResultRow], ref: str) -> list[ResultRow]:
    """The rows of `rows` a run id, configuration id or matrix name names ([] when none)."""
    return ([r for r in rows if r.run_id == ref] or [r for r in rows if r.config_id == ref]
            or [r for r in rows if r.matrix == ref])


# --- regression: the same configuration over time ---------------------------------------------------

@dataclass(frozen=True)
class Change:
    config: Configuration
    verdict: str                      # regression | slower | faster | within noise | noise unknown | single run
    a: Stat | None                    # throughput (bytes/s) of A's results of this configuration
    b: Stat | None
    newest: float | None              # B's newest throughput and the median of everything before it
    previous_median: float | None
    ratio_a: float | None = None
    ratio_b: float | None = None
    cpu_a: float | None = None        # user + system, % of all CPU time
    cpu_b: float | None = None
    detail: str = ""

    @property
    def vs_previous(self) -> float | None:
        if self.newest is None or not self.previous_median:
            return None
        return self.newest / self.previous_median


def _throughput(rows: list[ResultRow]) -> Stat | None:
    return Stat.of(r.throughput_bytes_per_second for r in rows)


def _cpu(rows: list[ResultRow]) -> float | None:
    shares = []
    for r in rows:
        total = r.cpu_seconds
        if total and r.cpu_user_seconds is not None and r.cpu_system_seconds is not None:
            shares.append((r.cpu_user_seconds + r.cpu_system_seconds) / total * 100)
    stat = Stat.of(shares)
    return None if stat is None else stat.median


def regression(config: Configuration, a: list[ResultRow], b: list[ResultRow], rule: Rule) -> Change:
    """B's newest result of `config` against every earlier one in A and B (the alert's rule)."""
    if not a and len(b) > 1:   # a configuration against itself: its newest run against the runs before
        b = sorted(b, key=_order)
        a, b = b[:-1], b[-1:]
    newest = max(b, key=_order)
    earlier = [r for r in a + b if _order(r) < _order(newest)]
    previous = _throughput(earlier)
    sa, sb = _throughput(a), _throughput(b)
    tp = newest.throughput_bytes_per_second
    detail = ""
    dropped = tp is not None and previous is not None and is_regression(tp, previous.median, rule.max_drop)
    if not earlier:
        verdict = "single run"
    elif dropped and len(earlier) < rule.min_previous_runs:
        verdict = "too few runs"
        detail = f"{len(earlier)} earlier run(s)"
    elif dropped:
        verdict = "regression"
        age = (time.time() - float(newest.finished or 0)) / 86400
        if age > rule.max_age_days:
            detail = f"the newest run is {age:.0f} days old: the alert resolved after {rule.max_age_days:g}"
    elif sa is None or sb is None or (sa.n < 2 and sb.n < 2):
        verdict = "noise unknown"
    elif sa.overlaps(sb):
        verdict = "within noise"
    else:
        verdict = "slower" if sb.median < sa.median else "faster"
    ra, rb = Stat.of(r.compressratio for r in a), Stat.of(r.compressratio for r in b)
    return Change(config, verdict, sa, sb, tp, None if previous is None else previous.median,
                  ra.median if ra else None, rb.median if rb else None, _cpu(a), _cpu(b), detail)


# --- A vs B: configurations that differ ---------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    a: Summary | None
    b: Summary | None
    setting: tuple[str, ...]          # the values of the other axes that vary, in `Comparison.setting_names` order
    values: tuple[str, str] = ("", "")   # compare --by: A's and B's value of the axis


@dataclass
class Comparison:
    changes: list[Change] = field(default_factory=list)      # the same configuration over time
    pairs: list[Pair] = field(default_factory=list)          # A vs B
    differs: list[str] = field(default_factory=list)         # what tells A from B: "pool layout: x -> y"
    setting_names: list[str] = field(default_factory=list)
    a_name: str = "A"
    b_name: str = "B"
    by: str = ""                                             # compare --by: the axis whose values are A and B


def _side_keys(a: list[Configuration], b: list[Configuration]) -> list[str]:
    """The identity fields that tell side A from side B: no value of A's is one of B's."""
    fa, fb = [c.flat() for c in a], [c.flat() for c in b]
    keys = sorted({k for f in fa + fb for k in f} - {"workload", "matrix"})
    out = []
    for key in keys:
        va, vb = {f.get(key, UNKNOWN) for f in fa}, {f.get(key, UNKNOWN) for f in fb}
        if not va & vb:
            out.append(key)
    return out


def _values(configs: list[Configuration], key: str) -> str:
    return ", ".join(dict.fromkeys(readable(key, c.flat().get(key, UNKNOWN)) for c in configs))


def pair(a_rows: list[ResultRow], b_rows: list[ResultRow]) -> Comparison:
    """Each configuration of B beside the one of A equal to it in everything but what tells the
    sides apart; what has no twin stands alone."""
    sa, sb = summarise(a_rows), summarise(b_rows)
    side = _side_keys([s.config for s in sa], [s.config for s in sb])
    out = Comparison(differs=[f"{short_name(k)}: {_values([s.config for s in sa], k)} -> "
                              f"{_values([s.config for s in sb], k)}" for k in side])

    def rest(s: Summary) -> tuple:   # the matrix's name is no difference: two matrices' twins pair up
        return tuple(sorted((k, v) for k, v in s.config.flat().items() if k not in side and k != "matrix"))
    setting_axes = [x for x in axes(s.config for s in sa + sb) if not set(x.keys) & set(side)]
    out.setting_names = [x.name for x in setting_axes]
    twins = {rest(s): s for s in sa}
    used = set()
    for s in sb:
        twin = twins.get(rest(s))
        if twin is not None:
            used.add(twin.id)
        out.pairs.append(Pair(twin, s, tuple(x.value(s.config) for x in setting_axes)))
    out.pairs += [Pair(s, None, tuple(x.value(s.config) for x in setting_axes)) for s in sa if s.id not in used]
    return out


def compare(a_rows: list[ResultRow], b_rows: list[ResultRow], rule: Rule | float) -> Comparison:
    """Regression verdicts for the configurations both sides have, A vs B for the rest. `rule`: the
    alert's (a bare number is its drop, with the default number of earlier runs and age)."""
    if not isinstance(rule, Rule):
        rule = Rule(float(rule))
    a_ids = list(dict.fromkeys(r.config_id for r in a_rows))
    if len(a_ids) == 1 and any(r.config_id == a_ids[0] for r in b_rows):  # one configuration against a run
        b_rows = [r for r in b_rows if r.config_id == a_ids[0]]
    same = [cid for cid in dict.fromkeys(r.config_id for r in b_rows) if cid in a_ids]
    out = Comparison()
    b_ids = {r.id for r in b_rows}
    for cid in same:
        b = [r for r in b_rows if r.config_id == cid]
        a = [r for r in a_rows if r.config_id == cid and r.id not in b_ids]
        out.changes.append(regression(b[0].configuration, a, b, rule))
    a_rest = [r for r in a_rows if r.config_id not in same]
    b_rest = [r for r in b_rows if r.config_id not in same]
    if a_rest and b_rest:
        paired = pair(a_rest, b_rest)
        paired.changes = out.changes
        return paired
    out.pairs = [Pair(s, None, ()) for s in summarise(a_rest)] + [Pair(None, s, ()) for s in summarise(b_rest)]
    return out


def _by_axis(section: Section, name: str) -> Axis | None:
    """The axis `--by NAME` means: one of the section's, or, when NAME is one field of an axis of
    several that move together (a label `client` with the pool and properties of what it measured),
    that field alone, named and valued as the user said it."""
    flat = {k: v for s in section.summaries for k, v in s.config.flat().items()}
    keys = keys_named(name, flat)
    for axis in section.axes:
        if axis.name == name or (keys and axis.keys[0] in keys):
            return axis
    for axis in section.axes:
        for key in keys:
            if key in axis.keys:
                values = natural(readable(key, s.config.flat().get(key, UNKNOWN)) for s in section.summaries)
                return Axis(short_name(key), (key,), values)
    return None


def compare_by(section: Section, name: str, baseline: str | None = None) -> Comparison:
    """Within one matrix: each value of the axis `name` against the baseline value (the first in
    natural order, or `baseline`), for every workload and setting where both were measured; a
    setting value one side did not record (unknown) matches any."""
    axis = _by_axis(section, name)
    if axis is None:
        known = ", ".join(x.name for x in section.axes) or "none"
        raise CompareError(f"--by {name}: {section.matrix} does not vary in it (its axes: {known})")
    base = baseline or axis.values[0]
    if base not in axis.values:   # as the user spells it: any case, the axis's own field alone (`local-nvme`)
        base = next((v for v in axis.values if base.lower() in (v.lower(), v.split(" (")[0].lower())), base)
    if base not in axis.values:
        raise CompareError(f"--baseline {base}: {axis.name} of {section.matrix} is one of {', '.join(axis.values)}")
    others = [x for x in section.axes if not set(x.keys) & set(axis.keys)]
    out = Comparison(setting_names=[x.name for x in others], a_name=f"{axis.name} {base}", b_name=axis.name,
                     by=axis.name, differs=[f"{axis.name}: {base} -> each other value"])
    bases = [s for s in section.summaries if axis.value(s.config) == base]
    for s in section.summaries:
        value = axis.value(s.config)
        if value == base:
            continue
        mine = tuple(x.value(s.config) for x in others)
        twins = [(agree, b) for b in bases if b.workload == s.workload
                 and (agree := agreement(tuple(x.value(b.config) for x in others), mine)) is not None]
        if twins:
            twin = max(twins, key=lambda t: t[0])[1]
            out.pairs.append(Pair(twin, s, mine, (base, value)))
    if not out.pairs:
        raise CompareError(f"--by {axis.name}: no workload of {section.matrix} was measured at {base} and at "
                           f"another {axis.name}")
    return out


# --- tables ------------------------------------------------------------------------------------------

VERDICTS = {
    "regression": "regression: {pct} of the previous median, at or below the alert's {limit}",
    "slower": "slower, beyond the noise of the repeats",
    "faster": "faster, beyond the noise of the repeats",
    "within noise": "within noise: the repeats' ranges overlap",
    "noise unknown": "one run each: noise unknown",
    "single run": "one run: nothing earlier to compare with",
    "too few runs": "too few runs: {pct} of the previous median, but the alert waits for {runs} earlier runs",
}


def _mbs(stat: Stat | None) -> str:
    if stat is None:
        return MISSING
    text = f"{stat.median / 1e6:.1f}"
    return text + (f" ({stat.low / 1e6:.1f}-{stat.high / 1e6:.1f})" if stat.n > 1 else "")


def _num(value: float | None, digits: int) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def table(changes: list[Change], rule: Rule | float) -> Table:
    if not isinstance(rule, Rule):
        rule = Rule(float(rule))
    drop = rule.max_drop
    rows = []
    for c in changes:
        labels = c.config.labels
        change = MISSING if not (c.a and c.b) else f"{(c.b.median / c.a.median - 1) * 100:+.1f} %"
        vs = MISSING if c.vs_previous is None else f"{c.vs_previous * 100:.1f} %"
        verdict = VERDICTS[c.verdict].format(pct=vs, limit=f"{(1 - drop) * 100:.0f} %", runs=rule.min_previous_runs)
        rows.append([c.config.id, c.config.workload, labels["compression"], labels["recordsize"], c.config.size,
                     _mbs(c.a), _mbs(c.b), change, vs, _num(c.ratio_a, 3), _num(c.ratio_b, 3),
                     _num(c.cpu_a, 1), _num(c.cpu_b, 1), verdict + (f" ({c.detail})" if c.detail else "")])
    return Table("compare: regression verdict (the same configuration over time)",
                 ["config", "workload", "compression", "recordsize", "size", "A MB/s", "B MB/s", "change",
                  "newest vs previous median", "A ratio", "B ratio", "A CPU %", "B CPU %", "verdict"], rows,
                 f"Regression = B's newest run at or below {(1 - drop) * 100:.0f} % of the median of the earlier runs "
                 f"of its configuration, with at least {rule.min_previous_runs} of them: the rule and thresholds of "
                 f"ZfsBenchThroughputRegression (which fires for {rule.max_age_days:g} days after the run).")


# (header, report figure, scale, digits): the figures an A vs B row shows where either side has them
PAIR_FIGURES = (("MB/s", "throughput", 1e-6, 1), ("IOPS", "iops", 1.0, 1), ("latency us", "latency_us", 1.0, 2),
                ("ratio", "ratio", 1.0, 3), ("on-disk", "used", 0.0, 1), ("CPU %", "cpu", 100.0, 1),
                ("CPU user %", "cpu_user", 100.0, 1), ("CPU system %", "cpu_system", 100.0, 1),
                ("disk written per byte", "disk_written", 1.0, 2), ("disk read per byte", "disk_read", 1.0, 2))


def noise(a: Stat | None, b: Stat | None) -> str:
    """Whether a throughput difference exceeds the spread of the repeats, or that nobody knows."""
    if a is None or b is None:
        return MISSING
    if a.n < 2 or b.n < 2:
        return "one run each: noise unknown" if a.n == b.n == 1 else f"A {a.n} run(s), B {b.n}: noise unknown"
    return ("within the repeats' spread: not a difference" if a.overlaps(b)
            else f"beyond the repeats' spread ({a.n} and {b.n} runs)")


def pair_table(comparison: Comparison) -> Table:
    """A vs B, one row per workload and setting: both sides' figures and the differences."""
    pairs = comparison.pairs
    present = [f for f in PAIR_FIGURES if any(p.a and p.a.get(f[1]) or p.b and p.b.get(f[1]) for p in pairs)]
    sized = [s.median("used") for p in pairs for s in (p.a, p.b) if s is not None]
    unit_name, unit = size_unit(sized)
    size_decimals = size_digits(sized, unit)
    headers = ["workload", *comparison.setting_names]
    if comparison.by:
        headers += [f"A {comparison.by}", f"B {comparison.by}"]
    for name, *_ in present:
        name = f"on-disk {unit_name}" if name == "on-disk" else name
        headers += [f"A {name}", f"B {name}"] + ([f"B-A {name}"] if name == "MB/s" else []) + (
            [f"B-A {name[:-1]}pp"] if name.endswith("%") else [f"(B-A)/A {name}"])
    headers.append("throughput noise")
    rows = []
    for p in pairs:
        s = p.b or p.a
        assert s is not None
        row = [workload_text(s.workload), *p.setting]
        if comparison.by:
            row += list(p.values)
        for name, figure, scale, digits in present:
            digits = size_decimals if figure == "used" else digits
            scale = scale or 1 / unit
            a = p.a.get(figure) if p.a else None
            b = p.b.get(figure) if p.b else None
            row += [fmt(a.scaled(scale) if a else None, digits), fmt(b.scaled(scale) if b else None, digits)]
            if name == "MB/s" or name.endswith("%"):   # throughput in MB/s, CPU shares in percentage points
                row.append(MISSING if a is None or b is None else f"{(b.median - a.median) * scale:+.1f}")
            if not name.endswith("%"):
                row.append(MISSING if a is None or b is None or not a.median
                           else f"{(b.median / a.median - 1) * 100:+.1f} %")
        row.append(noise(p.a.get("throughput") if p.a else None, p.b.get("throughput") if p.b else None))
        rows.append(row)
    title = (f"compare: {comparison.a_name} vs each other {comparison.by}" if comparison.by
             else f"compare: A vs B ({'; '.join(comparison.differs) or 'A and B differ in nothing the store records'})")
    note = ("(B-A)/A: the change from A to B in % of A; pp = percentage points. A row with one side only (-) had no "
            "twin on the other side. Throughput noise: whether the difference exceeds the spread of the repeats.")
    return Table(title, headers, rows, note)


def tables(comparison: Comparison, rule: Rule | float) -> list[Table]:
    out = []
    if comparison.pairs:
        out.append(pair_table(comparison))
    if comparison.changes:
        out.append(table(comparison.changes, rule))
    return out


def finding_lines(comparison: Comparison, a: list[ResultRow], b: list[ResultRow],
                  section: Section | None = None) -> list[str]:
    """What the comparison found, at most five sentences: a verdict per configuration compared with
    itself over time, then the findings (findings.py) of the configurations set side by side, the
    axis that tells A from B first (`section`: the matrix of `compare --by`)."""
    out = []
    for c in comparison.changes[:MOST]:
        label = f"{workload_text(c.config.workload)} ({c.config.labels['compression']} / {c.config.labels['recordsize']}, " \
                f"{c.config.id})"
        if c.newest is not None and c.previous_median:
            out.append(f"{label}: {c.verdict}: the newest run {c.newest / 1e6:.1f} MB/s against the previous median "
                       f"{c.previous_median / 1e6:.1f} MB/s ({(c.newest / c.previous_median - 1) * 100:+.1f} %).")
        else:
            out.append(f"{label}: {c.verdict}.")
    if comparison.pairs and len(out) < MOST:
        if section is None:
            rows = [r for r in a + b if r.config_id not in {c.config.id for c in comparison.changes}]
            section = Section(", ".join(dict.fromkeys(r.matrix for r in rows)), summarise(rows))
        focus = comparison.by or (comparison.differs[0].split(":", 1)[0] if comparison.differs else None)
        out += findings(section, None, focus).lines()[:MOST - len(out)]
    return out


def describe_sides(a: list[ResultRow], b: list[ResultRow]) -> list[str]:
    """What each side is, for the head of the output: its matrices and configurations."""
    out = []
    for name, rows in (("A", a), ("B", b)):
        matrices = ", ".join(dict.fromkeys(r.matrix for r in rows))
        out.append(f"{name}: {len(rows)} result(s) of {len({r.config_id for r in rows})} configuration(s) "
                   f"in {matrices}")
    return out


__all__ = ["Change", "CompareError", "Comparison", "Pair", "compare", "compare_by", "differences", "is_regression",
           "max_drop", "resolve", "sections", "tables"]
