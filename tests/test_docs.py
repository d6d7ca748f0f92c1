"""The docs say what exists: every `./dev`, `zfsnas-exporter` and `zfsnas-bench` command line in
README.md, CHANGELOG.md and docs/*.md names a subcommand and flags the code has; every flag of
ours named on its own exists; every repo path and every link (with its #anchor) leads somewhere;
the backup and restore lines of docs/maintenance.md work on a database a run is writing. (The cells
per matrix docs/benchmarks.md states: tests/bench/test_planner.py.)"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bench.configs import configuration
from tests.integration.test_stack import BENCH, GiB, store_result
from zfsnas import capture
from zfsnas.bench.cli import build_parser as bench_parser
from zfsnas.store.database import Store
from zfsnas.wiring import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
# Flags only zfsnas has (other tools' flags in the docs, e.g. node_exporter's `--path.rootfs`, are not checked).
OURS = re.compile(r"^--(no-)?(collector|datasets?|pools?|tunables|bench|disks|vdevlatency|replay|capture|zfs|kstat)(\.|$)"
                  r"|^--path\.(procfs|sysfs|udev\.data|sysctl-file)$")
TOP = ("docs/", "tests/", "exporter/", "deploy/", "alerts/", "dashboards/", "benchmark-jobs/", "benchmarks/", "demo/")
# Paths the docs give as what an example command would write, and the files README's "Adding a
# collector" writes for its worked example (tests/test_adding_a_collector.py writes them in a copy).
EXAMPLES = {"tests/fixtures/capture-truenas-24.04-sas/", "tests/golden/capture-truenas-24.04-sas.prom",
            "exporter/zfsnas/collectors/zil.py", "tests/collectors/test_zil.py"}
FILES = ("docker-compose.yml", "Dockerfile", "LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "Makefile")


def snippets(path: Path) -> list[str]:
    """Inline code spans and the lines of fenced code blocks."""
    text = path.read_text()
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    out = [line for block in blocks for line in block.splitlines()]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    return out + re.findall(r"`([^`\n]+)`", prose)


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


@functools.cache
def exporter_options(with_capture: bool = False) -> set[str]:
    parser = build_parser()
    if with_capture:
        capture.add_arguments(parser)
    return options(parser)


@functools.cache
def bench_subcommands() -> dict[str, argparse.ArgumentParser]:
    return subparsers(bench_parser())


@functools.cache
def dev_commands() -> set[str]:
    return set(re.findall(r"^    ([a-z0-9-]+)\)$", (ROOT / "dev").read_text(), re.M))


def words(command: str) -> list[str]:
    command = re.split(r"\s+#\s|\s*(?:;|&&|\|\|?)\s*", command)[0]
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def flag_ok(flag: str, known: set[str]) -> bool:
    flag = flag.split("=")[0]
    if "<" in flag:   # --collector.<name>: a pattern
        pattern = re.escape(flag.split("<")[0]) + r"[a-z0-9_.-]+" + re.escape(flag.split(">")[-1])
        return any(re.fullmatch(pattern, k) for k in known)
    return flag in known


def command_problems(snippet: str) -> list[str]:
    problems = []
    # a command starts a snippet or follows a separator, after sudo, VAR=value or a directory
    start = r"(?:^|;|&&|\|\||\||\$\(|\bthen|\bdo)\s*(?:(?:sudo|exec|env)\s+|[A-Z_]+=\S+\s+)*(?:\S*/)?"
    for match in re.finditer(start + r"(\./dev|zfsnas-exporter|zfsnas-bench)\b((?:\s+[^\s;|&#]+)*)", snippet):
        tool, rest = match[1], words(match[2])
        if tool == "./dev":
            if rest and rest[0] not in dev_commands() and not rest[0].startswith("["):
                problems.append(f"./dev {rest[0]}")
            continue
        if tool == "zfsnas-bench":
            if not rest or rest[0].startswith(("<", "[", "-")):
                continue
            names = rest[0].split("/")   # `zfsnas-bench init/run`: either
            missing = [n for n in names if n not in bench_subcommands()]
            if missing:
                problems += [f"zfsnas-bench {n}" for n in missing]
                continue
            sub = bench_subcommands()[names[-1]]
            for word in rest[1:2]:   # `zfsnas-bench import crystaldiskmark`: a subcommand of a subcommand
                nested = next((a.choices for a in sub._actions if isinstance(a, argparse._SubParsersAction)), {})
                sub = nested.get(word, sub)
            known = options(sub) | {"--version"}
        else:
            is_capture = rest[:1] == ["capture"]
            known = exporter_options(is_capture)
        problems += [f"{tool} {w}" for w in rest if w.startswith("--") and not flag_ok(w, known)]
    return problems


def test_every_command_line_names_what_exists():
    problems = [f"{path.name}: {p}" for path in DOCS for s in snippets(path) for p in command_problems(s)]
    assert not problems, problems


def test_every_flag_of_ours_exists():
    exporter = exporter_options(True)
    bench = set().union(*(options(p) for p in bench_subcommands().values()))
    problems = []
    for path in DOCS:
        for snippet in snippets(path):
            for flag in re.findall(r"(?:^|\s)(--[a-z][a-z0-9.<>_-]*)", snippet):
                if OURS.match(flag) and not (flag_ok(flag, exporter) or flag_ok(flag, bench)):
                    problems.append(f"{path.name}: {flag}")
    assert not problems, problems


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_repo_path_and_link_exists():
    problems = []
    for path in DOCS:
        for snippet in snippets(path):
            for token in snippet.split():
                token = token.strip("(),;:'\"").removeprefix("./")
                if not (token.startswith(TOP) or token in FILES) or "$" in token or "..." in token or token in EXAMPLES:
                    continue
                pattern = re.sub(r"<[^>]+>", "*", token.split(":")[0]).rstrip("/")
                if not (ROOT / pattern).exists() and not list(ROOT.glob(pattern)):
                    problems.append(f"{path.name}: {token}")
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                problems.append(f"{path.name}: link {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{path.name}: anchor {target}")
    assert not problems, problems


def code_block_after(path: Path, heading: str) -> list[str]:
    text = path.read_text()
    section = text[text.index(heading):]
    return re.search(r"```sh\n(.*?)```", section, re.S)[1].replace("\\\n", " ").splitlines()


def test_backup_and_restore_lines_work_during_a_run(tmp_path):
    live = tmp_path / "var-lib-zfsnas"
    backup = tmp_path / "backup"
    live.mkdir()
    backup.mkdir()
    db = live / "bench.sqlite"
    now = time.time()
    store_result(db, 1.0 * GiB, now - 3600)
    writer = Store(db)   # a run in progress holds the store open: its newest result is in the -wal
    writer.start_matrix("run-live", "ci", "tank/bench", 1)
    writer.start_result("run-live", 0, configuration(**BENCH), 0, "tank/bench/c0", started=now)
    assert Path(f"{db}-wal").exists()

    def shell(line: str) -> None:
        line = line.replace("/var/lib/zfsnas", str(live)).replace("/backup", str(backup))
        line = line.replace("python3 ", f"{sys.executable} ").replace("zfsnas-bench ", f"{sys.executable} -m zfsnas.bench.cli ")
        subprocess.run(line.split("#")[0] if "zfsnas-bench" in line else line, shell=True, check=True,
                       cwd=tmp_path, executable="/bin/bash")

    for line in code_block_after(ROOT / "docs/maintenance.md", "## Backing up the benchmark database"):
        shell(line)
    copies = list(backup.glob("bench-*.sqlite"))
    assert len(copies) == 1
    rows = sqlite3.connect(copies[0]).execute("SELECT status FROM results ORDER BY id").fetchall()
    assert rows == [("complete",), ("running",)]   # the result in the -wal is in the copy
    writer.close()
    store_result(db, 2.0 * GiB, now)   # a later result, which the restore takes back out
    restore = [line.replace("2026-01-01", copies[0].stem.removeprefix("bench-"))
               for line in code_block_after(ROOT / "docs/maintenance.md", "## Restoring it") if "zfsnas-bench" not in line]
    for line in restore:
        shell(line)
    assert sorted(p.name for p in live.iterdir()) == ["bench.sqlite"] and (db.stat().st_mode & 0o777) == 0o644
    assert sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone() == (2,)


def test_bare_dev_prints_its_usage_only():
    result = subprocess.run([str(ROOT / "dev")], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines[0].startswith("The project's two entry points") and not [line for line in lines if "set -" in line]
    assert {line.split()[0].removeprefix("./dev") or "?" for line in lines[1:-1]} <= {"", "?"}
    assert {line.split()[1] for line in lines if line.startswith("  ./dev")} == dev_commands() - {"*"}


def test_the_private_root_command_is_the_one_the_stack_test_runs():
    from tests.stack.test_engine import MAKE_SHARED

    assert f"\n{' '.join(MAKE_SHARED)}\n" in (ROOT / "docs/stack.md").read_text()


def test_licence_and_changelog():
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence and len(licence) > 10000
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.findall(r"^## ", changelog, re.M) and "### Added" in changelog and "### Changed" in changelog
    assert "### Fixed" in changelog


@pytest.mark.parametrize("snippet, problem", [
    ("zfsnas-exporter --no-such.flag", "zfsnas-exporter --no-such.flag"),
    ("./dev nosuch", "./dev nosuch"),
    ("zfsnas-bench frobnicate x", "zfsnas-bench frobnicate"),
    ("zfsnas-bench run smoke --no-such-flag", "zfsnas-bench --no-such-flag"),
])
def test_the_checker_finds_what_does_not_exist(snippet, problem):
    assert command_problems(snippet) == [problem]
    assert command_problems("zfsnas-exporter --datasets.include x --collector.<name> && ./dev demo") == []
