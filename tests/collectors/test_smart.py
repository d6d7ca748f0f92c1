"""Collector `smart` on the disk fixture tree, smartctl answered by the stand-in from tests/fixtures/smart:
labels joined to zfs_disk_info, a sleeping disk's kept values, the USB retry, the flags, and what
happens without smartctl, without privileges or with a broken disk."""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import sys

import pytest

from tests.conftest import FIXTURES, collected, exporter_args, make_collector, samples, scrape_text, types, value
from zfsnas.collectors.smart import SmartCollector
from zfsnas.exposition import render
from zfsnas.refresh import BackgroundRefresher
from zfsnas.sources.commands import CommandRunner
from zfsnas.sources.model import VdevStatus
from zfsnas.sources.smart import smartctl_argv
from zfsnas.wiring import build_exporter

TREE = FIXTURES / "linux-disks"
PATHS = ["--path.procfs", str(TREE / "proc"), "--path.sysfs", str(TREE / "sys"),
         "--path.udev.data", str(TREE / "udev" / "data"), "--no-disks.hotplug"]
STANDIN = FIXTURES / "commands" / "standin.py"
JOIN = ("device", "serial", "pool", "vdev_guid")


def prefix(directory, *options: str) -> list[str]:
    return ["--zfs.command-prefix", shlex.join([sys.executable, str(STANDIN), *options, str(directory)])]


def flags(read: str = "awake", *extra: str, collectors=("disks", "smart")) -> list[str]:
    return [*PATHS, "--collector.disable-defaults", *(f"--collector.{c}" for c in collectors),
            *prefix(FIXTURES / "smart" / read), *extra]


def labels_of(text: str, metric: str) -> dict[str, dict]:
    return {dict(k[1])["device"]: dict(k[1]) for k in samples(text) if k[0] == metric}


def disk(text: str, metric: str, device: str, **extra) -> float:
    info = labels_of(text, "zfs_disk_smart_state")[device]
    return value(text, metric, **{k: info[k] for k in JOIN}, **extra)


def test_every_disk_carries_its_zfs_disk_info_labels():
    text = scrape_text(*flags())
    info = labels_of(text, "zfs_disk_info")
    smart = [dict(k[1]) for k in samples(text) if k[0].startswith("zfs_disk_smart_")]
    assert len(smart) > 100
    for labels in smart:  # the join labels are exactly zfs_disk_info's, so `on (serial)` and `on (device)` both join
        assert {k: labels[k] for k in JOIN} == {k: info[labels["device"]][k] for k in JOIN}
    assert info["sdc"]["pool"] == "tank" and disk(text, "zfs_disk_smart_pending_sectors", "sdc") == 8
    assert disk(text, "zfs_disk_smart_temperature_celsius", "sdb") == 33
    assert disk(text, "zfs_disk_smart_temperature_max_celsius", "sdb", period="lifetime") == 47
    assert disk(text, "zfs_disk_smart_power_on_seconds_total", "sdd") == 31500 * 3600 + 720
    assert disk(text, "zfs_disk_smart_scsi_uncorrected_errors_total", "sdd", operation="verify") == 1
    assert disk(text, "zfs_disk_smart_nvme_written_bytes_total", "nvme0n1") == 20e12
    assert disk(text, "zfs_disk_smart_self_test_info", "sdc", type="short", result="failed") == 1
    assert disk(text, "zfs_disk_smart_self_test_age_seconds", "sdc", type="short") == 10 * 3600
    assert disk(text, "zfs_disk_smart_info", "sde", protocol="ATA", device_type="sat", model="WDC WD20SPZX-22UA7T0",
                firmware="01.01A01", media="hdd") == 1  # read through -d sat: the disk, not the bridge
    assert disk(text, "zfs_disk_smart_state", "vda", state="unsupported") == 1
    assert disk(text, "zfs_disk_smart_state", "vda", state="ok") == 0
    assert "zfs_disk_smart_temperature_celsius" not in {k[0] for k in samples(text) if dict(k[1]).get("device") == "vda"}
    kinds = types(text)
    assert kinds["zfs_disk_smart_power_on_seconds_total"] == "counter" and kinds["zfs_disk_smart_pending_sectors"] == "gauge"
    assert value(text, "zfs_exporter_collector_success", collector="smart") == 1
    assert value(text, "zfs_exporter_source_success", source="smartctl") == 1


