"""Values of panels on known input, computed by Prometheus's own engine (promtool test rules with
the panel's query as Grafana sends it, every variable on All and $__rate_interval = 5m)."""

import shutil
import subprocess

import pytest
import yaml

from tests.dashboards.queries import SUBSTITUTIONS, load, panels

NODE = 'instance="nas", job="node"'


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
                  eval_time: str = "10m") -> None:
    """Fails unless every (expr, [(labels, value)]) holds at eval_time on the input series."""
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed: run ./dev test")
    (tmp_path / "empty.rules.yml").write_text("groups: []\n")
    test = {"rule_files": ["empty.rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
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
