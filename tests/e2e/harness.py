"""Host side of the end-to-end suite (entry point: tests/e2e/run).

For each OpenZFS flavour: build or reuse the guest image (image.sh), build the project wheel,
create the guest's disks, start a real Prometheus scraping the guest exporter through a forwarded
port, boot the guest under QEMU (it runs guest/scenario.py from the 9p share and powers off), then
run `pytest -m e2e tests/e2e` on its results while that Prometheus still holds the scraped series.

The guest boots systemd as PID 1 straight into zfsnas-e2e.service (guest/init, then guest/boot.sh
from the share). A guest is stopped only when it has made no progress (no file of its results,
exchanges or console changed) for ZFSNAS_E2E_STALL nominal seconds at the host's measured pace
(default 1800; guest/pace.py): a busy host is waited for, a hung guest is not.

Environment: ZFSNAS_E2E_CACHE (images), ZFSNAS_E2E_MIRROR (apt mirror), ZFSNAS_E2E_FLAVOURS
("2.3 2.1"), ZFSNAS_E2E_WORK (run directory, default build/e2e), ZFSNAS_E2E_ACCEL (tcg|kvm|auto,
default tcg), ZFSNAS_E2E_STALL (above), ZFSNAS_E2E_TIMEOUT (wall-clock seconds per guest, none by
default: a developer's cap), ZFSNAS_E2E_SERIAL (1: the flavours one after the other instead of side
by side), ZFSNAS_E2E_PREVIOUS (the commit whose wheel the 2.1 guest installs before upgrading to
this checkout; default PREVIOUS), ZFSNAS_E2E_TIER (ci, the default, or full: which phases beyond
the core moments each flavour runs, TIERS), ZFSNAS_E2E_PHASES (or --phases: these phases after the
core moments instead of the tier's, e.g. "unit"; host tests of the others skip), ZFSNAS_E2E_ONLY (a
developer's shortcut: only these guest phases after the pools, e.g. "client"; most host tests then fail).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

# filter="data" (refuse unsafe members) exists from Python 3.11.4; Debian 12's 3.11.2 lacks it. The archives are our guest's.
SAFE_EXTRACT = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

FLAVOURS = {"2.3": "2.3.2", "2.1": "2.1.11"}  # flavour -> expected module version prefix (fixture dir name)
DISK_MIB = 256
GUEST_PORT = 9925   # the scenario's exporter (9923 is the shipped unit's and the compose stack's)
# How each flavour installs the unit (guest/unit.py): 2.3 as docs/stack.md's Proxmox recipe (a venv),
# 2.1 with pipx, first the previous version, then upgraded to this checkout.
UNIT_INSTALL = {"2.3": "venv", "2.1": "pipx"}
# The previous version: the last commit before the benchmark store gained its `latency_us` and
# `details` columns (f3b7b89), so that the upgrade has a migration to make. (There are no tags.)
PREVIOUS = "2a45ce4911ae4f376781a4d0072fef3f0ada605b"
KERNEL_ARGS = "root=/dev/vda rw console=ttyS0 init=/lib/systemd/systemd systemd.unit=zfsnas-e2e.service panic=-1 loglevel=5"
STALL_SECONDS = 1800.0
# The phases after the core moments (steady, before/after_write, scrubbed, bench, degraded), which
# every run has: which of them each flavour runs, per tier. Under TCG a guest's time is the host's
# CPU time, and all of them on both flavours cost about 2 hours of a busy 2-core CI machine; the
# `ci` tier (the default: `./dev test`, CI) gives each feature one live run where it matters most
# and keeps CI under about an hour (measured: 36 min of guests); `full` (`tests/e2e/run --full`, ZFSNAS_E2E_TIER=full) runs
# every phase on every flavour that has it. docs/e2e.md#tiers says which and why.
EXTRA_PHASES = ("unit", "bench_config", "client", "smart", "capture_roundtrip", "failures", "predict", "container")
TIERS = {
    # 2.3: the failure states (RAID-Z expansion is 2.3's), the client over SMB, the unit under
    # systemd (the venv of docs/stack.md). The 2.1 guest's unit phase (pipx, the previous version,
    # the upgrade as documented before replayed, then as documented now) is `full` only: it costs
    # 892 s (225 nominal) of a busy host (2026-11-29), against about 3 min CI could still add. Its
    # first complete run failed: `pipx install --force` of the new wheel had kept the previous code,
    # which cannot listen under the new unit and socket (docs/e2e.md#tiers, docs/maintenance.md).
    "ci": {"2.3": ("smart", "failures", "client", "unit"), "2.1": ("smart",)},
    "full": {"2.3": EXTRA_PHASES, "2.1": tuple(p for p in EXTRA_PHASES if p not in ("client", "container"))},
}
HOST_PROBE_IDLE = 0.02   # seconds guest/pace.py's probe takes on this 2-core host when it is idle

_spec = importlib.util.spec_from_file_location("e2e_pace", HERE / "guest" / "pace.py")
pace = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(pace)  # type: ignore[union-attr]
HOST_PACE = pace.Pace(HOST_PROBE_IDLE)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} e2e: {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def disk_layout() -> list[dict]:
    """Every extra disk: bus, identity and where the scenario puts it.

    tank: RAID-Z2 of 4 SATA + 4 SAS (virtio-scsi) disks, a virtio L2ARC, a SATA spare;
    fast: 4 two-way mirrors, each of one SAS and one virtio disk.
    """
    disks = []
    for i in range(1, 6):
        disks.append({"bus": "sata", "serial": f"ZNS{i:04d}", "model": "ZFSNAS SATA HDD",
                      "wwn": f"0x5000c500e2e0{i:04x}", "pool": "tank",
                      "role": "spare" if i == 5 else "data", "group": "raidz2-0"})
    for i in range(1, 9):
        disks.append({"bus": "scsi", "serial": f"ZNC{i:04d}", "vendor": "ZFSNAS", "product": "SAS HDD",
                      "wwn": f"0x5000c500e2e1{i:04x}", "pool": "tank" if i <= 4 else "fast",
                      "role": "data", "group": "raidz2-0" if i <= 4 else f"mirror-{i - 5}"})
    for i in range(1, 6):
        disks.append({"bus": "virtio", "serial": f"ZNV{i:04d}", "pool": "tank" if i == 1 else "fast",
                      "role": "cache" if i == 1 else "data", "group": "cache" if i == 1 else f"mirror-{i - 2}"})
    return disks


def qemu_disk_args(disks: list[dict], diskdir: Path) -> list[str]:
    args = ["-device", "ich9-ahci,id=ahci", "-device", "virtio-scsi-pci,id=scsi"]
    sata_port = 0
    for n, d in enumerate(disks):
        image = diskdir / f"{d['serial']}.raw"
        with open(image, "wb") as f:
            f.truncate(DISK_MIB << 20)
        drive = f"d{n}"
        args += ["-drive", f"file={image},if=none,id={drive},format=raw,cache=unsafe,aio=threads"]
        ident = f"id=disk-{d['serial']}"   # the QEMU monitor unplugs a disk by this id (Hotplug)
        if d["bus"] == "sata":
            args += ["-device", f"ide-hd,bus=ahci.{sata_port},drive={drive},serial={d['serial']},"
                                f"model={d['model']},wwn={d['wwn']},rotation_rate=7200,{ident}"]
            sata_port += 1
        elif d["bus"] == "scsi":
            args += ["-device", f"scsi-hd,bus=scsi.0,drive={drive},serial={d['serial']},vendor={d['vendor']},"
                                f"product={d['product']},wwn={d['wwn']},rotation_rate=7200,{ident}"]
        else:
            args += ["-device", f"virtio-blk-pci,drive={drive},serial={d['serial']},{ident}"]
    for d in SPARE_DISKS:   # not attached at boot: plugged in later by the guest's request (Hotplug)
        with open(diskdir / f"{d['serial']}.raw", "wb") as f:
            f.truncate(DISK_MIB << 20)
    return args


# A new disk the failure phases plug in to replace a removed one (guest/failures.py).
SPARE_DISKS = [{"bus": "scsi", "serial": "ZNC0009", "vendor": "ZFSNAS", "product": "SAS HDD",
                "wwn": "0x5000c500e2e10009", "pool": None, "role": "new", "group": None}]


class Hotplug:
    """Answers the guest's hotplug/request-N.json on the share through the QEMU monitor (QMP):
    {"remove": [serial...]} unplugs those disks (`device_del`: the guest sees a disk vanish, as when
    it dies or its cable is pulled), {"add": [serial...]} plugs a disk back in, or a new one of
    SPARE_DISKS (`blockdev-add` of its image, `device_add` with its identity). done-N.json holds
    the monitor's answers and the seconds it took."""

    def __init__(self, share: Path, socket_path: Path, diskdir: Path, disks: list[dict]):
        self.exchange = share / "hotplug"
        self.exchange.mkdir(exist_ok=True)
        self.socket_path, self.diskdir = socket_path, diskdir
        self.disks = {d["serial"]: d for d in [*disks, *SPARE_DISKS]}
        self.done: set[str] = set()
        self.plugged = 0

    def poll(self) -> None:
        for request in sorted(self.exchange.glob("request-*.json")):
            n = request.stem.split("-", 1)[1]
            if n in self.done:
                continue
            self.done.add(n)   # (the guest renames a request into place whole)
            started = time.time()
            try:
                answers = self.handle(json.loads(request.read_text()))
                done = {"ok": True, "answers": answers}
            except Exception as exc:   # said to the guest, which fails its phase with it
                done = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            done["seconds"] = round(time.time() - started, 3)
            (self.exchange / f"done-{n}.json").write_text(json.dumps(done, indent=1))
            log(f"hotplug {request.name}: {done}")

    def handle(self, request: dict) -> list:
        answers = []
        with QemuMonitor(self.socket_path) as monitor:
            for serial in request.get("remove", []):
                answers.append(monitor.execute("device_del", id=f"disk-{serial}"))
                answers.append(monitor.event("DEVICE_DELETED", device=f"disk-{serial}"))
            for serial in request.get("add", []):
                disk = self.disks[serial]
                self.plugged += 1
                node = f"plugged{self.plugged}"
                answers.append(monitor.execute("blockdev-add", driver="raw", **{"node-name": node}, file={
                    "driver": "file", "filename": str(self.diskdir / f"{serial}.raw"), "aio": "threads"},
                    cache={"direct": False, "no-flush": True}))
                answers.append(monitor.execute("device_add", driver="scsi-hd", bus="scsi.0", drive=node,
                                               id=f"disk-{serial}", serial=serial, vendor=disk["vendor"],
                                               product=disk["product"], wwn=int(disk["wwn"], 16), rotation_rate=7200))
        return answers


