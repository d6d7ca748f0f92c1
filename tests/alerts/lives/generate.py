"""Plan, make and judge lives: `python -m tests.alerts.lives --healthy 300 --sick 300`.

Life `n` of seed `s` is made from `random.Random(f"{s}:{n}")` alone, so a failure replays with
`--seed s --life n` (the seed is printed first). `--rules` judges another rule file (main's, for
the "before" figures), `--exporter main` gives the lives main's exporter (tests/alerts/lives/model.py
EXPORTERS), `--keep DIR` keeps the promtool files.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

from .check import CHECKS, RULES, Outcome, run
from .faults import KINDS, Kind
from .model import EXPORTERS, TIERS, Exporter, Life
from .nas import Nas

TOPOLOGY_WEIGHTS = {"stack": 5, "agent": 3, "central": 2}
HEALTHY_TIER_SHARE = {"minutes": 0.5, "days": 0.25, "weeks": 0.25}


def make_life(index: int, seed: str, kind: Kind, tier: str, exporter: Exporter) -> Life:
    rng = random.Random(f"{seed}:{index}")
    tier_ = TIERS[tier]
    topologies = [t for t in TOPOLOGY_WEIGHTS if t in kind.topologies]
    topology = rng.choices(topologies, [TOPOLOGY_WEIGHTS[t] for t in topologies])[0]
    life = Life(index, seed, tier_, rng.choice(tier_.intervals), kind.name, topology)
    nas = Nas(life, rng, exporter)
    nas.compose()
    kind.make(nas)
    nas.emit()
    if tier == "days":   # the highest write rate any pool of that name had: no record may read more
        bound: dict[str, float] = {}
        for pool in nas.pools:
            bound[pool.name] = max(bound.get(pool.name, 0.0), max(rate for _, rate in pool.write_rate))
        life.write_bound = {name: 1.25 * rate + 1e6 for name, rate in bound.items()}  # type: ignore[attr-defined]
    return life


def plan(healthy: int, sick: int, seed: str, only: set[str] | None = None,
         tiers: set[str] | None = None) -> list[tuple[int, Kind, str]]:
    """Which kind and tier each life is: sick lives spread evenly over the sick kinds (and each
    kind's tiers); healthy ones half plain (by HEALTHY_TIER_SHARE), half spread over the healthy
    kinds that force a part."""
    rng = random.Random(f"{seed}:plan")
    out: list[tuple[Kind, str]] = []

    def allowed(k: Kind) -> list[str]:
        return [t for t in k.tiers if (tiers is None or t in tiers)] if (only is None or k.name in only) else []

    sick_kinds = [k for k in KINDS.values() if k.sick and allowed(k)]
    for n in range(sick if sick_kinds else 0):
        k = sick_kinds[n % len(sick_kinds)]
        out.append((k, allowed(k)[(n // len(sick_kinds)) % len(allowed(k))]))
    forced = [k for k in KINDS.values() if not k.sick and k.name != "healthy" and allowed(k)]
    plain = KINDS["healthy"]
    plain_tiers = [t for t in HEALTHY_TIER_SHARE if t in allowed(plain)]
    for n in range(healthy):
        if forced and (n % 2 == 1 or not plain_tiers):
            k = forced[(n // 2) % len(forced)]
            out.append((k, allowed(k)[(n // (2 * len(forced))) % len(allowed(k))]))
        elif plain_tiers:
            out.append((plain, rng.choices(plain_tiers, [HEALTHY_TIER_SHARE[t] for t in plain_tiers])[0]))
    return [(index, k, tier) for index, (k, tier) in enumerate(out)]


def report(outcome: Outcome, out=sys.stdout, limit: int = 40) -> None:
    lives = outcome.lives
    by_tier = Counter(life.tier.name for life in lives)
    sick = sum(1 for life in lives if KINDS[life.kind].sick)
    print(f"{len(lives)} lives ({len(lives) - sick} healthy, {sick} sick; "
          + ", ".join(f"{n} {t}" for t, n in sorted(by_tier.items())) + f") in {outcome.seconds:.0f} s of promtool",
          file=out)
    counts = Counter((v.alert, v.check) for v in outcome.violations)
    lives_hit = Counter(v.alert for v in {(v.alert, v.life): v for v in outcome.violations}.values())
    if counts:
        print("violations by alert (lives with one; by check):", file=out)
        for alert in sorted({a for a, _ in counts}):
            detail = ", ".join(f"{c} {counts[(alert, c)]}" for c in CHECKS if counts[(alert, c)])
            print(f"  {alert}: {lives_hit[alert]} lives ({detail})", file=out)
    for error in sorted(set(outcome.errors))[:limit]:
        print(f"promtool: {error}", file=out)
    by_id = {life.id: life for life in lives}
    for v in outcome.violations[:limit]:
        life = by_id.get(v.life)
        print(f"- {v.check} {v.alert} in {v.life} ({v.detail}): {life.describe() if life else 'no life label'}", file=out)
    if len(outcome.violations) > limit:
        print(f"... and {len(outcome.violations) - limit} more", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.alerts.lives", description=__doc__.splitlines()[0])
    parser.add_argument("--healthy", type=int, default=300)
    parser.add_argument("--sick", type=int, default=300)
    parser.add_argument("--seed", default=None, help="default: a new one, printed")
    parser.add_argument("--life", type=int, action="append", help="only these lives of the plan (replay)")
    parser.add_argument("--kinds", help="comma-separated kinds only")
    parser.add_argument("--tiers", help="comma-separated tiers only (minutes, days, weeks)")
    parser.add_argument("--rules", type=Path, default=RULES)
    parser.add_argument("--exporter", choices=sorted(EXPORTERS), default="fixed")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--json", type=Path, help="also write the outcome here (lives by tier, violations, errors, "
                                                   "the report): what tests/alerts/test_lives.py reads")
    parser.add_argument("--list", action="store_true", help="list the kinds and exit")
    args = parser.parse_args(argv)
    if args.list:
        for k in KINDS.values():
            print(f"{k.name:24} {'sick' if k.sick else 'healthy':8} {','.join(k.tiers):20} {k.defect}")
        return 0
    seed = args.seed or str(random.SystemRandom().randrange(10 ** 9))
    print(f"seed {seed} (replay: --seed {seed})", flush=True)
    only = set(args.kinds.split(",")) if args.kinds else None
    tiers = set(args.tiers.split(",")) if args.tiers else None
    planned = plan(args.healthy, args.sick, seed, only, tiers)
    if args.life:
        planned = [p for p in planned if p[0] in args.life]
    exporter = EXPORTERS[args.exporter]
    started = time.monotonic()
    lives = [make_life(index, seed, k, tier, exporter) for index, k, tier in planned]
    made = time.monotonic() - started
    outcome = run(lives, args.rules, args.jobs, args.keep)
    print(f"made in {made:.1f} s", flush=True)
    text = io.StringIO()
    report(outcome, text)
    print(text.getvalue(), end="")
    if args.json:
        args.json.write_text(json.dumps({
            "seed": seed, "lives": len(lives), "tiers": dict(Counter(life.tier.name for life in lives)),
            "healthy": sum(1 for life in lives if not KINDS[life.kind].sick),
            "violations": [vars(v) for v in outcome.violations], "errors": outcome.errors,
            "seconds": outcome.seconds, "report": text.getvalue()}, indent=1))
    return 1 if outcome.violations or outcome.errors else 0

