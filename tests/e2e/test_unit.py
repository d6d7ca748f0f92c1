"""The shipped systemd unit on live ZFS under the guest's systemd (PID 1), installed, upgraded and
uninstalled as docs/stack.md and docs/maintenance.md tell a Proxmox or Debian user
(tests/e2e/guest/unit.py does it and records; this file judges). 2.3: a venv (the Proxmox recipe);
2.1: pipx, first the previous version (tests/e2e/harness.py PREVIOUS), then this one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.conftest import FIXTURES, samples
from tests.e2e.conftest import require_phase

pytestmark = pytest.mark.e2e


# module scope: it must skip before the module's own module-scoped fixtures fail on missing results
@pytest.fixture(scope="module", autouse=True)
def _phase_in_this_run(config):
    require_phase(config, "unit")


ROOT = FIXTURES.parents[1]
DYNAMIC_UIDS = range(61184, 65520)   # systemd's DynamicUser= range
TODAYS_SCORE = 1.5                   # `systemd-analyze security` of the unit before issue 42 (docs/stack.md)
CAP_SYS_RAWIO, CAP_SYS_ADMIN = 17, 21
USER_FLAGS = "--datasets.refresh-interval=30"   # guest/unit.py: the user's drop-in, kept across the upgrade
# What an uninstall may leave: the benchmark data the docs say it keeps.
KEPT = re.compile(r"^/var/lib/zfsnas(/bench\.sqlite(-wal|-shm|\.lock)?)?$")


@pytest.fixture(scope="module")
def unit(results):
    out = results / "unit"
    if not (out / "record.json").exists():
        pytest.fail(f"the guest's unit phase recorded nothing: see {results / 'scenario.log'}")
    return out


@pytest.fixture(scope="module")
def record(unit) -> dict:
    return json.loads((unit / "record.json").read_text())


def step(record: dict, name: str) -> None:
    """The step ran through; else its traceback is the message."""
    got = record["steps"].get(name)
    assert got is not None, f"the unit phase did not reach {name}: steps {list(record['steps'])}"
    assert got["ok"], f"unit step {name} failed:\n{got.get('error')}"


def page(unit, name: str) -> dict:
    path = unit / f"{name}.txt"
    assert path.exists(), f"no {name}.txt: the step that scrapes it did not get there"
    return samples(path.read_text())


def by_label(data: dict, metric: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: v for (name, labels), v in data.items() if name == metric}


def all_succeed(data: dict, what: str, smart: bool = False) -> None:
    """Every collector's success 1, and every source's; without the SMART drop-in (`smart` False)
    smartctl runs but may not open the disks, and the smart collector says so: success 0 beside
    zfs_disk_smart_unavailable{reason="permission_denied"}, as docs/disks.md#smart says."""
    collectors = by_label(data, "zfs_exporter_collector_success", "collector")
    sources = by_label(data, "zfs_exporter_source_success", "source")
    smart_success = collectors.pop("smart", None)
    assert collectors and set(collectors.values()) == {1.0}, f"{what}: collectors {collectors}"
    assert smart_success == (1.0 if smart else 0.0), f"{what}: smart collector {smart_success}"
    unavailable = by_label(data, "zfs_disk_smart_unavailable", "reason")
    assert unavailable == ({} if smart else {"permission_denied": 1.0}), f"{what}: SMART unavailable {unavailable}"
    # smartctl itself runs either way (its source 1): the disks refuse it, which the collector says
    assert sources and set(sources.values()) == {1.0} and "smartctl" in sources, f"{what}: sources {sources}"


def test_installed_and_enabled_as_documented(record):
    first = ("install_previous", "previous_running", "upgrade") if record["previous"] else ("install", "first_answer")
    for name in first:
        step(record, name)
    shown = record["process"]["first"]["show"]
    assert shown["ActiveState"] == "active" and shown["DynamicUser"] == "yes", shown


