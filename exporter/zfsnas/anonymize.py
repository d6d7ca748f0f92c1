"""`capture --anonymize`: stable pseudonyms for what identifies a NAS, the same in every file.

Owns finding the identifying strings in an unpacked capture and rewriting every member (contents
and member names) with one mapping, so the capture still parses and joins the same way:
- pools -> `pool0`, `pool1` ...; datasets keep their place in the tree (`tank/media/films` ->
  `pool0/ds1/ds2`, so its mount path `/tank/media/films` becomes `/pool0/ds1/ds2`); snapshot
  names after `@` -> `snap1` ...; the hostname -> `host0`;
- serial numbers -> `SERIAL0001` ... and WWNs/EUIs -> hex of the same length (`0x5000000000000001`),
  wherever they stand: udev records, sysfs attributes, by-id link names, `zpool status` vdev paths,
  smartctl's JSON (whose `serial_number`s, SCSI `logical_unit_id`s are found there too: a disk behind
  a USB bridge has its own; the identifiers smartctl gives as numbers, `wwn` and NVMe `eui64`, are
  removed from its outputs, since no collector reads them).
Names are replaced only as whole names (not inside `zstd-fast` or `data_size`), serials and WWNs
wherever they occur (they are inside by-id names). Fixed phrases of the formats that a pool name
could clash with (`No known data errors`) are protected. Vdev guids and pool guids are kept: they
identify nothing outside the capture and the disk-to-pool join needs them.
Where the names come from: the recorded `zpool list`/`zfs list` outputs, the `pool:` lines of
`zpool status`, smartctl's serial numbers, kstat pool directories and `dataset_name`s, sysctl names, udev `ID_FS_LABEL`s,
the bench database's dataset, pool and host columns (its text is rewritten in place with SQLite),
the names zfs and zpool quote in their errors (`cannot open 'tank/x'`: a pool that failed to list
appears nowhere else), other hosts named in command output (`host: othernas`, a dotted host name
such as `othernas.example.lan`), and the serials and WWNs inside the by-id paths of disks no
longer there (`was /dev/disk/by-id/ata-..._SERIAL-part1` in `zpool status`; the bench database's
`matrix_runs.pool_layout` keeps a run's whole `zpool status`).
Serials and WWNs come from udev and sysfs, and also from the vdev paths `zpool` prints, for disks
udev knows nothing of (a failed disk already gone, a container without `/run/udev`, FreeBSD):
`/dev/disk/by-id/` names (`ata-MODEL_SERIAL`, `wwn-0x...`, `scsi-3<wwn>`, `scsi-S...`,
`nvme-MODEL_SERIAL`, `nvme-eui.<hex>`, `usb-VENDOR_MODEL_SERIAL-0:0`, `virtio-SERIAL`, with or
without the directory and `-partN`) and FreeBSD's `diskid/DISK-SERIAL` and `gptid/<uuid>`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
from pathlib import Path

NAME_CHARS = r"\w.:%-"
PROTECTED = ("No known data errors", "data errors")
SERIAL_KEYS = ("ID_SERIAL", "ID_SERIAL_SHORT", "ID_SCSI_SERIAL", "SCSI_IDENT_SERIAL")
WWN_KEYS = ("ID_WWN", "ID_WWN_WITH_EXTENSION", "SCSI_IDENT_LUN_NAA_REG", "SCSI_IDENT_LUN_NAA_REGEXT",
            "SCSI_IDENT_LUN_EUI64", "SCSI_IDENT_PORT_NAA_REG", "ID_WWN_VENDOR_EXTENSION")
SMARTCTL = "smartctl"
NUMERIC_IDS = frozenset({"wwn", "eui64"})  # smartctl's identifiers given as JSON numbers
MIN_ID_LENGTH = 4   # shorter "serials" (`0`, `1234`...) would match everywhere; they are reported instead


class Names:
    """The identifying strings found in a capture, and their pseudonyms."""

    def __init__(self) -> None:
        self.pools: set[str] = set()
        self.datasets: set[str] = set()
        self.snapshots: set[str] = set()     # the part after '@' or '#'
        self.hosts: set[str] = set()
        self.serials: set[str] = set()
        self.wwns: set[str] = set()          # hex digits only, lower case
        self.too_short: set[str] = set()

    def add_dataset(self, name: str) -> None:
        name = name.strip()
        if not name or name.startswith("-"):
            return
        base, _, snap = name.replace("#", "@", 1).partition("@")
        if snap:
            self.snapshots.add(snap)
        parts = base.split("/")
        self.pools.add(parts[0])
        for depth in range(2, len(parts) + 1):
            self.datasets.add("/".join(parts[:depth]))

    def as_latin1(self) -> Names:
        out = Names()
        for attr in ("pools", "datasets", "snapshots", "hosts", "serials", "wwns"):
            setattr(out, attr, {_latin1(v) for v in getattr(self, attr)})
        return out

    def add_serial(self, value: str) -> None:
        value = value.strip()
        if len(value) >= MIN_ID_LENGTH:
            self.serials.add(value)
        elif value:
            self.too_short.add(value)

    def add_wwn(self, value: str) -> None:
        core = re.sub(r"^(0x|naa\.|eui\.|t10\.|nvme\.)", "", value.strip().lower())
        if len(core) >= 8 and re.fullmatch(r"[0-9a-f]+", core):
            self.wwns.add(core)
        else:  # `nvme.<vendor>-<hex serial>-<hex model>`, t10 vendor strings: opaque, like a serial
            self.add_serial(core)


def _latin1(text: str) -> str:
    """A name as it appears in a file read byte for byte (see `anonymize_tree`)."""
    return text.encode("utf-8", "replace").decode("latin-1")


def find_names(root: Path) -> Names:
    names = Names()
    names.hosts.add(socket.gethostname())
    for snap in sorted((root / "snapshots").iterdir()):
        _from_commands(snap, names)
        _from_kstats(snap, names)
        _from_devices(snap, names)
        if (snap / "bench.sqlite").is_file():
            _from_bench(snap / "bench.sqlite", names)
        sysctl = snap / "sysctl.txt"
        if sysctl.is_file():
            _from_sysctl(sysctl.read_text(errors="replace"), names)
    return names


# What zfs and zpool quote in their errors: `cannot open 'tank/x': dataset does not exist`,
# `pool 'tank' ...`; and how their outputs name another host (`host: othernas hostid: 0x...`,
# `imported by host 'othernas'`). A dotted host name (`othernas.example.lan`) is found anywhere in them.
_QUOTED_NAME = re.compile(r"(?:cannot [a-z ]+?|pool|dataset|filesystem|volume|snapshot|bookmark) '([^'\n]+)'")
_HOST_WORD = re.compile(r"\bhost(?:name)?(?::\s*|=|\s+')'?([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9])")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOTTED_HOST = re.compile(rf"(?<![\w.:/@-])({_LABEL}(?:\.{_LABEL})*\.(?:[A-Za-z]{{2,24}}))(?![\w.:@/-])")
_PRIVATE_TLDS = {"lan", "local", "localdomain", "home", "internal", "intranet", "corp", "private", "box", "router",
                 "example", "test", "invalid", "arpa", "localhost"}
_WAS_BY_ID = re.compile(r"\bwas (?:/dev/disk/by-id/)(\S+)")
_BY_ID = re.compile(r"/dev/disk/by-id/([^\s'\"]+)")


def _from_commands(snap: Path, names: Names) -> None:
    try:
        index = json.loads((snap / "commands.json").read_text())
    except (OSError, ValueError):
        return
    for entry in index.get("commands", []):
        _from_command(entry["argv"], (snap / entry["stdout"]).read_text(errors="replace"), str(entry.get("stderr", "")),
                      names)
    for entry in index.get("not_run", []):
        for arg in entry["argv"]:
            if arg.startswith("kstat.zfs."):
                names.pools.add(arg.split(".")[2])
        _from_messages(str(entry.get("error", "")), names)


def _from_command(argv: list[str], text: str, stderr: str, names: Names) -> None:
    """The names in one recorded command's output `text` and its `stderr`."""
    tool = os.path.basename(argv[0]) if argv else ""
    if tool in ("zfs", "zpool") and argv[1:2] == ["list"]:
        _from_listing(text, names)
    elif tool == "zpool" and argv[1:2] in (["status"], ["iostat"]):
        _from_pool_lines(text, names)
    elif tool == "sysctl":
        _from_sysctl(text, names)
    elif tool == SMARTCTL:
        _from_smartctl(text, names)
    if tool == "zpool":
        _from_vdev_paths(text, names)
    if tool in ("zfs", "zpool"):
        _from_messages(text, names, errors=False)
        _from_messages(stderr, names)


