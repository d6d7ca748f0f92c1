"""Each package of the bench wing and the store says, in its `__init__` docstring, what it holds and
names every module (`name.py`) and sub-package (`name/`) in it, so a newcomer finds any module from
the package's face. A module added, moved or renamed without its package's docstring fails here,
and so does a docstring that names a module no longer in the tree."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "exporter" / "zfsnas"
# The packages held to it: the bench wing with every sub-package it grows, and the store.
FACES = sorted({p.parent for root in ("bench", "store") for p in (PACKAGE / root).rglob("__init__.py")})
EVERY_MODULE = {p.name for p in PACKAGE.rglob("*.py")}
EVERY_PACKAGE = {p.parent.name for p in PACKAGE.rglob("__init__.py")}


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def contents(package: Path) -> tuple[set[str], set[str]]:
    """The modules (`name.py`) and sub-packages (`name/`) a package holds."""
    modules = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    packages = {f"{p.parent.name}/" for p in package.glob("*/__init__.py")}
    return modules, packages


def named(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w./])(\w+\.py|\w+/)(?![\w/])", text))


def test_the_faces_cover_the_wing_and_its_jobs():
    names = {str(p.relative_to(PACKAGE)) for p in FACES}
    assert {"bench", "bench/running", "bench/answering", "bench/client", "store"} <= names


@pytest.mark.parametrize("package", FACES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_package_docstring_names_every_module_in_it(package):
    text = docstring(package)
    modules, packages = contents(package)
    assert text, f"{package.relative_to(PACKAGE)}/__init__.py has no docstring"
    assert sorted((modules | packages) - named(text)) == []


@pytest.mark.parametrize("package", FACES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_package_docstring_names_no_module_that_is_gone(package):
    stale = sorted(n for n in named(docstring(package))
                   if n not in EVERY_MODULE and n.rstrip("/") not in EVERY_PACKAGE)
    assert stale == []


def test_the_check_reads_names_as_a_reader_would(tmp_path):
    assert named("- running/: runs; cli.py hands to answer_commands.py (`zfsnas.store.reader`)") == {
        "running/", "cli.py", "answer_commands.py"}
    assert named("tests/test_import_graph.py and bench/cli.py") == set()
    (tmp_path / "__init__.py").write_text('"""Holds a.py."""\n')
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    modules, packages = contents(tmp_path)
    assert (modules | packages) - named(docstring(tmp_path)) == {"b.py", "sub/"}
