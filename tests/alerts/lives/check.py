"""Many lives into few promtool runs, and the invariants' violations back out.

Lives of one tier share one promtool test file (its evaluation interval), lives of one sample
interval one test group: each life is a NAS of its own in that store (its `nas` or `instance`
label carries its id), so the rules run once for all of them. Beside a life's series go markers:
`zfsnas_test_allowed{life,alertname}` where an alert may fire, `zfsnas_test_must` where it must,
`zfsnas_test_quiet{life}` where nothing is judged, `zfsnas_test_episodes` how often an alert
series may start firing, `zfsnas_test_bound` the highest pool write rate a record may read. At
every step, recording rules evaluated after the alerts (`check_rules`) record from the ALERTS
series what fails there, and at the horizon promql_expr_tests over those records say, each
expecting nothing:

- unexpected: a warning or critical alert, as Alertmanager would deliver it (its inhibit_rules,
  read from deploy/alertmanager/alertmanager.yml, applied), fired where nothing allows it;
- missed: an alert that must fire was not firing (after its delay, until its fault ended);
- flapping: an alert series started firing more often than its fault allows;
- record: pool:zfs_pool_written_bytes:rate5m read more than the pool ever wrote.
promtool prints what it got instead of nothing: those are the violations, each naming its life.

promtool runs the rule file's alerts and the recording rules they (and the record check) read,
in the file's own groups and order (`judged`): the records only dashboards read (the changes
markers, the disk health table) change no alert, and were half of promtool's time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .model import BASELINES, DAY, HOUR, ROOT, SKIPS, Life, Tier
from .nas import BRIDGE
from .series import Grid, Series, render, subtract, union

RULES = ROOT / "alerts" / "zfsnas.rules.yml"
ALERTMANAGER = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
JUDGED = "warning|critical"
CHECKS = ("unexpected", "missed", "flapping", "record")
PER_FILE = {"minutes": 300, "days": 100, "weeks": 40}
COST = {"minutes": 1.0, "days": 0.8, "weeks": 2.0}   # promtool CPU per life, relative (measured)


@dataclass
class Violation:
    check: str
    life: str
    alert: str
    detail: str = ""


@dataclass
class Outcome:
    lives: list[Life]
    violations: list[Violation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)      # promtool's own failures (a rule that errs)
    seconds: float = 0.0


def life_of(selector: str) -> str:
    """`selector` with a `life` label taken from `nas`, else from `instance`."""
    inner = f'label_replace({selector}, "life", "$1", "instance", "(L[0-9]+)-.*")'
    return f'label_replace({inner}, "life", "$1", "nas", "(L[0-9]+)")'


def delivered(offset: str = "") -> str:
    """ALERTS firing at warning or critical, less what Alertmanager's inhibit_rules would hold back."""
    config = yaml.safe_load(ALERTMANAGER.read_text())
    firing = f'ALERTS{{alertstate="firing", severity=~"{JUDGED}"}}{offset}'
    held = []
    for rule in config.get("inhibit_rules", []):
        target = ", ".join(rule["target_matchers"])
        source = ", ".join(rule["source_matchers"])
        equal = ", ".join(rule.get("equal", []))
        held.append(f'(ALERTS{{alertstate="firing", {target}}}{offset} and on ({equal}) '
                    f'ALERTS{{alertstate="firing", {source}}}{offset})')
    return f"({firing} unless ({' or '.join(held)}))" if held else firing


RECORD_CHECKED = "pool:zfs_pool_written_bytes:rate5m"
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NAME_REGEX = re.compile(r'__name__=~"([^"]+)"')


