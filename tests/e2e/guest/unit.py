"""The shipped systemd unit on live ZFS, run by systemd as PID 1 in the guest (issue 42), installed,
upgraded and uninstalled as docs/stack.md and docs/maintenance.md tell a Proxmox or Debian user.

  install      the project wheel (built from the checkout by the harness) the documented way, offline
               from the wheels on the share: a venv in /opt/zfsnas (the Proxmox recipe) or pipx
               with PIPX_HOME=/opt/pipx and PIPX_BIN_DIR=/usr/local/bin (the unit's header);
               deploy/zfsnas-exporter.service copied, `systemctl enable --now`
  previous     (where the harness carried one) the previous version first, with the unit of its
               checkout and a drop-in of the user's own flags; a benchmark database written by its
               `zfsnas-bench run`; then upgraded as docs/maintenance.md says: the flags kept, the
               database migrated by the first writer and left alone by the second
  checks       the first answer; `zpool events -f` following (a scrub of `fast` counted); the
               journal; the sandbox as the kernel applies it (the process's uid, capabilities,
               seccomp and no-new-privileges, /etc read-only and other processes invisible in its
               mount namespace); `systemd-analyze security`; `systemctl restart` and a SIGKILL
               (Restart=); the SMART drop-in
  uninstall    as docs/maintenance.md says; every path of the root file system before the install
               and after the uninstall is listed (tests/e2e/test_unit.py compares them)

After each install and upgrade the installed package is compared with the wheel file by file (its
RECORD's hashes): every checkout says version 0.1.0, so no version number tells the new code from
the old (a `pipx install --force` of a new wheel once left the old code installed: pip keeps an
installed distribution of the version a local wheel has). A scrape fails as soon as the unit's
process exits while it waits, with the unit's journal; a failed step saves that journal too.

Everything lands in results/unit/ (record.json, the scrapes, the journal). Standard library only.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
import traceback
import urllib.request
from pathlib import Path

from pace import PACE, Budget, Stopwatch, wait_until

UNIT = "zfsnas-exporter.service"
SOCKET = "zfsnas-exporter.socket"   # systemd holds the port and passes it (since issue 42)
UNIT_DIR = Path("/etc/systemd/system")
DROPINS = UNIT_DIR / f"{UNIT}.d"
EXPORTER = Path("/usr/local/bin/zfsnas-exporter")   # what the unit's ExecStart runs
PORT = 9923                      # the socket's ListenStream (the previous unit's --web.listen-address=:9923)
BENCH_DB = Path("/var/lib/zfsnas/bench.sqlite")   # the runner's default store, the unit's ReadOnlyPaths
PIPX_ENV = {"PIPX_HOME": "/opt/pipx", "PIPX_BIN_DIR": "/usr/local/bin"}
# pip's bytecode compilation off (a cost, not a behaviour: Python compiles what it imports). Under
# TCG on a busy host it is most of an install's minutes. Spelled PIP_COMPILE=0: pip reads
# PIP_NO_COMPILE=1 as `--compile` (a store_false option's value goes through strtobool as is);
# ensurepip inside `python3 -m venv` reads neither, so the venv's own pip is compiled regardless.
NO_BYTECODE = {"PIP_COMPILE": "0"}
# What a listing of the root file system leaves out: kernel and runtime trees, the share, what the
# scenario itself writes (its pools are mounted at /tank, /fast...), the journal.
NOT_LISTED = ("/proc", "/sys", "/dev", "/run", "/tmp", "/mnt", "/var/log/journal", "/var/tmp", "/opt/zfsnas-e2e")
# The user's own flags, kept in a drop-in across the upgrade (`systemctl edit`'s way)
# A flag of the user's own, kept across the upgrade: one the previous version has too (it has no
# --pools.expected: with that flag it exited on its usage error and Restart= started it for ever)
USER_FLAGS = "--datasets.refresh-interval=30"
# The commands' time limit (30 s by default) at the guest's pace: under TCG on a busy host one
# smartctl took more than 30 s and was killed. Set in the same drop-in, as a user adds flags.
COMMAND_SECONDS = 30


class UnitPhase:
    def __init__(self, sc, install: str, previous: dict | None) -> None:
        self.sc = sc
        self.install_method = install
        self.previous = previous
        self.share = sc.SHARE
        self.out = sc.RESULTS / "unit"
        self.out.mkdir(exist_ok=True)
        self.record: dict = {"install": install, "previous": previous, "commands": [], "steps": {}}
        self.wheelhouse = self.share / "wheelhouse"

    # --- helpers ---------------------------------------------------------------------------------

    def sh(self, argv: list[str], check: bool = True, env: dict | None = None,
           seconds: float = 600) -> subprocess.CompletedProcess:
        """A command as a user types it, recorded (argv, exit status, output tail) in record.json."""
        proc = self.sc.run(argv, check=False, seconds=seconds, env={**os.environ, **(env or {})})
        self.record["commands"].append({"argv": argv, "env": env or {}, "rc": proc.returncode,
                                        "stdout": proc.stdout[-3000:], "stderr": proc.stderr[-3000:]})
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} -> {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-1500:]}")
        return proc

    def save(self) -> None:
        (self.out / "record.json").write_text(json.dumps(self.record, indent=1))

    def show(self, *properties: str) -> dict[str, str]:
        text = self.sc.run(["systemctl", "show", UNIT, *(f"--property={p}" for p in properties)], check=False).stdout
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def main_pid(self) -> int:
        return int(self.show("MainPID").get("MainPID", "0") or 0)

    def listening(self, seconds: float = 120) -> None:
        """Until something accepts on the unit's port. The unit failing ends the wait at once, and so
        does an exit with an error that Restart= retries (a usage error would be retried for ever)."""
        def accepts() -> bool:
            state = self.show("ActiveState", "SubState", "Result")
            if state.get("ActiveState") == "failed" or (state.get("SubState") == "auto-restart"
                                                         and state.get("Result") == "exit-code"):
                raise RuntimeError(f"{UNIT} failed: {state}; journal:\n{self.journal_text()[-3000:]}")
            with socket.socket() as sock:
                sock.settimeout(2)
                return sock.connect_ex(("127.0.0.1", PORT)) == 0

        wait_until(f"{UNIT} listening on {PORT}", accepts, seconds, 1.0)

    def scrape(self, name: str, timeout: float = 120) -> str:
        """One /metrics answer as Prometheus asks for it, with a scrape timeout of `timeout` nominal
        seconds at the guest's pace in the header (the exporter's scrape deadline), saved as <name>.txt.
        The unit is watched meanwhile: with the socket, systemd accepts the connection whether or not
        a process will ever answer it, so an exporter that exits at each start (Restart= starting it
        again every RestartSec) would leave the scrape waiting out its whole timeout. It fails at once instead."""
        seconds = timeout * PACE.slowness()
        request = urllib.request.Request(f"http://127.0.0.1:{PORT}/metrics",
                                         headers={"X-Prometheus-Scrape-Timeout-Seconds": f"{seconds:.0f}"})
        restarts = self.restarts()
        got: dict = {}

        def fetch() -> None:
            try:
                with urllib.request.urlopen(request, timeout=seconds + 60) as response:
                    got["text"] = response.read().decode()
            except Exception as exc:   # raised below, in the caller's thread
                got["error"] = exc

        fetcher = threading.Thread(target=fetch, name=f"scrape-{name}", daemon=True)
        fetcher.start()
        while fetcher.is_alive():
            fetcher.join(3)
            if fetcher.is_alive():
                self.still_running(restarts, f"while the scrape {name} waited")
        if "error" in got:
            raise got["error"]
        (self.out / f"{name}.txt").write_text(got["text"])
        return got["text"]

    def restarts(self) -> int:
        return int(self.show("NRestarts").get("NRestarts", "0") or 0)

    def still_running(self, restarts: int, when: str) -> None:
        """Raises, with the unit's journal, when its process exited since NRestarts was `restarts`:
        the unit failed, waits to be restarted, or was restarted by Restart=."""
        state = self.show("ActiveState", "SubState", "Result", "NRestarts")
        if state.get("ActiveState") == "failed" or state.get("SubState") == "auto-restart" \
                or int(state.get("NRestarts", "0") or 0) > restarts:
            raise RuntimeError(f"{UNIT}'s process exited {when}: {state}; journal:\n{self.journal_text()[-3000:]}")

    def scrape_until(self, name: str, check, seconds: float = 180) -> str:
        """Scrapes until `check(text)` holds (the last one saved as <name>.txt either way)."""
        budget = Budget(seconds)
        while True:
            text = self.scrape(name)
            if check(text) or budget.spent():
                return text
            time.sleep(1)

    def journal_text(self) -> str:
        return self.sc.run(["journalctl", "--no-pager", "-u", UNIT, "-u", SOCKET, "-o", "short-monotonic"],
                           check=False).stdout

    def listing(self, name: str) -> None:
        """Every path of the root file system (its type: d, f, l), sorted, into <name>.txt."""
        prune = " -o ".join(f"-path {p}" for p in NOT_LISTED)
        text = self.sc.run(["sh", "-c", f"find / -xdev \\( {prune} \\) -prune -o -printf '%y %p\\n' | sort"],
                           check=False, seconds=600).stdout
        (self.out / f"{name}.txt").write_text(text)

    def step(self, name: str, action) -> None:
        watch = Stopwatch()
        try:
            action()
            self.record["steps"][name] = {"ok": True}
        except Exception:
            self.sc.log(f"unit {name} failed:\n{traceback.format_exc()}")
            self.record["steps"][name] = {"ok": False, "error": traceback.format_exc()[-3000:]}
            # what the unit and systemd said: the journal of the unit and its socket, and its status
            status = self.sc.run(["systemctl", "status", "--no-pager", "--lines=0", SOCKET, UNIT], check=False).stdout
            (self.out / f"journal-{name}.txt").write_text(f"{status}\n{self.journal_text()}")
        self.record["steps"][name].update(seconds=watch.wall(), nominal_seconds=watch.nominal())
        self.save()

    # --- install, upgrade, uninstall ------------------------------------------------------------

    def install(self, wheel: Path, deploy: Path, name: str, upgrade: bool = False) -> None:
        """The wheel the documented way (offline: --no-index, the dependencies' wheels from the share):
        docs/stack.md's install, or with `upgrade` docs/maintenance.md's; its unit file copied. Then
        the installed package is checked to be the wheel's (`installed_is`)."""
        offline = ["--no-index", "--find-links", str(self.wheelhouse)]
        if self.install_method == "venv":
            if not Path("/opt/zfsnas/bin/pip").exists():
                self.sh(["python3", "-m", "venv", "/opt/zfsnas"])
            self.sh(["/opt/zfsnas/bin/pip", "install", *(["--upgrade", "--force-reinstall"] if upgrade else []),
                     *offline, str(wheel)], env=NO_BYTECODE)
            for script in ("zfsnas-exporter", "zfsnas-bench"):
                if not os.path.lexists(f"/usr/local/bin/{script}"):
                    self.sh(["ln", "-s", f"/opt/zfsnas/bin/{script}", f"/usr/local/bin/{script}"])
        else:
            # pipx's own pip runs too (its shared pip, setuptools and wheel): offline through pip's
            # environment, which every pip it starts reads (the wheelhouse carries those three).
            # The upgrade: --force installs into the existing venv, where pip keeps an installed
            # distribution of the same version as a local wheel; --pip-args=--force-reinstall replaces it.
            self.pipx_install(wheel, *(["--force", "--pip-args=--force-reinstall"] if upgrade else []))
        self.copy_units(deploy)
        self.installed_is(wheel, name)

    def pipx_install(self, wheel: Path, *flags: str) -> None:
        self.sh(["pipx", "install", *flags, str(wheel)],
                env={**PIPX_ENV, **NO_BYTECODE, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheelhouse)})

    def copy_units(self, deploy: Path) -> None:
        self.sh(["cp", *(str(deploy / f) for f in (SOCKET, UNIT) if (deploy / f).exists()), str(UNIT_DIR)])

    def installed_is(self, wheel: Path, name: str, strict: bool = True) -> None:
        """The zfsnas that /usr/local/bin/zfsnas-exporter runs is `wheel`'s, file by file: each file
        of the wheel's RECORD (but RECORD itself) read from the site-packages of the script's
        Python and hashed as RECORD says. Recorded under installed.<name> with the time it was
        checked (CLOCK_MONOTONIC, systemd's ExecMainStartTimestampMonotonic's clock); raises on any
        difference (unless not `strict`), before any wait for the exporter."""
        import zipfile

        script = EXPORTER.resolve()
        python = script.read_text().splitlines()[0].removeprefix("#!").strip()   # the venv's Python
        paths = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"   # purelib, data...
        schemes = json.loads(self.sc.run([python, "-c", paths]).stdout)
        site = Path(schemes["purelib"])
        with zipfile.ZipFile(wheel) as archive:
            record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
            record = archive.read(record_name)
        differ, checked = [], 0
        for path, digest, *_ in csv.reader(record.decode().splitlines()):
            if not digest:   # RECORD itself
                continue
            parts = Path(path).parts
            if parts[0].endswith(".data"):   # <name>.data/<scheme>/...: installed under that scheme's path
                if parts[1] == "scripts":        # their #! line is rewritten at install
                    continue
                target = Path(schemes[parts[1]], *parts[2:])
            else:
                target = site / path
            algorithm, _, expected = digest.partition("=")
            try:
                data = target.read_bytes()
            except OSError as exc:
                differ.append(f"{path}: {exc.strerror}")
                continue
            checked += 1
            if base64.urlsafe_b64encode(hashlib.new(algorithm, data).digest()).rstrip(b"=").decode() != expected:
                differ.append(path)
        info = {"wheel": wheel.name, "record_sha256": hashlib.sha256(record).hexdigest(), "script": str(script),
                "python": python, "site_packages": str(site), "files_checked": checked, "differ": differ,
                "monotonic_us": int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)}
        self.record.setdefault("installed", {})[name] = info
        self.save()
        if strict and (differ or not checked):
            raise RuntimeError(f"the installed zfsnas ({site}) is not {wheel}: {len(differ)} of its files differ "
                               f"or are missing ({', '.join(differ[:8])}), {checked} checked")

    def uninstall(self) -> None:
        """docs/maintenance.md#uninstall, line by line."""
        self.sh(["systemctl", "disable", "--now", SOCKET, UNIT])
        self.sh(["rm", "-rf", str(UNIT_DIR / SOCKET), str(UNIT_DIR / UNIT), str(DROPINS)])
        self.sh(["systemctl", "daemon-reload"])
        if self.install_method == "venv":
            self.sh(["rm", "-rf", "/opt/zfsnas", "/usr/local/bin/zfsnas-exporter", "/usr/local/bin/zfsnas-bench"])
        else:
            self.sh(["pipx", "uninstall", "zfsnas"], env=PIPX_ENV)
            self.sh(["rm", "-rf", PIPX_ENV["PIPX_HOME"]])

    def user_flags(self) -> None:
        """Flags added in a drop-in, as `systemctl edit zfsnas-exporter` writes one: the commands' time
        limit at the guest's pace, and where a previous version is upgraded the user's own flags."""
        DROPINS.mkdir(parents=True, exist_ok=True)
        exec_start = (UNIT_DIR / UNIT).read_text().split("\nExecStart=", 1)[1].split("\n", 1)[0]
        flags = [f"--zfs.command-timeout={max(COMMAND_SECONDS, round(COMMAND_SECONDS * PACE.slowness()))}"]
        flags += [USER_FLAGS] if self.previous else []
        (DROPINS / "override.conf").write_text(f"[Service]\nExecStart=\nExecStart={exec_start} {' '.join(flags)}\n")
        self.record["override"] = (DROPINS / "override.conf").read_text()

    def smart_dropin(self, deploy: Path) -> None:
        DROPINS.mkdir(parents=True, exist_ok=True)
        self.sh(["cp", str(deploy / "zfsnas-exporter-smart.conf"), str(DROPINS / "smart.conf")])
        self.sh(["systemctl", "daemon-reload"])
        self.sh(["systemctl", "restart", "zfsnas-exporter"])

    # --- what is checked (recorded here, judged by tests/e2e/test_unit.py) -----------------------

    def process(self, name: str) -> dict:
        """The running process as the kernel sees it, and as it sees the system from inside."""
        pid = self.main_pid()
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        status = {k: v.strip() for k, v in status.items()}
        uid, gid = status["Uid"].split()[0], status["Gid"].split()[0]
        # in its mount namespace: /etc must be read-only even for root, /proc shows only its own user's processes
        etc = self.sc.run(["nsenter", f"--target={pid}", "--mount", "--", "touch", "/etc/zfsnas-probe"], check=False)
        seen = self.sc.run(["nsenter", f"--target={pid}", "--mount", f"--setuid={uid}", f"--setgid={gid}", "--",
                            "ls", "/proc"], check=False)
        pids = [int(p) for p in seen.stdout.split() if p.isdigit()]
        owners = {}
        for other in pids:
            try:
                owners[other] = next(line.split()[1] for line in Path(f"/proc/{other}/status").read_text().splitlines()
                                     if line.startswith("Uid:"))
            except (OSError, StopIteration):
                owners[other] = None   # gone (ls itself)
        all_pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        info = {"pid": pid, "cmdline": Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1],
                "status": {k: status.get(k) for k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd",
                                                      "CapAmb", "NoNewPrivs", "Seccomp")},
                "touch_etc": {"rc": etc.returncode, "stderr": etc.stderr.strip()},
                "proc_seen": {"rc": seen.returncode, "pids": pids, "owners": owners, "stderr": seen.stderr.strip()},
                "processes_in_guest": len(all_pids),
                "show": self.show("User", "DynamicUser", "NRestarts", "ActiveState", "SubState", "ExecMainStartTimestamp",
                                  "ExecMainStartTimestampMonotonic", "InvocationID")}
        self.record.setdefault("process", {})[name] = info
        self.save()
        return info

    def events(self) -> None:
        """A scrub of `fast` while the unit follows `zpool events -f`: its scrub_start and scrub_finish counted."""
        self.sh(["zpool", "scrub", "-w", "fast"], seconds=600)

        def counted(text: str) -> bool:
            return any(line.startswith("zfs_pool_events_total{") and 'pool="fast"' in line and "scrub_finish" in line
                       for line in text.splitlines())

        self.scrape_until("events", counted, 180)

    def security(self) -> None:
        proc = self.sh(["systemd-analyze", "security", "--no-pager", UNIT], check=False)
        (self.out / "security.txt").write_text(proc.stdout + proc.stderr)

    def restart(self) -> None:
        before = self.main_pid()
        self.sh(["systemctl", "restart", "zfsnas-exporter"])
        self.listening()
        self.scrape("restarted")
        self.record["restart"] = {"before": before, "after": self.main_pid()}
        self.process("restarted")

    def killed(self) -> None:
        """SIGKILL of the main process: Restart=on-failure starts it again after RestartSec."""
        before, restarts = self.main_pid(), int(self.show("NRestarts")["NRestarts"])
        self.sh(["kill", "-KILL", str(before)])
        wait_until("a new main process", lambda: self.main_pid() not in (0, before)
                   and self.show("ActiveState")["ActiveState"] == "active", 120, 0.5)
        self.listening()
        self.scrape("after_kill")
        self.record["kill"] = {"before": before, "after": self.main_pid(), "restarts_before": restarts,
                               "restarts_after": int(self.show("NRestarts")["NRestarts"])}
        self.process("after_kill")

    def journal_entries(self) -> list[dict]:
        """The process's own journal entries (not systemd's lines about the unit): priority, message,
        invocation, pid, CLOCK_MONOTONIC time in microseconds."""
        text = self.sc.run(["journalctl", "--no-pager", "-o", "json", f"_SYSTEMD_UNIT={UNIT}"], check=False).stdout
        entries = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            message = entry.get("MESSAGE")
            if isinstance(message, list):   # bytes that are not UTF-8
                message = bytes(message).decode(errors="replace")
            entries.append({"priority": int(entry.get("PRIORITY", 6)), "message": message,
                            "invocation": entry.get("_SYSTEMD_INVOCATION_ID"), "pid": entry.get("_PID"),
                            "monotonic_us": int(entry.get("__MONOTONIC_TIMESTAMP", 0))})
        return entries

    def journal(self) -> None:
        """The process's own journal entries into journal.json; the whole unit's journal into journal.txt."""
        (self.out / "journal.json").write_text(json.dumps(self.journal_entries(), indent=1))
        (self.out / "journal.txt").write_text(self.journal_text())

    # --- the benchmark database across the upgrade -------------------------------------------------

    def bench_schema(self, name: str) -> None:
        """The database as it is: its columns per table, user_version, results, a digest of the rows."""
        import hashlib

        db = sqlite3.connect(f"file:{BENCH_DB}?mode=ro", uri=True)
        try:
            tables = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")]
                      for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")}
            rows = db.execute("SELECT * FROM results ORDER BY id").fetchall()
            info = {"tables": tables, "user_version": db.execute("PRAGMA user_version").fetchone()[0],
                    "results": len(rows), "config_ids": [r[0] for r in db.execute("SELECT config_id FROM results")],
                    "digest": hashlib.sha256(repr(rows).encode()).hexdigest()}
        finally:
            db.close()
        self.record.setdefault("bench", {})[name] = info
        self.save()

    def previous_bench_run(self) -> None:
        """A result written by the previous version's own `zfsnas-bench run` (one small cell)."""
        self.sh(["zfs", "create", "fast/upgrade"])
        bench = "/usr/local/bin/zfsnas-bench"   # the installed one, not the scenario's
        self.sh([bench, "init", "fast/upgrade", "--yes"])
        self.sh([bench, "run", str(self.share / "guest" / "bench-upgrade.toml"), "--dataset", "fast/upgrade",
                 "--jobs-dir", str(self.share / "benchmark-jobs"), "--db", str(BENCH_DB)], seconds=900)

    # --- the whole phase ---------------------------------------------------------------------------

    def run(self) -> None:
        wheel = next((self.share / "wheels").glob("zfsnas-*.whl"))
        deploy = self.share / "deploy"
        self.listing("listing_before")
        if BENCH_DB.exists():   # the scenario's own store is not this phase's: put aside, put back
            raise RuntimeError(f"{BENCH_DB} exists before the unit phase")
        if self.previous:
            previous = self.share / "previous"
            self.step("install_previous", lambda: (self.install(next(previous.glob("zfsnas-*.whl")), previous / "deploy",
                                                                "previous"),
                                                   self.user_flags(),
                                                   self.sh(["systemctl", "daemon-reload"]),
                                                   self.sh(["systemctl", "enable", "--now", "zfsnas-exporter"])))
            self.step("previous_running", lambda: (self.listening(), self.scrape("previous"), self.process("previous")))
            self.step("previous_bench", lambda: (self.previous_bench_run(), self.bench_schema("previous"),
                                                 self.scrape_until("previous_bench", lambda t: "zfs_bench_" in t, 120)))
            if self.install_method == "pipx":
                self.step("upgrade_as_before", self.upgrade_as_before)
            self.step("upgrade", self.upgrade)
        else:
            self.step("install", lambda: (self.install(wheel, deploy, "first"), self.user_flags(),
                                          self.sh(["systemctl", "daemon-reload"]),
                                          self.sh(["systemctl", "enable", "--now", SOCKET, UNIT])))
            self.step("first_answer", lambda: (self.listening(), self.scrape("first"), self.process("first")))
        self.step("events", self.events)
        self.step("security", self.security)
        self.step("restart", self.restart)
        self.step("kill", self.killed)
        self.step("journal", self.journal)
        self.step("smart", lambda: (self.smart_dropin(deploy), self.listening(),
                                    self.scrape_until("smart", lambda t: "zfs_disk_smart_state{" in t, 300),
                                    self.process("smart")))
        self.step("uninstall", lambda: (self.journal(), self.uninstall()))
        self.listing("listing_after")
        # the store is kept by an uninstall (the docs say so); it is this phase's, not the scenario's
        for path in BENCH_DB.parent.glob(BENCH_DB.name + "*"):
            path.unlink()
        self.sc.run(["zfs", "destroy", "-r", "fast/upgrade"], check=False)
        self.save()

    def upgrade_as_before(self) -> None:
        """The pipx upgrade docs/maintenance.md gave until 2026-11-29, `pipx install --force <wheel>`,
        kept as the evidence of why it was wrong and as the files check's negative control. pipx
        (1.1.0, Debian 12) installs into the existing venv with `pip install <wheel>`, and pip keeps
        an installed distribution of the version a local wheel has (`zfsnas is already installed with
        the same version as the provided wheel`): the previous code stays. Started by the new unit
        and socket, that code cannot listen (the service may not open an AF_INET socket, and systemd
        holds the port), exits, and Restart= starts it again every RestartSec. Recorded under
        `as_before`: the files check's differences, the restarts, the unit's journal of the loop;
        the unit is stopped afterwards and `upgrade` follows."""
        wheel = next((self.share / "wheels").glob("zfsnas-*.whl"))
        self.pipx_install(wheel, "--force")
        self.copy_units(self.share / "deploy")
        self.installed_is(wheel, "as_before", strict=False)
        self.sh(["systemctl", "daemon-reload"])
        self.sh(["systemctl", "stop", UNIT])
        self.sh(["systemctl", "enable", "--now", SOCKET])
        restarts, mark = self.restarts(), int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
        self.sh(["systemctl", "restart", UNIT])
        looped = True
        try:
            wait_until("Restart= starting the unit again", lambda: self.restarts() > restarts, 120, 1.0)
        except Exception:   # recorded: the host test says what it means
            looped = False
        self.sh(["systemctl", "stop", UNIT])
        entries = [e for e in self.journal_entries() if e["monotonic_us"] >= mark]
        self.record["as_before"] = {"restarted": looped, "restarts": self.restarts() - restarts,
                                    "invocations": sorted({e["invocation"] for e in entries if e["invocation"]}),
                                    "messages": [e["message"] for e in entries][:40]}
        (self.out / "journal-as_before.txt").write_text(self.journal_text())
        self.save()

    def upgrade(self) -> None:
        """docs/maintenance.md#upgrade for the unit, then the database's first and second writer."""
        wheel = next((self.share / "wheels").glob("zfsnas-*.whl"))
        deploy = self.share / "deploy"
        self.install(wheel, deploy, "upgraded", upgrade=True)
        self.sh(["systemctl", "daemon-reload"])
        # the previous unit listened itself: the socket takes the port once it is let go
        self.sh(["systemctl", "stop", UNIT])
        self.sh(["systemctl", "enable", "--now", SOCKET])
        self.sh(["systemctl", "restart", UNIT])
        self.listening()
        self.scrape("first")
        self.process("first")
        self.bench_schema("upgraded")                      # the exporter only reads: not migrated yet
        self.sh(["/usr/local/bin/zfsnas-bench", "list", "--db", str(BENCH_DB)])
        self.bench_schema("after_list")                    # list reads: still not migrated
        self.sh(["/usr/local/bin/zfsnas-bench", "restore", "--db", str(BENCH_DB)])
        self.bench_schema("first_writer")                  # the first writer migrates
        self.sh(["/usr/local/bin/zfsnas-bench", "restore", "--db", str(BENCH_DB)])
        self.bench_schema("second_writer")                 # the second finds nothing to do
        self.scrape_until("upgraded_bench", lambda t: "zfs_bench_" in t, 120)


def run(sc) -> dict:
    """The unit phase with the harness's settings (config.json `unit`); returns its record."""
    settings = sc.CONFIG.get("unit") or {}
    phase = UnitPhase(sc, settings.get("install", "venv"), settings.get("previous"))
    try:
        phase.run()
    finally:
        phase.save()
        shutil.rmtree("/tmp/unit-phase", ignore_errors=True)
    return phase.record
