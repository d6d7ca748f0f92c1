"""The day a disk dies on live OpenZFS (guest/failures.py): at each failure state, what the exporter
served against what `zpool status`/`list` and the state kstats said at that moment, and the alerts
that must fire: through promtool on the served series (held for the alert's `for`), and for
ZfsPoolResilvering in the harness's own Prometheus, which evaluated our rules during the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import require_phase

from .conftest import Capture, vdev_guids

pytestmark = pytest.mark.e2e


# module scope: it must skip before the module's own module-scoped fixtures fail on missing results
@pytest.fixture(scope="module", autouse=True)
def _phase_in_this_run(config):
    require_phase(config, "failures")


ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "zfsnas.rules.yml"
HEALTH_STATES = ("ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "UNAVAIL", "REMOVED", "SUSPENDED")
MOMENTS = ("removed", "resilvering", "readded", "faulted", "exported", "aux_missing", "data_errors", "suspended",
           "expanding")
BY_ID = "/dev/disk/by-id/"


PHASE_OF = {"removed": "hotplug", "resilvering": "hotplug", "readded": "hotplug", "faulted": "lab",
            "exported": "lab", "aux_missing": "lab", "data_errors": "single", "suspended": "single",
            "expanding": "expansion"}


@pytest.fixture(scope="module")
def failures(results) -> Path:
    path = results / "failures"
    if not path.is_dir():
        pytest.fail(f"the guest ran no failure phase: see {results / 'scenario.log'}")
    return path


@pytest.fixture(scope="module")
def record(failures) -> dict:
    return json.loads((failures / "record.json").read_text())


def moment(failures: Path, name: str) -> Capture:
    """One moment of the failure phases; its phase's traceback when the guest did not get there."""
    if name == "expanding" and os.environ.get("ZFSNAS_E2E_FLAVOUR") == "2.1":
        pytest.skip("RAID-Z expansion arrived in OpenZFS 2.3")
    error = failures / f"{PHASE_OF[name]}.error.txt"
    if not (failures / name / "metrics.txt").exists() and error.exists():
        pytest.fail(f"[{name}] the guest's {PHASE_OF[name]} phase failed before it:\n{error.read_text()[-3000:]}")
    return Capture(failures / name)


def states(cap: Capture) -> dict:
    return json.loads((cap.path / "states.json").read_text())


class Vdev:
    def __init__(self, pool: str, name: str, state: str, errors: tuple[str, str, str] | None, role: str):
        self.pool, self.name, self.state, self.errors, self.role = pool, name, state, errors, role


def status_tree(text: str) -> list[Vdev]:
    """Every vdev row of `zpool status -P` (the pool's own row included), with its section's role."""
    out: list[Vdev] = []
    pool, role, inside = "", "data", False
    roles = {"logs": "log", "cache": "cache", "spares": "spare", "special": "special", "dedup": "dedup"}
    for line in text.splitlines():
        if line.strip().startswith("pool:"):
            pool, inside = line.split(":", 1)[1].strip(), False
        elif re.match(r"\tNAME\s+STATE", line):
            inside, role = True, "data"
        elif inside and not line.strip():
            inside = False
        elif inside and line.startswith("\t"):
            parts = line.split()
            if len(parts) == 1 and parts[0] in roles:
                role = roles[parts[0]]
            elif len(parts) >= 2:
                errors = tuple(parts[2:5]) if len(parts) >= 5 and parts[1] not in ("INUSE", "AVAIL") else None
                out.append(Vdev(pool, parts[0], parts[1], errors, role))
    return out


def scan_figures(text: str, pool: str) -> dict:
    """The `scan:` block of one pool in `zpool status`: its first line and byte figures."""
    block = text.split(f"pool: {pool}\n", 1)[1].split("config:", 1)[0]
    scan = block.split("scan:", 1)[1]
    out = {"line": scan.splitlines()[0].strip()}
    if match := re.search(r"(\S+) / (\S+) scanned.*?, (\S+) / \S+ issued", scan):
        out.update(examined=match[1], total=match[2], issued=match[3])
    elif match := re.search(r"(\S+) scanned.*?, (\S+) issued.*?, (\S+) total", scan):
        out.update(examined=match[1], issued=match[2], total=match[3])
    return out


