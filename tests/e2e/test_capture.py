"""`zfsnas-exporter capture` on live OpenZFS, replayed here with no ZFS (issue 15).

The guest (scenario.py `capture_roundtrip`) captured as root and as `nobody`, with and without
`--anonymize`, each between two scrapes of the live exporter (`live_before`, and `live_after` once
every background source had refreshed after the capture). Here each archive is replayed:
- the replay serves exactly what the capture's exporter served at capture time (`metrics.txt`):
  every sample of every family, counters equal; only timing and process samples may differ;
- against the live daemon, which read the same NAS a moment apart: the same families and series,
  every counter between the daemon's value before and after the capture, gauges there too (2 %
  slack: the ARC moves by itself), and equal everywhere in the anonymized captures once the
  daemon's labels are put through the capture's own pseudonyms (taken from its daemon-metrics.txt).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import samples
from tests.conftest import types as family_types
from tests.e2e.conftest import require_phase
from zfsnas.replay import ReplayExporter, open_capture
from zfsnas.wiring import default_config

pytestmark = pytest.mark.e2e


# module scope: it must skip before the module's own module-scoped fixtures fail on missing results
@pytest.fixture(scope="module", autouse=True)
def _phase_in_this_run(config):
    require_phase(config, "capture_roundtrip")


RUNS = ("root", "root-anonymized", "user", "user-anonymized")
TIMING = ("zfs_exporter_collector_duration_seconds", "zfs_exporter_source_age_seconds", "process_", "python_")
# Gauges that move on their own between two readings a second apart.
MiB = 1 << 20
MOVING = ("zfs_arc_", "zfs_l2arc_", "zfs_disk_io_now", "zfs_vdev_queue_")
# The guest's free memory as the ARC sees it: moved by every process, the capture itself included
# (seen 2.1 % outside the two readings on a busy host).
HOST_MEMORY = ("zfs_arc_memory_",)
# Counted by the exporter across its scrapes from the txg ring (collectors/txg.py TxgAccumulator):
# a capture's fresh exporter, like a restarted daemon, takes the ring it finds as its zero (issue 37).
# Read on their own, slower schedule (SMART: every --smart.interval, 10 minutes): the daemon serves
# its read from before the capture, which reads anew (and sees the self-test smart_phase ran since).
OWN_SCHEDULE = ("zfs_disk_smart_",)
ACCUMULATED = ("zfs_pool_txgs_synced_total", "zfs_pool_txg_written_bytes_total", "zfs_pool_txg_dirty_bytes_total",
               "zfs_pool_txgs_missed_total", "zfs_pool_txg_sync_seconds", "zfs_pool_txg_dirty_ratio")


# What only a running exporter has: the ZFS events it followed (`zpool events -f`); a capture renders once.
FOLLOWED = ("zfs_pool_events_total",)


def stable(text: str) -> dict:
    return {k: v for k, v in samples(text).items() if not k[0].startswith(TIMING + FOLLOWED)
            and ("source", "zpool_events") not in k[1]}


@pytest.fixture(scope="module")
def roundtrip(results):
    path = results / "capture_roundtrip"
    if not (path / "record.json").exists():
        pytest.fail(f"the guest did not run the capture round trip: see {results / 'scenario.log'}")
    return path


@pytest.fixture(scope="module")
def replayed(roundtrip):
    """{run: (manifest, [(metrics.txt, daemon-metrics.txt, replayed text, live-metrics.txt) per snapshot])}"""
    out = {}
    for run in RUNS:
        archive = roundtrip / f"{run}.tar.gz"
        if not archive.exists():
            continue
        capture = open_capture(archive)
        try:
            exporter = ReplayExporter(capture, default_config(), process_metrics=False)
            snaps = []
            for snap in capture.snapshots:
                daemon = snap / "daemon-metrics.txt"
                snaps.append(((snap / "metrics.txt").read_text(), daemon.read_text() if daemon.exists() else None,
                              exporter.render(), (snap / "live-metrics.txt").read_text()))
            out[run] = (capture.manifest, snaps)
        finally:
            capture.close()
    return out


@pytest.mark.parametrize("run", RUNS)
def test_capture_ran(roundtrip, run):
    record = json.loads((roundtrip / "record.json").read_text())[run]
    assert record["rc"] == 0, record["stderr"]
    assert (roundtrip / f"{run}.tar.gz").exists()


@pytest.mark.parametrize("run", RUNS)
def test_replay_serves_exactly_what_the_capture_served(replayed, run):
    manifest, snaps = replayed[run]
    assert manifest["anonymized"] is run.endswith("anonymized")
    assert manifest["user"] == ("unprivileged" if run.startswith("user") else "root")
    for saw, _daemon, served, _live in snaps:
        want, got = stable(saw), stable(served)
        assert got.keys() == want.keys(), sorted(set(want) ^ set(got))[:10]
        different = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
        assert different == {}
        successes = {dict(k[1])["collector"]: v for k, v in got.items() if k[0] == "zfs_exporter_collector_success"}
        # As `nobody` the bench database (SQLite WAL, root's) cannot be opened: that collector fails
        # in the capture and, through its stand-in, in the replay too.
        excused = {"bench"} if any(u["path"].endswith(".sqlite") for u in manifest["unreadable"]) else set()
        assert successes and {c for c, v in successes.items() if v != 1} <= excused, successes
        assert len(got) > 1000


@pytest.mark.parametrize("run", RUNS)
def test_replay_serves_every_series_of_the_live_render(replayed, run):
    """The capture's own live render (live-metrics.txt, which ran the commands a moment before the
    files were copied) and the replay serve the same series; counters never went back; what comes
    from the recorded commands and the disks' identities is equal."""
    for _saw, _daemon, served, live in replayed[run][1]:
        got, was = stable(served), stable(live)
        assert sorted(set(got) ^ set(was)) == []
        types = family_types(live)
        behind = {k: (was[k], got[k]) for k in was
                  if types.get(k[0], types.get(k[0].rsplit("_", 1)[0])) in ("counter", "histogram")
                  and not k[0].startswith(ACCUMULATED) and got[k] < was[k]}  # the ring moved on
        assert behind == {}
        fixed = ("zfs_pool_size", "zfs_pool_health", "zfs_dataset_info", "zfs_dataset_compressratio",
                 "zfs_disk_info", "zfs_vdev_state", "zfs_module_parameter", "zfs_version_info",
                 "zfs_exporter_collector_success", "zfs_bench_")
        changed = {k: (was[k], got[k]) for k in was if k[0].startswith(fixed) and was[k] != got[k]}
        assert changed == {}


