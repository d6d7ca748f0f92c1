"""fio never outlives the runner: a watchdog between the two, and the sweep for leftovers.

Owns the life of fio's processes. The runner starts `python -m zfsnas.bench.running.fiowatch <fd> fio ...`
in a new session; the watchdog starts fio, and:
- fio gets `PR_SET_PDEATHSIG(SIGKILL)` (Linux; FreeBSD `procctl(PROC_PDEATHSIG_CTL)`), so fio's
  main process dies with the watchdog, even by SIGKILL;
- fio forks its job workers and each worker calls setsid(), so no process-group kill and no
  parent-death signal reaches them: the watchdog is their subreaper (Linux
  `PR_SET_CHILD_SUBREAPER`, FreeBSD `procctl(PROC_REAP_ACQUIRE)`), so orphaned workers stay its
  descendants, and it reads EOF on the pipe `<fd>` whose write end only the runner holds: EOF
  while fio runs means the runner is gone, and every descendant gets SIGKILL;
- every process of the run carries `ZFSNAS_BENCH_RUN=<run id>` in its environment, which is how
  the next run (holding the run lock, so no run of that database is alive) finds whatever
  survived both (the watchdog itself killed, a crash) and stops it: `stop_leftovers`.
It never signals a process it cannot tie to a run of the caller's database.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

RUN_VARIABLE = "ZFSNAS_BENCH_RUN"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_P_PID = 0                      # FreeBSD idtype_t
_PROC_REAP_ACQUIRE = 2
_PROC_PDEATHSIG_CTL = 11


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def die_with_parent(parent: int) -> None:
    """In a child before exec: SIGKILL when the parent dies (best effort where unsupported)."""
    libc = _libc()
    if libc is None:
        return
    if sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    elif sys.platform.startswith("freebsd"):
        sig = ctypes.c_int(signal.SIGKILL)   # procctl(idtype_t, id_t (64 bits), int, void *)
        libc.procctl(_P_PID, ctypes.c_int64(os.getpid()), _PROC_PDEATHSIG_CTL, ctypes.byref(sig))
    if os.getppid() != parent:   # the parent died before the request took effect
        os._exit(137)


def become_subreaper() -> bool:
    """Orphaned descendants are reparented to this process instead of init."""
    libc = _libc()
    if libc is None:
        return False
    if sys.platform.startswith("linux"):
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    if sys.platform.startswith("freebsd"):
        return libc.procctl(_P_PID, ctypes.c_int64(os.getpid()), _PROC_REAP_ACQUIRE, None) == 0
    return False


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    command: str


def processes(procfs: str = "/proc") -> Iterator[Process]:
    """Every process: from procfs when mounted (Linux), else from `ps` (FreeBSD)."""
    root = Path(procfs)
    if (root / "self").exists():
        for entry in root.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue   # gone meanwhile
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            yield Process(int(entry.name), ppid, cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip())
        return
    out = subprocess.run(["ps", "-ax", "-o", "pid=", "-o", "ppid=", "-o", "command="], capture_output=True,
                         text=True, timeout=10, check=False).stdout
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            yield Process(int(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else "")


def descendants(root: int, procfs: str = "/proc") -> list[int]:
    """Pids below `root`, children before their own children."""
    children: dict[int, list[int]] = {}
    for proc in processes(procfs):
        children.setdefault(proc.ppid, []).append(proc.pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _kill(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_descendants(procfs: str = "/proc") -> None:
    """SIGKILL everything below this process until nothing is left (new orphans come back to a
    subreaper), reaping as we go."""
    for _ in range(50):
        pids = descendants(os.getpid(), procfs)
        if not pids:
            return
        for pid in reversed(pids):   # workers before the fio that would respawn nothing anyway
            _kill(pid, signal.SIGKILL)
        time.sleep(0.05)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def run_id_of(pid: int, procfs: str = "/proc") -> str | None:
    """The ZFSNAS_BENCH_RUN of a process's environment (Linux procfs), None without one."""
    try:
        environ = (Path(procfs) / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = RUN_VARIABLE.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("utf-8", "replace")
    return None


def stop_leftovers(run_ids: Collection[str], procfs: str = "/proc", grace: float = 5.0) -> list[str]:
    """Stop every process marked with one of `run_ids` (runs of this database, none alive: the
    caller holds the run lock): SIGTERM, then SIGKILL after `grace`. One line per process stopped."""
    me = os.getpid()
    found = {p.pid: (run_id_of(p.pid, procfs), p.command) for p in processes(procfs) if p.pid != me}
    ours = {pid: (run, command) for pid, (run, command) in found.items() if run is not None and run in run_ids}
    for pid in ours:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = set(ours)
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if (Path(procfs) / str(pid)).exists() and not _zombie(pid, procfs)}
        time.sleep(0.05)
    for pid in alive:
        _kill(pid, signal.SIGKILL)
    return [f"pid {pid} of run {run}: {command[:200]}" for pid, (run, command) in sorted(ours.items())]


def _zombie(pid: int, procfs: str) -> bool:
    try:
        stat = (Path(procfs) / str(pid) / "stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:].startswith("Z")


def main(argv: list[str]) -> int:
    """`fiowatch <fd> fio args...`: run fio; exit with its status; kill it all if <fd> hits EOF."""
    fd, command = int(argv[0]), argv[1:]
    become_subreaper()
    me = os.getpid()
    fio = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=lambda: die_with_parent(me))  # noqa: PLW1509
    # The runner's SIGTERM (to our whole group) reaches fio too, which stops its workers itself.
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)

    def watch() -> None:
        while True:
            try:
                if not os.read(fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        if fio.poll() is None:  # the runner is gone while fio runs
            kill_descendants()
            os._exit(137)

    threading.Thread(target=watch, daemon=True).start()
    code = fio.wait()
    kill_descendants()   # a worker that outlived its fio
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