def _from_listing(text: str, names: Names) -> None:
    """`zfs list`/`zpool list`: the first column of each row."""
    for line in text.splitlines():
        if "\t" in line and not line.startswith("\t"):  # not a vdev (-v) nor a section heading
            names.add_dataset(line.split("\t")[0])


def _from_pool_lines(text: str, names: Names) -> None:
    """`zpool status`/`iostat`: the `pool:` lines, and the by-id paths of disks no longer there."""
    for line in text.splitlines():
        if line.strip().startswith("pool:"):
            names.add_dataset(line.split(":", 1)[1])
    for match in _WAS_BY_ID.finditer(text):
        _from_by_id(match[1], names)


def _from_messages(text: str, names: Names, errors: bool = True) -> None:
    """Other hosts an output names; and in `errors` (stderr), the names zfs and zpool quote."""
    for match in _QUOTED_NAME.finditer(text) if errors else ():
        if not match[1].startswith("-"):
            names.add_dataset(match[1])
    for match in _HOST_WORD.finditer(text):
        names.hosts.add(match[1])
    for match in _DOTTED_HOST.finditer(text):
        host = match[1]
        if host.count(".") >= 2 or host.rsplit(".", 1)[1].lower() in _PRIVATE_TLDS:
            names.hosts.add(host)