def test_replay_matches_the_live_exporter_around_the_capture(roundtrip, replayed):
    """Root, not anonymized: the daemon's own labels. Every series the daemon served before and
    after is served by the replay; counters lie between the two readings, gauges too, except the
    txg counters the daemon accumulates over its lifetime (ACCUMULATED: at most the daemon's)."""
    manifest, snaps = replayed["root"]
    assert manifest["snapshots"] == 2 and manifest["interval_seconds"] == 5
    for number, (_saw, daemon, served, _live) in enumerate(snaps):
        check_between_live_readings(roundtrip, daemon, served, number)


def check_between_live_readings(roundtrip, daemon, served, number):
    before = stable((roundtrip / "root.live_before.txt").read_text())
    after_text = (roundtrip / "root.live_after.txt").read_text()
    after = stable(after_text)
    got = stable(served)
    read_at = "zfs_disk_smart_read_timestamp_seconds"
    older = {k: (before[k], got[k]) for k in got if k[0] == read_at and k in before and got[k] < before[k]}
    assert older == {}, f"snapshot {number}: SMART values older than the daemon's"
    before, after, got = ({k: v for k, v in d.items() if not k[0].startswith(OWN_SCHEDULE)} for d in (before, after, got))
    types = family_types(after_text)
    both = set(before) & set(after)
    missing = sorted(k for k in both if k not in got)
    assert missing == [], missing[:10]
    extra = sorted(k for k in got if k not in before and k not in after)
    assert extra == [], extra[:10]
    outside = {}
    for key in both:
        family = next((f for f in (key[0], key[0].rsplit("_", 1)[0]) if f in types), key[0])
        low, high = sorted((before[key], after[key]))
        if key[0].startswith(ACCUMULATED):
            low = 0.0
        elif types.get(family) == "gauge" and key[0].startswith(MOVING):
            pad = (0.10 if key[0].startswith(HOST_MEMORY) else 0.02) * max(abs(low), abs(high))
            if key[0].endswith("_bytes"):  # a size that comes and goes (anon: a dirty buffer in flight,
                pad = max(pad, MiB)        # 0 before and after, 512 between): a megabyte either way
            low, high = low - pad, high + pad
        if not low <= got[key] <= high:
            outside[key] = (before[key], got[key], after[key])
    assert outside == {}, (f"snapshot {number}", sorted(outside.items())[:10])
    synced = {k: v for k, v in got.items() if k[0] == "zfs_pool_txgs_synced_total"}
    # tank and fast; the ring a fresh exporter finds is its counters' zero (issue 37: a restart is no
    # burst), so the first snapshot counts none and the next only the txgs synced since
    assert len(synced) == 2 and min(synced.values()) >= 0, synced
    if number == 0:
        assert set(synced.values()) == {0.0}, synced
    # The daemon's /metrics saved during the capture is the same NAS too.
    assert daemon is not None and set(stable(daemon)) >= both - {k for k in both if k[0].startswith(TIMING)}


