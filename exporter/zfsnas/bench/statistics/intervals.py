"""Intervals and decisions: how sure an answer is, said in numbers a reader can check.

Owns Student's t (its distribution function through the regularized incomplete beta function, and
its quantiles by bisection: no SciPy), the pooled noise of a set of configurations measured in log
space (throughput noise is multiplicative: a 3 % wobble is 3 % at 100 MB/s and at 1 GB/s), each
configuration's interval and the interval of the difference between two, the racing decision
(`race_state`: the leader, the configurations whose interval still overlaps the leader's, decided
or not), and how sure a pick is against its runner-up (`confidence_of`: a Confidence, said as a
sentence or as the clause that closes the findings' pick), which `recommend`, every report and
`run --until-decided` all state. Pure: numbers in, numbers and sentences out.

The objective of a configuration is the one `recommend` picks by: log(throughput) weighted by the
speed weight w, minus (1 - w) log(on-disk share) where an on-disk size was measured
(`objective`); the on-disk share is measured once per run and barely moves, so the noise is the
throughput's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _nonzero(v: float) -> float:
    return v if abs(v) > 1e-300 else 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 / _nonzero(1.0 - qab * x / qap)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 / _nonzero(1.0 + aa * d)
            c = _nonzero(1.0 + aa / c)
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (0 < p < 1); the normal quantile when df is infinite."""
    if math.isinf(df):
        from statistics import NormalDist

        return NormalDist().inv_cdf(p)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
        if high > 1e12:
            return math.inf
    for _ in range(200):
        mid = (low + high) / 2
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-10 * max(1.0, high):
            break
    return (low + high) / 2


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True)
class Noise:
    """The pooled within-configuration standard deviation and its degrees of freedom (0: unknown)."""
    sd: float
    df: int

    @property
    def known(self) -> bool:
        return self.df > 0


def pooled_noise(samples: Mapping[Any, Sequence[float]]) -> Noise:
    """Pooled sd of every configuration's repeats around its own mean (one-run configurations add nothing)."""
    squares, df = 0.0, 0
    for values in samples.values():
        if len(values) > 1:
            m = mean(values)
            squares += sum((v - m) ** 2 for v in values)
            df += len(values) - 1
    return Noise(math.sqrt(squares / df) if df else math.nan, df)


def mean_interval(values: Sequence[float], noise: Noise, confidence: float) -> Interval:
    """The two-sided interval of a configuration's mean objective (infinite while the noise is unknown)."""
    m = mean(values)
    if not noise.known:
        return Interval(-math.inf, math.inf)
    half = t_quantile((1 + confidence) / 2, noise.df) * noise.sd / math.sqrt(len(values))
    return Interval(m - half, m + half)


def difference_interval(a: Sequence[float], b: Sequence[float], noise: Noise, confidence: float) -> Interval:
    """The two-sided interval of mean(a) - mean(b) with the pooled noise."""
    d = mean(a) - mean(b)
    if not noise.known:
        return Interval(-math.inf, math.inf)
    half = t_quantile((1 + confidence) / 2, noise.df) * noise.sd * math.sqrt(1 / len(a) + 1 / len(b))
    return Interval(d - half, d + half)


def objective(throughput: float, space: float | None, speed_weight: float) -> float:
    """What `recommend` ranks by, in log space: w log(throughput) - (1 - w) log(on-disk share);
    log(throughput) alone without a measured size."""
    if space is None or space <= 0:
        return math.log(throughput)
    return speed_weight * math.log(throughput) - (1 - speed_weight) * math.log(space)


@dataclass(frozen=True)
class RaceState:
    """Where a race stands: the leader, the configurations still in it (the leader's included) and
    each configuration's interval."""
    leader: Any
    contenders: tuple[Any, ...]
    intervals: dict[Any, Interval]
    noise: Noise

    @property
    def decided(self) -> bool:
        return self.contenders == (self.leader,)


def race_state(samples: Mapping[Any, Sequence[float]], confidence: float) -> RaceState:
    """The leader (highest mean objective) and every configuration whose interval overlaps its
    interval at `confidence`. While no configuration has been repeated the noise is unknown and all
    are in. One configuration alone is decided."""
    measured = {k: v for k, v in samples.items() if v}
    noise = pooled_noise(measured)
    leader = max(measured, key=lambda k: mean(measured[k]))
    intervals = {k: mean_interval(v, noise, confidence) for k, v in measured.items()}
    contenders = tuple(k for k in measured if k == leader or intervals[k].overlaps(intervals[leader]))
    contenders = (leader, *[k for k in contenders if k != leader])
    return RaceState(leader, contenders, intervals, noise)


