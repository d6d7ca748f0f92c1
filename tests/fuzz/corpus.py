"""A seeded, generated corpus of hostile inputs for the whole exporter, and how to run one case.

Each `Case` changes one thing in a working copy of a real fixture tree (OpenZFS 2.3.2 kstats and
module parameters, the disks tree, recorded `zfs`/`zpool` output replayed by tests/fuzz/standin.py,
a `zfsnas-bench` database): a kstat or sysfs file, a directory name, one command's output or
behaviour, one database value. Classes:
  name      a field or key that is no valid metric name (dashes, spaces, braces, upper case, unicode, bytes)
  value     a number float64 cannot hold (10**400, 1e309), non-numbers, NaN/Inf spellings, type codes
  bytes     non-UTF-8 bytes in file contents, string kstats, command output and directory names
  shape     truncated files, garbage, missing headers, wrong column counts, empty output
  size      1 MB lines and fields, files over the read limit, 100 MB command output (--full only)
  time      commands that hang, or exit leaving a process that holds their pipe
  benchdb   text, huge and non-finite values in the benchmark database
The same generator feeds tests/fuzz/test_fuzz.py (a small corpus) and benchmarks/fuzz.py (the full run).
"""

from __future__ import annotations

import json
import random
import shlex
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests import registry
from tests.conftest import copy_commands, copy_tree
from tests.fuzz.standin import write_dispatcher
from zfsnas.sources import kstat as kstat_paths

FIXTURES = Path(__file__).parent.parent / "fixtures"
KSTAT = Path("proc/spl/kstat/zfs")
NAMED_KSTATS = [KSTAT / "arcstats", KSTAT / "dmu_tx", KSTAT / "tank/objset-0x36", KSTAT / "tank/iostats",
                KSTAT / "fm", KSTAT / "backup/objset-0x89"]
OTHER_KSTATS = [KSTAT / "tank/txgs", KSTAT / "tank/dmu_tx_assign", KSTAT / "tank/state", KSTAT / "tank/reads"]
# Every named kstat the sources declare (sources/kstat.py's KstatPath lines) is fuzzed: those not
# listed above (a kstat added since) come after them, so the draws of the ones above stay as they were.
NAMED_KSTATS += [path for path in (KSTAT / k.procfs_of("tank") for k in vars(kstat_paths).values()
                                   if isinstance(k, kstat_paths.KstatPath))
                 if path not in NAMED_KSTATS + OTHER_KSTATS]
COMMANDS = ["zpool-list.txt", "zpool-status-P.txt", "zpool-status-g.txt", "zfs-list.txt",
            "zfs-list-snapshots.txt", "zpool-iostat-w.txt", "zpool-iostat-q.txt"]

BAD_NAMES = ["foo-bar", "fooBar", "名前", "x{y}", "a:b", "1abc", "__reserved", "sp ace", "semi;colon",
             "quo\"te", "back\\slash", "é", "\x00nul", "tab\tname"]
BAD_NAME_BYTES = [b"\xff\xfe", b"na\xc3\x28me", b"\xed\xa0\x80x"]
BAD_VALUES = ["1" + "0" * 309, "9" * 400, "-" + "9" * 400, "1e309", "-1e309", "nan", "inf", "-inf", "NaN",
              "0x1f", "abc", "", "1.5.5", "18446744073709551616" * 20, "1_000", "½", "+5", "∞",
              "\u00b2", "-0", "-5", "1e400"]  # issue 33: ² passes str.isdigit, not int(); negative sizes
BAD_BYTES = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80abc"]


@dataclass
class Case:
    name: str
    klass: str
    apply: Callable[[Path], None]
    big: bool = False            # needs a process of its own to measure memory
    slow: bool = False           # waits for command timeouts
    collectors: list[str] = field(default_factory=list)  # the ones that read what the case changes


KSTAT_COLLECTORS = list(registry.KSTAT)
COMMAND_COLLECTORS = list(registry.COMMANDS)
# every collector but smart, whose smartctl answers the base tree does not hold (its fuzzing is
# tests/sources/test_smart_hostile.py's and tests/fuzz/run_inputs.py's)
ALL = [name for name in registry.NAMES if name != "smart"]


def collectors_for(what: str) -> list[str]:
    """Only the collectors that read the changed input run: pages stay small and cases fast."""
    if what.startswith(("zpool", "zfs", "commands")):
        return COMMAND_COLLECTORS
    if what.startswith(("diskstats", "b253", "udev")):
        return ["disks"]
    if what.startswith("bench"):
        return ["bench"]
    return KSTAT_COLLECTORS


