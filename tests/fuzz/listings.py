"""The exporter against hostile listings (tests/fuzz/hostile.py standing in for `zfs`), its whole
process tree's peak RSS measured (tests/fuzz/treerss.py): for tests/fuzz/test_memory_bound.py and
the figures of benchmarks/fuzz.py."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tarfile
import time
import urllib.request
import zlib
from pathlib import Path

from tests.conftest import free_port
from tests.fuzz.treerss import TreePeak
from tests.integration.exporter_process import exporter_command

HOSTILE = Path(__file__).with_name("hostile.py")


def run_exporter(tmp_path: Path, hostile: str, *flags: str, until, seconds: float = 60) -> tuple[TreePeak, str, str]:
    """The exporter with only the datasets collector, `zfs` being hostile.py with `hostile` options,
    scraped every 0.5 s until `until(page)`; (tree peak, last page, log)."""
    (tmp_path / "spl" / "kstat" / "zfs").mkdir(parents=True, exist_ok=True)  # ZFS "loaded", nothing in it
    port = free_port()
    prefix = shlex.join([sys.executable, str(HOSTILE), *hostile.split(), "--"])
    log = tmp_path / "exporter.log"
    proc = subprocess.Popen([*exporter_command(), f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.datasets", "--path.procfs", str(tmp_path), "--path.sysfs", str(tmp_path),
                             "--zfs.command-prefix", prefix, *flags], stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    page = ""
    try:
        with TreePeak(proc.pid) as peak:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                        page = response.read().decode()
                except OSError:
                    page = ""
                if page and until(page):
                    break
                time.sleep(0.5)
            else:
                raise AssertionError(f"not served within {seconds}s: {page[-2000:]}\n{log.read_text()[-2000:]}")
    finally:
        proc.terminate()
        proc.wait(10)
    return peak, page, log.read_text()


def metric(page: str, name: str, **labels) -> float | None:
    """One sample of a page, found as text (parsing 30 MB of page would take longer than the case)."""
    head = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "} "
    at = page.find("\n" + head)
    return None if at < 0 else float(page[at + 1 + len(head):page.index("\n", at + 1)])


def served(page: str) -> int:
    return page.count("\nzfs_dataset_used_bytes{")


def zero_member_archive(path: Path, size: int) -> None:
    """A gzipped tar whose one member holds `size` zero bytes: concatenated gzip members (a reader
    takes them as one stream), the zeros compressed once and repeated, so it is made in a second."""
    header = tarfile.TarInfo("zfsnas-capture/snapshots/0/commands/0.out")
    header.size = size
    block = 64 << 20
    assert size % block == 0
    zeros = _gzip(bytes(block))
    with open(path, "wb") as out:
        out.write(_gzip(header.tobuf(format=tarfile.GNU_FORMAT)))
        for _ in range(size // block):
            out.write(zeros)
        out.write(_gzip(bytes(1024)))  # the end-of-archive blocks


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()
