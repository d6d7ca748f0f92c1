"""Collector `datasets` (and what it shares with `pools`) on the recorded OpenZFS 2.1 and 2.3 outputs (via the
stand-in); the `pools` collector's own tests are in tests/collectors/test_pools.py."""

import time

import pytest

from tests.conftest import ZFS_COMMAND_VERSIONS, linux_tree, samples, scrape_text, types, value, zfs_commands

ROOT = linux_tree("2.3.2")
KSTAT = ["--path.procfs", str(ROOT / "proc"), "--path.sysfs", str(ROOT / "sys")]
PART = "/dev/disk/by-id/ata-WDC_WD80EFZZ-68BTXN0_WD-CA0AAA{}-part1"


def scrape(version, *flags, collectors=("datasets", "pools")):
    chosen = [f"--collector.{c}" for c in collectors]
    return scrape_text(*KSTAT, "--collector.disable-defaults", *chosen, *zfs_commands(version), *flags)


def labelsets(text, metric):
    return [dict(labels) for (name, labels) in samples(text) if name == metric]


@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_dataset_values_and_types(version):
    text = scrape(version, collectors=("datasets",))
    home = {"pool": "tank", "dataset": "tank/home docs"}
    assert value(text, "zfs_dataset_compressratio", **home) == 1.48
    assert value(text, "zfs_dataset_refcompressratio", pool="tank", dataset="tank/vm-disk0") == 1.15
    assert value(text, "zfs_dataset_used_bytes", **home) == 429496729600
    assert value(text, "zfs_dataset_logical_used_bytes", **home) == 635655159808
    assert value(text, "zfs_dataset_referenced_bytes", **home) == 322122547200
    assert value(text, "zfs_dataset_logical_referenced_bytes", **home) == 476741369856
    assert value(text, "zfs_dataset_available_bytes", **home) == 25919549022208
    assert value(text, "zfs_dataset_used_by_snapshots_bytes", **home) == 107374182400
    assert value(text, "zfs_dataset_written_since_snapshot_bytes", **home) == 5368709120
    assert value(text, "zfs_dataset_reservation_bytes", **home) == 107374182400
    assert value(text, "zfs_dataset_quota_bytes", pool="tank", dataset="tank/media") == 10995116277760
    assert value(text, "zfs_dataset_refquota_bytes", pool="backup", dataset="backup/tank") == 2199023255552
    assert value(text, "zfs_dataset_refreservation_bytes", pool="tank", dataset="tank/vm-disk0") == 1125281431552
    assert value(text, "zfs_dataset_volume_size_bytes", pool="tank", dataset="tank/vm-disk0") == 1099511627776
    # quota and reservation only where set
    assert [d["dataset"] for d in labelsets(text, "zfs_dataset_quota_bytes")] == ["tank/media"]
    assert [d["dataset"] for d in labelsets(text, "zfs_dataset_reservation_bytes")] == ["tank/home docs"]
    assert value(text, "zfs_dataset_snapshots", **home) == 2
    assert value(text, "zfs_dataset_snapshots", pool="tank", dataset="tank") == 0
    assert value(text, "zfs_dataset_snapshots", pool="backup", dataset="backup/tank") == 3
    # The newest snapshot's creation time (the recordings' are one day apart from 2026-11-17 00:00 UTC).
    assert value(text, "zfs_dataset_newest_snapshot_timestamp_seconds", pool="backup", dataset="backup/tank") == \
        1794873600 + 2 * 86400
    assert value(text, "zfs_dataset_newest_snapshot_timestamp_seconds", **home) == 1794873600 + 4 * 86400
    assert ("zfs_dataset_newest_snapshot_timestamp_seconds", frozenset({"pool": "tank", "dataset": "tank"}.items())) \
        not in samples(text)  # no snapshot, no time
    assert set(types(text).values()) == {"gauge"}
    assert {n for n in types(text) if n.startswith("zfs_dataset_")} >= {
        "zfs_dataset_compressratio", "zfs_dataset_refcompressratio", "zfs_dataset_info", "zfs_dataset_snapshots",
        "zfs_dataset_newest_snapshot_timestamp_seconds"}
    assert value(text, "zfs_exporter_collector_success", collector="datasets") == 1
    assert value(text, "zfs_exporter_source_success", source="zfs_datasets") == 1
    assert value(text, "zfs_exporter_source_success", source="zfs_snapshots") == 1


