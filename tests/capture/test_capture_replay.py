"""`zfsnas-exporter capture` and `--replay` on the fixture NAS (tests/capture/nas.py): what is
recorded, that a replay serves what the capture saw, bad archives, anonymization leaks."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests import registry
from tests.capture.nas import HOSTNAME, POOLS, SERIALS, WWNS, build_nas, dataset_names
from tests.conftest import samples, value
from zfsnas import capture as capture_module
from zfsnas.cli import main
from zfsnas.replay import CaptureError, ReplayExporter, open_capture
from zfsnas.sources.smart import smartctl_argv
from zfsnas.sources.zfs_datasets import LIST_DATASETS, LIST_SNAPSHOTS
from zfsnas.sources.zpool import LIST_POOLS, LIST_VDEVS, STATUS_GUIDS, STATUS_PATHS
from zfsnas.sources.zpool_iostat import LATENCY_HISTOGRAMS, QUEUE_DEPTHS
from zfsnas.wiring import default_config

VOLATILE = ("zfs_exporter_collector_duration_seconds", "zfs_exporter_source_age_seconds")


def stable(text: str) -> dict:
    return {k: v for k, v in samples(text).items() if not k[0].startswith(VOLATILE + ("process_", "python_"))}


def take(tmp_path: Path, *extra: str, nas_flags: list[str] | None = None) -> Path:
    flags = nas_flags if nas_flags is not None else build_nas(tmp_path)[1]
    out = tmp_path / "capture.tar.gz"
    assert capture_module.main([str(out), *flags, *extra]) == 0
    return out


def replay_all(path: Path) -> list[str]:
    capture = open_capture(path)
    try:
        exporter = ReplayExporter(capture, default_config(), process_metrics=False)
        return [exporter.render() for _ in capture.snapshots]
    finally:
        capture.close()


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_capture_records_exact_command_lines_and_trees(tmp_path):
    out = take(tmp_path)
    files = members(out)
    manifest = json.loads(files["zfsnas-capture/manifest.json"])
    assert manifest["format"] == 1 and manifest["snapshots"] == 1 and manifest["anonymized"] is False
    assert manifest["openzfs_version"] == "2.3.2-2~bpo12+2"
    assert manifest["unreadable"] == []
    assert "vdevlatency" in manifest["collectors"]  # capture switches it on by default
    index = json.loads(files["zfsnas-capture/snapshots/0/commands.json"])
    recorded = [tuple(c["argv"]) for c in index["commands"]]
    smartctl = [tuple(smartctl_argv(f"/dev/{disk}")) for disk in ("nvme0n1", "sda", "sdb", "sdc", "sdd", "sde", "vda")]
    assert sorted(recorded) == sorted([LIST_DATASETS, LIST_SNAPSHOTS, LIST_POOLS, STATUS_PATHS, STATUS_GUIDS,
                                       LIST_VDEVS, LATENCY_HISTOGRAMS, QUEUE_DEPTHS, *smartctl,
                                       tuple(smartctl_argv("/dev/sde", "sat"))])  # the USB bridge's second try
    assert {c["exit_status"] for c in index["commands"] if c["argv"][0] != "smartctl"} == {0}
    # smartctl's status is a bit mask recorded as it came: the failing disk's logs (192), no device type (1)
    assert {c["exit_status"] for c in index["commands"] if c["argv"][0] == "smartctl"} == {0, 1, 192}
    pools_out = next(c["stdout"] for c in index["commands"] if tuple(c["argv"]) == LIST_POOLS)
    assert files[f"zfsnas-capture/snapshots/0/{pools_out}"].decode().startswith("backup\t3985729650688\t")
    snap = "zfsnas-capture/snapshots/0/"
    for member in ("proc/spl/kstat/zfs/arcstats", "proc/spl/kstat/zfs/tank/txgs", "proc/diskstats",
                   "sys/module/zfs/version", "sys/module/zfs/parameters/zfs_dirty_data_max",
                   "sys/block/sdb/dev", "sys/block/sdb/sdb1/partition", "sys/block/sdb/queue/rotational",
                   "udev/data/b8:16", "udev/data/b8:17", "metrics.txt"):
        assert snap + member in files, member
    metrics = files[snap + "metrics.txt"].decode()
    assert value(metrics, "zfs_pool_health", pool="tank", state="DEGRADED") == 1
    assert value(metrics, "zfs_disk_smart_pending_sectors", device="sdc", serial="WD-WCC7K2BBBBBB", pool="tank",
                 vdev_guid="2280133445316251466") == 8  # replayed from the record
    assert value(metrics, "zfs_exporter_collector_success", collector="disks") == 1
    # Complete: the live render that ran the commands and the render from the copied files agree
    # on every sample (the fixture NAS does not move).
    assert stable(files[snap + "live-metrics.txt"].decode()) == stable(metrics)
    assert snap + "bench.sqlite" in files
    assert value(metrics, "zfs_bench_throughput_bytes_per_second", matrix="ci", workload="seqwrite", config="f0cff41b4c5d",
                 compression="lz4", recordsize="1M", encryption="off", size="64M", pool="tank") == 800e6


def test_replay_serves_every_sample_the_capture_saw(tmp_path):
    out = take(tmp_path)
    [served] = replay_all(out)
    saw = members(out)["zfsnas-capture/snapshots/0/metrics.txt"].decode()
    assert stable(served) == stable(saw)
    assert len(stable(saw)) > 4000
    # Numbers a user reads, from the fixture files themselves.
    assert value(served, "zfs_pool_health", pool="tank", state="DEGRADED") == 1
    disk = {dict(k[1])["device"]: dict(k[1]) for k in samples(served) if k[0] == "zfs_disk_info"}
    assert disk["sdb"]["serial"] == "WD-WCC7K1AAAAAA" and disk["sdb"]["pool"] == "tank"
    assert disk["sdd"]["wwn"] == "0x5000c500a1b2c3d4"
    for name in ("zfs_exporter_collector_success",):
        assert {dict(k[1])["collector"]: v for k, v in samples(served).items() if k[0] == name} == \
               dict.fromkeys(registry.NAMES, 1.0)


def test_interval_gives_two_snapshots_and_replay_steps_through_them(tmp_path, monkeypatch):
    root, flags = build_nas(tmp_path)
    arcstats = root / "proc" / "spl" / "kstat" / "zfs" / "arcstats"

    def between_snapshots(seconds):  # the NAS moves on while capture waits
        assert seconds == 7
        text = arcstats.read_text()
        arcstats.write_text(re.sub(r"^(hits\s+4\s+)(\d+)$", lambda m: m[1] + str(int(m[2]) + 1000), text,
                                   flags=re.M))

    monkeypatch.setattr(capture_module, "wait_between_snapshots", between_snapshots)
    out = take(tmp_path, "--interval", "7", nas_flags=flags)
    manifest = json.loads(members(out)["zfsnas-capture/manifest.json"])
    assert manifest["snapshots"] == 2 and manifest["interval_seconds"] == 7
    first, second = replay_all(out)
    assert value(first, "zfs_arc_hits_total") == 48211907
    assert value(second, "zfs_arc_hits_total") == 48211907 + 1000


def test_replay_over_http_steps_then_stays_on_the_last(tmp_path, monkeypatch, port):
    root, flags = build_nas(tmp_path)
    txgs = root / "proc" / "spl" / "kstat" / "zfs" / "tank" / "state"
    monkeypatch.setattr(capture_module, "wait_between_snapshots", lambda s: txgs.write_text("SUSPENDED\n"))
    out = take(tmp_path, "--interval", "1", nas_flags=flags)
    proc = subprocess.Popen([sys.executable, "-m", "zfsnas.cli", "--replay", str(out),
                             f"--web.listen-address=127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        states = []
        deadline = time.time() + 30
        while len(states) < 3:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                    text = response.read().decode()
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "replay did not start"
                time.sleep(0.2)
                continue
            states.append([dict(k[1])["state"] for k, v in samples(text).items()
                           if k[0] == "zfs_pool_state" and dict(k[1])["pool"] == "tank" and v == 1])
        assert states == [["ONLINE"], ["SUSPENDED"], ["SUSPENDED"]]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "replaying" in err and "2 snapshot(s)" in err


def test_failed_commands_are_recorded_and_fail_the_same_way_in_replay(tmp_path):
    root, flags = build_nas(tmp_path)
    at = flags.index("--zfs.command-prefix")
    prefix = flags[at + 1].split(" ")
    flags[at + 1] = " ".join([prefix[0], prefix[1], "--fail", *prefix[2:]])
    out = take(tmp_path, nas_flags=flags)
    files = members(out)
    index = json.loads(files["zfsnas-capture/snapshots/0/commands.json"])
    assert {c["exit_status"] for c in index["commands"]} == {1}
    assert all("failed to initialize ZFS library" in c["stderr"] for c in index["commands"])
    [served] = replay_all(out)
    for collector, ok in (("pools", 0), ("datasets", 0), ("arc", 1), ("disks", 1)):
        assert value(served, "zfs_exporter_collector_success", collector=collector) == ok
    assert stable(served) == stable(files["zfsnas-capture/snapshots/0/metrics.txt"].decode())


@pytest.fixture
def shared():
    """A directory another user can enter (pytest's own tmp is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="zfsnas-unprivileged-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the capture as another user")
def test_unprivileged_capture_lists_what_it_could_not_read(shared):
    root, flags = build_nas(shared)
    secret = root / "proc" / "spl" / "kstat" / "zfs" / "tank" / "iostats"
    secret.chmod(0o600)
    for path in [shared, *shared.rglob("*")]:
        if path != secret and not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o755 if path.is_dir() else path.stat().st_mode | 0o644)
    out = shared / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    repo = Path(__file__).resolve().parents[2]
    # The system's python: a virtualenv's may point into root's home. The exporter needs only the
    # standard library for a capture of a tree, and the stand-in `zfs` too.
    python = "/usr/bin/python3"
    at = flags.index("--zfs.command-prefix") + 1
    flags[at] = flags[at].replace(sys.executable, python, 1)
    proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           python, "-m", "zfsnas.cli", "capture", str(out / "c.tar.gz"), *flags],
                          capture_output=True, text=True, timeout=120, cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo / "exporter")})
    assert proc.returncode == 0, proc.stderr
    # The bench database is in WAL mode: another user cannot open it (the exporter cannot either).
    assert "could not read 2 item(s)" in proc.stderr and f"{secret}: Permission denied" in proc.stderr
    manifest = json.loads(members(out / "c.tar.gz")["zfsnas-capture/manifest.json"])
    assert manifest["user"] == "unprivileged"
    assert manifest["unreadable"] == [
        {"path": str(secret), "error": "Permission denied"},
        {"path": str(root / "bench.sqlite"), "error": "attempt to write a readonly database"}]
    files = members(out / "c.tar.gz")
    [served] = replay_all(out / "c.tar.gz")
    assert value(served, "zfs_pool_health", pool="tank", state="DEGRADED") == 1
    # What nobody could not read fails the same way in the replay, even for root.
    assert value(served, "zfs_exporter_collector_success", collector="bench") == 0
    assert value(served, "zfs_exporter_collector_success", collector="poolstats") == 0
    assert value(served, "zfs_exporter_collector_success", collector="arc") == 1
    assert stable(served) == stable(files["zfsnas-capture/snapshots/0/metrics.txt"].decode())