def _from_smartctl(text: str, names: Names) -> None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return
    if isinstance(data, dict):
        for key, add in (("serial_number", names.add_serial), ("logical_unit_id", names.add_wwn)):
            if isinstance(data.get(key), str):
                add(data[key])


def _scrub_smartctl(root: Path) -> None:
    """Remove the identifiers smartctl prints as numbers (`wwn`, NVMe `eui64`) from its recorded outputs."""
    for index_path in root.rglob("commands.json"):
        try:
            entries = json.loads(index_path.read_text()).get("commands", [])
        except (OSError, ValueError, AttributeError):
            continue
        for entry in entries:
            if not entry.get("argv") or os.path.basename(entry["argv"][0]) != SMARTCTL:
                continue
            path = index_path.parent / entry["stdout"]
            try:
                data = json.loads(path.read_bytes().decode("utf-8", "surrogateescape"))
            except (OSError, ValueError, RecursionError):
                continue
            if _drop_keys(data, NUMERIC_IDS):
                path.write_bytes(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(
                    "utf-8", "surrogateescape") + b"\n")


def _drop_keys(data: object, keys: frozenset[str], depth: int = 0) -> bool:
    """Remove `keys` wherever they stand in a JSON value; True if any was."""
    if depth > 32:
        return False
    dropped = False
    if isinstance(data, dict):
        for key in keys & data.keys():
            del data[key]
            dropped = True
        children = list(data.values())
    else:
        children = data if isinstance(data, list) else []
    for child in children:
        dropped = _drop_keys(child, keys, depth + 1) or dropped
    return dropped