@pytest.mark.parametrize("version", ZFS_COMMAND_VERSIONS)
def test_dataset_info(version):
    text = scrape(version, collectors=("datasets",))
    info = {d["dataset"]: d for d in labelsets(text, "zfs_dataset_info")}
    assert info["tank/db:pg.main_16"] == {
        "pool": "tank", "dataset": "tank/db:pg.main_16", "type": "filesystem", "compression": "zstd-fast",
        "recordsize": "16384", "atime": "off", "sync": "always", "primarycache": "metadata",
        "secondarycache": "all", "encryption": "off", "dedup": "on", "logbias": "throughput",
        "special_small_blocks": "16384"}
    assert (info["tank/vm-disk0"]["type"], info["tank/vm-disk0"]["recordsize"]) == ("volume", "16384")
    assert info["tank/home docs"]["compression"] == ("zstd" if version == "2.3" else "zstd-3")


def test_odd_names_come_out_as_labels():
    text = scrape("2.3", collectors=("datasets",))
    odd = "tank/it's \"quoted\" 100% ünïcode"
    assert value(text, "zfs_dataset_used_bytes", pool="tank", dataset=odd) == 65536
    assert value(text, "zfs_dataset_snapshots", pool="tank", dataset=odd) == 1
    assert 'dataset="tank/it\'s \\"quoted\\" 100% ünïcode"' in text


def test_dataset_exclude_pool_selection_and_snapshots_off():
    text = scrape("2.3", "--dataset.exclude", "tank/(media|home docs)", "--pool.exclude", "scratch",
                  "--datasets.snapshots", "off", collectors=("datasets",))
    names = {d["dataset"] for d in labelsets(text, "zfs_dataset_used_bytes")}
    assert "tank/media" not in names and "tank/home docs" not in names and "tank" in names
    assert not any(n.startswith("scratch") for n in names)
    assert "backup/tank" in names
    assert "zfs_dataset_snapshots" not in types(text)
    assert {d["source"] for d in labelsets(text, "zfs_exporter_source_age_seconds")} == {"zfs_datasets"}
    only = scrape("2.3", "--pool.include", "back.*", collectors=("datasets", "pools"))
    assert {d["pool"] for d in labelsets(only, "zfs_dataset_used_bytes")} == {"backup"}
    assert {d["pool"] for d in labelsets(only, "zfs_vdev_state")} == {"backup"}
    assert {d["pool"] for d in labelsets(only, "zfs_pool_size_bytes")} == {"backup"}


def test_datasets_include_and_exclude_and_the_old_spellings():
    text = scrape("2.3", "--datasets.include", "tank(/.*)?", "--datasets.exclude", "tank/(media|home docs)",
                  "--datasets.snapshots", "off", collectors=("datasets",))
    names = {d["dataset"] for d in labelsets(text, "zfs_dataset_used_bytes")}
    assert "tank" in names and "tank/media" not in names and "tank/home docs" not in names
    assert all(n == "tank" or n.startswith("tank/") for n in names) and len(names) > 1
    # `--dataset.exclude` and `--pool.include`/`--pool.exclude`: the first releases' spellings, kept as aliases
    old = scrape("2.3", "--dataset.exclude", "tank/media", "--pool.include", "tank", collectors=("datasets", "pools"))
    new = scrape("2.3", "--datasets.exclude", "tank/media", "--pools.include", "tank", collectors=("datasets", "pools"))
    assert labelsets(old, "zfs_dataset_used_bytes") == labelsets(new, "zfs_dataset_used_bytes")
    assert {d["pool"] for d in labelsets(new, "zfs_pool_size_bytes")} == {"tank"}
    assert "tank/media" not in {d["dataset"] for d in labelsets(new, "zfs_dataset_used_bytes")}










