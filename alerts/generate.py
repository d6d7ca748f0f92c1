"""Write the generated groups of alerts/zfsnas.rules.yml from alerts/thresholds.toml.

Owns the threshold recording rules and places the zfsnas.changes group (alerts/changes.py writes
it, with thresholds.toml's window), nothing else of the rule file: one `zfsnas:<name>:threshold`
(`vector(<number>)`) per number of thresholds.toml (a number added there becomes a rule here), and
per-pool / per-dataset thresholds from its [[scrub_schedule]] and [[snapshot_schedule]] tables
(first match wins); the [opt_in] table's values are documented, not written (their alerts stay
silent until the user moves them up). The alerts read these series. Run after editing thresholds.toml:

    .venv/bin/python alerts/generate.py            # rewrite the group in zfsnas.rules.yml
    .venv/bin/python alerts/generate.py --check    # exit 1 when the rule file is stale

tests/alerts/test_thresholds.py runs the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _changes():
    """alerts/changes.py, loaded by path: this script runs from anywhere, outside any package."""
    spec = importlib.util.spec_from_file_location("zfsnas_alerts_changes", HERE / "changes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


changes = _changes()
BEGIN = "  # --- zfsnas.thresholds: written by alerts/generate.py from alerts/thresholds.toml; edit that file ---"
END = "  # --- end of zfsnas.thresholds ---"
# [[table]]: (label it matches, the series whose label values it is matched against, record name)
SCHEDULES = {
    "scrub_schedule": ("pool", "max by (nas, instance, job, pool) (zfs_pool_size_bytes{%s})",
                       "zfsnas:pool_scrub_max_age_days:threshold"),
    "snapshot_schedule": ("dataset", "max by (nas, instance, job, pool, dataset) "
                                     "(zfs_dataset_newest_snapshot_timestamp_seconds{%s})",
                          "zfsnas:dataset_snapshot_max_age_days:threshold"),
}


class ThresholdError(ValueError):
    pass


def schedule_rule(table: str, entries: list) -> str:
    label, series, record = SCHEDULES[table]
    branches = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or set(entry) != {label, "max_age_days"}:
            raise ThresholdError(f"[[{table}]] number {n}: give exactly `{label}` (a regular expression) and "
                                 f"`max_age_days`, not {sorted(entry) if isinstance(entry, dict) else entry!r}")
        days = entry["max_age_days"]
        if not isinstance(entry[label], str) or not entry[label]:
            raise ThresholdError(f"[[{table}]] number {n}: `{label}` must be a non-empty string")
        if isinstance(days, bool) or not isinstance(days, int | float) or days <= 0:
            raise ThresholdError(f"[[{table}]] number {n}: max_age_days must be a positive number, not {days!r}")
        matcher = f"{label}=~{json.dumps(entry[label])}"
        branches.append(f"{series % matcher} * 0 + {days}")
    expr = "\n            or\n          ".join(branches)
    return f"      - record: {record}\n        expr: |\n          {expr}\n"


def group(thresholds: dict) -> str:
    """The zfsnas.thresholds group, between its marker lines."""
    rules = []
    for name, value in thresholds.items():
        if name == "opt_in":     # documented values of alerts that stay silent until enabled: no rule
            if not isinstance(value, dict):
                raise ThresholdError(f"opt_in must be a table ([opt_in]), not {value!r}")
            continue
        if name in SCHEDULES:
            if not isinstance(value, list):
                raise ThresholdError(f"{name} must be a list of tables ([[{name}]]), not {value!r}")
            if value:
                rules.append(schedule_rule(name, value))
        elif isinstance(value, bool) or isinstance(value, list | dict):
            raise ThresholdError(f"{name}: a number or a string (a selector), not {value!r}")
        elif isinstance(value, int | float):
            rules.append(f"      - record: zfsnas:{name}:threshold\n        expr: vector({value})\n")
    return f"{BEGIN}\n  - name: zfsnas.thresholds\n    rules:\n{''.join(rules)}{END}\n"


def replace_block(rule_text: str, begin: str, end: str, block: str) -> str:
    """`rule_text` with the lines from `begin` to `end` replaced by `block`."""
    lines = rule_text.splitlines(keepends=True)
    try:
        start = lines.index(begin + "\n")
        stop = lines.index(end + "\n", start)
    except ValueError:
        raise ThresholdError(f"the rule file has no generated group between {begin!r} and {end!r}") from None
    return "".join(lines[:start]) + block + "".join(lines[stop + 1:])


def render(rule_text: str, thresholds: dict) -> str:
    """`rule_text` with its generated groups replaced by the ones `thresholds` gives."""
    text = replace_block(rule_text, BEGIN, END, group(thresholds))
    try:
        window = changes.settings(thresholds)
    except (KeyError, TypeError, ValueError) as exc:
        raise ThresholdError(f"change_window_minutes and change_min_active_minutes must be whole minutes: {exc}") \
            from None
    return replace_block(text, changes.BEGIN, changes.END, changes.group(window))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the rule file differs from what it would be")
    parser.add_argument("--thresholds", type=Path, default=HERE / "thresholds.toml")
    parser.add_argument("--rules", type=Path, default=HERE / "zfsnas.rules.yml")
    args = parser.parse_args(argv)
    try:
        thresholds = tomllib.loads(args.thresholds.read_text())
        old = args.rules.read_text()
        new = render(old, thresholds)
    except (OSError, tomllib.TOMLDecodeError, ThresholdError) as exc:
        print(f"alerts/generate.py: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            print(f"stale: {args.rules}: run alerts/generate.py", file=sys.stderr)
            return 1
        return 0
    args.rules.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
