"""The peak memory of a whole process tree: an exporter, its forked parse children, its commands.

`TreePeak(pid)` samples the tree under `pid` every `interval` seconds (children found through
/proc/<pid>/task/<tid>/children, every thread's), reading each process's VmHWM: its own peak
resident set, which the kernel keeps. `peak_kib` is the largest sum, over the samples, of the
VmHWM of every process seen in that sample or the one before: an upper bound of the tree's peak
(no process can hold more at any moment than its own peak, and one that ended just after the
peak is still counted; pages a forked child shares with its parent count in both, so the bound
errs high). A process that lives shorter than one interval can be missed; a parse child lives as
long as its listing.
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
        self._before: set[int] = set()
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
        todo = [self.pid]
        seen = set()
        while todo:
            pid = todo.pop()
            hwm = _hwm_kib(pid)
            if hwm is None:
                continue
            seen.add(pid)
            if hwm > self.peaks.get(pid, 0):
                self.peaks[pid] = hwm
            if pid not in self.names:
                try:
                    with open(f"/proc/{pid}/comm") as comm:
                        self.names[pid] = comm.read().strip()
                except OSError:
                    self.names[pid] = "?"
            todo.extend(_children(pid))
        self.peak_kib = max(self.peak_kib, sum(self.peaks[pid] for pid in seen | self._before))
        self._before = seen

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def describe(self) -> str:
        top = sorted(self.peaks.items(), key=lambda item: -item[1])[:4]
        return ", ".join(f"{self.names.get(pid, '?')} {kib // 1024} MiB" for pid, kib in top)
