"""deploy/freebsd/zfsnas_exporter: `sh -n`, then the script run as FreeBSD's service(8) would, against
stand-ins for /etc/rc.subr and daemon(8) (tests/stack/freebsd/, written from their manual pages:
neither exists on Linux), starting the real exporter on the FreeBSD 14.1 sysctl fixture."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port, value

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy/freebsd/zfsnas_exporter"
STANDINS = ROOT / "tests/stack/freebsd"


def test_rc_script_parses():
    result = subprocess.run(["sh", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_rc_script_starts_the_exporter_as_nobody_through_daemon(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("daemon(8) drops to the user: needs root")
    os.chmod(tmp_path, 0o755)
    script = tmp_path / "zfsnas_exporter"
    script.write_text(SCRIPT.read_text().replace("/etc/rc.subr", str(STANDINS / "rc.subr"))
                      .replace("/usr/sbin/daemon", str(STANDINS / "daemon"))
                      .replace("/var/run/", f"{tmp_path}/"))
    port = free_port()
    exporter = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin/zfsnas-exporter"
    (tmp_path / "rc.conf").write_text(
        f'zfsnas_exporter_command="{exporter}"\n'
        f'zfsnas_exporter_listen_address="127.0.0.1:{port}"\n'
        f'zfsnas_exporter_args="--path.sysctl-file={ROOT}/tests/fixtures/freebsd-14.1/sysctl.txt"\n')
    env = {**os.environ, "RC_CONF": str(tmp_path / "rc.conf"), "DAEMON_LOG": str(tmp_path / "daemon.log")}

    def service(action: str) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", str(script), action], capture_output=True, text=True, env=env, timeout=30)

    refused = service("start")   # zfsnas_exporter_enable defaults to NO
    assert refused.returncode != 0 and "Set zfsnas_exporter_enable to YES" in refused.stderr
    with open(tmp_path / "rc.conf", "a") as conf:
        conf.write('zfsnas_exporter_enable="YES"\n')
    assert service("start").returncode == 0
    try:
        argv = (tmp_path / "daemon.log").read_text().split()
        assert argv[:9] == ["-f", "-r", "-S", "-T", "zfsnas_exporter", "-P", f"{tmp_path}/zfsnas_exporter.pid",
                            "-u", "nobody"]
        assert argv[9:] == [str(exporter), "--kstat.source", "sysctl", f"--web.listen-address=127.0.0.1:{port}",
                            f"--path.sysctl-file={ROOT}/tests/fixtures/freebsd-14.1/sysctl.txt"]
        deadline = time.monotonic() + 30
        while True:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "daemon.log.out").read_text()[-2000:]
                time.sleep(0.3)
        assert value(text, "zfs_arc_size_bytes") == 11_811_160_064   # the fixture's arcstats.size
        uids = [line.split()[1] for line in Path(f"/proc/{exporter_pid(port)}/status").read_text().splitlines()
                if line.startswith("Uid:")]
        assert uids == [str(int(subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True).stdout))]
        assert "is running as pid" in service("status").stdout
    finally:
        stopped = service("stop")
    assert stopped.returncode == 0
    deadline = time.monotonic() + 15
    while port_open(port) or service("status").returncode == 0:
        assert time.monotonic() < deadline, "the exporter or daemon outlived `service zfsnas_exporter stop`"
        time.sleep(0.2)


def port_open(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)
        return True
    except OSError:
        return False


def exporter_pid(port: int) -> int:
    """The PID of the exporter itself (not the daemon stand-in nor setpriv) serving `port`."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (f"--web.listen-address=127.0.0.1:{port}".encode() in cmdline
                    and not any(word.endswith((b"/daemon", b"setpriv")) for word in cmdline[:2])):
                return int(proc.name)
    raise AssertionError(f"no exporter process listening on {port}")
