"""Start-up stays light: building the exporter and rendering a scrape imports none of what only
some runs need (replay and capture with tarfile and urllib, TLS, basic auth's bcrypt, YAML web
configs, prometheus_client). Every module here cost start-up time once (docs/performance.md)."""

import subprocess
import sys

from tests.conftest import linux_tree

LATE = ("zfsnas.replay", "zfsnas.capture", "tarfile", "urllib.request", "ssl", "bcrypt", "yaml",
        "prometheus_client", "http.server")

SCRIPT = """
import sys
from zfsnas.cli import build_exporter, build_parser
args = build_parser().parse_args(sys.argv[1:])
exporter = build_exporter(args)
try:
    text = exporter.render()
finally:
    exporter.stop()
assert "zfs_arc_size_bytes" in text, text[:200]
print(" ".join(m for m in {late!r} if m in sys.modules))
"""


def test_a_plain_start_imports_nothing_it_does_not_use():
    tree = linux_tree("2.3.2")
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(late=LATE), f"--path.procfs={tree}/proc",
                          f"--path.sysfs={tree}/sys", "--no-collector.datasets", "--no-collector.pools",
                          "--no-collector.disks", "--no-collector.bench"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []
