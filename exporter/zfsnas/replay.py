"""`zfsnas-exporter --replay CAPTURE.tar.gz`: serve /metrics from a capture, with no ZFS at all.

Owns reading an archive written by `capture.py` (checked member by member: a bad, truncated or
foreign archive is refused with one line saying why) and building, for each snapshot, the very
exporter the capture ran: the same collectors and settings (from the manifest), its trees through
the ordinary `--path.procfs`/`--path.sysfs`/`--path.udev.data`/`--path.sysctl-file` seams and its
commands answered by a `ReplayRunner`. Scrapes step through the snapshots, one per scrape, and stay
on the last (or start over with `--replay.loop`, counters continuing and timestamps moving with the
clock: `LoopContinuation`).
"""

from __future__ import annotations

import json
import logging
import tarfile
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .exposition import format_value
from .sources.recorded import read_records

if TYPE_CHECKING:
    from .wiring import Exporter, ExporterConfig

log = logging.getLogger("zfsnas")
ROOT = "zfsnas-capture"  # every member of a capture archive is under this directory
FORMAT = 1               # the archive layout's version (manifest "format"), written by capture.py


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


# Flags whose setting changed name since captures were first taken (manifest "flags" hold the old).
RENAMED_FLAGS = {"dataset_exclude": "datasets_exclude", "pool_include": "pools_include", "pool_exclude": "pools_exclude",
                 "pool_expected": "pools_expected"}


def snapshot_config(capture: Capture, index: int, base: ExporterConfig) -> ExporterConfig:
    """The exporter's settings for snapshot `index`: the capture's collectors and their settings
    (its manifest's flags, by destination: the archive's format; flags it lacks keep `base`'s),
    its recorded trees, no command prefix and never this machine's own bench database."""
    from .collectors import ALL
    from .collectors.base import Paths
    from .collectors.bench import BenchCollector
    from .wiring import ExporterConfig, KstatSettings

    snap = capture.snapshots[index]
    flags = {RENAMED_FLAGS.get(dest, dest): value for dest, value in capture.manifest.get("flags", {}).items()}
    chosen = set(capture.manifest.get("collectors", []))
    config = ExporterConfig.from_values({**base.values(), **flags}, [cls for cls in ALL if cls.name in chosen])
    config.paths = Paths(procfs=str(snap / "proc"), sysfs=str(snap / "sys"), udev_data=str(snap / "udev" / "data"))
    config.kstat = KstatSettings(source=capture.manifest.get("kstat_source", "procfs"),
                                 sysctl_file=str(snap / "sysctl.txt") if (snap / "sysctl.txt").is_file() else None)
    config.commands = config.commands.replace(prefix="")
    bench = config.collector_settings[BenchCollector]
    config.collector_settings[BenchCollector] = bench.replace(db=str(snap / "bench.sqlite"))
    return config


def snapshot_exporter(capture: Capture, index: int, base: ExporterConfig, process_metrics: bool = True,
                      said: set[str] | None = None) -> Exporter:
    """`said`: the replay notes already logged for this capture (see `sources.recorded.ReplayRunner`)."""
    from .wiring import build_exporter

    snap = capture.snapshots[index]
    try:
        runner = read_records(snap, said)
    except ValueError as exc:
        raise CaptureError(f"snapshot {index}: {exc}") from None
    return build_exporter(snapshot_config(capture, index, base), process_metrics, runner=runner)


class ReplayExporter:
    """What the server serves in replay mode: one exporter per snapshot, one snapshot per scrape.

    Each snapshot's collectors take over what the snapshot before built across scrapes
    (`Collector.continue_from`: the txg counters), as one live exporter would have kept it. With
    `loop`, laps after the first continue rather than start over (`LoopContinuation`)."""

    def __init__(self, capture: Capture, base: ExporterConfig, loop: bool = False, process_metrics: bool = True):
        self.capture = capture
        self.loop = loop
        said: set[str] = set()  # each note on what the capture lacks is logged once, not once per snapshot
        self.exporters = [snapshot_exporter(capture, i, base, process_metrics, said)
                          for i in range(len(capture.snapshots))]
        self.collectors = self.exporters[0].collectors if self.exporters else []
        self.position = 0
        self.lap = 0
        self._continued = {0}
        self.continuation = LoopContinuation(len(self.exporters), snapshot_times(capture.manifest)) if loop else None
        self._lock = threading.Lock()

    def render(self) -> str:
        # One render at a time: snapshot i takes over snapshot i-1's state after i-1 rendered.
        with self._lock:
            index, lap = self.position, self.lap
            exporter = self.exporters[index]
            if index not in self._continued:
                for earlier, later in zip(self.exporters[index - 1].collectors, exporter.collectors):
                    later.continue_from(earlier)
                self._continued.add(index)
            if self.position + 1 < len(self.exporters):
                self.position += 1
            elif self.loop:
                self.position, self.lap = 0, self.lap + 1
            text = exporter.render()
            return self.continuation.apply(text, index, lap) if self.continuation else text

    def start(self) -> None:
        """Nothing runs in the background: each snapshot reads its recorded sources on its first scrape."""

    def stop(self) -> None:
        self.capture.close()