def nicebytes(text: str) -> int:
    number, unit = re.fullmatch(r"([\d.]+)([BKMGTPE]?)", text).groups()
    return int(round(float(number) * 1024 ** "BKMGTPE".index(unit or "B")))


def check_tree(cap: Capture, pools: set[str]) -> None:
    """zfs_vdev_state of every vdev of `pools` as `zpool status -P/-gP` printed it, and their error counts."""
    tree = [v for v in status_tree(cap.command("zpool_status_P.txt")) if v.pool in pools]
    guids = vdev_guids(cap.command("zpool_status_gP.txt"), cap.command("zpool_status_P.txt")) \
        if (cap.path / "commands" / "zpool_status_gP.txt").exists() else {}
    assert {v.pool for v in tree} == pools, f"[{cap.name}] zpool status -P lists {sorted({v.pool for v in tree})}"
    for vdev in tree:
        served = [labels for labels, value in cap.series("zfs_vdev_state", pool=vdev.pool, vdev=vdev.name,
                                                         role=vdev.role) if value == 1]
        assert [s["state"] for s in served] == [vdev.state], (
            f"[{cap.name}] zfs_vdev_state{{pool={vdev.pool},vdev={vdev.name},role={vdev.role}}}: expected state "
            f"{vdev.state} (zpool status -P), served {served}")
        if vdev.name.startswith("/") and vdev.name in guids:
            assert served[0]["vdev_guid"] == guids[vdev.name], f"[{cap.name}] {vdev.name}: guid {guids[vdev.name]}"
        if vdev.errors and all(e.isdigit() for e in vdev.errors):
            for kind, count in zip(("read", "write", "checksum"), vdev.errors):
                got = cap.series("zfs_vdev_errors", pool=vdev.pool, vdev=vdev.name, role=vdev.role, type=kind)
                assert [v for _, v in got] == [int(count)], (
                    f"[{cap.name}] zfs_vdev_errors{{vdev={vdev.name},type={kind}}}: expected {count}, served {got}")


def check_health(cap: Capture, pools: set[str]) -> None:
    """In one scrape: zfs_pool_state as the state kstat said it (the same before and after the scrape),
    zfs_pool_health as `zpool list` said it, and the same state in all three (the kstat, zpool list,
    the `state:` line of zpool status). (The root vdev's row is compared by check_tree: on a
    suspended pool zpool status prints it ONLINE under `state: SUSPENDED`.)"""
    kstats = states(cap)
    status = cap.command("zpool_status_P.txt")
    for pool in pools:
        listed = cap.zpool_list[pool][9]
        said = re.search(r" state: (\S+)", status.split(f"pool: {pool}\n", 1)[1])[1]
        assert kstats["before"][pool] == kstats["after"][pool], f"[{cap.name}] {pool} moved: {kstats}"
        assert (kstats["after"][pool], said) == (listed, listed), \
            f"[{cap.name}] {pool}: state kstat {kstats['after'][pool]}, zpool list {listed}, zpool status {said}"
        for state in HEALTH_STATES:
            assert cap.served("zfs_pool_health", pool=pool, state=state) == (state == listed), \
                f"[{cap.name}] zfs_pool_health{{pool={pool},state={state}}}: zpool list says {listed}"
            assert cap.served("zfs_pool_state", pool=pool, state=state) == (state == listed), \
                f"[{cap.name}] zfs_pool_state{{pool={pool},state={state}}}: the state kstat says {listed}"


def test_removed_disks(failures, record):
    cap = moment(failures, "removed")
    check_health(cap, {"tank", "fast"})
    check_tree(cap, {"tank", "fast"})
    for pool in ("tank", "fast"):
        assert cap.zpool_list[pool][9] == "DEGRADED"
        pulled = [v for v in status_tree(cap.command("zpool_status_P.txt")) if v.pool == pool and
                  v.state in ("REMOVED", "UNAVAIL")]
        assert len(pulled) == 1, f"[removed] {pool}: {[(v.name, v.state) for v in pulled]}"
    # the pulled disks left zfs_disk_info at once (hotplug), the others are still there
    serials = {labels["serial"] for labels, _ in cap.series("zfs_disk_info")}
    assert not {record["removed"]["fast"], record["removed"]["tank"]} & serials, sorted(serials)
    assert {"ZNC0001", "ZNC0003", "ZNS0005"} <= serials, sorted(serials)
    events = {(labels["pool"], labels["class"]): v for labels, v in cap.series("zfs_pool_events_total")}
    assert events.get(("tank", "statechange"), 0) >= 1 or events.get(("tank", "removed"), 0) >= 1, events