def base_tree(work: Path) -> Path:
    """A pristine working copy of the fixtures every case starts from."""
    base = work / "base"
    if base.exists():
        return base
    copy_tree(base, "2.3.2", disks=True)
    copy_commands(base / "commands")
    make_bench_db(base / "bench.sqlite")
    write_dispatcher(base / "commands")
    return base


def make_bench_db(path: Path) -> None:
    from tests.bench.configs import configuration
    from zfsnas.store.database import Store
    from zfsnas.store.schema import ResultFigures

    store = Store(path)
    store.start_matrix("r", "m", "tank/scratch", 0)
    for i, throughput in enumerate((100e6, 120e6, 150e6)):
        rid = store.start_result("r", i, configuration(), 1, f"tank/scratch/zfsnas-bench-r-{i}",
                                 started=1000.0 + i * 100)
        store.finish_result(rid, "complete", 1010.0 + i * 100, figures=ResultFigures(
            throughput_bytes_per_second=throughput, compressratio=1.5, cpu_busy_ratio=0.4, duration_seconds=10.0))
    store.close()


def flags(tree: Path, collectors: list[str] = ALL) -> list[str]:
    prefix = shlex.join(["sh", str(tree / "commands" / "run.sh")])
    return ["--collector.disable-defaults", *(f"--collector.{c}" for c in collectors or ALL),
            "--path.procfs", str(tree / "proc"), "--path.sysfs", str(tree / "sys"),
            "--path.udev.data", str(tree / "udev" / "data"), "--zfs.command-prefix", prefix,
            "--zfs.command-timeout", "2", "--no-disks.hotplug",
            "--bench.db", str(tree / "bench.sqlite")]


# --- mutations: each returns a function that changes the tree in place ---------------------------

