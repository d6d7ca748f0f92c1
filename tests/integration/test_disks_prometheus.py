"""THE query of docs/disks.md against a real Prometheus: bytes written per physical disk of pool tank, by serial.

A thread plays the kernel, growing the sectors written of the fixture tree's disks at known
rates in `proc/diskstats`; Prometheus scrapes the exporter every second.
"""

import shutil
import threading
import time

import pytest

from tests.conftest import FIXTURES, free_port
from tests.integration.exporter_process import ExporterProcess
from tests.integration.prometheus import Prometheus

MiB = 1 << 20
RATES = {"sdb": 8 * MiB, "sdc": 12 * MiB, "sdd": 16 * MiB, "sda": 30 * MiB}  # sda is not in tank
SERIALS = {"sdb": "WD-WCC7K1AAAAAA", "sdc": "WD-WCC7K2BBBBBB", "sdd": "ZA1B2C3D"}
QUERY = ('sum by (serial) (rate(zfs_disk_written_bytes_total[{w}]) * on (device) group_left(serial) '
         'zfs_disk_info{{pool="tank"}})')


class DiskWriter(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.lines = [line.split() for line in path.read_text().splitlines()]
        self.stop_event = threading.Event()

    def run(self):
        last = time.monotonic()
        while not self.stop_event.wait(0.2):
            now = time.monotonic()
            for fields in self.lines:
                if fields[2] in RATES:
                    fields[9] = str(int(fields[9]) + int(RATES[fields[2]] * (now - last)) // 512)
            last = now
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(" ".join(f) + "\n" for f in self.lines))
            tmp.replace(self.path)


@pytest.fixture
def live_tree(tmp_path):
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "linux-disks", root)
    writer = DiskWriter(root / "proc" / "diskstats")
    writer.start()
    yield root
    writer.stop_event.set()
    writer.join()


def test_bytes_written_per_disk_of_tank_by_serial(live_tree, tmp_path):
    port = free_port()
    with ExporterProcess(port, "--path.procfs", str(live_tree / "proc"), "--path.sysfs", str(live_tree / "sys"),
                         "--path.udev.data", str(live_tree / "udev" / "data"), "--collector.disable-defaults",
                         "--collector.disks", log_path=tmp_path / "exporter.log") as exporter:
        exporter.wait_ready()
        prom = Prometheus(tmp_path / "prom", free_port(), [f"127.0.0.1:{port}"])
        try:
            prom.wait_for('up{job="zfsnas"} == 1')
            time.sleep(10)
            result = {r["metric"]["serial"]: float(r["value"][1]) for r in prom.query(QUERY.format(w="8s"))}
            assert set(result) == set(SERIALS.values())
            for device, serial in SERIALS.items():
                assert result[serial] == pytest.approx(RATES[device], rel=0.15), (serial, result[serial] / MiB)
        finally:
            prom.stop()
