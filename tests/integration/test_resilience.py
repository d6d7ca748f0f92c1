"""Broken input never takes the exporter down: the affected collector says success 0, the rest serve."""

import shutil
from pathlib import Path

import pytest

from tests.conftest import copy_tree, samples, value
from tests.integration.exporter_process import ExporterProcess

KSTAT = Path("proc/spl/kstat/zfs")


def breakers():
    def truncate(path):
        path.write_text(path.read_text()[:20])

    def replace(old, new):
        return lambda path: path.write_text(path.read_text().replace(old, new, 1))

    return {
        # (file, how to break it, the collector that must fail, a metric that must survive elsewhere)
        "truncated arcstats": ("arcstats", truncate, "arc", "zfs_pool_txgs_synced_total"),
        "unknown type code": ("arcstats", replace("hits                            4", "hits                            12"),
                              "arc", "zfs_dataset_written_bytes_total"),
        "non-numeric value": ("dmu_tx",
                              replace("dmu_tx_assigned                 4    ", "dmu_tx_assigned                 4    x"),
                              "txg", "zfs_arc_size_bytes"),
        "missing header": ("tank/objset-0x104", lambda p: p.write_text("\n".join(p.read_text().splitlines()[1:])),
                           "objset", "zfs_arc_size_bytes"),
        "garbage txgs": ("tank/txgs", replace("C ", "C x y z "), "txg", "zfs_pool_state"),
        "unreadable state": ("tank/state", lambda p: p.write_text("\x00\x01"), "poolstats", "zfs_arc_hits_total"),
        "missing arcstats": ("arcstats", lambda p: p.unlink(), "arc", "zfs_pool_txgs_synced_total"),
    }


@pytest.mark.parametrize("case", sorted(breakers()))
def test_broken_file_fails_one_collector(case, tmp_path, port):
    name, breaker, failing, surviving = breakers()[case]
    root = copy_tree(tmp_path / "t")
    breaker(root / KSTAT / name)
    # Only the kstat collectors: the zfs/zpool command collectors have their own resilience tests.
    with ExporterProcess(port, "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                         "--no-collector.datasets", "--no-collector.pools", log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        text = exp.get()
        text = exp.get()  # a second scrape: still alive, still the same
        data = samples(text)
        assert value(data, "zfs_exporter_collector_success", collector=failing) == 0
        others = {dict(labels)["collector"]: v for (n, labels), v in data.items() if n == "zfs_exporter_collector_success"}
        assert all(v == 1 for c, v in others.items() if c != failing), others
        assert any(n == surviving for n, _ in data), f"{surviving} missing after breaking {name}"
        assert exp.proc.poll() is None
    log = exp.log()
    assert f"collector {failing} failed:" in log
    assert log.count(f"collector {failing} failed:") == 1, "a repeated failure is logged once"
    failure_line = next(line for line in log.splitlines() if f"collector {failing} failed" in line)
    assert "Traceback" not in log and len(failure_line) < 400


def test_pool_exported_between_scrapes_and_back(tmp_path, port):
    root = copy_tree(tmp_path / "t")
    backup = root / KSTAT / "backup"
    with ExporterProcess(port, "--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
                         log_path=tmp_path / "log") as exp:
        exp.wait_ready()
        assert value(exp.get(), "zfs_pool_state", pool="backup", state="DEGRADED") == 1
        shutil.move(backup, tmp_path / "backup")
        text = exp.get()
        assert not any(dict(labels).get("pool") == "backup" for _, labels in samples(text))
        assert value(text, "zfs_pool_state", pool="tank", state="ONLINE") == 1
        shutil.move(tmp_path / "backup", backup)
        assert value(exp.get(), "zfs_pool_txgs_synced_total", pool="backup") == 22
