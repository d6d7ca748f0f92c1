"""`zfsnas-bench recommend MATRIX`: which dataset properties to choose, for every matrix shape, with
the reason in one sentence.

Options are the values of the properties a user chooses (compression, recordsize/volblocksize);
everything else a matrix varies (a size sweep, RAM, a client's NTFS cluster, the pool layout) is a
setting: options are compared within one setting at a time (a "group"), never across.

- Throughput and on-disk size (the FITS copy): the Pareto-optimal options (throughput up, on-disk
  share down, CPU user+system down when every option has it) and the pick maximising
  (throughput / fastest)^w x (smallest / space)^(1-w), w = --speed-weight, among those reaching
  --min-throughput. An option without a measured size takes the size its compression measured
  elsewhere in the group, and says so.
- Throughput only (CrystalDiskMark from a client): per workload the fastest, and overall the option
  with the highest geometric mean of its throughput relative to the fastest of each workload
  (every workload counts the same), among those reaching --min-throughput in every workload.
- On-disk size only (an archive corpus): the smallest, with what it saves against the first option.
- Several workloads: a pick per workload, then overall by the geometric mean of the per-workload
  scores. `--workload` restricts to one.
Several groups: a pick in each; the answer says whether they agree. Every "no pick" says what is
missing. When the pick's and the runner-up's repeats overlap it says the data cannot decide; with
one run each that the noise is unknown. Every pick on throughput states how sure it is (a race's
or a full run's alike): the difference of its score to the runner-up's with its interval
(intervals.confidence_of), a line per setting, and a clause that closes the findings' pick sentence.
Reads summaries (report.py); owns nothing else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import combinations

from ..statistics.intervals import Confidence, confidence_of, mean, objective
from .axes import workload_text
from .report import DIMENSIONS, Section, Stat, Summary
from .tables import difference_unit, figure_columns, number

# Line rates as payload bytes per second (the nominal rate: real SMB/NFS payload is a little less).
_RATE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>gbe|gbit/s|mbit/s|mb/s|mib/s|gb/s|gib/s)?\s*$", re.IGNORECASE)
_UNITS = {"gbe": 1e9 / 8, "gbit/s": 1e9 / 8, "mbit/s": 1e6 / 8, "mb/s": 1e6, "mib/s": 2**20, "gb/s": 1e9,
          "gib/s": 2**30, None: 1e6}
CHOICES = "dataset properties (compression, recordsize or volblocksize)"
OPTION_AXES = ("compression", "recordsize", "volblocksize")


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
    throughput: Stat | None
    space: float | None          # on-disk bytes per logical byte (1 / ratio)
    space_from: str = ""         # the configuration the space was taken from, when not measured
    cpu: float | None = None     # user + system, share of all CPU time

    @property
    def label(self) -> str:
        return self.summary.label

    @property
    def mbs(self) -> float:
        return self.throughput.median / 1e6 if self.throughput else 0.0


@dataclass
class Recommendation:
    matrix: str
    candidates: list[Candidate]             # the first group's, first workload's
    front: list[Candidate]
    pick: Candidate | None
    reason: str
    notes: list[str] = field(default_factory=list)
    shape: str = "throughput and space"     # or "throughput", "space"
    per_workload: list[tuple[str, str]] = field(default_factory=list)   # (group and workload, its pick's sentence)
    # Settings that disagree: (the values of the setting axes that decide, the pick there or None)
    conditional: list[tuple[str, Candidate | None]] = field(default_factory=list)
    # How sure each pick is against its runner-up: (the setting, "" for one, its Confidence)
    confidences: list[tuple[str, Confidence]] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        """A pick, or a pick for each setting."""
        return self.pick is not None or any(pick for _where, pick in self.conditional)

    @property
    def sentence(self) -> str:
        """The answer in one sentence, as the findings close with it: how sure it is included."""
        text = ("Pick: " if self.pick else "Pick " if self.conditional else "No pick: ") + self.reason
        return f"{text.rstrip('.')}; {self.certainty}." if self.certainty else text

    @property
    def confidence(self) -> list[str]:
        """How sure every pick is, a line each (recommend prints them under the pick, the HTML page too)."""
        return [f"{where}: {c.sentence()}" if where else c.sentence() for where, c in self.confidences]

    @property
    def certainty(self) -> str:
        """How sure the pick is, short: its clause; with several settings, how many are decided and
        the least sure of them."""
        found = [c for _where, c in self.confidences]
        if len(found) < 2:
            return found[0].clause() if found else ""
        if all(c.interval is None for c in found):
            return f"not decided in any of the {len(found)} settings: one run each (noise unknown)"
        decided = sum(c.verdict == "decided" for c in found)
        where, least = min(self.confidences, key=lambda x: x[1].interval.low if x[1].interval else -math.inf)
        if decided == len(found):
            return f"decided in all {len(found)} settings, the closest {least.clause(verdict=False)}"
        return f"decided in {decided} of {len(found)} settings; the least sure, with {where}: {least.clause()}"


def _space(s: Summary) -> float | None:
    """On-disk bytes per logical byte: from the sizes, else from the compression ratio."""
    used, logical, ratio = s.median("used"), s.median("logical"), s.median("ratio")
    if used is not None and logical:
        return used / logical
    return 1 / ratio if ratio else None


def _sized(s: Summary) -> bool:
    return _space(s) is not None or s.get("used") is not None


def _cpu(s: Summary) -> float | None:
    user, system = s.median("cpu_user"), s.median("cpu_system")
    return None if user is None or system is None else user + system


def _option(s: Summary) -> tuple[str, ...]:
    flat = s.config.flat()
    return tuple(flat.get(k, "") for k in DIMENSIONS)


def _groups(section: Section, workload: str | None) -> tuple[list[list[Summary]], list[str]]:
    """Groups of configurations that differ only in the chosen properties and the workload, with
    two options or more; and the notes on what is left out."""
    summaries = [s for s in section.summaries if workload is None or s.workload == workload]
    grouped: dict[tuple, list[Summary]] = {}
    for s in summaries:
        key = tuple(sorted((k, v) for k, v in s.config.flat().items() if k not in (*DIMENSIONS, "workload")))
        grouped.setdefault(key, []).append(s)
    eligible = [g for g in grouped.values() if len({_option(s) for s in g}) >= 2]
    notes = []
    alone = [g[0] for g in grouped.values() if len({_option(s) for s in g}) < 2]
    if eligible and alone:
        shown = _settings_text(section, alone)
        notes.append(f"{sum(len(g) for g in grouped.values() if g[0] in alone)} configuration(s) of {section.matrix} "
                     f"are the only option measured in their setting ({shown}): nothing to choose there")
    return eligible, notes


def _settings_text(section: Section, summaries: list[Summary]) -> str:
    """The settings of `summaries`: `size 70G, 30G, 20G` when one axis tells them apart."""
    varying = [a for a in section.axes if a.name not in OPTION_AXES
               and len({a.value(s.config) for s in summaries}) > 1]
    if len(varying) == 1:
        values = list(dict.fromkeys(varying[0].value(s.config) for s in summaries))
        return f"{varying[0].name} {', '.join(values)}"
    settings = list(dict.fromkeys(section.describe(s, OPTION_AXES) or s.label for s in summaries))
    return "; ".join(settings[:4]) + ("; ..." if len(settings) > 4 else "")


def candidates_of(group: list[Summary]) -> list[Candidate]:
    """One workload's options, each with its throughput, space (or its compression's) and CPU. Options
    of one group wrote the same data, so where no logical size or ratio was recorded their on-disk
    sizes compare as they are (each as a share of the largest)."""
    if not any(_space(s) is not None for s in group) and any(s.get("used") for s in group):
        largest = max(s.median("used") or 0.0 for s in group)
        return [Candidate(s, s.get("throughput"), None if s.median("used") is None else (s.median("used") or 0.0) / largest,
                          "", _cpu(s)) for s in group]
    measured = {s.compression: s for s in group if _space(s) is not None}
    out = []
    for s in group:
        space, source = _space(s), ""
        if space is None and s.compression in measured:  # same compression: the space it measured
            source = measured[s.compression].label
            space = _space(measured[s.compression])
        out.append(Candidate(s, s.get("throughput"), space, source, _cpu(s)))
    return out


def candidates(section: Section) -> tuple[list[Candidate], list[str]]:
    """The first group's candidates of its first workload (the Pareto chart's), and the notes."""
    groups, notes = _groups(section, None)
    if not groups:
        return [], notes
    first = groups[0][0].workload
    return candidates_of([s for s in groups[0] if s.workload == first]), notes


def pareto_front(cands: list[Candidate]) -> list[Candidate]:
    """Candidates no other beats in every objective (throughput up, space down, CPU down if known)."""
    cands = [c for c in cands if c.throughput is not None]
    use_cpu = all(c.cpu is not None for c in cands)

    def key(c: Candidate) -> tuple[float, ...]:
        assert c.throughput is not None
        values = (c.throughput.median, -(c.space if c.space is not None else float("inf")))
        return values + ((-c.cpu,) if use_cpu and c.cpu is not None else ())

    def dominates(a: Candidate, b: Candidate) -> bool:
        ka, kb = key(a), key(b)
        return all(x >= y for x, y in zip(ka, kb)) and ka != kb
    return [c for c in cands if not any(dominates(o, c) for o in cands if o is not c)]


def _smaller(a: Candidate, b: Candidate) -> str:
    assert a.space is not None and b.space is not None
    return f"{(1 - a.space / b.space) * 100:.0f} % smaller than {b.label}"


@dataclass
class _Pick:
    pick: Candidate | None
    reason: str
    notes: list[str]
    front: list[Candidate]
    scores: dict[tuple[str, ...], float]    # option -> score in [0, 1], for the overall pick
    confidence: Confidence | None = None     # against the runner-up (_confidence)


def _noise_notes(ranked: list[Candidate]) -> list[str]:
    if len(ranked) < 2 or ranked[0].throughput is None or ranked[1].throughput is None:
        return []
    pick, second = ranked[0], ranked[1]
    assert pick.throughput is not None and second.throughput is not None
    if pick.throughput.n > 1 and second.throughput.n > 1 and pick.throughput.overlaps(second.throughput):
        return [f"the data cannot decide on speed between {pick.label} and {second.label}: their repeats overlap "
                f"({pick.throughput.low / 1e6:.1f}-{pick.throughput.high / 1e6:.1f} vs "
                f"{second.throughput.low / 1e6:.1f}-{second.throughput.high / 1e6:.1f} MB/s)"]
    if pick.throughput.n < 2 or second.throughput.n < 2:
        return ["one run per configuration: the noise is unknown; repeat the matrix to know it"]
    return []


def _balanced(cands: list[Candidate], speed_weight: float, min_throughput: float) -> _Pick:
    """Throughput and space: today's Pareto pick (the FITS answer)."""
    notes = []
    if unmeasured := [c.label for c in cands if c.space is None]:
        notes.append(f"no on-disk size for {', '.join(unmeasured)}: not candidates")
    sized = [c for c in cands if c.space is not None and c.throughput is not None]
    front = pareto_front(sized)
    able = [c for c in sized if c.throughput and c.throughput.median >= min_throughput]
    if not able:
        best = max(sized, key=lambda c: c.mbs, default=None)
        why = (f"no configuration reaches {min_throughput / 1e6:.1f} MB/s"
               + (f"; the fastest is {best.label} at {best.mbs:.1f} MB/s" if best else ""))
        return _Pick(None, why, notes, front, {})
    fastest = max(sized, key=lambda c: c.mbs)
    smallest = min(c.space for c in sized if c.space is not None)

    def score(c: Candidate) -> float:
        assert c.space is not None
        return float((c.mbs / fastest.mbs) ** speed_weight * (smallest / c.space) ** (1 - speed_weight))
    ranked = sorted(able, key=lambda c: (score(c), c.mbs), reverse=True)  # ties: the faster
    pick = ranked[0]
    parts = [f"{pick.label}: " + ("the fastest" if pick is fastest else
                                  f"{pick.mbs / fastest.mbs * 100:.0f} % of the fastest ({fastest.label}, "
                                  f"{fastest.mbs:.1f} MB/s)")]
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
    return _Pick(pick, reason + ".", _noise_notes(ranked) + notes, front,
                 {_option(c.summary): score(c) for c in able})


