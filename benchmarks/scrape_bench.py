#!/usr/bin/env python3
"""Scrape cost of zfsnas-exporter against Debian's node_exporter (ZFS collector only), interleaved.

    ./dev bench                        # or: .venv/bin/python benchmarks/scrape_bench.py
    ./dev bench --reps 10 --scrapes 100 --trees live-2.3.2 --perturbation

Method (docs/performance.md):
- Both exporters run at the same time on the same tree and are scraped alternately (A, B, B, A,
  ...: the order flips every pair), so machine load falls on both alike. A repetition is
  `--scrapes` pairs; each ratio printed is the median over `--reps` repetitions of ours / theirs,
  with [min..max] over the repetitions beside it.
- CPU per scrape: the process's utime+stime (both exporters' own threads, background refreshes
  included; not `zfs`/`zpool` children) over a repetition, divided by its scrapes.
- Trees: `live-2.3.2` and `live-2.1.11` are the kstat and module-parameter trees recorded on live
  OpenZFS in our QEMU guests (tests/fixtures/linux-zfs-*-live: every file either exporter reads),
  with the disk fixture's /proc/diskstats, /sys/block and udev data added; `large` is that 2.3.2
  tree with 4 pools of 2,000 objsets in all and a full txg history.
- Churn: before every pair the tree changes as a live NAS's does between two scrapes (`Churn`:
  global kstats, iostats, a new committed txg, diskstats, 10 % of the objsets), so caching a
  file's parse can only win where live files really stay the same. `--static` turns it off.
- Collector sets: `kstat` is ours with the kstat collectors only (what node_exporter's zfs
  collector covers); `default` is ours with every default collector, `zfs`/`zpool` answered from
  the recorded outputs of the same guest (tests/fixtures/commands/) and `smartctl` from the SMART
  fixtures of the disk tree (tests/fixtures/smart/awake); `default-no-smart` (`--sets`) the same
  without the smart collector, to see what it costs.
- Floor: the time Python needs only to open and read, as text, every file under the tree's
  /proc/spl/kstat/zfs once, timed in this process once with every scrape pair (the same churned
  files, at the same moment as the scrapes); "x floor" is our p50 over the floor's median, per
  repetition, the median [min..max] of the repetitions. (Until session 25 the floor was timed
  once per tree, before the repetitions, against a median over them.)
- Start-up: from spawn to the first complete /metrics answer, median of 5, interleaved.
- `--perturbation`: fio sequential 1 MiB and random 4 KiB writes on a tmpfs file, each one
  `--fio-seconds` run whose 2 s blocks alternate quiet and with our exporter (default collectors)
  scraped once a second; fio's bandwidth log (0.5 s windows) gives each block's throughput, each
  scraped block is set against the mean of its two quiet neighbours; median of those differences
  with a 95 % bootstrap interval, beside the same estimator on quiet blocks alone (the noise),
  and a bound the noise cannot blur: the CPU the exporter took (all of it, over the whole run) as
  a share of one core during the scraped blocks, with the scraping client's beside it.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests/fixtures"
TICK = 1 / 100  # USER_HZ: /proc/<pid>/stat times are in 1/100 s on every Linux we run on
spec = importlib.util.spec_from_file_location("gen", FIXTURES / "generate_kstat_fixtures.py")
gen = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(gen)  # type: ignore[union-attr]


# --- trees -------------------------------------------------------------------------------------

def live_tree(root: Path, version: str) -> Path:
    """The live capture of `version` with the disk fixture's block devices and udev data added."""
    shutil.copytree(FIXTURES / f"linux-zfs-{version}-live", root, ignore=shutil.ignore_patterns("commands"))
    disks = FIXTURES / "linux-disks"
    shutil.copy(disks / "proc/diskstats", root / "proc/diskstats")
    shutil.copytree(disks / "sys/block", root / "sys/block", symlinks=True)
    shutil.copytree(disks / "udev", root / "udev", symlinks=True)
    return root


