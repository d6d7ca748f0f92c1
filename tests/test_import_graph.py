"""The package's import graph has no circle, and no arrow runs back up: `sources/` (readers of the
OS) import nothing of the store, the collectors, the bench wing or the wiring; the benchmark store
(`store/`) nothing of the bench wing or the exporter above it; collectors import nothing of the
wiring, the server, capture or replay; the bench wing nothing of the exporter's collectors, and
nothing outside the bench wing imports it; `wiring` is imported by `cli`, `capture` and `replay`,
never the other way round. Every import
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
        "zfsnas.sources": ("zfsnas.collectors", "zfsnas.bench", "zfsnas.store", "zfsnas.wiring", "zfsnas.cli",
                           "zfsnas.scrape", "zfsnas.server", "zfsnas.capture", "zfsnas.replay", "zfsnas.anonymize"),
        "zfsnas.store": ("zfsnas.collectors", "zfsnas.bench", "zfsnas.wiring", "zfsnas.cli", "zfsnas.scrape",
                         "zfsnas.server", "zfsnas.capture", "zfsnas.replay", "zfsnas.anonymize"),
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


def test_the_exporter_never_imports_the_bench_wing():
    """What serves, captures and replays the metrics reads the benchmark store (`zfsnas.store`), never
    the runner that writes it (bench/__init__.py says so; anonymize.py once took the configuration
    through the bench wing)."""
    wrong = sorted(f"{module} -> {target}" for module, targets in graph().items() if not module.startswith("zfsnas.bench")
                   for target in targets if target == "zfsnas.bench" or target.startswith("zfsnas.bench."))
    assert wrong == []


def job(module: str) -> str:
    """A bench module's job: its sub-package (`running`), or `commands` for the command line on top."""
    name = module.split(".")[2]
    return name if (PACKAGE / "bench" / name).is_dir() else "commands"


# Which of the bench wing's jobs each may import (bench/__init__.py): arrows run down only, and
# running and answering never meet.
BENCH_JOBS = {
    "commands": {"running", "answering", "client", "predicting", "statistics"},
    "client": {"running", "answering", "statistics"},
    "running": {"statistics"},
    "answering": {"statistics"},
    "predicting": {"statistics"},
    "statistics": set(),
}


def test_the_bench_wing_arrows_run_down_its_jobs():
    edges = graph()
    modules = [m for m in edges if m.startswith("zfsnas.bench.")]
    assert {job(m) for m in modules} == set(BENCH_JOBS)
    wrong = sorted(f"{module} -> {target}" for module in modules for target in edges[module]
                   if target.startswith("zfsnas.bench.") and job(target) != job(module)
                   and job(target) not in BENCH_JOBS[job(module)])
    assert wrong == []
    pure = sorted(f"{module} -> {target}" for module in modules if job(module) == "statistics"
                  for target in edges[module])
    assert pure == []
