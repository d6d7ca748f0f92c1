"""The peak memory of a whole process tree: an exporter, its forked parse children, its commands.

`TreePeak(pid)` samples the tree under `pid` every `interval` seconds (children found through
/proc/<pid>/task/<tid>/children, every thread's), reading each process's VmHWM: its own peak
resident set, which the kernel keeps. `peak_kib` is the largest sum, over the samples, of the
VmHWM of the processes alive at that sample: at each sample an upper bound of the tree's resident
set (no process holds more than its own peak; pages a forked child shares with its parent count
in both, as `ps` would count them, so the bound errs high). What a process that ends between two
samples grew in its last interval is missed; a parse child lives as long as its listing. A vfork
child (the parent's own memory, until it execs a command) is recognised by the same
/proc/<pid>/statm as its parent and not counted twice.
"""

from __future__ import annotations

import os
import threading


def _children(pid: int) -> list[int]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as file:
                out.extend(int(x) for x in file.read().split())
        except OSError:
            continue
    return out


def _statm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return statm.read()
    except OSError:
        return None


def _hwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class TreePeak:
    def __init__(self, pid: int, interval: float = 0.005):
        self.pid = pid
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.peak_kib = 0
        self.at_peak: dict[int, int] = {}  # the processes of the peak sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        todo: list[tuple[int, str | None]] = [(self.pid, None)]
        seen = set()
        while todo:
            pid, parent_statm = todo.pop()
            hwm = _hwm_kib(pid)
            statm = _statm(pid)
            if hwm is None or statm is None:
                continue
            if statm == parent_statm:
                continue  # a vfork child, on its way to exec: it shares its parent's memory, not a copy
            seen.add(pid)
            if hwm > self.peaks.get(pid, 0):
                self.peaks[pid] = hwm
            if pid not in self.names:
                try:
                    with open(f"/proc/{pid}/comm") as comm:
                        self.names[pid] = comm.read().strip()
                except OSError:
                    self.names[pid] = "?"
            todo.extend((child, statm) for child in _children(pid))
        total = sum(self.peaks[pid] for pid in seen)
        if total > self.peak_kib:
            self.peak_kib, self.at_peak = total, {pid: self.peaks[pid] for pid in seen}

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def describe(self) -> str:
        """The processes of the peak sample, largest first."""
        top = sorted(self.at_peak.items(), key=lambda item: -item[1])
        return " + ".join(f"{self.names.get(pid, '?')} {kib // 1024}" for pid, kib in top) + " MiB"