class QemuMonitor:
    """A QMP session on QEMU's monitor socket: `execute` a command and get its answer (an error
    raises), `event` waits for an event (those that came in between are kept)."""

    def __init__(self, path: Path, timeout: float = 600.0):   # the guest's answer (an unplug) is waited for
        self.path, self.timeout = path, timeout
        self.events: list[dict] = []

    def __enter__(self) -> QemuMonitor:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))
        self.reader = self.sock.makefile("r")
        self._read()   # the greeting
        self.execute("qmp_capabilities")
        return self

    def __exit__(self, *exc) -> None:
        self.reader.close()
        self.sock.close()

    def _read(self) -> dict:
        line = self.reader.readline()
        if not line:
            raise ConnectionError("QEMU closed its monitor")
        return json.loads(line)

    def execute(self, command: str, **arguments) -> dict:
        self.sock.sendall(json.dumps({"execute": command, "arguments": arguments}).encode() + b"\n")
        while True:
            message = self._read()
            if "event" in message:
                self.events.append(message)
            elif "error" in message:
                raise RuntimeError(f"{command}: {message['error']}")
            else:
                return {command: message.get("return")}

    def event(self, name: str, **data) -> dict:
        budget = pace.Budget(self.timeout, HOST_PACE)
        while not budget.spent():
            for message in self.events:
                if message["event"] == name and data.items() <= message.get("data", {}).items():
                    self.events.remove(message)
                    return {name: message.get("data")}
            self.events.append(self._read())
        raise TimeoutError(f"no {name} {data} within {budget.describe()}")


