"""Threads that play the kernel for tests with real daemons: a fixture file changes on a clock
while the exporter reads it and Prometheus scrapes. Each writer replaces its file atomically, as
the kernel's view of a kstat never shows half a write. `TxgWriter` syncs txgs of tank at RATE,
`Kernel` grows the ARC, dmu_tx, objset and disk counters; both work on a `copy_tree` copy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from zfsnas.sources.kstat import parse_txgs

RATE = 24 << 20  # bytes per second the pool of TxgWriter writes


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename: a reader sees the old or the new file, never half."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


class Ticker(threading.Thread):
    """Calls `tick(seconds since the previous tick)` every `interval` seconds until `stop()`."""

    interval = 0.25

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop_event = threading.Event()

    def tick(self, elapsed: float) -> None:
        raise NotImplementedError

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop_event.wait(self.interval):
            now = time.monotonic()
            self.tick(now - last)
            last = now

    def stop(self) -> None:
        self.stop_event.set()
        if self.is_alive():
            self.join()


@contextmanager
def ticking(*tickers: Ticker) -> Iterator[None]:
    """Start the tickers; stop them (and wait for them) whatever happens in the block."""
    started = []
    try:
        for ticker in tickers:
            ticker.start()
            started.append(ticker)
        yield
    finally:
        for ticker in started:
            ticker.stop()


class TxgWriter(Ticker):
    """Plays the kernel: every 0.25 s a txg syncs with the bytes written since the previous one."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        rows = parse_txgs(path.read_text())
        self.header = path.read_text().splitlines()[0]
        self.committed = [r for r in rows if r.committed]
        self.next_txg = rows[-1].txg + 1

    def row(self, txg, state, ndirty, nwritten, stime):
        return (f"{txg:<8} {txg * 1000:<16} {state:<5} {ndirty:<12} {0:<12} {nwritten:<12} {0:<8} {5:<8} "
                f"{1000:<12} {10:<12} {10:<12} {stime:<12}")

    def tick(self, elapsed):
        written = int(RATE * elapsed)
        self.committed.append(parse_txgs(self.header + "\n" + self.row(self.next_txg, "C", written, written,
                                                                           150_000_000))[0])
        self.next_txg += 1
        ring = self.committed[-20:]  # zfs_txg_history = 22 with the syncing and open txgs
        lines = [self.header] + [self.row(t.txg, "C", t.ndirty, t.nwritten, t.stime) for t in ring]
        lines += [self.row(self.next_txg, "S", 0, 0, 0), self.row(self.next_txg + 1, "O", 0, 0, 0)]
        write_atomically(self.path, "\n".join(lines) + "\n")


# --- Kernel: ARC, dmu_tx, per-dataset and disk counters grow at fixed steps ------------------------

def arcstats_step(name: str) -> int:
    """ARC counters grow by 9 hits per miss: a 90 % hit ratio."""
    if name == "hits":
        return 873
    if name.endswith(("hits", "misses")) or name in ("deleted", "evict_skip", "evict_not_enough", "l2_read_bytes",
                                                        "l2_write_bytes"):
        return 97
    return 0


STEPS = {  # kstat file (relative to proc/spl/kstat/zfs) -> how much each row grows per tick
    "arcstats": arcstats_step,
    "dmu_tx": lambda name: 13,
    "tank/dmu_tx_assign": lambda name: 3 if name.endswith("ns") else 0,
}


def objset_step(name: str) -> int:
    return 4099 if name in ("writes", "nwritten", "reads", "nread") else 0


def bump_named_kstat(path: Path, step) -> None:
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines[2:], start=2):
        name, kind, data = line.rsplit(None, 2)
        if kind in ("1", "2", "3", "4", "5", "6") and (grow := step(name.strip())):
            lines[i] = f"{name:<32}{kind:<5}{int(data) + grow}"
    write_atomically(path, "\n".join(lines) + "\n")


class Kernel(Ticker):
    """Plays ZFS and the block layer: counters in kstats and /proc/diskstats grow every 0.25 s."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root
        self.kstat = root / "proc/spl/kstat/zfs"

    def tick(self, elapsed: float) -> None:
        for name, step in STEPS.items():
            bump_named_kstat(self.kstat / name, step)
        for objset in self.kstat.glob("*/objset-0x*"):
            bump_named_kstat(objset, objset_step)
        diskstats = self.root / "proc/diskstats"
        if diskstats.exists():
            rows = [line.split() for line in diskstats.read_text().splitlines()]
            for row in rows:  # reads, sectors read, read ms, writes, sectors written, write ms, io ms
                for col, step in ((3, 5), (5, 2048), (6, 7), (7, 9), (9, 4096), (10, 11), (12, 200)):
                    if len(row) > col:
                        row[col] = str(int(row[col]) + step)
            write_atomically(diskstats, "".join(" ".join(r) + "\n" for r in rows))
