"""`zfsnas-exporter capture OUT.tar.gz`: everything the exporter reads on this NAS, in one archive.

Owns taking a capture and the archive's layout; `replay.py` reads it back, `anonymize.py` rewrites
names in it. A snapshot is taken by the exporter itself: it is built from the same flags as the
daemon, with a `RecordingRunner` in place of its command runner, and renders `/metrics` once
(`live-metrics.txt`), so the archive holds the exact `zfs`/`zpool`/`sysctl` command lines the
collectors run (outputs, stderr, exit status). Right after, the files the sources read are
copied as they are (`--path.procfs`, `--path.sysfs`, `--path.udev.data`,
`--path.sysctl-file`, the bench database). Whatever cannot be read (not root, a root-only kstat)
is listed in the manifest and on stderr, and an empty directory takes its place so that a replay
fails to read it too; the capture goes on. Last, each snapshot's `metrics.txt` is rendered from the
copies through the replay's own path (`replay.ReplayExporter`): what any later replay serves.

Layout (every member under `zfsnas-capture/`):
  manifest.json                 format, exporter version, OS, OpenZFS version, time, flags, what
                                could not be read, whether it was anonymized
  snapshots/<n>/metrics.txt     the exporter's /metrics rendered from what was recorded (= a replay,
                                snapshot after snapshot)
  snapshots/<n>/live-metrics.txt  the /metrics of the live render that ran the commands, a moment
                                before the files were copied (what the capture may have missed shows
                                as a difference between the two)
  snapshots/<n>/commands.json   argument lists, exit status, stderr, seconds (`sources/recorded.py`)
  snapshots/<n>/commands/*.out  their stdout
  snapshots/<n>/proc/spl/kstat/zfs/..., proc/diskstats
  snapshots/<n>/sys/module/zfs/{version,parameters/*}, sys/block/<disk>/{dev,queue/rotational,...}
  snapshots/<n>/udev/data/b<major>:<minor>
  snapshots/<n>/sysctl.txt      (FreeBSD from a file), bench.sqlite (the zfsnas-bench results, when readable)
  snapshots/<n>/daemon-metrics.txt   the running exporter's /metrics (`--capture.metrics-url`)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sqlite3
import sys
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import __version__
from .replay import FORMAT, ROOT
from .sources.recorded import RecordingRunner, write_records
from .wiring import ExporterConfig, build_exporter, build_parser

# Debug buffers nobody parses: large, and they hold file and object names.
SKIP_KSTATS = {"dbgmsg", "dbufs"}
# The sysfs attributes `sources/blockdevices.py` reads of a disk (and `dev`, `partition` of its partitions).
DISK_ATTRS = ("dev", "serial", "wwid", "queue/rotational", "device/serial", "device/model", "device/wwid",
              "device/vpd_pg80", "dm/uuid")
PART_ATTRS = ("dev", "partition")
# Flags that describe this machine's paths and the daemon's web side, not what is collected.
NOT_REPLAYED = {"listen_address", "telemetry_path", "web_config_file", "procfs", "sysfs", "udev_data",
                "kstat_source", "sysctl_file", "command_prefix", "command_timeout", "log_level", "bench_db",
                "replay", "replay_loop", "out", "interval", "anonymize", "metrics_url", "func"}


@dataclass
class Unreadable:
    """What a capture could not read, said once per path."""

    items: list[dict] = field(default_factory=list)

    def add(self, path: str | Path, error: BaseException | str) -> None:
        reason = error if isinstance(error, str) else (getattr(error, "strerror", None) or str(error))
        if not any(i["path"] == str(path) for i in self.items):
            self.items.append({"path": str(path), "error": reason})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", metavar="OUT.tar.gz", help="the archive to write")
    parser.add_argument("--interval", type=float, default=0.0,
                        help="take a second snapshot this many seconds after the first (default: one snapshot)")
    parser.add_argument("--anonymize", action="store_true",
                        help="replace pool, dataset, snapshot names, serials, WWNs, hostname and mount paths "
                             "with stable pseudonyms in every file")
    parser.add_argument("--capture.metrics-url", dest="metrics_url", default="http://127.0.0.1:9923/metrics",
                        help="also save the running exporter's /metrics from here if it answers ('' to skip)")


def main(argv: list[str]) -> int:
    parser = build_parser()
    parser.prog = "zfsnas-exporter capture"
    parser.description = "Bundle everything the exporter reads on this NAS into one archive."
    add_arguments(parser)
    args = parser.parse_args(argv)
    # A bug report is worth more with every collector: vdevlatency too, unless switched off.
    if args.collector_vdevlatency is None and not args.disable_defaults:
        args.collector_vdevlatency = True
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"capture: {out.parent} is not a directory", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        unreadable = take_capture(args, out)
    except OSError as exc:
        print(f"capture: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB) in {time.monotonic() - started:.1f} s", file=sys.stderr)
    if unreadable.items:
        hint = " (run as root for a complete capture)" if os.geteuid() != 0 else ""
        print(f"could not read {len(unreadable.items)} item(s){hint}:", file=sys.stderr)
        for item in unreadable.items:
            print(f"  {item['path']}: {item['error']}", file=sys.stderr)
    print("look inside before you share it: tar -tzvf " + str(out), file=sys.stderr)
    return 0


def take_capture(args: argparse.Namespace, out: Path) -> Unreadable:
    unreadable = Unreadable()
    with tempfile.TemporaryDirectory(prefix="zfsnas-capture-") as tmp:
        root = Path(tmp) / ROOT
        started = datetime.now(UTC)
        count = 2 if args.interval > 0 else 1
        collectors: list[str] = []
        zfs_version, daemon = None, []
        for index in range(count):
            if index:
                wait_between_snapshots(args.interval)
            collectors, version, saved = take_snapshot(args, root, index, unreadable)
            zfs_version = zfs_version or version
            daemon.append(saved)
        write_replayed_metrics(args, root, count, collectors)
        manifest = {
            "format": FORMAT,
            "exporter_version": __version__,
            "created": started.isoformat(timespec="seconds"),
            "created_unix": started.timestamp(),
            "hostname": socket.gethostname(),
            "os": os_description(),
            "openzfs_version": zfs_version,
            "user": "root" if os.geteuid() == 0 else "unprivileged",
            "kstat_source": kstat_kind(args),
            "snapshots": count,
            "interval_seconds": args.interval if count > 1 else None,
            "collectors": collectors,
            "flags": replayed_flags(args),
            "command_prefix": args.command_prefix,
            "unreadable": unreadable.items,
            "daemon_metrics": daemon,
            "anonymized": False,
        }
        if args.anonymize:
            from .anonymize import anonymize_tree

            manifest = anonymize_tree(root, manifest)
        (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        partial = out.with_name(out.name + ".partial")
        try:
            with tarfile.open(partial, "w:gz") as tar:
                tar.add(root, arcname=ROOT, filter=_normalise)
            partial.replace(out)
        finally:
            partial.unlink(missing_ok=True)
    return unreadable


def wait_between_snapshots(seconds: float) -> None:
    """The pause of `--interval` (tests change the NAS here)."""
    time.sleep(seconds)


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """No user or group names of this machine in the archive."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def take_snapshot(args: argparse.Namespace, root: Path, index: int,
                  unreadable: Unreadable) -> tuple[list[str], str | None, str]:
    """Record the commands through a live render, then copy the files (`write_replayed_metrics`
    renders `metrics.txt` from the copies once every snapshot is taken)."""
    from .collectors.bench import BenchCollector, BenchSettings

    config = ExporterConfig.from_args(args)
    paths = config.paths
    dest = root / "snapshots" / str(index)
    dest.mkdir(parents=True)
    runner = RecordingRunner(config.commands.prefix, config.commands.timeout, config.commands.max_output)
    exporter = build_exporter(config, runner=runner)
    (dest / "live-metrics.txt").write_text(exporter.render())
    write_records(dest, runner)
    daemon = fetch_daemon_metrics(args.metrics_url, dest / "daemon-metrics.txt") if args.metrics_url else "skipped"
    version = None
    if config.kstat.kind() == "procfs":
        copy_kstats(Path(paths.procfs), dest / "proc", unreadable)
        version = copy_module(Path(paths.sysfs), dest / "sys", unreadable)
    elif config.kstat.sysctl_file:
        copy_file(Path(config.kstat.sysctl_file), dest / "sysctl.txt", unreadable)
    if version is None:
        try:
            version = exporter.scrape.kstat.version() if exporter.scrape.kstat else None
        except Exception:
            version = None
    copy_file(Path(paths.procfs) / "diskstats", dest / "proc" / "diskstats", unreadable, optional=True)
    copy_block_devices(Path(paths.sysfs), Path(paths.udev_data), dest, unreadable)
    names = [c.name for c in exporter.collectors]
    if "bench" in names:
        from .store.reader import default_bench_db

        bench = config.settings_of(BenchCollector)
        assert isinstance(bench, BenchSettings)
        copy_bench_db(Path(bench.db or default_bench_db()), dest / "bench.sqlite", unreadable)
    return names, version, daemon


