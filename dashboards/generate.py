"""Generate the seven zfsnas Grafana dashboards (dashboards/*.json) with Grafana's foundation SDK.

Owns every dashboard: panels, their PromQL, units, descriptions, variables, links and benchmark
annotations. The JSON files next to this script are its output and are committed for users who
import them by hand; tests/dashboards/ regenerates them and fails on any difference, and
tests/integration/test_stack.py runs every panel query against a real Prometheus. Run after a change:

    .venv/bin/python dashboards/generate.py            # rewrite dashboards/*.json
    .venv/bin/python dashboards/generate.py --check    # exit 1 when the files are stale

Needs `pip install .[dashboards]` (grafana-foundation-sdk pinned to the Grafana 11.6 flavour).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grafana_foundation_sdk.builders import bargauge, common as common_builders, dashboard as dash
from grafana_foundation_sdk.builders import heatmap, prometheus, stat, table, timeseries, xychart
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, dashboard as model, heatmap as heatmap_model
from grafana_foundation_sdk.models import xychart as xychart_model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

OUT = Path(__file__).resolve().parent
# Thresholds and selectors shared with the alert rules (tests/alerts/ checks the rules against it).
SHARED = tomllib.loads((OUT.parent / "alerts" / "thresholds.toml").read_text())


def _alerts_module(name: str):
    """A module of alerts/ loaded by path (neither directory is a package)."""
    spec = importlib.util.spec_from_file_location(f"zfsnas_alerts_{name}", OUT.parent / "alerts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# The Changes view's signals and the I/O properties of datasets: one definition with their rules.
CHANGES = _alerts_module("changes")
CHANGE_SETTINGS = CHANGES.settings(SHARED)
# Our alerts that report a problem: the Zfs* rules but the always-firing watchdog.
OUR_ALERTS = f'alertname=~"{SHARED["alert_name_regex"]}", alertname!="{SHARED["watchdog_alert"]}"'
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAG = "zfsnas"
BENCH_TAG = "zfsnas-bench"  # the tag the benchmark runner puts on its Grafana annotations
UIDS = {"overview": "zfsnas-overview", "arc": "zfsnas-arc", "write-path": "zfsnas-write-path",
        "datasets": "zfsnas-datasets", "disks": "zfsnas-disks", "benchmarks": "zfsnas-benchmarks",
        "changes": "zfsnas-changes"}

# Label matchers every query carries; the variables are multi-value with "All" = ".*". `nas` is the
# external label each NAS's Prometheus adds when several remote-write to one store (docs/stack.md);
# on a single Prometheus no series has it and ".*" matches the empty value. Every aggregation keeps
# `nas` beside `instance`, so two NAS that share an instance name and pool names never merge.
NAS_MATCHERS = 'nas=~"$nas", instance=~"$instance"'
POOL_MATCHERS = f'{NAS_MATCHERS}, pool=~"$pool"'
DATASET_MATCHERS = f'{POOL_MATCHERS}, dataset=~"$dataset"'
RI = "$__rate_interval"
# Disks by serial and pool: every per-device series joins zfs_disk_info (see per_disk).
DISK_INFO = f'zfs_disk_info{{{NAS_MATCHERS}, pool=~"$pool", device=~"$disk"}}'
BENCH_ANY = POOL_MATCHERS  # every dashboard's run annotation: no matrix/config variables there
BENCH = f'{BENCH_ANY}, matrix=~"$matrix", config=~"$config"'
VDEV = f'{POOL_MATCHERS}, vdev=~"$vdev"'
# The forecast horizon of ZfsPoolFullForecast, which the Overview draws.
FORECAST_DAYS = SHARED["pool_full_forecast_days"]
# What is wrong with the selected exporters, 0 when nothing: each part is 0 for a healthy exporter.
EXPORTER_PROBLEMS = " + ".join(
    f"(sum({expr}) or vector(0))" for expr in (
        f'1 - up{{job="{SHARED["exporter_job"]}", {NAS_MATCHERS}}}',
        f"1 - zfs_exporter_collector_success{{{NAS_MATCHERS}}}",
        f"1 - zfs_exporter_source_success{{{NAS_MATCHERS}}}",
        f"zfs_exporter_source_age_seconds{{{NAS_MATCHERS}}} > bool {SHARED['exporter_source_max_age_seconds']}"))
# Number of CPUs per NAS: node_exporter has one idle counter per CPU. Shares of all CPUs divide by
# it (a sum over modes and CPUs), never average over series of different modes.
CPUS = f'count by (nas, instance) (node_cpu_seconds_total{{{NAS_MATCHERS}, mode="idle"}})'


# Before / after a change: Grafana's $__range is the selected time range; "after" is that range,
# "before" the equally long period just before it (offset). Zoom the range to start at a change
# annotation and the two bars compare the configuration before and after it.
BEFORE_AFTER_HELP = ("Set the time range to start at a change (the blue annotations): \"after\" covers the range, "
                     "\"before\" the equally long period just before it. ")


def before_after(title: str, description: str, unit: str, expr: str, by: str, legend: str, **kw):
    """Bars of `expr` averaged over the range against the same over the period before it; `expr`
    holds RANGE where the window goes and OFFSET where the offset goes."""
    after = expr.replace("RANGE", "$__range").replace("OFFSET", "")
    before = expr.replace("RANGE", "$__range").replace("OFFSET", " offset $__range")
    return bars(title, BEFORE_AFTER_HELP + description, unit,
                query(f"max by ({by}) ({before})", f"{legend} before", instant=True),
                query(f"max by ({by}) ({after})", f"{legend} after", instant=True), **kw)


def root_vdevs(expr: str) -> str:
    """Only the series of each pool's root vdev (vdev named like the pool: the whole pool), so a
    sum over a pool never adds a vdev and its children twice."""
    return (f'{expr} and on (nas, instance, pool, vdev) label_replace(group by (nas, instance, pool) ({expr}), '
            f'"vdev", "$1", "pool", "(.+)")')


# The labels of one benchmark configuration (zfsnas.store.configuration.LABELS less pool): `config` is
# its id, the rest are readable. `workload` replaced `job`, which Prometheus renamed `exported_job`.
BENCH_CONFIG = "matrix, workload, config, compression, recordsize, encryption, size"


# --- panel helpers -------------------------------------------------------------------------------

def with_nas_in_instance(expr: str) -> str:
    """The series of `expr` with `instance` reading "<nas> <instance>" where a `nas` label exists
    (several NAS writing to one store, often with the same instance name) and unchanged where it
    does not. Legends cannot say `{{nas}}` themselves: Grafana writes a missing label's *name*."""
    # through a scratch label: VictoriaMetrics's label_join garbles a destination that is also a
    # source ("a nas" came out "a a s"); an empty replacement then drops the scratch label
    joined = f'label_join({expr}, "nas_instance", " ", "nas", "instance")'
    return (f'label_replace(label_replace({joined}, "instance", "$1", "nas_instance", " ?(.*)"), '
            f'"nas_instance", "", "", "")')


def query(expr: str, legend: str = "", *, instant: bool = False, fmt: PromQueryFormat | None = None,
          ref: str = "A") -> prometheus.Dataquery:
    """One target. A legend names the NAS and instance first (`{{instance}}`, carrying the nas
    where there is one), so two NAS or two instances with the same pool and dataset names never
    read alike; heatmap buckets (`{{le}}`) sum their selection by design."""
    if legend and legend != "{{le}}":
        if "{{instance}}" not in legend:
            legend = "{{instance}} " + legend
        expr = with_nas_in_instance(expr)
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    if legend:
        q = q.legend_format(legend)
    if instant:
        q = q.instant()
    if fmt is not None:
        q = q.format(fmt)
    return q


def quota_used(matchers: str):
    """Datasets with a quota or refquota: how much of it they use (the recording rule
    ZfsDatasetQuotaNearlyFull compares), orange from dataset_quota_warning."""
    return bars("Quota used", "Share of its quota (`used`, snapshots and children included) or refquota "
                "(`referenced`) each dataset with one uses; writes fail with EDQUOT at 100 %. Datasets without a "
                "quota are not listed.", "percentunit",
                query(f"dataset:zfs_dataset_quota_used:ratio{{{matchers}}}", "{{dataset}} {{quota}}", instant=True),
                steps=((None, "green"), (SHARED["dataset_quota_warning"], "orange")), max_val=1)


def per_instance(*pairs: tuple[str, str]) -> list[prometheus.Dataquery]:
    """One query per (metric, legend suffix) of plain per-NAS gauges."""
    return [query(f"{metric}{{{NAS_MATCHERS}}}", f"{{{{instance}}}} {legend}") for metric, legend in pairs]


def _targets(panel, queries):
    for n, q in enumerate(queries):
        panel = panel.with_target(q.ref_id(chr(ord("A") + n)))
    return panel


def _common(panel, title: str, description: str, unit: str, width: int, height: int):
    return panel.title(title).description(description).unit(unit).datasource(DATASOURCE).span(width).height(height)


def _range(panel, min_val: float | None, max_val: float | None):
    if min_val is not None:
        panel = panel.min(min_val)
    return panel if max_val is None else panel.max(max_val)


def series(title: str, description: str, unit: str, *queries, width: int = 12, height: int = 8,
           stacked: bool = False, min_val: float | None = 0, max_val: float | None = None):
    panel = _common(timeseries.Panel(), title, description, unit, width, height).fill_opacity(10).line_width(1)
    if stacked:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL)).fill_opacity(40)
    panel = _range(panel, min_val, max_val).legend(common_builders.VizLegendOptions().show_legend(True).display_mode(
        common.LegendDisplayMode.TABLE).placement(common.LegendPlacement.BOTTOM).calcs(["mean", "max", "lastNotNull"]))
    return _targets(panel, queries)


def thresholds(*steps: tuple[float | None, str]) -> dash.ThresholdsConfig:
    return dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(
        [model.Threshold(value=v, color=c) for v, c in steps])


def single(title: str, description: str, unit: str, *queries, width: int = 6, height: int = 4,
           steps=((None, "green"),)):
    panel = _common(stat.Panel(), title, description, unit, width, height).thresholds(thresholds(*steps)) \
        .color_mode(common.BigValueColorMode.BACKGROUND).graph_mode(common.BigValueGraphMode.NONE) \
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    return _targets(panel, queries)


