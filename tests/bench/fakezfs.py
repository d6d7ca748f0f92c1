#!/usr/bin/env python3
"""A stand-in for the `zfs` and `zpool` commands, for tests of the benchmark runner.

State (datasets, their local properties, every command issued) lives in the JSON file named by
$FAKEZFS_STATE; a filesystem dataset is a real directory $FAKEZFS_ROOT/<name>, so fio and the
copy job write real files. It answers in the real commands' formats (`zfs get -Hp` tab-separated
columns, `source` = local / default / inherited from X / -) and fails like them (exit 1,
"cannot open 'x': dataset does not exist"). Run as `fakezfs.py zfs|zpool <args>` (the runner's
--zfs.command-prefix supplies `python3 fakezfs.py`).

`hooks` in the state change it behind the runner's back, as a person at another terminal would:
{"after": ["zfs", "destroy"], "unset": ["tank/scratch", "org.zfsnas:scratch"]} removes that
property once, right after the first command that starts with `after` succeeded.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

STATE = Path(os.environ["FAKEZFS_STATE"])
ROOT = Path(os.environ["FAKEZFS_ROOT"])
DEFAULTS = {"compression": "off", "recordsize": "131072", "volblocksize": "16384", "encryption": "off",
            "origin": "-", "atime": "on"}
SIZES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def load() -> dict:
    return json.loads(STATE.read_text())


def save(state: dict) -> None:
    # Atomic (write then rename): the test and a concurrent fake zfs may read the state at any moment.
    temporary = STATE.with_name(f"{STATE.name}.{os.getpid()}")
    temporary.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(temporary, STATE)


def fail(message: str, code: int = 1):
    print(message, file=sys.stderr)
    sys.exit(code)


def number(text: str) -> str:
    unit = text[-1].upper()
    return str(int(float(text[:-1]) * SIZES[unit])) if unit in SIZES else text


def disk_usage(path: Path) -> tuple[int, int]:
    used = logical = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            used += st.st_blocks * 512
            logical += st.st_size
    return used, logical


def value(state: dict, name: str, prop: str) -> tuple[str, str]:
    ds = state["datasets"][name]
    if prop == "type":
        return ds["type"], "-"
    if prop in ds["props"]:
        return ds["props"][prop], "local"
    parent = name.rsplit("/", 1)[0] if "/" in name.split("@")[0] else None
    if ":" in prop or prop in ("compression", "atime"):  # inheritable
        while parent:
            if prop in state["datasets"][parent]["props"]:
                return state["datasets"][parent]["props"][prop], f"inherited from {parent}"
            parent = parent.rsplit("/", 1)[0] if "/" in parent else None
    if prop == "mountpoint":
        return (str(ROOT / name) if ds["type"] == "filesystem" else "-"), "default"
    if prop in ("used", "logicalused", "referenced", "logicalreferenced", "compressratio", "available"):
        used, logical = disk_usage(ROOT / name) if ds["type"] == "filesystem" else (0, 0)
        if prop == "available":      # with a capacity, a pool that fills: less what every dataset holds
            free = state["capacity"] - disk_usage(ROOT)[0] if "capacity" in state else state.get("available", 1 << 40)
            return str(free), "-"
        if prop == "compressratio":
            return f"{(logical / used) if used else 1.0:.2f}", "-"
        return str(used if prop in ("used", "referenced") else logical), "-"
    if prop in DEFAULTS:
        return DEFAULTS[prop], "default"
    return "-", "-"


def zfs(state: dict, args: list[str]) -> None:
    cmd, rest = args[0], args[1:]
    datasets = state["datasets"]
    if cmd == "version":
        print("zfs-2.3.2-fake\nzfs-kmod-2.3.2-fake")
    elif cmd == "get":
        columns = ["name", "property", "value", "source"]
        while rest[0].startswith("-"):
            flag = rest.pop(0)
            if flag == "-o":
                columns = rest.pop(0).split(",")
        props, names = rest[0].split(","), rest[1:]
        for name in names:
            if name not in datasets:
                fail(f"cannot open '{name}': dataset does not exist")
            for prop in props:
                val, source = value(state, name, prop)
                row = {"name": name, "property": prop, "value": val, "source": source}
                print("\t".join(row[c] for c in columns))
    elif cmd == "list":
        depth = int(rest[rest.index("-d") + 1]) if "-d" in rest else 99
        top = rest[-1]
        if top not in datasets:
            fail(f"cannot open '{top}': dataset does not exist")
        for name in sorted(datasets):
            if (name == top or name.startswith(top + "/")) and "@" not in name \
                    and name.count("/") - top.count("/") <= depth:
                print(name)
    elif cmd == "create":
        props, kind = {}, "filesystem"
        while rest[0].startswith("-"):
            flag = rest.pop(0)
            if flag == "-o":
                key, val = rest.pop(0).split("=", 1)
                props[key] = number(val) if key in ("recordsize", "volblocksize") else val
            elif flag == "-V":
                kind = "volume"
                props["volsize"] = rest.pop(0)
        name = rest[0]
        if name in datasets:
            fail(f"cannot create '{name}': dataset already exists")
        if name.rsplit("/", 1)[0] not in datasets:
            fail(f"cannot create '{name}': parent does not exist")
        datasets[name] = {"type": kind, "props": props}
        if kind == "filesystem":
            (ROOT / name).mkdir(parents=True)
    elif cmd == "set":
        key, val = rest[0].split("=", 1)
        if rest[1] not in datasets:
            fail(f"cannot open '{rest[1]}': dataset does not exist")
        datasets[rest[1]]["props"][key] = val
    elif cmd == "destroy":
        name = rest[-1]
        if name not in datasets:
            fail(f"cannot open '{name}': dataset does not exist")
        if any(other.startswith((name + "/", name + "@")) for other in datasets):
            fail(f"cannot destroy '{name}': filesystem has children")
        del datasets[name]
        shutil.rmtree(ROOT / name, ignore_errors=True)
    else:
        fail(f"unrecognized command '{cmd}'", 2)


def zpool(state: dict, args: list[str]) -> None:
    if args[0] == "sync":
        if args[1] not in state["datasets"]:
            fail(f"cannot open '{args[1]}': no such pool")
        os.sync()
    elif args[0] == "get":  # zpool get -Hp -o value ashift <pool>
        print(state.get("ashift", "12"))
    elif args[0] == "status":
        print(f"  pool: {args[-1]}\n state: ONLINE\nconfig:\n\n\tNAME        STATE\n\t{args[-1]}  ONLINE\n"
              f"\t  {ROOT}/disk0  ONLINE\n\nerrors: No known data errors")
    else:
        fail(f"unrecognized command '{args[0]}'", 2)


def main() -> None:
    state = load()
    state.setdefault("log", []).append(sys.argv[1:])
    tool, args = sys.argv[1], sys.argv[2:]
    try:
        (zfs if tool == "zfs" else zpool)(state, args)
        run_hooks(state, sys.argv[1:])
    finally:
        save(state)


def run_hooks(state: dict, argv: list[str]) -> None:
    for hook in list(state.get("hooks", [])):
        if argv[:len(hook["after"])] == hook["after"]:
            name, prop = hook["unset"]
            state["datasets"][name]["props"].pop(prop, None)
            state["hooks"].remove(hook)


if __name__ == "__main__":
    main()
