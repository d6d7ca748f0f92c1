"""Experiments run from a client: `zfsnas-bench watch` and `zfsnas-bench import`.

watch runs against a copy of the live 2.3.2 kstat tree (tests/fixtures/linux-zfs-2.3.2-live) in
which a "client" thread moves tank/lz4's objset counters at a known pace and writes the files the
fake `zfs` (tests/bench/fakezfs.py) reports space for; the real thing, Samba in the QEMU guest and
smbclient on the host, is tests/e2e/test_client.py. import reads CrystalDiskMark 5, 6, 7 and 8 text
written by us in each version's exact format (saved as UTF-16 with a byte-order mark where the
program does), and a real fio 3.33 JSON produced here."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from zfsnas.bench.answering import crystaldiskmark
from zfsnas.bench.answering.report import sections
from zfsnas.bench.answering.tables import cdm_tables, configurations_table
from zfsnas.bench.cli import main
from zfsnas.store.database import ReadOnlyStore

from .grafana import FakeGrafana

LIVE = Path(__file__).parents[1] / "fixtures" / "linux-zfs-2.3.2-live"
MiB = 1 << 20


# --- watch ------------------------------------------------------------------------------------------------

def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(LIVE / "proc", root / "proc")
    shutil.copytree(LIVE / "sys", root / "sys")
    (root / "proc" / "stat").write_text("cpu  1000 0 500 90000 200 0 10 0 0 0\ncpu0 500 0 250 45000 100 0 5 0 0 0\n")
    (root / "proc" / "diskstats").write_text("   8       0 sda 100 0 800 10 200 0 1600 20 0 30 30 0 0 0 0 0 0\n")
    return root


def set_counters(path: Path, nwritten: int, writes: int) -> None:
    text = path.read_text()
    text = re.sub(r"^(nwritten\s+4\s+)\d+$", lambda m: f"{m[1]}{nwritten}", text, flags=re.M)
    text = re.sub(r"^(writes\s+4\s+)\d+$", lambda m: f"{m[1]}{writes}", text, flags=re.M)
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    tmp.replace(path)


WATCHING = "start the client now"     # what watch logs as its sampling begins


class Watching(logging.Handler):
    """Set once this process's watch says it samples (an in-process `main`)."""

    def __init__(self) -> None:
        super().__init__()
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if WATCHING in record.getMessage():
            self.event.set()

    def __enter__(self) -> threading.Event:
        logger = logging.getLogger("zfsnas.bench")
        self.level = logger.level
        logger.setLevel(logging.INFO)       # the line is at info: not dropped before it reaches us
        logger.addHandler(self)
        return self.event

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("zfsnas.bench")
        logger.removeHandler(self)
        logger.setLevel(self.level)


class Client(threading.Thread):
    """Writes `chunks` x 1 MiB to tank/lz4 (counters and, sparse 4x, files) one chunk per `pace` s,
    once the watch samples (`ready` is set: see `Watching`) and `delay` more seconds passed."""

    def __init__(self, objset: Path, files: Path, chunks: int, pace: float, delay: float, ready: threading.Event):
        super().__init__(daemon=True)
        self.objset, self.files, self.chunks, self.pace, self.delay = objset, files, chunks, pace, delay
        self.ready = ready
        self.first = self.last = 0.0

    def run(self) -> None:
        assert self.ready.wait(120), "the watch never started sampling"
        time.sleep(self.delay)
        text = self.objset.read_text()
        base = int(re.search(r"^nwritten\s+4\s+(\d+)$", text, re.M)[1])   # type: ignore[index]
        ops = int(re.search(r"^writes\s+4\s+(\d+)$", text, re.M)[1])        # type: ignore[index]
        self.first = time.monotonic()
        for i in range(1, self.chunks + 1):
            set_counters(self.objset, base + i * MiB, ops + i * 8)
            with open(self.files / f"f{i}", "wb") as f:      # 1 MiB written, 4 MiB logical: ratio 4
                f.write(b"\1" * MiB)
                f.truncate(4 * MiB)
            self.last = time.monotonic()
            if i < self.chunks:
                time.sleep(self.pace)
        time.sleep(0.3)
        sync_txg(self.objset.parent / "txgs")


