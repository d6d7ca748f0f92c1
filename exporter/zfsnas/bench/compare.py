"""`zfsnas-bench compare A B`: did a configuration change, and was it more than noise?

A and B are each a run id (matrix_runs.id) or a configuration id. Per configuration of B: the change
in throughput, ratio and CPU against A, whether it exceeds the spread of the repeats, and the
regression verdict of ZfsBenchThroughputRegression itself: B's newest complete result of that
configuration against the median of every earlier complete result of it in A and B, regression
when `newest / previous median <= 1 - bench_regression_max_drop`, the threshold read from
alerts/thresholds.toml (the file the rules are tested against). So `compare CONFIG NEWEST-RUN` and
the alert say the same thing about the same history. Configurations that differ are never compared:
they are listed with what tells them apart.

Owns that verdict and the comparison table; reads the store, writes nothing.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Configuration, differences
from .report import Stat
from .store import Store
from .tables import Table

THRESHOLD = "bench_regression_max_drop"


class CompareError(Exception):
    pass


def thresholds_path() -> Path | None:
    """$ZFSNAS_THRESHOLDS, else the checkout's alerts/thresholds.toml, else a copy under
    <prefix>/share/zfsnas/alerts/."""
    if env := os.environ.get("ZFSNAS_THRESHOLDS"):
        return Path(env)
    candidates = [Path(__file__).resolve().parents[3] / "alerts" / "thresholds.toml"]
    for root in (sysconfig.get_paths()["data"], sys.prefix, "/usr/local", "/usr"):
        candidates.append(Path(root) / "share/zfsnas/alerts/thresholds.toml")
    return next((c for c in candidates if c.is_file()), None)


def max_drop(path: Path | None = None) -> float:
    """The regression threshold the alert uses (bench_regression_max_drop, e.g. 0.15)."""
    path = path or thresholds_path()
    if path is None:
        raise CompareError("alerts/thresholds.toml not found (set $ZFSNAS_THRESHOLDS or pass --max-drop 0.15)")
    try:
        value = tomllib.loads(path.read_text())[THRESHOLD]
    except (OSError, ValueError, KeyError) as exc:
        raise CompareError(f"{path}: no readable {THRESHOLD} ({exc})") from None
    return float(value)


def is_regression(newest: float, previous_median: float, drop: float) -> bool:
    """ZfsBenchThroughputRegression's expression, the same float arithmetic:
    `newest / (previous_median > 0) <= 1 - drop`."""
    return previous_median > 0 and newest / previous_median <= 1 - drop


def _order(row: Mapping[str, Any]) -> tuple[float, int]:
    # The exporter's order (sources/benchdb.py): by finish time, then id.
    return (float(row["finished"] or 0), int(row["id"]))


@dataclass(frozen=True)
class Change:
    config: Configuration
    verdict: str                      # regression | slower | faster | within noise | noise unknown | different configuration
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


def resolve(store: Store, ref: str) -> list[dict[str, Any]]:
    """The complete results of run `ref`, else of configuration `ref`."""
    rows = [dict(r) for r in store.results("complete")]
    by_run = [r for r in rows if r["run_id"] == ref]
    found = by_run or [r for r in rows if r["config_id"] == ref]
    if not found:
        raise CompareError(f"{ref}: no complete results of a run or configuration with this id "
                           f"(`zfsnas-bench list` shows both)")
    return found


def _stat(rows: list[dict[str, Any]], key: str) -> Stat | None:
    return Stat.of(r[key] for r in rows)


def _cpu(rows: list[dict[str, Any]]) -> float | None:
    shares = []
    for r in rows:
        parts = [r.get(f"cpu_{k}_seconds") for k in ("user", "system", "iowait", "idle")]
        if all(p is not None for p in parts) and sum(parts):  # type: ignore[arg-type]
            shares.append((parts[0] + parts[1]) / sum(parts) * 100)  # type: ignore[operator,arg-type]
    stat = Stat.of(shares)
    return None if stat is None else stat.median


def compare(a_rows: list[dict[str, Any]], b_rows: list[dict[str, Any]], drop: float) -> list[Change]:
    configs = {r["config_id"]: Configuration.from_json(r["config"]) for r in a_rows + b_rows}
    a_ids = list(dict.fromkeys(r["config_id"] for r in a_rows))
    if len(a_ids) == 1 and any(r["config_id"] == a_ids[0] for r in b_rows):  # one configuration against a run
        b_rows = [r for r in b_rows if r["config_id"] == a_ids[0]]
    out = []
    for cid in dict.fromkeys(r["config_id"] for r in b_rows):
        b = [r for r in b_rows if r["config_id"] == cid]
        a = [r for r in a_rows if r["config_id"] == cid and r["id"] not in {x["id"] for x in b}]
        config = configs[cid]
        if not a:
            others = [configs[o] for o in a_ids if o != cid]
            nearest = min(others, key=lambda o: len(differences(o, config)), default=None)
            detail = "; ".join(differences(nearest, config)) if nearest else "A has no result of it"
            out.append(Change(config, "different configuration", None, _stat(b, "throughput_bytes_per_second"),
                              None, None, detail=f"vs {nearest.id if nearest else 'A'}: {detail}"))
            continue
        newest = max(b, key=_order)
        earlier = [r for r in a + b if _order(r) < _order(newest)]
        previous = Stat.of(r["throughput_bytes_per_second"] for r in earlier)
        sa = _stat(a, "throughput_bytes_per_second")
        sb = _stat(b, "throughput_bytes_per_second")
        tp = newest["throughput_bytes_per_second"]
        if tp is not None and previous is not None and is_regression(tp, previous.median, drop):
            verdict = "regression"
        elif sa is None or sb is None or (sa.n < 2 and sb.n < 2):
            verdict = "noise unknown"
        elif sa.overlaps(sb):
            verdict = "within noise"
        else:
            verdict = "slower" if sb.median < sa.median else "faster"
        ra, rb = _stat(a, "compressratio"), _stat(b, "compressratio")
        out.append(Change(config, verdict, sa, sb, tp, None if previous is None else previous.median,
                          ra.median if ra else None, rb.median if rb else None, _cpu(a), _cpu(b)))
    return out


VERDICTS = {
    "regression": "regression: {pct} of the previous median, at or below the alert's {limit}",
    "slower": "slower, beyond the noise of the repeats",
    "faster": "faster, beyond the noise of the repeats",
    "within noise": "within noise: the repeats' ranges overlap",
    "noise unknown": "one run each: noise unknown",
    "different configuration": "not compared: different configurations",
}


def _mbs(stat: Stat | None) -> str:
    if stat is None:
        return ""
    text = f"{stat.median / 1e6:.1f}"
    return text + (f" ({stat.low / 1e6:.1f}-{stat.high / 1e6:.1f})" if stat.n > 1 else "")


def _num(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def table(changes: list[Change], drop: float) -> Table:
    rows = []
    for c in changes:
        labels = c.config.labels
        change = "" if not (c.a and c.b) else f"{(c.b.median / c.a.median - 1) * 100:+.1f} %"
        vs = "" if c.vs_previous is None else f"{c.vs_previous * 100:.1f} %"
        verdict = VERDICTS[c.verdict].format(pct=vs, limit=f"{(1 - drop) * 100:.0f} %")
        rows.append([c.config.id, c.config.workload, labels["compression"], labels["recordsize"], c.config.size,
                     _mbs(c.a), _mbs(c.b), change, vs, _num(c.ratio_a, 3), _num(c.ratio_b, 3),
                     _num(c.cpu_a, 1), _num(c.cpu_b, 1), verdict + (f" ({c.detail})" if c.detail else "")])
    return Table("compare", ["config", "workload", "compression", "recordsize", "size", "A MB/s", "B MB/s", "change",
                             "newest vs previous median", "A ratio", "B ratio", "A CPU %", "B CPU %", "verdict"], rows,
                 f"Regression = B's newest run at or below {(1 - drop) * 100:.0f} % of the median of the earlier runs "
                 f"of its configuration: the rule and threshold of ZfsBenchThroughputRegression.")
