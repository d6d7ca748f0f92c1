"""Values of panels on known input, computed by Prometheus's own engine (promtool test rules with
the panel's query as Grafana sends it, every variable on All and $__rate_interval = 5m)."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.dashboards.queries import SUBSTITUTIONS, load, panels

NODE = 'instance="nas", job="node"'
RULES = Path(__file__).resolve().parents[2] / "alerts" / "zfsnas.rules.yml"


def panel_queries(dashboard: str, title: str, **grafana: str) -> list[str]:
    """The panel's queries with every variable on All, $__rate_interval = 5m and `grafana` overrides
    (`__range="1h"`)."""
    panel = next(p for p in panels(load(dashboard)) if p["title"] == title)
    values = {**SUBSTITUTIONS, "$__rate_interval": "5m"}
    values.update({f"${name}": value for name, value in grafana.items()})
    out = []
    for target in panel["targets"]:
        expr = target["expr"]
        for name, value in values.items():
            expr = expr.replace(name, value)
        out.append(expr)
    return out


def promtool_eval(tmp_path, series: dict[str, str], checks: list[tuple[str, list[tuple[str, float]]]],
                  eval_time: str = "10m", interval: str = "1m", rules: bool = False) -> None:
    """Fails unless every (expr, [(labels, value)]) holds at eval_time on the input series, sampled
    every `interval`; with `rules`, the recording rules of alerts/zfsnas.rules.yml are evaluated
    as well (panels that read them), every `interval`, group by group in file order."""
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed: run ./dev test")
    (tmp_path / "empty.rules.yml").write_text("groups: []\n")
    rule_file = RULES if rules else tmp_path / "empty.rules.yml"
    order = [g["name"] for g in yaml.safe_load(rule_file.read_text())["groups"]]
    test = {"rule_files": [str(rule_file)], "evaluation_interval": interval, "group_eval_order": order, "tests": [{
        "interval": interval,
        "input_series": [{"series": name, "values": values} for name, values in series.items()],
        "promql_expr_test": [{"expr": expr, "eval_time": eval_time,
                              "exp_samples": [{"labels": labels, "value": value} for labels, value in samples]}
                             for expr, samples in checks]}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def cpu_series(idle: float, iowait: float, user: float, system: float, cpus: int = 4) -> dict[str, str]:
    """node_cpu_seconds_total of `cpus` CPUs, each spending these shares of every second per mode."""
    return {f'node_cpu_seconds_total{{{NODE}, cpu="{cpu}", mode="{mode}"}}': f"0+{60 * share}x20"
            for cpu in range(cpus) for mode, share in
            (("idle", idle), ("iowait", iowait), ("user", user), ("system", system))}


def test_cpu_panel_on_four_idle_cpus_reads_zero(tmp_path):
    """The issue's case: the old average of idle and iowait series showed 50 % busy here."""
    busy, modes = panel_queries("write-path", "CPU busy and iowait")
    promtool_eval(tmp_path, cpu_series(idle=1.0, iowait=0.0, user=0.0, system=0.0), [
        (busy, [('{instance="nas"}', 0.0)]),
        (modes, [('{instance="nas", mode="iowait"}', 0.0), ('{instance="nas", mode="user"}', 0.0),
                 ('{instance="nas", mode="system"}', 0.0)])])


def test_cpu_panel_adds_idle_and_iowait_and_shows_modes_apart(tmp_path):
    busy, modes = panel_queries("write-path", "CPU busy and iowait")
    # Binary fractions: promtool compares values exactly.
    promtool_eval(tmp_path, cpu_series(idle=0.5, iowait=0.125, user=0.25, system=0.125), [
        (busy, [('{instance="nas"}', 0.375)]),
        (modes, [('{instance="nas", mode="iowait"}', 0.125), ('{instance="nas", mode="user"}', 0.25),
                 ('{instance="nas", mode="system"}', 0.125)])])


