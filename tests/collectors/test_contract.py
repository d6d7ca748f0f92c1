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