class PrometheusWatch:
    """Answers the guest's prom/wait-N.json ({"query": ..., "seconds": ...}) on the share: seen-N.json
    once the harness's Prometheus returns something for the query (the guest holds a state until
    then: a frozen resilver until its alert has fired)."""

    def __init__(self, share: Path, prometheus):
        self.exchange = share / "prom"
        self.exchange.mkdir(exist_ok=True)
        self.prometheus = prometheus

    def poll(self) -> None:
        for request in sorted(self.exchange.glob("wait-*.json")):
            seen = self.exchange / f"seen-{request.stem.split('-', 1)[1]}.json"
            if seen.exists():
                continue
            try:
                result = self.prometheus.query(json.loads(request.read_text())["query"])
            except (OSError, ValueError, KeyError):
                continue
            if result:
                seen.write_text(json.dumps({"time": time.time(), "result": result}, indent=1))


def accel() -> list[str]:
    choice = os.environ.get("ZFSNAS_E2E_ACCEL", "tcg")
    if choice == "auto":
        choice = "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "tcg"
    if choice == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg,thread=multi", "-cpu", "max"]


def cached_image(flavour: str) -> Path | None:
    """The image of the current recipe if already built (image.sh --cached: no lock wait)."""
    proc = subprocess.run([str(HERE / "image.sh"), "--cached", flavour], stdout=subprocess.PIPE, text=True)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


def image_dirs(stdout: str, flavours: list[str]) -> list[Path]:
    """The image directories image.sh printed, one line each, in flavour order; tools it runs may
    print more on stdout (mkfs.ext4 says `Creating regular file ...` even with -q)."""
    dirs = [Path(line.strip()) for line in stdout.splitlines()
            if line.strip().startswith("/") and (Path(line.strip()) / "info").is_file()]
    if len(dirs) != len(flavours):
        raise SystemExit(f"e2e: image.sh printed {len(dirs)} image directories for {len(flavours)} flavours: {stdout!r}")
    return dirs


def build_image(flavour: str) -> Path:
    """The flavour's image: cached, or built by image.sh (which waits for any other build's lock)."""
    cached = cached_image(flavour)
    if cached:
        log(f"[{flavour}] image cached: {cached}")
        return cached
    started = time.time()
    # debootstrap and chroot need root; the guests themselves do not
    sudo = ["sudo", "--preserve-env=ZFSNAS_E2E_CACHE,ZFSNAS_E2E_MIRROR"] if os.geteuid() != 0 and shutil.which("sudo") else []
    proc = subprocess.run([*sudo, str(HERE / "image.sh"), flavour], stdout=subprocess.PIPE, text=True)
    if proc.returncode:
        raise SystemExit(f"e2e: image build failed (exit {proc.returncode})")
    [path] = image_dirs(proc.stdout, [flavour])
    log(f"[{flavour}] image ready in {time.time() - started:.0f} s: {path}")
    return path