def test_alerts_firing_counts_only_our_problems(tmp_path):
    (expr,) = panel_queries("overview", "Alerts firing")
    alerts = {
        'ALERTS{alertname="ZfsPoolNotOnline", alertstate="firing", instance="nas", pool="tank", severity="critical"}': "1x20",
        'ALERTS{alertname="ZfsVdevErrors", alertstate="firing", instance="nas", pool="tank", type="read"}': "1x20",
        'ALERTS{alertname="ZfsDiskSaturated", alertstate="pending", instance="nas", device="sda"}': "1x20",
        'ALERTS{alertname="ZfsWatchdog", alertstate="firing", severity="none"}': "1x20",
        'ALERTS{alertname="NodeFilesystemAlmostFull", alertstate="firing", instance="nas"}': "1x20",
        'ALERTS{alertname="Watchdog", alertstate="firing"}': "1x20",
    }
    promtool_eval(tmp_path, alerts, [(expr, [("{}", 2)])])


def test_vdev_heatmap_counts_each_io_once(tmp_path):
    """tank's root vdev saw 10 reads/s; its raidz2-0 the same 10, its two disks 5 each; backup's root
    4: with pool and vdev on All the heatmap holds 14 reads/s, not 34."""
    read, write = panel_queries("disks", "Vdev read latency"), panel_queries("disks", "Vdev write latency")
    series = {}
    for pool, vdev, per_second in (("tank", "tank", 10), ("tank", "raidz2-0", 10), ("tank", "/dev/sda1", 5),
                                   ("tank", "/dev/sdb1", 5), ("backup", "backup", 4)):
        for le in ("0.001", "+Inf"):
            name = (f'zfs_vdev_latency_seconds_bucket{{instance="nas", job="zfsnas", pool="{pool}", vdev="{vdev}", '
                    f'type="total_wait", io="read", le="{le}"}}')
            series[name] = f"0+{60 * per_second}x20"
    promtool_eval(tmp_path, series, [(read[0], [('{le="0.001"}', 14), ('{le="+Inf"}', 14)]), (write[0], [])])


def test_before_after_compares_the_range_with_the_period_before(tmp_path):
    """tank wrote 100 MB/s for an hour, then 200 MB/s (a change at 60 m); backup 50 MB/s all along.
    With the time range 60 m .. 120 m ($__range = 1h) the bars read before 100, after 200 MB/s."""
    before, after = panel_queries("write-path", "Pool write throughput before / after", __range_s="3600",
                                  __range="1h")
    series = {'zfs_pool_txg_written_bytes_total{instance="nas", job="zfsnas", pool="tank"}':
              "0+6000000000x60 372000000000+12000000000x59",
              'zfs_pool_txg_written_bytes_total{instance="nas", job="zfsnas", pool="backup"}': "0+3000000000x120"}
    promtool_eval(tmp_path, series, [
        (before, [('{instance="nas", pool="tank"}', 100e6), ('{instance="nas", pool="backup"}', 50e6)]),
        (after, [('{instance="nas", pool="tank"}', 200e6), ('{instance="nas", pool="backup"}', 50e6)])],
        eval_time="120m")


def test_arc_stat_per_nas_through_an_idle_night(tmp_path):
    """The issue's case: two NAS read 100 times a second for 2 hours at 95 % hits, then nothing for 4
    hours. In the idle hours the stat showed NaN (the average of 0 / 0 ratios over NAS); now it
    shows each NAS's day, weighted by reads: 95 % for a, and for b, which ran at 50 % for its last
    busy hour, (684000 + 180000) / (720000 + 360000) = 80 %."""
    (stat,) = panel_queries("overview", "ARC hit ratio")
    idle = {f'zfs_arc_{kind}_total{{instance="{nas}", job="zfsnas"}}': values for nas, kind, values in (
        ("a", "hits", "0+28500x24 684000x60"), ("a", "misses", "0+1500x24 36000x60"),
        ("b", "hits", "0+28500x24 684000x47 699000+15000x11"), ("b", "misses", "0+1500x24 36000x47 51000+15000x11"))}
    name = '__name__="instance:zfs_arc_hit_ratio:ratio1d", job="zfsnas"'
    promtool_eval(tmp_path, idle, [(stat, [(f'{{{name}, instance="a"}}', 0.95), (f'{{{name}, instance="b"}}', 0.95)])],
                  eval_time="5h", interval="5m", rules=True)
    promtool_eval(tmp_path, idle, [(stat, [(f'{{{name}, instance="a"}}', 0.95), (f'{{{name}, instance="b"}}', 0.8)])],
                  eval_time="7h", interval="5m", rules=True)


