"""What a generated life is made of: its tier (time scale), targets (jobs, label epochs, when they
answer), series, the alerts it expects, and the one table of alerts that cannot be right for a kind
of history (`SKIPS`), with the exporter behaviours that differ between this branch and main.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .series import Intervals, Series

ROOT = Path(__file__).resolve().parents[3]
THRESHOLDS = tomllib.loads((ROOT / "alerts" / "thresholds.toml").read_text())
MINUTE, HOUR, DAY = 60, 3600, 86400


@dataclass(frozen=True)
class Tier:
    """One time scale: its rules run every `evaluation` seconds over `horizon` seconds of series
    sampled every one of `intervals` seconds (each test group one interval). promtool's cost is
    evaluation steps x series, so each alert is judged at the coarsest scale that shows it truly:
    minutes for the fast ones (scrape intervals of 15 to 120 s), days for those built on a day of
    rates, weeks for schedules (scrubs, snapshots, pools that come and go), where a sample every
    30 minutes leaves the 5-to-15-minute rates empty: alerts built on them stay silent there, and
    the disks' and ARC series are left out."""

    name: str
    evaluation: int
    horizon: int
    intervals: tuple[int, ...]


TIERS = {
    "minutes": Tier("minutes", MINUTE, 6 * HOUR, (15, 30, 60, 120)),
    "days": Tier("days", 15 * MINUTE, 3 * DAY, (60, 120)),
    "weeks": Tier("weeks", 2 * HOUR, 56 * DAY, (30 * MINUTE,)),
}


# Each alert's documented delay: how long after its fault starts it fires at the latest (its `for`
# and the window it reads), before the slack of the scale a life is judged at (`slack`). docs/alerts-proof.md
# lists them (a series that stops arriving is gone 5 minutes later, Prometheus's lookback: ZfsHostDown
# and ZfsExporterAbsent count those too); the SMART ones add the --smart.interval of 600 s, ZfsDatasetSnapshotsStopped and
# ZfsPoolScrubOverdue count from when the schedule allowed no more (their thresholds).
DELAYS = {
    "ZfsPoolNotOnline": 1 * MINUTE, "ZfsVdevNotOnline": 2 * MINUTE, "ZfsPoolSlowIO": 0,
    "ZfsPoolTxgSyncStalled": 15 * MINUTE, "ZfsPoolTxgSyncSlow": 0, "ZfsVdevErrors": 0,
    "ZfsPoolDataErrors": 0, "ZfsPoolScrubFoundErrors": 0, "ZfsPoolCapacityHigh": 15 * MINUTE,
    "ZfsPoolCapacityCritical": 5 * MINUTE, "ZfsDatasetQuotaNearlyFull": 15 * MINUTE,
    "ZfsPoolReadOnly": 15 * MINUTE, "ZfsDatasetLocked": 15 * MINUTE,
    "ZfsDiskTemperatureHigh": 30 * MINUTE + 600, "ZfsDiskSmartFailed": 600, "ZfsNvmeCriticalWarning": 600,
    "ZfsDiskSmartUnavailable": 15 * MINUTE + 600, "ZfsDiskSectorsGrowing": 600,
    "ZfsExporterDown": 5 * MINUTE, "ZfsExporterAbsent": 15 * MINUTE, "ZfsExporterCollectorFailing": 5 * MINUTE,
    "ZfsExporterSourceFailing": 10 * MINUTE, "ZfsExporterSourceStale": 35 * MINUTE,
    "ZfsHostDown": 10 * MINUTE, "ZfsHostFilesystemAlmostFull": 30 * MINUTE, "ZfsHostFilesystemFillingUp": HOUR,
    "ZfsHostClockSkew": 10 * MINUTE,
    "ZfsHostFileDescriptorsExhausted": 15 * MINUTE, "ZfsRemoteWriteStalled": 15 * MINUTE,
    "ZfsArcSqueezed": 30 * MINUTE, "ZfsArcMemoryThrottle": 20 * MINUTE, "ZfsWriteThrottleDelaying": 20 * MINUTE,
    "ZfsDiskSaturated": 20 * MINUTE, "ZfsL2arcHeaderRamHigh": 30 * MINUTE, "ZfsArcHitRatioCollapsed": 35 * MINUTE,
    "ZfsBenchThroughputRegression": 60, "ZfsPoolWriteThroughputDegraded": 35 * MINUTE,
    "ZfsPoolMissing": 15 * MINUTE, "ZfsPoolFullForecast": 1 * HOUR, "ZfsPoolScrubOverdue": 1 * HOUR,
    "ZfsDatasetSnapshotsStopped": 1 * HOUR + 900, "ZfsDatasetSnapshotInFuture": 15 * MINUTE + 900,
}


