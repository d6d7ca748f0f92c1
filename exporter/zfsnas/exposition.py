"""Metric families as plain data (the collector contract), and a fast renderer of the Prometheus
text format (0.0.4).

The collector contract is this module's public collector API, and nothing else of it: `Family`
(name, help, type, label names and samples: what every collector returns, as an iterable), the
`Families` builder collectors fill sample by sample and return as it is, and the optional fast
paths a collector declares without writing any text itself: `Family.frozen` /
`Families.frozen` (render once in a refresh thread, copy the text on every scrape),
`frozen_within` (the same for a page built in chunks up to a size limit), `FieldLayout` with
`Families.add_fields` (a fixed field list read as numbers every scrape, laid out once) and
`RowTable` with `Families.add_rows` (one sample per row and column, a row's lines kept while its
values stay the same). How they keep their text is private here; the scrape hands whatever a
collector returned to `settle` and `render_pieces`. `ClientCollector` is the one adapter to
prometheus_client, for anyone who embeds our collectors in a prometheus_client registry: it gets
every family with its samples, built from kept text where only text was kept.

Owns how samples become text, and that the text always parses: metric and label names are
checked, values are numbers float64 can hold (or the format's +Inf/-Inf/NaN), label values are
valid UTF-8, escaped and at most MAX_LABEL_VALUE characters. A sample that cannot be written is
dropped alone and reported in a `RenderIssues` (the scrape loop counts it in
`zfs_exporter_samples_dropped_total`); whatever a source read, one bad field never costs its
family or the page. Kept text is made only where it is exactly what rendering the samples would
write; anything else goes through the renderer, which counts it. prometheus_client's generic
renderer costs several microseconds a sample; on a NAS with thousands of datasets that decides
whether a scrape takes tens or hundreds of milliseconds, so families built by collectors are
rendered here directly.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client.core import Metric

# prometheus_client is imported only where its objects are asked for: importing it loads
# http.server, ssl and email, about 10 MB the exporter itself does not need.

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


Sample = tuple[str, tuple[str, ...], float]  # (name suffix, label values, value)


class Family:
    """One metric family, the one type every collector returns (a `Families` builder holds them):
    `kind` is gauge, counter or histogram; `samples` are (name suffix, label values, value), the
    suffix "" for gauges and counters and `_bucket`/`_count`/`_sum` for histograms, whose bucket
    samples carry `le` as a last label value."""

    __slots__ = ("name", "documentation", "kind", "labelnames", "samples")

    def __init__(self, name: str, documentation: str, kind: str, labelnames: Iterable[str]):
        self.name = name
        self.documentation = documentation
        self.kind = kind
        self.labelnames = tuple(labelnames)
        self.samples: list[Sample] = []

    def frozen(self) -> Family:
        """The family as it is now, its text rendered once (in a refresh thread, not on the scrape
        path): every scrape then copies that text (60,000 dataset samples cost a string copy, not
        60,000 formattings) and counts again what rendering it had to drop or rewrite. Samples
        added to this family afterwards are not served."""
        return _frozen(self)


class Families:
    """The builder collectors fill: families in first-use order; iterating yields each `Family`, so
    a collector returns a `Families` as it is. Label names come from the first sample's dict.
    `add_fields` and `add_rows` take whole reads at once and keep their text laid out in the
    builder's page, where it stands; `extend` adds families already made (e.g. frozen ones)."""

    def __init__(self) -> None:
        # name -> its Family; a text part or an added family is its own key (page order is insertion order)
        self._families: dict[object, Family | _TextPart] = {}

    def family(self, kind: str, name: str, documentation: str, labelnames: Iterable[str]) -> Family:
        """The family itself, for hot loops that append (suffix, label values, value) samples directly."""
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = Family(name, documentation, kind, labelnames)
        return family  # type: ignore[return-value]  # a name's entry is always a Family

    def gauge(self, name: str, documentation: str, labels: dict[str, str], value: float) -> None:
        self.family("gauge", name, documentation, labels).samples.append(("", tuple(labels.values()), value))

    def counter(self, name: str, documentation: str, labels: dict[str, str], value: float) -> None:
        self.family("counter", name, documentation, labels).samples.append(("", tuple(labels.values()), value))

    def add(self, kind: str, name: str, documentation: str, labels: dict[str, str], value: float) -> None:
        (self.counter if kind == "counter" else self.gauge)(name, documentation, labels, value)

    def histogram(self, name: str, documentation: str, labels: dict[str, str],
                  buckets: Sequence[tuple[float, float]], total: float | None) -> None:
        """`buckets` are (upper bound, cumulative count), the last one +Inf; `total` None leaves out _sum."""
        samples = self.family("histogram", name, documentation, labels).samples
        values = tuple(labels.values())
        if buckets:
            bounds, counts = zip(*buckets)
            samples.extend(zip(repeat("_bucket"), _bucket_labels(values, bounds), counts))
        samples.append(("_count", values, buckets[-1][1] if buckets else 0))
        if total is not None:
            samples.append(("_sum", values, total))

    def add_fields(self, layout: FieldLayout, numbers: list[Any]) -> None:
        """One read of the layout's fields, `numbers` in its entry order (arc's 113 families from one
        arcstats read): the page's text is the layout's with the numbers filled in."""
        text = layout.text(numbers)
        if text is None:
            for family in layout.families_of(numbers):
                self.family(family.kind, family.name, family.documentation, family.labelnames).samples += family.samples
        else:
            part = _TextPart([text], layout.families_of, numbers)
            self._families[part] = part

    def add_rows(self, table: RowTable, rows: Sequence[tuple[tuple[str, ...], Any]]) -> None:
        """Rows of (label values, values) as the table's families, each row's lines kept by the
        table while its values stay the same."""
        part = table._part(rows)
        if part is None:
            table._add_samples(self, rows)
        else:
            self._families[part] = part

    def extend(self, families: Iterable[Family]) -> None:
        """Families already made, each kept as it is (a frozen one serves its text), after those so far."""
        for family in (families._families.values() if isinstance(families, Families) else families):
            self._families[family] = family

    def frozen(self) -> list[Family]:
        """Every family, frozen (`Family.frozen`)."""
        return [family.frozen() for family in self]

    def families(self) -> list[Family]:
        return list(self)

    def _parts(self) -> Iterable[Family | _TextPart]:
        return self._families.values()

    def __iter__(self) -> Iterator[Family]:
        for part in self._families.values():
            if type(part) is _TextPart:
                yield from part.families()
            else:
                yield part  # type: ignore[misc]


