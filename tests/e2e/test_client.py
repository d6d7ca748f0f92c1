"""Experiments run from a client, on live ZFS (guest/scenario.py client_phase, harness.SmbClient):
Samba in the guest serves two datasets (lz4, zstd-3); the host's smbclient copies the same files
into each through the forwarded port while `zfsnas-bench watch --until-idle` measures from the NAS
side. Compared here: watch's bytes with what the client sent, its throughput with the client's own
figure, its compression with `zfs get compressratio`, the annotations Grafana's contract server on
the host received, the two configurations in `compare`, `report` and /metrics; and `import fio` of
a fio JSON made in the guest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import parse_zfs_ratio, require_phase

pytestmark = pytest.mark.e2e


# module scope: it must skip before the module's own module-scoped fixtures fail on missing results
@pytest.fixture(scope="module", autouse=True)
def _phase_in_this_run(config):
    require_phase(config, "client")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(results) -> dict:
    path = results / "client" / "record.json"
    if not path.exists():
        pytest.skip("no client phase in this guest run (the 2.3 guest runs it, with smbclient on the host)")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def db(results) -> Path:
    return results / "bench" / "bench.sqlite"


def rows(db: Path, matrix: str) -> list[dict]:
    from dataclasses import asdict

    from zfsnas.store.database import ReadOnlyStore

    return [asdict(r) for r in ReadOnlyStore(db).results() if r.matrix == matrix]


def bench(*argv: str) -> subprocess.CompletedProcess:
    code = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, check=False)


@pytest.mark.parametrize("share", ["lz4", "zstd"])
def test_watch_sees_the_clients_copy(client, db, share):
    copy = client["shares"][share]
    assert copy["rc"] == 0, copy["stderr"][-2000:]
    sent = copy["client"]
    assert sent and sent["rc"] == 0, sent
    [row] = [r for r in rows(db, "smb-copy") if r["dataset"] == copy["dataset"]]
    details = json.loads(row["details"])
    assert details["stopped_by"] == "until-idle", details          # it ended by itself after the client
    # Every byte the client sent reached the dataset; beyond it only Samba's metadata (DOS attributes).
    assert sent["bytes"] <= details["written_bytes"] <= sent["bytes"] + (1 << 20), (details, sent)
    assert row["bytes"] == details["written_bytes"] + details["read_bytes"]
    # NAS-side first-byte-to-last-byte throughput against smbclient's own average (KiB/s)
    client_rate = sent["average_kib_s"] * 1024
    assert row["throughput_bytes_per_second"] == pytest.approx(client_rate, rel=0.10), (row["duration_seconds"],
                                                                                        sent)
    # compression of the written data, as zfs itself says for the dataset (created empty for the copy)
    assert row["compressratio"] == pytest.approx(parse_zfs_ratio(copy["zfs_get"]["compressratio"]), abs=0.02)
    assert details["txgs_synced"] >= 1 and details["pool_written_bytes"] > 0
    assert json.loads(row["config"])["labels"] == {"client": "smbclient", "label": "FITS over SMB", "protocol": "smb"}


def test_zstd_compresses_the_files_more_than_lz4(client, db):
    ratio = {json.loads(r["config"])["properties"]["compression"]: r["compressratio"] for r in rows(db, "smb-copy")}
    assert set(ratio) == {"lz4", "zstd-3"} and ratio["zstd-3"] > ratio["lz4"] > 1.0, ratio


def test_the_annotation_pair_is_the_measured_window(client, db, results):
    annotations = json.loads((results / "client" / "annotations.json").read_text())
    by_text = {a["text"].split(":")[0]: a for a in annotations.values()}
    for share in ("lz4", "zstd"):
        dataset = client["shares"][share]["dataset"]
        [row] = [r for r in rows(db, "smb-copy") if r["dataset"] == dataset]
        window = json.loads(row["details"])["window"]
        region = by_text[f"zfsnas-bench watch {dataset}"]
        assert (region["time"], region["timeEnd"]) == (round(window[0] * 1000), round(window[1] * 1000))
        assert "protocol:smb" in region["tags"] and "matrix:smb-copy" in region["tags"]


def test_compare_report_and_metrics_see_two_configurations(client, db, moment):
    compared = bench("compare", "smb-copy:compression=lz4", "smb-copy:compression=zstd-3", "--db", str(db))
    assert compared.returncode == 0, compared.stderr
    assert "### compare: A vs B (compression: lz4 -> zstd-3)" in compared.stdout
    report = bench("report", "--matrix", "smb-copy", "--db", str(db))
    assert report.returncode == 0, report.stderr
    table = report.stdout.split("### smb-copy: configurations", 1)[1].split("###", 1)[0]
    header, _rule, *lines = [line for line in table.splitlines() if line.startswith("|")]
    assert header.startswith("| config | compression | runs | MB/s |")     # one workload: no workload column
    assert sorted(line.split(" | ")[1] for line in lines) == ["lz4", "zstd-3"]
    served = {labels["compression"]: value for labels, value in
              moment("bench").series("zfs_bench_throughput_bytes_per_second", matrix="smb-copy")}
    assert set(served) == {"lz4", "zstd-3"}
    stored = {json.loads(r["config"])["properties"]["compression"]: r["throughput_bytes_per_second"]
              for r in rows(db, "smb-copy")}
    assert served == pytest.approx(stored)


def test_import_fio_round_trips_the_guests_fio_json(client, db, results):
    assert client["import_fio"]["rc"] == 0, client["import_fio"]["stderr"]
    fio = json.loads((results / "client" / "fio.json").read_text())
    imported = {r["workload"]: r for r in rows(db, "fio-import")}
    assert set(imported) == {"client-seq-write", "client-rand-read"}
    for job in fio["jobs"]:
        row = imported[job["jobname"]]
        direction = "write" if "write" in job["jobname"] else "read"
        assert row["throughput_bytes_per_second"] == job[direction]["bw_bytes"]
        assert row["iops"] == job[direction]["iops"] and row["bytes"] == job[direction]["io_bytes"]
        config = json.loads(row["config"])
        assert config["properties"]["compression"] == "lz4" and config["pool"] == "tank"
        assert config["labels"] == {"client": "guest"} and config["data"]["source"] == fio["fio version"]
