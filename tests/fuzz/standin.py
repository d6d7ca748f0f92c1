#!/usr/bin/env python3
"""The fuzz corpus' `zfs`/`zpool`: replays `<dir>/index.json` like tests/fixtures/commands/standin.py,
and can misbehave per command line (`"behaviour"` in the index):
  {"repeat_mb": N}      the recorded output repeated until N MB were written
  {"long_vdev": N}      zpool iostat -w output whose first two leaf vdev names are N bytes long
  {"long_line": N}      the recorded output with one N-byte line in the middle
  {"sleep": S}          hang for S seconds before answering
  {"leftover": S}       answer, then exit leaving a process in its own session holding stdout for S seconds
  {"stderr_mb": N, "exit": C}   N MB on stderr, then exit status C

    standin.py <dir> zpool list -Hp ...

`write_dispatcher(dir)` writes `<dir>/run.sh`, the command prefix the corpus uses: a shell `case`
that `cat`s recorded output (a millisecond, where starting Python takes fifty) and hands only the
misbehaving command lines to this script.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    directory, command = Path(argv[0]), shlex.join(argv[1:])
    index = json.loads((directory / "index.json").read_text())
    name = index["commands"].get(command)
    if name is None:
        print(f"standin: no recorded output for: {command}", file=sys.stderr)
        return 2
    data = (directory / name).read_bytes()
    how = index.get("behaviour", {}).get(command, {})
    out = sys.stdout.buffer
    if "sleep" in how:
        time.sleep(how["sleep"])
    if "stderr_mb" in how:
        chunk = b"zpool: error " * 80 + b"\n"
        for _ in range(how["stderr_mb"] * (1 << 20) // len(chunk)):
            sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.write(b"cannot open 'tank': I/O error\n")
        return how.get("exit", 1)
    if "repeat_mb" in how:
        block = (data or b"x\n") * max(1, 65536 // max(1, len(data)))
        for _ in range(how["repeat_mb"] * (1 << 20) // len(block) + 1):
            out.write(block)
        return 0
    if "long_vdev" in how:
        lines = data.split(b"\n")
        vdev = b"/dev/disk/by-id/" + b"v" * how["long_vdev"]
        leaves = [i for i, line in enumerate(lines) if line.startswith(b"/dev/")][:2]  # two 1 MB names
        out.write(b"\n".join(vdev + b"%d" % i + line[line.find(b"\t"):] * (b"\t" in line)
                             if i in leaves else line for i, line in enumerate(lines)))
        return 0
    if "long_line" in how:
        middle = len(data) // 2
        out.write(data[:middle] + b"\n" + b"x" * how["long_line"] + b"\n" + data[middle:])
        return 0
    out.write(data)
    out.flush()
    if "leftover" in how:
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({how['leftover']})"],
                                 start_new_session=True, stdout=os.dup(1), close_fds=True)
        (directory / "leftover.pid").write_text(str(child.pid))  # the corpus runner kills it
    return 0


def write_dispatcher(directory: Path) -> Path:
    index = json.loads((directory / "index.json").read_text())
    behaviour = index.get("behaviour", {})
    # Paths relative to the script: a case's tree is a copy of the base tree, script included.
    lines = ["#!/bin/sh", 'd=$(dirname "$0")', 'case "$*" in']
    for command, name in index["commands"].items():
        if command in behaviour:
            action = f'exec {shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))} "$d" "$@"'
        else:
            action = f'exec cat "$d"/{shlex.quote(name)}'
        lines.append(f"  {shlex.quote(command)}) {action} ;;")
    lines += ['  *) echo "standin: no recorded output for: $*" >&2; exit 2 ;;', "esac", ""]
    script = directory / "run.sh"
    if script.exists():
        script.unlink()  # the tree may be hard links to the base: never write through them
    script.write_text("\n".join(lines))
    return script


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
