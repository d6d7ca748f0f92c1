"""The day a disk dies, in the guest (issue 28): each failure state made for real and captured as a
moment under results/failures/<moment>/, which tests/e2e/test_failures.py compares with what ZFS
said at that moment.

  hotplug      a SAS disk pulled from a `fast` mirror and one from the `tank` RAID-Z2 through the
               QEMU monitor (the harness's Hotplug answers hotplug/request-N.json): REMOVED, DEGRADED
               (moment `removed`); `zpool replace` onto tank's hot spare and onto a new disk plugged in
               for fast, their resilvers held (`zfs_scan_suspend_progress`) until the host's
               Prometheus has fired ZfsPoolResilvering (`resilvering`); released, the pulled tank disk
               plugged back in and onlined: both pools ONLINE, the spare back to AVAIL (`readded`)
  lab          a pool on device-mapper devices with special, log, cache and spare vdevs and an
               encrypted dataset: one mirror side turned into a dm `error` target: write errors,
               FAULTED (`faulted`); exported while scraped (`exported`: ZfsPoolMissing, it is in
               --pools.expected); imported again without its cache and spare devices and without
               loading the key (`aux_missing`: ONLINE, cache and spare UNAVAIL, dataset locked)
  single       a one-disk pool with failmode=wait: blocks overwritten under ZFS, a scrub finds
               permanent data errors (`data_errors`); then its disk fails outright: SUSPENDED while
               every scrape still answers (`suspended`); the disk back and `zpool clear`
  expansion    (OpenZFS 2.3) `zpool attach` to a RAID-Z1 vdev, held after 4 MiB
               (`raidz_expand_max_reflow_bytes`): its progress (`expanding`)
A moment: the commands (`zpool status -P`, `zpool list -Hp`, `zpool list -HpPv`, others the phase
adds: `zpool status -gP` where disks came or went), each bounded (a command stuck on a suspended
pool is killed and left behind, never waited for), the scrape once each zpool source has
refreshed twice since the phase saw the state reached (the first may have started before), the
state kstats around it. Loop devices over sparse
files in /tmp stand for disks; device-mapper only where one must fail. Each phase destroys its
pool; the loop devices go with the guest.
Every wait and command bound is a budget of nominal seconds spent at the guest's pace
(guest/pace.py): a busy host stretches it, a state that never comes still ends it.
Standard library only, like scenario.py, whose helpers it is given (`run_all(scenario)`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

from pace import PACE, Budget, Stopwatch, wait_process, wait_until

MiB = 1 << 20
PARAMETERS = Path("/sys/module/zfs/parameters")
KSTAT = Path("/proc/spl/kstat/zfs")
ZPOOL_SOURCES = ("zpool_list", "zpool_status")
COMMANDS = {
    "zpool_status_P.txt": ["zpool", "status", "-P"],
    "zpool_list.txt": ["zpool", "list", "-Hp"],
    "zpool_list_v.txt": ["zpool", "list", "-HpPv"],
}
GUIDS = {"zpool_status_gP.txt": ["zpool", "status", "-gP"]}   # where disks came or went: their guids
LAB_DEVICES = ("labA", "labB", "labS", "labL", "labC", "labP")   # data mirror, special, log, cache, spare
DEVICE_MIB = 96


class Failures:
    def __init__(self, scenario) -> None:
        self.sc = scenario
        self.out = scenario.RESULTS / "failures"
        self.out.mkdir(exist_ok=True)
        self.timeline: dict[str, float] = {}
        self.record: dict = {"moments": {}}
        self.requests = 0
        self.loops: dict[str, str] = {}

    def log(self, message: str) -> None:
        self.sc.log(message)

    # --- helpers ---------------------------------------------------------------------------------

    def run(self, argv: list[str], check: bool = True, seconds: float = 120) -> tuple[int | None, str]:
        """`argv` with its output in a file (never a pipe: a process stuck in the kernel on a suspended
        pool would hold it), killed and left behind after `seconds` (nominal: at the guest's pace);
        (exit status or None, output)."""
        started = time.time()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            rc = wait_process(proc, seconds)
            if rc is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            out.seek(0)
            text = out.read().decode(errors="replace")
        self.log(f"$ {' '.join(argv)} -> {rc} ({time.time() - started:.2f} s)")
        if check and rc != 0:
            self.log(text)
            raise RuntimeError(f"command failed ({rc}): {argv}: {text.strip()[-500:]}")
        return rc, text

    def wait(self, what: str, check, seconds: float, step: float = 0.3):
        """`check()`'s first true result within `seconds` nominal seconds (guest/pace.py)."""
        return wait_until(what, check, seconds, step)

    def status(self, pool: str) -> str:
        return self.run(["zpool", "status", "-P", pool], check=False, seconds=30)[1]

    def resilvers_settled(self, pools: tuple[str, ...], seconds: float = 300) -> None:
        """No resilver in progress on `pools`, seen twice 2 s apart: the resilver `zpool online`
        asks for may start a moment after it returns (seen on 2.1: `zpool wait -t resilver` had
        nothing to wait for yet, and the moment caught the resilver running)."""
        calm, budget = 0, Budget(seconds)
        while calm < 2 and not budget.spent():
            busy = [pool for pool in pools if "resilver in progress" in self.status(pool)]
            for pool in busy:
                self.run(["zpool", "wait", "-t", "resilver", pool], seconds=max(1.0, budget.left()))
            calm = 0 if busy else calm + 1
            time.sleep(2)

    def leaf_state(self, pool: str, path: str) -> str | None:
        for line in self.status(pool).splitlines():
            parts = line.split()
            if parts and parts[0] == path and len(parts) > 1:
                return parts[1]
        return None

    def kstat_states(self) -> dict[str, str]:
        out = {}
        for state in KSTAT.glob("*/state"):
            try:
                out[state.parent.name] = state.read_text().strip()
            except OSError:
                pass
        return out

    def parameter(self, name: str, value: int | str) -> None:
        (PARAMETERS / name).write_text(f"{value}\n")

    def hotplug(self, **request) -> dict:
        """Ask the harness to unplug or plug disks through the QEMU monitor; its answer."""
        self.requests += 1
        exchange = self.sc.SHARE / "hotplug"
        exchange.mkdir(exist_ok=True)
        done = exchange / f"done-{self.requests}.json"
        ask = exchange / f"request-{self.requests}.json"
        ask.with_suffix(".tmp").write_text(json.dumps(request))
        ask.with_suffix(".tmp").rename(ask)   # whole, or not there: the host polls this directory
        self.wait(f"hotplug {request}", done.exists, 60, 0.2)
        answer = json.loads(done.read_text())
        if not answer.get("ok"):
            raise RuntimeError(f"hotplug {request}: {answer.get('error')}")
        return answer

    def prometheus_saw(self, name: str, query: str, seconds: float) -> bool:
        """Hold the state until the harness's Prometheus returns something for `query`, at most `seconds`."""
        exchange = self.sc.SHARE / "prom"
        exchange.mkdir(exist_ok=True)
        ask = exchange / f"wait-{name}.json"
        ask.with_suffix(".tmp").write_text(json.dumps({"query": query}))
        ask.with_suffix(".tmp").rename(ask)
        try:
            self.wait(f"Prometheus: {query}", (exchange / f"seen-{name}.json").exists, seconds, 0.5)
            return True
        except TimeoutError as exc:
            self.log(f"the host's Prometheus did not see it: {exc}")
            return False

    def by_id(self, serial: str, seconds: float = 60) -> str:
        disk = next(d for d in self.sc.CONFIG["disks"] + self.sc.CONFIG.get("new_disks", []) if d["serial"] == serial)
        return self.wait(f"/dev/disk/by-id link of {serial}", lambda: self._link(disk), seconds, 0.3)

    def _link(self, disk: dict) -> str | None:
        try:
            return self.sc.disk_path(disk)
        except RuntimeError:
            return None

    def device_gone(self, path: str) -> bool:
        return not os.path.exists(path)

    # --- moments ---------------------------------------------------------------------------------

    def moment(self, name: str, settled: float, extra: dict[str, list[str]] | None = None, sources=ZPOOL_SOURCES,
               fresh_seconds: float = 30, command_seconds: float = 30) -> Path:
        """`settled`: when the phase saw the state reached (nothing it compares moves after it)."""
        out = self.out / name
        (out / "commands").mkdir(parents=True, exist_ok=True)
        times = {"settled": settled, "commands_start": time.time()}
        states_before = self.kstat_states()
        exits = {}
        for filename, argv in {**COMMANDS, **(extra or {})}.items():
            rc, text = self.run(argv, check=False, seconds=command_seconds)
            (out / "commands" / filename).write_text(text)
            exits[filename] = rc
        times["commands_end"] = time.time()
        status = (out / "commands" / "zpool_status_P.txt").read_text() if exits.get("zpool_status_P.txt") == 0 else ""
        # A refresh that ends after `settled` may have started before it: each source must end a
        # second refresh after the first one that ended after `settled` (that one started after it).
        first: dict[str, float] = {}
        fresh: dict[str, bool] = {}
        budget = Budget(fresh_seconds)
        while True:
            scraped = time.time()
            text = self.sc.metrics()
            ages = self.sc.source_ages(text)
            for source in sources:
                ended = scraped - ages.get(source, float("inf"))
                if ended >= settled and source not in first:
                    first[source] = ended
                fresh[source] = source in first and ended > first[source] + 0.1
            # and the served vdev tree is the one zpool status printed (a refresh may read zpool
            # status a moment before the state its pool kstat already shows: compared once settled)
            if (all(fresh.values()) and tree_served(text, status)) or budget.spent():
                break
            time.sleep(1)   # a scrape costs the guest a second of CPU: not more often
        times["metrics"] = time.time()
        (out / "metrics.txt").write_text(text)
        (out / "states.json").write_text(json.dumps({"before": states_before, "after": self.kstat_states(),
                                                     "exits": exits, "fresh": fresh,
                                                     "tree_served": tree_served(text, status)}, indent=1))
        (out / "times.json").write_text(json.dumps(times, indent=1))
        self.record["moments"][name] = round(time.time() - times["commands_start"], 2)
        self.log(f"moment {name} in {time.time() - times['commands_start']:.1f} s, sources fresh: {fresh}")
        if self.sc.CONFIG.get("capture_fixtures"):
            self.fixture_capture(name, out)
        return out

    def fixture_capture(self, name: str, out: Path) -> None:
        """`zfsnas-exporter capture` of the pools collectors in this state (tests/e2e/run
        --capture-fixtures): the zpool outputs and the pools' state kstats only (a kstat tree of
        just those files), to be replayed in tests/ with its golden output."""
        tree = Path("/tmp/fixture-tree")
        subprocess.run(["rm", "-rf", str(tree)], check=False)
        for pool, state in self.kstat_states().items():
            (tree / "proc/spl/kstat/zfs" / pool).mkdir(parents=True, exist_ok=True)
            (tree / "proc/spl/kstat/zfs" / pool / "state").write_text(state + "\n")
        (tree / "sys/module/zfs").mkdir(parents=True)
        (tree / "sys/module/zfs/version").write_bytes(Path("/sys/module/zfs/version").read_bytes())
        archive = out / "capture.tar.gz"
        self.run(["zfsnas-exporter", "capture", str(archive), "--collector.disable-defaults", "--collector.pools",
                  "--collector.poolstats", f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys",
                  "--capture.metrics-url=", f"--pools.expected={self.sc.EXPECTED_POOLS}"], check=False, seconds=120)

    def timed(self, name: str, phase) -> None:
        mark = time.time()
        try:
            phase()
        except Exception:
            self.log(f"failures {name} failed:\n{traceback.format_exc()}")
            (self.out / f"{name}.error.txt").write_text(traceback.format_exc())
        self.timeline[name] = round(time.time() - mark, 1)

    # --- hot-removed disks, a resilver onto the spare and onto a new disk, a disk back ------------

    def hotplug_phase(self) -> None:
        disks = {d["serial"]: d for d in self.sc.CONFIG["disks"]}
        mirror, raidz = disks["ZNC0005"], disks["ZNC0002"]
        paths = {serial: self.sc.disk_path(disks[serial]) + "-part1" for serial in ("ZNC0005", "ZNC0002", "ZNS0005")}
        tank = self.status("tank")
        for line in tank.splitlines():   # the disk the scenario offlined (degraded moment) comes back first
            parts = line.split()
            if len(parts) > 1 and parts[1] == "OFFLINE":
                self.run(["zpool", "online", "tank", parts[0]])
        self.run(["zpool", "wait", "-t", "resilver", "tank"])
        if os.path.exists("/fast/nocomp/big.bin"):   # the write phase's 256 MiB: less to resilver
            os.remove("/fast/nocomp/big.bin")
            self.run(["zpool", "sync", "fast"])
        self.record["removed"] = {"fast": mirror["serial"], "tank": raidz["serial"]}
        self.hotplug(remove=[mirror["serial"], raidz["serial"]])
        self.wait("the pulled disks gone from /dev", lambda: all(self.device_gone(paths[s]) for s in
                                                               (mirror["serial"], raidz["serial"])), 30)
        # ZFS finds a disk gone at its next I/O: a write and a txg
        for pool in ("fast", "tank"):
            with open(f"/{pool}/after-pull.bin", "wb") as f:
                f.write(os.urandom(MiB))
        self.run(["zpool", "sync"], check=False, seconds=60)
        self.wait("REMOVED in zpool status", lambda: self.leaf_state("fast", paths["ZNC0005"]) in ("REMOVED", "UNAVAIL")
                  and self.leaf_state("tank", paths["ZNC0002"]) in ("REMOVED", "UNAVAIL"), 60, 1)
        self.moment("removed", settled=time.time(), extra=GUIDS)
        # both resilvers held where they start, so that their progress holds still while it is compared
        self.parameter("zfs_scan_suspend_progress", 1)
        try:
            self.run(["zpool", "replace", "tank", paths["ZNC0002"], paths["ZNS0005"]])
            self.hotplug(add=["ZNC0009"])
            new = self.by_id("ZNC0009")
            self.run(["zpool", "replace", "-f", "fast", paths["ZNC0005"], new])
            self.record["new_disk"] = new
            self.wait("both resilvers running", lambda: all("resilver in progress" in self.status(p)
                                                            for p in ("tank", "fast")), 60, 1)
            self.moment("resilvering", settled=time.time())
            self.record["prometheus_saw_resilvering"] = self.prometheus_saw(
                "resilvering", 'ALERTS{alertname="ZfsPoolResilvering",alertstate="firing",pool="tank"}', 40)
        finally:
            self.parameter("zfs_scan_suspend_progress", 0)
        self.run(["zpool", "wait", "-t", "resilver,replace", "fast"], seconds=300)
        self.run(["zpool", "wait", "-t", "resilver", "tank"], seconds=300)
        # the pulled tank disk plugged back in: onlined, resilvered from where it left; the spare goes back
        self.hotplug(add=["ZNC0002"])
        self.wait("ZNC0002 back", lambda: os.path.exists(paths["ZNC0002"]), 60)
        self.run(["zpool", "online", "tank", paths["ZNC0002"]])
        self.resilvers_settled(("tank", "fast"))
        self.record["spare_detached_by_hand"] = "INUSE" in self.status("tank")
        if self.record["spare_detached_by_hand"]:   # (seen on 2.3.2: the spare stays until detached)
            self.run(["zpool", "detach", "tank", paths["ZNS0005"]])
        self.wait("tank ONLINE", lambda: self.kstat_states().get("tank") == "ONLINE", 60)
        self.moment("readded", settled=time.time(), extra=GUIDS)

    # --- a pool on device-mapper devices: a failing disk, exported, imported without its cache -----

    def loop_device(self, name: str, mib: int = DEVICE_MIB) -> str:
        """A loop device over a sparse file in /tmp (tmpfs)."""
        backing = Path(f"/tmp/{name}.img")
        with open(backing, "wb") as f:
            f.truncate(mib * MiB)
        loop = self.run(["losetup", "--find", "--show", str(backing)])[1].strip()
        self.loops[name] = loop
        return loop

    def dm_device(self, name: str, mib: int = DEVICE_MIB) -> str:
        """A device-mapper device (`linear` over a loop device) whose table can turn to `error`."""
        self.run(["dmsetup", "create", name, "--table", self.linear(name, self.loop_device(name, mib), mib)])
        return f"/dev/mapper/{name}"

    def dm_table(self, name: str, table: str) -> None:
        self.run(["dmsetup", "reload", name, "--table", table])
        self.run(["dmsetup", "resume", name], seconds=30)

    @staticmethod
    def linear(name: str, loop: str, mib: int = DEVICE_MIB) -> str:
        return f"0 {mib * 2048} linear {loop} 0"

    def lab_phase(self) -> None:
        self.run(["modprobe", "-a", "loop", "dm_mod"], check=False)
        # labB fails later (device-mapper); the others are plain loop devices
        dev = {name: self.dm_device(name) if name == "labB" else self.loop_device(name) for name in LAB_DEVICES}
        self.record["lab_devices"] = dev
        self.run(["zpool", "create", "-f", "-O", "atime=off", "lab", "mirror", dev["labA"], dev["labB"],
                  "special", dev["labS"], "log", dev["labL"], "cache", dev["labC"], "spare", dev["labP"]])
        key = Path("/tmp/lab.key")
        key.write_bytes(os.urandom(32))   # a raw key: no PBKDF2 rounds (a passphrase costs 20 s under TCG)
        self.run(["zfs", "create", "-o", "encryption=on", "-o", "keyformat=raw",
                  "-o", f"keylocation=file://{key}", "lab/secret"])
        for path in ("/lab/data.bin", "/lab/secret/data.bin"):
            with open(path, "wb") as f:
                f.write(os.urandom(4 * MiB))
        self.run(["zpool", "sync", "lab"])
        # one side of the mirror starts failing every I/O
        self.dm_table("labB", f"0 {DEVICE_MIB * 2048} error")
        with open("/lab/more.bin", "wb") as f:
            f.write(os.urandom(2 * MiB))
        self.run(["zpool", "sync", "lab"], check=False, seconds=60)
        self.wait("labB FAULTED", lambda: self._faulted_yet(dev["labB"]), 60, 1)
        self.moment("faulted", settled=time.time())
        self.dm_table("labB", self.linear("labB", self.loops["labB"]))
        self.run(["zpool", "clear", "lab"])
        self.run(["zpool", "wait", "-t", "resilver", "lab"], seconds=120)
        # exported while a client scrapes without pause: every scrape answers
        answers: list = []
        stop = threading.Event()

        def scrape_on() -> None:
            while not stop.is_set():
                started = time.time()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.sc.PORT}/metrics",
                                                timeout=60 * PACE.slowness()) as r:
                        text = r.read().decode()
                    answers.append({"status": r.status, "seconds": time.time() - started,
                                    "lab": 'zfs_pool_state{pool="lab"' in text, "failed": [
                                        line for line in text.splitlines()
                                        if line.startswith("zfs_exporter_collector_success") and line.endswith(" 0")]})
                except Exception as exc:
                    answers.append({"error": repr(exc), "seconds": time.time() - started})

        scraper = threading.Thread(target=scrape_on)
        scraper.start()
        try:
            # the export starts once a scrape has served lab (a scrape takes seconds under TCG: seen on
            # 2.1, the first answer came after the export and no scrape had seen lab imported)
            self.wait("a scrape with lab", lambda: any(a.get("lab") for a in answers), 60)
            self.run(["zpool", "export", "lab"])
            exported = time.time()
            self.wait("a scrape without lab", lambda: any(a.get("lab") is False for a in answers), 30)
        finally:
            stop.set()
            scraper.join(120 * PACE.slowness())
        (self.out / "export_scrapes.json").write_text(json.dumps(answers, indent=1))
        self.moment("exported", settled=exported)
        # imported again after a reboot that lost the cache and spare devices; the key is not loaded
        for name in ("labC", "labP"):
            self.run(["losetup", "-d", self.loops.pop(name)])
            Path(f"/tmp/{name}.img").unlink()
        self.run(["zpool", "import", "-d", dev["labB"], *(f"-d{self.loops[n]}" for n in ("labA", "labS", "labL")), "lab"])
        self.wait("lab imported", lambda: "lab" in self.kstat_states(), 30)
        keys = {"zfs_keystatus.txt": ["zfs", "get", "-Hp", "-r", "-o", "name,value", "keystatus", "lab"]}
        self.moment("aux_missing", settled=time.time(), extra=keys, sources=(*ZPOOL_SOURCES, "zfs_datasets"))
        self.run(["zpool", "destroy", "-f", "lab"], check=False)

    def _faulted_yet(self, device: str) -> bool:
        """Whether ZFS has faulted `device`; if not, more writes for it to fail."""
        if self.leaf_state("lab", device) == "FAULTED":
            return True
        with open("/lab/more.bin", "ab") as f:
            f.write(os.urandom(MiB))
        self.run(["zpool", "sync", "lab"], check=False, seconds=30)
        return False

    # --- one disk: permanent data errors, then a suspended pool ------------------------------------

    def single_phase(self) -> None:
        self.run(["modprobe", "-a", "loop", "dm_mod"], check=False)
        disk = self.dm_device("one0")
        self.run(["zpool", "create", "-f", "-o", "failmode=wait", "-O", "atime=off", "one", disk])
        self.run(["zfs", "create", "-o", "compression=off", "-o", "recordsize=128K", "one/data"])
        marker = b"zfsnas-e2e-corrupt-me-"
        block = (marker + b"x" * (4096 - len(marker))) * 32   # a 128 KiB record, found by its marker
        with open("/one/data/victim.bin", "wb") as f:
            for _ in range(16):
                f.write(block)
        self.run(["zpool", "sync", "one"])
        # blocks overwritten under ZFS through the loop device's backing file (a scrub reads the disk,
        # not the ARC)
        image = Path("/tmp/one0.img")
        data = image.read_bytes()
        spots = []
        at = data.find(marker)
        while at >= 0 and len(spots) < 64:
            spots.append(at)
            at = data.find(marker, at + 128 * 1024)
        with open(image, "r+b") as f:
            for at in spots:
                f.seek(at)
                f.write(b"\0" * 512)
        self.record["corrupted_spots"] = len(spots)
        self.run(["zpool", "scrub", "one"])
        self.run(["zpool", "wait", "-t", "scrub", "one"], seconds=120)
        self.moment("data_errors", settled=time.time(), extra={"zpool_status_v.txt": ["zpool", "status", "-v", "one"]})
        # the disk dies: every I/O fails; with failmode=wait the pool suspends
        self.dm_table("one0", f"0 {DEVICE_MIB * 2048} error")
        writer = subprocess.Popen(["dd", "if=/dev/urandom", "of=/one/data/after.bin", "bs=1M", "count=4", "conv=fsync"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            self.wait("one SUSPENDED", lambda: self.kstat_states().get("one") == "SUSPENDED", 60, 0.5)
            suspended = time.time()
            scrapes = []
            for _ in range(2):   # every scrape answers while the pool hangs (and the moment's too)
                watch = Stopwatch()
                text = self.sc.metrics()
                scrapes.append({"seconds": watch.wall(), "nominal_seconds": watch.nominal(),
                                "suspended": 'zfs_pool_state{pool="one",state="SUSPENDED"} 1' in text})
            (self.out / "suspended_scrapes.json").write_text(json.dumps(scrapes, indent=1))
            self.moment("suspended", settled=suspended, fresh_seconds=8, command_seconds=15)
        finally:
            self.dm_table("one0", self.linear("one0", self.loops["one0"]))
            self.run(["zpool", "clear", "one"], check=False, seconds=60)
            if wait_process(writer, 60) is None:
                self.log("the writer on the suspended pool is still stuck after zpool clear")
        self.wait("one ONLINE", lambda: self.kstat_states().get("one") == "ONLINE", 60, 0.5)
        self.run(["zpool", "destroy", "-f", "one"], check=False, seconds=60)

    # --- RAID-Z expansion (OpenZFS 2.3) ------------------------------------------------------------

    def expansion_phase(self) -> None:
        if not (PARAMETERS / "raidz_expand_max_reflow_bytes").exists():
            self.record["expansion"] = "not in this OpenZFS"
            return
        self.run(["modprobe", "-a", "loop", "dm_mod"], check=False)
        disks = [self.loop_device(f"grow{n}", 64) for n in range(4)]
        self.run(["zpool", "create", "-f", "-O", "atime=off", "-O", "compression=off", "grow", "raidz1", *disks[:3]])
        with open("/grow/data.bin", "wb") as f:
            f.write(os.urandom(16 * MiB))
        self.run(["zpool", "sync", "grow"])
        self.parameter("raidz_expand_max_reflow_bytes", 4 * MiB)   # held after 4 MiB
        try:
            self.run(["zpool", "attach", "grow", "raidz1-0", disks[3]])
            self.wait("expansion held", lambda: "expansion of raidz1-0 in progress" in self.status("grow")
                      and self._expansion_held(), 60, 1)
            self.moment("expanding", settled=time.time())
        finally:
            self.parameter("raidz_expand_max_reflow_bytes", 0)
        self.run(["zpool", "wait", "-t", "raidz_expand", "grow"], seconds=300)
        self.run(["zpool", "destroy", "-f", "grow"], check=False)

    def _expansion_held(self) -> bool:
        first = [line for line in self.status("grow").splitlines() if "copied at" in line]
        time.sleep(1.5)
        second = [line for line in self.status("grow").splitlines() if "copied at" in line]
        return bool(first) and first[0].split(" copied")[0] == second[0].split(" copied")[0]


def run_all(scenario) -> dict:
    """Every failure phase in turn (one failing does not stop the others); returns their seconds."""
    failures = Failures(scenario)
    try:
        failures.timed("hotplug", failures.hotplug_phase)
        failures.timed("lab", failures.lab_phase)
        failures.timed("single", failures.single_phase)
        failures.timed("expansion", failures.expansion_phase)
    finally:
        failures.record["timeline"] = failures.timeline
        (failures.out / "record.json").write_text(json.dumps(failures.record, indent=1))
    return failures.timeline


def tree_served(metrics: str, status: str) -> bool:
    """Whether every vdev state and error count served (`zfs_vdev_state ... 1`, `zfs_vdev_errors`)
    of the pools `zpool status -P` printed (`status`; empty: nothing to compare) is what it printed
    for that vdev (error counts where it printed a plain number)."""
    sections: dict[str, str] = {}
    for section in status.split("  pool: ")[1:]:
        sections[section.split("\n", 1)[0].strip()] = section
    columns = {"read": 2, "write": 3, "checksum": 4}
    for line in metrics.splitlines():
        family = line.split("{", 1)[0]
        if family not in ("zfs_vdev_state", "zfs_vdev_errors") or "} " not in line:
            continue
        body, value = line[len(family) + 1:].rsplit("} ", 1)
        labels = {k: v.strip('"') for k, v in (part.split("=", 1) for part in body.split('",') if "=" in part)}
        section = sections.get(labels.get("pool", ""))
        if section is None:
            continue
        rows = [parts for parts in (row.split() for row in section.splitlines())
                if len(parts) > 1 and parts[0] == labels.get("vdev")]
        if family == "zfs_vdev_state":
            if value == "1" and rows and labels.get("state") not in [parts[1] for parts in rows]:
                return False
            continue
        at = columns.get(labels.get("type", ""), 0)
        printed = [parts[at] for parts in rows if len(parts) > at and parts[at].isdigit()]
        if printed and str(int(float(value))) not in printed:
            return False
    return True
