"""What the exporter does under systemd (deploy/zfsnas-exporter.service and .socket): it answers on the
socket systemd passes (socket activation) without opening a network socket of its own and hides
the activation variables from its children; its log lines carry syslog priorities when stderr is
journald's, so the journal files warnings as warnings. The real thing runs under systemd in the
QEMU guests (tests/e2e/test_unit.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import linux_tree, value
from tests.integration.exporter_process import exporter_command

TREE = linux_tree("2.3.2")
# exec the exporter from a process whose pid it keeps (LISTEN_PID must be the exporter's own), with
# the socket at fd 3 (systemd's first) when one is given ("-": none)
AS_SYSTEMD = ("import os, sys\n"
              "if sys.argv[1] != '-':\n"
              "    fd = int(sys.argv[1])\n"
              "    if fd != 3: os.dup2(fd, 3); os.close(fd)\n"
              "    os.set_inheritable(3, True)\n"
              "os.environ['LISTEN_PID'] = str(os.getpid())\n"
              "os.execv(sys.argv[2], sys.argv[2:])")


def start(tmp_path: Path, listener: socket.socket | None, env: dict[str, str], *flags: str) -> subprocess.Popen:
    log = open(tmp_path / "log", "wb")
    fd = listener.fileno() if listener is not None else None
    return subprocess.Popen([sys.executable, "-c", AS_SYSTEMD, "-" if fd is None else str(fd), *exporter_command(), *flags],
                            stdout=log, stderr=log, env={**os.environ, **env}, pass_fds=() if fd is None else (fd,))


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(30)


def test_socket_activation_answers_on_systemds_socket_and_hides_it_from_children(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    seen = tmp_path / "child-env"
    spy = tmp_path / "spy.sh"   # the zfs/zpool commands: what environment they were given
    spy.write_text(f"#!/bin/sh\nenv >> {seen}\nexit 1\n")
    spy.chmod(0o755)
    proc = start(tmp_path, listener, {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "zfsnas-exporter.socket"},
                 f"--path.procfs={TREE}/proc", f"--path.sysfs={TREE}/sys", "--path.udev.data=/nonexistent",
                 f"--zfs.command-prefix={spy}", "--web.listen-address=127.0.0.1:1")   # not bound: the socket wins
    listener.close()   # the exporter holds its own copy
    try:
        # connections queue in systemd's socket from the start: the first request waits for the exporter
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120) as response:
            page = response.read().decode()
        assert value(page, "zfs_exporter_collector_success", collector="arc") == 1
        deadline = time.monotonic() + 120   # the zfs/zpool refreshes have run the spy by then
        while not seen.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
    finally:
        stop(proc)
    log = (tmp_path / "log").read_text()
    assert f"listening on http://127.0.0.1:{port}/metrics (systemd's socket)" in log.splitlines()[0], log
    children = seen.read_text()
    assert "LISTEN_" not in children and "PATH=" in children, children


def test_without_its_pid_the_socket_is_not_taken(tmp_path):
    """LISTEN_PID of another process (variables a parent left behind): the exporter binds its own address."""
    from tests.conftest import free_port

    port = free_port()
    proc = subprocess.Popen([*exporter_command(), f"--path.procfs={TREE}/proc", f"--path.sysfs={TREE}/sys",
                             "--collector.disable-defaults", "--collector.arc", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "LISTEN_PID": "1", "LISTEN_FDS": "1"})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
                    assert b"zfs_arc_size_bytes" in response.read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        stop(proc)


def test_log_lines_carry_syslog_priorities_when_stderr_is_the_journal(tmp_path):
    """systemd sets JOURNAL_STREAM to stderr's device:inode: the lines are then `<priority>message`
    (journald strips the prefix and files the line under it; it stamps the time itself)."""
    from tests.conftest import free_port

    log_path = tmp_path / "log"
    log_path.write_text("")
    st = os.stat(log_path)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([*exporter_command(), f"--path.procfs={tmp_path}/none", "--path.sysfs=/nonexistent",
                                 "--collector.disable-defaults", "--collector.arc",
                                 f"--web.listen-address=127.0.0.1:{free_port()}"],
                                stdout=log, stderr=log, env={**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        deadline = time.monotonic() + 120
        while "listening on" not in log_path.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        stop(proc)
    lines = log_path.read_text().splitlines()
    # no ZFS here: the start-up line is a warning; stopping is said at info
    assert lines[0].startswith("<4>zfsnas-exporter 0.1.0: no ZFS kernel module found"), lines
    assert lines[-1] == "<6>shutting down", lines
    assert not [line for line in lines if not line.startswith(("<4>", "<6>"))], lines
