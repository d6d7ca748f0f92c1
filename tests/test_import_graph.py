"""The package's import graph has no circle, and no arrow runs back up: `sources/` (readers of the
OS) import nothing of the collectors, the bench wing or the wiring; collectors import nothing of
the wiring, the server, capture or replay; the bench wing nothing of the exporter's collectors;
`wiring` is imported by `cli`, `capture` and `replay`, never the other way round. Every import
counts, those inside functions too (start-up keeps many there), but not `if TYPE_CHECKING:` ones
(annotations only, never run)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "exporter"
PACKAGE = ROOT / "zfsnas"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports at run time (its own package face `zfsnas` left out)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    skipped = {id(node) for top in ast.walk(tree) if isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test)
               for body in top.body for node in ast.walk(body)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != "zfsnas" and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imported(p, modules) for p in paths}


def circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph, as its nodes in order, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def folder(module: str) -> str:
    """A module's room: its sub-package (`zfsnas.sources`), or itself at the top."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_the_reader_sees_every_kind_of_import():
    edges = graph()
    assert "zfsnas.wiring" in edges["zfsnas.cli"]                       # from .wiring import ...
    assert "zfsnas.sources.freebsd" in edges["zfsnas.wiring"]            # inside a function
    assert "zfsnas.sources.zpool" not in edges["zfsnas.collectors.base"]  # under TYPE_CHECKING only
    assert "zfsnas.sources.model" in edges["zfsnas.collectors.base"]     # from ..sources.model import ...
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None


def test_no_circle_between_modules():
    assert circle(graph()) is None


def test_no_circle_between_folders():
    rooms: dict[str, set[str]] = {}
    for module, targets in graph().items():
        rooms.setdefault(folder(module), set()).update(folder(t) for t in targets if folder(t) != folder(module))
    assert circle(rooms) is None


def test_no_arrow_back_up():
    forbidden = {
        "zfsnas.sources": ("zfsnas.collectors", "zfsnas.bench", "zfsnas.wiring", "zfsnas.cli", "zfsnas.scrape",
                           "zfsnas.server", "zfsnas.capture", "zfsnas.replay"),
        "zfsnas.collectors": ("zfsnas.bench", "zfsnas.wiring", "zfsnas.cli", "zfsnas.server", "zfsnas.capture",
                              "zfsnas.replay", "zfsnas.scrape"),
        "zfsnas.bench": ("zfsnas.collectors", "zfsnas.wiring", "zfsnas.cli", "zfsnas.server", "zfsnas.capture",
                         "zfsnas.replay", "zfsnas.scrape"),
        "zfsnas.wiring": ("zfsnas.cli", "zfsnas.capture", "zfsnas.replay"),
        "zfsnas.replay": ("zfsnas.cli", "zfsnas.capture"),
        "zfsnas.capture": ("zfsnas.cli",),
        "zfsnas.settings": ("zfsnas.",),
        "zfsnas.exposition": ("zfsnas.",),
    }
    wrong = sorted(f"{module} -> {target}" for module, targets in graph().items() for target in targets
                   for room, below in forbidden.items()
                   if (module == room or module.startswith(room + ".")) and target.startswith(below))
    assert wrong == []