def sync_txg(path: Path) -> None:
    """The open txg commits (as it would within zfs_txg_timeout) and the next one opens."""
    lines = path.read_text().splitlines()
    open_row = lines[-1].split()
    lines[-1] = "  ".join([open_row[0], open_row[1], "C", "1048576", "0", "11534336", "0", "88", "5000000000",
                           "100000", "200000", "412345678"])
    lines.append("  ".join([str(int(open_row[0]) + 1), str(int(open_row[1]) + 5_000_000_000), "O"] + ["0"] * 9))
    tmp = path.with_name("txgs.new")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def test_watch_measures_first_byte_to_last_and_stops_when_idle(fake_zfs, tmp_path, capsys):
    root = tree(tmp_path)
    state = fake_zfs.read()
    state["datasets"]["tank/lz4"] = {"type": "filesystem", "props": {"compression": "lz4"}}
    fake_zfs.write(state)
    files = fake_zfs.root / "tank/lz4"
    files.mkdir(parents=True)
    db = tmp_path / "bench.sqlite"
    with Watching() as ready, FakeGrafana("glsa_abc") as grafana:
        client = Client(root / "proc/spl/kstat/zfs/tank/objset-0x53", files, chunks=11, pace=0.2, delay=0.5,
                        ready=ready)
        client.start()
        code = main(["watch", "--dataset", "tank/lz4", "--until-idle", "0.6", "--duration", "30", "--label",
                     "FITS over SMB", "--set", "protocol=smb", "--set", "client=win11", "--path.procfs",
                     str(root / "proc"), "--path.sysfs", str(root / "sys"), "--grafana-url", grafana.url,
                     "--grafana-token", "glsa_abc", *fake_zfs.flags(db)])
    took = time.monotonic() - client.last
    client.join()
    assert code == 0
    assert took < 0.6 + 5.0        # idle, then settle and space: it stopped by itself (--duration is 30)
    [row] = ReadOnlyStore(db).results()
    assert row.bytes == 11 * MiB
    # The client's own time: 11 chunks of 0.2 s each, the first one's transfer before it landed.
    window = client.last - client.first + client.pace
    # The edges to half a 0.1 s step each, plus what a busy CI host delays a thread by (both of
    # ours, the client's and the watcher's): 0.3 s of a 2.2 s window.
    assert abs(row.duration_seconds - window) <= 0.3
    assert row.throughput_bytes_per_second == pytest.approx(11 * MiB / row.duration_seconds)
    assert row.iops == pytest.approx(88 / row.duration_seconds)
    assert row.compressratio == pytest.approx(4.0, rel=0.01)     # logicalused / used growth of the files
    details = json.loads(row.details)
    assert (details["written_bytes"], details["read_bytes"], details["writes"]) == (11 * MiB, 0, 88)
    assert details["first_landing_bytes"] == MiB
    assert details["stopped_by"] == "until-idle" and details["step_seconds"] > 0
    assert (details["txgs_synced"], details["txg_sync_seconds_max"]) == (1, 0.412345678)   # txg 58, synced after
    assert details["peak_dirty_bytes"] is not None          # arcstats anon_size of the tree
    labels = dict(json.loads(row.config)["labels"])
    assert labels == {"client": "win11", "label": "FITS over SMB", "protocol": "smb"}
    assert json.loads(row.config)["properties"]["compression"] == "lz4"
    out = capsys.readouterr().out
    assert out.startswith(f"tank/lz4: {11 * MiB} bytes in ") and "compression 4.00x" in out
    # the annotation is the measured window, first byte to last, and says what was measured
    [annotation] = grafana.annotations.values()
    assert (annotation["time"], annotation["timeEnd"]) == (round(details["window"][0] * 1000),
                                                           round(details["window"][1] * 1000))
    assert annotation["text"] == f"zfsnas-bench watch {out.strip()}"
    assert "label:FITS over SMB" in annotation["tags"] and "protocol:smb" in annotation["tags"]
    # nothing but reads reached zfs
    assert {tuple(c[:2]) for c in fake_zfs.commands()} <= {("zfs", "get"), ("zfs", "version"), ("zpool", "status"),
                                                           ("zpool", "get")}


