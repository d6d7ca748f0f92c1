#!/usr/bin/env python3
"""A hostile `zfs`/`zpool` for the memory-bound tests (issue 33): listings made to grow the
exporter, written as fast as a pipe takes them.

    hostile.py [--datasets N] [--snapshots N] [--name-length L] [--endless] [--stderr-mb M] -- zfs list ...

Used as the exporter's command prefix. `zfs list -t filesystem,volume` prints N valid datasets
whose names are L bytes long (`p/<digits>xxx...`); `zfs list -t snapshot` prints N snapshot lines
of those datasets, one each (`--endless`: new datasets' snapshots until killed); `--stderr-mb`
makes every command write M MiB to stderr and exit 1 instead. Anything else (`zpool ...`) says
"no pools available" and exits 1, as zpool does with nothing imported.
"""

from __future__ import annotations

import itertools
import sys

CHUNK = 1 << 16
COLUMNS = 28  # zfs_datasets.DATASET_PROPERTIES


def name(number: int, length: int) -> bytes:
    stem = b"p/%d" % number
    return stem + b"x" * max(0, length - len(stem))


def dataset_line(number: int, length: int) -> bytes:
    numbers = b"\t".join([b"1048576"] * 12)
    settings = b"lz4\t131072\t-\toff\tstandard\tall\tall\toff\toff\tlatency\t0\t-"
    return b"%s\tfilesystem\t%s\t1.50\t1.50\t%s\n" % (name(number, length), numbers, settings)


def snapshot_line(number: int, length: int) -> bytes:
    return b"%s@s\t1700000000\n" % name(number, length)


def write_lines(make, count: int | None, length: int) -> None:
    out = sys.stdout.buffer
    numbers = itertools.count() if count is None else iter(range(count))
    while True:
        batch = b"".join(make(n, length) for n in itertools.islice(numbers, max(1, CHUNK // (length + 20))))
        if not batch:
            return
        out.write(batch)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    datasets = snapshots = stderr_mb = 0
    length, endless = 20, False
    while options:
        flag = options.pop(0)
        if flag == "--endless":
            endless = True
        elif flag == "--datasets":
            datasets = int(options.pop(0))
        elif flag == "--snapshots":
            snapshots = int(options.pop(0))
        elif flag == "--name-length":
            length = int(options.pop(0))
        elif flag == "--stderr-mb":
            stderr_mb = int(options.pop(0))
    if stderr_mb:
        block = b"cannot open 'p/x': dataset does not exist\n" * (CHUNK // 42)
        for _ in range(stderr_mb * (1 << 20) // len(block) + 1):
            sys.stderr.buffer.write(block)
        return 1
    try:
        if command[:2] == ["zfs", "list"] and "snapshot" in command:
            write_lines(snapshot_line, None if endless else snapshots, length)
        elif command[:2] == ["zfs", "list"]:
            write_lines(dataset_line, datasets, length)
        else:
            print("no pools available", file=sys.stderr)
            return 1
        sys.stdout.buffer.flush()
    except BrokenPipeError:  # the exporter stopped reading: what a killed listing sees
        return 141
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
