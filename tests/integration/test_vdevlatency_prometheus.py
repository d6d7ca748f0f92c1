"""`vdevlatency` through a real Prometheus: the heatmap and quantile queries of docs/disks.md.

A stand-in `zpool` (run through `--zfs.command-prefix`) answers with the recorded OpenZFS 2.3
output whose histogram counts grow by the recorded amounts every second, as a busy pool's do.
"""

import stat
import sys
import time

import pytest

from tests.conftest import FIXTURES, linux_tree
from tests.integration.prometheus import exporter_and_prometheus

WD1 = "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1AAAAAA-part1"
FAKE_ZPOOL = """#!{python}
import sys, time
base = {base!r}
kind = sys.argv[-1][-1]
text = open(f"{{base}}/iostat-{{kind}}.txt").read()
if kind == "w":
    factor = int(time.time() - {start}) + 1
    lines = []
    for line in text.splitlines():
        fields = line.split("\\t")
        if len(fields) > 1:
            fields = fields[:1] + [str(int(f) * factor) for f in fields[1:]]
        lines.append("\\t".join(fields))
    text = "\\n".join(lines) + "\\n"
sys.stdout.write(text)
"""


def test_latency_heatmap_and_quantile(tmp_path):
    fake = tmp_path / "fake-zpool"
    fake.write_text(FAKE_ZPOOL.format(python=sys.executable, base=str(FIXTURES / "linux-disks" / "zpool-2.3.2"),
                                      start=time.time()))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    tree = linux_tree("2.3.2")
    with exporter_and_prometheus(tmp_path, "--path.procfs", str(tree / "proc"), "--path.sysfs", str(tree / "sys"),
                                 "--collector.disable-defaults", "--collector.vdevlatency",
                                 "--vdevlatency.refresh-interval", "1", "--zfs.command-prefix", str(fake),
                                 wait_up=False) as (_, prom):
        prom.wait_for_samples("zfs_vdev_latency_seconds_count", "8s", 7)   # the 6 s windows full of scrapes
        selector = f'vdev="{WD1}", type="disk_wait", io="read"'
        heatmap = prom.query(f"sum by (le) (rate(zfs_vdev_latency_seconds_bucket{{{selector}}}[6s]))")
        assert len(heatmap) == 38  # 37 power-of-two buckets and +Inf
        per_le = {r["metric"]["le"]: float(r["value"][1]) for r in heatmap}
        # The recorded counts per second; the stand-in steps once a second and the refresh samples it
        # when a busy machine lets it, so the rate over 6 s is only near the step rate.
        assert per_le["+Inf"] == pytest.approx(2 * 2280 + 2 * 2820 + 3000, rel=0.5)
        median = prom.scalar(f"histogram_quantile(0.5, sum by (le) (rate(zfs_vdev_latency_seconds_bucket{{{selector}}}[6s])))")
        assert (2 ** 18 - 1) * 1e-9 < median <= (2 ** 19 - 1) * 1e-9  # inside the hump's middle bucket
        assert prom.scalar('zfs_vdev_queue_pending{pool="tank", vdev="raidz2-0", class="sync_read"}') == 2
        assert prom.scalar('zfs_exporter_collector_success{collector="vdevlatency"}') == 1