def read_again(exporter, directory, *options: str) -> None:
    smart = next(c for c in exporter.collectors if c.name == "smart")
    smart.ctx.commands.prefix = [sys.executable, str(STANDIN), *options, str(directory)]
    assert smart.refresher.refresh_now()


def test_a_sleeping_disk_keeps_its_last_values_and_their_time():
    exporter = build_exporter(exporter_args(*flags()), process_metrics=False)
    try:
        first = exporter.render()
        read_again(exporter, FIXTURES / "smart" / "later")
        later = exporter.render()
    finally:
        exporter.stop()
    assert disk(later, "zfs_disk_smart_state", "sdb", state="standby") == 1
    assert disk(later, "zfs_disk_smart_temperature_celsius", "sdb") == 33  # from the read before it slept
    assert disk(later, "zfs_disk_smart_read_timestamp_seconds", "sdb") == 1795752000
    assert disk(later, "zfs_disk_smart_pending_sectors", "sdc") == 24 > disk(first, "zfs_disk_smart_pending_sectors", "sdc")
    assert disk(later, "zfs_disk_smart_read_timestamp_seconds", "sdc") == 1795752000 + 86400
    assert value(later, "zfs_exporter_collector_success", collector="smart") == 1  # asleep is no failure


def test_a_disk_asleep_from_the_start_shows_only_its_state(tmp_path):
    directory = answers(tmp_path, {"sdb": "standby.json"})
    text = scrape_text(*flags(), *prefix(directory))
    assert disk(text, "zfs_disk_smart_state", "sdb", state="standby") == 1
    assert {k[0] for k in samples(text) if dict(k[1]).get("device") == "sdb" and k[0].startswith("zfs_disk_smart")} \
        == {"zfs_disk_smart_state"}


def commands_run(log) -> list[str]:
    return [line.split(" ", 3)[3] for line in log.read_text().splitlines() if line.startswith("start ")]


def test_an_unknown_usb_bridge_is_read_with_sat_from_then_on(tmp_path):
    log = tmp_path / "log"
    exporter = build_exporter(exporter_args(*flags(), *prefix(FIXTURES / "smart" / "awake", "--log", str(log))),
                              process_metrics=False)
    try:
        exporter.render()
        first = [c for c in commands_run(log) if c.endswith("/dev/sde")]
        log.unlink()
        read_again(exporter, FIXTURES / "smart" / "awake", "--log", str(log))
        second = [c for c in commands_run(log) if c.endswith("/dev/sde")]
    finally:
        exporter.stop()
    assert first == [shlex.join(smartctl_argv("/dev/sde")), shlex.join(smartctl_argv("/dev/sde", "sat"))]
    assert second == [shlex.join(smartctl_argv("/dev/sde", "sat"))]
    assert len(commands_run(log)) == 7  # one command a disk


def test_device_type_flag_for_one_disk_and_for_all(tmp_path):
    log = tmp_path / "log"
    scrape_text(*flags(), "--smart.device-type", "/dev/sde=sat", *prefix(FIXTURES / "smart" / "awake", "--log", str(log)))
    assert [c for c in commands_run(log) if c.endswith("/dev/sde")] == [shlex.join(smartctl_argv("/dev/sde", "sat"))]
    log.unlink()
    scrape_text(*flags(), "--smart.device-type", "sat", *prefix(FIXTURES / "smart" / "awake", "--log", str(log)))
    assert all("--device=sat" in c for c in commands_run(log)) and len(commands_run(log)) == 7
    for bad in ("sat;rm", "sd/a=sat", "=", "SAT"):
        with pytest.raises(SystemExit, match="--smart.device-type"):
            build_exporter(exporter_args(*flags(), "--smart.device-type", bad))


def answers(tmp_path, replace: dict[str, str]):
    """A stand-in directory answering like tests/fixtures/smart/awake but with these disks' answers."""
    directory = tmp_path / "answers"
    directory.mkdir()
    index = json.loads((FIXTURES / "smart" / "awake" / "index.json").read_text())
    for line, entry in index["commands"].items():
        device = line.rsplit("/", 1)[1]
        name = replace.get(device, entry["stdout"].removeprefix("../"))
        if not (directory / name).exists():
            source = FIXTURES / "smart" / name
            shutil.copy(source, directory / name) if source.exists() else None
        status = json.loads((directory / name).read_text())["smartctl"]["exit_status"] if name.endswith(".json") else 2
        index["commands"][line] = {"stdout": name, "status": status}
    (directory / "index.json").write_text(json.dumps(index))
    return directory