def _damaged(tmp_path: Path, good: Path) -> dict[str, Path]:
    data = good.read_bytes()
    cases = {"truncated": data[: len(data) // 2], "empty": b"", "not-an-archive": b"hello\n" * 100}
    paths = {}
    for name, content in cases.items():
        paths[name] = tmp_path / f"{name}.tar.gz"
        paths[name].write_bytes(content)
    foreign = tmp_path / "foreign.tar.gz"
    with tarfile.open(foreign, "w:gz") as tar:
        tar.add(__file__, arcname="etc/passwd")
    paths["foreign"] = foreign
    escape = tmp_path / "escape.tar.gz"
    with tarfile.open(escape, "w:gz") as tar:
        tar.add(__file__, arcname="zfsnas-capture/../../evil")
    paths["escape"] = escape
    return paths


def test_bad_archives_get_one_clear_error_line(tmp_path):
    good = take(tmp_path)
    expect = {"truncated": "not a readable capture archive (truncated or damaged?)",
              "empty": "not a readable capture archive", "not-an-archive": "not a readable capture archive",
              "foreign": "not a zfsnas capture: unexpected member 'etc/passwd'",
              "escape": "not a zfsnas capture: unexpected member"}
    for case, path in _damaged(tmp_path, good).items():
        with pytest.raises(CaptureError) as caught:
            open_capture(path)
        assert expect[case] in str(caught.value) and "\n" not in str(caught.value), (case, caught.value)
        proc = subprocess.run([sys.executable, "-m", "zfsnas.cli", "--replay", str(path),
                               "--web.listen-address=127.0.0.1:0"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, case
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot replay" in lines[0] and expect[case] in lines[0], (case, proc.stderr)
    assert not (tmp_path.parent / "evil").exists()


def test_anonymized_capture_leaks_no_name_serial_wwn_or_hostname(tmp_path, monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: HOSTNAME)
    out = take(tmp_path, "--anonymize")
    files = members(out)
    datasets = [n for n in dataset_names() if "/" in n or "@" in n]
    assert len(datasets) >= 10
    leaks = []
    for name, content in files.items():
        for haystack, where in ((name.encode(), "member name"), (content, "content")):
            lower = haystack.lower()
            for secret in [*SERIALS, *WWNS, HOSTNAME]:
                if secret.lower().encode() in lower:
                    leaks.append((name, where, secret))
            for dataset in datasets:
                if dataset.encode() in haystack:
                    leaks.append((name, where, dataset))
            for pool in POOLS:  # pool names are common words: as whole names only
                if re.search(rb"(?<![\w.:%-])" + pool.encode() + rb"(?![\w.:%-])", haystack):
                    leaks.append((name, where, pool))
    assert leaks == []
    manifest = json.loads(files["zfsnas-capture/manifest.json"])
    assert manifest["anonymized"] is True and manifest["hostname"] == "host0"
    assert manifest["anonymization"]["serials"] >= len(SERIALS) - 1
    # Still the same NAS: it replays to what it recorded, and disks still join to their pools.
    [served] = replay_all(out)
    assert stable(served) == stable(files["zfsnas-capture/snapshots/0/metrics.txt"].decode())
    (tmp_path / "plain").mkdir()
    [plain] = replay_all(take(tmp_path / "plain"))
    assert len(stable(served)) == len(stable(plain))
    pools = {dict(k[1])["pool"] for k in samples(served) if k[0] == "zfs_pool_health"}
    assert pools == {"pool0", "pool1", "pool2"}
    disk = {dict(k[1])["device"]: dict(k[1]) for k in samples(served) if k[0] == "zfs_disk_info"}
    tank = {dict(k[1])["pool"] for k, v in samples(served).items()
            if k[0] == "zfs_pool_health" and dict(k[1])["state"] == "DEGRADED" and v == 1}
    assert {disk[d]["pool"] for d in ("sdb", "sdc", "sdd")} == tank
    [(key, runs)] = [(k, v) for k, v in samples(served).items() if k[0] == "zfs_bench_runs_total"]
    assert dict(key[1])["pool"] == next(iter(tank)) and dict(key[1])["workload"] == "seqwrite" and runs == 1
    assert disk["sdb"]["serial"].startswith("SERIAL") and disk["sdd"]["wwn"].startswith("0x5")
    assert disk["sdb"]["by_id"].startswith("ata-SERIAL")


# The disks `zpool status` names in the stand-in's recordings (tests/fixtures/commands/generate.py):
# none of them is in the fixture NAS's udev database or sysfs.
STATUS_SERIALS = ("WD-CA0AAAA1", "WD-CA0AAAA2", "WD-CA0AAAA3", "WD-CA0AAAA4", "WD-CA0AAAA5", "WD-CA0AAAA6",
                  "WD-CA0AAAS1", "WD-CA0AAAS2", "ZL2B0001", "ZL2B0002", "22331W800001", "S3Z8NB0K300001",
                  "S3Z8NB0K300002", "S5H7NS0N100001", "S5H7NS0N100002", "BTDV7261000A", "BTDV7261000B",
                  "S4EVNF0M200001", "S4EVNF0M200002")
# by-id forms udev makes (and FreeBSD's), put in place of some of them: (path, what must not remain)
OTHER_FORMS = {
    "ata-WDC_WD80EFZZ-68BTXN0_WD-CA0AAAA3-part1": ("wwn-0x5000c50000000005-part1", "5000c50000000005"),
    "ata-WDC_WD80EFZZ-68BTXN0_WD-CA0AAAA4-part1": ("ata-ZFSNAS_SATA_HDD_ZS0SATA0001-part1", "ZS0SATA0001"),
    "ata-WDC_WD80EFZZ-68BTXN0_WD-CA0AAAA6-part1": ("scsi-35000c500e2e10002-part1", "5000c500e2e10002"),
    "nvme-Samsung_SSD_970_EVO_Plus_500GB_S5H7NS0N100001-part1": ("nvme-eui.0025385b91b2c3d4-part1", "0025385b91b2c3d4"),
    "ata-INTEL_SSDSC2BB120G7_BTDV7261000A-part1": ("usb-WD_Elements_25A3_575833314141-0:0-part1", "575833314141"),
}


def test_anonymized_capture_leaks_no_serial_of_a_disk_udev_knows_nothing_of(tmp_path, monkeypatch):
    """Udev blind to the pool's disks (failed and gone, a container without /run/udev): the serials
    and WWNs inside the by-id paths `zpool status` prints are still replaced, in every member."""
    monkeypatch.setattr(socket, "gethostname", lambda: HOSTNAME)
    root, flags = build_nas(tmp_path)
    shutil.rmtree(root / "udev" / "data")
    (root / "udev" / "data").mkdir()
    status = root / "commands" / "zpool-status-P.txt"
    text = status.read_text()
    for old, (new, _) in OTHER_FORMS.items():
        assert old in text
        text = text.replace(old.ljust(len(new)), new.ljust(len(old)))
    status.write_text(text)
    out = take(tmp_path, "--anonymize", nas_flags=flags)
    files = members(out)
    secrets = [s for s in STATUS_SERIALS if not any(s in old for old in OTHER_FORMS)]
    secrets += [secret for _, secret in OTHER_FORMS.values()]
    leaks = [(name, secret) for name, content in files.items() for secret in secrets
             if secret.lower().encode() in content.lower() or secret.lower() in name.lower()]
    assert leaks == []
    # The same disks under pseudonyms of the same shape: it still replays, by-id names and guids join.
    [served] = replay_all(out)
    vdevs = {dict(k[1])["vdev"] for k in samples(served) if k[0] == "zfs_vdev_state"}
    shapes = {re.sub(r"(0x|eui\.|scsi-3)[0-9a-f]{16}|SERIAL[0-9]{4}", lambda m: (m[1] or "") + "X", v) for v in vdevs}
    assert shapes >= {
        "/dev/disk/by-id/wwn-0xX-part1", "/dev/disk/by-id/ata-X-part1", "/dev/disk/by-id/scsi-3X-part1",
        "/dev/disk/by-id/nvme-eui.X-part1", "/dev/disk/by-id/usb-X-0:0-part1"}
    assert "12897061293381947325" in vdevs   # guids are kept


def test_capture_cli_refuses_a_missing_directory(tmp_path, capsys):
    assert main(["capture", str(tmp_path / "nope" / "c.tar.gz")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_from_capture_makes_a_fixture_tree_and_golden(tmp_path):
    out = take(tmp_path, "--anonymize")
    from tests.fixtures.from_capture import make_fixture, render_tree
    from tests.fixtures.from_capture import stable as stable_text

    tree, golden = make_fixture(out, "test", fixtures=tmp_path / "fixtures", golden_dir=tmp_path)
    assert (tree / "commands" / "index.json").is_file() and (tree / "proc" / "spl" / "kstat" / "zfs").is_dir()
    text = golden.read_text()
    assert text == render_tree(tree)
    saw = members(out)["zfsnas-capture/snapshots/0/metrics.txt"].decode()
    assert text == stable_text(saw)
    assert value(text, "zfs_pool_health", pool="pool2", state="DEGRADED") == 1


def test_freebsd_capture_from_a_sysctl_file_replays(tmp_path):
    from tests.conftest import freebsd_sysctl

    out = tmp_path / "freebsd.tar.gz"
    flags = ["--kstat.source", "sysctl", "--path.sysctl-file", str(freebsd_sysctl("14.1")),
             *registry.only(*registry.KSTAT), "--capture.metrics-url", ""]
    assert capture_module.main([str(out), *flags]) == 0
    files = members(out)
    assert files["zfsnas-capture/snapshots/0/sysctl.txt"] == freebsd_sysctl("14.1").read_bytes()
    manifest = json.loads(files["zfsnas-capture/manifest.json"])
    assert manifest["kstat_source"] == "sysctl" and manifest["collectors"] == list(registry.KSTAT)
    [served] = replay_all(out)
    saw = files["zfsnas-capture/snapshots/0/metrics.txt"].decode()
    assert stable(served) == stable(saw) and len(stable(saw)) > 300
    size = next(line.split(": ")[1] for line in freebsd_sysctl("14.1").read_text().splitlines()
                if line.startswith("kstat.zfs.misc.arcstats.size: "))
    assert value(served, "zfs_arc_size_bytes") == int(size)


def test_anonymized_capture_leaks_no_other_host_gone_disk_layout_serial_or_stderr_name(tmp_path, monkeypatch):
    """Issue 33, case 8: another host named in `zpool status`, the by-id path of a disk that is gone
    (`was /dev/disk/by-id/...`), the by-id serials of the `zpool status` the bench database keeps
    per run (matrix_runs.pool_layout), and pool and dataset names that only an error message quotes."""
    import sqlite3

    monkeypatch.setattr(socket, "gethostname", lambda: HOSTNAME)
    root, flags = build_nas(tmp_path)
    commands = root / "commands"
    for name in ("zpool-status-P.txt", "zpool-status-g.txt"):
        path = commands / name
        path.write_text(path.read_text().replace(
            " state: ONLINE\n", " state: ONLINE\nstatus: The pool is currently imported by another system "
            "(host: othernas.example.lan hostid: 0x1a2b3c4d).\n", 1))
    index = json.loads((commands / "index.json").read_text())
    index["failures"] = {"zpool iostat -HpPvq": {"status": 1, "stderr": "cannot open 'hiddenpool': no such pool\n"},
                         "zfs list -Hp -t snapshot -o name,creation": {
                             "status": 1, "stderr": "cannot open 'tank/private-accounts': dataset does not exist\n"}}
    (commands / "index.json").write_text(json.dumps(index))
    layout = ("  pool: tank\n state: ONLINE\nconfig:\n\n\tNAME  STATE  READ WRITE CKSUM\n\ttank  ONLINE  0 0 0\n"
              "\t  /dev/disk/by-id/ata-ST8000VN004-3CP101_WWZ9SECRET-part1  ONLINE  0 0 0\n"
              "\t  /dev/disk/by-id/wwn-0x5000c500deadbeef-part1  ONLINE  0 0 0\n")
    with sqlite3.connect(root / "bench.sqlite") as db:
        db.execute("UPDATE matrix_runs SET pool_layout = ?", (layout,))
    secrets = ["othernas", "example.lan", "WD-CA0AAAA5", "WWZ9SECRET", "5000c500deadbeef", "hiddenpool",
               "private-accounts"]
    plain = take(tmp_path, nas_flags=flags)
    plain_text = b"".join(members(plain).values()) + b"".join(_sqlite_text(plain))
    assert all(secret.encode() in plain_text for secret in secrets)  # the capture holds each of them
    (tmp_path / "anon").mkdir()
    out = take(tmp_path / "anon", "--anonymize", nas_flags=flags)
    files = members(out)
    leaks = [(name, secret) for name, content in files.items() for secret in secrets
             if secret.lower().encode() in (name.encode() + content).lower()]
    leaks += [("bench.sqlite", secret) for text in _sqlite_text(out) for secret in secrets
              if secret.lower().encode() in text.lower()]
    assert leaks == []
    manifest = json.loads(files["zfsnas-capture/manifest.json"])
    assert manifest["anonymization"]["hostnames"] == 2  # ours and the other one (its short name goes with it)


def _sqlite_text(archive: Path) -> list[bytes]:
    """Every text value of the capture's bench database (its pages may be compressed in the member)."""
    import sqlite3

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            for member in tar:
                if member.name.endswith("bench.sqlite"):
                    path = Path(tmp) / f"{len(out)}.sqlite"
                    path.write_bytes(tar.extractfile(member).read())
                    db = sqlite3.connect(path)
                    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                        for row in db.execute(f'SELECT * FROM "{table}"'):
                            out += [str(v).encode() for v in row if isinstance(v, str)]
                    db.close()
    return out