@pytest.mark.parametrize("run", ["root-anonymized", "user-anonymized"])
def test_anonymized_capture_serves_the_same_series_under_pseudonyms(replayed, run):
    """Same number of series per family as the plain capture; no pool, dataset or serial of the
    live NAS in any label."""
    plain = replayed[run.replace("-anonymized", "")][1][0][2]  # snapshot 0's replay
    anon = replayed[run][1][0][2]

    def per_family(data):
        out: dict[str, int] = {}
        for name, _labels in data:
            out[name] = out.get(name, 0) + 1
        return out

    assert per_family(stable(anon)) == per_family(stable(plain))
    labels = " ".join(f"{k}={v}" for key in stable(anon) for k, v in key[1])
    for secret in ("tank", "fast/db", "tank/lz4", "e2e-1"):
        assert f"={secret}" not in labels and f"/{secret}" not in labels
    pools = {dict(k[1])["pool"] for k in stable(anon) if k[0] == "zfs_pool_health"}
    assert pools == {"pool0", "pool1"}
    disk_pools = {dict(k[1])["pool"] for k in stable(anon) if k[0] == "zfs_disk_info"} - {""}
    assert disk_pools == pools


@pytest.mark.parametrize("run", ["root-anonymized", "user-anonymized"])
def test_anonymized_archive_holds_no_serial_wwn_pool_or_dataset_of_the_guest(roundtrip, config, run):
    import re
    import tarfile

    secrets = [d["serial"] for d in config["disks"]] + [d["wwn"].removeprefix("0x") for d in config["disks"]
                                                        if d.get("wwn")]
    datasets = ["tank/lz4", "tank/zstd-fast", "tank/random", "fast/db", "fast/nocomp", "fast/scratch", "e2e-1"]
    leaks = []
    with tarfile.open(roundtrip / f"{run}.tar.gz") as tar:
        for member in tar:
            data = tar.extractfile(member).read() if member.isfile() else b""
            for haystack in (member.name.encode(), data):
                leaks += [(member.name, s) for s in secrets + datasets if s.lower().encode() in haystack.lower()]
                leaks += [(member.name, p) for p in ("tank", "fast")
                          if re.search(rb"(?<![\w.:%-])" + p.encode() + rb"(?![\w.:%-])", haystack)]
    assert len(secrets) >= 15 and leaks == []