def bars(title: str, description: str, unit: str, *queries, width: int = 12, height: int = 8,
         steps=((None, "green"),), min_val: float | None = 0, max_val: float | None = None):
    panel = _common(bargauge.Panel(), title, description, unit, width, height).thresholds(thresholds(*steps)) \
        .display_mode(common.BarGaugeDisplayMode.GRADIENT).orientation(common.VizOrientation.HORIZONTAL) \
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    return _targets(_range(panel, min_val, max_val), queries)


def heat(title: str, description: str, unit: str, expr: str, *, width: int = 12, height: int = 8):
    panel = _common(heatmap.Panel(), title, description, unit, width, height).calculate(False) \
        .y_axis(heatmap.YAxisConfig().unit(unit)) \
        .color(heatmap.HeatmapColorOptions().mode(heatmap_model.HeatmapColorMode.SCHEME).scheme("Oranges")
               .steps(64)) \
        .cell_gap(1).rows_frame(heatmap.RowsHeatmapOptions().layout(common.HeatmapCellLayout.LE))
    return panel.with_target(query(expr, "{{le}}", fmt=PromQueryFormat.HEATMAP))


def grid(title: str, description: str, unit: str, *queries, width: int = 24, height: int = 8,
         transformations=(), overrides=()):
    panel = _common(table.Panel(), title, description, unit, width, height).filterable(True)
    for transformation in transformations:
        panel = panel.with_transformation(transformation)
    for name, properties in overrides:
        panel = panel.override_by_name(name, properties)
    return _targets(panel, queries)


def by_name(name: str) -> xychart.MatcherConfig:
    return xychart.MatcherConfig().id("byName").options(name)


def xy(title: str, description: str, x_query, y_query, *, width: int = 12, height: int = 8):
    """An XY chart of two instant table queries merged on their labels: A on x (ratio), B on y (Bps)."""
    series_config = (xychart.XYSeriesConfig().x(xychart.XychartXYSeriesConfigX().matcher(by_name("compressratio")))
                     .y(xychart.XychartXYSeriesConfigY().matcher(by_name("throughput"))))
    panel = (_common(xychart.Panel(), title, description, "Bps", width, height)
             .mapping(xychart_model.SeriesMapping.MANUAL).series([series_config]).point_size(
                 xychart.XychartFieldConfigPointSize().fixed(8))
             .with_transformation(transform("merge"))
             .with_transformation(transform("organize", excludeByName={"Time": True},
                                            renameByName={"Value #A": "compressratio", "Value #B": "throughput"}))
             .override_by_name("compressratio", unit_override("x")))
    return _targets(panel, [x_query, y_query])


def transform(id_val: str, **options) -> model.DataTransformerConfig:
    return model.DataTransformerConfig(id_val=id_val, options=options)


def unit_override(unit: str) -> list[model.DynamicConfigValue]:
    return [model.DynamicConfigValue(id_val="unit", value=unit)]


def row(title: str) -> dash.Row:
    return dash.Row(title)


# --- variables, links, annotations -----------------------------------------------------------------

def label_variable(name: str, label: str, expr: str, description: str) -> dash.QueryVariable:
    return (dash.QueryVariable(name).label(label).description(description).datasource(DATASOURCE)
            .query(f"label_values({expr}, {'device' if name == 'disk' else name})")
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*")
            .current(model.VariableOption(selected=True, text="All", value="$__all")))


def variables(kind: str) -> list:
    out = [
        dash.DatasourceVariable("datasource").label("Data source").type("prometheus")
        .description("The Prometheus (or Thanos / Mimir / VictoriaMetrics) that scrapes zfsnas-exporter"),
        label_variable("nas", "NAS", "zfs_exporter_collector_success",
                       "The `nas` external label of each NAS's Prometheus when several write to one store "
                       "(VictoriaMetrics, Mimir, Thanos); empty on a single Prometheus"),
        label_variable("instance", "Instance", 'zfs_exporter_collector_success{nas=~"$nas"}',
                       "The zfsnas-exporter instances of the selected NAS (one per NAS on a single Prometheus)"),
        label_variable("pool", "Pool", f'zfs_pool_state{{{NAS_MATCHERS}}}', "ZFS pools of the selected NAS"),
    ]
    if kind == "bench":
        out.append(label_variable("matrix", "Matrix", f'zfs_bench_runs_total{{{POOL_MATCHERS}}}',
                                  "Benchmark matrices (fits-copy, fio-seq, ...) of the selected pools"))
        out.append(label_variable("config", "Configuration", f'zfs_bench_runs_total{{{POOL_MATCHERS}, matrix=~"$matrix"}}', "Benchmark configuration ids "
                                  "(`zfsnas-bench list` shows what each one is and what tells two apart)"))
    if kind == "dataset":
        out.append(label_variable("dataset", "Dataset",
                                  f'zfs_dataset_written_bytes_total{{{POOL_MATCHERS}}}',
                                  "Datasets (full names like tank/media) of the selected pools"))
    if kind == "disk":
        out.append(label_variable("disk", "Disk", f'zfs_disk_info{{{POOL_MATCHERS}}}',
                                  "Physical disks (kernel device names) of the selected pools"))
        out.append(label_variable("vdev", "Vdev", f'zfs_vdev_latency_seconds_bucket{{{POOL_MATCHERS}}}',
                                  "Vdevs of the latency heatmaps (the root vdev carries the pool's name and covers the whole pool); needs the vdevlatency collector"))
    return out


def links() -> list[dash.DashboardLink]:
    return [dash.DashboardLink("zfsnas").type(model.DashboardLinkType.DASHBOARDS).tags([TAG]).as_dropdown(False)
            .include_vars(True).keep_time(True).icon("dashboard")]


def bench_annotations() -> list[dash.AnnotationQuery]:
    """Benchmark runs as regions: the runner's Grafana annotations and, for users without an API
    token, the exporter's zfs_bench_running gauge."""
    grafana = model.DataSourceRef(type_val="grafana", uid="-- Grafana --")
    return [
        dash.AnnotationQuery().name("Benchmark runs (runner)").datasource(grafana).enable(True).icon_color("purple")
        .type("tags").target(dash.AnnotationTarget().type("tags").tags([BENCH_TAG]).match_any(True).limit(100)),
        dash.AnnotationQuery().name("Benchmark running (exporter)").datasource(DATASOURCE).enable(True)
        .icon_color("orange").expr(f'max by (nas, instance, pool, {BENCH_CONFIG}) (zfs_bench_running{{{BENCH_ANY}}}) > 0'),
    ]


BENCH_RUNNING_FIELDS = {"step": "15s", "titleFormat": "Benchmark {{matrix}}/{{workload}} {{compression}} "
                                                      "rs={{recordsize}} config {{config}}",
                        "tagKeys": "pool,matrix,workload,config,compression,recordsize,encryption,size",
                        "textFormat": "zfsnas-bench run in progress on {{instance}}", "useValueForTime": False}


# Configuration changes as annotations, from Prometheus data alone: each query compares every
# series with itself one step of the annotation query earlier (`offset $__interval`: Grafana sets
# $__interval to the step it runs the query at, max(CHANGE_STEP, time range / screen width), 20
# minutes at 30 days), so a change shows exactly once, at the first step after it, at any zoom
# (tests/integration/test_change_annotations.py). Several changes of one series within one step
# show as one mark from the first value to the last. Old and new values travel as labels (`from`,
# `to`): count_values turns a module parameter's value into a label, and label_replace copies a
# dataset property out of zfs_dataset_info's labels. Values are as the kernel / `zfs get -p` print them.
CHANGE_STEP = "1m"   # the annotation's minimum step, Grafana's "step" field
PREVIOUS_STEP = "offset $__interval"
IO_PROPERTIES = CHANGES.IO_PROPERTIES


def parameter_changes() -> str:
    param, before = f"zfs_module_parameter{{{NAS_MATCHERS}}}", f"zfs_module_parameter{{{NAS_MATCHERS}}} {PREVIOUS_STEP}"
    # `count_values without`: Prometheus 2.42 (Debian 12) drops the `by` labels of count_values in
    # range queries, which is what Grafana runs for annotations (seen in tests/integration).
    return (f'count_values without (job) ("to", {param} != {before}) * on (nas, instance, name) '
            f'group_left (from) count_values without (job) ("from", {before})')


def property_changes() -> str:
    info = f"zfs_dataset_info{{{POOL_MATCHERS}}}"
    before = f"{info} {PREVIOUS_STEP}"
    key = "nas, instance, pool, dataset"
    return " or ".join(
        f'label_replace(label_replace(({info} unless on ({key}, {prop}) {before}) and on ({key}) {before}, '
        f'"property", "{prop}", "", ""), "to", "$1", "{prop}", "(.*)") * on ({key}) group_left (from) '
        f'max by ({key}, from) (label_replace({before}, "from", "$1", "{prop}", "(.*)"))'
        for prop in IO_PROPERTIES)


CHANGE_ANNOTATIONS = {  # name: (expr, title, text)
    "Module parameter changes": (parameter_changes, "{{name}} {{from}} -> {{to}}",
                                 "ZFS module parameter {{name}} changed on {{instance}}"),
    "Dataset property changes": (property_changes, "{{dataset}} {{property}} {{from}} -> {{to}}",
                                 "Dataset property of {{dataset}} changed on {{instance}}"),
}


def change_annotations() -> list[dash.AnnotationQuery]:
    return [dash.AnnotationQuery().name(name).datasource(DATASOURCE).enable(True).icon_color("blue").expr(expr())
            for name, (expr, _, _) in CHANGE_ANNOTATIONS.items()]


@dataclass
class Board:
    key: str
    title: str
    description: str
    variables: str = ""
    panels: list = field(default_factory=list)
    time_from: str = "now-6h"   # what the board opens on

    def build(self) -> dict:
        builder = (dash.Dashboard(self.title).uid(UIDS[self.key]).description(self.description)
                   .tags([TAG]).refresh("30s").time(self.time_from, "now").timezone("browser")
                   .tooltip(model.DashboardCursorSync.CROSSHAIR).editable().links(links())
                   .variables(variables(self.variables)).annotations(bench_annotations() + change_annotations()))
        for panel in self.panels:
            builder = builder.with_row(panel) if isinstance(panel, dash.Row) else builder.with_panel(panel)
        board = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
        for annotation in board["annotations"]["list"]:
            if "expr" in annotation:
                prometheus_annotation(annotation)
        return board