class Unrepresentable(ValueError):
    """A sample the text format cannot carry; `reason` is the `reason` label of the drop counter."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# The largest integer a float64 parser (Prometheus' strconv.ParseFloat) reads without ErrRange.
INT_LIMIT = int(sys.float_info.max)


def format_value(value: float) -> str:
    """The sample value as the text format spells it; raises Unrepresentable for anything else
    (a string, None, an integer beyond float64), so one bad value drops one sample, not the page."""
    kind = type(value)
    if kind is int:
        if -INT_LIMIT <= value <= INT_LIMIT:
            return str(value)  # exact, even above 2**53
        raise Unrepresentable("out_of_range")
    if kind is not float:
        if kind is bool:
            return "1" if value else "0"
        if isinstance(value, (str, bytes)) or value is None:
            raise Unrepresentable("not_a_number")
        try:
            value = float(value)
        except (TypeError, ValueError, OverflowError):
            raise Unrepresentable("not_a_number") from None
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(value)


@functools.lru_cache(maxsize=1024)  # histograms repeat the same few bounds every scrape
def format_le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(float(bound))


@functools.lru_cache(maxsize=1024)  # and the same label values: a pool's bucket label sets are built once
def _bucket_labels(values: tuple[str, ...], bounds: tuple[float, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple((*values, format_le(bound)) for bound in bounds)


# Label values longer than this are cut (a dataset name is at most 255 bytes, a by-id path about
# 100): one runaway line of command output must not become gigabytes of exposition text.
MAX_LABEL_VALUE = 1024
CUT_MARKER = "...[cut {digest}]"
# Stricter than the format's own rule: lower-case snake case without colons, so that a field
# name read from the kernel (`fooBar`, `a:b`) can never fail `promtool check metrics`' lint either.
# and at most 200 characters: a kernel field name is a few dozen.
_METRIC_NAME = re.compile(r"[a-z_][a-z0-9_]{0,199}")
_LABEL_NAME = re.compile(r"[a-z_][a-z0-9_]{0,199}")


class RenderIssues:
    """What rendering had to drop or rewrite, by (family name, reason), and one example of each."""

    __slots__ = ("dropped", "rewritten", "examples")

    def __init__(self) -> None:
        self.dropped: Counter[tuple[str, str]] = Counter()
        self.rewritten: Counter[tuple[str, str]] = Counter()
        self.examples: dict[tuple[str, str], str] = {}

    def drop(self, family: str, reason: str, example: str, count: int = 1) -> None:
        self.dropped[family, reason] += count
        self.examples.setdefault((family, reason), example[:200])

    def rewrite(self, family: str, reason: str, example: str) -> None:
        self.rewritten[family, reason] += 1
        self.examples.setdefault((family, reason), example[:200])

    def add(self, other: RenderIssues) -> None:
        self.dropped.update(other.dropped)
        self.rewritten.update(other.rewritten)
        for key, example in other.examples.items():
            self.examples.setdefault(key, example)

    def __bool__(self) -> bool:
        return bool(self.dropped or self.rewritten)


def valid_utf8(text: str) -> str:
    """`text` made encodable as UTF-8: bytes a file name smuggled in through surrogateescape come
    back as visible `\\xNN` escapes (so two such names stay distinct), other lone surrogates as U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _clean_label_value(value: Any, issues: list[str]) -> str:
    """A label value as valid, bounded UTF-8; what had to change is appended to `issues`."""
    if type(value) is not str:
        if not isinstance(value, (int, float, str)) or isinstance(value, bool):
            raise Unrepresentable("invalid_label_value")
        value = str(value)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = valid_utf8(value)
            issues.append("invalid_utf8")
    if len(value) > MAX_LABEL_VALUE:
        # The marker carries a digest of the whole value: two long names that share their first
        # kilobyte still make two series.
        import hashlib  # here, not at the top: it loads OpenSSL (3.8 MB of RSS) for a rare case

        digest = hashlib.blake2b(value.encode("utf-8", "backslashreplace"), digest_size=4).hexdigest()
        marker = CUT_MARKER.format(digest=digest)
        value = value[:MAX_LABEL_VALUE - len(marker)] + marker
        issues.append("too_long")
    return value


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _escape_help(text: str) -> str:
    if not text.isascii():
        text = valid_utf8(text)
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_labels(keys: tuple[str, ...], values: tuple[str, ...], issues: list[str] | None = None) -> str:
    """Label text (`{k="v",...}`); a value that is not short, valid UTF-8 text is fixed and noted in
    `issues`."""
    for value in values:
        if type(value) is not str or len(value) > MAX_LABEL_VALUE or not value.isascii():
            if issues is None:
                issues = []
            values = tuple(_clean_label_value(v, issues) for v in values)
            break
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in zip(keys, values)) + "}"