def test_shared_zpool_status_for_other_collectors():
    from tests.conftest import exporter_args
    from zfsnas.wiring import build_exporter

    exporter = build_exporter(exporter_args(*KSTAT, *zfs_commands("2.3")), process_metrics=False)
    pools = next(c for c in exporter.collectors if c.name == "pools")
    status = pools.ctx.zpool_status
    assert status is pools.status and status.refresh_now()
    assert {p.name for p in status.state().value.pools} == {"backup", "scratch", "tank"}
    disks = next(c for c in exporter.collectors if c.name == "disks")
    vdevs = disks.ctx.vdevs()  # what `disks` and `vdevlatency` read
    cache = [v for v in vdevs if v.role == "cache"]
    assert [v.guid for v in cache] == ["10101010101010101010", "2020202020202020202"]


def test_zfs_missing_fails_only_these_collectors():
    text = scrape_text(*KSTAT, "--zfs.command-prefix", "/nonexistent/bin/env")
    assert value(text, "zfs_exporter_collector_success", collector="datasets") == 0
    assert value(text, "zfs_exporter_collector_success", collector="pools") == 0
    assert value(text, "zfs_exporter_collector_success", collector="arc") == 1
    assert value(text, "zfs_exporter_source_success", source="zpool_status") == 0
    assert value(text, "zfs_arc_size_bytes") > 0
    assert "zfs_pool_size_bytes" not in types(text)


