"""Captures are a versioned contract: every capture in tests/ (the committed guest capture, one made
by the first release of the capture format, commit e4b0bb0: tests/fixtures/captures/formats/) replays
with today's code, every collector successful, and serves every series its capture's `metrics.txt`
held, with the same value, once the renames CHANGELOG.md lists are applied.

What an old capture did not record is derived where that is exact (the snapshot listing, recorded as
`-o name` before snapshot creation times existed: the counts are served, the newest times are
absent) and said once per capture; what cannot be derived is absent (its source's success 0, the
collector's 1), said in one line."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from zfsnas import replay
from zfsnas.collectors.datasets import DatasetsCollector
from zfsnas.wiring import default_config

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "tests").rglob("*.tar.gz") if p.parent.name in ("captures", "formats"))
FIRST_RELEASE = FIXTURES / "captures" / "formats" / "first-release-e4b0bb0.tar.gz"
# What changed name since captures were first taken (CHANGELOG.md, "Changed"; a test below holds the two together).
RENAMED_FAMILIES = {"zfs_dataset_written_bytes": "zfs_dataset_written_since_snapshot_bytes"}
RENAMED_LABELS = {"zfs_bench_": {"job": "workload"}}      # family prefix: {old label: new label}
UPPER_CASE_VALUES = {"zfs_pool_state": "state"}             # online -> ONLINE, as zpool prints it
ADDED_LABELS = {"zfs_bench_": ("matrix", "config")}         # not in old captures: left out of the comparison
# Not compared: timings, the replaying process, and the txg counters: they count from the replaying
# exporter's start, whose first ring is their zero (issue 37: a restart is no burst; an older exporter
# counted the whole ring it found), and go on from the snapshot before. The first snapshot's are 0.
VARIABLE = re.compile(r"^(process_|zfs_exporter_(collector_duration|source_age))")
CARRIED_OVER = re.compile(r"^zfs_pool_txg(s_synced|s_missed|_written_bytes|_dirty_bytes|_sync_seconds|_dirty_ratio)")


LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(sample name, label pairs): value} of our own exposition (a page of 12,000 samples in a tenth
    of the time prometheus_client's parser takes; label values compared as escaped)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, number = line.rpartition(" ")
            name, _, labels = series.partition("{")
            out[(name, frozenset(LABEL.findall(labels)))] = float(number)
    return out


def today(key: tuple[str, frozenset]) -> tuple[str, frozenset]:
    """A series of an old capture under today's names."""
    name, labels = key
    name = RENAMED_FAMILIES.get(name, name)   # gauges: the sample name is the family's
    pairs = dict(labels)
    for prefix, renames in RENAMED_LABELS.items():
        if name.startswith(prefix):
            pairs = {renames.get(k, k): v for k, v in pairs.items()}
    if name in UPPER_CASE_VALUES:
        label = UPPER_CASE_VALUES[name]
        pairs[label] = pairs[label].upper()
    return name, frozenset(pairs.items())


def without_added(key: tuple[str, frozenset]) -> tuple[str, frozenset]:
    name, labels = key
    drop = next((added for prefix, added in ADDED_LABELS.items() if name.startswith(prefix)), ())
    return name, frozenset((k, v) for k, v in labels if k not in drop)


def replayed(capture: Path | str) -> tuple[replay.Capture, list[dict]]:
    opened = replay.open_capture(capture)
    exporter = replay.ReplayExporter(opened, default_config(), process_metrics=False)
    return opened, [samples(exporter.render()) for _ in opened.snapshots]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_every_capture_replays_with_todays_code(capture, caplog):
    assert FIRST_RELEASE in CAPTURES
    caplog.set_level(logging.INFO, logger="zfsnas")
    opened, pages = replayed(capture)
    try:
        for index, page in enumerate(pages):
            then = samples((opened.snapshots[index] / "metrics.txt").read_text())
            succeeded = {dict(k[1])["collector"] for k, v in then.items() if k[0] == "zfs_exporter_collector_success" and v == 1}
            assert succeeded, "the capture's own page says which collectors worked"
            for collector in succeeded:
                assert page[("zfs_exporter_collector_success", frozenset({"collector": collector}.items()))] == 1, collector
            assert all(v == 1 for k, v in page.items() if k[0] == "zfs_exporter_source_success"), \
                [k for k, v in page.items() if k[0] == "zfs_exporter_source_success" and v != 1]
            served = {without_added(k): v for k, v in page.items()}
            missing, differ = [], []
            for key, value in then.items():
                if VARIABLE.match(key[0]):
                    continue
                carried = CARRIED_OVER.match(key[0])
                if carried and index:
                    continue
                now = served.get(without_added(today(key)))
                if carried:   # the first snapshot: served, and the ring found at start is the counters' zero
                    if now is None:
                        missing.append(key)
                    elif key[0].endswith("_total") and now != 0:
                        differ.append((key, 0.0, now))
                    continue
                if now is None:
                    missing.append(key)
                elif now != value:
                    differ.append((key, value, now))
            assert not missing, missing[:10]
            assert not differ, differ[:10]
    finally:
        opened.close()
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not problems, problems
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay: ")]
    assert len(notes) == len(set(notes)), "each note once per capture, not once per snapshot"