def test_resilver_onto_the_spare_and_onto_a_new_disk(failures, record):
    cap = moment(failures, "resilvering")
    check_tree(cap, {"tank", "fast"})
    status = cap.command("zpool_status_P.txt")
    tree = status_tree(status)
    assert any(v.pool == "tank" and v.name.startswith("spare-") for v in tree)
    assert any(v.pool == "fast" and v.name.startswith("replacing-") for v in tree)
    assert [v.state for v in tree if v.pool == "tank" and v.role == "spare"] == ["INUSE"]
    for pool in ("tank", "fast"):
        figures = scan_figures(status, pool)
        assert figures["line"].startswith("resilver in progress since"), figures
        assert cap.served("zfs_pool_scan_info", pool=pool, function="resilver", state="scanning") == 1
        for key, metric in (("issued", "zfs_pool_scan_issued_bytes"), ("total", "zfs_pool_scan_total_bytes"),
                            ("examined", "zfs_pool_scan_examined_bytes")):
            got = cap.served(metric, pool=pool, function="resilver")
            assert got == nicebytes(figures[key]), f"[resilvering] {metric}{{pool={pool}}}: expected " \
                                                   f"{figures[key]} (zpool status, held), served {got}"
    assert record.get("prometheus_saw_resilvering"), "the host's Prometheus never fired ZfsPoolResilvering"


def test_disk_back_and_resilvered(failures, record):
    cap = moment(failures, "readded")
    check_health(cap, {"tank", "fast"})
    check_tree(cap, {"tank", "fast"})
    assert cap.zpool_list["tank"][9] == cap.zpool_list["fast"][9] == "ONLINE"
    status = cap.command("zpool_status_P.txt")
    for pool in ("tank", "fast"):
        assert scan_figures(status, pool)["line"].startswith("resilvered "), scan_figures(status, pool)
        assert cap.served("zfs_pool_scan_info", pool=pool, function="resilver", state="finished") == 1
    assert [v.state for v in status_tree(status) if v.pool == "tank" and v.role == "spare"] == ["AVAIL"]
    disks = {labels["serial"]: labels for labels, _ in cap.series("zfs_disk_info")}
    assert disks[record["removed"]["tank"]]["pool"] == "tank", disks.get(record["removed"]["tank"])
    assert disks["ZNC0009"]["pool"] == "fast", disks.get("ZNC0009")
    assert record["removed"]["fast"] not in disks


def test_failing_device_faulted_with_errors_and_vdev_roles(failures, record):
    """One side of a mirror fails every I/O: FAULTED with its error counts. (Seen on 2.3.2: the pool
    and the mirror stay ONLINE beside a disk faulted for `too many errors`: ZfsPoolNotOnline says
    nothing, ZfsVdevNotOnline does.)"""
    cap = moment(failures, "faulted")
    dev = record["lab_devices"]
    check_health(cap, {"lab"})
    check_tree(cap, {"lab"})
    tree = [v for v in status_tree(cap.command("zpool_status_P.txt")) if v.pool == "lab"]
    assert [v.state for v in tree if v.name == dev["labB"]] == ["FAULTED"]
    [(_, written)] = cap.series("zfs_vdev_errors", pool="lab", vdev=dev["labB"], type="write")
    assert written > 0
    assert {v.role for v in tree} == {"data", "special", "log", "cache", "spare"}
    fire(cap, {"zfs_vdev_state": {"pool": "lab"}}, "ZfsVdevNotOnline", [{"vdev": dev["labB"]}], minutes=5)
    # per-vdev space as zpool list -v printed it (the same command the exporter runs)
    rows = [line.split("\t") for line in cap.command("zpool_list_v.txt").splitlines() if line.startswith("\t")]
    listed = {fields[1]: fields[2:] for fields in rows}
    for vdev, role in (("mirror-0", "data"), (dev["labS"], "special"), (dev["labL"], "log"), (dev["labC"], "cache")):
        assert cap.served("zfs_vdev_size_bytes", pool="lab", vdev=vdev, role=role) == int(listed[vdev][0])
        if role != "cache":   # the L2ARC feed thread writes to the cache device every second: it moves
            assert cap.served("zfs_vdev_allocated_bytes", pool="lab", vdev=vdev, role=role) == int(listed[vdev][1])
    # what the L2ARC holds depends on whether its feed thread found anything to write yet (0 on a
    # run where it had not: 2.3.2 under load): served, and within the device's size
    cache = cap.served("zfs_vdev_allocated_bytes", pool="lab", vdev=dev["labC"], role="cache")
    assert 0 <= cache <= int(listed[dev["labC"]][0])
    assert cap.served("zfs_vdev_allocated_bytes", pool="lab", vdev=dev["labS"], role="special") > 0
    events = {labels["class"]: v for labels, v in cap.series("zfs_pool_events_total", pool="lab")}
    assert events.get("io", 0) >= 1 and events.get("statechange", 0) >= 1, events
    # every count zpool status printed above 0 fires, and nothing else of the pool
    nonzero = [{"vdev": v.name, "role": v.role, "type": kind} for v in tree if v.errors
               for kind, count in zip(("read", "write", "checksum"), v.errors) if count != "0"]
    assert {"vdev": dev["labB"], "role": "data", "type": "write"} in nonzero, nonzero
    fire(cap, {"zfs_vdev_errors": {"pool": "lab"}}, "ZfsVdevErrors", nonzero, minutes=2)