def prometheus_annotation(annotation: dict) -> None:
    """A Prometheus annotation as Grafana 11.6 keeps it: its query (expr, and the minimum step as
    `interval`) in `target`, where Grafana's Prometheus data source moves a legacy top-level `expr`
    and `step` when it loads a dashboard (PrometheusAnnotationSupport.prepareAnnotation); the
    event fields it reads from the annotation itself (titleFormat, textFormat, tagKeys,
    useValueForTime) beside it. The SDK's AnnotationQuery has neither: tests/dashboards checks
    these fields against the SDK's Prometheus query type."""
    if annotation["name"] in CHANGE_ANNOTATIONS:
        _, title, text = CHANGE_ANNOTATIONS[annotation["name"]]
        step, fields = CHANGE_STEP, {"titleFormat": title, "textFormat": text,
                                     "tagKeys": "instance,pool,dataset,name,property", "useValueForTime": False}
    else:
        step, fields = BENCH_RUNNING_FIELDS["step"], {k: v for k, v in BENCH_RUNNING_FIELDS.items() if k != "step"}
    annotation["target"] = {"expr": annotation.pop("expr"), "interval": step, "refId": "Anno"}
    annotation.update(fields)


# --- the dashboards ----------------------------------------------------------------------------

def overview() -> Board:
    return Board("overview", "ZFS / Overview", "Pool health and capacity, ARC, throughput, dirty data, alerts, "
                 "scrubs and benchmark runs of every NAS at a glance.", panels=[
        row("Pools"),
        single("Pools not ONLINE", "Pools whose state is not ONLINE (DEGRADED, FAULTED, SUSPENDED, ...), from "
               "the kstat `state` of each pool.", "none",
               query(f'count(zfs_pool_state{{{POOL_MATCHERS}, state="ONLINE"}} == 0) or vector(0)', instant=True),
               steps=((None, "green"), (1, "red"))),
        single("Alerts firing", "zfsnas alerts (the Zfs* rules of alerts/zfsnas.rules.yml) firing now for the "
               "selected NAS; other alerts of the same Prometheus are not counted.", "none",
               query(f'count(ALERTS{{alertstate="firing", {OUR_ALERTS}, {NAS_MATCHERS}}}) or vector(0)',
                     instant=True),
               steps=((None, "green"), (1, "red"))),
        single("ARC hit ratio", "Share of the last day's ARC reads served from RAM, per NAS (recording rule "
               "instance:zfs_arc_hit_ratio:ratio1d: busy hours weigh by their reads, idle ones not at all; "
               "the last 5 minutes are in the ARC hit ratio graph below).", "percentunit",
               query(f"instance:zfs_arc_hit_ratio:ratio1d{{{NAS_MATCHERS}}}", "{{instance}}", instant=True),
               steps=((None, "red"), (0.7, "orange"), (0.9, "green"))).no_value("no reads"),
        single("Oldest scrub", "Time without a finished scrub of the pool that waited longest: since its last "
               "finished scrub (a canceled scrub or a resilver is none), or since Prometheus first saw a pool "
               "never scrubbed (recording rule pool:zfs_pool_scrub_age:seconds, as ZfsPoolScrubOverdue).", "s",
               query(f"max(pool:zfs_pool_scrub_age:seconds{{{POOL_MATCHERS}}})", instant=True),
               steps=((None, "green"), ((SHARED["scrub_max_age_days"] - 7) * 86400, "orange"),
                      (SHARED["scrub_max_age_days"] * 86400, "red"))),
        single("Vdev errors", "Read, write and checksum errors of all vdevs since import or zpool clear.", "none",
               query(f"sum(zfs_vdev_errors{{{POOL_MATCHERS}}}) or vector(0)", instant=True),
               steps=((None, "green"), (1, "orange"))),
        single("Permanent data errors", "Files with permanent errors across the pools (zpool status -v).", "none",
               query(f"sum(zfs_pool_data_errors{{{POOL_MATCHERS}}}) or vector(0)", instant=True),
               steps=((None, "green"), (1, "red"))),
        single("Resilvering", "Pools with a resilver in progress.", "none",
               query(f'count(zfs_pool_scan_info{{{POOL_MATCHERS}, function="resilver", state="scanning"}} == 1) or vector(0)',
                     instant=True), steps=((None, "green"), (1, "orange"))),
        single("Write throttle delays", "Transactions per second the write throttle delays (dirty data past "
               "zfs_delay_min_dirty_percent).", "ops",
               query(f"sum(rate(zfs_dmu_tx_dirty_delay_total{{{NAS_MATCHERS}}}[{RI}]))", instant=True),
               steps=((None, "green"), (1, "orange"))),
        grid("Pool state", "Current state of every pool (1 = the state the pool is in).", "none",
             query(f"zfs_pool_state{{{POOL_MATCHERS}}} == 1", instant=True, fmt=PromQueryFormat.TABLE),
             width=12, height=6,
             transformations=[transform("organize", excludeByName={"Time": True, "Value": True, "__name__": True})]),
        bars("Pool capacity", "Allocated share of each pool; ZFS slows down past 80 % and gets fragile past 90 %.",
             "percentunit", query(f"pool:zfs_pool_capacity:ratio{{{POOL_MATCHERS}}}", "{{instance}} {{pool}}", instant=True),
             width=12, height=6, steps=((None, "green"), (SHARED["pool_capacity_warning"], "orange"),
                                            (SHARED["pool_capacity_critical"], "red")), max_val=1),
        disk_row(),
        *disk_stats(),
        row("Capacity"),
        series("Pool full forecast", f"Free space of each pool now and in {FORECAST_DAYS} days at its usual daily "
               "fill (recording rule pool:zfs_pool_free_bytes:delta1d_median3d, the median of the last 3 days' "
               "daily changes: a one-off copy is no trend; the same as now until Prometheus has a day of it); "
               "ZfsPoolFullForecast fires when the forecast reaches 0 for a pool at least half full.", "bytes",
               query(f"zfs_pool_free_bytes{{{POOL_MATCHERS}}}", "{{instance}} {{pool}} free now"),
               query(f"zfs_pool_free_bytes{{{POOL_MATCHERS}}} + {FORECAST_DAYS} * "
                     f"(pool:zfs_pool_free_bytes:delta1d_median3d{{{POOL_MATCHERS}}}"
                     f" or 0 * zfs_pool_free_bytes{{{POOL_MATCHERS}}})",
                     f"{{{{instance}}}} {{{{pool}}}} in {FORECAST_DAYS} days"), min_val=None),
        quota_used(POOL_MATCHERS),
        bars("Pool fragmentation", "Free-space fragmentation of each pool (zpool list frag): high values make "
             "allocations slower as the pool fills.", "percentunit",
             query(f"zfs_pool_fragmentation_ratio{{{POOL_MATCHERS}}}", "{{instance}} {{pool}}", instant=True),
             steps=((None, "green"), (0.5, "orange"), (0.8, "red")), max_val=1),
        row("Throughput and dirty data"),
        series("Pool write throughput", "Bytes written per second by synced txgs of each pool.", "Bps",
               query(f"rate(zfs_pool_txg_written_bytes_total{{{POOL_MATCHERS}}}[{RI}])", "{{instance}} {{pool}} write")),
        series("Pool read throughput", "Bytes read per second through the datasets of each pool "
               "(objset kstats: logical reads, ARC hits included).", "Bps",
               query(f"sum by (nas, instance, pool) (rate(zfs_dataset_read_bytes_total{{{POOL_MATCHERS}}}[{RI}]))",
                     "{{instance}} {{pool}} read")),
        series("Dirty data vs zfs_dirty_data_max", "Live dirty data (ARC anonymous buffers) against the limit at "
               "which ZFS stops accepting writes; past zfs_delay_min_dirty_percent the write throttle delays them.",
               "bytes",
               query(f"zfs_arc_anon_size_bytes{{{NAS_MATCHERS}}}", "{{instance}} dirty"),
               query(f"zfs_dirty_data_max_bytes{{{NAS_MATCHERS}}}", "{{instance}} max"),
               query(f"zfs_dirty_data_max_bytes{{{NAS_MATCHERS}}} * zfs_dirty_data_delay_min_ratio{{{NAS_MATCHERS}}}",
                     "{{instance}} throttle starts")),
        series("ARC hit ratio", "ARC hit ratio per NAS over 5 minutes (recording rule "
               "instance:zfs_arc_hit_ratio:rate5m; a gap where the ARC served no reads).",
               "percentunit", query(f"instance:zfs_arc_hit_ratio:rate5m{{{NAS_MATCHERS}}}", "{{instance}}"), max_val=1),
        row("Scrubs and resilvers"),
        bars("Scrub / resilver progress", "Share of each running scrub or resilver issued so far (zpool status: "
             "issued / total); nothing while no scan runs.", "percentunit",
             query(f"zfs_pool_scan_issued_bytes{{{POOL_MATCHERS}}} / zfs_pool_scan_total_bytes{{{POOL_MATCHERS}}}",
                   "{{instance}} {{pool}} {{function}}", instant=True), max_val=1),
        bars("Time since the last scrub", "Per pool: since its last finished scrub, or since Prometheus first saw "
             "a pool never scrubbed (orange a week before ZfsPoolScrubOverdue's scrub_max_age_days, red past it).",
             "s", query(f"pool:zfs_pool_scrub_age:seconds{{{POOL_MATCHERS}}}", "{{instance}} {{pool}}", instant=True),
             steps=((None, "green"), ((SHARED["scrub_max_age_days"] - 7) * 86400, "orange"),
                    (SHARED["scrub_max_age_days"] * 86400, "red"))),
        row("Exporter"),
        single("Exporter problems", "zfsnas-exporters that cannot be scraped, failing collectors, failing "
               "background sources and sources older than exporter_source_max_age_seconds, summed over the "
               "selected NAS (0 when all is well; the alerts ZfsExporter* say which).", "none",
               query(EXPORTER_PROBLEMS, instant=True), steps=((None, "green"), (1, "red")), height=6),
        grid("Exporter sources", "Background sources of each exporter (zfs / zpool commands, the benchmark "
             "database, ...): how old the values served are and whether the last refresh worked.", "s",
             query(f"max by (nas, instance, source) (zfs_exporter_source_age_seconds{{{NAS_MATCHERS}}})",
                   instant=True, fmt=PromQueryFormat.TABLE, ref="A"),
             query(f"max by (nas, instance, source) (zfs_exporter_source_success{{{NAS_MATCHERS}}})",
                   instant=True, fmt=PromQueryFormat.TABLE, ref="B"),
             transformations=[transform("merge"), transform("organize", excludeByName={"Time": True},
                                                            renameByName={"Value #A": "age", "Value #B": "last refresh ok"})],
             overrides=[("last refresh ok", unit_override("bool_yes_no"))], width=12, height=6),
        series("Exporter scrape duration", "Seconds Prometheus takes to scrape each zfsnas-exporter.", "s",
               query(f'scrape_duration_seconds{{job="{SHARED["exporter_job"]}", {NAS_MATCHERS}}}', "{{instance}}"),
               width=6, height=6),
    ])