def large_tree(root: Path, pools: int = 4, objsets: int = 2000, history: int = 100) -> Path:
    """The live 2.3.2 tree (all its global kstats) with its pools replaced by `pools` synthetic ones."""
    live_tree(root, "2.3.2")
    kstat = root / "proc/spl/kstat/zfs"
    for old in ("tank", "fast"):
        shutil.rmtree(kstat / old)
    per_pool = objsets // pools
    for p in range(pools):
        pdir = kstat / f"pool{p}"
        pdir.mkdir()
        (pdir / "state").write_text("ONLINE\n")
        (pdir / "txgs").write_text(gen.txgs_text(gen.txg_rows(1_000_000, history, 10**12, seed=p)))
        (pdir / "dmu_tx_assign").write_text(
            gen.named_kstat(100 + p, [(f"{1 << i} ns", 4, c) for i, c in enumerate(gen.tx_assign_counts(p))]))
        (pdir / "iostats").write_text(gen.named_kstat(200 + p, [(f, 4, 1000 + i) for i, f in enumerate(gen.IOSTATS_23)]))
        for d in range(per_pool):
            name = f"pool{p}" if d == 0 else f"pool{p}/data/set{d:04d}"
            (pdir / f"objset-0x{d + 0x36:x}").write_text(
                gen.named_kstat(300 + d, gen.objset_fields("2.3", name, 10**9 + d, 2 * 10**9 + d)))
    return root


class Churn:
    """Before every scrape pair, rewrites what a live NAS changes between two scrapes, so that no
    exporter is measured on files that never change (a cache keyed on a file's bytes would then
    always hit): every global named kstat (arcstats, dmu_tx, zil, ...) and each pool's iostats and
    dmu_tx_assign get every number raised, each pool's txgs gains a committed txg (the oldest
    leaves the ring), /proc/diskstats' counters rise, and a rotating `objset_share` of the objset
    files (at least one) get new counters: the datasets being written to. The other objsets get a
    new snapshot time in their header line, as every read of a kstat does. Pool `state` and module
    parameters stay as they are, as they do on a NAS."""

    NUMERIC = {"1", "2", "3", "4", "5", "6"}   # kstat type codes of integers

    def __init__(self, tree: Path, objset_share: float = 0.1):
        kstat = tree / "proc/spl/kstat/zfs"
        pools = sorted(p for p in kstat.iterdir() if p.is_dir())
        self.named = [p for p in sorted(kstat.iterdir()) if p.is_file() and self._is_named(p)]
        self.named += [p / name for p in pools for name in ("iostats", "dmu_tx_assign") if (p / name).is_file()]
        self.txgs = [p / "txgs" for p in pools if (p / "txgs").is_file()]
        self.objsets = sorted(kstat.glob("*/objset-*"))
        self.per_tick = max(1, round(len(self.objsets) * objset_share)) if self.objsets else 0
        self.diskstats = tree / "proc/diskstats"
        self.tick = 0

    @staticmethod
    def _is_named(path: Path) -> bool:
        with open(path, errors="replace") as f:
            f.readline()
            return f.readline().split() == ["name", "type", "data"]

    def __call__(self) -> None:
        self.tick += 1
        start = self.tick * self.per_tick
        busy = [self.objsets[(start + i) % len(self.objsets)] for i in range(self.per_tick)] if self.objsets else []
        for path in self.named + busy:
            self._raise_named(path)
        for path in self.objsets:
            if path not in busy:
                self._raise_named(path, header_only=True)
        for path in self.txgs:
            self._commit_txg(path)
        if self.diskstats.is_file():
            self._raise_diskstats()

    def _raise_named(self, path: Path, header_only: bool = False) -> None:
        """A new snapshot time in the header (the kernel writes the time of every read there), and
        unless `header_only` every integer raised."""
        lines = path.read_text().split("\n")
        header = lines[0].split()
        if len(header) == 7:
            lines[0] = " ".join([*header[:6], str(int(header[6]) + 1_000_000_000 * self.tick)])
        for i, line in enumerate([] if header_only else lines[2:], start=2):
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[1] in self.NUMERIC and parts[2].isdigit():
                lines[i] = line[:len(line) - len(parts[2])] + str(int(parts[2]) + 4096 + self.tick)
        path.write_text("\n".join(lines))

    def _commit_txg(self, path: Path) -> None:
        """The open txg is committed with the last committed one's figures; a new one opens."""
        rows = [line.split() for line in path.read_text().splitlines()[1:] if line.strip()]
        committed = [r for r in rows if r[2] == "C"]
        if not committed:
            return
        new = [int(v) if i != 2 else v for i, v in enumerate(committed[-1])]
        last = max(int(r[0]) for r in rows)
        born = max(int(r[1]) for r in rows)
        new[0], new[1] = last, born + 5_000_000_000
        opened = [last + 1, born + 10_000_000_000, "O", *[0] * 9]
        kept = [tuple(int(v) if i != 2 else v for i, v in enumerate(r)) for r in committed[1:]]
        path.write_text(gen.txgs_text([*kept, tuple(new), tuple(opened)]))

    def _raise_diskstats(self) -> None:
        out = []
        for line in self.diskstats.read_text().splitlines():
            parts = line.split()
            numbers = " ".join(str(int(v) + self.tick) for v in parts[3:])
            out.append(f"{int(parts[0]):4d} {int(parts[1]):7d} {parts[2]} {numbers}")
        self.diskstats.write_text("\n".join(out) + "\n")