def test_oldest_scrub_counts_cancels_and_pools_never_scrubbed(tmp_path):
    """tank: scrubbed on day 1, a scrub canceled on day 30 (the old query read the cancel as a
    scrub: 10 days at day 40); fresh: created on day 10, never scrubbed (the old query did not see
    it). At day 40 the oldest is tank's 39 days; the per-pool bars show both."""
    (oldest,) = panel_queries("overview", "Oldest scrub")
    (bars,) = panel_queries("overview", "Time since the last scrub")
    pool = 'job="zfsnas", instance="nas"'
    history = {
        f'zfs_pool_size_bytes{{{pool}, pool="tank"}}': "1e12x160",
        f'zfs_pool_scan_end_timestamp_seconds{{{pool}, pool="tank", function="scrub"}}': "86400x116 2592000x43",
        f'zfs_pool_scan_info{{{pool}, pool="tank", function="scrub", state="finished"}}': "1x116 _x44",
        f'zfs_pool_scan_info{{{pool}, pool="tank", function="scrub", state="canceled"}}': "_x117 1x43",
        f'zfs_pool_size_bytes{{{pool}, pool="fresh"}}': "_x40 1e12x120",
        f'zfs_pool_scan_info{{{pool}, pool="fresh", function="none", state="none"}}': "_x40 1x120",
    }
    name = '__name__="pool:zfs_pool_scrub_age:seconds", job="zfsnas", instance="nas"'
    promtool_eval(tmp_path, history, [(oldest, [("{}", 39 * 86400)]),
                                      (bars, [(f'{{{name}, pool="tank"}}', 39 * 86400),
                                              (f'{{{name}, pool="fresh"}}', 30 * 86400)])],
                  eval_time="40d", interval="6h", rules=True)


def test_scan_progress_quota_and_exporter_problems(tmp_path):
    """A resilver 402 GB into 10.8 TB, a dataset at 95 % of its quota, and an exporter with one
    failing collector, one stale source and one failing source beside a healthy one."""
    (progress,) = panel_queries("overview", "Scrub / resilver progress")
    (quota,) = panel_queries("datasets", "Quota used")
    (problems,) = panel_queries("overview", "Exporter problems")
    nas = 'job="zfsnas", instance="nas"'
    series = {
        f'zfs_pool_scan_issued_bytes{{{nas}, pool="tank", function="resilver"}}': "402000000000x10",
        f'zfs_pool_scan_total_bytes{{{nas}, pool="tank", function="resilver"}}': "10800000000000x10",
        f'zfs_dataset_used_bytes{{{nas}, pool="tank", dataset="tank/home"}}': "95000000000x10",
        f'zfs_dataset_quota_bytes{{{nas}, pool="tank", dataset="tank/home"}}': "100000000000x10",
        f'zfs_dataset_used_bytes{{{nas}, pool="tank", dataset="tank/media"}}': "900000000000x10",
        f'up{{{nas}}}': "1x10", 'up{job="zfsnas", instance="other"}': "1x10",
        f'zfs_exporter_collector_success{{{nas}, collector="arc"}}': "1x10",
        f'zfs_exporter_collector_success{{{nas}, collector="pools"}}': "0x10",
        f'zfs_exporter_source_success{{{nas}, source="zpool-list"}}': "0x10",
        f'zfs_exporter_source_age_seconds{{{nas}, source="zpool-list"}}': "60x10",
        f'zfs_exporter_source_success{{{nas}, source="zfs-list"}}': "1x10",
        f'zfs_exporter_source_age_seconds{{{nas}, source="zfs-list"}}': "3600x10",
        'zfs_exporter_collector_success{job="zfsnas", instance="other", collector="arc"}': "1x10",
    }
    promtool_eval(tmp_path, series, [
        (progress, [('{job="zfsnas", instance="nas", pool="tank", function="resilver"}', 402 / 10800)]),
        (quota, [('{__name__="dataset:zfs_dataset_quota_used:ratio", job="zfsnas", instance="nas", pool="tank", '
                  'dataset="tank/home", quota="quota"}', 0.95)]),
        (problems, [("{}", 3)])], eval_time="5m", rules=True)
    healthy = {name: values for name, values in series.items() if "exporter" not in name or 'instance="other"' in name}
    promtool_eval(tmp_path, healthy, [(problems, [("{}", 0)])], eval_time="5m", rules=True)