def test_a_broken_disk_fails_the_collector_and_the_others_are_served(tmp_path):
    directory = answers(tmp_path, {"sdb": "garbage.txt"})
    (directory / "garbage.txt").write_text("Segmentation fault\n")
    text = scrape_text(*flags(), *prefix(directory))
    assert value(text, "zfs_exporter_collector_success", collector="smart") == 0
    assert disk(text, "zfs_disk_smart_state", "sdb", state="failed") == 1
    assert disk(text, "zfs_disk_smart_pending_sectors", "sdc") == 8
    assert value(text, "zfs_exporter_collector_success", collector="disks") == 1


def unavailable_only(text: str) -> dict[str, float]:
    """What the smart collector serves when SMART cannot be read: {reason: value}, and nothing else of SMART."""
    served = {k: v for k, v in samples(text).items() if k[0].startswith("zfs_disk_smart")}
    assert {k[0] for k in served} == {"zfs_disk_smart_unavailable"}, served
    return {dict(k[1])["reason"]: v for k, v in served.items()}


def test_without_smartctl_the_collector_fails_and_says_why(tmp_path, monkeypatch, caplog):
    """SMART unavailable is never silent (issue 37): success 0 and a reason a dashboard can show."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no smartctl anywhere
    caplog.set_level(logging.INFO, "zfsnas")
    text = scrape_text(*PATHS, "--collector.disable-defaults", "--collector.disks", "--collector.smart")
    assert unavailable_only(text) == {"smartctl_missing": 1}
    assert value(text, "zfs_exporter_collector_success", collector="smart") == 0
    assert value(text, "zfs_exporter_collector_success", collector="disks") == 1
    assert types(text)["zfs_disk_smart_unavailable"] == "gauge"
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("smart:")]
    assert said == ["smart: smartctl: command not found (install smartmontools 7.0 or later); the smart collector "
                    "serves only zfs_disk_smart_unavailable{reason=\"smartctl_missing\"} (docs/disks.md#smart)"]
    # Behind a command prefix (nsenter in a container) the prefix reports it: exit status 127.
    text = scrape_text(*PATHS, "--collector.disable-defaults", "--collector.disks", "--collector.smart",
                       "--zfs.command-prefix", f"{shutil.which('env', path='/usr/bin:/bin')} PATH={tmp_path}")
    assert unavailable_only(text) == {"smartctl_missing": 1}
    assert value(text, "zfs_exporter_collector_success", collector="smart") == 0


def test_without_privileges_the_collector_fails_and_says_why(tmp_path, caplog):
    """The stack's container without raw disk access, the unprivileged systemd unit."""
    directory = answers(tmp_path, {d: "denied.json" for d in ("sda", "sdb", "sdc", "sdd", "sde", "nvme0n1")})
    caplog.set_level(logging.INFO, "zfsnas")
    text = scrape_text(*flags(), *prefix(directory))
    assert unavailable_only(text) == {"permission_denied": 1}
    assert value(text, "zfs_exporter_collector_success", collector="smart") == 0
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("smart:")]
    assert "permission denied" in said and "CAP_SYS_RAWIO" in said and 'reason="permission_denied"' in said


def test_a_smartctl_without_json_is_too_old(tmp_path):
    directory = answers(tmp_path, {d: "old.txt" for d in ("sda", "sdb", "sdc", "sdd", "sde", "nvme0n1")})
    (directory / "old.txt").write_text("smartctl 6.6 2016-05-31 r4324\n=======> UNRECOGNIZED OPTION: json\n")
    text = scrape_text(*flags(), *prefix(directory))
    assert unavailable_only(text) == {"smartctl_too_old": 1}
    assert value(text, "zfs_exporter_collector_success", collector="smart") == 0


def test_once_readable_the_reason_goes(tmp_path):
    """The reason series is served only while SMART is unavailable."""
    directory = answers(tmp_path, {d: "denied.json" for d in ("sda", "sdb", "sdc", "sdd", "sde", "nvme0n1")})
    exporter = build_exporter(exporter_args(*flags(), *prefix(directory)), process_metrics=False)
    try:
        before = exporter.render()
        read_again(exporter, FIXTURES / "smart" / "awake")
        after = exporter.render()
    finally:
        exporter.stop()
    assert unavailable_only(before) == {"permission_denied": 1}
    assert "zfs_disk_smart_unavailable" not in {k[0] for k in samples(after)}
    assert value(after, "zfs_exporter_collector_success", collector="smart") == 1
    assert disk(after, "zfs_disk_smart_pending_sectors", "sdc") == 8