def _fastest(cands: list[Candidate], min_throughput: float) -> _Pick:
    """Throughput only: the fastest, and how far behind the slowest is."""
    timed = [c for c in cands if c.throughput is not None]
    able = [c for c in timed if c.mbs * 1e6 >= min_throughput]
    if not able:
        best = max(timed, key=lambda c: c.mbs)
        return _Pick(None, f"no configuration reaches {min_throughput / 1e6:.1f} MB/s; the fastest is {best.label} "
                           f"at {best.mbs:.1f} MB/s", [], [], {})
    ranked = sorted(able, key=lambda c: c.mbs, reverse=True)
    pick, slowest = ranked[0], min(timed, key=lambda c: c.mbs)
    reason = f"{pick.label}: {pick.mbs:.1f} MB/s, the fastest"
    if slowest is not pick:
        reason += f"; the slowest, {slowest.label}, reaches {slowest.mbs:.1f} MB/s ({slowest.mbs / pick.mbs * 100:.0f} %)"
    return _Pick(pick, reason + ".", _noise_notes(ranked), [], {_option(c.summary): c.mbs / pick.mbs for c in able})


def _smallest(section: Section, cands: list[Candidate]) -> _Pick:
    """On-disk size only: the smallest, and what it saves against the first option; sizes as the
    configurations table prints them, the saving in a unit that shows it."""
    sized = [c for c in cands if c.space is not None]
    if not sized:
        return _Pick(None, "no configuration has an on-disk size", [], [], {})
    pick = min(sized, key=lambda c: (c.space, c.summary.cell))
    baseline = sized[0]
    reason = f"{pick.label}: the smallest on disk"
    mine, base = pick.summary.median("used"), baseline.summary.median("used")
    column = figure_columns(section).get("used")
    if mine is not None and column is not None:
        reason += f", {column.text(section, pick.summary)} {column.header.rsplit(' ', 1)[-1]}"
        if pick.summary.median("logical"):
            reason += f" ({pick.space * 100:.2f} % of the logical size)"  # type: ignore[operator]
    if baseline is not pick and mine is not None and base:
        name, unit = difference_unit([base - mine])
        reason += (f", {number((base - mine) / unit, 1)} {name} ({(1 - mine / base) * 100:.2f} %) less than "
                   f"{baseline.label} (the first configuration)")
    elif baseline is not pick:
        reason += f", {(1 - pick.space / baseline.space) * 100:.2f} % less than {baseline.label}"  # type: ignore[operator]
    return _Pick(pick, reason + ".", [], [], {_option(c.summary): min(x.space for x in sized) / c.space  # type: ignore[operator,type-var]
                                              for c in sized})


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values and min(values) > 0 else 0.0


