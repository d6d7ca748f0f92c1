"""Reports: one row per configuration (encryption apart), medians over repeats, Markdown/CSV/PNG."""

from zfsnas.bench.report import chart, markdown, summarise, to_csv
from zfsnas.bench.store import Store

from .configs import configuration

PLAIN = configuration(matrix="fits-copy", workload="copy", compression="zstd-1", size="all")
ENCRYPTED = configuration(matrix="fits-copy", workload="copy", compression="zstd-1", size="all",
                          encryption="aes-256-gcm")


def test_medians_per_configuration(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r", "fits-copy", "tank/scratch", 4)
    for throughput, config in ((175e6, PLAIN), (185e6, PLAIN), (180e6, PLAIN), (90e6, ENCRYPTED)):
        rid = store.start_result("r", 1, config, 1, "c")
        store.finish_result(rid, "complete", throughput_bytes_per_second=throughput, duration_seconds=394.0,
                            compressratio=1.48, used_bytes=46 << 30, logicalused_bytes=69 << 30, cpu_busy_ratio=0.9,
                            cpu_iowait_ratio=0.05, cpu_user_seconds=40.0, cpu_system_seconds=310.5)
    rows = summarise(store.results())
    assert [(r.config, r.encryption, r.runs, r.mb_per_s) for r in rows] == [
        (PLAIN.id, "off", 3, 180.0), (ENCRYPTED.id, "aes-256-gcm", 1, 90.0)]
    table = markdown(rows).splitlines()
    assert table[2] == (f"| fits-copy | copy | {PLAIN.id} | zstd-1 | 1M | off | all | tank | 3 | 180.0 | 394.0 | 1.48 "
                        f"| 46.00 | 69.00 | 90 | 40.0 | 310.5 | 5 |  |")
    assert to_csv(rows).splitlines()[1] == (f"fits-copy,copy,{PLAIN.id},zstd-1,1M,off,all,tank,3,180.0,394.0,1.48,"
                                            f"46.00,69.00,90,40.0,310.5,5,")
    chart(rows, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_configurations_that_look_alike_are_two_rows_that_say_what_differs(tmp_path):
    """A run before and after a zfs_dirty_data_max change: not one row of both."""
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r", "dirty-data", "tank/scratch", 2)
    before = configuration(workload="write-size")
    after = configuration(workload="write-size", parameters={"zfs_dirty_data_max": str(16 << 30)})
    for config, throughput in ((before, 400e6), (after, 250e6)):
        store.finish_result(store.start_result("r", 1, config, 1, "c"), "complete",
                            throughput_bytes_per_second=throughput)
    rows = summarise(store.results())
    assert [(r.config, r.runs, r.mb_per_s) for r in rows] == [(before.id, 1, 400.0), (after.id, 1, 250.0)]
    assert rows[0].differs == f"vs {after.id}: parameter zfs_dirty_data_max: 17179869184 -> 4294967296"
    assert rows[1].differs == f"vs {before.id}: parameter zfs_dirty_data_max: 4294967296 -> 17179869184"