def test_without_the_disks_collector_it_finds_the_same_disks():
    both = scrape_text(*flags())
    alone = scrape_text(*flags(collectors=("smart",)))
    assert {k: v for k, v in samples(both).items() if k[0].startswith("zfs_disk_smart")} == \
        {k: v for k, v in samples(alone).items() if k[0].startswith("zfs_disk_smart")}


def test_a_new_disk_under_the_same_name_is_not_given_the_old_one_s_values():
    exporter = build_exporter(exporter_args(*flags()), process_metrics=False)
    try:
        exporter.render()
        smart = next(c for c in exporter.collectors if c.name == "smart")
        swapped = [i._replace(serial="NEWDISK01") if i.device == "sdb" else i for i in smart.ctx.disk_identities(0)]
        smart.ctx.disk_identities = lambda wait: swapped
        text = exporter.render()
        assert "sdb" not in labels_of(text, "zfs_disk_smart_state")  # values of the old disk: left out
        read_again(exporter, FIXTURES / "smart" / "later")  # the new disk sleeps: nothing of the old one is kept
        text = exporter.render()
    finally:
        exporter.stop()
    assert labels_of(text, "zfs_disk_smart_state")["sdb"]["serial"] == "NEWDISK01"
    assert {k[0] for k in samples(text) if dict(k[1]).get("device") == "sdb" and k[0].startswith("zfs_disk_smart")} \
        == {"zfs_disk_smart_state"}


def test_flags_and_defaults():
    args = exporter_args()
    assert args.smart_interval == 600 and args.smart_device_type is None and args.collector_smart is None
    smart = next(c for c in build_exporter(exporter_args(*PATHS)).collectors if c.name == "smart")
    assert smart.refresher.interval == 600 and smart.refresher.wait_for_start and not smart.needs_zfs
    assert exporter_args("--smart.interval", "1800").smart_interval == 1800


def test_without_sysfs_the_disks_come_from_smartctl_scan(tmp_path):
    """FreeBSD: no sysfs, so `smartctl --scan` lists the disks; each is labelled with the serial
    it reports and the pool whose `zpool status -P` leaf is one of its partitions."""
    nosys = tmp_path / "no-sysfs-here"
    vdevs = [VdevStatus("tank", "/dev/ada0p2", "1234", "data", "mirror-0", "ONLINE", 0, 0, 0, True)]
    status = BackgroundRefresher("zpool_status", lambda: vdevs, 60)
    status.refresh_now()
    args = exporter_args("--path.sysfs", str(nosys), *prefix(FIXTURES / "smart" / "freebsd"))
    text = render(collected(make_collector(SmartCollector, args, CommandRunner(args.command_prefix, 30),
                                           zpool_status=status)))
    assert {dict(k[1])["device"]: dict(k[1]) for k, v in samples(text).items() if k[0] == "zfs_disk_smart_state" and v} == {
        "ada0": {"device": "ada0", "serial": "WD-WCC7K1AAAAAA", "pool": "tank", "vdev_guid": "1234", "state": "ok"},
        "nvme0": {"device": "nvme0", "serial": "S4EWNX0N123456", "pool": "", "vdev_guid": "", "state": "ok"}}
    assert disk(text, "zfs_disk_smart_temperature_celsius", "ada0") == 33
    assert disk(text, "zfs_disk_smart_nvme_endurance_used_ratio", "nvme0") == 0.03
    # With the disks collector on (it finds nothing there) the scan is used all the same.
    text = scrape_text("--path.procfs", str(tmp_path), "--path.sysfs", str(nosys), "--collector.disable-defaults",
                       "--collector.disks", "--collector.smart", *prefix(FIXTURES / "smart" / "freebsd"))
    assert set(labels_of(text, "zfs_disk_smart_info")) == {"ada0", "nvme0"}


def test_before_the_first_read_there_is_nothing_and_nothing_wrong():
    from zfsnas.collectors.base import Report

    smart = next(c for c in build_exporter(exporter_args(*flags())).collectors if c.name == "smart")
    smart._started = True  # as after start(), its thread not yet through its first read
    report = Report("smart")
    assert list(smart.collect(report)) == [] and report.ok