def test_watch_refuses_a_dataset_that_does_not_exist_and_stores_nothing(fake_zfs, tmp_path, caplog):
    root = tree(tmp_path)
    db = tmp_path / "bench.sqlite"
    assert main(["watch", "--dataset", "tank/nope", "--duration", "1", "--path.procfs", str(root / "proc"),
                 "--path.sysfs", str(root / "sys"), *fake_zfs.flags(db)]) == 2
    assert "tank/nope: no such dataset" in caplog.text and not db.exists()


def test_watch_says_what_it_cannot_read(fake_zfs, tmp_path, caplog):
    root = tree(tmp_path)
    state = fake_zfs.read()
    state["datasets"]["tank/home"]["props"]["compression"] = "lz4"
    fake_zfs.write(state)
    db = tmp_path / "bench.sqlite"
    # the tree has no objset kstat for tank/home
    assert main(["watch", "--dataset", "tank/home", "--duration", "1", "--path.procfs", str(root / "proc"),
                 "--path.sysfs", str(root / "sys"), *fake_zfs.flags(db)]) == 2
    assert "tank/home: no objset counters in the procfs kstats" in caplog.text and not db.exists()


def test_a_watch_without_a_byte_is_a_failed_result_said_so(fake_zfs, tmp_path, caplog):
    root = tree(tmp_path)
    state = fake_zfs.read()
    state["datasets"]["tank/lz4"] = {"type": "filesystem", "props": {}}
    fake_zfs.write(state)
    db = tmp_path / "bench.sqlite"
    assert main(["watch", "--dataset", "tank/lz4", "--duration", "0.5", "--path.procfs", str(root / "proc"),
                 "--path.sysfs", str(root / "sys"), *fake_zfs.flags(db)]) == 1
    [row] = ReadOnlyStore(db).results(status=None)
    assert row.status == "failed" and row.error.startswith("no byte reached tank/lz4 in the ")
    assert "(duration)" in row.error


# --- import crystaldiskmark ----------------------------------------------------------------------------

CDM5 = """-----------------------------------------------------------------------
CrystalDiskMark 5.2.1 x64 (C) 2007-2017 hiyohiyo
                           Crystal Dew World : http://crystalmark.info/
-----------------------------------------------------------------------
* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]
* KB = 1000 bytes, KiB = 1024 bytes

   Sequential Read (Q= 32,T= 1) :   105.938 MB/s
  Sequential Write (Q= 32,T= 1) :    98.114 MB/s
  Random Read 4KiB (Q= 32,T= 1) :     9.817 MB/s [  2396.7 IOPS]
 Random Write 4KiB (Q= 32,T= 1) :     6.243 MB/s [  1524.2 IOPS]
         Sequential Read (T= 1) :   101.227 MB/s
        Sequential Write (T= 1) :    92.560 MB/s
   Random Read 4KiB (Q= 1,T= 1) :     0.702 MB/s [   171.4 IOPS]
  Random Write 4KiB (Q= 1,T= 1) :     1.918 MB/s [   468.3 IOPS]

  Test : 1024 MiB [Z: 0.1% (0.5/999.9 GiB)] (x5)  [Interval=5 sec]
  Date : 2017/03/18 21:05:44
    OS : Windows 10 Professional [10.0 Build 14393] (x64)
  NTFS 4K, zvol 16K over iSCSI
"""