class _FamilyText:
    """What one family's rendering keeps between scrapes: its header (None when its names cannot be
    written, `reason` then says why) and, per name suffix, the text of each label set's line up to
    the value (`zfs_pool_state{pool="tank",state="ONLINE"} `)."""

    __slots__ = ("header", "reason", "lines")

    def __init__(self, name: str, documentation: str, kind: str, names: tuple[str, ...]) -> None:
        self.header: str | None = None
        self.reason = ""
        self.lines: dict[str, dict[tuple[str, ...], str]] = {}
        if not _METRIC_NAME.fullmatch(name):
            self.reason = "invalid_metric_name"
        elif not all(_LABEL_NAME.fullmatch(n) and not n.startswith("__") for n in names):
            self.reason = "invalid_label_name"
        else:
            self.header = f"# HELP {name} {_escape_help(documentation)}\n# TYPE {name} {kind}\n"


class _TextCache:
    """Families and their label sets repeat from scrape to scrape (the same arcstats fields, pools,
    buckets): their checked names, header and line prefixes are kept, keyed by everything the text
    depends on (a changed HELP is a new entry, never a stale one). Bounded in families, lines and
    characters so that hostile names cannot grow it without limit: when full it starts over."""

    MAX_FAMILIES = 20_000
    MAX_ENTRIES = 100_000
    MAX_CHARS = 8_000_000

    def __init__(self) -> None:
        self.families: dict[tuple[str, str, str, tuple[str, ...]], _FamilyText] = {}
        self.entries = 0
        self.chars = 0

    def family(self, family: Family) -> _FamilyText:
        key = (family.name, family.documentation, family.kind, family.labelnames)
        text = self.families.get(key)
        if text is None:
            if len(self.families) >= self.MAX_FAMILIES:
                self.clear()
            text = self.families[key] = _FamilyText(*key)
            self.chars += len(text.header or "")
        return text

    def keep(self, lines: dict[tuple[str, ...], str], values: tuple[str, ...], line: str) -> None:
        if self.entries >= self.MAX_ENTRIES or self.chars + len(line) > self.MAX_CHARS:
            self.clear()
        lines[values] = line
        self.entries += 1
        self.chars += len(line)

    def clear(self) -> None:
        for text in self.families.values():
            for lines in text.lines.values():
                lines.clear()  # also those of the family being rendered, which fills them again
        self.families.clear()
        self.entries = self.chars = 0