DISK_HEALTH = f"device:zfs_disk_health:state{{{POOL_MATCHERS}}}"
LIMIT_WORDS = (f"spinning disks {SHARED['disk_temperature_hdd_max']} °C, alerts/thresholds.toml's, whatever their own "
               f"limit; SSD and NVMe their own limit where they report one, else {SHARED['disk_temperature_ssd_max']} °C")


def disk_row() -> dash.Row:
    """A row of disk stats for each selected pool (Grafana repeats it over $pool)."""
    return row("Disks of pool $pool").repeat("pool")


def disk_count(health: str) -> str:
    """Disks of each pool in `health`, 0 where none is (but the pool has disks)."""
    return (f'count by (nas, instance, pool) (device:zfs_disk_health:state{{{POOL_MATCHERS}, health="{health}"}}) '
            f"or 0 * count by (nas, instance, pool) ({DISK_HEALTH})")


def disk_stats() -> list:
    why = ("from SMART and zpool status together (recording rules zfsnas.disk_health; the Disks dashboard's "
           "\"Disk problems\" says what)")
    nothing = "No disks known for this pool (the disks collector reads them; zpool status places them)"
    return [
        single("Healthy disks", f"Disks of the pool with no problem {why}.", "none",
               query(disk_count("healthy"), "{{pool}}", instant=True)).no_value(nothing),
        single("Disks with a warning", f"Disks of the pool to watch {why}: sectors remapped or pending, CRC errors "
               "growing, checksum errors, a failed self-test, at or past its temperature limit.", "none",
               query(disk_count("warning"), "{{pool}}", instant=True),
               steps=((None, "green"), (1, "orange"))).no_value(nothing),
        single("Failing disks", f"Disks of the pool that are going or gone {why}: SMART health check failed, NVMe "
               "critical warning, ZFS read or write errors, faulted or removed.", "none",
               query(disk_count("failing"), "{{pool}}", instant=True),
               steps=((None, "green"), (1, "red"))).no_value(nothing),
        single("Hottest disk vs its limit", "The awake disk of the pool nearest its temperature limit: its temperature "
               f"over the limit ZfsDiskTemperatureHigh holds it to ({LIMIT_WORDS}); "
               f"orange from {NEAR_LIMIT:.0%}, red at the limit.", "percentunit",
               query(with_disk_names(f"topk by (nas, instance, pool) (1, {temperature_of_limit(SMART_POOL)})"),
                     "{{pool}} {{serial}} ({{device}})", instant=True), steps=LIMIT_STEPS)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME).no_value("No temperatures (SMART off or disks asleep)"),
    ]


def arc() -> Board:
    return Board("arc", "ZFS / ARC and L2ARC", "ARC size against its target and limits, hit ratios by access "
                 "and content, MRU/MFU, evictions, and what the L2ARC holds, serves and costs in RAM.", panels=[
        row("ARC"),
        series("ARC size vs target, min and max", "ARC size against its adaptive target (c) and the c_min / "
               "c_max limits.", "bytes",
               *per_instance(("zfs_arc_size_bytes", "size"),
                             ("zfs_arc_target_size_bytes", "target"),
                             ("zfs_arc_min_size_bytes", "min"),
                             ("zfs_arc_max_size_bytes", "max"))),
        series("Hit ratio by access and content", "Share of reads served from the ARC, split demand / prefetch "
               "x data / metadata.", "percentunit",
               query(f'sum by (nas, instance, access, content) (rate(zfs_arc_reads_total{{{NAS_MATCHERS}, result="hit"}}[{RI}]))'
                     f" / sum by (nas, instance, access, content) (rate(zfs_arc_reads_total{{{NAS_MATCHERS}}}[{RI}]))",
                     "{{instance}} {{access}} {{content}}"), max_val=1),
        series("MRU and MFU", "Bytes in the most-recently and most-frequently used lists (and their ghosts' "
               "referenced sizes, which tell how much a larger ARC would have served).", "bytes",
               *per_instance(("zfs_arc_mru_size_bytes", "MRU"),
                             ("zfs_arc_mfu_size_bytes", "MFU"),
                             ("zfs_arc_mru_ghost_size_bytes", "MRU ghost"),
                             ("zfs_arc_mfu_ghost_size_bytes", "MFU ghost"))),
        series("Hits by list", "ARC hits per second by the list that served them; ghost hits are misses a "
               "bigger ARC would have avoided.", "ops",
               query(f"sum by (nas, instance, list) (rate(zfs_arc_list_hits_total{{{NAS_MATCHERS}}}[{RI}]))",
                     "{{instance}} {{list}}")),
        series("Evictions", "Buffers evicted per second (deleted), and evictions skipped or short of their goal.",
               "ops",
               query(f"rate(zfs_arc_deleted_total{{{NAS_MATCHERS}}}[{RI}])", "{{instance}} deleted"),
               query(f"rate(zfs_arc_evict_skip_total{{{NAS_MATCHERS}}}[{RI}])", "{{instance}} skipped"),
               query(f"rate(zfs_arc_evict_not_enough_total{{{NAS_MATCHERS}}}[{RI}])", "{{instance}} not enough")),
        series("ARC contents", "What the ARC holds: data, metadata, headers, dbufs and dnodes.", "bytes",
               *per_instance(("zfs_arc_data_size_bytes", "data"),
                             ("zfs_arc_metadata_size_bytes", "metadata"),
                             ("zfs_arc_hdr_size_bytes", "headers"),
                             ("zfs_arc_dbuf_size_bytes", "dbufs"),
                             ("zfs_arc_dnode_size_bytes", "dnodes")), stacked=True),
        row("L2ARC"),
        series("L2ARC size", "Data the L2ARC holds (uncompressed) and the space it takes on the cache devices.",
               "bytes",
               query(f"zfs_l2arc_size_bytes{{{NAS_MATCHERS}}}", "{{instance}} size"),
               query(f"zfs_l2arc_allocated_bytes{{{NAS_MATCHERS}}}", "{{instance}} allocated")),
        series("L2ARC hit ratio", "Share of ARC misses the L2ARC served.", "percentunit",
               query(f"rate(zfs_l2arc_hits_total{{{NAS_MATCHERS}}}[{RI}]) / (rate(zfs_l2arc_hits_total{{{NAS_MATCHERS}}}[{RI}])"
                     f" + rate(zfs_l2arc_misses_total{{{NAS_MATCHERS}}}[{RI}]))", "{{instance}}"), max_val=1),
        series("L2ARC bytes read and written", "Bytes per second read from and fed to the cache devices.", "Bps",
               query(f"rate(zfs_l2arc_read_bytes_total{{{NAS_MATCHERS}}}[{RI}])", "{{instance}} read"),
               query(f"rate(zfs_l2arc_written_bytes_total{{{NAS_MATCHERS}}}[{RI}])", "{{instance}} written")),
        series("L2ARC header RAM", "RAM the L2ARC headers take out of the ARC, and their share of the ARC "
               "(right axis; alert ZfsL2arcHeaderRamHigh above 10 %).", "bytes",
               query(f"zfs_l2arc_header_bytes{{{NAS_MATCHERS}}}", "{{instance}} headers"),
               query(f"instance:zfs_l2arc_header_share:ratio{{{NAS_MATCHERS}}}", "{{instance}} share of ARC"))
        .override_by_query("B", [model.DynamicConfigValue(id_val="unit", value="percentunit"),
                                 model.DynamicConfigValue(id_val="custom.axisPlacement", value="right")]),
    ])


def write_path() -> Board:
    board = Board("write-path", "ZFS / Write path", "Dirty data against its limit, txg sync times and sizes, the "
                  "write throttle, tx-assign latency and per-dataset writes, next to CPU busy and iowait.",
                  variables="dataset", panels=[
        row("Dirty data and txgs"),
        series("Dirty data vs zfs_dirty_data_max", "Live dirty data (ARC anonymous buffers) against "
               "zfs_dirty_data_max and the point where the write throttle starts delaying writes.", "bytes",
               query(f"zfs_arc_anon_size_bytes{{{NAS_MATCHERS}}}", "{{instance}} dirty"),
               query(f"zfs_dirty_data_max_bytes{{{NAS_MATCHERS}}}", "{{instance}} zfs_dirty_data_max"),
               query(f"zfs_dirty_data_max_bytes{{{NAS_MATCHERS}}} * zfs_dirty_data_delay_min_ratio{{{NAS_MATCHERS}}}",
                     "{{instance}} delay starts"),
               query(f"zfs_pool_txg_last_dirty_bytes{{{POOL_MATCHERS}}}", "{{instance}} {{pool}} last txg dirty")),
        heat("Txg sync time", "How long each txg took to sync (histogram of synced txgs per scrape interval).",
             "s", f"sum by (le) (rate(zfs_pool_txg_sync_seconds_bucket{{{POOL_MATCHERS}}}[{RI}]))"),
        series("Txgs synced per second", "Txg rate per pool; about 1/zfs_txg_timeout at rest, faster when dirty "
               "data fills up.", "ops",
               query(f"rate(zfs_pool_txgs_synced_total{{{POOL_MATCHERS}}}[{RI}])", "{{instance}} {{pool}}")),
        series("Bytes per txg", "Bytes written and dirty bytes per synced txg.", "bytes",
               query(f"rate(zfs_pool_txg_written_bytes_total{{{POOL_MATCHERS}}}[{RI}]) / rate(zfs_pool_txgs_synced_total"
                     f"{{{POOL_MATCHERS}}}[{RI}])", "{{instance}} {{pool}} written"),
               query(f"rate(zfs_pool_txg_dirty_bytes_total{{{POOL_MATCHERS}}}[{RI}]) / rate(zfs_pool_txgs_synced_total"
                     f"{{{POOL_MATCHERS}}}[{RI}])", "{{instance}} {{pool}} dirty")),
        row("Write throttle"),
        series("Throttle and delay events", "dmu_tx events per second: writes delayed by the dirty-data "
               "throttle, hard-throttled or over zfs_dirty_data_max.", "ops",
               *[query(f"rate(zfs_dmu_tx_{name}_total{{{NAS_MATCHERS}}}[{RI}])", f"{{{{instance}}}} {name}")
                 for name in ("dirty_delay", "dirty_throttle", "dirty_over_max", "delay", "wrlog_delay")]),
        heat("Tx assign latency", "Time writers waited to get into an open txg (dmu_tx_assign histogram); "
             "long tails mean the throttle is delaying them.", "s",
             f"sum by (le) (rate(zfs_pool_tx_assign_seconds_bucket{{{POOL_MATCHERS}}}[{RI}]))"),
        row("Before / after a change"),
        before_after("Pool write throughput before / after", "Average bytes per second written by synced txgs "
                     "of each pool.", "Bps",
                     f"increase(zfs_pool_txg_written_bytes_total{{{POOL_MATCHERS}}}[RANGE]OFFSET) / $__range_s",
                     "nas, instance, pool", "{{instance}} {{pool}}"),
        before_after("Dataset write rate before / after", "Average bytes per second written into each dataset.",
                     "Bps", f"increase(zfs_dataset_written_bytes_total{{{DATASET_MATCHERS}}}[RANGE]OFFSET) / $__range_s",
                     "nas, instance, pool, dataset", "{{dataset}}"),
        row("Datasets and CPU"),
        series("Write rate per dataset", "Bytes written per second into each dataset (objset kstats).", "Bps",
               query(f"rate(zfs_dataset_written_bytes_total{{{DATASET_MATCHERS}}}[{RI}])", "{{instance}} {{dataset}}"),
               stacked=True),
        series("CPU busy and iowait", "Share of all CPUs of the NAS, from node_exporter: busy (neither idle nor "
               "iowait; 1 = every CPU busy) and apart user, system and iowait. Compression and checksums cost "
               "CPU, slow disks show as iowait.", "percentunit",
               query(f'1 - sum by (nas, instance) (rate(node_cpu_seconds_total{{{NAS_MATCHERS}, mode=~"idle|iowait"}}[{RI}]))'
                     f" / {CPUS}", "{{instance}} busy"),
               query(f'sum by (nas, instance, mode) (rate(node_cpu_seconds_total{{{NAS_MATCHERS}, mode=~"user|system|iowait"}}'
                     f"[{RI}])) / on (nas, instance) group_left {CPUS}", "{{instance}} {{mode}}"), max_val=1),
    ])
    return board


