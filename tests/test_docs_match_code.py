"""What README says of the code's shape holds: its Layout names every module and sub-package of
the exporter and every test folder; the `# type: ignore` count it states is the count in the
code; every collector has its `tests/collectors/test_<name>.py`; its "Adding a collector" names
files that exist and the collector it holds up as the example."""

import re
from pathlib import Path

from zfsnas.collectors import ALL

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PACKAGE = ROOT / "exporter" / "zfsnas"


def section(title: str) -> str:
    start = README.index(f"\n{title}\n")
    end = README.find("\n## ", start + len(title) + 2)
    return README[start:end if end > 0 else None]


def layout_block() -> str:
    text = section("## Layout")
    return text[text.index("```"):text.index("```", text.index("```") + 3)]


def test_the_layout_names_every_module_subpackage_and_test_folder():
    block = layout_block()
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    packages = {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name + "/" for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    named = set(re.findall(r"[\w.-]+/?", block))
    assert modules - named == set(), "modules missing from README's Layout"
    assert packages - named == set(), "sub-packages missing from README's Layout"
    assert folders - named == set(), "test folders missing from README's Layout"


def test_the_stated_type_ignore_count_is_the_code_s():
    stated = re.search(r"`# type: ignore` appears (\d+) times", README)
    assert stated, "README's Tests section states how many `# type: ignore` the package has"
    count = sum(line.count("# type: ignore") for path in PACKAGE.rglob("*.py") for line in path.read_text().splitlines())
    assert count == int(stated[1])


def test_every_collector_has_its_test_file():
    missing = [cls.name for cls in ALL if not (ROOT / "tests" / "collectors" / f"test_{cls.name}.py").is_file()]
    assert missing == []


def test_adding_a_collector_names_real_examples():
    """The collectors it points at exist, but for its worked example, which it adds (followed by
    tests/test_adding_a_collector.py)."""
    text = section("### Adding a collector")
    example = re.search(r"\*\*The collector\*\* \(`exporter/zfsnas/collectors/(\w+)\.py`\)", text)
    named = set(re.findall(r"`(?:exporter/zfsnas/)?collectors/(\w+)\.py`", text))
    assert example and named - {example[1]}
    assert all((PACKAGE / "collectors" / f"{name}.py").is_file() for name in named - {example[1]})