def _shape(group: list[Summary]) -> str:
    tp = any(s.get("throughput") for s in group)
    space = any(_sized(s) for s in group)
    return "throughput and space" if tp and space else "throughput" if tp else "space" if space else "nothing"


def _decide(section: Section, cands: list[Candidate], shape: str, speed_weight: float,
            min_throughput: float) -> _Pick:
    if shape == "throughput and space":
        return _balanced(cands, speed_weight, min_throughput)
    if shape == "throughput":
        return _fastest(cands, min_throughput)
    return _smallest(section, cands)


def _unanswerable(shape: str, speed_weight: float, min_throughput: float) -> str | None:
    if shape == "nothing":
        return "neither throughput nor on-disk size was measured"
    if shape == "throughput" and speed_weight == 0:
        return "no on-disk size was measured: --speed-weight 0 (space only) has nothing to weigh"
    if shape == "space" and speed_weight == 1:
        return "no throughput was measured: --speed-weight 1 (speed only) has nothing to weigh"
    if shape == "space" and min_throughput > 0:
        return (f"no throughput was measured, so no configuration can be shown to reach {min_throughput / 1e6:.1f} "
                f"MB/s (without --min-throughput: the smallest)")
    return None


def _in_group(section: Section, group: list[Summary], speed_weight: float,
              min_throughput: float) -> tuple[_Pick, list[tuple[str, str]], str]:
    """The pick within one group (per workload, then overall) and how sure it is."""
    chosen, lines, shape = _pick_in_group(section, group, speed_weight, min_throughput)
    chosen.confidence = _confidence(group, chosen, shape, speed_weight)
    return chosen, lines, shape