TREES = {"live-2.3.2": ("2.3", lambda r: live_tree(r, "2.3.2")),
         "live-2.1.11": ("2.1", lambda r: live_tree(r, "2.1.11")),
         "large": ("2.3", large_tree)}


def floor_files(tree: Path) -> list[Path]:
    """Every kstat file of the tree: what the read floor reads."""
    return [p for p in sorted((tree / "proc/spl/kstat/zfs").rglob("*")) if p.is_file()]


def read_floor(tree: Path, reps: int = 20) -> float:
    """Median seconds of `reps` reads of the tree's floor, back to back (collect_bench)."""
    files = floor_files(tree)
    return statistics.median(read_once(files) for _ in range(reps))


def read_once(files: list[Path]) -> float:
    """Seconds for Python to open and read every one of `files` once, as text: the read floor."""
    start = time.perf_counter()
    for path in files:
        with open(path) as f:
            f.read()
    return time.perf_counter() - start


# --- exporters ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SETS = ("kstat", "default", "default-no-smart")


def ours_argv(tree: Path, commands: str, collectors: str, port: int) -> list[str]:
    argv = [str(Path(sys.executable).with_name("zfsnas-exporter")), f"--web.listen-address=127.0.0.1:{port}",
            f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys", f"--path.udev.data={tree}/udev/data"]
    if collectors == "kstat":
        return [*argv, "--no-collector.datasets", "--no-collector.pools", "--no-collector.disks", "--no-collector.bench",
                "--no-collector.smart"]
    prefix = [sys.executable, str(FIXTURES / "commands/standin.py"), str(recordings(commands))]
    return [*argv, "--zfs.command-prefix", shlex.join(prefix), "--no-collector.bench",
            *(["--no-collector.smart"] if collectors == "default-no-smart" else [])]


_RECORDINGS: dict[str, Path] = {}


def recordings(commands: str) -> Path:
    """The stand-in's directory for the default collectors: the guest's zfs/zpool recordings of that
    OpenZFS version and smartctl's answers for the disk tree's disks (tests/fixtures/smart/awake),
    made once per run."""
    if commands not in _RECORDINGS:
        sys.path.insert(0, str(ROOT))
        from tests.conftest import copy_commands

        _RECORDINGS[commands] = copy_commands(Path(tempfile.mkdtemp(prefix="zfsnas-bench-")) / "commands",
                                              f"zfs-{commands}", smart="awake")
    return _RECORDINGS[commands]


def node_argv(tree: Path, port: int) -> list[str]:
    node = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
    return [node, f"--web.listen-address=127.0.0.1:{port}", f"--path.procfs={tree}/proc",
            f"--path.sysfs={tree}/sys", "--collector.disable-defaults", "--collector.zfs"]


@dataclass
class Exporter:
    name: str
    argv: list[str]
    port: int
    proc: subprocess.Popen | None = None
    times: list[float] = field(default_factory=list)

    @classmethod
    def on_free_port(cls, name: str, argv: Callable[..., list[str]], *args: object) -> Exporter:
        port = free_port()
        return cls(name, argv(*args, port), port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> float:
        """Spawn and wait for the first complete answer; returns the seconds that took."""
        started = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}: {shlex.join(self.argv)}")
            try:
                urllib.request.urlopen(self.url, timeout=5).read()
                return time.perf_counter() - started
            except OSError:
                if time.perf_counter() - started > 60:
                    raise SystemExit(f"{self.url} did not answer in 60 s") from None
                time.sleep(0.002)

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait()

    def scrape(self) -> bytes:
        start = time.perf_counter()
        body = urllib.request.urlopen(self.url, timeout=60).read()
        self.times.append(time.perf_counter() - start)
        return body

    def cpu_seconds(self) -> float:
        assert self.proc
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * TICK   # utime, stime

    def rss_bytes(self) -> int:
        assert self.proc
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


def ours_exporter(tree: Path, commands: str, collectors: str) -> Exporter:
    return Exporter.on_free_port("zfsnas", ours_argv, tree, commands, collectors)


def samples(body: bytes) -> int:
    return sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def interleaved(ours: Exporter, theirs: Exporter, reps: int, scrapes: int,
                churn: Callable[[], None] | None, files: list[Path]) -> dict[str, list[float]]:
    """Per repetition: p50, p99 and CPU per scrape of each; the ratios ours / theirs; the read
    floor of `files` (timed once with every pair, the same churned tree at the same moment) and
    our p50 over it. `churn` changes the tree before every pair (not timed, and not in either
    exporter's CPU)."""
    for exporter in (ours, theirs):
        for _ in range(5):
            exporter.scrape()   # warm up
    out: dict[str, list[float]] = {k: [] for k in ("p50", "p99", "cpu", "p50_ours", "p99_ours", "p50_theirs",
                                                     "p99_theirs", "cpu_ours", "cpu_theirs", "floor", "x_floor")}
    for _ in range(reps):
        ours.times.clear()
        theirs.times.clear()
        floors = []
        cpu0 = ours.cpu_seconds(), theirs.cpu_seconds()
        for i in range(scrapes):
            if churn:
                churn()
            pair = (ours, theirs) if i % 2 == 0 else (theirs, ours)
            for exporter in pair:
                exporter.scrape()
            floors.append(read_once(files))
        cpu = (ours.cpu_seconds() - cpu0[0]) / scrapes, (theirs.cpu_seconds() - cpu0[1]) / scrapes
        p50 = statistics.median(ours.times), statistics.median(theirs.times)
        p99 = pct(ours.times, 0.99), pct(theirs.times, 0.99)
        for key, (a, b) in (("p50", p50), ("p99", p99), ("cpu", cpu)):
            out[key].append(a / b if b else float("nan"))
            out[f"{key}_ours"].append(a)
            out[f"{key}_theirs"].append(b)
        out["floor"].append(statistics.median(floors))
        out["x_floor"].append(p50[0] / out["floor"][-1])
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}..{max(values):.2f}]"