class ImageBuilder(threading.Thread):
    """Builds the flavours' images one image.sh call each, in order, in the background: the first
    guest boots as soon as its image is ready while the next one builds (cold, each takes 10-20
    CPU-minutes), and a build already running elsewhere (`./dev test` starts one beside the unit
    tests) is waited for through image.sh's lock, not repeated."""

    def __init__(self, flavours: list[str]):
        super().__init__(daemon=True)
        self.flavours = flavours
        self.ready = {f: threading.Event() for f in flavours}
        self.images: dict[str, Path] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for flavour in self.flavours:
                self.images[flavour] = build_image(flavour)
                self.ready[flavour].set()
        except BaseException as exc:   # SystemExit included: reported by wait() in the main thread
            self.error = exc
        finally:
            for event in self.ready.values():
                event.set()

    def wait(self, flavour: str) -> Path:
        self.ready[flavour].wait()
        if flavour not in self.images:
            raise SystemExit(f"e2e: no image for {flavour}: {self.error}")
        return self.images[flavour]


def build_wheel(dest: Path, source: Path = ROOT) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), str(source)],
                   check=True)
    wheels = list(dest.glob("zfsnas-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


# The guest's CPython and platform (Debian 12): what the wheelhouse's binary wheels must fit.
GUEST_PYTHON = ("3.11", "cp311")
GUEST_PLATFORMS = [*(f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)), "manylinux2014_x86_64",
                   "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
# pipx's own pip installs these into its shared venv (offline from the wheelhouse too)
PIPX_SHARED = ("pip", "setuptools", "wheel")


def requirements(wheel: Path) -> list[str]:
    """The wheel's own dependencies (its METADATA's Requires-Dist without extras)."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(name).decode().splitlines()
    return sorted(line.split(":", 1)[1].strip() for line in lines
                  if line.startswith("Requires-Dist:") and "extra ==" not in line)


def wheelhouse(wheels: list[Path], cache: Path) -> Path:
    """Every dependency of `wheels` (and pipx's shared pip, setuptools, wheel) as wheels for the
    guest's Python, downloaded once per requirement list: the guest installs offline from them as a
    user with internet would from PyPI."""
    wanted = sorted({r for wheel in wheels for r in requirements(wheel)} | set(PIPX_SHARED))
    dest = cache / f"wheelhouse-{hashlib.sha256(' '.join(wanted).encode()).hexdigest()[:12]}"
    if not dest.is_dir():
        tmp = dest.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        platforms = [arg for platform in GUEST_PLATFORMS for arg in ("--platform", platform)]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--dest", str(tmp),
                        "--python-version", GUEST_PYTHON[0], "--implementation", "cp", "--abi", GUEST_PYTHON[1],
                        *platforms, *wanted], check=True)
        tmp.rename(dest)
        log(f"wheelhouse for the guests: {sorted(p.name for p in dest.iterdir())}")
    return dest


def previous_version(commit: str, cache: Path) -> Path | None:
    """`commit`'s wheel and deploy/ (built once, from `git archive`) for the upgrade in the 2.1 guest;
    None where this clone does not have that commit (a shallow clone)."""
    dest = cache / f"previous-{commit[:12]}"
    if (dest / "deploy").is_dir() and list(dest.glob("zfsnas-*.whl")):
        return dest
    source = cache / f"previous-{commit[:12]}.src"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
    if archive.returncode:
        log(f"no commit {commit} in this clone: the 2.1 guest installs this version only (no upgrade)")
        return None
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    wheel = build_wheel(dest.with_suffix(".tmp"), source)
    shutil.copytree(source / "deploy", dest.with_suffix(".tmp") / "deploy")
    shutil.rmtree(dest, ignore_errors=True)
    dest.with_suffix(".tmp").rename(dest)
    shutil.rmtree(source, ignore_errors=True)
    log(f"previous version {commit[:12]}: {wheel.name}")
    return dest


# --- the client of the client experiments (guest/scenario.py client_phase; tests/e2e/test_client.py) ----

CLIENT_FILES = 4
CLIENT_FILE_MIB = 32


def client_corpus(directory: Path) -> list[Path]:
    """FITS-like files: each 128 KiB a smooth half (runs of one value: lz4 and zstd both shrink it)
    and a noisy half (random low 4 bits: only zstd's entropy coding halves it). No two blocks alike."""
    import random

    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(27)
    low = bytes(b & 0x0F for b in range(256))
    paths = []
    for n in range(1, CLIENT_FILES + 1):
        path = directory / f"frame-{n:03d}.fits"
        if not path.exists() or path.stat().st_size != CLIENT_FILE_MIB << 20:
            blocks = []
            for k in range((CLIENT_FILE_MIB << 20) // (128 << 10)):
                blocks.append(b"".join(bytes([(n * 7 + k + j) & 0xFF]) * 256 for j in range(256)))
                blocks.append(rng.randbytes(64 << 10).translate(low))
            path.write_bytes(b"".join(blocks))
        paths.append(path)
    return paths


class SmbClient:
    """Answers the guest's request-N.json on the share: smbclient copies the corpus into the share
    named there through the forwarded port, and done-N.json says what the client measured
    (smbclient's own `average` rate: bytes / (1.024 x milliseconds), i.e. KiB/s)."""

    def __init__(self, share: Path, port: int, corpus: list[Path]):
        self.exchange = share / "client"
        self.exchange.mkdir(exist_ok=True)
        self.port, self.corpus = port, corpus
        self.busy: set[str] = set()

    def poll(self) -> None:
        for request in sorted(self.exchange.glob("request-*.json")):
            n = request.stem.split("-", 1)[1]
            if n in self.busy or (self.exchange / f"done-{n}.json").exists():
                continue
            self.busy.add(n)
            threading.Thread(target=self.copy, args=(n, json.loads(request.read_text())), daemon=True).start()

    def copy(self, n: str, request: dict) -> None:
        files = self.corpus
        if request.get("warmup"):   # the first file a fresh share takes is slow to open (not the copy's business)
            warm = self.corpus[0].with_name("warmup.fits")
            if not warm.exists():
                warm.write_bytes(self.corpus[0].read_bytes()[:4 << 20])
            files = [warm]
        commands = "; ".join(f"put {p} {p.name}" for p in files)
        argv = ["smbclient", f"//127.0.0.1/{request['share']}", "-p", str(self.port), "-U", "zfsnas-client%",
                "-m", "SMB3", "-c", commands]
        started = time.time()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        seconds = time.time() - started
        averages = re.findall(r"\(average ([0-9.]+) kb/s\)", proc.stdout + proc.stderr)
        done = {"rc": proc.returncode, "bytes": sum(p.stat().st_size for p in files), "files": len(files),
                "wall_seconds": round(seconds, 3), "average_kib_s": float(averages[-1]) if averages else None,
                "output": (proc.stdout + proc.stderr)[-3000:]}
        (self.exchange / f"done-{n}.json").write_text(json.dumps(done, indent=1))
        log(f"smbclient into {request['share']}: exit {proc.returncode}, {done['bytes']} bytes, average "
            f"{done['average_kib_s']} KiB/s, {seconds:.1f} s")


def prepare_share(share: Path, wheel: Path, port: int, disks: list[dict], flavour: str = "2.3",
                  house: Path | None = None, previous: Path | None = None) -> None:
    """The 9p share: the wheel (and, for the unit phase, the wheelhouse, the unit files and the
    previous version), the guest's scripts, the benchmark jobs, config.json."""
    shutil.rmtree(share, ignore_errors=True)
    (share / "wheels").mkdir(parents=True)
    (share / "results").mkdir()
    shutil.copy(wheel, share / "wheels")
    shutil.copytree(HERE / "guest", share / "guest")
    if (ROOT / "benchmark-jobs").is_dir():
        shutil.copytree(ROOT / "benchmark-jobs", share / "benchmark-jobs")
    unit: dict = {"install": UNIT_INSTALL.get(flavour, "venv")}
    shutil.copytree(ROOT / "deploy", share / "deploy", ignore=shutil.ignore_patterns("grafana", "prometheus", "alertmanager"))
    if house is not None:
        shutil.copytree(house, share / "wheelhouse")
    if previous is not None:
        shutil.copytree(previous, share / "previous")
        unit["previous"] = {"commit": previous_commit(), "wheel": next(previous.glob("zfsnas-*.whl")).name}
    config = {"port": port, "disks": disks, "new_disks": SPARE_DISKS, "data_mib": 8, "write_mib": 256,
              "linger_seconds": 60, "unit": unit, "tier": run_name(), "phases": list(phases(flavour))}
    if only := os.environ.get("ZFSNAS_E2E_ONLY"):   # a developer's shortcut: these phases alone (e.g. client)
        config["only"] = only.split()
    if os.environ.get("ZFSNAS_E2E_CAPTURE_FIXTURES"):   # run --capture-fixtures: failure states captured too
        config["capture_fixtures"] = True
    (share / "config.json").write_text(json.dumps(config, indent=1))


def boot(image: Path, workdir: Path, share: Path, host_port: int, guest_port: int, disks: list[dict],
         prometheus=None, smb_port: int | None = None, client: SmbClient | None = None) -> dict:
    diskdir = workdir / "disks"
    shutil.rmtree(diskdir, ignore_errors=True)
    diskdir.mkdir(parents=True)
    monitor = workdir / "qmp.sock"
    monitor.unlink(missing_ok=True)
    pollers: list = [Hotplug(share, monitor, diskdir, disks)]
    if client is not None:
        pollers.append(client)
    if prometheus is not None:
        pollers.append(PrometheusWatch(share, prometheus))
    argv = ["qemu-system-x86_64", *accel(), "-m", "3072", "-smp", "2", "-nographic", "-no-reboot",
            "-qmp", f"unix:{monitor},server=on,wait=off",
            "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
            "-append", KERNEL_ARGS,
            # the root disk first on the PCI bus, so that it is vda
            "-drive", f"file={image / 'root.qcow2'},if=none,id=root,format=qcow2,snapshot=on",
            "-device", "virtio-blk-pci,drive=root",
            *qemu_disk_args(disks, diskdir),
            "-virtfs", f"local,path={share},mount_tag=share,security_model=none,id=share",
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{host_port}-:{guest_port}"
                       + (f",hostfwd=tcp:127.0.0.1:{smb_port}-:445" if smb_port else ""),
            "-device", "virtio-net-pci,netdev=n0"]
    (workdir / "qemu.argv").write_text("\n".join(argv) + "\n")
    cap = float(os.environ["ZFSNAS_E2E_TIMEOUT"]) if os.environ.get("ZFSNAS_E2E_TIMEOUT") else None
    started = time.time()
    HOST_PACE.start()
    with open(workdir / "console.log", "wb") as console:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT)
        progress = Progress(workdir / "console.log", share, float(os.environ.get("ZFSNAS_E2E_STALL", STALL_SECONDS)))
        rc = None
        while rc is None:
            try:
                rc = proc.wait(1)
            except subprocess.TimeoutExpired:
                for poller in pollers:
                    poller.poll()
                stalled = progress.stalled()
                if stalled or (cap is not None and time.time() - started > cap):
                    log(f"guest stopped: {stalled or f'ZFSNAS_E2E_TIMEOUT {cap:g} s passed'}")
                    proc.kill()
                    proc.wait()
                    rc = "stalled" if stalled else "timeout"
                elif prometheus is not None and not (share / "host-saw-degraded").exists():
                    try:
                        if prometheus.query('zfs_pool_health{pool="tank",state="DEGRADED"} == 1'):
                            (share / "host-saw-degraded").write_text(f"{time.time()}\n")
                    except OSError:
                        pass
    seconds = time.time() - started
    shutil.rmtree(diskdir, ignore_errors=True)
    return {"qemu_exit": rc, "guest_seconds": round(seconds, 1)}


class Progress:
    """Whether a guest still makes progress: the newest change of its console log and of every file
    of the share's results and exchanges (looked at every 10 s). `stalled()` says why not once
    nothing changed for `seconds` nominal seconds at the host's measured pace."""

    def __init__(self, console: Path, share: Path, seconds: float):
        self.paths = [console, share / "results", share / "hotplug", share / "prom", share / "client"]
        self.seconds = seconds
        self.newest = 0.0
        self.budget = pace.Budget(seconds, HOST_PACE)
        self.looked = 0.0

    def stalled(self) -> str | None:
        if time.time() - self.looked < 10:
            return None
        self.looked = time.time()
        newest = max((self._newest(path) for path in self.paths), default=0.0)
        if newest > self.newest:
            self.newest, self.budget = newest, pace.Budget(self.seconds, HOST_PACE)
            return None
        if self.budget.spent():
            return f"no progress (console, results, exchanges) for {self.budget.describe()}"
        return None

    @staticmethod
    def _newest(path: Path) -> float:
        newest = 0.0
        if path.is_file():
            return path.stat().st_mtime
        for dirpath, _, files in os.walk(path):
            for name in files:
                try:
                    newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
                except OSError:
                    pass
        return newest


def tier() -> str:
    name = os.environ.get("ZFSNAS_E2E_TIER", "ci")
    if name not in TIERS:
        raise SystemExit(f"e2e: ZFSNAS_E2E_TIER={name!r}: one of {', '.join(TIERS)}")
    return name


def chosen_phases() -> tuple[str, ...] | None:
    """The phases ZFSNAS_E2E_PHASES (or --phases) names instead of the tier's, e.g. "unit" or
    "smart,unit" ("" or "none": the core moments alone); None when it is not set. A name that is
    no phase stops the run here, before any image or guest."""
    named = os.environ.get("ZFSNAS_E2E_PHASES")
    if named is None:
        return None
    names = tuple(n for n in named.replace(",", " ").split() if n != "none")
    unknown = [n for n in names if n not in EXTRA_PHASES]
    if unknown:
        raise SystemExit(f"e2e: ZFSNAS_E2E_PHASES={named!r}: no phase {', '.join(unknown)} (phases: {', '.join(EXTRA_PHASES)})")
    return names


def phases(flavour: str) -> tuple[str, ...]:
    """The phases beyond the core that `flavour`'s guest runs: its tier's; or those of
    ZFSNAS_E2E_PHASES that the flavour has (the `full` tier's list for it: no client or container
    on 2.1), the core moments kept; or ZFSNAS_E2E_ONLY's (a developer's shortcut: those alone,
    without the core moments)."""
    only = os.environ.get("ZFSNAS_E2E_ONLY")
    if only:
        return tuple(only.split())
    named = chosen_phases()
    if named is not None:
        return tuple(p for p in named if p in TIERS["full"].get(flavour, ()))
    return TIERS[tier()].get(flavour, ())


def run_name() -> str:
    """What chose this run's phases, as host tests name it when they skip: the tier, or the phases
    named with ZFSNAS_E2E_PHASES."""
    named = chosen_phases()
    return tier() if named is None else f"ZFSNAS_E2E_PHASES={' '.join(named) or 'none'}"


def wanted(phase: str, flavour: str) -> bool:
    return phase in phases(flavour)


def previous_commit() -> str:
    return os.environ.get("ZFSNAS_E2E_PREVIOUS", PREVIOUS)


def run_flavour(flavour: str, image: Path, wheel: Path, workdir: Path, pytest_args: list[str],
                house: Path | None = None, previous: Path | None = None) -> int:
    from tests.integration.prometheus import Prometheus

    workdir.mkdir(parents=True, exist_ok=True)
    share = workdir / "share"
    disks = disk_layout()
    guest_port, host_port = GUEST_PORT, free_port()
    prepare_share(share, wheel, guest_port, disks, flavour, house,
                  previous if UNIT_INSTALL.get(flavour) == "pipx" and wanted("unit", flavour) else None)
    log(f"[{flavour}] {run_name()}: core moments + {', '.join(phases(flavour)) or 'nothing else'}")
    if flavour == "2.3" and wanted("container", flavour):   # the stack's exporter container on live ZFS (tests/e2e/container.py)
        from tests.e2e import container
        container.prepare(share)
    client = grafana = None
    smb_port = free_port()
    # a client copying over SMB (guest client_phase)
    if flavour == "2.3" and wanted("client", flavour) and shutil.which("smbclient"):
        from tests.bench.grafana import FakeGrafana

        grafana = FakeGrafana("glsa_e2e").__enter__()
        client = SmbClient(share, smb_port, client_corpus(workdir.parent / "client-corpus"))
        config = json.loads((share / "config.json").read_text())
        config.update(client=True, grafana_url=f"http://10.0.2.2:{grafana.url.rsplit(':', 1)[1]}",
                      grafana_token="glsa_e2e")
        (share / "config.json").write_text(json.dumps(config, indent=1))
    shutil.rmtree(workdir / "prometheus", ignore_errors=True)
    # our alert rules evaluated as a user's Prometheus would (tests/e2e/test_failures.py reads ALERTS);
    # every 10 s, not 5: under TCG a scrape of the guest costs it 1-2 s of CPU at its idle pace, and
    # at 5 s the scrapes (3.8 s each on average in a CI run, 43 % of them timing out) kept about one
    # of the guest's two vCPUs busy for the whole run
    prometheus = Prometheus(workdir / "prometheus", free_port(), [f"127.0.0.1:{host_port}"], scrape_interval="10s",
                            rule_files=[str(ROOT / "alerts" / "zfsnas.rules.yml")])
    try:
        log(f"[{flavour}] booting {image.name} (exporter on 127.0.0.1:{host_port})")
        result = boot(image, workdir, share, host_port, guest_port, disks, prometheus,
                      smb_port if client else None, client)
        if grafana is not None:
            (share / "results" / "client").mkdir(exist_ok=True)
            (share / "results" / "client" / "annotations.json").write_text(
                json.dumps({str(k): v for k, v in grafana.annotations.items()}, indent=1))
        results = share / "results"
        for archive in results.glob("*/capture.tar"):
            with tarfile.open(archive) as tar:
                tar.extractall(archive.parent, **SAFE_EXTRACT)
        status = (results / "exit_status").read_text().strip() if (results / "exit_status").exists() else "missing"
        result["scenario_exit"] = status
        timeline = results / "timeline.json"
        if timeline.exists():
            result["timeline"] = json.loads(timeline.read_text())
        result["image"] = dict(line.split("=", 1) for line in (image / "info").read_text().split())
        (workdir / "run.json").write_text(json.dumps(result, indent=1))
        log(f"[{flavour}] guest done in {result['guest_seconds']} s, qemu exit {result['qemu_exit']}, "
            f"scenario exit {status}; results in {results}")
        if status != "0":
            tail = (results / "scenario.log").read_text()[-3000:] if (results / "scenario.log").exists() else \
                (workdir / "console.log").read_text(errors="replace")[-3000:]
            log(f"[{flavour}] scenario failed:\n{tail}")
        env = {**os.environ, "ZFSNAS_E2E_RESULTS": str(results), "ZFSNAS_E2E_PROMETHEUS": prometheus.url,
               "ZFSNAS_E2E_FLAVOUR": flavour}
        started = time.time()
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "e2e", "-p", "no:cacheprovider",
                              str(HERE), *pytest_args], cwd=ROOT, env=env)
        log(f"[{flavour}] host comparisons: exit {rc} in {time.time() - started:.0f} s")
        return rc if status == "0" else (rc or 1)
    finally:
        prometheus.stop()
        if grafana is not None:
            grafana.__exit__(None, None, None)


def capture_fixtures(flavour: str, results: Path) -> None:
    """tests/fixtures/linux-zfs-<version>-live/: the guest's kstat tree and command outputs."""
    version = (results / "steady/tree/sys/module/zfs/version").read_text().split("-")[0].strip()
    dest = ROOT / "tests" / "fixtures" / f"linux-zfs-{version}-live"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(results / "steady" / "tree", dest)
    shutil.copytree(results / "steady" / "commands", dest / "commands")
    shutil.copy(results / "steady" / "metrics.txt", dest / "commands" / "metrics.txt")
    log(f"[{flavour}] fixtures written to {dest}")
    capture_archive_fixture(flavour, version, results)
    capture_failure_fixtures(flavour, version, results)


def capture_failure_fixtures(flavour: str, version: str, results: Path) -> None:
    """tests/fixtures/captures/failures/linux-zfs-<version>-<moment>.tar.gz: each failure state's
    capture (guest/failures.py), replayed against tests/golden/failure-*.prom (tests/golden/update.py)."""
    dest = ROOT / "tests" / "fixtures" / "captures" / "failures"
    dest.mkdir(parents=True, exist_ok=True)
    for archive in sorted((results / "failures").glob("*/capture.tar.gz")):
        shutil.copy(archive, dest / f"linux-zfs-{version}-{archive.parent.name}.tar.gz")
        log(f"[{flavour}] failure capture written: {archive.parent.name}")


def capture_archive_fixture(flavour: str, version: str, results: Path) -> None:
    """tests/fixtures/captures/linux-zfs-<version>-guest.tar.gz: the round trip's root capture (./dev demo)."""
    archive = results / "capture_roundtrip" / "root.tar.gz"
    if archive.exists():
        dest = ROOT / "tests" / "fixtures" / "captures" / f"linux-zfs-{version}-guest.tar.gz"
        dest.parent.mkdir(exist_ok=True)
        shutil.copy(archive, dest)
        log(f"[{flavour}] capture written to {dest}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture-fixtures", action="store_true",
                        help="copy each guest's kstat tree and command outputs to tests/fixtures/linux-zfs-*-live")
    parser.add_argument("--flavour", action="append", choices=sorted(FLAVOURS),
                        help="OpenZFS flavour(s) to run (default: ZFSNAS_E2E_FLAVOURS or 2.3 2.1)")
    parser.add_argument("--images-only", action="store_true", help="build or check the images and stop")
    parser.add_argument("--full", action="store_true",
                        help="every phase on every flavour (the `full` tier; default: ZFSNAS_E2E_TIER or `ci`)")
    parser.add_argument("--phases", metavar="NAMES",
                        help="only these phases after the core moments, instead of the tier's, e.g. `unit` or "
                             f"`smart,unit` (`none`: the core moments alone); any of {', '.join(EXTRA_PHASES)} "
                             "(default: ZFSNAS_E2E_PHASES, else the tier's)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    flavours = args.flavour or os.environ.get("ZFSNAS_E2E_FLAVOURS", "2.3 2.1").split()
    work = Path(os.environ.get("ZFSNAS_E2E_WORK", ROOT / "build" / "e2e"))
    if args.capture_fixtures:
        os.environ["ZFSNAS_E2E_CAPTURE_FIXTURES"] = "1"
    if args.full:
        os.environ["ZFSNAS_E2E_TIER"] = "full"
    if args.phases is not None:
        os.environ["ZFSNAS_E2E_PHASES"] = args.phases
    tier()   # a misspelt tier or phase stops here, before any image or guest
    chosen_phases()
    started = time.time()
    builder = ImageBuilder(flavours)
    builder.start()
    if args.images_only:
        for flavour in flavours:
            builder.wait(flavour)
        log(f"images ready in {time.time() - started:.0f} s")
        return 0
    wheel = build_wheel(work / "wheels")
    # the unit phase's material, made once for both guests: the previous version, the wheelhouse
    previous = previous_version(previous_commit(), work) \
        if any(UNIT_INSTALL.get(f) == "pipx" and wanted("unit", f) for f in flavours) else None
    house = wheelhouse([wheel, *(previous.glob("zfsnas-*.whl") if previous else [])], work)

    def one(flavour: str) -> int:
        rc = run_flavour(flavour, builder.wait(flavour), wheel, work / flavour, args.pytest_args, house, previous)
        if not rc and args.capture_fixtures:
            capture_fixtures(flavour, work / flavour / "share" / "results")
        return rc

    # The guests run side by side: a TCG guest keeps about one core busy and waits often (scrapes,
    # txgs, the host's client), so two on two cores take little more than the longer one alone.
    # ZFSNAS_E2E_SERIAL=1 runs them one after the other.
    if os.environ.get("ZFSNAS_E2E_SERIAL") == "1" or len(flavours) < 2:
        codes = [one(flavour) for flavour in flavours]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(flavours)) as pool:
            codes = list(pool.map(one, flavours))
    failures = [flavour for flavour, rc in zip(flavours, codes) if rc]
    for flavour in failures:   # last, where a CI log's tail shows it
        said = guest_failures(work / flavour / "share" / "results")
        if said:
            log(f"[{flavour}] what the guest said went wrong:\n{said}")
    log(f"done in {time.time() - started:.0f} s; failed: {', '.join(failures) or 'none'}")
    return 1 if failures else 0


def guest_failures(results: Path, limit: int = 4000) -> str:
    """The guest scenario's own failure reports: each `... failed:` block of scenario.log (phases
    that went wrong, with their tracebacks), then the container step's error.txt."""
    blocks = []
    log_file = results / "scenario.log"
    if log_file.exists():
        current: list[str] | None = None
        for line in log_file.read_text(errors="replace").splitlines():
            if line.rstrip().endswith("failed:"):
                current = [line]
                blocks.append(current)
            elif current is not None and not re.match(r"\s*\d+\.\d\d ", line):   # not a new log line
                current.append(line)
            else:
                current = None
    error = results / "container" / "error.txt"
    text = "\n".join("\n".join(b) for b in blocks)
    if error.exists():
        text += "\ncontainer/error.txt:\n" + error.read_text(errors="replace")
    return text.strip()[-limit:]


if __name__ == "__main__":
    sys.exit(main())
