"""A real Prometheus scrapes the exporter while the kstat tree changes; rate() gives the true write rate."""

import shutil
import threading
import time

import pytest

from tests.conftest import free_port, linux_tree
from tests.integration.exporter_process import ExporterProcess
from tests.integration.prometheus import Prometheus
from zfsnas.sources.kstat import parse_txgs

MiB = 1 << 20
RATE = 24 * MiB  # bytes per second the simulated pool writes


class TxgWriter(threading.Thread):
    """Plays the kernel: every 0.25 s a txg syncs with the bytes written since the previous one."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        rows = parse_txgs(path.read_text())
        self.header = path.read_text().splitlines()[0]
        self.committed = [r for r in rows if r.committed]
        self.next_txg = rows[-1].txg + 1
        self.stop_event = threading.Event()

    def row(self, txg, state, ndirty, nwritten, stime):
        return (f"{txg:<8} {txg * 1000:<16} {state:<5} {ndirty:<12} {0:<12} {nwritten:<12} {0:<8} {5:<8} "
                f"{1000:<12} {10:<12} {10:<12} {stime:<12}")

    def run(self):
        last = time.monotonic()
        while not self.stop_event.wait(0.25):
            now = time.monotonic()
            written = int(RATE * (now - last))
            last = now
            self.committed.append(parse_txgs(self.header + "\n" + self.row(self.next_txg, "C", written, written,
                                                                               150_000_000))[0])
            self.next_txg += 1
            ring = self.committed[-20:]  # zfs_txg_history = 22 with the syncing and open txgs
            lines = [self.header] + [self.row(t.txg, "C", t.ndirty, t.nwritten, t.stime) for t in ring]
            lines += [self.row(self.next_txg, "S", 0, 0, 0), self.row(self.next_txg + 1, "O", 0, 0, 0)]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("\n".join(lines) + "\n")
            tmp.replace(self.path)


@pytest.fixture
def live_tree(tmp_path):
    root = tmp_path / "tree"
    shutil.copytree(linux_tree("2.3.2"), root)
    writer = TxgWriter(root / "proc/spl/kstat/zfs/tank/txgs")
    writer.start()
    yield root
    writer.stop_event.set()
    writer.join()


def test_prometheus_sees_values_and_txg_rate(live_tree, tmp_path):
    port = free_port()
    with ExporterProcess(port, "--path.procfs", str(live_tree / "proc"), "--path.sysfs", str(live_tree / "sys"),
                         log_path=tmp_path / "exporter.log") as exporter:
        exporter.wait_ready()
        prom = Prometheus(tmp_path / "prom", free_port(), [f"127.0.0.1:{port}"])
        try:
            prom.wait_for('up{job="zfsnas"} == 1')
            time.sleep(12)
            assert prom.scalar("zfs_arc_size_bytes") == 11_811_160_064
            assert prom.scalar('zfs_pool_state{pool="backup",state="DEGRADED"}') == 1
            assert prom.scalar('zfs_dataset_written_bytes_total{dataset="tank/media files"}') == 73_014_444_032
            rate = prom.scalar('rate(zfs_pool_txg_written_bytes_total{pool="tank"}[8s])')
            assert rate == pytest.approx(RATE, rel=0.15), f"rate {rate / MiB:.1f} MiB/s, expected {RATE / MiB} MiB/s"
            assert prom.scalar('rate(zfs_pool_txgs_synced_total{pool="tank"}[8s])') == pytest.approx(4, rel=0.2)
            # Four txgs a second against a 20-txg ring scraped every second: none lost.
            assert prom.scalar('zfs_pool_txgs_missed_total{pool="tank"}') == 0
            # The backup pool does not change: its counters stay flat.
            assert prom.scalar('rate(zfs_pool_txg_written_bytes_total{pool="backup"}[8s])') == 0
            quantile = prom.scalar('histogram_quantile(0.5, rate(zfs_pool_txg_sync_seconds_bucket{pool="tank"}[8s]))')
            assert 0.1 < quantile <= 0.25  # every simulated txg took 0.15 s to sync
            assert prom.scalar('histogram_quantile(0.99, zfs_pool_tx_assign_seconds_bucket{pool="tank"})') > 0
            assert prom.scalar('max_over_time(zfs_exporter_collector_success{collector="txg"}[10s])') == 1
        finally:
            prom.stop()