def bench_tree(label: str, tree: Path, commands: str, sets: list[str], reps: int, scrapes: int,
               churn: Churn | None) -> None:
    """Print one table row per collector set."""
    files = floor_files(tree)
    for collectors in sets:
        ours, theirs = ours_exporter(tree, commands, collectors), Exporter.on_free_port("node_exporter", node_argv, tree)
        startup: dict[str, list[float]] = {"ours": [], "theirs": []}
        for _ in range(5):   # start-up, interleaved, then stopped again
            for key, exporter in (("ours", ours), ("theirs", theirs)):
                startup[key].append(exporter.start())
                exporter.stop()
        try:
            ours.start()
            theirs.start()
            if collectors.startswith("default"):
                time.sleep(2)   # the first background refreshes (zfs/zpool, smartctl) land before measuring
            counts = samples(ours.scrape()), samples(theirs.scrape())
            r = interleaved(ours, theirs, reps, scrapes, churn, files)
            rss = ours.rss_bytes(), theirs.rss_bytes()
        finally:
            ours.stop()
            theirs.stop()
        med = statistics.median
        print(f"| {label} | {collectors} | {med(r['p50_ours']) * 1e3:.2f} / {med(r['p50_theirs']) * 1e3:.2f} "
              f"| {spread(r['p50'])} | {spread(r['p99'])} | {spread(r['cpu'])} | {rss[0] / rss[1]:.2f} "
              f"| {counts[0]} / {counts[1]} | {spread(r['x_floor'])} ({med(r['floor']) * 1e3:.2f} ms) "
              f"| {med(startup['ours']) * 1e3:.0f} / {med(startup['theirs']) * 1e3:.0f} |", flush=True)


# --- perturbation ------------------------------------------------------------------------------

