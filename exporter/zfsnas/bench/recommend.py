"""`zfsnas-bench recommend MATRIX`: the Pareto-optimal configurations and one pick, with its reason.

Candidates are the matrix's configurations that differ only in dataset properties (compression,
recordsize/volblocksize): the largest such group, so a write-size sweep never competes with the
full copy. Objectives: throughput (higher), on-disk share of the data (lower), and CPU user+system
(lower) when every candidate has it. The pick maximises (throughput / fastest)^w x (smallest /
space)^(1-w), w = --speed-weight, among the candidates that reach --min-throughput. When the pick's
and the runner-up's repeats overlap in throughput it says the data cannot decide on speed; with one
run each it says the noise is unknown. Reads summaries (report.py); owns nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .report import Section, Stat, Summary
from .tables import DIMENSIONS, _groups

# Line rates as payload bytes per second (the nominal rate: real SMB/NFS payload is a little less).
_RATE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>gbe|gbit/s|mbit/s|mb/s|mib/s|gb/s|gib/s)?\s*$", re.IGNORECASE)
_UNITS = {"gbe": 1e9 / 8, "gbit/s": 1e9 / 8, "mbit/s": 1e6 / 8, "mb/s": 1e6, "mib/s": 2**20, "gb/s": 1e9,
          "gib/s": 2**30, None: 1e6}


class RecommendError(ValueError):
    pass


def parse_throughput(text: str) -> float:
    """Bytes/s of "2.5GbE" (line rate), "300MB/s", "250MiB/s", "1Gbit/s" or a bare number of MB/s."""
    m = _RATE.match(text)
    if not m:
        raise RecommendError(f"throughput {text!r}: expected e.g. 2.5GbE, 300MB/s, 250MiB/s or a number of MB/s")
    return float(m["n"]) * _UNITS[m["unit"].lower() if m["unit"] else None]


@dataclass(frozen=True)
class Candidate:
    summary: Summary
    throughput: Stat
    space: float | None          # on-disk bytes per logical byte (1 / ratio)
    space_from: str = ""         # the configuration the space was taken from, when not measured
    cpu: float | None = None     # user + system, share of all CPU time

    @property
    def label(self) -> str:
        return self.summary.label

    @property
    def mbs(self) -> float:
        return self.throughput.median / 1e6


@dataclass
class Recommendation:
    matrix: str
    candidates: list[Candidate]
    front: list[Candidate]
    pick: Candidate | None
    reason: str
    notes: list[str] = field(default_factory=list)


def _space(s: Summary) -> float | None:
    used, logical, ratio = s.median("used"), s.median("logical"), s.median("ratio")
    if used is not None and logical:
        return used / logical
    return 1 / ratio if ratio else None


def candidates(section: Section) -> tuple[list[Candidate], list[str]]:
    groups = [g for g in _groups(section, DIMENSIONS) if any(s.get("throughput") for s in g)]
    if not groups:
        return [], []
    group = max(groups, key=len)
    notes = []
    if len(group) < len(section.summaries):
        notes.append(f"{len(section.summaries) - len(group)} configuration(s) of {section.matrix} differ in more "
                     f"than dataset properties (size, workload, ...) and are not candidates")
    measured = {s.compression: s for s in group if _space(s) is not None}
    out = []
    for s in group:
        tp = s.get("throughput")
        if tp is None:
            continue
        space, source = _space(s), ""
        if space is None and s.compression in measured:  # same compression: the space it measured
            source = measured[s.compression].label
            space = _space(measured[s.compression])
        cpu = None
        if s.median("cpu_user") is not None and s.median("cpu_system") is not None:
            cpu = s.median("cpu_user") + s.median("cpu_system")  # type: ignore[operator]
        out.append(Candidate(s, tp, space, source, cpu))
    return out, notes


def pareto_front(cands: list[Candidate]) -> list[Candidate]:
    """Candidates no other beats in every objective (throughput up, space down, CPU down if known)."""
    use_cpu = all(c.cpu is not None for c in cands)

    def key(c: Candidate) -> tuple[float, ...]:
        values = (c.throughput.median, -(c.space if c.space is not None else float("inf")))
        return values + ((-c.cpu,) if use_cpu and c.cpu is not None else ())

    def dominates(a: Candidate, b: Candidate) -> bool:
        ka, kb = key(a), key(b)
        return all(x >= y for x, y in zip(ka, kb)) and ka != kb
    return [c for c in cands if not any(dominates(o, c) for o in cands if o is not c)]


def _smaller(a: Candidate, b: Candidate) -> str:
    assert a.space is not None and b.space is not None
    return f"{(1 - a.space / b.space) * 100:.0f} % smaller than {b.label}"


def recommend(section: Section, speed_weight: float = 0.5, min_throughput: float = 0.0) -> Recommendation:
    if not 0 <= speed_weight <= 1:
        raise RecommendError(f"--speed-weight {speed_weight}: between 0 (space only) and 1 (speed only)")
    cands, notes = candidates(section)
    front = pareto_front([c for c in cands if c.space is not None])
    unmeasured = [c.label for c in cands if c.space is None]
    if unmeasured:
        notes.append(f"no on-disk size for {', '.join(unmeasured)}: not candidates")
    sized = [c for c in cands if c.space is not None]
    able = [c for c in sized if c.throughput.median >= min_throughput]
    if len(cands) < 2:
        why = (f"nothing to choose between: {section.matrix} has no two configurations that differ only in "
               f"dataset properties (compression, recordsize)")
        return Recommendation(section.matrix, cands, front, None, why, notes)
    if not sized:
        return Recommendation(section.matrix, cands, front, None,
                              "no configuration has an on-disk size: speed cannot be weighed against space", notes)
    if not able:
        best = max(cands, key=lambda c: c.mbs, default=None)
        why = (f"no configuration reaches {min_throughput / 1e6:.1f} MB/s"
               + (f"; the fastest is {best.label} at {best.mbs:.1f} MB/s" if best else ""))
        return Recommendation(section.matrix, cands, front, None, why, notes)
    fastest = max(sized, key=lambda c: c.throughput.median)
    smallest = min(s.space for s in sized if s.space is not None)

    def score(c: Candidate) -> float:
        assert c.space is not None
        speed = c.throughput.median / fastest.throughput.median
        return float(speed ** speed_weight * (smallest / c.space) ** (1 - speed_weight))
    ranked = sorted(able, key=lambda c: (score(c), c.throughput.median), reverse=True)  # ties: the faster
    pick = ranked[0]
    parts = [f"{pick.label}: " + ("the fastest" if pick is fastest else
                                  f"{pick.throughput.median / fastest.throughput.median * 100:.0f} % of the fastest "
                                  f"({fastest.label}, {fastest.mbs:.1f} MB/s)")]
    if pick is not fastest and pick.space is not None and fastest.space is not None and pick.space < fastest.space:
        parts.append(_smaller(pick, fastest))
    lz4 = next((c for c in sized if c.summary.compression == "lz4" and c.summary.recordsize == pick.summary.recordsize),
               next((c for c in sized if c.summary.compression == "lz4"), None))
    if (lz4 is not None and lz4 is not pick and lz4 is not fastest and lz4.space and pick.space is not None
            and pick.space < lz4.space):
        parts.append(_smaller(pick, lz4))
    if pick.space == smallest:
        parts.append("the smallest on disk")
    reason = ", ".join(parts)
    if pick.space_from:
        reason += f" (on-disk size measured at {pick.space_from}, the same compression)"
    reason += "."
    if len(ranked) > 1:
        second = ranked[1]
        if pick.throughput.n > 1 and second.throughput.n > 1 and pick.throughput.overlaps(second.throughput):
            notes.insert(0, f"the data cannot decide on speed between {pick.label} and {second.label}: their repeats "
                            f"overlap ({pick.throughput.low / 1e6:.1f}-{pick.throughput.high / 1e6:.1f} vs "
                            f"{second.throughput.low / 1e6:.1f}-{second.throughput.high / 1e6:.1f} MB/s)")
        elif pick.throughput.n < 2 or second.throughput.n < 2:
            notes.append("one run per configuration: the noise is unknown; repeat the matrix to know it")
    return Recommendation(section.matrix, cands, front, pick, reason, notes)


def render(rec: Recommendation) -> str:
    lines = [f"recommend {rec.matrix}", "", "Pareto-optimal (throughput vs on-disk size"
             + (", CPU" if rec.front and all(c.cpu is not None for c in rec.front) else "") + "):"]
    for c in sorted(rec.front, key=lambda c: -c.throughput.median):
        extra = f", CPU {c.cpu * 100:.1f} %" if c.cpu is not None else ""
        lines.append(f"  {c.label:<20} {c.mbs:8.1f} MB/s  {c.space * 100 if c.space else 0:5.1f} % of logical on disk"
                     f"{extra} [{c.summary.id}]")
    lines += ["", ("pick: " if rec.pick else "no pick: ") + rec.reason]
    lines += [f"note: {n}" for n in rec.notes]
    return "\n".join(lines) + "\n"
