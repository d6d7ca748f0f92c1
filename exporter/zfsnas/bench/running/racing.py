"""`run --until-decided`: race the configurations of a matrix instead of repeating all of them.

Owns the race: which configurations compete (those that differ only in the properties a user
chooses, compression and recordsize/volblocksize, within one setting and one workload, as
`recommend` compares them), the objective of each run (intervals.objective: recommend's score in log
space), which configurations run again after each round (intervals.next_round: every configuration
whose interval still overlaps the leader's), when to stop (every race decided at the stated
confidence, the budget spent, or the repeat cap reached) and the verdict, said for each race and
kept with the run (`to_record`; `stored_verdict` reads it back for report and recommend). The runner
runs the cells it is handed (runner.py); planning a repeat is the planner's (a `replan` callable).
Reads figures, runs nothing itself.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...store.configuration import Configuration
from ...store.schema import ResultFigures
from ..statistics.intervals import confidence_of, mean, next_round, objective, race_state
from .matrix import Cell
from .planner import CellPlan

CHOSEN = ("property compression", "property recordsize", "property volblocksize")


@dataclass(frozen=True)
class RaceSettings:
    confidence: float = 0.95
    budget: float | None = None          # seconds of wall time for the whole run; None: no limit
    max_repeats: int = 10
    speed_weight: float = 0.5


@dataclass
class Entrant:
    """One configuration in a race: its cell (to plan a repeat), its label and each run's figures."""
    config: Configuration
    cell: Cell
    label: str
    throughput: list[float] = field(default_factory=list)
    space: list[float | None] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def group_key(config: Configuration) -> tuple[tuple[str, str], ...]:
    """What a race is: every identity field except the properties a user chooses between."""
    return tuple(sorted((k, v) for k, v in config.flat().items() if k not in CHOSEN))


def label(config: Configuration) -> str:
    props = dict(config.properties)
    block = props.get("recordsize") or (f"volblocksize {props['volblocksize']}" if "volblocksize" in props else "")
    return " / ".join(p for p in (props.get("compression", ""), block) if p) or config.id


def space_of(f: ResultFigures) -> float | None:
    """On-disk bytes per logical byte, as recommend reads it."""
    if f.used_bytes is not None and f.logicalused_bytes:
        return f.used_bytes / f.logicalused_bytes
    return 1 / f.compressratio if f.compressratio else None


