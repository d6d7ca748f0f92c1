"""Reports: one row per configuration (encryption apart), medians over repeats, Markdown/CSV/PNG."""

from zfsnas.bench.report import chart, markdown, summarise, to_csv
from zfsnas.bench.store import Store

CONFIG = {"job": "copy", "compression": "zstd-1", "recordsize": "1M", "size": "all", "pool": "tank"}


def test_medians_per_configuration(tmp_path):
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r", "fits-copy", "tank/scratch", 4)
    for throughput, encryption in ((175e6, "off"), (185e6, "off"), (180e6, "off"), (90e6, "aes-256-gcm")):
        rid = store.start_result("r", 1, "fits-copy", CONFIG, encryption, 1, "c")
        store.finish_result(rid, "complete", throughput_bytes_per_second=throughput, duration_seconds=394.0,
                            compressratio=1.48, used_bytes=46 << 30, logicalused_bytes=69 << 30, cpu_busy_ratio=0.9,
                            cpu_iowait_ratio=0.05)
    rows = summarise(store.results())
    assert [(r.encryption, r.runs, r.mb_per_s) for r in rows] == [("off", 3, 180.0), ("aes-256-gcm", 1, 90.0)]
    table = markdown(rows).splitlines()
    assert table[2] == "| fits-copy | copy | zstd-1 | 1M | off | all | tank | 3 | 180.0 | 394.0 | 1.48 | 46.00 | 69.00 | 90 | 5 |"
    assert to_csv(rows).splitlines()[1] == "fits-copy,copy,zstd-1,1M,off,all,tank,3,180.0,394.0,1.48,46.00,69.00,90,5"
    chart(rows, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
