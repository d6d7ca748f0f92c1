"""Render the exposition text the golden files pin: one scrape per fixture tree (kstat collectors),
per command recording (datasets, pools, vdevlatency), of the disk tree (disks), of a bench store,
and of the disk tree's second SMART read (smart: every disk read once, then read again with one
asleep and one failing further).

Collector durations and source ages vary from run to run, so their samples are left out; everything
else, HELP and TYPE lines included, is compared byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from tests import registry

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOLDEN = Path(__file__).parent

CASES = {
    **{f"linux-zfs-{v}": ["--path.procfs", f"linux-zfs-{v}/proc", "--path.sysfs", f"linux-zfs-{v}/sys"]
       for v in ("0.8.6", "2.0.7", "2.1.11", "2.2.7", "2.3.2")},
    **{f"freebsd-{r}": ["--kstat.source", "sysctl", "--path.sysctl-file", f"freebsd-{r}/sysctl.txt"]
       for r in ("13.2", "14.1")},
}
# The kstat collectors on the kstat trees above; the cases below pin the other collectors.
COLLECTORS = registry.only(*registry.KSTAT)
# The command collectors on the OpenZFS 2.1 / 2.3 recordings (the stand-in replays them), the disks
# collector on the block-device tree, bench on a store written through the runner's Store API.
COMMAND_CASES = {f"commands-zfs-{v}": v for v in ("2.1", "2.3")}
# The failure states captured on live OpenZFS in the e2e guests (tests/e2e/guest/failures.py), replayed.
FAILURE_CAPTURES = {f"failure-{p.name.removesuffix('.tar.gz')}": p
                    for p in sorted((FIXTURES / "captures" / "failures").glob("*.tar.gz"))}
OTHER_CASES = (*COMMAND_CASES, "disks", "bench", "smart", *FAILURE_CAPTURES)
VARYING = ("zfs_exporter_collector_duration_seconds{", "zfs_exporter_source_age_seconds{")


def other_flags(case: str, workdir: Path) -> list[str]:
    import shlex
    import sys

    if case in COMMAND_CASES:
        commands = FIXTURES / "commands"
        prefix = [sys.executable, str(commands / "standin.py"), str(commands / f"zfs-{COMMAND_CASES[case]}")]
        kstat = FIXTURES / ("linux-zfs-2.3.2" if COMMAND_CASES[case] == "2.3" else "linux-zfs-2.1.11")
        return [*registry.only(*registry.COMMANDS),
                "--zfs.command-prefix", shlex.join(prefix),  # these collectors wait for a loaded ZFS module:
                "--path.procfs", str(kstat / "proc"), "--path.sysfs", str(kstat / "sys")]
    if case in ("disks", "smart"):
        disks = FIXTURES / "linux-disks"
        return ["--collector.disable-defaults", f"--collector.{case}", "--no-disks.hotplug",
                "--path.procfs", str(disks / "proc"), "--path.sysfs", str(disks / "sys"),
                "--path.udev.data", str(disks / "udev" / "data"),
                *(smart_prefix("awake") if case == "smart" else ())]
    return ["--collector.disable-defaults", "--collector.bench", "--bench.db", str(bench_store(workdir))]


def bench_store(workdir: Path) -> Path:
    """Three finished runs of one configuration and one of another, at fixed times."""
    from tests.bench.configs import configuration
    from zfsnas.store.database import Store
    from zfsnas.store.schema import ResultFigures

    path = workdir / "bench.sqlite"
    store = Store(path)
    try:
        for n, (config, throughput) in enumerate(((("lz4", "1M"), 1_000_000_000), (("lz4", "1M"), 1_040_000_000),
                                                  (("zstd", "128K"), 610_000_000), (("lz4", "1M"), 800_000_000))):
            run_id = f"golden-{n}"
            finished = 1_794_873_600 + 3600 * n
            store.start_matrix(run_id, "golden", "tank/bench", 1)
            cfg = configuration(matrix="golden", workload="seqwrite", size="4G", compression=config[0],
                                recordsize=config[1])
            result = store.start_result(run_id, 0, cfg, 0, "tank/bench/c0", started=finished - 60)
            store.finish_result(result, "complete", finished=finished, figures=ResultFigures(
                throughput_bytes_per_second=throughput, compressratio=1.5, cpu_busy_ratio=0.25, duration_seconds=60.0))
            store.finish_matrix(run_id, "complete")
    finally:
        store.close()
    return path


def smart_prefix(read: str) -> list[str]:
    """`--zfs.command-prefix` for the stand-in answering smartctl from tests/fixtures/smart/<read>."""
    import shlex
    import sys

    standin = [sys.executable, str(FIXTURES / "commands" / "standin.py"), str(FIXTURES / "smart" / read)]
    return ["--zfs.command-prefix", shlex.join(standin)]


def read_smart_again(exporter, read: str) -> None:
    """The smart collector's next refresh, answered from tests/fixtures/smart/<read>."""
    import shlex

    smart = next(c for c in exporter.collectors if c.name == "smart")
    smart.ctx.commands.prefix = shlex.split(smart_prefix(read)[1])
    assert smart.refresher.refresh_now(), smart.refresher.state().error


def render(case: str) -> str:
    import tempfile

    from zfsnas.wiring import build_exporter, build_parser, default_config

    if case in FAILURE_CAPTURES:
        from zfsnas.replay import ReplayExporter, open_capture

        capture = open_capture(FAILURE_CAPTURES[case])
        try:
            text = ReplayExporter(capture, default_config(), process_metrics=False).render()
        finally:
            capture.close()
        return "".join(line + "\n" for line in text.splitlines() if not line.startswith(VARYING))
    with tempfile.TemporaryDirectory() as workdir:
        if case in OTHER_CASES:
            flags = other_flags(case, Path(workdir))
        else:
            flags = [str(FIXTURES / a) if "/" in a else a for a in CASES[case]] + COLLECTORS
        exporter = build_exporter(build_parser().parse_args(flags), process_metrics=False)
        try:
            text = exporter.render()
            if case == "smart":
                read_smart_again(exporter, "later")
                text = exporter.render()
        finally:
            exporter.stop()
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith(VARYING))


ALL_CASES = (*CASES, *OTHER_CASES)


def golden_path(case: str) -> Path:
    return GOLDEN / f"{case}.prom"