def test_exported_while_scraped_and_missing(failures):
    answers = json.loads((failures / "export_scrapes.json").read_text())
    assert answers and all(a.get("status") == 200 for a in answers), answers
    assert any(a["lab"] for a in answers) and not answers[-1]["lab"]
    cap = moment(failures, "exported")
    assert "lab" not in cap.zpool_list
    assert not cap.series("zfs_pool_health", pool="lab") and not cap.series("zfs_vdev_state", pool="lab")
    expected = {labels["pool"]: v for labels, v in cap.series("zfs_pool_expected_imported")}
    assert expected == {"tank": 1, "fast": 1, "lab": 0, "backup": 0}, expected
    fire(cap, {"zfs_pool_expected_imported": {}, "zfs_pool_state": {}, "zfs_exporter_collector_success": {}},
         "ZfsPoolMissing", [{"pool": "lab"}, {"pool": "backup"}], minutes=16)


def test_imported_without_cache_spare_and_key(failures):
    cap = moment(failures, "aux_missing")
    check_health(cap, {"lab"})
    check_tree(cap, {"lab"})
    assert cap.zpool_list["lab"][9] == "ONLINE"
    tree = [v for v in status_tree(cap.command("zpool_status_P.txt")) if v.pool == "lab"]
    aux = {v.role: v.state for v in tree if v.role in ("cache", "spare")}
    assert set(aux) == {"cache", "spare"} and set(aux.values()) <= {"UNAVAIL", "FAULTED", "REMOVED"}, aux
    keys = dict(line.split("\t") for line in cap.command("zfs_keystatus.txt").splitlines())
    assert keys["lab/secret"] == "unavailable"
    assert cap.served("zfs_dataset_key_loaded", pool="lab", dataset="lab/secret") == 0
    # the pool stays ONLINE: only the cache and the spare are alerted on
    fire(cap, {"zfs_vdev_state": {"pool": "lab"}}, "ZfsVdevNotOnline",
         [{"role": role, "state": state} for role, state in sorted(aux.items())], minutes=5)
    fire(cap, {"zfs_pool_state": {"pool": "lab"}}, "ZfsPoolNotOnline", [], minutes=5)
    fire(cap, {"zfs_dataset_key_loaded": {}}, "ZfsDatasetLocked", [{"pool": "lab", "dataset": "lab/secret"}], minutes=20)


def test_permanent_data_errors(failures, record):
    cap = moment(failures, "data_errors")
    check_health(cap, {"one"})
    check_tree(cap, {"one"})
    assert record["corrupted_spots"] > 0
    status = cap.command("zpool_status_P.txt").split("pool: one\n", 1)[1]
    errors = int(re.search(r"errors: (\d+) data errors", status)[1])
    assert errors > 0 and cap.served("zfs_pool_data_errors", pool="one") == errors
    assert "/one/data/victim.bin" in cap.command("zpool_status_v.txt")
    [checksum] = [v for labels, v in cap.series("zfs_vdev_errors", pool="one", type="checksum")
                  if labels["vdev"].startswith("/dev/mapper/")]
    assert checksum > 0
    fire(cap, {"zfs_pool_data_errors": {}}, "ZfsPoolDataErrors", [{"pool": "one"}], minutes=1)


