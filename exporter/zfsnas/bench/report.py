"""Reports: the experiment tables the blog posts have (rows = configurations) in Markdown and CSV,
and a PNG of throughput vs compression ratio (matplotlib, the `report` extra).

Owns summarising stored results: one row per configuration id (bench/config.py), several
repeats become their median; rows that look alike (same readable labels) say what differs.
Reads the store, writes nothing to it.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass

from .config import Configuration, differs_text, look_alikes

COLUMNS = ("matrix", "workload", "config", "compression", "recordsize", "encryption", "size", "pool", "runs", "MB/s",
           "seconds", "ratio", "on-disk GiB", "logical GiB", "CPU %", "user s", "system s", "iowait %", "differs")


@dataclass(frozen=True)
class Row:
    matrix: str
    workload: str
    config: str
    compression: str
    recordsize: str
    encryption: str
    size: str
    pool: str
    runs: int
    mb_per_s: float | None
    seconds: float | None
    ratio: float | None
    used_gib: float | None
    logical_gib: float | None
    cpu_percent: float | None
    user_seconds: float | None
    system_seconds: float | None
    iowait_percent: float | None
    differs: str = ""

    def cells(self) -> list[str]:
        def fmt(v, digits):
            return "" if v is None else f"{v:.{digits}f}"
        return [self.matrix, self.workload, self.config, self.compression, self.recordsize, self.encryption, self.size,
                self.pool, str(self.runs),
                fmt(self.mb_per_s, 1), fmt(self.seconds, 1), fmt(self.ratio, 2), fmt(self.used_gib, 2),
                fmt(self.logical_gib, 2), fmt(self.cpu_percent, 0), fmt(self.user_seconds, 1),
                fmt(self.system_seconds, 1), fmt(self.iowait_percent, 0), self.differs]


def _median(rows, key, scale=1.0):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) * scale if values else None


def group_by_configuration(results) -> dict[str, tuple[Configuration, list]]:
    """{config id: (configuration, its rows)} in first-run order: the only grouping of results."""
    groups: dict[str, tuple[Configuration, list]] = {}
    for r in results:
        if r["config_id"] not in groups:
            groups[r["config_id"]] = (Configuration.from_json(r["config"]), [])
        groups[r["config_id"]][1].append(r)
    return groups


def summarise(results) -> list[Row]:
    """One row per configuration in first-run order; figures are medians over its complete runs."""
    groups = group_by_configuration(results)
    alikes = look_alikes([config for config, _rows in groups.values()])
    out = []
    for cid, (config, rows) in groups.items():
        labels = config.labels
        out.append(Row(config.matrix, config.workload, cid, labels["compression"], labels["recordsize"],
                       labels["encryption"], config.size, config.pool, runs=len(rows),
                       mb_per_s=_median(rows, "throughput_bytes_per_second", 1e-6),
                       seconds=_median(rows, "duration_seconds"), ratio=_median(rows, "compressratio"),
                       used_gib=_median(rows, "used_bytes", 2**-30), logical_gib=_median(rows, "logicalused_bytes", 2**-30),
                       cpu_percent=_median(rows, "cpu_busy_ratio", 100), user_seconds=_median(rows, "cpu_user_seconds"),
                       system_seconds=_median(rows, "cpu_system_seconds"),
                       iowait_percent=_median(rows, "cpu_iowait_ratio", 100), differs=differs_text(alikes[cid])))
    return out


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(row.cells() for row in rows)
    return buf.getvalue()


def chart(rows: list[Row], path: str) -> None:
    """Throughput (MB/s) against compression ratio, one labelled point per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [r for r in rows if r.mb_per_s is not None and r.ratio is not None]
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in points:
        ax.scatter(r.ratio, r.mb_per_s)
        label = f"{r.workload} {r.compression} {r.recordsize} {r.size}" + (f" {r.encryption}" if r.encryption != "off" else "")
        ax.annotate(label, (r.ratio, r.mb_per_s), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("compression ratio")
    ax.set_ylabel("throughput (MB/s)")
    ax.set_title("zfsnas-bench: throughput vs compression ratio")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
