"""Seeded variations of what a user brings to `zfsnas-bench import` (issue 43): CrystalDiskMark text
and fio JSON, each case a variation of one kind of the issue's numbered failures, with what must
come of it: imported (and what is stored), or refused in one line naming why (exit 2, nothing
stored). Generated from a seed, so a failure replays: `import_cases(seed, per_kind)`.

Written by us from the formats' facts (tests/bench/test_client_experiments.py holds the texts of
each CrystalDiskMark version; the fio JSON is the shape fio 3.33 prints). tests/bench/
test_hostile_imports.py runs a few per kind, benchmarks/fuzz.py (`--only inputs`) many, each in a
process of its own whose tree's peak RSS is measured.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.test_client_experiments import CDM5, CDM8, ENCODED

MiB = 1 << 20
NOW = 1_780_000_000          # 2026-05-28: a plausible time of a fio run


@dataclass(frozen=True)
class ImportCase:
    number: int                          # the numbered failure this is a variation of
    kind: str
    format: str                          # crystaldiskmark | fio
    make: Callable[[Path], Path] = field(compare=False)   # writes the input under a directory; its path
    says: tuple[str, ...] = ()           # fragments, one of which the error line holds; () = imported
    flags: tuple[str, ...] = ()
    results: int = 0                     # results stored when imported
    big: bool = False                    # bytes past a bound: run in a process of its own

    @property
    def name(self) -> str:
        return f"{self.number}/{self.kind}"


def _text(name: str, data: bytes | str) -> Callable[[Path], Path]:
    def make(directory: Path) -> Path:
        path = directory / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return path
    return make


def _repeated(name: str, piece: bytes, size: int) -> Callable[[Path], Path]:
    """`size` bytes of `piece` over and over, written without holding them."""
    def make(directory: Path) -> Path:
        path = directory / name
        block = piece * max(1, (1 << 20) // len(piece))
        with path.open("wb") as out:
            left = size
            while left > 0:
                out.write(block[:left])
                left -= len(block)
        return path
    return make


def _fifo(writer: str) -> Callable[[Path], Path]:
    """A FIFO: nobody writes (`none`), or a thread writes a byte every half second forever (`slow`)."""
    def make(directory: Path) -> Path:
        path = directory / "fifo"
        os.mkfifo(path)
        if writer == "slow":
            def write() -> None:
                try:
                    with open(path, "wb", buffering=0) as out:
                        while True:
                            out.write(b"\n")
                            time.sleep(0.5)
                except OSError:
                    pass        # the reader gave up: the pipe broke
            threading.Thread(target=write, daemon=True).start()
        return path
    return make


def _device(path: str) -> Callable[[Path], Path]:
    return lambda directory: Path(path)


def fio_job(name: str = "seq-write", rw: str = "write", io_bytes: int = 1 << 30, bw: float = 500e6,
            iops: float = 476.8, runtime: int = 2147) -> dict:
    return {"jobname": name, "groupid": 0, "error": 0,
            "job options": {"rw": rw, "bs": "1M", "size": "1G", "name": name},
            rw: {"io_bytes": io_bytes, "bw_bytes": bw, "iops": iops, "runtime": runtime,
                 "clat_ns": {"min": 1000, "max": 9000000, "mean": 2000000.0,
                             "percentile": {"50.000000": 1900544, "99.000000": 4014080}}}}


def fio_document(jobs: list[dict], **top) -> dict:
    return {"fio version": "fio-3.33", "timestamp": NOW, "time": "Thu May 28 12:00:00 2026",
            "global options": {"ioengine": "libaio", "direct": "1"}, "jobs": jobs, **top}


def _json(document: object) -> bytes:
    return json.dumps(document, indent=2).encode()


def _digits(rng: random.Random, count: int) -> str:
    return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(count - 1))


def _replace_token(document: dict, path: tuple, token: str) -> bytes:
    """The document's JSON with the value at `path` replaced by a raw token (NaN, 1e400, 5000 digits)."""
    marker = "__TOKEN__"
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = marker
    return json.dumps(document).replace(f'"{marker}"', token).encode()