def write_replayed_metrics(args: argparse.Namespace, root: Path, count: int, names: list[str]) -> None:
    """Each snapshot's `metrics.txt`, rendered from the copies in turn exactly as `--replay` serves
    them (so both read the same bytes, and a snapshot's txg counters go on from the one before)."""
    from .replay import Capture, ReplayExporter

    settings = {"snapshots": count, "collectors": names, "flags": replayed_flags(args), "kstat_source": kstat_kind(args)}
    replay = ReplayExporter(Capture(root, settings), ExporterConfig.from_args(args))
    for index in range(count):
        (root / "snapshots" / str(index) / "metrics.txt").write_text(replay.render())


def kstat_kind(args: argparse.Namespace) -> str:
    return ExporterConfig.from_args(args).kstat.kind()


def replayed_flags(args: argparse.Namespace) -> dict:
    """The collector settings the capture was taken with; `--replay` uses them again."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in NOT_REPLAYED and not callable(v)}


def copy_file(src: Path, dst: Path, unreadable: Unreadable, optional: bool = False, stand_in: bool = True) -> bool:
    try:
        data = src.read_bytes()
    except FileNotFoundError:
        if not optional:
            unreadable.add(src, "does not exist")
        return False
    except OSError as exc:
        if stand_in:
            stand_in_for_unreadable(dst)
        unreadable.add(src, exc)
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    return True


def copy_bench_db(src: Path, dst: Path, unreadable: Unreadable) -> None:
    """A consistent copy through SQLite's backup API: the runner's database is in WAL mode, so the
    file alone can lack its latest results."""
    if not src.exists():
        return
    try:
        source = sqlite3.connect(src.resolve().as_uri() + "?mode=ro", uri=True, timeout=5)
        try:
            target = sqlite3.connect(dst)
            with target:
                source.backup(target)
            target.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        dst.unlink(missing_ok=True)
        stand_in_for_unreadable(dst)
        unreadable.add(src, str(exc))


def stand_in_for_unreadable(dst: Path) -> None:
    """An empty directory where a file could not be read: reading it in a replay fails (for root
    too), so the replay's collectors fail where the capture's did instead of taking the file for one
    this OpenZFS version lacks. (Not for files directly in the kstat root, where a directory would
    be a pool: `copy_kstats` leaves those out, and the exporter reads them as required.)"""
    dst.mkdir(parents=True, exist_ok=True)


def copy_kstats(procfs: Path, dest: Path, unreadable: Unreadable) -> None:
    src_root = procfs / "spl" / "kstat" / "zfs"
    if not src_root.is_dir():
        return  # no ZFS module loaded: metrics.txt says so, like the exporter
    for dirpath, _dirnames, filenames in os.walk(src_root, onerror=lambda exc: unreadable.add(exc.filename, exc)):
        here = Path(dirpath)
        rel = here.relative_to(procfs)
        (dest / rel).mkdir(parents=True, exist_ok=True)  # an empty pool directory is still a pool
        for name in sorted(filenames):
            if here == src_root and name in SKIP_KSTATS:
                continue
            copy_file(here / name, dest / rel / name, unreadable, stand_in=here != src_root)


def copy_module(sysfs: Path, dest: Path, unreadable: Unreadable) -> str | None:
    module = sysfs / "module" / "zfs"
    if not module.is_dir():
        return None
    copy_file(module / "version", dest / "module" / "zfs" / "version", unreadable, optional=True)
    params = module / "parameters"
    try:
        names = sorted(os.listdir(params))
    except OSError as exc:
        unreadable.add(params, exc)
        names = []
    for name in names:
        src = params / name
        if os.access(src, os.R_OK):  # write-only parameters exist; the exporter skips them too
            copy_file(src, dest / "module" / "zfs" / "parameters" / name, unreadable)
    try:
        return (module / "version").read_text().strip() or None
    except OSError:
        return None


def copy_block_devices(sysfs: Path, udev_data: Path, dest: Path, unreadable: Unreadable) -> None:
    """The attributes `sources/blockdevices.py` reads, as plain directories, and each device's udev record."""
    block = sysfs / "block"
    try:
        disks = sorted(os.listdir(block))
    except OSError:
        return  # FreeBSD, or a tree without disks: nothing the exporter would read either
    for disk in disks:
        path = block / disk
        devices: list[tuple[Path, Path, tuple[str, ...]]] = [(path, dest / "sys" / "block" / disk, DISK_ATTRS)]
        try:
            parts = sorted(p.name for p in path.iterdir() if (p / "partition").exists())
            slaves = sorted(os.listdir(path / "slaves")) if (path / "slaves").is_dir() else []
        except OSError as exc:
            unreadable.add(path, exc)
            continue
        devices += [(path / part, dest / "sys" / "block" / disk / part, PART_ATTRS) for part in parts]
        for slave in slaves:  # only their names are read (multipath partition maps)
            (dest / "sys" / "block" / disk / "slaves").mkdir(parents=True, exist_ok=True)
            (dest / "sys" / "block" / disk / "slaves" / slave).touch()
        for src, dst, attrs in devices:
            for attr in attrs:
                copy_file(src / attr, dst / attr, unreadable, optional=True)
            try:
                major, minor = (src / "dev").read_text().strip().split(":")
            except (OSError, ValueError):
                continue
            copy_file(udev_data / f"b{major}:{minor}", dest / "udev" / "data" / f"b{major}:{minor}", unreadable,
                      optional=True)


def fetch_daemon_metrics(url: str, dest: Path) -> str:
    """What became of the running exporter's /metrics: "saved", or why not (none running is normal)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            dest.write_bytes(response.read())
    except Exception as exc:
        return f"{url}: {getattr(exc, 'reason', None) or exc}"
    return "saved"


def os_description() -> dict:
    uname = platform.uname()
    pretty = None
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.partition("=")[2].strip().strip('"')
    except OSError:
        pass
    return {"system": uname.system, "release": uname.release, "machine": uname.machine, "name": pretty,
            "python": platform.python_version()}