def fio_windows(directory: Path, rw: str, bs: str, seconds: int, during: Callable[[float], None]) -> tuple[float, list]:
    """One time-based fio write job on a file in `directory`, `during(start)` run in a thread beside it.
    Returns the job's start (epoch seconds) and its bandwidth log: (window end in seconds since
    the start, bytes per second) for every WINDOW of the run."""
    log, marker = directory / "bw", directory / "started"
    marker.unlink(missing_ok=True)
    # fio runs the prerun command just before the job starts: its file marks fio's time zero
    argv = ["fio", "--name=perturb", f"--directory={directory}", f"--rw={rw}", f"--bs={bs}", "--size=256M",
            "--ioengine=psync", f"--runtime={seconds}", "--time_based", "--output-format=json",
            f"--write_bw_log={log}", f"--log_avg_msec={int(WINDOW * 1000)}", f"--exec_prerun=touch {marker}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, cwd=directory)   # cwd: fio writes <job>.prerun.txt there
    while not marker.exists():
        if proc.poll() is not None:
            raise SystemExit(f"fio failed: {shlex.join(argv)}")
        time.sleep(0.001)
    started = time.time()
    thread = threading.Thread(target=during, args=(started,), daemon=True)
    thread.start()
    proc.wait()
    thread.join()
    if proc.returncode:
        raise SystemExit(f"fio failed: {shlex.join(argv)}")
    windows = []
    for line in Path(f"{log}_bw.1.log").read_text().splitlines():
        ms, kib_per_s = line.split(",")[:2]
        windows.append((int(ms) / 1e3, int(kib_per_s) * 1024.0))
    Path(f"{log}_bw.1.log").unlink()
    return started, windows


WINDOW = 0.5        # seconds per fio bandwidth sample
BLOCK = 2           # seconds per block: blocks alternate quiet and scraped (once a second)


def bootstrap_ci(values: list[float], rounds: int = 2000) -> tuple[float, float]:
    """95 % interval of the median of `values`, by resampling (seeded: the same data prints the same)."""
    rng = random.Random(17)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(rounds * 0.025)], medians[int(rounds * 0.975) - 1]


