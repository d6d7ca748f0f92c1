"""CrystalDiskMark's text results, versions 5 to 8: writing our results in a version's own lines,
and reading the text a user saved or copied from the program.

The formats (from CrystalDiskMark's sources and saved files):
- 5.x, 6.x: one line per test and direction, read then write:
  `   Sequential Read (Q= 32,T= 1) :   105.938 MB/s` (128 KiB blocks),
  ` Random Write 4KiB (Q= 32,T= 1) :     6.243 MB/s [  1524.2 IOPS]` (5.x: IOPS `%8.1f`, 6.x `%9.1f`),
  5.x also `         Sequential Read (T= 1) :` (1 MiB, Q=1) and `   Random Read 4KiB (Q= 1,T= 1) :`;
  then `  Test : 1024 MiB [C: 31.5% (73.4/232.3 GiB)] (x5)  [Interval=5 sec]`, `  Date : 2017/04/08 13:27:46`.
  Saved as UTF-16LE with a byte-order mark, CRLF.
- 7.x: `[Read]` and `[Write]` sections: `Sequential 1MiB (Q=  8, T= 1):   556.573 MB/s [    530.8 IOPS] < 15049.68 us>`,
  `    Random 4KiB (Q= 32, T=16): ...`; `Profile: Default`, `   Test: 1 GiB (x5) [Interval: 5 sec] <DefaultAffinity=DISABLED>`.
  UTF-16LE with a byte-order mark.
- 8.x: `  SEQ    1MiB (Q=  8, T= 1):  3543.207 MB/s [   3379.1 IOPS] <  2365.02 us>`, `  RND    4KiB (...)`;
  `   Test: 1 GiB (x5) [D: 0% (0/931GiB)]`, `   Time: Measure 5 sec / Interval 5 sec `. UTF-8.
7.x and 8.x may add a `[Mix] Read 70%/Write 30%` section.
Every version starts `* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]` and `* KB = 1000 bytes, KiB = 1024 bytes`.

A figure we did not measure prints as `-` in its field, never 0. Owns the formats only: the store,
the report and the import command call it. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .axes import cdm_test, cdm_workload

VERSIONS = ("5", "6", "7", "8")
DEFAULT_VERSION = "8"
UNIT_LINES = ("* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]", "* KB = 1000 bytes, KiB = 1024 bytes")
MISSING = "-"


class CdmError(ValueError):
    """Text that is not CrystalDiskMark 5-8 output; the message names the line."""


@dataclass(frozen=True)
class CdmTest:
    kind: str           # SEQ or RND
    block_kib: int
    queues: int
    threads: int
    direction: str      # read, write or mix
    mb_per_s: float | None = None
    iops: float | None = None
    latency_us: float | None = None

    @property
    def workload(self) -> str:
        return cdm_workload(self.kind, self.block_kib, self.queues, self.threads, self.direction)

    @classmethod
    def of(cls, workload: str, mb_per_s: float | None, iops: float | None, latency_us: float | None) -> CdmTest | None:
        test = cdm_test(workload)
        if test is None:
            return None
        kind, block, q, t, direction = test
        kib = int(block[:-3]) * (1024 if block.endswith("MiB") else 1)
        return cls(kind, kib, q, t, direction, mb_per_s, iops, latency_us)


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{MISSING:>{width}}" if value is None else f"{value:{width}.{digits}f}"


# --- writing -------------------------------------------------------------------------------------------

def line_v8(t: CdmTest) -> str:
    size = f"{t.block_kib // 1024:4d}MiB" if t.block_kib >= 1024 else f"{t.block_kib:4d}KiB"
    return (f"  {t.kind} {size} (Q={t.queues:3d}, T={t.threads:2d}): {_num(t.mb_per_s, 9, 3)} MB/s "
            f"[{_num(t.iops, 9, 1)} IOPS] <{_num(t.latency_us, 9, 2)} us>")


def line_v7(t: CdmTest) -> str:
    tail = f" (Q={t.queues:3d}, T={t.threads:2d}): {_num(t.mb_per_s, 9, 3)} MB/s [{_num(t.iops, 9, 1)} IOPS] " \
           f"<{_num(t.latency_us, 9, 2)} us>"
    if t.kind == "SEQ":
        return f"Sequential {t.block_kib // 1024 if t.block_kib >= 1024 else t.block_kib}" \
               f"{'MiB' if t.block_kib >= 1024 else 'KiB'}{tail}"
    pad = "  " if t.block_kib > 100 else "   " if t.block_kib > 10 else "    "
    return f"{pad}Random {t.block_kib}KiB{tail}"


def line_v56(t: CdmTest, version: str) -> str | None:
    """The test's line in CrystalDiskMark 5 or 6, or None where that version has no such test."""
    direction = t.direction.title()
    iops = f" [{_num(t.iops, 8 if version == '5' else 9, 1)} IOPS]"
    if t.kind == "SEQ" and t.block_kib == 128:
        label = f"Sequential {direction} (Q={t.queues:3d},T={t.threads:2d})"
        iops = ""
    elif t.kind == "SEQ" and t.block_kib == 1024 and (t.queues, t.threads) == (1, 1) and version == "5":
        label = f"Sequential {direction} (T= 1)"
        iops = ""
    elif t.kind == "RND" and t.block_kib == 4 and (t.queues, t.threads) == (1, 1) and version == "5":
        label = f"Random {direction} 4KiB (Q= 1,T= 1)"
    elif t.kind == "RND" and t.block_kib == 4:
        label = f"Random {direction} 4KiB (Q={t.queues:3d},T={t.threads:2d})"
    else:
        return None
    return f"{label:>31} : {_num(t.mb_per_s, 9, 3)} MB/s{iops}"