class Race:
    """The state of every race of a run; the runner calls `record` after each cell and `next_cells`
    after each round."""

    def __init__(self, settings: RaceSettings, replan: Callable[[int, Cell], CellPlan],
                 clock: Callable[[], float] = time.monotonic):
        self.settings, self.replan, self.clock = settings, replan, clock
        self.started = clock()
        self.groups: dict[tuple[tuple[str, str], ...], dict[str, Entrant]] = {}
        self.outcome = ""              # decided, budget, repeats, stopped (set when the race ends)
        self.failed: list[str] = []

    def record(self, plan: CellPlan, config: Configuration, status: str, figures: ResultFigures,
               seconds: float) -> None:
        group = self.groups.setdefault(group_key(config), {})
        entrant = group.setdefault(config.id, Entrant(config, replace(plan.cell, repeat=1), label(config)))
        if status != "complete" or not figures.throughput_bytes_per_second:
            self.failed.append(f"{entrant.label}: {status}")
            return
        entrant.throughput.append(figures.throughput_bytes_per_second)
        entrant.space.append(space_of(figures))
        entrant.seconds.append(seconds)

    def samples(self, group: dict[str, Entrant]) -> dict[str, list[float]]:
        """Each configuration's objective per run; on throughput alone when one of them has no size."""
        with_space = all(s is not None for e in group.values() for s in e.space)
        weight = self.settings.speed_weight if with_space else 1.0
        return {cid: [objective(t, s if with_space else None, weight) for t, s in zip(e.throughput, e.space)]
                for cid, e in group.items() if e.throughput}

    def allows(self, plan: CellPlan, config_id: str) -> bool:
        """Whether the budget leaves room for this cell (its configuration's mean duration so far)."""
        if self.settings.budget is None:
            return True
        known = [s for g in self.groups.values() for cid, e in g.items() if cid == config_id for s in e.seconds]
        everything = [s for g in self.groups.values() for e in g.values() for s in e.seconds]
        expected = mean(known) if known else (mean(everything) if everything else plan.estimate_seconds)
        return self.clock() - self.started + expected <= self.settings.budget

    def next_cells(self, next_index: int) -> list[CellPlan]:
        """The plans of the next round ([] when the race is over, with `outcome` set)."""
        wanted: list[Entrant] = []
        capped = False
        for group in self.groups.values():
            samples = self.samples(group)
            if len(samples) < 2:
                continue
            for cid in next_round(samples, self.settings.confidence):
                entrant = group[cid]
                if len(entrant.throughput) >= self.settings.max_repeats:
                    capped = True
                    continue
                wanted.append(entrant)
        if not wanted:
            self.outcome = self.outcome or ("repeats" if capped else "decided")
            return []
        plans = []
        for i, entrant in enumerate(wanted):
            cell = replace(entrant.cell, repeat=len(entrant.throughput) + 1)
            plans.append(self.replan(next_index + i, cell))
        return plans

    def stop(self, why: str) -> None:
        self.outcome = why

    def verdict(self) -> list[str]:
        """One line per race (and why the race ended), what `run` prints at its end."""
        return self.to_record()["verdict"]

    def to_record(self) -> dict[str, Any]:
        """How the races ended, as the run keeps it (Store.record_race): why they stopped, each race's
        pick or contenders with its confidence, and the lines `run` printed."""
        why = {"decided": f"decided at {self.settings.confidence * 100:g} % confidence",
               "budget": f"budget of {_duration(self.settings.budget)} spent",
               "repeats": f"{self.settings.max_repeats} repeats reached",
               "stopped": "stopped"}.get(self.outcome, self.outcome or "stopped")
        runs = sum(len(e.throughput) for g in self.groups.values() for e in g.values())
        seconds = self.clock() - self.started
        lines = [f"race {why} after {runs} run(s) in {_duration(seconds)}"]
        races = []
        for group in self.groups.values():
            samples = self.samples(group)
            if len(samples) < 2:
                continue
            state = race_state(samples, self.settings.confidence)
            ranked = sorted(samples, key=lambda c: mean(samples[c]), reverse=True)
            names = {cid: group[cid].label for cid in samples}
            what = "score (recommend's)" if any(s is not None for e in group.values() for s in e.space) else "throughput"
            sure = confidence_of(ranked[0], ranked[1], [samples], self.settings.confidence, what, names)
            head = (f"pick {names[state.leader]}: decided" if state.decided else
                    f"undecided between {', '.join(names[c] for c in state.contenders)}")
            lines.append(f"{head}; {sure.sentence()}")
            races.append({"leader": names[state.leader], "decided": state.decided,
                          "contenders": [names[c] for c in state.contenders],
                          "runs": {names[c]: len(v) for c, v in samples.items()}, "confidence": sure.sentence()})
        lines += [f"failed: {f}" for f in self.failed]
        return {"outcome": self.outcome or "stopped", "confidence": self.settings.confidence,
                "budget_seconds": self.settings.budget, "max_repeats": self.settings.max_repeats,
                "speed_weight": self.settings.speed_weight, "runs": runs, "seconds": round(seconds, 1),
                "races": races, "failed": self.failed, "verdict": lines}


def stored_verdict(run_id: str, record: str | None) -> list[str]:
    """What a stored race record says, for `report` and `recommend`: how it ended, then each race's
    line as `run` printed it ([] for a run that was no race, or a record that cannot be read)."""
    try:
        data = json.loads(record or "null")
        lines = [str(line) for line in data["verdict"]]
    except (ValueError, TypeError, KeyError):
        return []
    if not lines:
        return []
    return [f"raced (`run --until-decided`, run {run_id}): {lines[0].removeprefix('race ')}", *lines[1:]]


def _duration(seconds: float | None) -> str:
    if seconds is None or math.isinf(seconds):
        return "no limit"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def parse_duration(text: str) -> float:
    """Seconds of `30m`, `2h`, `90s`, `1h30m` or a bare number of seconds."""
    import re

    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", value)
        if not parts or not any(parts.groups()):
            raise ValueError(f"{text!r}: a duration like 30m, 2h, 1h30m or 90s")
        h, m, s = (int(g or 0) for g in parts.groups())
        seconds = h * 3600 + m * 60 + s
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration above 0")
    return seconds
