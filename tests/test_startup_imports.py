"""Start-up stays light: a plain start imports none of what only some runs or a first use need
(replay and capture with tarfile and urllib, TLS, basic auth's bcrypt and hashlib, YAML web
configs, prometheus_client, subprocess before the first command, sqlite3 and the benchmark
configuration without a database, the parsers of command output before the first refresh, pickle
before the first forked refresh, shutil (with bz2 and lzma) for argparse's terminal width).
Start-up to the first scrape is mostly imports, and each of these cost it once
(docs/performance.md). The exact set of our own modules a plain start loads is pinned too, so a
new module-level import on the start path shows up here and is a decision, not an accident."""

import subprocess
import sys

from tests import registry
from tests.conftest import linux_tree

# Never on the start path: each is loaded by the one run, request or refresh that needs it.
LATE = ("zfsnas.replay", "zfsnas.capture", "tarfile", "urllib.request", "ssl", "bcrypt", "yaml",
        "prometheus_client", "http.server", "zfsnas.webconfig", "hashlib", "_hashlib", "platform", "json",
        "sqlite3", "zfsnas.store.configuration", "zfsnas.store.schema", "zfsnas.store.database",
        "gzip", "html", "base64", "zfsnas.sources.freebsd", "pickle",
        "shutil", "bz2", "lzma")
# Needed by the first command or refresh (in a refresh thread), not to build or serve.
FIRST_REFRESH = ("subprocess", "tempfile", "shlex", "zfsnas.sources.zpool", "zfsnas.sources.zpool_iostat",
                 "zfsnas.sources.zpool_events", "zfsnas.store.reader", "zfsnas.sources.smart")
# Not loaded by a start at all (the sources' values are NamedTuples, their paths strings, and the
# server reads render's parameters from its code object): dataclasses, inspect (with dis and ast)
# and pathlib (with urllib.parse) cost milliseconds each.
NOT_AT_START = ("dataclasses", "pathlib", "urllib.parse", "inspect")
KSTAT_ONLY = tuple(registry.only(*registry.KSTAT))

# Our modules a start loads: the wiring and the collectors' registry (every collector's flags are
# in --help, declared as typed settings: every module of the registry), the kstat sources, the scrape
# and the server. Only the enabled collectors' sources come on top.
OURS = {*registry.MODULES, "zfsnas", "zfsnas.cli", "zfsnas.collectors", "zfsnas.collectors.base",
        "zfsnas.exposition", "zfsnas.forked", "zfsnas.process", "zfsnas.refresh", "zfsnas.scrape", "zfsnas.server",
        "zfsnas.sources", "zfsnas.sources.commands", "zfsnas.sources.diskstats",
        "zfsnas.sources.kstat", "zfsnas.sources.linux", "zfsnas.sources.model", "zfsnas.sources.zfs_datasets",
        "zfsnas.settings", "zfsnas.collectors.filters", "zfsnas.wiring"}

SCRIPT = """
import sys
from zfsnas.cli import build_exporter, build_parser  # what the daemon's start imports
from zfsnas.server import make_server
args = build_parser().parse_args(sys.argv[1:])
exporter = build_exporter(args)
server = make_server("127.0.0.1:0", exporter.render)
server.socket.close()
loaded = set(sys.modules)
if {render}:
    try:
        text = exporter.render()
    finally:
        exporter.stop()
    assert "\\nzfs_arc_size_bytes 11811160064\\n" in text, text[:200]
    loaded = set(sys.modules)
print(" ".join(sorted(m for m in loaded if m.startswith("zfsnas") or m in {watch!r})))
"""


def loaded_modules(*flags: str, render: bool, watch: tuple[str, ...] = ()) -> set[str]:
    """Our modules and the watched ones (LATE, FIRST_REFRESH and `watch`) that a start with `flags`
    has loaded: after building the exporter and its server, and with `render` after a first scrape too."""
    tree = linux_tree("2.3.2")
    script = SCRIPT.format(render=render, watch=LATE + FIRST_REFRESH + watch)
    out = subprocess.run([sys.executable, "-c", script, f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys",
                          *flags], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_a_kstat_start_and_its_first_scrape_import_only_what_they_use():
    loaded = loaded_modules(*KSTAT_ONLY, render=True, watch=NOT_AT_START)
    assert loaded - OURS == set()
    assert OURS - loaded == set()


def test_a_default_start_leaves_command_parsers_and_subprocess_to_the_first_refresh():
    loaded = loaded_modules("--path.udev.data=/nonexistent", render=False, watch=NOT_AT_START)
    # the disks collector is built: its device inventory comes with it
    assert loaded - OURS == {"zfsnas.sources.blockdevices"}