def render(tests: list[CdmTest], version: str = DEFAULT_VERSION) -> tuple[list[str], list[CdmTest]]:
    """(the lines of `tests` as `version` prints them, the tests that version has no line for)."""
    if version not in VERSIONS:
        raise CdmError(f"CrystalDiskMark version {version!r}: one of {', '.join(VERSIONS)}")
    lines = list(UNIT_LINES) + [""]
    left: list[CdmTest] = []
    if version in ("7", "8"):
        line = line_v8 if version == "8" else line_v7
        for direction, title in (("read", "[Read]"), ("write", "[Write]"), ("mix", "[Mix]")):
            members = [t for t in tests if t.direction == direction]
            if members:
                lines += [title, *(line(t) for t in members), ""]
        return lines[:-1], left
    # 5 and 6: each test's read line then its write line, in the program's order: the 128 KiB
    # sequential test, the deep-queue random ones, then (5.x) the 1 MiB and random tests at Q1T1
    def rank(key: tuple[str, int, int, int]) -> tuple[int, int]:
        kind, block, q, t = key
        group = 0 if kind == "SEQ" and block == 128 else 2 if kind == "SEQ" else 3 if q * t == 1 else 1
        return group, -q * t
    order = sorted(dict.fromkeys((t.kind, t.block_kib, t.queues, t.threads) for t in tests), key=rank)
    for key in order:
        for t in tests:
            if (t.kind, t.block_kib, t.queues, t.threads) == key and t.direction in ("read", "write"):
                text = line_v56(t, version)
                if text is None:
                    left.append(t)
                else:
                    lines.append(text)
    left += [t for t in tests if t.direction == "mix"]
    return lines, left


# --- reading ----------------------------------------------------------------------------------------------

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_V78 = re.compile(r"^\s*(?P<kind>SEQ|RND|Sequential|Random)\s+(?P<size>\d+)(?P<unit>KiB|MiB)\s+"
                  r"\(Q=\s*(?P<q>\d+),\s*T=\s*(?P<t>\d+)\):\s*" + _NUMBER + r" MB/s\s*\[\s*" + _NUMBER +
                  r" IOPS\]\s*<\s*" + _NUMBER + r" us>\s*$")
_V56 = re.compile(r"^\s*(?P<kind>Sequential|Random) (?P<dir>Read|Write)(?: (?P<size>\d+)KiB)?\s*"
                  r"\((?:Q=\s*(?P<q>\d+),\s*)?T=\s*(?P<t>\d+)\)\s*:\s*" + _NUMBER + r" MB/s"
                  r"(?:\s*\[\s*" + _NUMBER + r" IOPS\])?\s*$")
_LOOKS_LIKE_TEST = re.compile(r"^\s*(SEQ|RND|Sequential|Random)\b|\b(SEQ|RND|Sequential|Random)\b.*\bMB/s")
_FOOTER = re.compile(r"^\s*(Profile|Test)\s*:")
_BANNER = re.compile(r"CrystalDiskMark (?P<version>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)\S*")
_TEST_V56 = re.compile(r"^\s*Test\s*:\s*(?P<size>\d+) (?P<unit>MiB|GiB)\b.*\(x(?P<passes>\d+)\)"
                       r"(?:.*\[Interval=(?P<interval>\d+) sec\])?")
