"""Render the exposition text the golden files pin: one scrape per fixture tree.

Collector durations and source ages vary from run to run, so their samples are left out; everything else,
HELP and TYPE lines included, is compared byte for byte.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOLDEN = Path(__file__).parent

CASES = {
    **{f"linux-zfs-{v}": ["--path.procfs", f"linux-zfs-{v}/proc", "--path.sysfs", f"linux-zfs-{v}/sys"]
       for v in ("0.8.6", "2.0.7", "2.1.11", "2.2.7", "2.3.2")},
    **{f"freebsd-{r}": ["--kstat.source", "sysctl", "--path.sysctl-file", f"freebsd-{r}/sysctl.txt"]
       for r in ("13.2", "14.1")},
}
# Only the kstat collectors: the golden files pin issue 2's families; other collectors have their own.
COLLECTORS = ["--collector.disable-defaults", "--collector.arc", "--collector.txg", "--collector.objset",
              "--collector.poolstats", "--collector.tunables"]


def render(case: str) -> str:
    from zfsnas.cli import build_exporter, build_parser

    flags = [str(FIXTURES / a) if "/" in a else a for a in CASES[case]]
    exporter = build_exporter(build_parser().parse_args(flags + COLLECTORS), process_metrics=False)
    text = exporter.render()
    return "".join(line + "\n" for line in text.splitlines()
                   if not line.startswith(("zfs_exporter_collector_duration_seconds{",
                                           "zfs_exporter_source_age_seconds{")))


def golden_path(case: str) -> Path:
    return GOLDEN / f"{case}.prom"
