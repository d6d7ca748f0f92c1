"""README's "Adding a collector" is true to the letter: in a copy of the tree, its worked example
(a `zil` kstat collector) is added by its steps, with its own code blocks and its own commands
(the fixture generator, the golden update), its checks (step 7: the tests it names and `./dev
lint`) pass in the copy, the golden pages gain only the new collector's lines, and no file the
recipe does not name has changed.

The copy's tests import the copy's package (PYTHONPATH first), run by this checkout's virtualenv.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recipe() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n### Adding a collector\n")
    return readme[start:readme.index("\n## ", start + 1)]


def blocks(text: str) -> list[str]:
    """The fenced code blocks, in order, without the indentation of their fence (a list item's)."""
    return [re.sub(rf"^{indent}", "", block, flags=re.M)
            for indent, block in re.findall(r"^( *)```[a-z]*\n(.*?)^ *```", text, re.M | re.S)]


def named_paths(text: str) -> set[str]:
    """Every file the recipe names, as a glob from the root: a pattern (`tests/golden/*.prom`) or a
    family of directories (`tests/fixtures/linux-zfs-<version>/`) stands for what it holds; a plain
    directory (`exporter/zfsnas/collectors/`) names no file."""
    paths = set()
    for span in re.findall(r"`([^`\n]+)`", re.sub(r"^ *```.*?^ *```", "", text, flags=re.M | re.S)):
        for word in span.split():
            word = word.strip("(),;:")
            if re.fullmatch(r"[\w.<>*/-]+\.(py|md|prom)|[\w.*/-]*<\w+>[\w.*-]*/", word):
                word = word if word.startswith(("exporter/", "tests/", "docs/")) or "/" not in word \
                    else f"exporter/zfsnas/{word}"
                paths.add(re.sub(r"<[^>]+>", "*", word) + ("**" if word.endswith("/") else ""))
    return paths


def tree_copy(dest: Path) -> Path:
    """This checkout's files as git knows them (tracked, and new ones not ignored), as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def git(copy: Path, *argv: str) -> str:
    return subprocess.run(["git", "-c", "user.name=recipe", "-c", "user.email=recipe@localhost", *argv], cwd=copy,
                          capture_output=True, text=True, check=True).stdout


def changed_files(copy: Path) -> list[str]:
    """What changed in the copy since its first commit, as git sees it (.gitignore'd builds and caches aside)."""
    return sorted(line[3:] for line in git(copy, "status", "--porcelain", "-uall", "--no-renames").splitlines())


def insert(path: Path, text: str, pattern: str, after: bool = False, last: bool = False,
           following: str | None = None) -> None:
    """`text` put before (or `after`) the first (or `last`) line matching `pattern`, of those
    below the first line matching `following`."""
    lines = path.read_text().splitlines(keepends=True)
    begin = 0 if following is None else next(i for i, line in enumerate(lines) if re.match(following, line))
    found = [i for i, line in enumerate(lines) if i >= begin and re.match(pattern, line)]
    at = (found[-1] if last else found[0]) + after
    lines[at:at] = [text if text.endswith("\n") else text + "\n"]
    path.write_text("".join(lines))


def run(copy: Path, command: str) -> None:
    """A command line of the recipe, in the copy: `.venv/bin/python` is this checkout's Python, and
    `./dev lint` the checks of the copy's `dev` script's `lint` function with this checkout's
    virtualenv (the whole `./dev lint` would first `pip install -e` the copy into that virtualenv)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(copy / "exporter")])}
    argv = [sys.executable if word == ".venv/bin/python" else word for word in shlex.split(command)]
    if command == "./dev lint":
        argv = ["bash", "-c", 'set -euo pipefail; VENV="$1"; eval "$(sed -n "/^lint() {/,/^}/p" dev)"; lint',
                "lint", str(Path(sys.executable).parents[1])]
    done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{command}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"


def command(text: str, script: str) -> str:
    """The recipe's command line that runs `script`."""
    return next(c for c in re.findall(r"`(\.venv/bin/python [^`]+)`", text) if script in c)


def follow_the_recipe(copy: Path, text: str) -> None:
    kstat_line, module, registration, fixture_rows, fixture_entry, test, checks = blocks(text)
    package = copy / "exporter" / "zfsnas"
    # 1. where the kstat is
    insert(package / "sources" / "kstat.py", kstat_line, r"[A-Z_]+ = KstatPath\(", after=True, last=True)
    # 2. the collector, and its registration
    (package / "collectors" / "zil.py").write_text(module)
    importing, listing = registration.splitlines()
    registry = package / "collectors" / "__init__.py"
    registry.write_text(re.sub(r"^from \. import .*$", importing, registry.read_text(), count=1, flags=re.M))
    insert(registry, listing, r"^\]", following=r"^ALL")
    # 3. fixtures, written by the documented command
    generator = copy / "tests" / "fixtures" / "generate_kstat_fixtures.py"
    insert(generator, fixture_rows + "\n\n", r"^# The host's named kstats")
    insert(generator, fixture_entry, r"^}", following=r"^MISC_KSTATS = ")
    run(copy, command(text, "generate_kstat_fixtures.py"))
    # 4. tests
    (copy / "tests" / "collectors" / "test_zil.py").write_text(test)
    # 5. golden pages
    run(copy, command(text, "tests/golden/update.py"))
    # 6. docs
    insert(copy / "README.md", "| `zil` | on | the ZFS intent log's counters: `zfs_zil_commit_total`, "
                               "`zfs_zil_itx_*_total` |", r"\| `vdevlatency` \|", after=True)
    insert(copy / "docs" / "metrics.md", "## `zil`: the ZFS intent log\n\n| metric | type | example query |\n"
                                         "|---|---|---|\n| `zfs_zil_commit_total` | counter | "
                                         "`rate(zfs_zil_commit_total[5m])` (synchronous commits a second) |\n",
           r"^## Self metrics")
    insert(copy / "CHANGELOG.md", "- Collector `zil`: the ZFS intent log's counters (`zfs_zil_*_total`).",
           r"^### Added", after=True)
    # 7. checks
    for line in checks.splitlines():
        run(copy, line)


def test_a_kstat_collector_added_by_the_recipe_passes_its_checks_touching_only_what_it_names(tmp_path):
    text = recipe()
    copy = tree_copy(tmp_path / "tree")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "the tree before the recipe")
    follow_the_recipe(copy, text)
    changed = changed_files(copy)
    allowed = named_paths(text)
    assert [name for name in changed if not any(fnmatch.fnmatch(name, p) for p in allowed)] == []
    # what the recipe says it writes, it wrote; the golden pages of the kstat trees gained the new
    # collector's lines and lost none
    assert {"exporter/zfsnas/collectors/zil.py", "tests/collectors/test_zil.py", "exporter/zfsnas/sources/kstat.py",
            "exporter/zfsnas/collectors/__init__.py", "tests/fixtures/linux-zfs-2.3.2/proc/spl/kstat/zfs/zil",
            "tests/fixtures/freebsd-14.1/sysctl.txt", "tests/golden/linux-zfs-2.3.2.prom"} <= set(changed)
    for golden in (name for name in changed if name.startswith("tests/golden/") and name.endswith(".prom")):
        old = set((ROOT / golden).read_text().splitlines())
        new = set((copy / golden).read_text().splitlines())
        assert old <= new, golden
        assert all("zfs_zil_" in line or 'collector="zil"' in line for line in new - old), golden
