"""Configuration changes on every graph (issues 12 and 30).

Live: a real Prometheus scrapes the exporter on a fixture tree; mid-test a module parameter and a
dataset property change, and the dashboards' "Module parameter changes" / "Dataset property changes"
annotation queries return exactly those two changes, with their old and new values, at the time
they happened, and nothing else.

At every zoom: 92 days of a NAS's recorded module parameters and dataset properties (the series and
labels the exporter serves, every 2 minutes, with a user's tuning changes days apart) are written
into TSDB blocks by `promtool tsdb create-blocks-from openmetrics` and served by a real Prometheus.
For time ranges from 1 hour to 90 days on screens 800 to 3840 pixels wide, the annotation queries
run as Grafana runs them (step = max(the annotation's step, range / width) rounded as Grafana
rounds it, $__interval = that step, start and end aligned to it), and Grafana's grouping of the
answer into events (values > 0 of one series within a step are one event) must draw every change
inside the range exactly once, at the first step after it, with its old and new value."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import copy_commands, copy_tree, free_port, zfs_commands
from tests.dashboards.queries import NAMES, SUBSTITUTIONS, change_queries, load
from tests.integration.daemon import Daemon
from tests.integration.kernel import write_atomically
from tests.integration.prometheus import PrometheusClient, exporter_and_prometheus

OLD_MAX, NEW_MAX = 4294967296, 17179869184  # zfs_dirty_data_max 4 GiB -> 16 GiB


def as_sent(expr: str, interval: str = "1s") -> str:
    """Variables on All and $__interval as Grafana sets it (the test's own 1 s step by default)."""
    for name, value in SUBSTITUTIONS.items():
        expr = expr.replace(name, value)
    return expr.replace("$__interval", interval)


def set_compression(listing, dataset: str, compression: str) -> None:
    rows = [line.split("\t") for line in listing.read_text().splitlines()]
    for row in rows:
        if row[0] == dataset:
            row[16] = compression  # the `compression` column of the recorded zfs list
    write_atomically(listing, "".join("\t".join(row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("changes")
    root, commands = copy_tree(tmp / "tree"), copy_commands(tmp / "commands")
    with exporter_and_prometheus(tmp, "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                                 "--collector.disable-defaults", "--collector.tunables", "--collector.datasets",
                                 "--tunables.refresh-interval=1", "--datasets.refresh-interval=1",
                                 "--datasets.snapshots=off", *zfs_commands(commands), wait_up=False) as (_, prom):
        prom.wait_for('zfs_dataset_info{dataset="tank/media", compression="lz4"}')
        prom.wait_for(f'zfs_module_parameter{{name="zfs_dirty_data_max"}} == {OLD_MAX}')
        start = time.time()
        time.sleep(4)
        parameter_changed = time.time()
        (root / "sys/module/zfs/parameters/zfs_dirty_data_max").write_text(f"{NEW_MAX}\n")
        prom.wait_for(f'zfs_module_parameter{{name="zfs_dirty_data_max"}} == {NEW_MAX}')
        time.sleep(4)
        property_changed = time.time()
        set_compression(commands / "zfs-list.txt", "tank/media", "zstd-1")
        prom.wait_for('zfs_dataset_info{dataset="tank/media", compression="zstd-1"}')
        time.sleep(4)
        yield {"prom": prom, "start": start, "end": time.time(), "parameter": parameter_changed,
               "property": property_changed}


def annotations(changed, expr: str) -> list[tuple[dict, list[float]]]:
    """What Grafana gets for the annotation over the test's time range: (labels, step times)."""
    result = changed["prom"].api("query_range", query=as_sent(expr), start=changed["start"], end=changed["end"],
                                 step=1)["result"]
    return [(r["metric"], [float(t) for t, _ in r["values"]]) for r in result]


@pytest.mark.parametrize("dashboard", NAMES)
def test_every_dashboard_carries_both_change_annotations(dashboard):
    assert set(change_queries(dashboard)) == {"Module parameter changes", "Dataset property changes"}


def test_module_parameter_change(changed):
    (found,) = [annotations(changed, change_queries("overview")["Module parameter changes"])]
    assert [labels for labels, _ in found] == [{"instance": found[0][0]["instance"], "name": "zfs_dirty_data_max",
                                                "from": str(OLD_MAX), "to": str(NEW_MAX)}]
    times = found[0][1]
    # Once (twice when a scrape lands on a step edge), within the refresh + scrape after the change.
    assert 1 <= len(times) <= 2 and changed["parameter"] - 1 <= times[0] <= changed["parameter"] + 4, \
        (times, changed["parameter"])


def test_dataset_property_change(changed):
    found = annotations(changed, change_queries("datasets")["Dataset property changes"])
    assert [(labels["dataset"], labels["property"], labels["from"], labels["to"]) for labels, _ in found] == \
        [("tank/media", "compression", "lz4", "zstd-1")]
    times = found[0][1]
    assert 1 <= len(times) <= 2 and changed["property"] - 1 <= times[0] <= changed["property"] + 4, \
        (times, changed["property"])


# --- at every zoom: Grafana's step over a recorded history ------------------------------------------

# Grafana's "nice" intervals (pkg/promlib intervalv2 roundInterval): (up to this many ms, becomes this)
ROUNDING = ((10, 1), (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000),
            (3500, 2000), (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000), (45000, 30000),
            (90000, 60000), (210000, 120000), (450000, 300000), (750000, 600000), (1050000, 900000),
            (1500000, 1200000), (2700000, 1800000), (5400000, 3600000), (9000000, 7200000),
            (16200000, 10800000), (32400000, 21600000), (86400000, 43200000), (604800000, 86400000),
            (1814400000, 604800000))
SAFE_POINTS = 11000      # Grafana never asks Prometheus for more points per series


def round_interval(ms: float) -> int:
    return next((nice for limit, nice in ROUNDING if ms <= limit), 2592000000 if ms < 3628800000 else 31536000000)


def grafana_step(range_s: int, width: int, min_step_s: int) -> int:
    """The step (seconds) Grafana 11 runs an annotation query at: its minimum (the annotation's
    `step`) or range / maxDataPoints, where maxDataPoints is the window's width in pixels, each
    rounded to a nice interval, and never finer than range / 11000."""
    calculated = round_interval(max(range_s * 1000 / width, min_step_s * 1000))
    safe = round_interval(range_s * 1000 / SAFE_POINTS)
    return max(calculated, safe) // 1000


def grafana_duration(seconds: int) -> str:
    """$__interval as Grafana writes it (gtime.FormatInterval)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def grafana_events(result: list[dict], step: int) -> list[tuple[dict, float]]:
    """(labels, time) of every annotation Grafana draws from a range query's answer: a series' values
    above 0 that are at most a step apart make one event (a region), drawn from its first time."""
    events = []
    for series in result:
        times = [float(t) for t, value in series["values"] if float(value) > 0]
        for n, t in enumerate(times):
            if n == 0 or t - times[n - 1] > step:
                events.append((series["metric"], t))
    return events


DAY = 86400
START = 1759276800          # 2025-10-01 00:00 UTC: the recorded history runs 92 days from here
HISTORY_DAYS = 92
SCRAPE = 120
PHASE = 17                  # scrapes are not on round times: Prometheus spreads targets over the interval
NAS = {"instance": "nas", "job": "zfsnas"}
GiB = 1 << 30
# The exporter's series (live 2.3.2 capture) and a user's tuning over three months: a change is
# (day, hours into the day, what, old, new); what is a parameter name or (dataset, property).
# A change is seen at the first scrape after it.
PARAMETERS = {"zfs_arc_max": 0, "zfs_dirty_data_max": 4 * GiB, "zfs_txg_timeout": 5,
              "zfs_vdev_async_write_max_active": 10}
DATASETS = {"fast": {"type": "filesystem", "compression": "on", "recordsize": "131072", "atime": "off",
                     "sync": "standard", "primarycache": "all", "secondarycache": "all", "encryption": "off",
                     "dedup": "off", "logbias": "latency", "special_small_blocks": "0"},
            "fast/db": {"type": "filesystem", "compression": "lz4", "recordsize": "131072", "atime": "off",
                        "sync": "standard", "primarycache": "all", "secondarycache": "all", "encryption": "off",
                        "dedup": "off", "logbias": "latency", "special_small_blocks": "0"}}
CHANGES = [
    (3, 14.1, "zfs_arc_max", 0, 8 * GiB),
    (10, 9.5, "zfs_dirty_data_max", 4 * GiB, 8 * GiB),
    (10, 9.75, "zfs_txg_timeout", 5, 10),                 # a quarter of an hour after the one before
    (24, 21.2, ("fast/db", "compression"), "lz4", "zstd"),
    (40, 8.0, "zfs_dirty_data_max", 8 * GiB, 4 * GiB),   # the earlier change reverted
    (55, 0.0, ("fast", "recordsize"), "131072", "1048576"),  # at midnight
    (70, 16.5, ("fast/db", "recordsize"), "131072", "16384"),
    (70, 16.5, ("fast/db", "logbias"), "latency", "throughput"),  # two properties in one `zfs set`
    (88, 11.3, "zfs_arc_max", 8 * GiB, 16 * GiB),
    (91, 23.9, "zfs_txg_timeout", 10, 5),                  # an hour before the history ends
]


@dataclass(frozen=True)
class Change:
    time: int        # of the first sample with the new value
    what: str | tuple[str, str]
    old: str
    new: str

    def labels(self) -> dict[str, str]:
        if isinstance(self.what, str):
            return {"instance": "nas", "name": self.what, "from": self.old, "to": self.new}
        dataset, prop = self.what
        return {"instance": "nas", "pool": dataset.split("/")[0], "dataset": dataset, "property": prop,
                "from": self.old, "to": self.new}


def recorded_changes() -> list[Change]:
    out = []
    for day, hours, what, old, new in CHANGES:
        at = START + day * DAY + round(hours * 3600)
        out.append(Change(at + (START + PHASE - at) % SCRAPE, what, str(old), str(new)))   # seen at the next scrape
    return out


def write_history(path: Path) -> None:
    """The recorded history as OpenMetrics text (what create-blocks-from reads)."""
    changes = recorded_changes()
    lines = ["# TYPE zfs_module_parameter gauge", "# TYPE zfs_dataset_info gauge"]
    params, datasets = dict(PARAMETERS), {name: dict(props) for name, props in DATASETS.items()}
    pending = sorted(changes, key=lambda c: c.time)
    by_family: dict[str, list[str]] = {"zfs_module_parameter": [], "zfs_dataset_info": []}
    for t in range(START + PHASE, START + HISTORY_DAYS * DAY, SCRAPE):
        while pending and pending[0].time <= t:
            change = pending.pop(0)
            if isinstance(change.what, str):
                params[change.what] = int(change.new)
            else:
                datasets[change.what[0]][change.what[1]] = change.new
        for name, value in params.items():
            by_family["zfs_module_parameter"].append(
                f'zfs_module_parameter{{instance="nas",job="zfsnas",name="{name}"}} {value} {t}')
        for dataset, props in datasets.items():
            labels = ",".join(f'{k}="{v}"' for k, v in {"pool": dataset.split("/")[0], "dataset": dataset, **props}.items())
            by_family["zfs_dataset_info"].append(f'zfs_dataset_info{{instance="nas",job="zfsnas",{labels}}} 1 {t}')
    path.write_text("\n".join(lines[:1] + by_family["zfs_module_parameter"] + lines[1:]
                              + by_family["zfs_dataset_info"] + ["# EOF", ""]))


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A real Prometheus serving the recorded history from TSDB blocks."""
    tmp = tmp_path_factory.mktemp("history")
    write_history(tmp / "history.om")
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed: run ./dev test")
    # --max-block-duration: blocks of weeks instead of 2 hours (seconds instead of minutes to write)
    result = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                             "--max-block-duration=2400h", str(tmp / "history.om"), str(tmp / "data")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (tmp / "history.om").unlink()
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    port = free_port()
    prom = Daemon(["prometheus", f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                   "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                  tmp / "prometheus.log", f"http://127.0.0.1:{port}/-/ready")
    try:
        yield PrometheusClient(f"http://127.0.0.1:{port}")
    finally:
        prom.stop()


SHOWN = ("instance", "name", "pool", "dataset", "property", "from", "to")   # what a mark's title and text say
RANGES = {"1h": 3600, "6h": 6 * 3600, "24h": DAY, "7d": 7 * DAY, "30d": 30 * DAY, "90d": 90 * DAY}
WIDTHS = (800, 1920, 3840)   # Grafana asks for at most one point per pixel of the browser window


def test_grafana_steps_are_those_of_the_issue():
    """Grafana's own arithmetic on a laptop screen: 20 minutes at 30 days, 5 at 7 days."""
    assert grafana_step(30 * DAY, 1920, 60) == 1200 and grafana_step(7 * DAY, 1920, 60) == 300
    assert grafana_step(3600, 1920, 60) == 60 and grafana_step(90 * DAY, 800, 60) == 3 * 3600
    assert grafana_duration(1200) == "20m" and grafana_duration(10800) == "3h" and grafana_duration(60) == "1m"


def windows(range_s: int) -> list[int]:
    """Ends of the time ranges a user looks at: the whole history tiled for long ranges; for short
    ones, as few ranges as hold every change (each starting just before a change no earlier range
    holds)."""
    last = START + HISTORY_DAYS * DAY
    if range_s >= 30 * DAY:
        return list(range(last, START + range_s - 1, -range_s)) + [START + range_s]
    ends: list[int] = []
    for change in sorted(recorded_changes(), key=lambda c: c.time):
        if not any(end - range_s < change.time <= end for end in ends):
            ends.append(min(change.time + range_s * 9 // 10, last))
    return ends


@pytest.mark.parametrize("zoom", RANGES)
def test_every_change_is_drawn_once_at_every_zoom(history, zoom):
    board = load("overview")
    annotations = {a["name"]: a for a in board["annotations"]["list"] if a["name"] in change_queries("overview")}
    min_step = int(annotations["Module parameter changes"]["target"]["interval"].rstrip("m")) * 60
    range_s = RANGES[zoom]
    changes = recorded_changes()
    checked, queried = set(), set()
    for width in WIDTHS:
        step = grafana_step(range_s, width, min_step)
        for end in windows(range_s):
            start, end = (end - range_s) // step * step, end // step * step     # Grafana aligns both to the step
            if (start, end, step) in queried:   # another width, the same query
                continue
            queried.add((start, end, step))
            expected = sorted((json.dumps(c.labels(), sort_keys=True), math.ceil(c.time / step) * step)
                              for c in changes if start <= math.ceil(c.time / step) * step <= end)
            drawn = []
            for annotation in annotations.values():
                result = history.api("query_range", query=as_sent(annotation["target"]["expr"], grafana_duration(step)),
                                     start=start, end=end, step=step)["result"]
                drawn += [(json.dumps({k: labels[k] for k in SHOWN if k in labels}, sort_keys=True), int(t))
                          for labels, t in grafana_events(result, step)]
            assert sorted(drawn) == expected, (zoom, width, step, start, end)
            checked |= {label for label, _ in expected}
    assert len(checked) == len(changes), "every change was inside some range"