# Alerts that compare with their own past (a baseline over a window) or need a history (a pool seen
# for 4 days): after a relabel the series under the new labels has only the hours since, which a
# fault then drags into its own baseline, so they are not required to fire within that window of a
# relabel (their runbook entries say so: tests/alerts/test_lives.py).
BASELINES = {"ZfsArcHitRatioCollapsed": DAY, "ZfsPoolWriteThroughputDegraded": 7 * DAY, "ZfsPoolFullForecast": 4 * DAY}


@dataclass
class Expect:
    """An alert a fault must raise (`must`) or may raise, by name, for this life.
    It must be firing from `start + delay` (its documented delay plus the slack of the scales:
    evaluation steps, scrape interval, the exporter's refresh) until `end` (the fault's end, or
    the horizon), may fire from `start` until `end + resolve`, and fire at most `episodes` times
    per alert series (flapping is a violation)."""

    alert: str
    start: float
    end: float
    delay: float = 0.0
    resolve: float = 0.0
    must: bool = True
    episodes: int = 1


@dataclass
class Target:
    """One scrape target of the life's NAS: its labels over time (a relabel starts a new epoch),
    when Prometheus scraped it, when it answered (up 1), and the grid points whose scrape failed."""

    job: str
    epochs: list[tuple[float, float, dict[str, str]]]
    scraped: Intervals
    answered: Intervals
    missed: set[int] = field(default_factory=set)


@dataclass
class Life:
    index: int
    seed: str
    tier: Tier
    interval: int
    kind: str                      # "healthy" or the fault's kind
    topology: str                  # stack (Prometheus on the NAS), agent (remote_write), central (scrapes the NAS)
    parts: list[str] = field(default_factory=list)   # what went on, for a reader of a failure
    targets: dict[str, Target] = field(default_factory=dict)
    series: list[tuple[str, Series]] = field(default_factory=list)
    expects: list[Expect] = field(default_factory=list)
    quiet: Intervals = field(default_factory=list)  # no alert judged (the stack's Prometheus is off)
    warming: Intervals = field(default_factory=list)   # some source's series not served yet (an exporter's start)

    @property
    def id(self) -> str:
        return f"L{self.index}"

    @property
    def horizon(self) -> int:
        return self.tier.horizon

    def describe(self) -> str:
        return (f"{self.id} tier={self.tier.name} interval={self.interval}s topology={self.topology} "
                f"kind={self.kind}: " + "; ".join(self.parts))


# An alert that cannot be right for some kind of history, by (alert, part): the generator does not
# judge that alert in lives with that part, and its runbook entry says why (tests/alerts/test_lives.py
# checks that each is there).
SKIPS = {
    **{(alert, part): "a NAS off on purpose (every night, on holiday) is down as far as a store that outlives "
                      "it can tell: Alertmanager's time intervals mute those hours"
       for alert in ("ZfsHostDown", "ZfsExporterDown", "ZfsExporterAbsent") for part in ("nightly_off_remote", "vacation")},
    ("ZfsDatasetSnapshotsStopped", "vacation"):
        "after a power-off longer than a dataset's schedule allows, its newest snapshot is that old "
        "until the next one is taken: true, and told until then",
    ("ZfsPoolMissing", "vacation"):
        "a backup pool whose import fell due while the NAS was off has been away longer than ever when "
        "it comes back: true, and told until its next import",
    ("ZfsPoolScrubOverdue", "vacation"):
        "a pool whose scrub fell due while the NAS was off is overdue when it comes back: true, and "
        "told until a scrub finishes",
}


@dataclass(frozen=True)
class Exporter:
    """The exporter behaviours the lives depend on that issue 37 changed: `main` is the code before
    it (the "before" figures), `fixed` this branch's. tests/collectors pins each of them."""

    smart_unavailable_visible: bool   # success 0 and zfs_disk_smart_unavailable{reason} without SMART
    txg_ring_is_zero: bool            # a restart does not count the txg ring again
    events_born_at_zero: bool         # zfs_pool_events_total{class=delay|deadman|...} 0 from the start


EXPORTERS = {
    "fixed": Exporter(True, True, True),
    "main": Exporter(False, False, False),
}
