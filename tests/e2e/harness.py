"""Host side of the end-to-end suite (entry point: tests/e2e/run).

For each OpenZFS flavour: build or reuse the guest image (image.sh), build the project wheel,
create the guest's disks, start a real Prometheus scraping the guest exporter through a forwarded
port, boot the guest under QEMU (it runs guest/scenario.py from the 9p share and powers off), then
run `pytest -m e2e tests/e2e` on its results while that Prometheus still holds the scraped series.

Environment: ZFSNAS_E2E_CACHE (images), ZFSNAS_E2E_MIRROR (apt mirror), ZFSNAS_E2E_FLAVOURS
("2.3 2.1"), ZFSNAS_E2E_WORK (run directory, default build/e2e), ZFSNAS_E2E_ACCEL (tcg|kvm|auto,
default tcg), ZFSNAS_E2E_TIMEOUT (seconds per guest, default 2400), ZFSNAS_E2E_SERIAL (1: the
flavours one after the other instead of side by side), ZFSNAS_E2E_ONLY (a developer's
shortcut: only these guest phases after the pools, e.g. "client"; most host tests then fail).
"""

from __future__ import annotations

import argparse
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
        if d["bus"] == "sata":
            args += ["-device", f"ide-hd,bus=ahci.{sata_port},drive={drive},serial={d['serial']},"
                                f"model={d['model']},wwn={d['wwn']},rotation_rate=7200"]
            sata_port += 1
        elif d["bus"] == "scsi":
            args += ["-device", f"scsi-hd,bus=scsi.0,drive={drive},serial={d['serial']},vendor={d['vendor']},"
                                f"product={d['product']},wwn={d['wwn']},rotation_rate=7200"]
        else:
            args += ["-device", f"virtio-blk-pci,drive={drive},serial={d['serial']}"]
    return args


def accel() -> list[str]:
    choice = os.environ.get("ZFSNAS_E2E_ACCEL", "tcg")
    if choice == "auto":
        choice = "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "tcg"
    if choice == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg,thread=multi", "-cpu", "max"]


def cached_image(flavour: str) -> Path | None:
    """The image of the current recipe if already built (same key as image.sh: no lock wait)."""
    import hashlib

    digest = hashlib.sha256((HERE / "image.sh").read_bytes() + (HERE / "guest" / "init").read_bytes()).hexdigest()
    path = Path(os.environ.get("ZFSNAS_E2E_CACHE", "/var/cache/zfsnas-e2e")) / f"zfs-{flavour}-{digest[:16]}"
    return path if (path / "info").exists() and (path / "root.qcow2").exists() else None


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