def test_the_running_exporter_is_the_installed_wheels_code(record, unit):
    """Every checkout says version 0.1.0, so neither pip nor `--version` tells the new code from the
    old: after each install and upgrade the installed package is compared with the wheel file by file
    (guest/unit.py installed_is), the exporter answering afterwards was started after that check,
    and it says it answers on systemd's socket, which only this version's code does (the previous
    one listened itself). Once a `pipx install --force` of the new wheel left the old code in place,
    which could not listen under the new unit, and Restart= started it for ever."""
    installs = ("previous", "upgraded") if record["previous"] else ("first",)
    step(record, "install_previous" if record["previous"] else "install")
    installed = record.get("installed", {})
    for name in installs:
        assert name in installed, f"no check of the {name} install: {list(installed)}"
        got = installed[name]
        assert got["files_checked"] >= 20 and not got["differ"], (name, got)
    if record["previous"]:
        assert installed["previous"]["record_sha256"] != installed["upgraded"]["record_sha256"], \
            "the previous wheel and this one have the same files: the upgrade proves nothing"
    step(record, "upgrade" if record["previous"] else "first_answer")
    shown = record["process"]["first"]["show"]
    assert int(shown["ExecMainStartTimestampMonotonic"]) > installed[installs[-1]]["monotonic_us"], \
        ("the exporter answering was started before the new code was installed", shown, installed[installs[-1]])
    step(record, "journal")
    entries = json.loads((unit / "journal.json").read_text())
    starts = [e["message"] for e in entries if e["invocation"] == shown["InvocationID"]
              and e["message"].startswith("zfsnas-exporter ") and "; listening on http://" in e["message"]]
    assert len(starts) == 1 and starts[0].endswith(" (systemd's socket)"), starts


def test_the_upgrade_documented_before_left_the_old_code_and_the_check_sees_it(record, unit):
    """The negative control of the files check, and the evidence of the defect it guards against
    (guest/unit.py upgrade_as_before): `pipx install --force <wheel>` (pipx 1.1.0, Debian 12) left
    the previous code installed, and under the new unit and socket that code could not listen, exited
    and was started again by Restart=. (Should a later pipx or pip replace the files, this fails:
    docs/maintenance.md's reason for --pip-args=--force-reinstall would then need a new look.)"""
    if not record["previous"] or record["install"] != "pipx":
        pytest.skip("only the 2.1 guest upgrades with pipx")
    step(record, "upgrade_as_before")
    check = record["installed"]["as_before"]
    assert check["files_checked"] >= 20 and len(check["differ"]) >= 20, check
    assert check["record_sha256"] == record["installed"]["upgraded"]["record_sha256"], "not the new wheel checked"
    before = record["as_before"]
    journal = "\n".join(before["messages"])
    assert before["restarted"] and before["restarts"] >= 1, (before, (unit / "journal-as_before.txt").read_text()[-2000:])
    assert "cannot listen on :9923" in journal and "(systemd's socket)" not in journal, journal


def test_the_first_answer_is_complete_with_every_collector_succeeding(record, unit, expect):
    """Every collector and source, the unprivileged unit on live ZFS: the zpool and zfs commands,
    the kstats, udev's database, /proc/diskstats and `zpool events -f`; disks and pools in the first answer."""
    data = page(unit, "first")
    all_succeed(data, "the unit's first answer")
    health = by_label(data, "zfs_pool_health", "pool")
    assert {"tank", "fast"} <= set(health), health
    serials = set(by_label(data, "zfs_disk_info", "serial"))
    assert {"ZNS0001", "ZNC0001", "ZNV0001", "ZNV0005"} <= serials, serials
    datasets = set(by_label(data, "zfs_dataset_used_bytes", "dataset"))
    assert set(expect) <= datasets, datasets