def replace_file(path: Path, data: bytes) -> None:
    """Write a new file: the case's tree is hard links to the base tree, never written through."""
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def _rewrite(rel: Path | str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(tree: Path) -> None:
        path = tree / rel
        replace_file(path, change(path.read_bytes()))
    return apply


def _named_rows(data: bytes) -> tuple[list[bytes], list[bytes]]:
    lines = data.split(b"\n")
    return lines[:2], [line for line in lines[2:] if line.strip()]


def replace_field_name(rng: random.Random, name: bytes) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        head, rows = _named_rows(data)
        i = rng.randrange(len(rows))
        parts = rows[i].split(None, 2)
        rows[i] = name.ljust(32) + b" " + b" ".join(parts[1:])
        return b"\n".join(head + rows) + b"\n"
    return change


def replace_field_value(rng: random.Random, value: bytes, type_code: bytes | None = None) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        head, rows = _named_rows(data)
        numeric = [i for i, r in enumerate(rows) if r.split()[1:2] != [b"7"]]
        i = rng.choice(numeric)
        name, code = rows[i].split()[:2]
        rows[i] = name.ljust(32) + b" " + (type_code or code).ljust(4) + b" " + value
        return b"\n".join(head + rows) + b"\n"
    return change


def replace_column(rng: random.Random, value: bytes) -> Callable[[bytes], bytes]:
    """One tab- or space-separated column of one data line of command output or a table kstat."""
    def change(data: bytes) -> bytes:
        lines = data.split(b"\n")
        candidates = [i for i, line in enumerate(lines) if len(line.split()) > 1]
        if not candidates:
            return data + value + b"\n"
        i = rng.choice(candidates)
        sep = b"\t" if b"\t" in lines[i] else b" "
        cols = lines[i].split(sep)
        filled = [j for j, c in enumerate(cols) if c.strip()]
        cols[rng.choice(filled)] = value
        lines[i] = sep.join(cols)
        return b"\n".join(lines)
    return change


def truncate(rng: random.Random) -> Callable[[bytes], bytes]:
    return lambda data: data[:rng.randrange(len(data))] if data else data


def garbage(rng: random.Random, size: int) -> Callable[[bytes], bytes]:
    return lambda data: bytes(rng.randrange(256) for _ in range(size))


def insert_bytes(rng: random.Random, junk: bytes) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        at = rng.randrange(len(data) + 1)
        return data[:at] + junk + data[at:]
    return change


def set_command(name: str, behaviour: dict) -> Callable[[Path], None]:
    """Make the stand-in generate output or misbehave for one command (see standin.py)."""
    def apply(tree: Path) -> None:
        index = json.loads((tree / "commands" / "index.json").read_text())
        for command, file in index["commands"].items():
            if file == name:
                index.setdefault("behaviour", {})[command] = behaviour
        replace_file(tree / "commands" / "index.json", json.dumps(index).encode())
        write_dispatcher(tree / "commands")
    return apply


def add_pool_dir(name: bytes) -> Callable[[Path], None]:
    def apply(tree: Path) -> None:
        import os

        src = tree / KSTAT / "tank"
        dst = os.path.join(os.fsencode(tree / KSTAT), name)
        shutil.copytree(src, os.fsdecode(dst))
    return apply


def objset_dataset_name(name: bytes) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        lines = data.split(b"\n")
        for i, line in enumerate(lines):
            if line.startswith(b"dataset_name"):
                lines[i] = b"dataset_name".ljust(32) + b" 7    " + name
        return b"\n".join(lines)
    return change


def _own_db(tree: Path) -> sqlite3.Connection:
    path = tree / "bench.sqlite"
    replace_file(path, path.read_bytes())
    return sqlite3.connect(path)


def bench_value(column: str, value) -> Callable[[Path], None]:
    def apply(tree: Path) -> None:
        db = _own_db(tree)
        db.execute(f"UPDATE results SET {column} = ? WHERE id = (SELECT MAX(id) FROM results)", (value,))
        db.commit()
        db.close()
    return apply


def bench_label(value: bytes) -> Callable[[Path], None]:
    def apply(tree: Path) -> None:
        db = _own_db(tree)
        # the labels come from the stored configuration (JSON), the column is its readable copy
        db.execute("UPDATE results SET workload = CAST(? AS TEXT), config = json_set(config, '$.workload', "
                   "CAST(? AS TEXT))", (value, value))
        db.commit()
        db.close()
    return apply


def generate(seed: int = 16, per_class: int = 40, full: bool = False) -> list[Case]:
    """The corpus: `per_class` cases of each class drawn with `seed`, plus the fixed size and time
    cases (the 100 MB outputs only with `full`)."""
    rng = random.Random(seed)
    cases: list[Case] = []

    def add(klass: str, what: str, apply, **kw) -> None:
        kw.setdefault("collectors", ALL if klass in ("size", "time") else
                      ["bench"] if klass == "benchdb" else collectors_for(what))
        cases.append(Case(f"{klass}/{len(cases):04d}/{what}", klass, apply, **kw))

    kstats = NAMED_KSTATS
    for _ in range(per_class):
        target = rng.choice(kstats)
        if rng.random() < 0.7:
            name = rng.choice(BAD_NAMES).encode()
        else:
            name = rng.choice(BAD_NAME_BYTES)
        add("name", f"{target.name}:{name!r}", _rewrite(target, replace_field_name(rng, name)))
    for _ in range(per_class // 4):
        param = rng.choice(["zfs_dirty_data_max", "zfs_arc_max", "zfs_txg_timeout"])
        bad_name = rng.choice(BAD_NAMES)
        add("name", f"tunable:{param}", lambda tree, p=param, n=bad_name:
            (tree / "sys/module/zfs/parameters" / p).rename(tree / "sys/module/zfs/parameters" / n.replace("\x00", "_")))
    for _ in range(per_class):
        target = rng.choice(kstats)
        value = rng.choice(BAD_VALUES).encode()
        code = rng.choice([None, None, None, b"9", b"x", b"7", b"0"])
        add("value", f"{target.name}:{value[:20]!r}:{code}", _rewrite(target, replace_field_value(rng, value, code)))
    for _ in range(per_class // 2):
        target = rng.choice(OTHER_KSTATS + [Path("commands") / c for c in COMMANDS] + [Path("proc/diskstats")])
        value = rng.choice(BAD_VALUES).encode()
        add("value", f"{target.name}:{value[:20]!r}", _rewrite(target, replace_column(rng, value)))
    for _ in range(per_class // 2):
        param = rng.choice(["zfs_dirty_data_max", "zfs_arc_max", "zfs_txg_timeout", "zfs_arc_min"])
        bad_value = rng.choice(BAD_VALUES).encode()
        add("value", f"tunable:{param}", _rewrite(Path("sys/module/zfs/parameters") / param,
                                                  lambda data, v=bad_value: v + b"\n"))
    for _ in range(per_class):
        junk = rng.choice(BAD_BYTES)
        kind = rng.randrange(4)
        if kind == 0:
            target = rng.choice([Path("commands") / c for c in COMMANDS])
            add("bytes", f"{target.name}", _rewrite(target, replace_column(rng, b"tank/" + junk + b"x")))
        elif kind == 1:
            target = rng.choice([KSTAT / "tank/objset-0x36", KSTAT / "backup/objset-0x89", KSTAT / "tank/objset-0x104"])
            add("bytes", f"{target.name}:dataset_name", _rewrite(target, objset_dataset_name(b"tank/" + junk + b" \"q\\")))
        elif kind == 2:
            add("bytes", "pool directory", add_pool_dir(b"po" + junk + b"ol"))
        else:
            target = rng.choice(kstats + OTHER_KSTATS + [Path("proc/diskstats"), Path("sys/module/zfs/version")])
            add("bytes", f"{target.name}", _rewrite(target, insert_bytes(rng, junk)))
    for _ in range(per_class):
        target = rng.choice(kstats + OTHER_KSTATS + [Path("commands") / c for c in COMMANDS]
                            + [Path("proc/diskstats"), Path("udev/data") / "b253:0"])
        kind = rng.randrange(4)
        change = [truncate(rng), garbage(rng, rng.randrange(1, 2000)), insert_bytes(rng, b"\n\n\t \n"),
                  lambda data: b""][kind]
        add("shape", f"{target.name}:{['truncated', 'garbage', 'blank lines', 'empty'][kind]}",
            _rewrite(target, change))
    # size: long lines and fields, files over the read limit; 100 MB outputs in the full run
    long_name = b"v" * (1 << 20)
    add("size", "zpool iostat -w: 1 MB vdev name", set_command("zpool-iostat-w.txt", {"long_vdev": 1 << 20}), big=True)
    add("size", "zpool status: 1 MB vdev name", _rewrite(Path("commands/zpool-status-P.txt"),
                                                        lambda data: data.replace(b"/dev/", b"/dev/" + long_name, 1)),
        big=True)
    add("size", "zfs list: 1 MB dataset name", _rewrite(Path("commands/zfs-list.txt"),
                                                       lambda data: b"tank/" + long_name + data[data.index(b"\t", 4):]),
        big=True)
    add("size", "arcstats: 1 MB field name", _rewrite(KSTAT / "arcstats", replace_field_name(rng, long_name)), big=True)
    add("size", "objset: 1 MB dataset name", _rewrite(KSTAT / "tank/objset-0x36", objset_dataset_name(long_name)), big=True)
    add("size", "arcstats: 8 MB file", _rewrite(KSTAT / "arcstats", lambda data: data + b"x" * (8 << 20)), big=True)
    add("size", "zpool list: 20 MB output", set_command("zpool-list.txt", {"repeat_mb": 20}), big=True)
    add("size", "snapshots: 1 MB name", set_command("zfs-list-snapshots.txt", {"long_line": 1 << 20}), big=True)
    if full:
        for file in ("zpool-list.txt", "zpool-status-P.txt", "zfs-list.txt", "zfs-list-snapshots.txt",
                     "zpool-iostat-w.txt"):
            add("size", f"{file}: 100 MB output", set_command(file, {"repeat_mb": 100}), big=True)
    # time: hung commands, and a leftover that holds a command's pipe after it exited
    add("time", "zpool status hangs", set_command("zpool-status-P.txt", {"sleep": 3600}), slow=True)
    add("time", "zfs list leaves a process holding its pipe", set_command("zfs-list.txt", {"leftover": 3600}), slow=True)
    add("time", "zpool list: 50 MB of stderr, exit 1", set_command("zpool-list.txt", {"stderr_mb": 50, "exit": 1}), big=True)
    # the benchmark database
    for column, value in (("throughput_bytes_per_second", "fast"), ("compressratio", "1.5x"),
                          ("cpu_busy_ratio", 10 ** 400 if False else 1e308 * 10), ("duration_seconds", b"\x00\xff"),
                          ("finished", "yesterday"), ("throughput_bytes_per_second", -1e308 * 10)):
        add("benchdb", f"{column}={value!r:.20}", bench_value(column, value))
    add("benchdb", "workload with non-UTF-8 bytes", bench_label(b"seq\xffwrite"))
    add("benchdb", "workload of 1 MB", bench_label(b"j" * (1 << 20)))
    return cases