def datasets() -> Board:
    info = f"zfs_dataset_info{{{DATASET_MATCHERS}}}"
    return Board("datasets", "ZFS / Datasets", "Compression, logical against physical space, properties and "
                 "I/O of every dataset.", variables="dataset", panels=[
        row("Space"),
        bars("Compression ratio", "compressratio of each dataset (logical / physical of what it uses).", "x",
             query(f"zfs_dataset_compressratio{{{DATASET_MATCHERS}}}", "{{dataset}}", instant=True), min_val=1),
        series("Logical vs physical used", "Space used as the applications see it (logicalused) and on disk "
               "(used).", "bytes",
               query(f"zfs_dataset_logical_used_bytes{{{DATASET_MATCHERS}}}", "{{dataset}} logical"),
               query(f"zfs_dataset_used_bytes{{{DATASET_MATCHERS}}}", "{{dataset}} physical")),
        series("Used by snapshots", "Space only snapshots keep alive, per dataset.", "bytes",
               query(f"zfs_dataset_used_by_snapshots_bytes{{{DATASET_MATCHERS}}}", "{{dataset}}")),
        series("Available", "Space each dataset can still grow into.", "bytes",
               query(f"zfs_dataset_available_bytes{{{DATASET_MATCHERS}}}", "{{dataset}}")),
        quota_used(DATASET_MATCHERS),
        grid("Properties", "recordsize, compression and space of every dataset, one row each.", "bytes",
             query(f"max by (nas, instance, pool, dataset, type, compression, recordsize) ({info})",
                   instant=True, fmt=PromQueryFormat.TABLE, ref="A"),
             query(f"max by (nas, instance, pool, dataset) (zfs_dataset_compressratio{{{DATASET_MATCHERS}}})",
                   instant=True, fmt=PromQueryFormat.TABLE, ref="B"),
             query(f"max by (nas, instance, pool, dataset) (zfs_dataset_logical_used_bytes{{{DATASET_MATCHERS}}})",
                   instant=True, fmt=PromQueryFormat.TABLE, ref="C"),
             query(f"max by (nas, instance, pool, dataset) (zfs_dataset_used_bytes{{{DATASET_MATCHERS}}})",
                   instant=True, fmt=PromQueryFormat.TABLE, ref="D"),
             transformations=[transform("merge"),
                              transform("organize", excludeByName={"Time": True, "Value #A": True},
                                        renameByName={"Value #B": "compressratio", "Value #C": "logical used",
                                                      "Value #D": "used"})],
             overrides=[("compressratio", unit_override("x"))]),
        row("Before / after a change"),
        before_after("Compression ratio before / after", "Average compressratio of each dataset (what it holds, "
                     "so it moves slowly after a compression change: only new writes use the new setting).", "x",
                     f"avg_over_time(zfs_dataset_compressratio{{{DATASET_MATCHERS}}}[RANGE]OFFSET)",
                     "nas, instance, pool, dataset", "{{dataset}}", min_val=1),
        before_after("Write rate before / after", "Average bytes per second written into each dataset.", "Bps",
                     f"increase(zfs_dataset_written_bytes_total{{{DATASET_MATCHERS}}}[RANGE]OFFSET) / $__range_s",
                     "nas, instance, pool, dataset", "{{dataset}}"),
        row("Snapshots"),
        bars("Snapshots per dataset", "Number of snapshots of each dataset (zfs list -t snapshot, counted on the "
             "exporter's --datasets.snapshot-interval).", "none",
             query(f"zfs_dataset_snapshots{{{DATASET_MATCHERS}}}", "{{dataset}}", instant=True)),
        bars("Newest snapshot age", "Time since the newest snapshot of each dataset that has one; datasets "
             "without snapshots are not listed. Orange past snapshot_max_age_days: ZfsDatasetSnapshotsStopped "
             "waits longer for datasets with a slower schedule (1.5 times their longest gap, or their "
             "[[snapshot_schedule]] in alerts/thresholds.toml).", "s",
             query(f"time() - zfs_dataset_newest_snapshot_timestamp_seconds{{{DATASET_MATCHERS}}}", "{{dataset}}", instant=True),
             steps=((None, "green"), (SHARED["snapshot_max_age_days"] * 86400, "orange"))),
        row("I/O"),
        series("Write rate", "Bytes written per second into each dataset.", "Bps",
               query(f"rate(zfs_dataset_written_bytes_total{{{DATASET_MATCHERS}}}[{RI}])", "{{dataset}}")),
        series("Read rate", "Bytes read per second from each dataset (ARC hits included).", "Bps",
               query(f"rate(zfs_dataset_read_bytes_total{{{DATASET_MATCHERS}}}[{RI}])", "{{dataset}}")),
        series("Write and read operations", "Write and read calls per second per dataset.", "ops",
               query(f"rate(zfs_dataset_writes_total{{{DATASET_MATCHERS}}}[{RI}])", "{{dataset}} writes"),
               query(f"rate(zfs_dataset_reads_total{{{DATASET_MATCHERS}}}[{RI}])", "{{dataset}} reads")),
        series("Average write size", "Bytes per write call: small writes on a large recordsize cost "
               "read-modify-write.", "bytes",
               query(f"rate(zfs_dataset_written_bytes_total{{{DATASET_MATCHERS}}}[{RI}]) / rate(zfs_dataset_writes_total"
                     f"{{{DATASET_MATCHERS}}}[{RI}])", "{{dataset}}")),
    ])


def per_disk(expr: str) -> str:
    """A per-device expression labelled by serial, pool and vdev through zfs_disk_info; a disk in no
    pool or without a serial reads "(no pool)" / "(no serial)" (a legend's missing label would read
    as its name)."""
    return with_disk_names(f"({expr}) * on (nas, instance, device) group_left (serial, model, pool, vdev_guid) "
                           f"max by (nas, instance, device, serial, model, pool, vdev_guid) ({DISK_INFO})")


def with_disk_names(expr: str) -> str:
    """`expr` with an empty pool or serial reading "(no pool)" / "(no serial)" (a spare; a USB stick)."""
    for label, missing in (("pool", "(no pool)"), ("serial", "(no serial)")):
        expr = f'label_replace({expr}, "{label}", "{missing}", "{label}", "")'
    return expr


# The SMART families of the selected disks; every one carries zfs_disk_info's device, serial, pool, vdev_guid.
SMART = f'{NAS_MATCHERS}, pool=~"$pool", device=~"$disk"'
SMART_POOL = f'{POOL_MATCHERS}, pool!=""'   # a pool's disks, on a dashboard without a disk variable

DISK_KEY = "nas, instance, device, serial, pool, vdev_guid"
ASLEEP = f'(zfs_disk_smart_state{{{SMART}, state="standby"}} == 1)'
# Columns of the health table after its per-query values: (query value, column, unit).
HEALTH_COLUMNS = (("C", "temperature", "celsius"), ("D", "power-on hours", "h"), ("E", "reallocated", "none"),
                  ("F", "pending", "none"), ("G", "offline uncorrectable", "none"), ("H", "CRC errors", "none"),
                  ("I", "NVMe media errors", "none"), ("K", "self-test age", "s"), ("M", "limit", "celsius"),
                  ("N", "of limit", "percentunit"))
# What a disk is held to (recording rule, the alert's limit: an SSD's own, else its kind's in
# alerts/thresholds.toml), and its temperature against that limit, orange from this share of it, red at the limit.
TEMPERATURE_LIMIT = "device:zfs_disk_temperature_limit:celsius"
NEAR_LIMIT = 0.9
LIMIT_STEPS = ((None, "green"), (NEAR_LIMIT, "orange"), (1, "red"))