_TEXT = _TextCache()


def render_family(family: Family, out: list[str], problems: RenderIssues | None = None,
                  cache: _TextCache | None = _TEXT) -> None:
    """Append the family's text to `out`. A sample whose value or labels cannot be written is left
    out and noted in `problems` (its family's other samples are not affected); `cache` keeps the
    family's header and line prefixes for the next scrape (None: render without keeping anything)."""
    if cache is None:
        text = _FamilyText(family.name, family.documentation, family.kind, family.labelnames)
    else:
        text = (cache.families.get((family.name, family.documentation, family.kind, family.labelnames))
                or cache.family(family))
    if text.header is None:
        if family.samples:
            name = family.name
            (RenderIssues() if problems is None else problems).drop(valid_utf8(name), text.reason, f"{name} {family.labelnames}",
                                              len(family.samples))
        return
    append = out.append
    append(text.header)
    lines_of = text.lines
    suffix_seen: str | None = None
    lines: dict[tuple[str, ...], str] = {}
    for suffix, values, value in family.samples:
        if suffix != suffix_seen:
            suffix_seen = suffix
            lines = lines_of.get(suffix) or lines_of.setdefault(suffix, {})
        # The common case, a label set seen before and a plain number, in line; the rest below.
        line = lines.get(values)
        if line is not None:
            kind = type(value)
            if kind is int and -INT_LIMIT <= value <= INT_LIMIT:
                append(f"{line}{value}\n")
                continue
            if kind is float:
                append(f"{line}{format_value(value)}\n")
                continue
        if problems is None:
            problems = RenderIssues()
        line = _sample_line(family, suffix, values, value, lines, cache, problems)
        if line is not None:
            append(line)