_TEST_V78 = re.compile(r"^\s*Test:\s*(?P<size>\d+) (?P<unit>MiB|GiB) \(x(?P<passes>\d+)\)"
                       r"(?:.*\[Interval: (?P<interval>\d+) sec\])?")
_TIME_V8 = re.compile(r"^\s*Time:\s*Measure (?P<measure>\d+) sec / Interval (?P<interval>\d+) sec")
_DATE = re.compile(r"^\s*Date\s*:\s*(?P<date>\d{4}/\d{2}/\d{2} \d{1,2}:\d{2}:\d{2})\s*$")
_MIX = re.compile(r"^\[Mix\]\s*(?P<ratio>.*)$")


@dataclass
class Parsed:
    version: str                    # "8.0.4", or the major version guessed from the lines ("5")
    tests: list[CdmTest]
    test_size: str = ""             # "1 GiB", "1024 MiB"
    passes: str = ""
    interval_seconds: str = ""
    measure_seconds: str = ""
    date: str = ""                  # as printed: 2021/06/12 16:41:38 (the client's local time)
    profile: str = ""
    mix_ratio: str = ""
    other: dict[str, str] = field(default_factory=dict)   # OS, Comment, Mode lines as printed

    @property
    def major(self) -> str:
        return self.version.split(".")[0]


def decode(data: bytes) -> str:
    """Saved files are UTF-16LE with a byte-order mark (5-7) or UTF-8 (8, and copies)."""
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return data.decode("utf-16")
        if data.startswith(b"\xef\xbb\xbf"):
            return data[3:].decode("utf-8")
        if len(data) > 1 and data[1:2] == b"\x00":   # UTF-16LE without its mark
            return data.decode("utf-16-le")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:    # also UTF-16 cut at an odd byte, or a lone surrogate
        raise CdmError(f"not text (UTF-8 or UTF-16): byte {exc.start}: {exc.reason}") from None


# --- input bounds and value ranges (what the reading above may be handed) ---------------------------

MAX_COUNT = 1_000_000     # a queue depth, thread count or block size: CrystalDiskMark's are at most 8 MiB, Q512, T64


def check_size(text: str, max_lines: int) -> None:
    """Before parsing: a result has under 100 lines; each line costs the parser a few regular
    expressions, so a text of more than `max_lines` is refused unread."""
    if (lines := text.count("\n") + 1) > max_lines:
        raise CdmError(f"{lines} lines (at most {max_lines}: a CrystalDiskMark result has under 100; "
                       f"--max-lines raises it)")


