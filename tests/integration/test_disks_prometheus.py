"""THE query of docs/disks.md against a real Prometheus: bytes written per physical disk of pool tank, by serial.

A thread plays the kernel, growing the sectors written of the fixture tree's disks at known
rates in `proc/diskstats`; Prometheus scrapes the exporter every second.
"""

import pytest

from tests.conftest import copy_tree
from tests.integration.kernel import Ticker, ticking, write_atomically
from tests.integration.prometheus import exporter_and_prometheus

MiB = 1 << 20
RATES = {"sdb": 8 * MiB, "sdc": 12 * MiB, "sdd": 16 * MiB, "sda": 30 * MiB}  # sda is not in tank
SERIALS = {"sdb": "WD-WCC7K1AAAAAA", "sdc": "WD-WCC7K2BBBBBB", "sdd": "ZA1B2C3D"}
QUERY = ('sum by (serial) (rate(zfs_disk_written_bytes_total[{w}]) * on (device) group_left(serial) '
         'zfs_disk_info{{pool="tank"}})')


class DiskWriter(Ticker):
    """Plays the block layer: the disks' sectors written grow at RATES."""

    interval = 0.2

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.lines = [line.split() for line in path.read_text().splitlines()]

    def tick(self, elapsed):
        for fields in self.lines:
            if fields[2] in RATES:
                fields[9] = str(int(fields[9]) + int(RATES[fields[2]] * elapsed) // 512)
        write_atomically(self.path, "".join(" ".join(f) + "\n" for f in self.lines))


@pytest.fixture
def live_tree(tmp_path):
    root = copy_tree(tmp_path / "tree", version=None, disks=True)
    with ticking(DiskWriter(root / "proc" / "diskstats")):
        yield root


def test_bytes_written_per_disk_of_tank_by_serial(live_tree, tmp_path):
    with exporter_and_prometheus(tmp_path, "--path.procfs", str(live_tree / "proc"), "--path.sysfs",
                                 str(live_tree / "sys"), "--path.udev.data", str(live_tree / "udev" / "data"),
                                 "--collector.disable-defaults", "--collector.disks") as (_, prom):
        prom.wait_for_samples("zfs_disk_written_bytes_total", "10s", 9)   # the 8 s window full of scrapes
        result = {r["metric"]["serial"]: float(r["value"][1]) for r in prom.query(QUERY.format(w="8s"))}
        assert set(result) == set(SERIALS.values())
        for device, serial in SERIALS.items():
            assert result[serial] == pytest.approx(RATES[device], rel=0.15), (serial, result[serial] / MiB)