def _sample_line(family: Family, suffix: str, values: tuple[str, ...], value: float,
                 lines: dict[tuple[str, ...], str], cache: _TextCache | None, problems: RenderIssues) -> str | None:
    """One sample's line, its label text kept in `lines` when it needed no rewriting; None when it
    cannot be written (noted in `problems`)."""
    name = family.name
    issues: list[str] = []
    try:
        value_text = format_value(value)
        line = lines.get(values)
        if line is None:
            names = (*family.labelnames, "le") if suffix == "_bucket" else family.labelnames
            labels = format_labels(names, values, issues) if values else ""
            line = f"{name}{suffix}{labels} "
            if not issues and cache is not None:  # a rewritten set is not kept: it is counted on every render
                cache.keep(lines, values, line)
    except Unrepresentable as exc:
        problems.drop(name, exc.reason, f"{name}{suffix} {values!r:.150} {value!r:.50}")
        return None
    for reason in issues:
        problems.rewrite(name, reason, f"{name}{suffix} {values!r:.150}")
    return f"{line}{value_text}\n"


class _Frozen(Family):
    """A family whose text is kept (`Family.frozen`, `frozen_within`): every render copies `text`
    and counts again what making it had to drop or rewrite (`problems`). Its samples are the ones
    it was rendered from or, when only the text was kept (a family back from a parse child,
    families merged within a page limit), parsed back from the text when something asks for them
    (prometheus_client, tests). Pickled as its text alone: 60,000 sample tuples would cost a parse
    child's pipe and the exporter's memory."""

    __slots__ = ("text", "problems", "_samples")

    def __init__(self, name: str, documentation: str, kind: str, labelnames: tuple[str, ...], text: str,
                 problems: RenderIssues | None, samples: list[Sample] | None = None):
        # The slots are set directly: Family.__init__ would make a samples list only to drop it.
        self.name, self.documentation, self.kind, self.labelnames = name, documentation, kind, labelnames
        self.text = text
        self.problems = problems
        self._samples = samples

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            self._samples = samples_of_text((self.name, self.labelnames, self.text))
        return self._samples

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self._samples = samples

    def frozen(self) -> Family:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return _Frozen, (self.name, self.documentation, self.kind, self.labelnames, self.text, self.problems)


def _frozen(family: Family) -> _Frozen:
    out: list[str] = []
    problems = RenderIssues()
    render_family(family, out, problems, cache=None)  # rendered once: no point keeping its texts
    return _Frozen(family.name, family.documentation, family.kind, family.labelnames, "".join(out), problems or None,
                   family.samples)


def frozen_within(chunks: Iterable[Iterable[Family]], max_chars: int) -> tuple[list[Family], int]:
    """The families of successive chunks (each a part of one page, e.g. 256 datasets' families),
    frozen and merged by family, until their text would pass `max_chars`: (the merged families, how
    many chunks they hold). The chunk that would pass the limit is the last one taken from `chunks`.
    Only the text is kept: samples are parsed back from it if something asks for them."""
    kept: dict[str, tuple[_Frozen, list[str], RenderIssues]] = {}
    total = taken = 0
    for chunk in chunks:
        built = [_frozen(family) for family in chunk]
        size = sum(len(family.text) for family in built)
        if total + size > max_chars:
            break
        total += size
        taken += 1
        for family in built:
            known = kept.get(family.name)
            if known is None:
                known = kept[family.name] = (family, [], RenderIssues())
                known[1].append(family.text)
            else:
                known[1].append(family.text[len(_header_text(*_spec(family)) or ""):])
            if family.problems:
                known[2].add(family.problems)
    return [_Frozen(*_spec(family), "".join(pieces), problems or None) for family, pieces, problems in kept.values()], taken


def _spec(family: Family) -> tuple[str, str, str, tuple[str, ...]]:
    return family.name, family.documentation, family.kind, family.labelnames


class _TextPart:
    """Families a `Families` holds as text alone (`add_fields`, `add_rows`), in its page position,
    exactly as `render_family` would write them: the page copies `pieces`; the families themselves
    are built (`build(arg)`) only when something iterates them (prometheus_client, tests)."""

    __slots__ = ("pieces", "_build", "_arg", "_families")

    def __init__(self, pieces: list[str], build: Callable[[Any], list[Family]], arg: Any):
        self.pieces = pieces
        self._build, self._arg = build, arg
        self._families: list[Family] | None = None

    def families(self) -> list[Family]:
        if self._families is None:
            self._families = self._build(self._arg)
        return self._families