def _pick_in_group(section: Section, group: list[Summary], speed_weight: float,
                   min_throughput: float) -> tuple[_Pick, list[tuple[str, str]], str]:
    shape = _shape(group)
    if why := _unanswerable(shape, speed_weight, min_throughput):
        return _Pick(None, why, [], [], {}), [], shape
    workloads = list(dict.fromkeys(s.workload for s in group))
    picks = {w: _decide(section, candidates_of([s for s in group if s.workload == w]), shape, speed_weight,
                        min_throughput)
             for w in workloads}
    if len(workloads) == 1:
        return picks[workloads[0]], [], shape
    lines = [(workload_text(w), p.reason) for w, p in picks.items()]
    options = list(dict.fromkeys(_option(s) for s in group))
    overall = {o: [p.scores[o] for p in picks.values() if o in p.scores] for o in options}
    complete = {o: _geomean(v) for o, v in overall.items() if len(v) == len(workloads)}
    if not complete:
        return _Pick(None, "no configuration reaches the minimum in every workload" if min_throughput else
                     "no configuration was measured in every workload", [], [], {}), lines, shape
    best = max(complete, key=lambda o: complete[o])
    summary = next(s for s in group if _option(s) == best)
    wins = sum(p.pick is not None and _option(p.pick.summary) == best for p in picks.values())
    won, against = {"throughput and space": ("picked", f"the best score (speed weight {speed_weight:g})"),
                    "throughput": ("the fastest", "the fastest"), "space": ("the smallest", "the smallest")}[shape]
    reason = (f"{summary.label}: {won} in {wins} of {len(workloads)} workloads; on average {complete[best] * 100:.0f} % "
              f"of {against} per workload (geometric mean over {len(workloads)} workloads, each counted the same).")
    pick = Candidate(summary, summary.get("throughput"), _space(summary), "", _cpu(summary))
    notes = [n for p in picks.values() for n in p.notes if n.startswith("one run per configuration")][:1]
    return _Pick(pick, reason, notes, [], complete), lines, shape