# Disk identities inside the vdev names `zpool` prints (see the module docstring).
_BY_ID_BUSES = "ata|scsi|nvme|usb|wwn|virtio|ieee1394|mmc|memstick|sas"
_BY_ID_NAME = re.compile(rf"(?:/dev/disk/by-id/|(?<![\w/.:-]))((?:{_BY_ID_BUSES})-[^\s'\"]+)")
_DISKID = re.compile(r"(?<![\w.-])(?:/dev/)?diskid/DISK-([^\s'\"/]+)")
_GPTID = re.compile(r"(?<![\w.-])(?:/dev/)?gptid/([0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})")


def _from_vdev_paths(text: str, names: Names) -> None:
    for match in _BY_ID_NAME.finditer(text):
        _from_by_id(match[1], names)
    for match in _DISKID.finditer(text):
        names.add_serial(re.sub(r"p[0-9]+$", "", match[1]))
    for match in _GPTID.finditer(text):
        names.add_serial(match[1])


def _from_by_id(name: str, names: Names) -> None:
    """The identities in a by-id link name, as udev builds it: `<bus>-<ID_SERIAL>` (model and
    serial joined by `_`, the serial last), `wwn-0x<hex>`, `scsi-3<naa hex>`, `nvme-eui.<hex>`;
    `-partN` and USB's `-0:0` follow. Both the whole ID_SERIAL and its last part are taken."""
    name = re.sub(r"-part[0-9]+$", "", name)
    bus, _, ident = name.partition("-")
    ident = re.sub(r"-[0-9]+:[0-9]+$", "", ident)  # usb-..._SERIAL-0:0
    if not ident:
        return
    if bus == "wwn" or ident.lower().startswith(("eui.", "0x")):
        names.add_wwn(ident)
    elif bus == "scsi" and re.fullmatch(r"3[0-9a-fA-F]{8,}", ident):
        names.add_wwn(ident[1:])
    else:
        names.add_serial(ident)
        if "_" in ident:
            names.add_serial(ident.rsplit("_", 1)[1])


def _from_sysctl(text: str, names: Names) -> None:
    for line in text.splitlines():
        if line.startswith("kstat.zfs.") and line.count(".") >= 3:
            pool = line.split(".")[2]
            if pool != "misc":
                names.pools.add(pool)
        if ".dataset_name:" in line:
            names.add_dataset(line.split(":", 1)[1])


def _from_bench(path: Path, names: Names) -> None:
    """Dataset, pool and host columns of the bench runner's database (its scratch children are
    often gone from `zfs list` by the time of a capture), and the disks of the `zpool status` it
    keeps per run (`matrix_runs.pool_layout`), by-id paths included, in any text column."""
    db = sqlite3.connect(path)
    try:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = {row[1]: (row[2] or "").upper() for row in db.execute(f'PRAGMA table_info("{table}")')}
            for column in columns.keys() & {"dataset", "pool", "host"}:
                for (value,) in db.execute(f'SELECT DISTINCT "{column}" FROM "{table}"'):
                    if isinstance(value, str) and value:
                        (names.hosts.add if column == "host" else names.add_dataset)(value)
            for column in columns:
                for (value,) in db.execute(f'SELECT DISTINCT "{column}" FROM "{table}" '
                                           f'WHERE "{column}" LIKE \'%/dev/disk/by-id/%\''):
                    if isinstance(value, str):
                        for match in _BY_ID.finditer(value):
                            _from_by_id(match[1], names)
    finally:
        db.close()


def _from_kstats(snap: Path, names: Names) -> None:
    kstats = snap / "proc" / "spl" / "kstat" / "zfs"
    if not kstats.is_dir():
        return
    for pool_dir in kstats.iterdir():
        if not pool_dir.is_dir():
            continue
        if (pool_dir / "state").exists() or (pool_dir / "txgs").exists() or \
                any(p.name.startswith("objset-") for p in pool_dir.iterdir()):
            names.pools.add(pool_dir.name)
        for objset in pool_dir.glob("objset-0x*"):
            for line in objset.read_text(errors="replace").splitlines():
                fields = line.split(None, 2)
                if len(fields) == 3 and fields[0] == "dataset_name":
                    names.add_dataset(fields[2])