def cell_colours(*steps: tuple[float | None, str]) -> list[model.DynamicConfigValue]:
    return [model.DynamicConfigValue(id_val="thresholds", value={"mode": "absolute", "steps": [
                {"value": v, "color": c} for v, c in steps]}),
            model.DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-background"})]


def temperature_of_limit(matchers: str) -> str:
    """Each awake disk's temperature over its limit (a sleeping disk's last value is not its temperature now)."""
    return (f"max by ({DISK_KEY}) (zfs_disk_smart_temperature_celsius{{{matchers}}} unless on (nas, instance, "
            f"device, serial) (zfs_disk_smart_state{{{matchers}, state=\"standby\"}} == 1)) / on (nas, instance, "
            f"device, serial) group_left () max by ({DISK_KEY}) ({TEMPERATURE_LIMIT}{{{matchers}}})")


def self_test_colours() -> list[model.DynamicConfigValue]:
    """Self-tests older than the alert's limit in orange, but only once the alert is on: while it
    waits in thresholds.toml's [opt_in] table its age is no warning, just a number."""
    if "smart_self_test_max_age_days" in SHARED:
        return cell_colours((None, "green"), (SHARED["smart_self_test_max_age_days"] * 86400, "orange"))
    return []


def health_table():
    """One row per disk from SMART: its health (the zfsnas.disk_health rules), state, model,
    temperature against its limit, hours, the counters that predict failure and its newest
    self-test, merged on the disk's labels; the vdev (parent in zpool status) through vdev_guid.
    Columns a disk lacks (NVMe has no pending sectors) stay empty."""
    # a vdev's parent in the tree; a hot spare in use is listed twice (under spare-N, and INUSE in
    # the spares list): its place in the tree wins
    parents = "max by (nas, instance, pool, vdev_guid, parent) (zfs_vdev_state{{role{}\"spare\", {}}})"
    in_tree, spares = parents.format("!=", POOL_MATCHERS), parents.format("=", POOL_MATCHERS)
    def per(expr: str) -> str:
        return f"max by ({DISK_KEY}) ({expr})"

    newest_test = (f"zfs_disk_smart_self_test_info{{{SMART}}} and on (nas, instance, device, serial, type) "
                   f"bottomk by (nas, instance, device, serial) (1, zfs_disk_smart_self_test_age_seconds{{{SMART}}})")
    exprs = {
        "A": f"max by ({DISK_KEY}, state) (zfs_disk_smart_state{{{SMART}}} == 1)",
        "B": f"max by ({DISK_KEY}, model, media) (zfs_disk_smart_info{{{SMART}}})",
        "C": per(f"zfs_disk_smart_temperature_celsius{{{SMART}}}"),
        "D": per(f"zfs_disk_smart_power_on_seconds_total{{{SMART}}} / 3600"),
        "E": per(f"zfs_disk_smart_reallocated_sectors{{{SMART}}} or zfs_disk_smart_grown_defects{{{SMART}}}"),
        "F": per(f"zfs_disk_smart_pending_sectors{{{SMART}}}"),
        "G": per(f"zfs_disk_smart_offline_uncorrectable_sectors{{{SMART}}}"),
        "H": per(f"zfs_disk_smart_udma_crc_errors_total{{{SMART}}}"),
        "I": per(f"zfs_disk_smart_nvme_media_errors_total{{{SMART}}}"),
        "J": f"max by ({DISK_KEY}, type, result) ({newest_test})",
        "K": f"min by ({DISK_KEY}) (zfs_disk_smart_self_test_age_seconds{{{SMART}}})",
        # every disk, with the parent of its vdev where zpool status (the pools collector) knows it
        "L": (f"max by ({DISK_KEY}, parent) ((zfs_disk_smart_state{{{SMART}}} == 1) * on (nas, instance, pool, vdev_guid) "
              f"group_left (parent) ({in_tree} or on (nas, instance, pool, vdev_guid) {spares}) "
              f"or on (nas, instance, device, serial) (zfs_disk_smart_state{{{SMART}}} == 1))"),
        "M": per(f"{TEMPERATURE_LIMIT}{{{SMART}}}"),
        "N": temperature_of_limit(SMART),
        "O": f"max by ({DISK_KEY}, health) (device:zfs_disk_health:state{{{SMART}}})",
    }
    renames = {f"Value #{ref}": name for ref, name, _ in HEALTH_COLUMNS}
    renames.update({"parent": "vdev", "type": "last self-test", "result": "result"})
    hidden = {"Time": True, "nas": True, "Value #A": True, "Value #B": True, "Value #J": True, "Value #L": True,
              "Value #O": True}
    order = ["instance", "pool", "vdev", "serial", "device", "model", "media", "health", "state", "temperature", "limit",
             "of limit", "power-on hours", "reallocated", "pending", "offline uncorrectable", "CRC errors",
             "NVMe media errors", "last self-test", "result", "self-test age", "vdev_guid"]
    overrides = [(name, unit_override(unit)) for _, name, unit in HEALTH_COLUMNS]
    overrides += [("of limit", unit_override("percentunit") + cell_colours(*LIMIT_STEPS)),
                  ("self-test age", unit_override("s") + self_test_colours()),
                  ("health", [model.DynamicConfigValue(id_val="mappings", value=[{"type": "value", "options": {
                      "healthy": {"color": "green", "index": 0}, "warning": {"color": "orange", "index": 1},
                      "failing": {"color": "red", "index": 2}}}])] + cell_colours((None, "text"))[1:])]
    return grid("Disk health", "SMART of every disk of the selected pools (smart collector, read every "
                "--smart.interval): its health from SMART and zpool status together (Disk problems says why), "
                "state (standby = asleep and not woken: its values are from the last read), temperature against "
                f"its limit ({LIMIT_WORDS}; orange from {NEAR_LIMIT:.0%} of it), power-on hours, the counters that predict failure "
                "(reallocated: ATA attribute 5, or SAS grown defects; pending, offline uncorrectable; CRC errors are "
                "cabling) and the newest self-test with its age in the drive's power-on time (coloured only once "
                "ZfsDiskSelfTestOverdue is enabled: it is opt-in).", "none",
                *[query(expr, instant=True, fmt=PromQueryFormat.TABLE, ref=ref) for ref, expr in exprs.items()],
                transformations=[transform("merge"),
                                 transform("organize", excludeByName=hidden, renameByName=renames,
                                           indexByName={name: n for n, name in enumerate(order)}),
                                 transform("sortBy", sort=[{"field": "pool"}, {"field": "vdev"}, {"field": "serial"}])],
                overrides=overrides, height=9) \
        .no_value("No SMART data: \"SMART\" above says why (the smart collector off, smartctl missing or older than "
                  "7.0, no raw disk access in a container: docs/disks.md#smart).")


# The reasons the smart collector serves in zfs_disk_smart_unavailable, in words with what to do; a
# reason not listed here shows as the exporter spells it.
SMART_UNAVAILABLE = {
    "smartctl_missing": "smartctl missing: install smartmontools 7.0 or later on the host",
    "permission_denied": "smartctl may not open the disks (permission denied): docs/disks.md#smart",
    "smartctl_too_old": "smartctl too old (no --json): install smartmontools 7.0 or later",
}


def smart_unavailable(unavailable: str) -> str:
    expr = f"max by (nas, instance, reason) ({unavailable})"
    for reason, words in SMART_UNAVAILABLE.items():
        expr = f'label_replace({expr}, "reason", "{words}", "reason", "{reason}")'
    return expr


def smart_status():
    """Per exporter, whether SMART reads the disks, and why not: the reason the smart collector
    serves (zfs_disk_smart_unavailable), a failing collector, or no smart collector at all."""
    collectors = f"zfs_exporter_collector_success{{{NAS_MATCHERS}}}"
    smart = f'zfs_exporter_collector_success{{{NAS_MATCHERS}, collector="smart"}}'
    unavailable = f"zfs_disk_smart_unavailable{{{NAS_MATCHERS}}} == 1"
    reasons = [
        (smart_unavailable(unavailable), None),
        (f"max by (nas, instance) ({smart} == 0) * 0 + 1 unless on (nas, instance) ({unavailable})",
         "the smart collector fails: see the exporter's log"),
        (f"max by (nas, instance) ({collectors}) * 0 + 1 unless on (nas, instance) {smart}",
         "no smart collector (--no-collector.smart, or an exporter without it)"),
        (f"count by (nas, instance) (zfs_disk_smart_state{{{NAS_MATCHERS}}} == 1) * 0 "
         f"and on (nas, instance) ({smart} == 1) unless on (nas, instance) ({unavailable})", "reading the disks"),
    ]
    exprs = [expr if reason is None else f'label_replace({expr}, "reason", "{reason}", "", "")' for expr, reason in reasons]
    panel = single("SMART", "Whether the smart collector reads the disks of each NAS, and if not why (red): the "
                   "reason it serves in zfs_disk_smart_unavailable (smartctl missing, permission denied: no raw "
                   "disk access, smartctl too old), a failing collector, or none running. docs/disks.md#smart says "
                   "how to turn SMART on.", "none",
                   query(" or ".join(f"({e})" for e in exprs), "SMART: {{reason}}", instant=True),
                   width=24, height=3, steps=((None, "green"), (1, "red")))
    return panel.text_mode(common.BigValueTextMode.NAME).no_value("No exporter selected")


def disk_problems():
    return grid("Disk problems", "What makes a disk of the selected pools a warning or failing (recording rule "
                "device:zfs_disk_problem:info, from SMART and zpool status): one row per problem.", "none",
                query(f"max by ({DISK_KEY}, severity, problem) (device:zfs_disk_problem:info{{{SMART}}})",
                      instant=True, fmt=PromQueryFormat.TABLE),
                transformations=[transform("organize", excludeByName={"Time": True, "Value": True, "nas": True}),
                                 transform("sortBy", sort=[{"field": "severity"}, {"field": "pool"}])],
                width=24, height=5).no_value("No disk of the selected pools has a problem.")


# SMART counters drawn over time per disk: (title, metric, what a rise means)
SMART_TRENDS = (("Pending sectors", "zfs_disk_smart_pending_sectors", "unreadable sectors waiting to be remapped"),
                ("Reallocated sectors", "zfs_disk_smart_reallocated_sectors", "sectors remapped to spares"),
                ("CRC errors", "zfs_disk_smart_udma_crc_errors_total", "transfer errors: the cable or port"),
                ("NVMe media errors", "zfs_disk_smart_nvme_media_errors_total", "unrecovered data errors"))


def smart_trends() -> list:
    legend = "{{pool}} {{serial}} ({{device}})"
    return [series(f"{title} over time", f"SMART {metric} per disk ({meaning}): a line that climbs is a disk "
                   "failing, a flat line a disk that had its trouble once.", "none",
                   query(with_disk_names(f"max by (nas, instance, device, serial, pool) ({metric}{{{SMART}}})"),
                         legend), width=6)
            .no_value("No disk of the selected pools reports it (SMART off, or no such disk)")
            for title, metric, meaning in SMART_TRENDS]


def disks() -> Board:
    dev = f'{NAS_MATCHERS}, device=~"$disk"'
    legend = "{{pool}} {{serial}} ({{device}})"
    return Board("disks", "ZFS / Disks", "Throughput, IOPS, latency and utilisation of every physical disk, "
                 "labelled by serial and grouped by pool and vdev, and vdev latency histograms.",
                 variables="disk", panels=[
        grid("Disks", "Every disk of the selected pools with its identity and place in the pool.", "none",
             query(DISK_INFO, instant=True, fmt=PromQueryFormat.TABLE),
             transformations=[transform("organize", excludeByName={"Time": True, "Value": True, "__name__": True})],
             height=6),
        grid("Vdev tree", "Every vdev of the selected pools with its parent, role and state (zpool status), "
             "sorted by pool and parent: the disks above join it through vdev_guid.", "none",
             query(f"max by (nas, instance, pool, parent, vdev, vdev_guid, role, state) (zfs_vdev_state{{{POOL_MATCHERS}}})",
                   instant=True, fmt=PromQueryFormat.TABLE),
             transformations=[transform("organize", excludeByName={"Time": True, "Value": True}),
                              transform("sortBy", sort=[{"field": "pool"}, {"field": "parent"}])],
             width=12, height=8),
        grid("Vdev errors", "Read, write and checksum errors of every vdev since import or zpool clear.", "none",
             query(f"max by (nas, instance, pool, vdev, type) (zfs_vdev_errors{{{POOL_MATCHERS}}})", instant=True,
                   fmt=PromQueryFormat.TABLE),
             transformations=[transform("organize", excludeByName={"Time": True}, renameByName={"Value": "errors"}),
                              transform("sortBy", sort=[{"field": "errors", "desc": True}])],
             width=12, height=8),
        row("Health (smart collector)"),
        smart_status(),
        health_table(),
        disk_problems(),
        *smart_trends(),
        series("Temperature by pool", "Hottest and average disk temperature of each pool over time (SMART, read "
               f"every --smart.interval); disks asleep are left out (their last value is not their temperature now). "
               f"ZfsDiskTemperatureHigh: {SHARED['disk_temperature_hdd_max']} °C for disks that spin, "
               f"{SHARED['disk_temperature_ssd_max']} °C for SSDs, for 30 minutes.", "celsius",
               query(f'max by (nas, instance, pool) (zfs_disk_smart_temperature_celsius{{{SMART}, pool!=""}} '
                     f"unless on (nas, instance, device, serial) {ASLEEP})", "{{pool}} hottest"),
               query(f'avg by (nas, instance, pool) (zfs_disk_smart_temperature_celsius{{{SMART}, pool!=""}} '
                     f"unless on (nas, instance, device, serial) {ASLEEP})", "{{pool}} average"),
               width=24, min_val=None),
        row("Per disk"),
        series("Read throughput", "Bytes read per second per disk.", "Bps",
               query(per_disk(f"rate(zfs_disk_read_bytes_total{{{dev}}}[{RI}])"), legend)),
        series("Write throughput", "Bytes written per second per disk.", "Bps",
               query(per_disk(f"rate(zfs_disk_written_bytes_total{{{dev}}}[{RI}])"), legend)),
        series("IOPS", "Completed reads and writes per second per disk.", "iops",
               query(per_disk(f"rate(zfs_disk_reads_total{{{dev}}}[{RI}])"), legend + " read"),
               query(per_disk(f"rate(zfs_disk_writes_total{{{dev}}}[{RI}])"), legend + " write")),
        series("Average latency", "Time per completed I/O (time spent on reads and writes divided by their "
               "count).", "s",
               query(per_disk(f"rate(zfs_disk_read_time_seconds_total{{{dev}}}[{RI}]) / "
                              f"rate(zfs_disk_reads_total{{{dev}}}[{RI}])"), legend + " read"),
               query(per_disk(f"rate(zfs_disk_write_time_seconds_total{{{dev}}}[{RI}]) / "
                              f"rate(zfs_disk_writes_total{{{dev}}}[{RI}])"), legend + " write")),
        series("Utilisation", "Share of time each disk was busy (io_time); near 100 % the disk is saturated.",
               "percentunit", query(per_disk(f"rate(zfs_disk_io_time_seconds_total{{{dev}}}[{RI}])"), legend),
               max_val=1),
        row("Vdev latency (vdevlatency collector)"),
        *[heat(f"Vdev {io} latency", f"Total wait (queue + disk) of {io}s on the selected pools as a whole, from "
               "zpool iostat -w: each pool's root vdev only, so no I/O is counted twice through a vdev and its "
               "disks. Per vdev: the operations panel below.", "s",
               "sum by (le) ("
               + root_vdevs(f'rate(zfs_vdev_latency_seconds_bucket{{{POOL_MATCHERS}, type="total_wait", io="{io}"}}[{RI}])')
               + ")") for io in ("read", "write")],
        series("Vdev operations", "Reads and writes per second of each selected vdev (variable Vdev), one line "
               "each, from the count of the latency histograms: which vdev and disk does the work.", "ops",
               query(f"sum by (nas, instance, pool, vdev, io) (rate(zfs_vdev_latency_seconds_count{{{VDEV}, "
                     f'type="total_wait"}}[{RI}]))', "{{pool}} {{vdev}} {{io}}"), width=24),
    ])


BENCH_KEY = f"nas, instance, pool, {BENCH_CONFIG}"
BENCH_LEGEND = "{{pool}} {{matrix}}/{{workload}} {{compression}} rs={{recordsize}} enc={{encryption}} {{size}} [{{config}}]"
PER_RUN = f"config:zfs_bench_throughput:per_run{{{BENCH}}}"
NO_RUNS = ("No benchmark result: zfsnas-bench has stored none in the database the exporter reads (--bench.db), "
           "or the bench collector is off")


def bench_verdict() -> str:
    """ZfsBenchThroughputRegression's verdict on each configuration's latest run, in words (a label),
    without its age limit: the value is the ratio to the previous median (the runs where too few)."""
    ratio = f"max by ({BENCH_KEY}) (config:zfs_bench_throughput_vs_previous_median:ratio{{{BENCH}}})"
    runs = f"max by ({BENCH_KEY}) (zfs_bench_runs_total{{{BENCH}}})"
    enough = f"{runs} > scalar(zfsnas:bench_regression_min_previous_runs:threshold)"
    low = f"{ratio} <= 1 - scalar(zfsnas:bench_regression_max_drop:threshold)"
    needed = SHARED["bench_regression_min_previous_runs"] + 1
    return " or ".join(f'label_replace({expr}, "verdict", "{verdict}", "", "")' for expr, verdict in (
        (f"({low}) and on ({BENCH_KEY}) ({enough})", "regression"),
        (f"{ratio} and on ({BENCH_KEY}) ({enough})", "no regression"),
        (f"{runs} <= scalar(zfsnas:bench_regression_min_previous_runs:threshold)", f"no verdict before {needed} runs")))


def vs_previous_configuration() -> str:
    """Latest throughput of each configuration over the latest of the configuration before it."""
    latest = f"max by ({BENCH_KEY}) (zfs_bench_throughput_bytes_per_second{{{BENCH}}})"
    previous = (f'label_replace(max by (nas, instance, config) (zfs_bench_throughput_bytes_per_second{{{BENCH_ANY}}}), '
                f'"previous_config", "$1", "config", "(.*)")')
    return (f"{latest} * on (nas, instance, config) group_left (previous_config) "
            f"max by (nas, instance, config, previous_config) (zfs_bench_config_change_info{{{BENCH}}}) "
            f"/ on (nas, instance, previous_config) group_left () {previous}")


def history_table():
    b, by = BENCH, BENCH_KEY
    columns = (
        ("A", "change", "none", f"max by ({by}, previous_config, change) (zfs_bench_config_change_info{{{b}}})"),
        ("B", "vs previous configuration", "percentunit", vs_previous_configuration()),
        ("C", "verdict", "percentunit", bench_verdict()),
        ("D", "latest", "Bps", f"max by ({by}) (zfs_bench_throughput_bytes_per_second{{{b}}})"),
        ("E", "median", "Bps", f"max by ({by}) (quantile_over_time(0.5, {PER_RUN}[$__range]))"),
        ("F", "lowest", "Bps", f"max by ({by}) (min_over_time({PER_RUN}[$__range]))"),
        ("G", "highest", "Bps", f"max by ({by}) (max_over_time({PER_RUN}[$__range]))"),
        ("H", "spread", "percentunit", f"max by ({by}) ((max_over_time({PER_RUN}[$__range]) - "
                                       f"min_over_time({PER_RUN}[$__range])) / quantile_over_time(0.5, {PER_RUN}[$__range]))"),
        ("I", "runs in range", "none", f"max by ({by}) (count_over_time({PER_RUN}[$__range]))"),
        ("J", "runs", "none", f"max by ({by}) (zfs_bench_runs_total{{{b}}})"),
    )
    renames = {f"Value #{ref}": name for ref, name, _, _ in columns}
    renames.update({"change": "what changed", "Value #C": "vs own median"})
    order = ["pool", "matrix", "workload", "compression", "recordsize", "encryption", "size", "config",
             "what changed", "previous_config", "vs previous configuration", "verdict", "vs own median", "latest",
             "median", "lowest", "highest", "spread", "runs in range", "runs"]
    return grid("History per configuration", "One row per configuration (its id `config`; a tuning change makes a "
                "new one): what differs from the configuration of the same cell that ran before it, in words, and "
                "its latest throughput against that one's; the regression verdict on its own runs (ZfsBench"
                f"ThroughputRegression: {SHARED['bench_regression_max_drop']:.0%} below the median of at least "
                f"{SHARED['bench_regression_min_previous_runs']} earlier runs, without the alert's age limit); and its "
                "runs in the time range (recording rule config:zfs_bench_throughput:per_run, one point per run "
                "Prometheus saw end): median, lowest, highest and their spread over the median. Empty cells: no "
                "earlier configuration of the cell, or no run in the time range.", "Bps",
                *[query(expr, instant=True, fmt=PromQueryFormat.TABLE, ref=ref) for ref, _, _, expr in columns],
                transformations=[transform("merge"), transform("organize", excludeByName={"Time": True, "Value #A": True,
                                 "nas": True}, renameByName=renames, indexByName={n: i for i, n in enumerate(order)}),
                                 transform("sortBy", sort=[{"field": "matrix"}, {"field": "workload"}])],
                overrides=[(renames[f"Value #{ref}"], unit_override(unit)) for ref, _, unit, _ in columns if ref != "A"],
                height=10).no_value(NO_RUNS)


def benchmarks() -> Board:
    b = BENCH
    cfg, by = BENCH_LEGEND, BENCH_KEY
    return Board("benchmarks", "ZFS / Benchmarks", "fio runs of the benchmark runner compared across "
                 "configurations and over time; each run is an annotation region. A configuration (`config`) is "
                 "everything that shapes a result, pool layout and module parameters included: two series "
                 "compare only when their ids match.", variables="bench",
                 time_from="now-30d", panels=[  # a user's runs are days or weeks apart
        history_table(),
        series("Runs over time", "Throughput of every run Prometheus saw end, one point per run, per configuration "
               "(recording rule config:zfs_bench_throughput:per_run).", "Bps",
               query(f"max by ({by}) ({PER_RUN})", cfg), height=9, width=24)
        .draw_style(common.GraphDrawStyle.POINTS).point_size(8)
        .no_value("No run ended in the time range while Prometheus watched (runs stored before it ran are in "
                  "\"History per configuration\" and \"Results\" as their latest values)"),
        series("Throughput per configuration across runs", "Write throughput of the latest run of each "
               "configuration, as it changes from run to run.", "Bps",
               query(f"max by ({by}) (zfs_bench_throughput_bytes_per_second{{{b}}})", cfg), height=9, width=24)
        .no_value(NO_RUNS),
        bars("Latest throughput per configuration", "Latest throughput of each configuration.", "Bps",
             query(f"max by ({by}) (zfs_bench_throughput_bytes_per_second{{{b}}})", cfg, instant=True))
        .no_value(NO_RUNS),
        xy("Throughput vs compression ratio", "Latest throughput (y) against the compression ratio it "
           "achieved (x), one point per configuration.",
           query(f"max by ({by}) (zfs_bench_compressratio{{{b}}})", instant=True, fmt=PromQueryFormat.TABLE),
           query(f"max by ({by}) (zfs_bench_throughput_bytes_per_second{{{b}}})", instant=True,
                 fmt=PromQueryFormat.TABLE)).no_value(NO_RUNS),
        series("CPU per configuration", "CPU busy share during the latest run of each configuration.",
               "percentunit", query(f"max by ({by}) (zfs_bench_cpu_busy_ratio{{{b}}})", cfg), max_val=1)
        .no_value(f"{NO_RUNS}; or no CPU figure (results imported from elsewhere have none)"),
        series("Latest vs previous median", "Latest throughput divided by the median of the same "
               "configuration's previous runs (the recording rule the regression alert uses); at "
               f"{1 - SHARED['bench_regression_max_drop']:.2f} or below the alert fires.", "percentunit",
               query(f"max by ({by}) (config:zfs_bench_throughput_vs_previous_median:ratio{{{b}}})", cfg))
        .no_value("No configuration has run twice yet: the ratio needs a previous run (its median) to divide by. "
                  "A tuning change starts a new configuration, so its first run has none either."),
        grid("Results", "One row per configuration, like the tables in benchmark write-ups: throughput, "
             "compression ratio, CPU, duration, previous median and number of runs.", "Bps",
             *[query(f"max by ({by}) ({metric}{{{b}}})", instant=True, fmt=PromQueryFormat.TABLE, ref=ref)
               for ref, metric in zip("ABCDEFG", ("zfs_bench_throughput_bytes_per_second", "zfs_bench_compressratio",
                                                  "zfs_bench_cpu_busy_ratio", "zfs_bench_duration_seconds",
                                                  "zfs_bench_throughput_previous_median_bytes_per_second",
                                                  "zfs_bench_runs_total", "zfs_bench_last_run_timestamp_seconds"))],
             transformations=[transform("merge"), transform("organize", excludeByName={"Time": True}, renameByName={
                 "Value #A": "throughput", "Value #B": "compressratio", "Value #C": "CPU busy",
                 "Value #D": "duration", "Value #E": "previous median", "Value #F": "runs",
                 "Value #G": "last run"})],
             overrides=[("compressratio", unit_override("x")), ("CPU busy", unit_override("percentunit")),
                        ("duration", unit_override("s")), ("runs", unit_override("none")),
                        ("last run", unit_override("dateTimeAsIso"))], height=10).no_value(NO_RUNS),
    ])


# --- the Changes view ------------------------------------------------------------------------------

# Changes of the selected NAS; a module parameter's is the whole NAS's, so it shows whichever pools
# are selected (it has no pool label: the empty pool matches too).
CHANGE_MATCHERS = f'{NAS_MATCHERS}, pool=~"$pool|"'
TOO_LITTLE = "too little activity"


def too_little_activity() -> list:
    """NaN, which the zfsnas.changes rules record for a window with too little activity, in words."""
    return [model.SpecialValueMap(options=model.DashboardSpecialValueMapOptions(
        match=model.SpecialValueMatch.NA_N, result=model.ValueMappingResult(text=TOO_LITTLE, color="text")))]


def windows_text() -> str:
    s = CHANGE_SETTINGS
    return (f"Before: the {s.window_minutes} minutes that end {s.gap_minutes} minutes before the change was seen; "
            f"after: the {s.window_minutes} minutes from the change on (the value so far while they run). Both are "
            f"sums over 1-minute steps; a side with less than {SHARED['change_min_active_minutes']} minutes of "
            f"the signal's activity reads \"{TOO_LITTLE}\" (alerts/thresholds.toml: change_window_minutes, "
            "change_min_active_minutes). Recording rules zfsnas.changes; docs/changes.md.")


def signal_value(side: str, signal) -> str:
    """One side of one signal for every change, without the `signal` label: the rows of the table merge."""
    return f'max without (signal) (change:zfs_signal:{side}{{{CHANGE_MATCHERS}, signal="{signal.name}"}})'


def table_query(expr: str, ref: str) -> prometheus.Dataquery:
    return query(with_nas_in_instance(expr), instant=True, fmt=PromQueryFormat.TABLE, ref=ref)


def changes_table():
    signal_columns = [(f"{signal.column} {side}", signal.unit, signal_value(side, signal))
                      for signal in CHANGES.SIGNALS for side in ("before", "after")]
    columns = [("when", "dateTimeAsIso", f"max without () (change:zfs_config:timestamp_seconds{{{CHANGE_MATCHERS}}}) * 1000"),
               ("after window", "percentunit",
                f"max without () (change:zfs_config:after_window_elapsed_ratio{{{CHANGE_MATCHERS}}})"),
               *signal_columns]
    refs = [chr(ord("A") + n) for n in range(len(columns))]
    renames = {f"Value #{ref}": name for ref, (name, _, _) in zip(refs, columns)}
    renames.update({"from": "old", "to": "new"})
    hidden = {"Time": True, "nas": True, "job": True, "at": True, "name": True, "dataset": True, "property": True}
    order = ["when", "instance", "kind", "what", "old", "new", "pool", "after window",
             *[name for name, _, _ in signal_columns]]
    signals = "; ".join(f"{signal.column}: {signal.meaning} (activity: {signal.activity})" for signal in CHANGES.SIGNALS)
    return grid("Changes", "Every module parameter and I/O property of a dataset (compression, recordsize, sync, "
                "logbias, primarycache, secondarycache, atime, dedup, special_small_blocks) that changed in the last "
                f"{CHANGE_SETTINGS.memory_days} days, newest first: when it was seen, old -> new as the kernel and "
                "`zfs get -p` print them, how much of the after window has passed, and beside it each signal before "
                "and after. A module parameter counts for the whole NAS (its pools together), a dataset's "
                f"property for its pool (compression of new data: the dataset itself). {windows_text()} {signals}.",
                "none", *[table_query(expr, ref) for ref, (_, _, expr) in zip(refs, columns)],
                transformations=[transform("merge"),
                                 transform("organize", excludeByName=hidden, renameByName=renames,
                                           indexByName={name: n for n, name in enumerate(order)}),
                                 transform("sortBy", sort=[{"field": "when", "desc": True}])],
                overrides=[(name, unit_override(unit)) for name, unit, _ in columns], height=12) \
        .mappings(too_little_activity()) \
        .no_value(f"No module parameter or dataset property changed in the last {CHANGE_SETTINGS.memory_days} days "
                  "(or since Prometheus loaded the zfsnas.changes rules).")


# The newest changes of each NAS (two parameters set at once are both the newest).
LATEST_CHANGE = (f"change:zfs_config:timestamp_seconds{{{CHANGE_MATCHERS}}} == on (nas, instance) group_left () "
                 f"max by (nas, instance) (change:zfs_config:timestamp_seconds{{{CHANGE_MATCHERS}}})")


def latest_change_bars(signal):
    return bars(f"{signal.title}: the latest change", f"{signal.meaning[0].upper()}{signal.meaning[1:]}, before "
                f"and after the newest change of each NAS. {windows_text()}", signal.unit,
                *[query(f"{signal_value(side, signal)} and on (nas, instance, what, at) ({LATEST_CHANGE})",
                        f"{{{{what}}}} {{{{from}}}} -> {{{{to}}}} {side}", instant=True)
                  for side in ("before", "after")], width=8, height=6, min_val=None) \
        .mappings(too_little_activity()).no_value("No change seen yet: the table above lists every change.")


def changes() -> Board:
    s = CHANGE_SETTINGS
    return Board("changes", "ZFS / Changes", f"What each module-parameter and dataset-property change did: the "
                 f"write path, latency, ARC and compression over the {s.window_minutes} minutes before and after "
                 "it, from recording rules, without setting a time range.", panels=[
        row(f"Every change, before / after ({s.window_minutes} min each)"),
        changes_table(),
        row(f"The latest change, before / after ({s.window_minutes} min each)"),
        *[latest_change_bars(signal) for signal in CHANGES.SIGNALS],
    ])


BOARDS = {"overview": overview, "arc": arc, "write-path": write_path, "datasets": datasets, "disks": disks,
          "benchmarks": benchmarks, "changes": changes}


def render() -> dict[str, str]:
    """{file name: JSON text} of every dashboard."""
    return {f"{key}.json": json.dumps(build().build(), indent=2, sort_keys=True) + "\n" for key, build in BOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed file differs")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    stale = []
    for name, text in render().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}: run dashboards/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