def _float(text: str, where: str) -> float:
    """A figure as printed: a finite number (the format prints no sign; 400 digits read as infinity)."""
    try:
        value = float(text)
    except ValueError:
        raise CdmError(f"{where}: {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise CdmError(f"{where}: {text[:40]!r}... is not a finite number")
    return value


def _count(text: str, where: str) -> int:
    """A queue depth, thread count or block size as printed: a whole number from 1 to MAX_COUNT."""
    if len(text) > len(str(MAX_COUNT)) or not 1 <= int(text) <= MAX_COUNT:
        raise CdmError(f"{where}: {text[:20]!r} is not a queue depth, thread count or block size (1 to {MAX_COUNT})")
    return int(text)


def parse(text: str) -> Parsed:
    """Every test line of a CrystalDiskMark 5-8 result; anything malformed raises CdmError naming the
    line: a test line that does not parse (junk before or after its figures), any other text among
    the test lines, a file cut before the `Test:` footer that follows the last test."""
    version = ""
    tests: list[CdmTest] = []
    parsed = Parsed("", tests)
    direction = ""
    style = ""
    # The test block runs from the first section heading or test line to the footer (`Profile:`,
    # `Test:`); inside it, a line that is neither is text someone added or a line cut apart.
    block = footer = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        where = f"line {number}"
        if m := _BANNER.search(line):
            version = f"{m['version']}.{m['minor']}.{m['patch']}"
            if m["version"] not in VERSIONS:
                raise CdmError(f"{where}: CrystalDiskMark {version} (this reads versions 5 to 8)")
            continue
        stripped = line.strip()
        if stripped in ("[Read]", "[Write]"):
            direction, block = stripped[1:-1].lower(), True
            continue
        if m := _MIX.match(stripped):
            direction, parsed.mix_ratio, block = "mix", m["ratio"].strip(), True
            continue
        if m := _V78.match(line):
            if not direction:
                raise CdmError(f"{where}: a test line outside a [Read]/[Write] section")
            style = style or ("8" if m["kind"] in ("SEQ", "RND") else "7")
            tests.append(_v78_test(m, where, direction))
            block = True
            continue
        if m := _V56.match(line):
            style = style or "5"
            tests.append(_v56_test(m, where))
            block = True
            continue
        block, footer = _other_line(line, where, block, footer)
        _footer(line, parsed)
    if not tests:
        raise CdmError("no CrystalDiskMark test line (e.g. `  SEQ    1MiB (Q=  8, T= 1): ... MB/s`, "
                       "`   Sequential Read (Q= 32,T= 1) : ... MB/s`)")
    if not footer:
        raise CdmError(f"no `Test:` line after the {len(tests)} test line(s): the file is truncated "
                       f"(CrystalDiskMark writes it after the last test)")
    parsed.version = _version(version, style, tests)
    _check_each_once(tests)
    return parsed


def _other_line(line: str, where: str, block: bool, footer: bool) -> tuple[bool, bool]:
    """A line that is no test line nor section heading: refused when it looks like a test line cut or
    altered, or stands among the test lines; returns whether the test block and the footer go on."""
    stripped = line.strip()
    if _LOOKS_LIKE_TEST.search(line):
        raise CdmError(f"{where}: a test line that cannot be read (truncated or altered?): {stripped[:80]!r}")
    if _FOOTER.match(line):
        return False, True
    if block and stripped:
        raise CdmError(f"{where}: text among the test lines that is no test line (added or altered?): "
                       f"{stripped[:80]!r}")
    return block, footer


def _check_each_once(tests: list[CdmTest]) -> None:
    """One result per test in a file."""
    seen: set[str] = set()
    for t in tests:
        if t.workload in seen:
            raise CdmError(f"test {t.workload} appears twice: one result per file")
        seen.add(t.workload)


def _v78_test(m: re.Match[str], where: str, direction: str) -> CdmTest:
    """A 7.x/8.x test line (`  SEQ    1MiB (Q=  8, T= 1):  ... MB/s [ ... IOPS] < ... us>`)."""
    kind = "SEQ" if m["kind"] in ("SEQ", "Sequential") else "RND"
    kib = _count(m["size"], where) * (1024 if m["unit"] == "MiB" else 1)
    return CdmTest(kind, kib, _count(m["q"], where), _count(m["t"], where), direction, _float(m[6], where),
                   _float(m[7], where), _float(m[8], where))


def _v56_test(m: re.Match[str], where: str) -> CdmTest:
    """A 5.x/6.x test line (`   Sequential Read (Q= 32,T= 1) :   ... MB/s`), its block size as the version implied."""
    kind = "SEQ" if m["kind"] == "Sequential" else "RND"
    queues = _count(m["q"], where) if m["q"] else 1
    if kind == "SEQ":
        kib = 128 if m["q"] else 1024   # 5.x/6.x: Seq Q32T1 uses 128 KiB blocks, Seq (T= 1) 1 MiB
    else:
        kib = _count(m["size"] or "4", where)
    iops = _float(m[7], where) if m[7] else None
    return CdmTest(kind, kib, queues, _count(m["t"], where), m["dir"].lower(), _float(m[6], where), iops, None)


def _version(banner: str, style: str, tests: list[CdmTest]) -> str:
    """The banner's version, else the one the test lines' style tells; a banner that disagrees with
    the lines is refused."""
    if style == "5" and banner and banner[0] not in ("5", "6"):
        raise CdmError(f"CrystalDiskMark {banner} with 5.x/6.x test lines: the file is not one program's output")
    if banner:
        return banner
    if style == "5" and any((t.kind, t.block_kib, t.queues, t.threads) == ("RND", 4, 8, 8) for t in tests):
        return "6"      # 6.x's Q8T8 random test
    return "8" if style == "8" else "7" if style == "7" else "5"


def _footer(line: str, parsed: Parsed) -> None:
    if m := _TEST_V56.match(line) or _TEST_V78.match(line):
        parsed.test_size, parsed.passes = f"{m['size']} {m['unit']}", m["passes"]
        parsed.interval_seconds = m["interval"] or parsed.interval_seconds
    elif m := _TIME_V8.match(line):
        parsed.measure_seconds, parsed.interval_seconds = m["measure"], m["interval"]
    elif m := _DATE.match(line):
        parsed.date = m["date"]
    elif line.startswith("Profile:"):
        parsed.profile = line.split(":", 1)[1].strip()
    else:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("OS", "Comment", "Mode"):
            parsed.other[key.strip()] = value.strip()