CDM6 = """-----------------------------------------------------------------------
CrystalDiskMark 6.0.2 x64 (C) 2007-2018 hiyohiyo
                          Crystal Dew World : https://crystalmark.info/
-----------------------------------------------------------------------
* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]
* KB = 1000 bytes, KiB = 1024 bytes

   Sequential Read (Q= 32,T= 1) :   112.310 MB/s
  Sequential Write (Q= 32,T= 1) :   109.822 MB/s
  Random Read 4KiB (Q=  8,T= 8) :    71.440 MB/s [  17441.4 IOPS]
 Random Write 4KiB (Q=  8,T= 8) :    52.017 MB/s [  12699.5 IOPS]
  Random Read 4KiB (Q= 32,T= 1) :    60.913 MB/s [  14871.3 IOPS]
 Random Write 4KiB (Q= 32,T= 1) :    44.702 MB/s [  10913.6 IOPS]
  Random Read 4KiB (Q=  1,T= 1) :     9.514 MB/s [   2322.8 IOPS]
 Random Write 4KiB (Q=  1,T= 1) :    13.905 MB/s [   3394.8 IOPS]

  Test : 1024 MiB [Z: 0.3% (2.8/999.9 GiB)] (x5)  [Interval=5 sec]
  Date : 2019/02/09 10:41:03
    OS : Windows 10 Professional [10.0 Build 17763] (x64)
"""

CDM7 = """------------------------------------------------------------------------------
CrystalDiskMark 7.0.0 x64 (C) 2007-2019 hiyohiyo
                                  Crystal Dew World: https://crystalmark.info/
------------------------------------------------------------------------------
* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]
* KB = 1000 bytes, KiB = 1024 bytes

[Read]
Sequential 1MiB (Q=  8, T= 1):   117.950 MB/s [    112.5 IOPS] < 70936.12 us>
Sequential 1MiB (Q=  1, T= 1):   110.411 MB/s [    105.3 IOPS] <  9490.55 us>
    Random 4KiB (Q= 32, T=16):    58.330 MB/s [  14240.7 IOPS] < 35727.02 us>
    Random 4KiB (Q=  1, T= 1):     9.671 MB/s [   2361.1 IOPS] <   423.05 us>

[Write]
Sequential 1MiB (Q=  8, T= 1):   113.102 MB/s [    107.9 IOPS] < 73868.40 us>
Sequential 1MiB (Q=  1, T= 1):   104.880 MB/s [    100.0 IOPS] <  9990.21 us>
    Random 4KiB (Q= 32, T=16):     5.988 MB/s [   1461.9 IOPS] <345613.44 us>
    Random 4KiB (Q=  1, T= 1):     5.301 MB/s [   1294.2 IOPS] <   771.66 us>

Profile: Default
   Test: 1 GiB (x5) [Interval: 5 sec] <DefaultAffinity=DISABLED>
   Date: 2019/11/02 14:20:18
     OS: Windows 10 Professional [10.0 Build 18362] (x64)
"""

CDM8 = """------------------------------------------------------------------------------
CrystalDiskMark 8.0.4 x64 (C) 2007-2021 hiyohiyo
                                  Crystal Dew World: https://crystalmark.info/
------------------------------------------------------------------------------
* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]
* KB = 1000 bytes, KiB = 1024 bytes

[Read]
  SEQ    1MiB (Q=  8, T= 1):   118.204 MB/s [    112.7 IOPS] < 70912.44 us>
  SEQ    1MiB (Q=  1, T= 1):   110.903 MB/s [    105.8 IOPS] <  9448.33 us>
  RND    4KiB (Q= 32, T= 1):    61.300 MB/s [  14965.8 IOPS] <  2137.72 us>
  RND    4KiB (Q=  1, T= 1):     9.800 MB/s [   2392.6 IOPS] <   417.61 us>

[Write]
  SEQ    1MiB (Q=  8, T= 1):   112.600 MB/s [    107.4 IOPS] < 74449.03 us>
  SEQ    1MiB (Q=  1, T= 1):   104.200 MB/s [     99.4 IOPS] < 10059.82 us>
  RND    4KiB (Q= 32, T= 1):    88.900 MB/s [  21704.1 IOPS] <  1474.19 us>
  RND    4KiB (Q=  1, T= 1):    14.700 MB/s [   3588.9 IOPS] <   278.53 us>

Profile: Default
   Test: 1 GiB (x5) [Z: 1% (9/932GiB)]
   Mode: [Admin]
   Time: Measure 5 sec / Interval 5 sec 
   Date: 2023/05/14 19:02:55
     OS: Windows 11 Pro 22H2 [10.0 Build 22621] (x64)
Comment: zvol 4K, NTFS 4K, 1 GbE iSCSI
"""

