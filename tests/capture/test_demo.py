"""`./dev demo` (demo/replay_demo.py): captures of our committed live trees replayed, scraped by a real
Prometheus, serving the ARC size those trees hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURES, free_port

ROOT = Path(__file__).resolve().parents[2]


def arcstat(tree: Path, field: str) -> int:
    for line in (tree / "proc/spl/kstat/zfs/arcstats").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == field:
            return int(parts[2])
    raise KeyError(field)


def test_demo_serves_the_live_trees_through_prometheus():
    proc = subprocess.run([sys.executable, str(ROOT / "demo" / "replay_demo.py"), "--once", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    replays = {line.split()[1].rstrip(":"): line.split()[-1] for line in lines if line.startswith("replaying ")}
    served = {line.split()[0]: float(line.split()[2]) for line in lines if " zfs_arc_size_bytes " in line}
    trees = sorted(FIXTURES.glob("linux-zfs-*-live"))
    committed = sorted((FIXTURES / "captures").glob("*.tar.gz"))
    assert len(trees) >= 2 and len(served) == len(replays) == len(trees) + len(committed)
    for tree in trees:
        url = replays[f"{tree.name}.tar.gz"]
        instance = url.removeprefix("http://").removesuffix("/metrics")
        assert served[instance] == arcstat(tree, "size")
    assert any(line.startswith("Prometheus: http://127.0.0.1:") for line in lines)
