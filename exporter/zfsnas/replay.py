"""`zfsnas-exporter --replay CAPTURE.tar.gz`: serve /metrics from a capture, with no ZFS at all.

Owns reading an archive written by `capture.py` (checked member by member: a bad, truncated or
foreign archive is refused with one line saying why) and building, for each snapshot, the very
exporter the capture ran: the same collectors and settings (from the manifest), its trees through
the ordinary `--path.procfs`/`--path.sysfs`/`--path.udev.data`/`--path.sysctl-file` seams and its
commands answered by a `ReplayRunner`. Scrapes step through the snapshots, one per scrape, and stay
on the last (or start over with `--replay.loop`; counters then reset, as after a reboot).
"""

from __future__ import annotations

import argparse
import json
import logging
import tarfile
import tempfile
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .capture import FORMAT, ROOT
from .sources.recorded import read_records

log = logging.getLogger("zfsnas")


class CaptureError(Exception):
    """An archive that is not a readable zfsnas capture; the message is one line."""


@dataclass
class Capture:
    root: Path                    # the unpacked `zfsnas-capture/` directory
    manifest: dict
    _tmp: tempfile.TemporaryDirectory | None = None

    @property
    def snapshots(self) -> list[Path]:
        return [self.root / "snapshots" / str(i) for i in range(int(self.manifest["snapshots"]))]

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def open_capture(path: str | Path) -> Capture:
    """Unpack and check a capture archive (or use an unpacked `zfsnas-capture/` directory)."""
    path = Path(path)
    if path.is_dir():
        root = path / ROOT if (path / ROOT).is_dir() else path
        return Capture(root, _manifest(root, path))
    tmp = tempfile.TemporaryDirectory(prefix="zfsnas-replay-")
    try:
        _unpack(path, Path(tmp.name))
        root = Path(tmp.name) / ROOT
        return Capture(root, _manifest(root, path), tmp)
    except BaseException:
        tmp.cleanup()
        raise


MAX_MEMBER = 64 * 1024 * 1024    # bytes of one member: 4x the exporter's own --zfs.command-max-output
MAX_UNPACKED = 256 * 1024 * 1024  # bytes of all members: a capture is unpacked into the temporary directory


def _unpack(path: Path, dest: Path) -> None:
    """Regular files and directories under `zfsnas-capture/` only; anything else is refused, and so
    is a member larger than MAX_MEMBER or members adding up to more than MAX_UNPACKED (a few MB of
    gzip can hold a GB of zeros): sizes are checked from the headers before anything is written,
    and members are copied in pieces, never read whole."""
    import shutil

    total = 0
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts or name.parts[:1] != (ROOT,):
                    raise CaptureError(f"{path}: not a zfsnas capture: unexpected member {member.name!r}")
                target = dest.joinpath(*name.parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    total += member.size
                    if member.size > MAX_MEMBER or total > MAX_UNPACKED:
                        what = (f"{member.name!r} holds {member.size} bytes, more than {MAX_MEMBER}"
                                if member.size > MAX_MEMBER else f"its members hold more than {MAX_UNPACKED} bytes")
                        raise CaptureError(f"{path}: not replayed: {what} (no capture's are that large)")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None
                    with open(target, "wb") as out:
                        shutil.copyfileobj(source, out, 1 << 16)
                else:
                    raise CaptureError(f"{path}: not a zfsnas capture: {member.name!r} is not a regular file")
    except CaptureError:
        raise
    except FileNotFoundError:
        raise CaptureError(f"{path}: no such file") from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaptureError(f"{path}: not a readable capture archive (truncated or damaged?): {reason}") from None


def _manifest(root: Path, origin: Path) -> dict:
    try:
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaptureError(f"{origin}: not a zfsnas capture: no {ROOT}/manifest.json") from None
    except (OSError, ValueError) as exc:
        raise CaptureError(f"{origin}: manifest.json is damaged: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CaptureError(f"{origin}: capture format {manifest.get('format') if isinstance(manifest, dict) else '?'}"
                           f" is not {FORMAT}: use the zfsnas-exporter version that made it")
    try:
        count = int(manifest["snapshots"])
    except (KeyError, TypeError, ValueError):
        raise CaptureError(f"{origin}: manifest.json does not say how many snapshots it holds") from None
    for index in range(count):
        snap = root / "snapshots" / str(index)
        if not (snap / "commands.json").is_file():
            raise CaptureError(f"{origin}: snapshot {index} is missing (archive cut short?)")
    return manifest


def snapshot_args(capture: Capture, index: int, base: argparse.Namespace) -> argparse.Namespace:
    """The exporter's flags for snapshot `index`: the capture's collector settings, its recorded trees."""
    from .collectors import ALL

    snap = capture.snapshots[index]
    args = argparse.Namespace(**vars(base))
    for dest, value in capture.manifest.get("flags", {}).items():
        if hasattr(args, dest) and not dest.startswith("collector_"):
            setattr(args, dest, value)
    chosen = set(capture.manifest.get("collectors", []))
    args.disable_defaults = True
    for cls in ALL:
        setattr(args, f"collector_{cls.name}", cls.name in chosen)
    args.procfs = str(snap / "proc")
    args.sysfs = str(snap / "sys")
    args.udev_data = str(snap / "udev" / "data")
    args.kstat_source = capture.manifest.get("kstat_source", "procfs")
    args.sysctl_file = str(snap / "sysctl.txt") if (snap / "sysctl.txt").is_file() else None
    # Never this machine's own bench database: the capture's, or none.
    args.bench_db = str(snap / "bench.sqlite")
    args.command_prefix = ""
    return args


def snapshot_exporter(capture: Capture, index: int, base: argparse.Namespace, process_metrics: bool = True):
    from .cli import build_exporter

    snap = capture.snapshots[index]
    try:
        runner = read_records(snap)
    except ValueError as exc:
        raise CaptureError(f"snapshot {index}: {exc}") from None
    return build_exporter(snapshot_args(capture, index, base), process_metrics, runner=runner)


class ReplayExporter:
    """What the server serves in replay mode: one exporter per snapshot, one snapshot per scrape."""

    def __init__(self, capture: Capture, base: argparse.Namespace, loop: bool = False, process_metrics: bool = True):
        self.capture = capture
        self.loop = loop
        self.exporters = [snapshot_exporter(capture, i, base, process_metrics) for i in range(len(capture.snapshots))]
        self.collectors = self.exporters[0].collectors if self.exporters else []
        self.position = 0
        self._lock = threading.Lock()

    def render(self) -> str:
        with self._lock:
            exporter = self.exporters[self.position]
            if self.position + 1 < len(self.exporters):
                self.position += 1
            elif self.loop:
                self.position = 0
        return exporter.render()

    def start(self) -> None:
        """Nothing runs in the background: each snapshot reads its recorded sources on its first scrape."""

    def stop(self) -> None:
        self.capture.close()


def describe(capture: Capture) -> str:
    m = capture.manifest
    return (f"{m.get('snapshots')} snapshot(s) taken {m.get('created')} on {m.get('hostname')} "
            f"({(m.get('os') or {}).get('name') or (m.get('os') or {}).get('system')}), OpenZFS "
            f"{m.get('openzfs_version')}{', anonymized' if m.get('anonymized') else ''}")