def _confidence(group: list[Summary], chosen: _Pick, shape: str, speed_weight: float) -> Confidence | None:
    """How sure the group's pick is against the runner-up among the options it was picked from (those
    reaching the minimum, in every workload): on recommend's score in log space (throughput alone
    without on-disk sizes), per workload, every workload counted the same. None for a pick on size
    alone: the on-disk size of the same data is not noisy, there is no interval to state."""
    if chosen.pick is None or shape not in ("throughput", "throughput and space"):
        return None
    weight = speed_weight if shape == "throughput and space" else 1.0
    workloads: list[dict[tuple[str, ...], list[float]]] = []
    names: dict[tuple[str, ...], str] = {}
    for workload in dict.fromkeys(s.workload for s in group):
        samples = {}
        for c in candidates_of([s for s in group if s.workload == workload]):
            option = _option(c.summary)
            if option in chosen.scores and c.throughput is not None and (weight == 1 or c.space):
                samples[option] = [objective(v, c.space if weight < 1 else None, weight) for v in c.throughput.values]
                names.setdefault(option, c.label)
        workloads.append(samples)
    pick = _option(chosen.pick.summary)
    everywhere = [o for o in names if all(o in w for w in workloads)]
    if pick not in everywhere or len(everywhere) < 2:
        return None
    overall = {o: mean([mean(w[o]) for w in workloads]) for o in everywhere}
    runner_up = max((o for o in everywhere if o != pick), key=lambda o: overall[o])
    return confidence_of(pick, runner_up, workloads, what="score" if weight < 1 else "throughput", names=names)


