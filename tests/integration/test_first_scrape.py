"""The first answer of a fresh exporter is complete, also on a machine whose CPUs are busy: every
family a collector serves is in it (the disk scan, `zpool`/`zfs` and smartctl have been read), so
after a start or restart no series blinks stale and no alert's `for` starts again.

Seen before (issue 42): under load 2 of 3 fresh starts served the disk counters but no
`zfs_disk_info` on their first scrape. The first scrape now waits for every source's first read,
for at most 3/4 of its time to the scrape's deadline (`ScrapeCollector.await_first_reads`); the
deadline is Prometheus' `X-Prometheus-Scrape-Timeout-Seconds`, given here as a Prometheus with a
generous scrape timeout sends it, so that the machine's load decides nothing but how long it takes.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import FIXTURES, copy_commands, copy_tree, free_port, samples, zfs_commands
from tests.integration.exporter_process import ExporterProcess

DISKS = FIXTURES / "linux-disks"
SCRAPE_TIMEOUT = 120   # seconds, sent as Prometheus sends its scrape_timeout
STARTS = 3             # fresh starts, each checked on its first answer


@pytest.fixture
def busy_cpus():
    """Two processes spinning for as long as the test runs (the issue's two busy loops)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def first_answer(exporter: ExporterProcess, scrape_timeout: float = SCRAPE_TIMEOUT) -> tuple[str, float]:
    """The exporter's first /metrics answer, asked for as soon as its port takes connections (the
    landing page, which renders nothing, tells when), and the seconds it took."""
    exporter.wait_ready("/", timeout=300)
    request = urllib.request.Request(exporter.url + "/metrics",
                                     headers={"X-Prometheus-Scrape-Timeout-Seconds": str(scrape_timeout)})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=scrape_timeout + 60) as response:
        return response.read().decode(), time.monotonic() - started


def default_flags(tmp_path, *options: str) -> list[str]:
    """Every default collector on the 2.3.2 tree with the disk tree, zfs/zpool and smartctl
    answered by the stand-in (with `options`, e.g. --hang-if)."""
    root = copy_tree(tmp_path / "tree", disks=True)
    commands = copy_commands(tmp_path / "commands", smart="awake")
    return ["--path.procfs", str(root / "proc"), "--path.sysfs", str(root / "sys"),
            "--path.udev.data", str(root / "udev" / "data"), *zfs_commands(commands, *options),
            "--bench.db", str(tmp_path / "none.sqlite")]


def expected_disks() -> set[str]:
    """The whole disks of the disk tree that `zfs_disk_info` must name (its default exclusions off)."""
    from zfsnas.collectors.filters import DeviceFilter
    from zfsnas.sources.blockdevices import scan_sysfs

    exclude = DeviceFilter().pattern
    return {d.name for d in scan_sysfs(str(DISKS / "sys"), str(DISKS / "udev" / "data"))
            if d.devtype == "disk" and not exclude.search(d.name)}


def test_the_first_answer_under_cpu_load_holds_every_family(tmp_path, busy_cpus):
    flags = default_flags(tmp_path)
    disks = expected_disks()
    assert len(disks) >= 4
    for n in range(STARTS):
        with ExporterProcess(free_port(), *flags, log_path=tmp_path / f"log-{n}") as exporter:
            page, _ = first_answer(exporter)
        served = samples(page)
        success = {dict(labels)["collector"]: v for (name, labels), v in served.items()
                   if name == "zfs_exporter_collector_success"}
        assert success and set(success.values()) == {1.0}, (n, success, exporter.log())
        sources = {dict(labels)["source"]: v for (name, labels), v in served.items()
                   if name == "zfs_exporter_source_success"}
        assert set(sources.values()) == {1.0}, (n, sources)
        info = {dict(labels)["device"] for (name, labels), _ in served.items() if name == "zfs_disk_info"}
        assert info == disks, f"start {n}: zfs_disk_info names {sorted(info)}, the tree's disks are {sorted(disks)}"
        for family in ("zfs_pool_health", "zfs_vdev_state", "zfs_dataset_used_bytes", "zfs_disk_smart_state",
                       "zfs_disk_reads_total", "zfs_arc_size_bytes"):
            assert any(name == family for name, _ in served), f"start {n}: {family} not in the first answer"


def test_a_hung_zpool_holds_the_first_answer_only_within_its_deadline(tmp_path):
    """A `zpool` that never answers: the first scrape still answers, within its scrape timeout,
    with everything else; the pools are reported not read yet, not waited for past the deadline."""
    hang = tmp_path / "hang"
    hang.write_text("")
    flags = default_flags(tmp_path, "--hang-if", str(hang))
    with ExporterProcess(free_port(), *flags, "--no-collector.smart", log_path=tmp_path / "log") as exporter:
        page, _ = first_answer(exporter, scrape_timeout=4)   # the client waits 64 s: an unbounded wait fails
        hang.unlink()
    served = samples(page)
    success = {dict(labels)["collector"]: v for (name, labels), v in served.items()
               if name == "zfs_exporter_collector_success"}
    assert success["pools"] == 0 and success["datasets"] == 0, success
    assert success["arc"] == 1 and success["disks"] == 1, success
    assert any(name == "zfs_disk_info" for name, _ in served)
    assert not any(name == "zfs_pool_health" for name, _ in served)