def test_the_first_release_snapshot_listing_is_derived(caplog):
    caplog.set_level(logging.INFO, logger="zfsnas")
    opened, pages = replayed(FIRST_RELEASE)
    recorded = json.loads((opened.snapshots[0] / "commands.json").read_text())["commands"]
    opened.close()
    assert ["zfs", "list", "-Hp", "-t", "snapshot", "-o", "name"] in [c["argv"] for c in recorded]
    counts = {dict(k[1])["dataset"]: v for k, v in pages[-1].items() if k[0] == "zfs_dataset_snapshots"}
    assert counts and sum(counts.values()) > 0
    assert not [k for k in pages[-1] if k[0] == "zfs_dataset_newest_snapshot_timestamp_seconds"]
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay: ")]
    assert "replay: `zfs list -Hp -t snapshot -o name,creation` derived from the recorded " \
           "`zfs list -Hp -t snapshot -o name` (creation: not in the capture, served as absent)" in notes
    # what this release added since: the key status column, derived as absent; the vdevs' space
    # listing, absent (the vdev tree is served without it)
    assert any(n.endswith("(keystatus: not in the capture, served as absent)") for n in notes), notes
    assert "replay: this capture did not record `zpool list -HpPv`: what it feeds is served as absent " \
           "(its source's success 0)" in notes
    assert len(notes) == 3, notes


def test_what_cannot_be_derived_is_absent_and_said_once(tmp_path, caplog):
    """A capture whose snapshot listing was never recorded (as if it predated snapshot counts)."""
    unpacked = replay.open_capture(FIRST_RELEASE)
    shutil.copytree(unpacked.root, tmp_path / "zfsnas-capture")
    unpacked.close()
    for snapshot in (tmp_path / "zfsnas-capture" / "snapshots").iterdir():
        index = json.loads((snapshot / "commands.json").read_text())
        index["commands"] = [c for c in index["commands"] if "snapshot" not in c["argv"]]
        (snapshot / "commands.json").write_text(json.dumps(index))
    caplog.set_level(logging.INFO, logger="zfsnas")
    opened, pages = replayed(tmp_path)
    opened.close()
    for page in pages:
        assert page[("zfs_exporter_collector_success", frozenset({"collector": "datasets"}.items()))] == 1
        assert page[("zfs_exporter_source_success", frozenset({"source": "zfs_snapshots"}.items()))] == 0
        assert page[("zfs_exporter_source_success", frozenset({"source": "zfs_datasets"}.items()))] == 1
        assert not [k for k in page if k[0] == "zfs_dataset_snapshots"]
        assert [k for k in page if k[0] == "zfs_dataset_compressratio"]
    said = [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG]
    # (besides what the first release lacks of later releases: the key status column, the vdev space listing)
    assert [m for m in said if "keystatus" not in m and "zpool list -HpPv" not in m] == [
        "replay: this capture did not record `zfs list -Hp -t snapshot -o name,creation`: what it feeds is "
        "served as absent (its source's success 0)"]


def test_the_changelog_names_every_rename():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for old, new in RENAMED_FAMILIES.items():
        assert f"`{old}`" in changelog and f"`{new}`" in changelog
    for renames in RENAMED_LABELS.values():
        for old, new in renames.items():
            assert f"`{old}`" in changelog and f"`{new}`" in changelog
    assert "`zfs_pool_state`" in changelog and "`online`" in changelog and "`ONLINE`" in changelog


def test_settings_under_their_old_names_still_apply(tmp_path):
    """A first-release manifest says `dataset_exclude` (`--dataset.exclude`), today's flag is
    `--datasets.exclude`: the replay applies it; flags added since take their defaults."""
    unpacked = replay.open_capture(FIRST_RELEASE)
    shutil.copytree(unpacked.root, tmp_path / "zfsnas-capture")
    unpacked.close()
    manifest_path = tmp_path / "zfsnas-capture" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert "dataset_exclude" in manifest["flags"] and "datasets_include" not in manifest["flags"]
    manifest["flags"]["dataset_exclude"] = "tank/media"
    manifest_path.write_text(json.dumps(manifest))
    opened, pages = replayed(tmp_path)
    config = replay.snapshot_config(opened, 0, default_config())
    opened.close()
    datasets_settings = config.settings_of(DatasetsCollector)
    assert datasets_settings.exclude == "tank/media" and datasets_settings.include is None
    datasets = {dict(k[1])["dataset"] for k in pages[0] if k[0] == "zfs_dataset_used_bytes"}
    assert "tank" in datasets and "tank/media" not in datasets