Entry = tuple[tuple[str, str, str, tuple[str, ...]], tuple[str, ...], float]  # (family spec, label values, scale)


class FieldLayout:
    """A fixed list of fields, read as numbers in the same order on every read (a named kstat), for
    `Families.add_fields`. Each entry is a field's family (name, help, kind, label names), its label
    values and scale; entries naming one family are its samples, in entry order, and families come
    in first-use order. Laid out once as text, a hole for each value: the builder fills the holes
    where every value is an integer the format holds (always, from a kernel), else it adds plain
    samples. Make one per field list and keep it (e.g. `functools.lru_cache`): laying out costs."""

    __slots__ = ("families", "fields", "order", "template", "scaled", "text_ok")

    def __init__(self, entries: Iterable[Entry]):
        index: dict[str, int] = {}
        self.families: list[tuple[str, str, str, tuple[str, ...]]] = []
        self.fields: list[tuple[int, tuple[str, ...], float]] = []
        for spec, labels, scale in entries:
            if spec[0] not in index:
                index[spec[0]] = len(self.families)
                self.families.append(spec)
            self.fields.append((index[spec[0]], labels, scale))
        self.order = sorted(range(len(self.fields)), key=lambda i: (self.fields[i][0], i))
        headers = [_header_text(*family) for family in self.families]
        # False where render_family would drop or rewrite something (a name that makes no valid
        # metric or label name, a label value to fix): such a layout is always rendered the plain
        # way, which counts it.
        self.text_ok = None not in headers
        self.scaled = [(at, self.fields[i][2]) for at, i in enumerate(self.order) if self.fields[i][2] != 1]
        # The page with a hole for each value (odd positions: every field's line up to its value,
        # its family's HELP and TYPE lines before the first of its family).
        self.template: list[str] = []
        for at, i in enumerate(self.order):
            family, labels, _ = self.fields[i]
            name, _, _, names = self.families[family]
            first = at == 0 or self.fields[self.order[at - 1]][0] != family
            issues: list[str] = []
            try:
                label_text = format_labels(names, labels, issues) if labels else ""
            except Unrepresentable:
                label_text, issues = "", ["invalid_label_value"]
            if issues or len(labels) != len(names):
                self.text_ok = False
            end_of_last = "\n" if at else ""  # each line's end goes before the next one's start
            self.template += [f"{end_of_last}{headers[family] if first else ''}{name}{label_text} ", ""]
        self.template += ["\n"] if self.fields else []

    def families_of(self, numbers: Sequence[float]) -> list[Family]:
        """The families of one read as plain samples (`numbers` in entry order)."""
        families = [Family(*spec) for spec in self.families]
        for (at, labels, scale), value in zip(self.fields, numbers):
            families[at].samples.append(("", labels, value if scale == 1 else value * scale))
        return families

    def text(self, numbers: list[Any]) -> str | None:
        """One read's page (`numbers` in entry order), or None where only the renderer writes it exactly
        (a value it cannot write: the renderer drops and counts it)."""
        if not (self.text_ok and numbers and len(numbers) == len(self.fields)):
            return None
        ordered: list[Any] = [numbers[i] for i in self.order]
        try:
            if set(map(type, numbers)) == {int} and -INT_LIMIT <= min(numbers) and max(numbers) <= INT_LIMIT:
                for at, scale in self.scaled:  # a kernel's counters: integers, most of them as they are
                    ordered[at] = format_value(ordered[at] * scale)
                texts: Iterable[str] = map(str, ordered)
            else:  # other numbers (a process's CPU seconds): each as render_family writes it
                for at, scale in self.scaled:
                    ordered[at] = ordered[at] * scale
                texts = list(map(format_value, ordered))
        except (Unrepresentable, TypeError):
            return None
        page = self.template.copy()
        page[1::2] = texts
        return "".join(page)