def test_unknown_arguments_fail_loudly():
    import subprocess
    import sys

    from tests.conftest import FIXTURES

    standin = [sys.executable, str(FIXTURES / "commands" / "standin.py"), str(FIXTURES / "commands" / "zfs-2.1")]
    wrong = subprocess.run([*standin, "zpool", "status", "-P"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "no recorded output for: zpool status -P" in wrong.stderr
    json = subprocess.run([*standin, "zpool", "status", "-jp"], capture_output=True, text=True)
    assert json.returncode == 2 and "invalid option 'j'" in json.stderr


# --- parsing in forked children, families rendered in the refresh (issue 17) -----------------------
from zfsnas.collectors.base import Report  # noqa: E402


def exporter_for(*flags):
    from tests.conftest import exporter_args
    from zfsnas.wiring import build_exporter

    return build_exporter(exporter_args(*KSTAT, "--collector.disable-defaults", *flags), process_metrics=False)


def test_parsing_in_a_child_serves_exactly_what_parsing_in_the_thread_did(monkeypatch):
    from zfsnas.collectors.datasets import DatasetsCollector
    from zfsnas.exposition import _Frozen

    flags = ("--collector.datasets", "--collector.pools", *zfs_commands("2.3"))
    in_child = exporter_for(*flags)
    text = in_child.render()
    datasets = in_child.collectors[0]
    served = list(datasets.collect(Report("datasets")))
    assert served and all(type(f) is _Frozen and f._samples is None for f in served)  # came back as text alone
    # the samples the adapter reads are parsed back from the text, in this process
    used = next(f for f in served if f.name == "zfs_dataset_used_bytes")
    assert ("", ("tank", "tank/home docs"), 429496729600) in used.samples
    monkeypatch.setattr(DatasetsCollector, "parse_in_child", False)
    timeless = lambda page: [line for line in page.splitlines() if "_seconds{" not in line]  # noqa: E731
    assert timeless(exporter_for(*flags).render()) == timeless(text)


def test_a_hung_parse_child_is_killed_and_the_last_good_values_kept():
    exporter = exporter_for("--collector.datasets", *zfs_commands("2.3"))
    datasets = exporter.collectors[0]
    assert value(exporter.render(), "zfs_dataset_used_bytes", pool="tank", dataset="tank/home docs") == 429496729600
    datasets.forked.timeout = 0.5
    datasets._render = lambda text, snapshots: time.sleep(60)  # the child runs this copy
    started = time.monotonic()
    assert not datasets.datasets.refresh_now()
    assert time.monotonic() - started < 10
    assert datasets.datasets.state().error == "parsing zfs list took longer than 0.5s in its child process and was killed"
    text = exporter.render()
    assert value(text, "zfs_exporter_source_success", source="zfs_datasets") == 0
    assert value(text, "zfs_exporter_collector_success", collector="datasets") == 0
    assert value(text, "zfs_dataset_used_bytes", pool="tank", dataset="tank/home docs") == 429496729600
    assert value(text, "zfs_dataset_snapshots", pool="tank", dataset="tank/home docs") == 2


def test_snapshot_counts_follow_a_new_listing_after_the_next_refresh(tmp_path):
    from tests.conftest import copy_commands

    recordings = copy_commands(tmp_path / "zfs")
    exporter = exporter_for("--collector.datasets", *zfs_commands(recordings))
    datasets = exporter.collectors[0]
    assert value(exporter.render(), "zfs_dataset_snapshots", pool="tank", dataset="tank/home docs") == 2
    listing = recordings / "zfs-list-snapshots.txt"
    listing.write_text(listing.read_text() + "tank/home docs@extra\t1799999999\n")
    assert datasets.snapshots.refresh_now()
    text = exporter.render()
    assert value(text, "zfs_dataset_snapshots", pool="tank", dataset="tank/home docs") == 3
    assert value(text, "zfs_dataset_newest_snapshot_timestamp_seconds", pool="tank", dataset="tank/home docs") == \
        1799999999




def test_one_bad_line_or_field_costs_that_line_or_field_not_the_source(tmp_path):
    """Issue 33, case 7: a creation of `²`, a `1e400`, a `-0` and a line of another shape each cost
    what they are, counted; every other dataset, pool and snapshot count is served."""
    from tests.conftest import copy_commands

    recordings = copy_commands(tmp_path / "zfs")
    listing = recordings / "zfs-list.txt"
    lines = listing.read_text().splitlines()
    backup = lines[0].split("\t")
    backup[2], backup[4] = "1e400", "-0"  # used, referenced
    listing.write_text("\n".join(["\t".join(backup), *lines[1:], "garbage"]) + "\n")
    snapshots = recordings / "zfs-list-snapshots.txt"
    snapshots.write_text(snapshots.read_text() + "tank/home docs@odd\t\u00b2\n")
    pools = recordings / "zpool-list.txt"
    pools.write_text(pools.read_text().replace("\t", "\tNaN", 1))  # the first pool's size
    text = scrape(recordings)
    assert value(text, "zfs_exporter_collector_success", collector="datasets") == 1
    assert value(text, "zfs_exporter_collector_success", collector="pools") == 1
    assert "backup" not in {d["dataset"] for d in labelsets(text, "zfs_dataset_used_bytes")}
    assert value(text, "zfs_dataset_available_bytes", pool="backup", dataset="backup") == 2466498318336
    assert value(text, "zfs_dataset_used_bytes", pool="tank", dataset="tank/home docs") == 429496729600
    assert value(text, "zfs_dataset_snapshots", pool="tank", dataset="tank/home docs") == 3
    assert value(text, "zfs_dataset_newest_snapshot_timestamp_seconds", pool="tank", dataset="tank/home docs") == \
        1794873600 + 4 * 86400
    dropped = {(d["source"], d["reason"]): value(text, "zfs_exporter_source_values_dropped_total", **d)
               for d in labelsets(text, "zfs_exporter_source_values_dropped_total")}
    assert dropped == {("zfs_datasets", "not_a_number"): 1, ("zfs_datasets", "negative"): 1,
                       ("zfs_datasets", "malformed"): 1, ("zfs_snapshots", "not_a_number"): 1,
                       ("zpool_list", "not_a_number"): 1}
    assert types(text)["zfs_exporter_source_values_dropped_total"] == "counter"
    assert len(labelsets(text, "zfs_pool_size_bytes")) == len(labelsets(text, "zfs_pool_free_bytes")) - 1


def test_a_dataset_listed_twice_is_served_once(tmp_path):
    """Two series of one name would make the page unparseable for Prometheus: the second is dropped."""
    from tests.conftest import copy_commands

    recordings = copy_commands(tmp_path / "zfs")
    listing = recordings / "zfs-list.txt"
    text = listing.read_text()
    listing.write_text(text + text.splitlines()[0] + "\n")
    page = scrape(recordings, collectors=("datasets",))
    assert len([d for d in labelsets(page, "zfs_dataset_available_bytes") if d["dataset"] == "backup"]) == 1
    assert value(page, "zfs_exporter_source_values_dropped_total", source="zfs_datasets", reason="malformed") == 1
    assert value(page, "zfs_exporter_collector_success", collector="datasets") == 1