def test_suspended_pool_scrapes_answer(failures):
    scrapes = json.loads((failures / "suspended_scrapes.json").read_text())
    assert len(scrapes) == 2 and all(s["suspended"] for s in scrapes), scrapes
    assert max(s["nominal_seconds"] for s in scrapes) < 30, scrapes   # at the guest's pace (guest/pace.py)
    cap = moment(failures, "suspended")
    assert states(cap)["after"]["one"] == "SUSPENDED"
    assert cap.served("zfs_pool_state", pool="one", state="SUSPENDED") == 1
    exits = states(cap)["exits"]
    if exits["zpool_list.txt"] == 0:   # zpool list answered on the suspended pool: health agrees
        check_health(cap, {"one"})
    fire(cap, {"zfs_pool_state": {"pool": "one"}}, "ZfsPoolNotOnline", [{"state": "SUSPENDED"}], minutes=5)


def test_raidz_expansion_progress(failures):
    cap = moment(failures, "expanding")
    status = cap.command("zpool_status_P.txt").split("pool: grow\n", 1)[1].split("config:", 1)[0]
    match = re.search(r"expansion of (\S+) in progress since .*\n\t(\S+) / (\S+) copied at (\S+)/s", status)
    assert match, status
    assert cap.served("zfs_pool_expansion_info", pool="grow", vdev=match[1], state="expanding") == 1
    assert cap.served("zfs_pool_expansion_copied_bytes", pool="grow", vdev=match[1]) == nicebytes(match[2])
    assert cap.served("zfs_pool_expansion_total_bytes", pool="grow", vdev=match[1]) == nicebytes(match[3])
    assert cap.served("zfs_pool_expansion_rate_bytes_per_second", pool="grow", vdev=match[1]) > 0


# --- alerts on the served series ------------------------------------------------------------------

# The labels each alert keeps of the series it fires on (its `by`), where it does not keep them all.
ALERT_LABELS = {"ZfsDatasetLocked": ("pool", "dataset")}


def fire(cap: Capture, inputs: dict[str, dict], alert: str, want: list[dict], minutes: int = 10,
         severity: str = "critical") -> None:
    """promtool on the moment's served samples (`inputs`: metric -> labels they must have), held for
    20 minutes: at `minutes`, exactly the alerts on the series of the first metric matching one of
    `want` (partial label sets; [] for none) fire. Where several rules share the alert's name (a
    page and a warning, as ZfsPoolMissing's), the expected ones are those of the `severity` rule
    (and the others must stay silent)."""
    series, first = [], next(iter(inputs))
    for metric, selector in inputs.items():
        for labels, value in cap.series(metric, **selector):
            text = ", ".join(f'{k}="{v}"' for k, v in sorted({**labels, "instance": "guest", "job": "zfsnas"}.items()))
            series.append({"series": f"{metric}{{{text}}}", "values": f"{value:g}x20"})
    named = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if r.get("alert") == alert]
    assert named, f"no alert rule named {alert} in {RULES}"
    rule = named[0] if len(named) == 1 else next(r for r in named if r["labels"]["severity"] == severity)
    expected = []
    for partial in want:
        matched = [labels for labels, _ in cap.series(first, **{**inputs[first], **partial})]
        assert matched, f"[{cap.name}] {alert}: nothing served as {first}{partial}"
        for labels in matched:
            keep = ALERT_LABELS.get(alert, tuple(labels))
            expected.append({"exp_labels": {**{k: labels[k] for k in keep}, **rule["labels"], "instance": "guest",
                                            "job": "zfsnas"}})
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:   # labels only: the annotations' text is alerts/tests/'s to check
        for r in group["rules"]:
            r.pop("annotations", None)
    (cap.path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": f"{minutes}m", "alertname": alert, "exp_alerts": expected}]}]}
    path = cap.path / f"promtool-{alert}.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"[{cap.name}] {alert} on the served series:\n{proc.stdout[-3000:]}{proc.stderr}"