Column = tuple[Any, str, str, str, float]  # (where a row holds the value, family name, help, kind, scale)


class _Row:
    """One row's lines (one per column), the columns and values they show, and its label text."""

    __slots__ = ("columns", "values", "labels", "lines")

    def __init__(self, columns: tuple[Column, ...], values: Any, labels: str, lines: tuple[str, ...]):
        self.columns, self.values, self.labels, self.lines = columns, values, labels, lines


class RowTable:
    """Families of one sample per row and column, for `Families.add_rows`: rows are (label values,
    values), `values[key]` being the row's value in the column `key` (a dict by field name, a
    tuple by position). `columns_of(values)` says which columns a row has, in page order, as one
    object per shape (keep them, e.g. `functools.lru_cache`): a column is (key, family name, help,
    kind, scale). A row's lines are kept while its values are the same object or equal (an idle
    dataset of thousands costs a lookup), its label text while the row lasts; only the last
    call's rows are kept, so keep one table per collector. Where the text could say something
    other than `render_family` would (rows of different columns, a label value to rewrite, a value
    or name that cannot be written) the rows become plain samples, which the renderer counts."""

    def __init__(self, labelnames: tuple[str, ...], columns_of: Callable[[Any], tuple[Column, ...]]):
        self.labelnames = labelnames
        self.columns_of = columns_of
        self._kept: dict[tuple[str, ...], _Row] = {}
        self._columns: tuple[Column, ...] = ()
        self._headers: list[str | None] = []

    def _part(self, rows: Sequence[tuple[tuple[str, ...], Any]]) -> _TextPart | None:
        """The rows as text, or None where `render_family` must write them (the kept lines then start over)."""
        kept, self._kept = self._kept, {}
        if not rows:
            return None
        columns = self.columns_of(rows[0][1])
        if columns is not self._columns:
            self._columns = columns
            self._headers = [_header_text(name, help_text, kind, self.labelnames) for _, name, help_text, kind, _ in columns]
        if None in self._headers:
            return None
        lines = []
        for labels, values in rows:
            last = kept.get(labels)
            if last is None or last.columns is not columns or (last.values is not values and last.values != values):
                last = self._lines(columns, labels, values, last)
                if last is None:
                    self._kept = {}
                    return None
            self._kept[labels] = last
            lines.append(last.lines)
        return _TextPart([f"{header}{''.join(column)}" for header, column in zip(self._headers, zip(*lines))],
                         self._families, rows)

    def _lines(self, columns: tuple[Column, ...], labels: tuple[str, ...], values: Any, last: _Row | None) -> _Row | None:
        """The row's lines, or None where `render_family` must write them."""
        if self.columns_of(values) is not columns or len(labels) != len(self.labelnames):
            return None
        if last is not None:
            text = last.labels
        else:
            issues: list[str] = []
            try:
                text = format_labels(self.labelnames, labels, issues)
            except Unrepresentable:
                return None
            if issues:  # rewritten label values are counted at every render: render_family does that
                return None
        lines = []
        try:
            for key, name, _, _, scale in columns:
                value = values[key] if scale == 1 else values[key] * scale
                if type(value) is int and -INT_LIMIT <= value <= INT_LIMIT:
                    lines.append(f"{name}{text} {value}\n")
                else:
                    lines.append(f"{name}{text} {format_value(value)}\n")
        except Unrepresentable:
            return None
        return _Row(columns, values, text, tuple(lines))

    def _add_samples(self, families: Families, rows: Sequence[tuple[tuple[str, ...], Any]]) -> None:
        """Each row's values as plain samples of their columns' families, in the order of the rows."""
        samples_of: dict[str, list[Sample]] = {}  # family name -> its sample list
        for labels, values in rows:
            for key, name, help_text, kind, scale in self.columns_of(values):
                samples = samples_of.get(name)
                if samples is None:
                    samples = samples_of[name] = families.family(kind, name, help_text, self.labelnames).samples
                samples.append(("", labels, values[key] if scale == 1 else values[key] * scale))

    def _families(self, rows: Sequence[tuple[tuple[str, ...], Any]]) -> list[Family]:
        families = Families()
        self._add_samples(families, rows)
        return families.families()