def snapshot_times(manifest: dict) -> list[float] | None:
    """When each snapshot was taken (Unix seconds), from the manifest; None when it does not say."""
    try:
        start = float(manifest["created_unix"])
        count = int(manifest["snapshots"])
        interval = float(manifest.get("interval_seconds") or 0.0)
    except (KeyError, TypeError, ValueError):
        return None
    return [start + i * interval for i in range(count)]


CUMULATIVE = ("counter", "histogram", "summary")


class LoopContinuation:
    """`--replay.loop` as a NAS that keeps running: on every lap after the first, each counter (and
    histogram bucket, sum and count) goes on from where the last snapshot left it, by its rise over
    the capture plus one mean step (so Prometheus sees no reset), and every `*_timestamp_seconds`
    gauge moves with the clock (a scrub, snapshot or benchmark run stays as old as it was when the
    snapshot was taken, so no age alert fires that the NAS did not have). The replaying process's
    own `process_*` metrics are left as they are. Works on the rendered text: what each snapshot
    serves is otherwise exactly the capture's."""

    def __init__(self, count: int, taken: list[float] | None, clock: Callable[[], float] = time.time):
        self.count = count
        self.taken = taken
        self.clock = clock
        self._first: dict[str, int | float] = {}
        self._last: dict[str, int | float] = {}
        self._per_lap: dict[str, int | float] | None = None

    def apply(self, text: str, index: int, lap: int) -> str:
        shift = self.clock() - self.taken[index] if self.taken and index < len(self.taken) else 0.0
        if lap and self._per_lap is None:
            self._per_lap = self._rise_per_lap()
        out = []
        cumulative = timestamp = False
        for line in text.splitlines(keepends=True):
            if line.startswith("#"):
                if line.startswith("# TYPE "):
                    parts = line.split()
                    kind = parts[3] if len(parts) > 3 else ""
                    timestamp = parts[2].endswith("_timestamp_seconds") and kind == "gauge"
                    cumulative = kind in CUMULATIVE and not parts[2].startswith("process_")
                out.append(line)
                continue
            key, _, raw = line.rstrip("\n").rpartition(" ")
            if not key or not (cumulative or timestamp):
                out.append(line)
                continue
            number = _number(raw)
            if number is None:
                out.append(line)
                continue
            if timestamp:
                value: int | float = number + shift if number > 0 else number
            elif lap == 0:
                if index == 0:
                    self._first[key] = number
                if index == self.count - 1:
                    self._last[key] = number
                value = number
            else:
                value = number + lap * (self._per_lap or {}).get(key, 0)
            out.append(f"{key} {format_value(value)}\n")
        return "".join(out)

    def _rise_per_lap(self) -> dict[str, int | float]:
        """Each series' rise over the capture plus one mean step between snapshots; 0 for one snapshot."""
        if self.count < 2:
            return {}
        per_lap: dict[str, int | float] = {}
        for key, last in self._last.items():
            first = self._first.get(key)
            if first is None or last < first:
                continue
            rise = last - first
            per_lap[key] = rise * self.count // (self.count - 1) if isinstance(rise, int) else \
                rise * self.count / (self.count - 1)
        return per_lap


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


def describe(capture: Capture) -> str:
    m = capture.manifest
    return (f"{m.get('snapshots')} snapshot(s) taken {m.get('created')} on {m.get('hostname')} "
            f"({(m.get('os') or {}).get('name') or (m.get('os') or {}).get('system')}), OpenZFS "
            f"{m.get('openzfs_version')}{', anonymized' if m.get('anonymized') else ''}")
