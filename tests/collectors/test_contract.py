"""The collector contract: collectors build `Family`/`Families` and declare their fast paths
(freezing, field layouts, row tables); none of them writes exposition text, so none imports the
renderer's helpers (format_labels, format_value, header text, its private types)."""

import ast
from pathlib import Path

import pytest

COLLECTORS = Path(__file__).resolve().parents[2] / "exporter/zfsnas/collectors"
# What exposition.py offers collectors, and all they may import from it.
COLLECTOR_API = {"Family", "Families", "FieldLayout", "RowTable", "frozen_within"}


def exposition_imports(path: Path) -> list[str]:
    """The names `path` imports from zfsnas.exposition; the module itself as `exposition`."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[-1] == "exposition":
                names += [alias.name for alias in node.names]
            elif module in ("", "zfsnas"):  # `from .. import exposition`
                names += [alias.name for alias in node.names if alias.name == "exposition"]
        elif isinstance(node, ast.Import):
            names += ["exposition" for alias in node.names if alias.name.split(".")[-1] == "exposition"]
    return names


@pytest.mark.parametrize("path", sorted(COLLECTORS.glob("*.py")), ids=lambda p: p.name)
def test_collectors_import_only_the_collector_api_from_exposition(path):
    assert set(exposition_imports(path)) <= COLLECTOR_API


def test_the_check_sees_what_it_must_refuse(tmp_path):
    module = tmp_path / "odd.py"
    module.write_text("from ..exposition import Families, format_value\nfrom .. import exposition\n"
                      "import zfsnas.exposition\nfrom zfsnas.exposition import _Frozen\n")
    assert set(exposition_imports(module)) - COLLECTOR_API == {"format_value", "exposition", "_Frozen"}


def test_the_collector_api_is_what_exposition_offers():
    from zfsnas import exposition

    assert all(hasattr(exposition, name) for name in COLLECTOR_API)


def test_every_collector_class_is_registered_once():
    """`collectors.ALL` is the one registry: every collector class of the package is in it, once,
    under its own name (a module written but not registered would serve nothing, silently)."""
    import importlib
    import inspect

    from zfsnas.collectors import ALL
    from zfsnas.collectors.base import Collector, RefreshingCollector

    found = set()
    for path in COLLECTORS.glob("*.py"):
        module = importlib.import_module(f"zfsnas.collectors.{path.stem}")
        found |= {c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, Collector) and c not in (Collector, RefreshingCollector)}
    assert found == set(ALL)
    names = [c.name for c in ALL]
    assert len(names) == len(set(names)) and all(names)


def test_a_collectors_settings_are_its_type_parameter():
    from zfsnas.collectors.base import Collector, Context, RefreshingCollector
    from zfsnas.settings import NoSettings, Settings, flag

    class ExampleSettings(Settings):
        namespace = "example"
        depth: int = flag("--example.depth", type=int, default=3)

    class Example(RefreshingCollector[ExampleSettings]):
        name = "example"

        def setup(self) -> None:
            self.doubled = self.settings.depth * 2  # settings are there before setup

    class Plain(Collector):
        name = "plain"

    ctx = Context(kstat=None, commands=None)
    assert Example.settings_type is ExampleSettings and Plain.settings_type is NoSettings
    assert Example(ctx).settings == ExampleSettings() and Example(ctx).doubled == 6
    assert Example(ctx, ExampleSettings(depth=5)).doubled == 10
    assert type("Sub", (Example,), {}).settings_type is ExampleSettings  # a subclass keeps them
    with pytest.raises(TypeError, match="collector example takes ExampleSettings, not NoSettings"):
        Example(ctx, NoSettings())


def test_what_collectors_offer_each_other_is_put_on_the_context_by_them():
    """The pools collector offers its `zpool status`, disks its identities (`Collector.offer`);
    the wiring names no collector class."""
    from zfsnas.wiring import build_exporter, default_config

    def context(*names):
        config = default_config(["--collector.disable-defaults", *(f"--collector.{n}" for n in names)])
        exporter = build_exporter(config)
        try:
            return {c.name: c for c in exporter.collectors}, exporter.collectors[0].ctx
        finally:
            exporter.stop()

    collectors, ctx = context("pools", "disks", "smart")
    assert ctx.zpool_status is collectors["pools"].status
    assert ctx.disk_identities == collectors["disks"].current_identities
    assert all(c.ctx is ctx for c in collectors.values())
    _, ctx = context("smart")
    assert ctx.zpool_status is None and ctx.disk_identities is None
    wiring = (COLLECTORS.parent / "wiring.py").read_text()
    assert not [n.module for n in ast.walk(ast.parse(wiring)) if isinstance(n, ast.ImportFrom) and n.module
                and n.module.startswith("collectors.") and n.module not in ("collectors.base", "collectors.filters")]