def _header_text(name: str, documentation: str, kind: str, labelnames: tuple[str, ...]) -> str | None:
    """The HELP and TYPE lines `render_family` writes for such a family; None when it would drop the
    family's samples (a metric or label name that cannot be written)."""
    return _FamilyText(name, documentation, kind, labelnames).header


def settle(returned: Iterable[Family]) -> Iterable[Family]:
    """A collector's return value as the scrape keeps it until the page is rendered: a `Families`
    as it is (it may hold text laid out for the page), anything else as a list (a generator runs
    now, within the collector's guard)."""
    return returned if isinstance(returned, Families) else list(returned)


def render(families: Iterable[Family], problems: RenderIssues | None = None) -> str:
    """Text exposition of families (a `Families` or any iterable of them); what had to be dropped
    or rewritten is added to `problems`."""
    out: list[str] = []
    render_pieces(families, out, problems)
    return "".join(out)


def render_pieces(families: Iterable[Family], out: list[str], problems: RenderIssues | None = None) -> None:
    """`render`, its pieces appended to `out` rather than joined: a frozen family's text (tens of MB
    on a NAS of thousands of datasets) is then sent as it is kept, never copied into a page."""
    if problems is None:
        problems = RenderIssues()
    items: Iterable[Family | _TextPart] = families._parts() if isinstance(families, Families) else families
    for item in items:
        if type(item) is _Frozen:
            out.append(item.text)
            if item.problems:
                problems.add(item.problems)
        elif type(item) is _TextPart:
            out += item.pieces  # exact text: nothing to count
        else:
            render_family(item, out, problems)  # type: ignore[arg-type]


def samples_of_text(spec: tuple[str, tuple[str, ...], str]) -> list[Sample]:
    """The samples of one family's text as `render_family` wrote it, `spec` being (family name,
    label names, text): for families kept only as text, when prometheus_client asks for samples."""
    from prometheus_client.parser import text_string_to_metric_families

    name, labelnames, text = spec
    out: list[Sample] = []
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            names = (*labelnames, "le") if "le" in sample.labels else labelnames
            out.append((sample.name[len(name):] if sample.name.startswith(name) else "",
                        tuple(sample.labels.get(n, "") for n in names), sample.value))
    return out


def client_metric(family: Family) -> Metric:
    """The family as a prometheus_client `Metric` (the generic, slower path)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

    if family.kind == "histogram":
        metric = Metric(family.name, family.documentation, "histogram")
        bucket_names = (*family.labelnames, "le")
        for suffix, values, value in family.samples:
            names = bucket_names if suffix == "_bucket" else family.labelnames
            metric.add_sample(family.name + suffix, dict(zip(names, values)), value)
        return metric
    # prometheus_client's own classes: its Metric would print a counter's name with `_total` twice
    cls = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
    typed = cls(family.name, family.documentation, labels=list(family.labelnames))
    for _, values, value in family.samples:
        typed.add_metric(list(values), value)
    return typed


class ClientCollector:
    """The adapter for embedding: families as a prometheus_client collector, e.g.
    `REGISTRY.register(ClientCollector(build_exporter(args).scrape.scrape))` serves our collectors
    (and their self metrics) from a Python program's own prometheus_client registry.
    `families` is called once per `collect()`. prometheus_client prints values as floats: integers
    beyond 2**53 (byte counters of a big pool) lose their last digits there, not in `render`."""

    def __init__(self, families: Callable[[], Iterable[Family]]):
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return (client_metric(family) for family in self._families())