def block_means(started: float, windows: list, scrapes: list[float], seconds: int) -> list[tuple[float, bool]]:
    """(mean bytes per second, scraped?) of each whole BLOCK of the run, in order. A block is scraped
    if a scrape began in it; its windows are those whose middle falls in it (fio stamps a window at
    its end, a few ms late). The first block, fio's warm-up, and a block that lost a window (fio
    stalled, or the run ended) are left out."""
    blocks = []
    scraped = {int((t - started) // BLOCK) for t in scrapes}
    for b in range(1, seconds // BLOCK):
        values = [bw for end, bw in windows if int((end - WINDOW / 2) // BLOCK) == b]
        if len(values) == round(BLOCK / WINDOW):
            blocks.append((statistics.fmean(values), b in scraped))
    return blocks


def paired(blocks: list[tuple[float, bool]]) -> tuple[list[float], list[float]]:
    """Per cent differences: each scraped block against the mean of the quiet blocks either side,
    and the same estimator on quiet blocks alone (a quiet block against the quiet blocks two
    before and two after it): the noise."""
    diffs, noise = [], []
    for i in range(1, len(blocks) - 1):
        (before, q1), (value, s), (after, q2) = blocks[i - 1], blocks[i], blocks[i + 1]
        if s and not q1 and not q2:
            diffs.append(100 * (value / ((before + after) / 2) - 1))
        elif not s and 2 <= i < len(blocks) - 2 and not (blocks[i - 2][1] or blocks[i + 2][1]):
            noise.append(100 * (value / ((blocks[i - 2][0] + blocks[i + 2][0]) / 2) - 1))
    return diffs, noise


def scrape_odd_blocks(exporter: Exporter, seconds: int, scrapes: list[float], client_cpu: list[float],
                      go: float) -> None:
    """Scrape `exporter` a quarter second into every second of the odd BLOCKs after `go`; the
    moment of each scrape goes to `scrapes`, the CPU seconds this client spent on it to `client_cpu`."""
    for second in range(seconds):
        time.sleep(max(0.0, go + second + 0.25 - time.time()))
        if (second // BLOCK) % 2:
            scrapes.append(time.time())
            cpu = time.thread_time()
            exporter.scrape()
            client_cpu.append(time.thread_time() - cpu)


def cpu_share(exporter_cpu: float, client_cpu: float, scraped_seconds: float) -> tuple[float, float]:
    """Per cent of one core taken while scraped: by the exporter (all of its CPU over the whole run,
    background threads included, counted against the scraped seconds alone) and by the scraping
    client. fio on tmpfs is one CPU-bound thread: work beside it can slow it by at most the CPU
    time it takes from fio's core, so these bound the scrape's effect on its throughput (the
    bound says nothing of caches or memory bandwidth: the measured difference covers those)."""
    return 100 * exporter_cpu / scraped_seconds, 100 * client_cpu / scraped_seconds


def perturbation(tree: Path, seconds: int) -> None:
    """Print one table row per fio job. During one `seconds`-long fio run, BLOCK-second blocks
    alternate quiet and scraped (our exporter, default collectors, scraped once a second, as
    Prometheus would at a 1 s interval); each scraped block is compared with the mean of the quiet
    blocks either side of it, which takes drift (CPU clock, page cache, the exporter's own
    background refreshes, which run in both) out of the difference. Printed: the median of those
    differences with a 95 % bootstrap interval, beside the same estimator on quiet blocks alone
    (what "no difference" looks like on this machine)."""
    ours = ours_exporter(tree, "2.3", "default")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        ours.start()
        try:
            for rw, bs in (("write", "1M"), ("randwrite", "4k")):
                fio_windows(Path(shm), rw, bs, 2, lambda _: None)   # lays the file out: first touches are slow
                scrapes: list[float] = []
                client_cpu: list[float] = []
                cpu0 = ours.cpu_seconds()
                started, windows = fio_windows(Path(shm), rw, bs, seconds + 1,   # + 1: the last block's last window
                                               partial(scrape_odd_blocks, ours, seconds, scrapes, client_cpu))
                exporter_share, client_share = cpu_share(ours.cpu_seconds() - cpu0, sum(client_cpu),
                                                         BLOCK * len({int((t - started) // BLOCK) for t in scrapes}))
                blocks = block_means(started, windows, scrapes, seconds)
                diffs, noise = paired(blocks)
                lo, hi = bootstrap_ci(diffs)
                nlo, nhi = bootstrap_ci(noise)
                quiet = statistics.median(v for v, s in blocks if not s)
                loud = statistics.median(v for v, s in blocks if s)
                print(f"| fio {rw} {bs} on tmpfs | {quiet / 2**20:.0f} MiB/s | {loud / 2**20:.0f} MiB/s "
                      f"| {statistics.median(diffs):+.2f} % [{lo:+.2f}..{hi:+.2f}] ({len(diffs)} blocks) "
                      f"| {statistics.median(noise):+.2f} % [{nlo:+.2f}..{nhi:+.2f}] ({len(noise)}) "
                      f"| {exporter_share:.2f} % ({exporter_share + client_share:.2f} %) |", flush=True)
        finally:
            ours.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=10, help="repetitions per tree and set (default 10)")
    parser.add_argument("--scrapes", type=int, default=100, help="scrape pairs per repetition (default 100)")
    parser.add_argument("--large-scrapes", type=int, default=20, help="scrape pairs per repetition, large tree")
    parser.add_argument("--trees", nargs="+", default=list(TREES), choices=list(TREES))
    parser.add_argument("--sets", nargs="+", default=["kstat", "default"], choices=SETS,
                        help="collector sets (default kstat default; the large tree runs kstat only)")
    parser.add_argument("--static", action="store_true",
                        help="do not change the tree between scrapes (files a live NAS rewrites stay as they are)")
    parser.add_argument("--perturbation", action="store_true", help="also the fio perturbation test")
    parser.add_argument("--fio-seconds", type=int, default=120,
                        help=f"seconds of each fio job, in {BLOCK} s blocks alternating quiet and scraped (default 120)")
    args = parser.parse_args()
    # Bytecode as an installed exporter has it (pip compiles on install, Python on first import):
    # with PYTHONDONTWRITEBYTECODE set, every start would compile our modules again.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "exporter/zfsnas")], check=True)
    print("| tree | zfsnas collectors | p50 ms ours / theirs | p50 ratio | p99 ratio | CPU/scrape ratio | RSS ratio "
          "| samples ours / theirs | ours p50 x floor (read floor) | start-up ms ours / theirs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label in args.trees:
            commands, build = TREES[label]
            tree = build(Path(tmp) / label)
            scrapes = args.large_scrapes if label == "large" else args.scrapes
            churn = None if args.static else Churn(tree)
            bench_tree(label, tree, commands, [s for s in args.sets if s == "kstat" or label != "large"],
                       args.reps, scrapes, churn)
        if args.perturbation:
            print(f"\n| fio job | quiet {BLOCK} s blocks (median) | scraped blocks (median) | difference, median "
                  "[95 % interval] (pairs) | quiet against quiet: the noise [95 % interval] (pairs) "
                  "| bound: CPU share of a core while scraped, exporter (with the scraping client) |")
            print("|---|---|---|---|---|---|")
            perturbation(live_tree(Path(tmp) / "perturb", "2.3.2"), args.fio_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