def build_wheel(dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), str(ROOT)],
                   check=True)
    wheels = list(dest.glob("zfsnas-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


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


def prepare_share(share: Path, wheel: Path, port: int, disks: list[dict]) -> None:
    shutil.rmtree(share, ignore_errors=True)
    (share / "wheels").mkdir(parents=True)
    (share / "results").mkdir()
    shutil.copy(wheel, share / "wheels")
    shutil.copytree(HERE / "guest", share / "guest")
    if (ROOT / "benchmark-jobs").is_dir():
        shutil.copytree(ROOT / "benchmark-jobs", share / "benchmark-jobs")
    config = {"port": port, "disks": disks, "data_mib": 8, "write_mib": 256, "linger_seconds": 60}
    if only := os.environ.get("ZFSNAS_E2E_ONLY"):   # a developer's shortcut: these phases alone (e.g. client)
        config["only"] = only.split()
    (share / "config.json").write_text(json.dumps(config, indent=1))


def boot(image: Path, workdir: Path, share: Path, host_port: int, guest_port: int, disks: list[dict],
         prometheus=None, smb_port: int | None = None, client: SmbClient | None = None) -> dict:
    diskdir = workdir / "disks"
    shutil.rmtree(diskdir, ignore_errors=True)
    diskdir.mkdir(parents=True)
    argv = ["qemu-system-x86_64", *accel(), "-m", "3072", "-smp", "2", "-nographic", "-no-reboot",
            "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
            "-append", "root=/dev/vda rw console=ttyS0 init=/sbin/zfsnas-e2e-init panic=-1 loglevel=5",
            # the root disk first on the PCI bus, so that it is vda
            "-drive", f"file={image / 'root.qcow2'},if=none,id=root,format=qcow2,snapshot=on",
            "-device", "virtio-blk-pci,drive=root",
            *qemu_disk_args(disks, diskdir),
            "-virtfs", f"local,path={share},mount_tag=share,security_model=none,id=share",
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{host_port}-:{guest_port}"
                       + (f",hostfwd=tcp:127.0.0.1:{smb_port}-:445" if smb_port else ""),
            "-device", "virtio-net-pci,netdev=n0"]
    (workdir / "qemu.argv").write_text("\n".join(argv) + "\n")
    timeout = float(os.environ.get("ZFSNAS_E2E_TIMEOUT", "2400"))
    started = time.time()
    with open(workdir / "console.log", "wb") as console:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        rc = None
        while rc is None:
            try:
                rc = proc.wait(1)
            except subprocess.TimeoutExpired:
                if client is not None:
                    client.poll()
                if time.time() > deadline:
                    proc.kill()
                    proc.wait()
                    rc = "timeout"
                elif prometheus is not None and not (share / "host-saw-degraded").exists():
                    try:
                        if prometheus.query('zfs_pool_health{pool="tank",state="DEGRADED"} == 1'):
                            (share / "host-saw-degraded").write_text(f"{time.time()}\n")
                    except OSError:
                        pass
    seconds = time.time() - started
    shutil.rmtree(diskdir, ignore_errors=True)
    return {"qemu_exit": rc, "guest_seconds": round(seconds, 1)}


def run_flavour(flavour: str, image: Path, wheel: Path, workdir: Path, pytest_args: list[str]) -> int:
    from tests.integration.prometheus import Prometheus

    workdir.mkdir(parents=True, exist_ok=True)
    share = workdir / "share"
    disks = disk_layout()
    guest_port, host_port = 9923, free_port()
    prepare_share(share, wheel, guest_port, disks)
    if flavour == "2.3":   # the stack's exporter container on live ZFS (tests/e2e/container.py)
        from tests.e2e import container
        container.prepare(share)
    client = grafana = None
    smb_port = free_port()
    if flavour == "2.3" and shutil.which("smbclient"):   # a client copying over SMB (guest client_phase)
        from tests.bench.grafana import FakeGrafana

        grafana = FakeGrafana("glsa_e2e").__enter__()
        client = SmbClient(share, smb_port, client_corpus(workdir.parent / "client-corpus"))
        config = json.loads((share / "config.json").read_text())
        config.update(client=True, grafana_url=f"http://10.0.2.2:{grafana.url.rsplit(':', 1)[1]}",
                      grafana_token="glsa_e2e")
        (share / "config.json").write_text(json.dumps(config, indent=1))
    shutil.rmtree(workdir / "prometheus", ignore_errors=True)
    prometheus = Prometheus(workdir / "prometheus", free_port(), [f"127.0.0.1:{host_port}"], scrape_interval="5s")
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
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    flavours = args.flavour or os.environ.get("ZFSNAS_E2E_FLAVOURS", "2.3 2.1").split()
    work = Path(os.environ.get("ZFSNAS_E2E_WORK", ROOT / "build" / "e2e"))
    started = time.time()
    builder = ImageBuilder(flavours)
    builder.start()
    if args.images_only:
        for flavour in flavours:
            builder.wait(flavour)
        log(f"images ready in {time.time() - started:.0f} s")
        return 0
    wheel = build_wheel(work / "wheels")

    def one(flavour: str) -> int:
        rc = run_flavour(flavour, builder.wait(flavour), wheel, work / flavour, args.pytest_args)
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