_NOTE_ORDER = ("the data cannot decide", "the pick depends on", "configuration(s) of", "no on-disk size for",
               "no on-disk size was",
               "no throughput was", "one run per configuration")


def _ordered(notes: list[str]) -> list[str]:
    """Notes in one order whatever produced them: what undermines the pick first, the noise last."""
    def rank(note: str) -> int:
        return next((i for i, start in enumerate(_NOTE_ORDER) if start in note), len(_NOTE_ORDER))
    return sorted(dict.fromkeys(notes), key=rank)


def recommend(section: Section, speed_weight: float = 0.5, min_throughput: float = 0.0,
              workload: str | None = None) -> Recommendation:
    if not 0 <= speed_weight <= 1:
        raise RecommendError(f"--speed-weight {speed_weight}: between 0 (space only) and 1 (speed only)")
    if min_throughput < 0:
        raise RecommendError(f"--min-throughput {min_throughput}: a throughput is not negative")
    if workload is not None and workload not in section.workloads:
        raise RecommendError(f"{section.matrix} has no workload {workload!r}; it has {', '.join(section.workloads)}")
    groups, notes = _groups(section, workload)
    first = candidates_of([s for s in groups[0] if s.workload == groups[0][0].workload]) if groups else []
    if not groups:
        why = (f"nothing to choose between: {section.matrix} has no two configurations that differ only in "
               f"{CHOICES}")
        if others := [a.name for a in section.axes]:
            why += f"; `zfsnas-bench compare --by {others[0]}` sets each of its axes side by side ({', '.join(others)})"
        return Recommendation(section.matrix, first, [], None, why, notes)
    results = [_in_group(section, g, speed_weight, min_throughput) for g in groups]
    shape = results[0][2]
    if shape == "throughput":
        notes.append("no on-disk size was measured: the pick is on speed alone")
    elif shape == "space":
        notes.append("no throughput was measured: the pick is on size alone")
    if len(groups) == 1:
        chosen, lines, _ = results[0]
        return Recommendation(section.matrix, first, chosen.front, chosen.pick, chosen.reason,
                              _ordered(chosen.notes + notes), shape, lines,
                              confidences=[("", chosen.confidence)] if chosen.confidence else [])
    # Several settings (e.g. two RAM sizes x two NTFS clusters): a pick in each, and whether they agree.
    sure = [(section.describe(g[0], OPTION_AXES), r[0].confidence) for g, r in zip(groups, results)]
    confidences = [(where, c) for where, c in sure if c is not None]
    lines = []
    for group, (chosen, per_workload, _) in zip(groups, results):
        where = section.describe(group[0], OPTION_AXES)
        lines += [(f"{where}: {w}", text) for w, text in per_workload]
        lines.append((f"{where}: overall" if per_workload else where, chosen.reason))
    picked = [r[0].pick for r in results]
    labels = {p.label for p in picked if p is not None}
    main = results[0][0]
    reasons = {r[0].reason for r in results}
    settings = [a.name for a in section.axes if a.name not in OPTION_AXES]
    if len(labels) == 1 and all(picked):
        reason = (f"{picked[0].label} in every one of the {len(groups)} settings ({', '.join(settings)}).")  # type: ignore[union-attr]
        return Recommendation(section.matrix, first, main.front, picked[0], reason, _ordered(main.notes + notes),
                              shape, lines, confidences=confidences)
    if not any(picked) and len(reasons) == 1:
        # the same reason in every setting (nothing to weigh, no minimum reached)
        return Recommendation(section.matrix, first, main.front, None, reasons.pop(), _ordered(main.notes + notes),
                              shape, lines)
    conditional, reason, why = _conditional(section, groups, [r[0] for r in results])
    return Recommendation(section.matrix, first, main.front, None, reason, _ordered([why] + main.notes + notes), shape,
                          lines, conditional, confidences)