def test_zpool_events_are_followed(record, unit):
    step(record, "events")
    data = page(unit, "events")
    assert by_label(data, "zfs_exporter_source_success", "source")["zpool_events"] == 1
    fast = {dict(labels)["class"]: v for (name, labels), v in data.items()
            if name == "zfs_pool_events_total" and dict(labels).get("pool") == "fast"}
    assert any("scrub_finish" in c and v >= 1 for c, v in fast.items()), f"events of fast counted: {fast}"


def test_the_journal_holds_the_start_up_line_and_nothing_else(record, unit):
    """Per start of the process (invocation), at info and above: the one start-up line (what is
    served and where), and the line saying it stops. Without the SMART drop-in also the one line
    the unit documents for that case (smartctl may not open the disks: SMART unavailable), and
    no other warning; with the drop-in none."""
    step(record, "journal")
    step(record, "smart")
    entries = json.loads((unit / "journal.json").read_text())
    assert entries, "no journal entries of the unit's process"
    with_smart = record["process"]["smart"]["show"]["InvocationID"]
    # the old version's own, and its code started by the new unit (the upgrade as it was documented before)
    previous = {record["process"].get("previous", {}).get("show", {}).get("InvocationID"),
                *record.get("as_before", {}).get("invocations", [])}
    invocations: dict[str, list[tuple[int, str]]] = {}
    for entry in entries:
        if entry["priority"] <= 6 and entry["invocation"] not in previous:
            invocations.setdefault(entry["invocation"], []).append((entry["priority"], entry["message"]))
    assert with_smart in invocations and len(invocations) >= 4, invocations   # first, restart, kill, SMART
    for invocation, lines in invocations.items():
        starts = [m for p, m in lines if m.startswith("zfsnas-exporter ") and "; listening on http://" in m]
        smart = [(p, m) for p, m in lines
                 if m.startswith("smart: ") and 'zfs_disk_smart_unavailable{reason="permission_denied"}' in m]
        others = [(p, m) for p, m in lines if not m.startswith("zfsnas-exporter ") and (p, m) not in smart
                  and m != "shutting down"]
        assert len(starts) == 1 and not others, f"invocation {invocation}: {lines}"
        expected_smart = [] if invocation == with_smart else [4]
        assert [p for p, _ in smart] == expected_smart, f"invocation {invocation}: {lines}"


def test_the_sandbox_is_applied(record):
    """As the kernel sees the process: a dynamic user, CAP_SYS_ADMIN its only capability, no new
    privileges, a seccomp filter; in its mount namespace /etc is read-only even for root and no other user's process is
    visible."""
    for name in ("first", "restarted", "after_kill"):
        process = record["process"][name]
        status = process["status"]
        uid = int(status["Uid"].split()[0])
        assert uid in DYNAMIC_UIDS and status["Uid"].split() == [str(uid)] * 4, (name, status)
        # CAP_SYS_ADMIN alone, for `zpool events` (deploy/zfsnas-exporter.service says why)
        assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 1 << CAP_SYS_ADMIN, (name, status)
        assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", (name, status)
        touch = process["touch_etc"]
        assert touch["rc"] != 0 and "Read-only file system" in touch["stderr"], (name, touch)
        # `ls /proc` as its user in its mount namespace: at most that user's own processes (not even
        # the exporter, whose capability a plain process of its uid lacks), none of the guest's others
        seen = process["proc_seen"]
        assert seen["rc"] == 0 and seen["pids"] and 1 not in seen["pids"], (name, seen)
        assert {owner for owner in seen["owners"].values() if owner is not None} <= {str(uid)}, (name, seen)
        assert len(seen["pids"]) <= 3 < process["processes_in_guest"], (name, len(seen["pids"]), process["processes_in_guest"])