FIGURE_PATHS = (("io_bytes",), ("bw_bytes",), ("iops",), ("runtime",), ("clat_ns", "percentile", "99.000000"))


def _cdm(rng: random.Random, per_kind: int) -> list[ImportCase]:
    cases: list[ImportCase] = []

    def add(*args, **kwargs) -> None:
        cases.append(ImportCase(*args, **kwargs))

    lines8 = CDM8.splitlines()
    test_lines = [i for i, line in enumerate(lines8) if re.match(r"^\s*(SEQ|RND)\b", line)]
    for _ in range(per_kind):
        # 3: what is no CrystalDiskMark text, at sizes past the byte bound and within it
        size = rng.randint(2, 40) * MiB // 2
        add(3, "blank lines past the byte bound", "crystaldiskmark", _repeated("blank.txt", b"\r\n", size),
            ("more than 1048576 bytes (--max-input-bytes raises it)",), big=True)
        lines = rng.randint(10_001, 300_000)
        add(3, "short lines past the line bound", "crystaldiskmark",
            _text("junk.txt", "".join(rng.choice(("x\n", "\n", " \n", "ab\n")) for _ in range(lines))),
            ("(at most 10000: a CrystalDiskMark result has under 100; --max-lines raises it)",),
            flags=("--max-input-bytes", str(4 * MiB)))
        # 5: a figure of hundreds of digits reads as infinity
        at = rng.choice(test_lines)
        digits = _digits(rng, rng.randint(310, 2000))
        text = "\n".join(re.sub(r"(\d+\.\d+) MB/s", f"{digits}.5 MB/s", line, count=1) if i == at else line
                         for i, line in enumerate(lines8))
        add(5, "a figure of hundreds of digits", "crystaldiskmark", _text("inf.txt", text),
            ("is not a finite number",))
        # 10: queue depth, threads or block size of thousands of digits
        field_re = rng.choice((r"(Q=\s*)\d+", r"(T=\s*)\d+", r"(SEQ\s+|RND\s+)\d+"))
        digits = _digits(rng, rng.randint(7, 6000))
        text = "\n".join(re.sub(field_re, lambda m, d=digits: m[1] + d, line, count=1) if i == at else line
                         for i, line in enumerate(lines8))
        add(10, "a count of thousands of digits", "crystaldiskmark", _text("count.txt", text),
            ("is not a queue depth, thread count or block size",))
        # 10: UTF-16 cut at an odd byte, or holding a lone surrogate
        encoded = ENCODED["5"](CDM5)
        cut = rng.randrange(3, len(encoded) // 2) * 2 + 1
        add(10, "UTF-16 of an odd length", "crystaldiskmark", _text("odd.txt", encoded[:cut]),
            ("not text (UTF-8 or UTF-16)",))
        at16 = rng.randrange(1, len(encoded) // 2) * 2
        surrogate = rng.choice((b"\x00\xd8", b"\xff\xdb", b"\x00\xdc"))
        add(10, "UTF-16 with a lone surrogate", "crystaldiskmark",
            _text("surrogate.txt", encoded[:at16] + surrogate + (b"A\x00" if surrogate != b"\x00\xdc" else b"")
                  + encoded[at16:]),
            ("not text (UTF-8 or UTF-16)",))
        # 5: a date no result can have
        year = rng.choice((rng.randint(1970, 1999), rng.randint(2100, 9999)))
        add(5, "a date outside 2000 to tomorrow", "crystaldiskmark",
            _text("date.txt", CDM8.replace("2023/05/14", f"{year}/05/14")),
            ("not a time a result can have",))
        # controls that must import: figures of any plausible size
        figures = {line: f"{rng.uniform(0.001, 99999):9.3f}" for line in test_lines}
        text = "\n".join(re.sub(r"\s*\d+\.\d+(?= MB/s)", " " + figures[i].strip().rjust(9), line, count=1)
                         if i in figures else line for i, line in enumerate(lines8))
        add(0, "plausible figures", "crystaldiskmark", _text("ok.txt", text), results=8)
    # 3: files that are no files: a FIFO nobody writes, one written forever, devices, a directory
    add(3, "a FIFO nobody writes", "crystaldiskmark", _fifo("none"), ("no CrystalDiskMark test line",))
    add(3, "a FIFO written to forever", "crystaldiskmark", _fifo("slow"),
        ("not read to its end within 1 s (--read-timeout raises it)",), flags=("--read-timeout", "1"))
    add(3, "/dev/zero", "crystaldiskmark", _device("/dev/zero"), ("more than 1048576 bytes",), big=True)
    add(3, "/dev/urandom", "fio", _device("/dev/urandom"), ("more than 16777216 bytes",), big=True)
    add(3, "a directory", "fio", lambda directory: directory, ("is a directory",))
    return cases


def _fio(rng: random.Random, per_kind: int) -> list[ImportCase]:
    cases: list[ImportCase] = []

    def add(*args, **kwargs) -> None:
        cases.append(ImportCase(*args, **kwargs))

    for _ in range(per_kind):
        # 1: more jobs than one import stores (small ones: counted before they are parsed, or after)
        jobs = rng.choice((rng.randint(1001, 20_000), rng.randint(50_000, 100_000)))
        job = json.dumps(fio_job("j{}"), separators=(",", ":"))
        body = ",".join(job.replace('"j{}"', f'"j{i}"') for i in range(jobs))
        add(1, "more jobs than one import stores", "fio",
            _text("jobs.json", f'{{"fio version":"fio-3.33","jobs":[{body}]}}'),
            ("--max-results raises it", "bytes of --max-input-bytes, which raises it"), big=jobs > 50_000)
        # 1: a string of megabytes: past the byte bound, or past an option's length
        size = rng.randint(17, 60) * MiB
        add(1, "a string past the byte bound", "fio", _repeated_json_string(size), ("more than 16777216 bytes",),
            big=True)
        document = fio_document([fio_job()])
        document["jobs"][0]["job options"]["description"] = "d" * rng.randint(4097, 2 * MiB)
        add(1, "an option of megabytes", "fio", _text("option.json", _json(document)), ("(at most 4096)",))
        # 3: empty objects, within the byte bound
        count = rng.randint(600_000, 5_000_000)
        add(3, "empty objects", "fio", _text("empty.json", b'{"jobs": [' + b"{}," * count + b'{}]}'),
            ("bytes of --max-input-bytes, which raises it",), big=count > 3_000_000)
        # 10: nested deeper than Python reads
        depth = rng.randint(2000, 200_000)
        document = fio_document([fio_job()])
        raw = json.dumps(document).replace('"size": "1G"', '"size": ' + "[" * depth + "]" * depth)
        add(10, "nesting of thousands of levels", "fio", _text("deep.json", raw),
            ("nested deeper than Python reads", "bytes of --max-input-bytes, which raises it"))
    return cases + _fio_values(rng, per_kind)


def _fio_values(rng: random.Random, per_kind: int) -> list[ImportCase]:
    """fio JSON whose values are not what fio prints: lists for objects, numbers that are none, names."""
    cases: list[ImportCase] = []

    def add(*args, **kwargs) -> None:
        cases.append(ImportCase(*args, **kwargs))

    for _ in range(per_kind):
        # 10: a list where fio prints an object
        document = fio_document([fio_job()])
        where = rng.choice(("clat_ns", "percentile", "job options", "global options", "write"))
        if where == "clat_ns":
            document["jobs"][0]["write"]["clat_ns"] = []
        elif where == "percentile":
            document["jobs"][0]["write"]["clat_ns"]["percentile"] = [1, 2]
        elif where == "job options":
            document["jobs"][0]["job options"] = ["rw=write"]
        elif where == "global options":
            document["global options"] = [{"ioengine": "libaio"}]
        else:
            document["jobs"][0]["write"] = [1 << 30]
        add(10, f"a list as {where}", "fio", _text("list.json", _json(document)),
            ("is a list, not an object", "is not an object"))
        # 5, 10: numbers that are none: NaN, infinities, thousands of digits, negative, past 2^63
        path = rng.choice(FIGURE_PATHS)
        token = rng.choice(("NaN", "Infinity", "-Infinity"))
        add(10, f"{token} as {'.'.join(path)}", "fio",
            _text("nan.json", _replace_token(fio_document([fio_job()]), ("jobs", 0, "write", *path), token)),
            ("which fio never prints",))
        digits = _digits(rng, rng.randint(4301, 6000))
        add(10, "io_bytes of thousands of digits", "fio",
            _text("digits.json", _replace_token(fio_document([fio_job()]), ("jobs", 0, "write", "io_bytes"), digits)),
            ("not fio JSON: Exceeds the limit",))
        digits = _digits(rng, rng.randint(310, 4000))
        path = rng.choice(FIGURE_PATHS)
        add(5, f"{'.'.join(path)} of hundreds of digits", "fio",
            _text("big.json", _replace_token(fio_document([fio_job()]), ("jobs", 0, "write", *path), digits)),
            ("not a finite number", "not a byte count"))
        path = rng.choice(FIGURE_PATHS)
        add(5, f"a negative {'.'.join(path)}", "fio",
            _text("negative.json", _replace_token(fio_document([fio_job()]), ("jobs", 0, "write", *path),
                                                  f"-{rng.randint(1, 10**9)}")),
            ("cannot be negative",))
        add(5, "io_bytes past 2^63", "fio",
            _text("huge.json", _json(fio_document([fio_job(io_bytes=rng.randint(1 << 63, 1 << 80))]))),
            ("not a byte count",))
        # 5: a time no run can have
        stamp = rng.choice(("1e300", "1e18", "Infinity", "-5", "0", str(rng.randint(1, 946_000_000)),
                            str(int(time.time()) + rng.randint(200_000, 10**9))))
        document = fio_document([fio_job()])
        add(5, f"timestamp {stamp}", "fio", _text("time.json", _replace_token(document, ("timestamp",), stamp)),
            ("not a time a result can have", "not a number of seconds", "which fio never prints"))
        # 11: names that would break a report, a list or a label
        name = rng.choice(("seq\n# INJECTED", "a\tb", "x\r\n## y", "\x1b[31mred", "tail\n"))
        add(11, "a job name with a control character", "fio",
            _text("name.json", _json(fio_document([fio_job(name)]))), ("holds a control character",))
        document = fio_document([fio_job()])
        document["jobs"][0]["job options"]["bs"] = "1M\n# INJECTED"
        add(11, "an option with a line break", "fio", _text("option.json", _json(document)),
            ("holds a control character",))
        add(11, "a job name of thousands of characters", "fio",
            _text("long.json", _json(fio_document([fio_job("n" * rng.randint(257, 5000))]))),
            ("characters long (at most 256)",))
        # controls that must import
        count = rng.randint(1, 40)
        jobs = [fio_job(f"job{i}", rng.choice(("read", "write")), rng.randint(1, 1 << 40), rng.uniform(1, 1e10),
                        rng.uniform(0.1, 1e6), rng.randint(1, 10**7)) for i in range(count)]
        add(0, "plausible jobs", "fio", _text("ok.json", _json(fio_document(jobs))), results=count)
    return cases


def _repeated_json_string(size: int) -> Callable[[Path], Path]:
    """A fio JSON whose one option holds `size` bytes."""
    def make(directory: Path) -> Path:
        path = directory / "string.json"
        with path.open("wb") as out:
            out.write(b'{"fio version": "fio-3.33", "jobs": [{"jobname": "a", "job options": {"x": "')
            block = b"s" * MiB
            for _ in range(size // MiB):
                out.write(block)
            out.write(b'"}, "write": {"io_bytes": 1, "bw_bytes": 1}}]}')
        return path
    return make


def import_cases(seed: int = 43, per_kind: int = 2) -> list[ImportCase]:
    """`per_kind` variations of each kind (and the fixed special files), drawn with `seed`."""
    rng = random.Random(seed)
    return _cdm(rng, per_kind) + _fio(rng, per_kind)