def _conditional(section: Section, groups: list[list[Summary]],
                 chosen: list[_Pick]) -> tuple[list[tuple[str, Candidate | None]], str, str]:
    """Settings that disagree: the fewest setting axes whose values decide the pick (ntfs_cluster,
    not RAM), a pick for each of their values, and why no single pick stands."""
    axes = [a for a in section.axes if a.name not in OPTION_AXES]
    values = [{a.name: a.value(g[0].config) for a in axes} for g in groups]
    labels = [p.pick.label if p.pick else None for p in chosen]
    deciding = [a.name for a in axes]
    for size in range(1, len(axes) + 1):
        found = next((list(names) for names in combinations([a.name for a in axes], size)
                      if len({tuple(v[n] for n in names) for v in values}) ==
                      len({(tuple(v[n] for n in names), label) for v, label in zip(values, labels)})), None)
        if found:
            deciding = found
            break
    out: dict[str, tuple[Candidate | None, str]] = {}
    for v, p in zip(values, chosen):
        where = ", ".join(f"{n} {v[n]}" for n in deciding)
        out.setdefault(where, (p.pick, p.reason))
    conditional = [(where, pick) for where, (pick, _reason) in out.items()]
    parts = [f"{pick.label if pick else 'no pick (' + reason.rstrip('.') + ')'} with {where}"
             for where, (pick, reason) in out.items()]
    others = [a.name for a in axes if a.name not in deciding]
    reason = "per setting: " + "; ".join(parts) + (f" ({', '.join(others)} does not change it)" if others else "") + "."
    why = (f"the pick depends on {' and '.join(deciding)}: no one configuration is best in every setting, so "
           f"choose by yours")
    return conditional, reason, why


def render(rec: Recommendation) -> str:
    lines = [f"recommend {rec.matrix}", ""]
    if rec.shape == "throughput and space" and rec.front:
        lines.append("Pareto-optimal (throughput vs on-disk size"
                     + (", CPU" if all(c.cpu is not None for c in rec.front) else "") + "):")
        for c in sorted(rec.front, key=lambda c: -c.mbs):
            extra = f", CPU {c.cpu * 100:.1f} %" if c.cpu is not None else ""
            lines.append(f"  {c.label:<20} {c.mbs:8.1f} MB/s  {c.space * 100 if c.space else 0:5.1f} % of logical "
                         f"on disk{extra} [{c.summary.id}]")
        lines.append("")
    if rec.per_workload:
        lines.append(f"per {'setting and ' if any(': ' in w for w, _ in rec.per_workload) else ''}workload "
                     f"({rec.shape}):")
        lines += [f"  {where}: {text}" for where, text in rec.per_workload]
        lines.append("")
    lines.append(("pick: " if rec.pick else "pick " if rec.conditional else "no pick: ") + rec.reason)
    lines += rec.confidence
    lines += [f"note: {n}" for n in rec.notes]
    return "\n".join(lines) + "\n"