def _from_devices(snap: Path, names: Names) -> None:
    udev = snap / "udev" / "data"
    for record in sorted(udev.glob("b*")) if udev.is_dir() else ():
        for line in record.read_text(errors="replace").splitlines():
            if not line.startswith("E:") or "=" not in line:
                continue
            key, _, value = line[2:].partition("=")
            if key in SERIAL_KEYS:
                names.add_serial(value)
            elif key in WWN_KEYS:
                names.add_wwn(value)
            elif key == "ID_FS_LABEL" and "ID_FS_TYPE=zfs_member" in record.read_text(errors="replace"):
                names.pools.add(value)
    block = snap / "sys" / "block"
    for path in block.rglob("*") if block.is_dir() else ():
        rel = path.relative_to(block).as_posix()
        if not path.is_file():
            continue
        if rel.endswith(("/serial", "/device/serial")):
            names.add_serial(path.read_text(errors="replace").strip("\x00 \n"))
        elif rel.endswith("/device/vpd_pg80"):
            data = path.read_bytes()
            names.add_serial(data[4:].decode("ascii", "replace").strip("\x00 \n"))
        elif rel.endswith(("/wwid", "/device/wwid")):
            names.add_wwn(path.read_text(errors="replace"))


class Mapping:
    """One substitution for all members: whole-name matches for names, anywhere for serials and WWNs."""

    def __init__(self, names: Names):
        names = names.as_latin1()
        self.table: dict[str, str] = {}
        for number, pool in enumerate(sorted(names.pools)):
            self.table[pool] = f"pool{number}"
        counter = 0
        for dataset in sorted(names.datasets, key=lambda d: (d.count("/"), d)):
            parent, _, _ = dataset.rpartition("/")
            counter += 1
            self.table[dataset] = f"{self.table.get(parent, parent)}/ds{counter}"
        self.snapshots = {snap: f"snap{n + 1}" for n, snap in enumerate(sorted(names.snapshots))}
        for number, host in enumerate(sorted(h for h in names.hosts if h)):
            self.table.setdefault(host, f"host{number}")
            short = host.split(".")[0]
            if short != host:
                self.table.setdefault(short, f"host{number}")
        # As they stand inside exposition label values and JSON strings.
        for name, pseudonym in list(self.table.items()):
            escaped = name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            self.table.setdefault(escaped, pseudonym)
        self.ids: dict[str, str] = {}
        for number, serial in enumerate(sorted(names.serials, key=lambda s: (-len(s), s))):
            self.ids[serial.lower()] = f"SERIAL{number + 1:04d}"
        for number, wwn in enumerate(sorted(names.wwns)):
            self.ids[wwn] = wwn[0] + format(number + 1, "x").rjust(len(wwn) - 1, "0")
        self._names = _alternation(self.table)
        snap = "|".join(re.escape(s) for s in sorted(self.snapshots, key=len, reverse=True))
        self._name_re = re.compile(rf"(?<![{NAME_CHARS}])({self._names})(?:([@#])({snap}))?(?![{NAME_CHARS}])"
                                   if self._names else r"(?!x)x")
        self._id_re = re.compile(_alternation(self.ids), re.IGNORECASE) if self.ids else None
        self._protect = re.compile("|".join(re.escape(p) for p in PROTECTED))
        # Most members (kstats, module parameters) hold none of these: a substring test in C first.

    def touches(self, text: str) -> bool:
        lower = text.lower()
        return any(needle in text for needle in self.table) or any(i in lower for i in self.ids)

    def _name(self, match: re.Match) -> str:
        out = self.table[match.group(1)]
        if match.group(2) and match.group(3):
            out += match.group(2) + self.snapshots[match.group(3)]
        elif match.group(2):
            out += match.group(2)
        return out

    def _id(self, match: re.Match) -> str:
        original = match.group(0)
        new = self.ids[original.lower()]
        return new.upper() if original.isupper() and not new.isdigit() else new

    def apply(self, text: str) -> str:
        if self._id_re is not None:
            text = self._id_re.sub(self._id, text)
        pieces = self._protect.split(text)
        kept = self._protect.findall(text)
        out = [self._name_re.sub(self._name, piece) for piece in pieces]
        return "".join(p + (kept[i] if i < len(kept) else "") for i, p in enumerate(out))


