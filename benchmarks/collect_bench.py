"""In-process cost of one scrape, per collector, against a baseline checkout of the exporter.

    .venv/bin/python benchmarks/collect_bench.py [--baseline DIR] [--reps N] [--rounds N]

For each tree of `scrape_bench.TREES` it times, inside one Python process, every collector's
`collect` and the rendering of what it returned, and the whole `Exporter.render()` (default
collectors and the kstat-only set), medians of `--reps` scrapes. Between two scrapes it churns what
changes on a live NAS (global kstats, per-pool iostats and tx-assign counts, the open txg's row and
a tenth of the objset files), so a memo of unchanged files only wins where files really stay the
same. `--baseline` (default: main's `exporter/` extracted from git into a temporary directory) runs
the same measurement in a subprocess with that code first on PYTHONPATH; old and new run in
alternating rounds and the report prints new/old ratios (2 shared cores: compare ratios, not ms).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KSTAT_ONLY = ["--no-collector.datasets", "--no-collector.pools", "--no-collector.disks", "--no-collector.bench"]
_LAST_NUMBER = re.compile(r"(\d+)$", re.M)


# --- churn: what a live NAS changes between two scrapes ------------------------------------------

def _bumped(text: str) -> str:
    """Every line's last number plus one (the header's snaptime included): a changed kstat."""
    return _LAST_NUMBER.sub(lambda m: str(int(m[1]) + 1), text)


def churn_plan(tree: Path) -> list[tuple[Path, str, str]]:
    """(path, text A, text B) of the files a scrape sees change; scrapes alternate A and B."""
    kstat = tree / "proc/spl/kstat/zfs"
    changing = [p for p in kstat.iterdir() if p.is_file()]
    for pool in (p for p in kstat.iterdir() if p.is_dir()):
        changing += [pool / name for name in ("iostats", "dmu_tx_assign", "io") if (pool / name).exists()]
        objsets = sorted(pool.glob("objset-0x*"))
        changing += objsets[::10]
        changing += [pool / "txgs"] if (pool / "txgs").exists() else []
    plan = []
    for path in changing:
        text = path.read_text()
        if path.name == "txgs":  # only the newest (open) txg's row moves
            head, _, last = text.rstrip("\n").rpartition("\n")
            plan.append((path, text, f"{head}\n{_bumped(last)}\n"))
        else:
            plan.append((path, text, _bumped(text)))
    return plan


def churn(plan: list[tuple[Path, str, str]], turn: int) -> None:
    for path, a, b in plan:
        path.write_text(b if turn % 2 else a)


# --- the measurement, in the process whose code is measured --------------------------------------

def measure(tree: Path, version: str, reps: int) -> dict:
    sys.path.insert(0, str(HERE))
    import scrape_bench as sb
    from zfsnas import cli, exposition
    from zfsnas.collectors.base import Report

    try:
        from zfsnas import wiring  # the exporter's wiring (issue 32); before it, cli's
    except ImportError:
        wiring = cli
    # What the scrape keeps of a collector's return value, as each version's scrape does it: text
    # the collector or its builder laid out stays text (listing it would build every family).
    settle = getattr(exposition, "settle", None) or (
        lambda returned: returned if isinstance(returned, exposition.TextFamilies) else list(returned))

    plan = churn_plan(tree)
    result: dict = {"code": str(Path(cli.__file__).parents[1])}
    for label, extra in (("default", []), ("kstat", KSTAT_ONLY)):
        argv = sb.ours_argv(tree, version, "default", 0)[1:] + extra
        exporter = wiring.build_exporter(wiring.build_parser().parse_args(argv))
        exporter.start()
        time.sleep(2)  # the background sources' first reads
        times = []
        for turn in range(reps):
            churn(plan, turn)
            start = time.perf_counter()
            exporter.render()
            times.append(time.perf_counter() - start)
        times.sort()
        result[f"render_{label}"] = {"p50": times[len(times) // 2], "p99": times[int(len(times) * 0.99)]}
        if label == "default":
            per: dict[str, list[list[float]]] = {c.name: [[], []] for c in exporter.scrape.collectors}
            for turn in range(reps):
                churn(plan, turn)
                for collector in exporter.scrape.collectors:
                    start = time.perf_counter()
                    families = settle(collector.collect(Report(collector.name)))
                    mid = time.perf_counter()
                    exposition.render(families)
                    per[collector.name][0].append(mid - start)
                    per[collector.name][1].append(time.perf_counter() - mid)
            result["collectors"] = {name: [statistics.median(t) for t in pair] for name, pair in per.items()}
        exporter.stop()
    churn(plan, 0)
    return result


def run(code: Path | None, tree: Path, version: str, reps: int) -> dict:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    out = subprocess.run([sys.executable, __file__, "--measure", str(tree), version, str(reps)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def baseline_checkout(into: Path, ref: str = "main") -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "exporter"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "exporter"


def main() -> int:
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="directory holding the baseline's zfsnas package")
    parser.add_argument("--ref", default="main", help="git ref of the baseline when --baseline is not given")
    parser.add_argument("--reps", type=int, default=300, help="scrapes per measurement (large tree: a tenth)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating old/new rounds per tree")
    parser.add_argument("--trees", default="live-2.3.2,live-2.1.11,large")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import scrape_bench as sb

    with tempfile.TemporaryDirectory(prefix="collect-bench-") as tmp:
        baseline = args.baseline or baseline_checkout(Path(tmp), args.ref)
        for tree_name in args.trees.split(","):
            version, build = sb.TREES[tree_name]
            tree = build(Path(tmp) / tree_name)
            reps = max(20, args.reps // 10) if tree_name == "large" else args.reps
            runs: dict[str, list[dict]] = {"new": [], "old": []}
            for _ in range(args.rounds):
                runs["old"].append(run(baseline, tree, version, reps))
                runs["new"].append(run(None, tree, version, reps))
            report(tree_name, sb.read_floor(tree), runs)
    return 0


def report(tree_name: str, floor: float, runs: dict[str, list[dict]]) -> None:
    def med(side: str, *keys: str | int) -> float:
        values = []
        for r in runs[side]:
            value = r
            for key in keys:
                value = value[key]
            values.append(value)
        return statistics.median(values)

    print(f"\n== {tree_name}: median of {len(runs['new'])} rounds; read floor {floor * 1e3:.2f} ms")
    print(f"{'':24}{'new ms':>10}{'old ms':>10}{'new/old':>9}")
    for name in runs["new"][0]["collectors"]:
        for i, what in enumerate(("collect", "render")):
            new, old = med("new", "collectors", name, i), med("old", "collectors", name, i)
            print(f"{name + ' ' + what:24}{new * 1e3:10.3f}{old * 1e3:10.3f}{new / old:9.2f}")
    for label in ("default", "kstat"):
        for q in ("p50", "p99"):
            new, old = med("new", f"render_{label}", q), med("old", f"render_{label}", q)
            print(f"{'render ' + label + ' ' + q:24}{new * 1e3:10.3f}{old * 1e3:10.3f}{new / old:9.2f}")
    print(f"{'new render default p50 / read floor':36}{med('new', 'render_default', 'p50') / floor:7.2f}")


if __name__ == "__main__":
    sys.exit(main())