# how each version saves: 5-7 as UTF-16LE with a byte-order mark and CRLF, 8 as UTF-8
ENCODED = {"5": lambda t: b"\xff\xfe" + t.replace("\n", "\r\n").encode("utf-16-le"),
           "6": lambda t: b"\xff\xfe" + t.replace("\n", "\r\n").encode("utf-16-le"),
           "7": lambda t: b"\xff\xfe" + t.replace("\n", "\r\n").encode("utf-16-le"),
           "8": lambda t: t.replace("\n", "\r\n").encode("utf-8")}
TEXTS = {"5": CDM5, "6": CDM6, "7": CDM7, "8": CDM8}


def result_lines(text: str) -> list[str]:
    """The test lines of a CrystalDiskMark text, as printed."""
    return [line for line in text.splitlines() if re.match(r"^\s*(SEQ|RND|Sequential|Random)\b", line)]


@pytest.mark.parametrize("version", ["5", "6", "7", "8"])
def test_import_reproduces_every_figure_in_the_versions_own_lines(version, tmp_path, capsys):
    path = tmp_path / f"cdm{version}.txt"
    path.write_bytes(ENCODED[version](TEXTS[version]))
    db = tmp_path / "bench.sqlite"
    assert main(["import", "crystaldiskmark", str(path), "--set", "volblocksize=16K", "--set", "ntfs_cluster=4K",
                 "--matrix", "client-cdm", "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith(f"imported 8 result(s) of crystaldiskmark {version}.")
    [section] = sections(ReadOnlyStore(db).results())
    [table] = cdm_tables(section)
    # The report prints the lines of the version the file came from: the input's figures, value by value.
    assert result_lines("\n".join(table.code)) == result_lines(TEXTS[version])
    [config] = {json.dumps(json.loads(r.config)["data"], sort_keys=True) for r in ReadOnlyStore(db).results()}
    data = json.loads(config)
    assert data["source"].startswith(f"crystaldiskmark {version}.") and data["passes"] == "5"
    assert data["test_size"] in ("1024 MiB", "1 GiB")


def test_what_crystaldiskmark_5_does_not_print_stays_empty(tmp_path):
    path = tmp_path / "cdm5.txt"
    path.write_bytes(ENCODED["5"](CDM5))
    db = tmp_path / "bench.sqlite"
    assert main(["import", "crystaldiskmark", str(path), "--db", str(db)]) == 0
    rows = {r.workload: r for r in ReadOnlyStore(db).results()}
    seq = rows["cdm-seq128k-q32t1-read"]
    assert (seq.throughput_bytes_per_second, seq.iops, seq.latency_us) == (105.938e6, None, None)
    rnd = rows["cdm-rnd4k-q32t1-write"]
    assert (rnd.throughput_bytes_per_second, rnd.iops) == (6.243e6, 1524.2)
    # no compression was recorded nor given: unknown, never "off"
    [section] = sections(ReadOnlyStore(db).results())
    assert {json.loads(r.config)["properties"].get("compression") for r in rows.values()} == {None}
    assert json.loads(seq.config)["pool"] == "unknown"
    table = configurations_table(section)
    row = dict(zip(table.headers, table.rows[0]))
    assert row["workload"] == "SEQ 128KiB Q32T1 read" and row["IOPS"] == "-"     # printed for random tests only
    assert "latency us" not in table.headers                                      # 5.x prints none


@pytest.mark.parametrize(("mangle", "says"), [
    (lambda t: t.replace("105.938", "1O5.938"), "line 8: a test line that cannot be read"),
    (lambda t: t[:t.index("  Random Write 4KiB (Q= 1,T= 1)") + 40], "line 15: a test line that cannot be read"),
    (lambda t: t.replace("CrystalDiskMark 5.2.1", "CrystalDiskMark 3.0.4"), "line 2: CrystalDiskMark 3.0.4"),
    (lambda t: "Hello, this is not a benchmark\n", "no CrystalDiskMark test line"),
    (lambda t: t.replace("Random Read 4KiB (Q= 1,T= 1)", "Random Read 4KiB (Q= 32,T= 1)"), "appears twice"),
])
def test_bad_crystaldiskmark_input_is_one_line_and_stores_nothing(mangle, says, tmp_path, caplog):
    path = tmp_path / "bad.txt"
    path.write_text(mangle(CDM5))
    db = tmp_path / "bench.sqlite"
    assert main(["import", "crystaldiskmark", str(path), "--db", str(db)]) == 2
    assert says in caplog.text and "nothing stored" in caplog.text
    assert not db.exists()


def _cut_after_tests(text: str, tests: int) -> str:
    """`text` cut at a line boundary right after its `tests`-th test line."""
    lines = text.splitlines(keepends=True)
    seen = 0
    for n, line in enumerate(lines):
        seen += bool(re.match(r"^\s*(SEQ|RND|Sequential|Random)\b", line))
        if seen == tests:
            return "".join(lines[:n + 1])
    raise AssertionError("not that many tests")


@pytest.mark.parametrize(("version", "mangle", "says"), [
    # cut at a line boundary: every line it has reads, but the tests after it and the footer are gone
    ("8", lambda t: _cut_after_tests(t, 3), "no `Test:` line after the 3 test line(s): the file is truncated"),
    ("5", lambda t: _cut_after_tests(t, 3), "no `Test:` line after the 3 test line(s): the file is truncated"),
    ("7", lambda t: _cut_after_tests(t, 7), "no `Test:` line after the 7 test line(s)"),
    # junk around a test line
    ("8", lambda t: t.replace("  RND    4KiB (Q= 32, T= 1):    61.300", "xx  RND    4KiB (Q= 32, T= 1):    61.300"),
     "line 11: a test line that cannot be read"),
    ("8", lambda t: t.replace("<  1474.19 us>", "<  1474.19 us> (best)"), "line 17: a test line that cannot be read"),
    ("8", lambda t: t.replace("[Write]\n", "[Write]\nnote: ran twice\n"), "line 15: text among the test lines"),
    ("6", lambda t: t.replace("  Random Read 4KiB (Q= 32,T= 1)", "## Random Read 4KiB (Q= 32,T= 1)"),
     "line 12: a test line that cannot be read"),
])
def test_truncated_or_altered_crystaldiskmark_is_refused(version, mangle, says, tmp_path, caplog):
    """A file cut at a line boundary (3 of 8 tests, no `Test:` line) or with junk around a test line
    imported with exit 0: the docs promise exit 2 and nothing stored."""
    path = tmp_path / "bad.txt"
    path.write_bytes(ENCODED[version](mangle(TEXTS[version])))
    db = tmp_path / "bench.sqlite"
    assert main(["import", "crystaldiskmark", str(path), "--db", str(db)]) == 2
    assert says in caplog.text and "nothing stored" in caplog.text
    assert not db.exists()


def test_crystaldiskmark_5_round_trip_is_byte_identical():
    parsed = crystaldiskmark.parse(CDM5)
    lines, left = crystaldiskmark.render(parsed.tests, "5")
    assert left == [] and lines[3:] == result_lines(CDM5)
    assert lines[:2] == [line for line in CDM5.splitlines() if line.startswith("* ")]
    assert (parsed.test_size, parsed.passes, parsed.interval_seconds, parsed.date) == (
        "1024 MiB", "5", "5", "2017/03/18 21:05:44")
    eight = crystaldiskmark.parse(CDM8)
    assert (eight.version, eight.measure_seconds, eight.other["Comment"]) == ("8.0.4", "5", "zvol 4K, NTFS 4K, 1 GbE iSCSI")
    assert crystaldiskmark.render(eight.tests, "8")[0][3:] == CDM8.splitlines()[7:18]


# --- import fio -------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (./dev test installs it)")
def test_import_fio_json_round_trips_a_real_fio_run(tmp_path, capsys):
    out = tmp_path / "fio.json"
    subprocess.run(["fio", f"--directory={tmp_path}", "--output-format=json", f"--output={out}", "--name=randwrite",
                    "--rw=randwrite", "--bs=4k", "--size=8M", "--ioengine=psync", "--name=seqread", "--rw=read",
                    "--bs=1M", "--size=8M"], check=True, capture_output=True, timeout=120, cwd=tmp_path)
    fio = json.loads(out.read_text())
    db = tmp_path / "bench.sqlite"
    assert main(["import", "fio", str(out), "--set", "client=laptop", "--db", str(db)]) == 0
    rows = {r.workload: r for r in ReadOnlyStore(db).results()}
    assert set(rows) == {"randwrite", "seqread"}
    jobs = {j["jobname"]: j for j in fio["jobs"]}
    write, read = jobs["randwrite"]["write"], jobs["seqread"]["read"]
    assert rows["randwrite"].throughput_bytes_per_second == write["bw_bytes"]
    assert rows["randwrite"].iops == write["iops"] and rows["randwrite"].bytes == write["io_bytes"] == 8 * MiB
    assert rows["seqread"].throughput_bytes_per_second == read["bw_bytes"]
    assert json.loads(rows["randwrite"].clat_ns) == {k: float(v) for k, v in write["clat_ns"]["percentile"].items()}
    data = json.loads(rows["randwrite"].config)["data"]
    assert data["source"] == fio["fio version"] and data["fio bs"] == "4k" and data["fio rw"] == "randwrite"
    [section] = sections(ReadOnlyStore(db).results())
    table = configurations_table(section)
    lat = dict(zip(table.headers, next(r for r in table.rows if "randwrite" in r)))["latency us"]
    assert lat == f"{write['lat_ns']['mean'] / 1000:.2f}"


@pytest.mark.parametrize(("text", "says"), [
    ("fio: no JSON here\n", "not fio JSON: no '{'"),
    ('{"fio version": "fio-3.33", "jobs": [{"jobname": "a", "write": {"io_bytes": 10, "bw_bytes": 1', "truncated?"),
    ('{"fio version": "fio-3.33", "jobs": []}', "fio JSON without jobs"),
    ('{"jobs": [{"jobname": "a", "write": {"io_bytes": 10, "bw_bytes": "fast", "iops": 1}}]}',
     "fio job 'a': write.bw_bytes is 'fast', not a finite number"),
    ('{"jobs": [{"jobname": "a", "error": 5, "write": {"io_bytes": 10, "bw_bytes": 1, "iops": 1}}]}',
     "ended with error 5"),
])
def test_bad_fio_input_is_one_line_and_stores_nothing(text, says, tmp_path, caplog):
    path = tmp_path / "bad.json"
    path.write_text(text)
    db = tmp_path / "bench.sqlite"
    assert main(["import", "fio", str(path), "--db", str(db)]) == 2
    assert says in caplog.text and not db.exists()