def next_round(samples: Mapping[Any, Sequence[float]], confidence: float) -> list[Any]:
    """The configurations to run once more: after a single run each (noise unknown) the top third
    (two at least), so that the noise gets known where it matters; afterwards every contender."""
    state = race_state(samples, confidence)
    if state.decided:
        return []
    if not state.noise.known:
        ranked = sorted(samples, key=lambda k: mean(samples[k]), reverse=True)
        return ranked[:max(2, -(-len(ranked) // 3))]
    return list(state.contenders)


def percent(log_ratio: float) -> str:
    """A log-space difference as a signed percentage: +12.3 %."""
    if math.isinf(log_ratio):
        return "+inf %" if log_ratio > 0 else "-inf %"
    return f"{(math.exp(log_ratio) - 1) * 100:+.1f} %"


@dataclass(frozen=True)
class Confidence:
    """How sure a pick is against its runner-up: the difference of their mean objectives (log space;
    over several workloads the mean of the per-workload differences, as recommend's geometric mean
    counts every workload the same), its interval at `level` from the pooled noise (None while no
    configuration was repeated), and the runs behind it."""
    pick: str
    runner_up: str
    what: str                   # throughput, or score (recommend's)
    difference: float
    interval: Interval | None
    level: float
    runs: tuple[int, int]       # the pick's and the runner-up's runs (the fewest in any workload)
    uneven: bool                # the runs differ between workloads
    workloads: int
    repeated: int               # configurations repeated, whose noise is pooled
    df: int

    @property
    def verdict(self) -> str:
        if self.interval is None:
            return "not decided"
        return ("decided" if self.interval.low > 0 else "the runner-up is ahead" if self.interval.high < 0
                else "not decided")

    @property
    def _what(self) -> str:
        return self.what + (f" (mean over {self.workloads} workloads)" if self.workloads > 1 else "")

    def _runs(self, short: bool = False) -> str:
        a, b = self.runs
        text = (("one run each" if a == 1 else f"{a} runs each") if short and a == b else
                f"{a} and {b} run{'s' if short and b > 1 else '' if short else '(s)'}")
        return ("at least " if self.uneven else "") + text + (" per workload" if self.workloads > 1 else "")

    def sentence(self) -> str:
        """The long form: `recommend`'s confidence line and the race's verdict."""
        head = f"confidence: {self.pick} is {percent(self.difference)} on {self._what} over the runner-up {self.runner_up}"
        if self.interval is None:
            return f"{head} ({self._runs()}); no configuration was repeated, so the noise is unknown and nothing is decided"
        why = {"not decided": "not decided: the interval includes no difference"}.get(self.verdict, self.verdict)
        return (f"{head} ({self.level * 100:.0f} % interval {percent(self.interval.low)} to "
                f"{percent(self.interval.high)}; {self._runs()}, noise pooled over {self.repeated} repeated "
                f"configuration(s), {self.df} degree(s) of freedom): {why}")

    def clause(self, verdict: bool = True) -> str:
        """The short form that closes the findings' pick sentence (`verdict`: led by it)."""
        head = (f"{self.verdict}: " if verdict else "") + f"{percent(self.difference)} on {self.what} over {self.runner_up}"
        if self.interval is None:
            return f"{head} from {self._runs(True)} (noise unknown)"
        return (f"{head}, {self.level * 100:.0f} % interval {percent(self.interval.low)} to "
                f"{percent(self.interval.high)} ({self._runs(True)})")


def confidence_of(pick: Any, runner_up: Any, workloads: Sequence[Mapping[Any, Sequence[float]]],
                  level: float = 0.95, what: str = "throughput", names: Mapping[Any, str] | None = None) -> Confidence:
    """The Confidence of `pick` against `runner_up` over one or more workloads, each a mapping of
    configuration -> log-space objective per run (both must be in every one). The noise is pooled
    over every configuration of every workload."""
    names = names or {}
    noise = pooled_noise({(i, k): v for i, samples in enumerate(workloads) for k, v in samples.items()})
    n = len(workloads)
    diff = sum(mean(w[pick]) - mean(w[runner_up]) for w in workloads) / n
    a_runs, b_runs = [len(w[pick]) for w in workloads], [len(w[runner_up]) for w in workloads]
    interval = None
    if noise.known:
        spread = math.sqrt(sum(1 / a + 1 / b for a, b in zip(a_runs, b_runs))) / n
        half = t_quantile((1 + level) / 2, noise.df) * noise.sd * spread
        interval = Interval(diff - half, diff + half)
    repeated = sum(1 for w in workloads for v in w.values() if len(v) > 1)
    return Confidence(names.get(pick, str(pick)), names.get(runner_up, str(runner_up)), what, diff, interval, level,
                      (min(a_runs), min(b_runs)), len(set(a_runs)) > 1 or len(set(b_runs)) > 1, n, repeated,
                      noise.df)


def pick_confidence(pick: str, runner_up: str, samples: Mapping[str, Sequence[float]], confidence: float = 0.95,
                    what: str = "throughput") -> str:
    """How sure a pick is, in one sentence: the repeats of the pick and the runner-up, the difference
    between them with its interval at `confidence` (pooled noise of every configuration in
    `samples`, which hold the log-space objective of each run) and whether that decides it."""
    return confidence_of(pick, runner_up, [samples], confidence, what).sentence()
