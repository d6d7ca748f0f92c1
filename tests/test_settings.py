"""Typed settings: every flag is declared once (its default too), read into a typed object, and a
setting nobody declared or a declared one nobody parsed fails at start-up instead of falling back
to a default."""

import argparse

import pytest

from zfsnas.collectors import ALL
from zfsnas.collectors.datasets import DatasetsCollector, DatasetsSettings
from zfsnas.collectors.filters import DeviceFilter, PoolFilter
from zfsnas.collectors.tunables import TunablesCollector, TunablesSettings
from zfsnas.settings import Settings, SettingsError, flag
from zfsnas.wiring import ExporterConfig, build_exporter, build_parser, default_config


class Example(Settings):
    namespace = "example"
    interval: float = flag("--example.interval", type=float, default=15.0, help="seconds")
    names: list[str] | None = flag("--example.name", action="append")
    old: str = flag("--example.old", "--example.older", dest="legacy_old", default="x")


def test_defaults_overrides_and_unknown_names():
    assert Example().interval == 15.0 and Example().names is None and Example().old == "x"
    assert Example(interval=2).interval == 2
    with pytest.raises(SettingsError, match="unknown setting intreval"):
        Example(intreval=2)
    with pytest.raises(SettingsError, match="unknown setting nmes"):
        Example().replace(nmes=["a"])
    assert Example(interval=2).replace(old="y") == Example(interval=2, old="y") != Example()


def test_flags_destinations_and_parsing():
    parser = argparse.ArgumentParser()
    Example.add_arguments(parser)
    args = parser.parse_args(["--example.interval", "3", "--example.name", "a", "--example.name", "b",
                              "--example.older", "z"])
    assert vars(args) == {"example_interval": 3.0, "example_names": ["a", "b"], "legacy_old": "z"}
    assert Example.from_values(args) == Example(interval=3.0, names=["a", "b"], old="z")
    assert Example.from_values(args).values() == vars(args)
    assert Example.from_values(parser.parse_args([])) == Example()


def test_a_declared_flag_the_parsed_flags_lack_fails():
    with pytest.raises(SettingsError, match=r"lack --example.interval \(example_interval\)"):
        Example.from_values({"example_names": None, "legacy_old": "x"})


def test_every_collector_flag_is_in_its_namespace_and_its_parser_default_is_the_declared_one():
    parser = build_parser()
    defaults = vars(parser.parse_args([]))
    for cls in ALL:
        for declared in cls.settings_type.flags.values():
            assert all(name.startswith(f"--{cls.name}.") for name in declared.names[:1]), (cls.name, declared.names)
            assert defaults[declared.dest] == declared.default
    assert defaults["pools_include"] is None and defaults["disks_device_exclude"] == DeviceFilter().device_exclude


def test_parsed_flags_become_typed_settings_of_each_collector():
    config = default_config(["--datasets.refresh-interval", "5", "--pools.include", "tank|usb",
                             "--tunables.refresh-interval", "7", "--path.procfs", "/srv/proc"])
    datasets = config.settings_of(DatasetsCollector)
    assert isinstance(datasets, DatasetsSettings) and datasets.refresh_interval == 5.0
    assert datasets.snapshot_interval == 900.0 and datasets.snapshots == "count"
    assert config.settings_of(TunablesCollector) == TunablesSettings(refresh_interval=7.0)
    assert config.pool_filter == PoolFilter(include="tank|usb")
    assert config.pool_filter.selected("usb") and not config.pool_filter.selected("backup")
    assert config.paths.procfs == "/srv/proc" and config.paths.sysfs == "/sys"


def test_the_collectors_get_their_settings_and_share_one_filter(tmp_path):
    exporter = build_exporter(default_config(["--no-collector.smart", "--no-collector.bench", "--datasets.snapshots",
                                              "off", "--pools.exclude", "rpool", "--path.procfs", str(tmp_path),
                                              "--path.sysfs", str(tmp_path)]), process_metrics=False)
    by_name = {c.name: c for c in exporter.collectors}
    assert by_name["datasets"].snapshots is None and by_name["datasets"].datasets.interval == 60.0
    assert by_name["pools"].ctx.pool_filter is by_name["datasets"].ctx.pool_filter
    assert not by_name["pools"].ctx.pool_filter.selected("rpool")
    assert by_name["disks"].ctx.zpool_status is by_name["pools"].status          # shared by the wiring
    assert by_name["disks"].ctx.disk_identities == by_name["disks"].current_identities
    exporter.stop()


def test_a_parser_without_a_collectors_flags_fails_at_start_not_silently():
    args = build_parser().parse_args([])
    del args.datasets_snapshot_interval
    with pytest.raises(SettingsError, match="--datasets.snapshot-interval"):
        ExporterConfig.from_args(args)


def test_a_collector_given_another_collectors_settings_is_refused():
    config = default_config()
    with pytest.raises(TypeError, match="takes DatasetsSettings, not TunablesSettings"):
        DatasetsCollector(config.context(None, None), TunablesSettings())