def judged(rules: dict) -> dict:
    """`rules` (a parsed rule file) with its alerts and the recording rules they read, directly or
    through other records (by name or by a `__name__=~` regex), plus RECORD_CHECKED's: every group
    and rule kept where it was, so each alert is computed as in the whole file."""
    recorded: dict[str, list[str]] = {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                recorded.setdefault(rule["record"], []).append(rule["expr"])

    def read_by(expr: str) -> set[str]:
        names = {name for name in _NAME.findall(expr) if name in recorded}
        for pattern in _NAME_REGEX.findall(expr):
            names |= {name for name in recorded if re.fullmatch(pattern, name)}
        return names

    todo = [RECORD_CHECKED, *(name for group in rules["groups"] for rule in group["rules"] if "alert" in rule
                              for name in read_by(rule["expr"]))]
    needed: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += [n for expr in recorded.get(name, []) for n in read_by(expr)]
    groups = []
    for group in rules["groups"]:
        kept = [rule for rule in group["rules"] if "alert" in rule or rule["record"] in needed]
        if kept:
            groups.append({**group, "rules": kept})
    return {**rules, "groups": groups}


CHECKED_GROUP = "zfsnas.test_checks"


def check_rules(tier: Tier) -> dict:
    """The invariants as recording rules, in a group evaluated after every rule of the file: at each
    step they record what fails there (`zfsnas_check:unexpected`, `:missed`, `:flapping` with the
    step's time as value, `:record` with the rate read). Recorded, not asked of a subquery over the
    horizon at the end: a subquery holds its operand's samples of every step at once, and promtool
    allows MAX_SAMPLES, which the firing alerts of a few dozen sick lives exceed; recorded series
    are read one at a time."""
    now, before = life_of(delivered()), life_of(delivered(f" offset {tier.evaluation}s"))
    quiet = "unless on (life) zfsnas_test_quiet"
    firing = life_of('ALERTS{alertstate="firing"}')
    records = {
        "unexpected": f"time() + 0 * ({now} unless on (life, alertname) zfsnas_test_allowed {quiet})",
        "missed": f"time() + 0 * (zfsnas_test_must unless on (life, alertname) {firing} {quiet})",
        "flapping": f"time() + 0 * (({now} unless {before}) {quiet})",
        "record": f"{life_of(RECORD_CHECKED)} > on (life, pool) group_left () zfsnas_test_bound",
    }
    return {"name": CHECKED_GROUP, "rules": [{"record": f"zfsnas_check:{name}", "expr": expr} for name, expr in records.items()]}


def checks(tier: Tier) -> list[tuple[str, str]]:
    """(check, expr) pairs asked at the horizon of what check_rules recorded at every step; the
    unexpected and missed checks twice: the steps they fail at, and the first of them (seconds)."""
    window = f"[{tier.horizon + tier.evaluation}s]"
    out = []
    for name, by in (("unexpected", "life, alertname, severity"), ("missed", "life, alertname")):
        out.append((name, f"sum by ({by}) (count_over_time(zfsnas_check:{name}{window}))"))
        out.append((name + " first", f"min by ({by}) (min_over_time(zfsnas_check:{name}{window}))"))
    out.append(("flapping", f"max by (life, alertname) (count_over_time(zfsnas_check:flapping{window})) "
                            f"> on (life, alertname) zfsnas_test_episodes"))
    out.append(("record", f"max by (life, pool) (max_over_time(zfsnas_check:record{window}))"))
    return out


# promtool's unit-test engine holds at most 10,000 samples in one query (promql.LazyLoader's
# MaxSamples; a Prometheus server's default is 50 million): see check_rules and split
MAX_SAMPLES = 10_000
TOO_MANY = "query processing would load too many samples"


def markers(life: Life) -> list[Series]:
    """The test's own series for one life (labels `life`, `alertname`, `pool`)."""
    out = []
    expects = list(life.expects)
    skipped = {alert for alert, part in SKIPS if part in life.parts}
    by_alert: dict[str, list] = {}
    for e in expects:
        by_alert.setdefault(e.alert, []).append(e)
    for alert in skipped:
        by_alert.setdefault(alert, [])
    lost = away(life)
    moved = [(a, a) for a in relabels(life)]   # a relabel: a gap of no length, in every topology
    off = sorted([*lost, *moved])
    # an alert's series is gone, and starts again after: across a power-off of the stack's own
    # Prometheus (quiet), a gap in the exporter's samples longer than the rules bridge (lost: a NAS
    # a remote store watches is off, or at the weeks scale's 30-minute samples an exporter restart
    # took one), each counted once, and a relabel (moved)
    breaks = [*life.quiet, *(gap for gap in lost if not any(q0 <= gap[1] and gap[0] <= q1 for q0, q1 in life.quiet)), *moved]
    for alert, found in by_alert.items():
        allowed = Series("zfsnas_test_allowed", {"life": life.id, "alertname": alert})
        spans = [(0.0, life.horizon)] if alert in skipped else union((e.start, e.end + e.resolve) for e in found)
        for a, b in spans:
            allowed.add(a, to_horizon(b, life), 1.0)
        out.append(allowed)
        must = Series("zfsnas_test_must", {"life": life.id, "alertname": alert})
        if alert not in skipped:
            # nothing fires while the NAS is off, and after it its alert takes its delay again
            spans = union((e.start + e.delay, e.end) for e in found if e.must)
            for e in found:
                spans = subtract(spans, union((a, b + e.delay) for a, b in off if e.start <= b and a <= e.end))
            if alert in BASELINES:
                # and after it the alert's own delay, as after any break
                delay = max((e.delay for e in found), default=0.0)
                spans = subtract(spans, union((a, a + BASELINES[alert] + delay) for a, _ in moved))
            for a, b in spans:
                must.add(a, b, 1.0)
        if must.pieces:
            out.append(must)
        # a fault across such a break may fire again after it: its series were gone, the alert resolved
        episodes = sum(e.episodes + sum(1 for q0, q1 in breaks if e.start <= q1 and q0 <= e.end) for e in found)
        out.append(Series("zfsnas_test_episodes", {"life": life.id, "alertname": alert})
                   .add(0, life.horizon + 1, float(episodes if alert not in skipped else 10 ** 6)))
    if life.quiet:
        quiet = Series("zfsnas_test_quiet", {"life": life.id})
        for a, b in life.quiet:
            quiet.add(a, to_horizon(b, life), 1.0)
        out.append(quiet)
    return out


def to_horizon(end: float, life: Life) -> float:
    """A marker's end: one that lasts to the horizon covers its last grid point too (judged there)."""
    return end if end < life.horizon else life.horizon + 1


def away(life: Life) -> list[tuple[float, float]]:
    """Where the rules lost the NAS's exporter: from its last sample before a gap longer than their
    gauges bridge (last_over_time(...[10m])) to its next one. In samples, not in time answered: at a
    scale whose samples are further apart than the bridge (the weeks', every 30 minutes) a reboot
    of minutes that takes one sample away is such a gap."""
    target = life.targets.get("zfsnas")
    if target is None:
        return []
    grid = Grid(life.interval, life.horizon)
    # a sample in an exporter's first seconds lacks the series of its slower sources: no sample for them
    warming = set(k for k0, k1 in grid.indices(life.warming) for k in range(k0, k1))
    samples = [k * life.interval for k0, k1 in grid.indices(union(target.answered)) for k in range(k0, k1)
               if k not in target.missed and k not in warming]
    # more than one sample interval apart (a sample is missing) and more than the bridge
    return [(a, b) for a, b in zip(samples, samples[1:]) if b - a > max(BRIDGE, life.interval)]


def relabels(life: Life) -> list[float]:
    """When a target's labels changed: the alert's series under the old labels ends there, and one
    under the new labels takes its `for` again (and a baseline starts afresh)."""
    return sorted({a for t in life.targets.values() for a, _, _ in t.epochs[1:]})


def bounds(life: Life, nas_pools: dict[str, float]) -> list[Series]:
    return [Series("zfsnas_test_bound", {"life": life.id, "pool": pool}).add(0, life.horizon + 1, bound)
            for pool, bound in nas_pools.items()]


def label_text(labels: dict[str, str]) -> str:
    return ", ".join(f'{k}="{v}"' for k, v in labels.items())


def input_series(life: Life, grid: Grid) -> Iterable[dict[str, str]]:
    everything = [(0.0, float(life.horizon))]
    for job, series in life.series:
        target = life.targets.get(job)
        if target is None:
            continue
        for a, b, labels in target.epochs:
            present = [(max(x, a), min(y, b)) for x, y in target.answered if min(y, b) > max(x, a)]
            scraped = [(max(x, a), min(y, b)) for x, y in target.scraped if min(y, b) > max(x, a)]
            values = render(series, grid, present, scraped, frozenset(target.missed))
            if values:
                name = {**labels, "job": job, **series.labels}
                yield {"series": f"{series.name}{{{label_text(name)}}}", "values": values}
    for job, target in life.targets.items():
        for a, b, labels in target.epochs:
            up = Series("up", {})
            for x, y in target.scraped:
                if min(y, b) > max(x, a):
                    up.add(max(x, a), min(y, b), 0.0)
            for x, y in target.answered:
                if min(y, b) > max(x, a):
                    up.add(max(x, a), min(y, b), 1.0)
            up.pieces.sort(key=lambda p: (p.start, -p.value))
            up.pieces = _overlay(up.pieces)
            scraped = [(max(x, a), min(y, b)) for x, y in target.scraped if min(y, b) > max(x, a)]
            values = render(up, grid, scraped, scraped)
            if values:
                if target.missed:   # a failed scrape: up 0 at that point
                    values = _missed_up(values, grid, up, scraped, target.missed)
                yield {"series": f"up{{{label_text({**labels, 'job': job})}}}", "values": values}
    for marker in [*markers(life), *life_bounds(life)]:
        values = render(marker, grid, [(p.start, p.end) for p in marker.pieces], everything)
        if values:
            yield {"series": f"{marker.name}{{{label_text(marker.labels)}}}", "values": values}


def life_bounds(life: Life) -> list[Series]:
    bound = getattr(life, "write_bound", None)
    return bounds(life, bound) if bound else []


def _overlay(pieces):
    """up: 1 where answered lies over the 0 of scraped."""
    from .series import Piece
    ones = [(p.start, p.end) for p in pieces if p.value == 1.0]
    out = [p for p in pieces if p.value == 1.0]
    for p in pieces:
        if p.value == 0.0:
            for a, b in _minus([(p.start, p.end)], ones):
                out.append(Piece(a, b, 0.0))
    return sorted(out, key=lambda p: p.start)


def _minus(spans, holes):
    from .series import subtract
    return subtract(spans, union(holes))


def _missed_up(values: str, grid: Grid, up: Series, scraped, missed: set[int]) -> str:
    """Re-render `up` with 0 at the failed scrapes (render() would have written stale there)."""
    from .series import Piece
    cut = []
    for p in up.pieces:
        points = sorted(k for k in missed if p.start <= k * grid.interval < p.end)
        start = p.start
        for k in points:
            t = k * grid.interval
            cut.append(Piece(start, t, p.value))
            cut.append(Piece(t, min(p.end, t + grid.interval), 0.0))
            start = min(p.end, t + grid.interval)
        cut.append(Piece(start, p.end, p.value))
    return render(Series("up", {}, [c for c in cut if c.end > c.start]), grid, scraped, scraped) or values


def test_file(tier: Tier, lives: list[Life], rules: Path) -> dict:
    groups = [g["name"] for g in yaml.safe_load(rules.read_text())["groups"]]   # `rules`: judged() already
    tests = []
    for interval in sorted({life.interval for life in lives}):
        grid = Grid(interval, tier.horizon)
        group = [life for life in lives if life.interval == interval]
        # an exporter always up: in a store whose NAS are all off at once, absent(up{job="zfsnas"}) would fire
        series = [{"series": 'up{instance="sentinel:9923", job="zfsnas"}', "values": f"1x{grid.points - 1}"},
                  *(s for life in group for s in input_series(life, grid))]
        tests_ = [{"expr": expr, "eval_time": f"{tier.horizon}s", "exp_samples": []} for _, expr in checks(tier)]
        tests.append({"interval": f"{interval}s", "input_series": series, "promql_expr_test": tests_})
    return {"rule_files": [str(rules)], "evaluation_interval": f"{tier.evaluation}s",
            "group_eval_order": groups, "tests": tests}


_GOT = re.compile(r"\{([^{}]*)\} ([-+0-9.eE]+|NaN)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(output: str, tier: Tier) -> tuple[list[Violation], list[str]]:
    """The violations promtool printed (what each check got instead of nothing) and its errors."""
    exprs = {expr: name for name, expr in checks(tier)}
    found: dict[tuple[str, str, str], Violation] = {}
    firsts: dict[tuple[str, str, str], float] = {}
    errors = []
    check = None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("expr:"):
            quoted = text[len("expr: "):text.rindex(", time:")]
            expr = yaml.safe_load(quoted)
            check = exprs.get(expr)
        elif text.startswith("got:") and check:
            for labels, value in _GOT.findall(text):
                got = dict(_LABEL.findall(labels))
                subject = got.get("alertname") or f"pool {got.get('pool', '?')}"
                key = (check.split()[0], got.get("life", ""), subject)
                if check.endswith(" first"):
                    firsts[key] = float(value)
                    continue
                detail = {"record": f"read {float(value) / 1e6:.0f} MB/s",
                          "flapping": f"{float(value):.0f} times"}.get(check, f"{float(value):.0f} steps")
                found[key] = Violation(check, key[1], subject, detail)
        elif text.startswith("rule:") or " err: " in text or text.startswith("error"):
            errors.append(text[:500])
    for key, violation in found.items():
        if key in firsts:
            violation.detail += f" from {firsts[key] / 3600:.2f} h"
    return list(found.values()), errors


def subquery_steps(tier: Tier, days: int) -> int:
    """The steps of a `[<days>d:1h]` subquery that hold samples of a life of `tier` (and one more)."""
    return min(tier.horizon, days * DAY) // HOUR + 2


def subquery_series_per_file(tier: Tier) -> int:
    """How many series one file of `tier` may hold in the rules' hourly subqueries, under MAX_SAMPLES
    with a margin: pool:zfs_pool_imported:ratio7d's `[7d:1h]` holds, at each of its steps with data,
    a pool's ONLINE state series and, divided by it, a target's poolstats success series (both
    operands at once), pool:zfs_pool_free_bytes:delta1d_median3d's `[3d:1h]` a pool's free bytes
    now and a day before. A 6-hour life fills 8 steps of the first, a 56-day one 170 (47 series a
    file: some 12 lives)."""
    return int(MAX_SAMPLES * 0.8) // max(subquery_steps(tier, 7), 2 * subquery_steps(tier, 3))


def subquery_series(life: Life) -> int:
    """The series a life puts into those subqueries: each pool's zfs_pool_state{state="ONLINE"} and
    the exporter's poolstats success, each label epoch of its exporter as many again."""
    target = life.targets.get("zfsnas")
    pools = sum(1 for _, series in life.series if series.name == "zfs_pool_state" and series.labels.get("state") == "ONLINE")
    return (pools + 1) * (len(target.epochs) if target else 1)


def split(group: list[Life], size: int) -> list[list[Life]]:
    """`group` (lives of one tier) in files of at most `size` lives and subquery_series_per_file
    series in the rules' subqueries (a life with more is alone in its file)."""
    out: list[list[Life]] = []
    held = 0
    limit = subquery_series_per_file(group[0].tier) if group else 0
    for life in group:
        if not out or len(out[-1]) >= size or held + subquery_series(life) > limit:
            out.append([])
            held = 0
        out[-1].append(life)
        held += subquery_series(life)
    return out


def run(lives: list[Life], rules: Path = RULES, jobs: int = 2, keep: Path | None = None) -> Outcome:
    import time

    promtool = shutil.which("promtool")
    if not promtool:
        raise RuntimeError("promtool is not installed: ./dev test installs Debian's prometheus package")
    outcome = Outcome(lives)
    tiers: dict[str, list[Life]] = {}
    for life in lives:
        tiers.setdefault(life.tier.name, []).append(life)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zfsnas-lives-") as tmp:
        directory = keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        kept = judged(yaml.safe_load(rules.read_text()))
        rule_files = {}
        for name, group in tiers.items():   # one file per tier: the checks' offset is its evaluation step
            rule_files[name] = directory / f"judged-{name}.rules.yml"
            with_checks = {**kept, "groups": [*kept["groups"], check_rules(group[0].tier)]}
            rule_files[name].write_text(yaml.safe_dump(with_checks, sort_keys=False, width=10 ** 6))
        chunks = []
        for name, group in tiers.items():
            # at most PER_FILE lives of a tier in one file, and as many series as the rules' own
            # subqueries allow (split)
            size = max(1, min(PER_FILE[name], -(-len(group) // max(1, jobs))))
            chunks += [(directory / f"{name}-{n}.yml", chunk) for n, chunk in enumerate(split(group, size))]
        # the costliest first (a weeks life takes promtool about twice a minutes one), so that the
        # parallel runs end together; each run writes its own file, beside the other's promtool
        chunks.sort(key=lambda chunk: -len(chunk[1]) * COST[chunk[1][0].tier.name])

        def one(chunk: tuple[Path, list[Life]]) -> str:
            path, group = chunk
            # JSON is YAML to promtool, and written in a tenth of the time PyYAML takes
            path.write_text(json.dumps(test_file(group[0].tier, group, rule_files[group[0].tier.name].resolve()), indent=0))
            # GOGC=400: a file of a hundred lives keeps a heap of some 100 MB, which Go's default
            # collects four times as often for a fifth more CPU (measured: 88 s against 73 s)
            done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True,
                                  env={**os.environ, "GOGC": os.environ.get("GOGC", "400")})
            text = done.stdout + done.stderr
            path.with_suffix(".out").write_text(text)   # with --keep: a long run read as it goes
            if TOO_MANY in text and len(group) > 1:
                # split's bound is an estimate of the engine's peak: halves, judged again, are exact
                half = len(group) // 2
                return one((path.with_stem(path.stem + "a"), group[:half])) + one((path.with_stem(path.stem + "b"), group[half:]))
            return text

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            for (_path, group), text in zip(chunks, pool.map(one, chunks)):
                violations, errors = parse(text, group[0].tier)
                outcome.violations += violations
                outcome.errors += errors
    outcome.seconds = time.monotonic() - started
    return outcome