def anonymize_sqlite(path: Path, mapping: Mapping) -> dict[str, str]:
    """Every text value of every table (the bench runner's dataset and pool names), then VACUUM so the
    old text is not left in free pages. A benchmark configuration's id hashes its pool and host, so
    ids are recomputed; returns {old id: new id} for the rest of the capture to follow."""
    db = sqlite3.connect(path)
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if not row[0].startswith("sqlite_")]
        for table in tables:
            columns = [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]
            for row in db.execute(f'SELECT rowid, {", ".join(f"{chr(34)}{c}{chr(34)}" for c in columns)} '
                                  f'FROM "{table}"').fetchall():
                changes = {c: _unlatin1(mapping.apply(_latin1(v))) for c, v in zip(columns, row[1:])
                           if isinstance(v, str)}
                changes = {c: v for c, v in changes.items() if v != row[1 + columns.index(c)]}
                if changes:
                    assignments = ", ".join(f'"{c}" = ?' for c in changes)
                    db.execute(f'UPDATE "{table}" SET {assignments} WHERE rowid = ?', [*changes.values(), row[0]])
        ids = _rehash_configurations(db)
        db.commit()
        db.execute("VACUUM")
    finally:
        db.close()
    return ids


def _rehash_configurations(db: sqlite3.Connection) -> dict[str, str]:
    from .store.configuration import Configuration

    columns = {row[1] for row in db.execute('PRAGMA table_info("results")')}
    if not {"config_id", "config"} <= columns:
        return {}
    ids = {}
    for rowid, old, text in db.execute("SELECT rowid, config_id, config FROM results WHERE config IS NOT NULL").fetchall():
        try:
            new = Configuration.from_json(text).id
        except (ValueError, KeyError, TypeError):
            continue
        if old and new != old:
            ids[old] = new
            db.execute("UPDATE results SET config_id = ? WHERE rowid = ?", (new, rowid))
    return ids


def _unlatin1(text: str) -> str:
    return text.encode("latin-1").decode("utf-8", "replace")


def _alternation(table: dict[str, str]) -> str:
    return "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True))


def anonymize_tree(root: Path, manifest: dict) -> dict:
    """Rewrite every file under `root` (contents, then names); return the manifest to write."""
    names = find_names(root)
    _scrub_smartctl(root)
    mapping = Mapping(names)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    ids: dict[str, str] = {}
    for path in files:
        if path.suffix == ".sqlite":
            ids.update(anonymize_sqlite(path, mapping))
    for path in files:
        if path.suffix == ".sqlite":
            continue
        raw = path.read_bytes()
        # latin-1 maps bytes 1:1, so binary attributes (vpd pages) survive; names are matched as UTF-8 bytes.
        text = raw.decode("latin-1")
        new = mapping.apply(text) if mapping.touches(text) else text
        for old_id, new_id in ids.items():  # config="<id>" in the recorded /metrics pages
            new = new.replace(f'config="{old_id}"', f'config="{new_id}"')
        if new != text:
            path.write_bytes(new.encode("latin-1"))
    # Deepest first, so a directory is renamed after what is inside it.
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        new_name = mapping.apply(path.name)
        if new_name != path.name:
            path.rename(path.with_name(new_name))
    text = _latin1(json.dumps(manifest, ensure_ascii=False))
    manifest = json.loads(_unlatin1(mapping.apply(text)))
    manifest["anonymized"] = True
    manifest["anonymization"] = {
        "pools": len(names.pools), "datasets": len(names.datasets), "snapshot_names": len(names.snapshots),
        "hostnames": len(names.hosts), "serials": len(names.serials), "wwns": len(names.wwns),
        "left_as_is_too_short": sorted(names.too_short),
        "kept": "vdev and pool guids, disk models, kernel device names, property values",
    }
    return manifest