def test_systemd_analyze_scores_the_unit_at_most_as_before(record, unit):
    step(record, "security")
    text = (unit / "security.txt").read_text()
    score = re.search(r"Overall exposure level for zfsnas-exporter.service: (\d+\.\d) (\w+)", text)
    assert score, text[-2000:]
    assert float(score[1]) <= TODAYS_SCORE, score[0]
    binary = shutil.which("systemd-analyze")
    if binary:   # the same score offline on the host for the shipped file: what docs/stack.md states
        offline = subprocess.run([binary, "security", "--offline=true", "--no-pager",
                                  str(ROOT / "deploy/zfsnas-exporter.service")], capture_output=True, text=True).stdout
        assert f"exposure level for zfsnas-exporter.service: {score[1]}" in offline, (score[0], offline[-300:])


def test_restart_and_a_killed_process_come_back_with_the_same_flags(record, unit):
    step(record, "restart")
    step(record, "kill")
    assert record["restart"]["after"] not in (0, record["restart"]["before"]), record["restart"]
    kill = record["kill"]
    assert kill["after"] not in (0, kill["before"]) and kill["restarts_after"] == kill["restarts_before"] + 1, kill
    cmdlines = {name: record["process"][name]["cmdline"] for name in ("first", "restarted", "after_kill")}
    assert len({tuple(c) for c in cmdlines.values()}) == 1, cmdlines
    for name in ("restarted", "after_kill"):
        all_succeed(page(unit, name), name)


def test_the_smart_drop_in_reads_smart(record, unit):
    step(record, "smart")
    data = page(unit, "smart")
    all_succeed(data, "with the SMART drop-in", smart=True)
    states = {dict(labels)["serial"]: dict(labels)["state"] for (name, labels), v in data.items()
              if name == "zfs_disk_smart_state" and v == 1}
    assert {serial: states.get(serial) for serial in ("ZNS0001", "ZNS0002")} == {"ZNS0001": "ok", "ZNS0002": "ok"}, states
    status = record["process"]["smart"]["status"]
    assert int(status["CapEff"], 16) == (1 << CAP_SYS_RAWIO) | (1 << CAP_SYS_ADMIN), status


def test_upgrade_keeps_the_flags_and_migrates_the_bench_store_once(record, unit):
    if not record["previous"]:
        pytest.skip("this guest installs the current version only (the 2.1 guest upgrades)")
    from zfsnas.store.schema import SCHEMA_VERSION, TABLES

    step(record, "previous_bench")
    before, after = record["process"]["previous"]["cmdline"], record["process"]["first"]["cmdline"]
    assert before == after and USER_FLAGS in after, (before, after)
    bench = record["bench"]
    wanted = {table: [column.split()[0] for column in columns] for table, columns in TABLES.items()}
    assert bench["previous"]["results"] >= 1 and bench["previous"]["tables"]["results"] != wanted["results"], \
        "the previous version's store should lack columns this version adds"
    # readers (the exporter, `zfsnas-bench list`) leave it as it is; the first writer migrates it,
    # the second finds nothing left to do
    assert bench["upgraded"] == bench["previous"] and bench["after_list"] == bench["previous"], bench
    migrated = bench["first_writer"]
    assert {t: migrated["tables"][t] for t in wanted} == wanted and migrated["user_version"] == SCHEMA_VERSION, migrated
    assert migrated["results"] == bench["previous"]["results"] and all(migrated["config_ids"]), migrated
    assert bench["second_writer"] == migrated, bench["second_writer"]
    for name in ("previous_bench", "upgraded_bench"):
        served = by_label(page(unit, name), "zfs_bench_throughput_bytes_per_second", "matrix")
        assert served.get("upgrade", 0) > 0, (name, served)


def test_uninstall_leaves_only_the_data_the_docs_keep(record, unit):
    step(record, "uninstall")
    before = set((unit / "listing_before.txt").read_text().splitlines())
    after = set((unit / "listing_after.txt").read_text().splitlines())
    left = sorted(line for line in after - before if not KEPT.match(line.split(" ", 1)[1]))
    assert not left, f"left behind by install + uninstall: {left[:40]}"
    assert not before - after, f"removed by install + uninstall: {sorted(before - after)[:40]}"
