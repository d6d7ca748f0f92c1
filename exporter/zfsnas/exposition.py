"""Metric families as plain data, and a fast renderer of the Prometheus text format (0.0.4).

Owns how samples become text. prometheus_client's generic renderer costs several microseconds
a sample; on a NAS with thousands of datasets that decides whether a scrape takes tens or
hundreds of milliseconds, so families built by collectors are rendered here directly. The same
families convert to prometheus_client `Metric` objects for anything that wants those.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client.core import Metric

# prometheus_client is imported only where its objects are asked for: importing it loads
# http.server, ssl and email, about 10 MB the exporter itself does not need.

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Family:
    """One metric family: `samples` are (name suffix, label values, value); histograms add `le`."""

    __slots__ = ("name", "documentation", "kind", "labelnames", "samples")

    def __init__(self, name: str, documentation: str, kind: str, labelnames: Sequence[str]):
        self.name = name
        self.documentation = documentation
        self.kind = kind
        self.labelnames = tuple(labelnames)
        self.samples: list[tuple[str, tuple[str, ...], float]] = []

    def to_metric(self) -> "Metric":
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

        if self.kind == "histogram":
            metric = Metric(self.name, self.documentation, "histogram")
            bucket_names = (*self.labelnames, "le")
            for suffix, values, value in self.samples:
                names = bucket_names if suffix == "_bucket" else self.labelnames
                metric.add_sample(self.name + suffix, dict(zip(names, values)), value)
            return metric
        cls = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        metric = cls(self.name, self.documentation, labels=list(self.labelnames))
        for _, values, value in self.samples:
            metric.add_metric(list(values), value)
        return metric


def format_value(value: float) -> str:
    if isinstance(value, int):
        return str(value)  # exact, even above 2**53
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(value)


def format_le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(float(bound))


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


# Label sets repeat from scrape to scrape (the same pools, datasets, buckets): their text is kept.
_LABEL_TEXT: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
_LABEL_TEXT_MAX = 200_000


def _format_labels(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in zip(keys, values)) + "}"


def _labels(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    key = (keys, values)
    text = _LABEL_TEXT.get(key)
    if text is None:
        if len(_LABEL_TEXT) >= _LABEL_TEXT_MAX:
            _LABEL_TEXT.clear()
        text = _LABEL_TEXT[key] = _format_labels(keys, values)
    return text


def render_family(family: Family, out: list[str], labels_text=_labels) -> None:
    """`labels_text` formats a label set; the default keeps the text for the next scrape."""
    name = family.name
    out.append(f"# HELP {name} {_escape_help(family.documentation)}\n# TYPE {name} {family.kind}\n")
    names = family.labelnames
    bucket_names = (*names, "le")
    for suffix, values, value in family.samples:
        labels = labels_text(bucket_names if suffix == "_bucket" else names, values) if values else ""
        out.append(f"{name}{suffix}{labels} {format_value(value)}\n")


class FrozenFamily(Family):
    """A family whose samples no longer change (built by a background refresh): `freeze` renders its
    text once, outside the scrape path, and every scrape reuses it. 60,000 dataset samples then cost
    a string copy per scrape instead of 60,000 formattings."""

    __slots__ = ("text",)

    def __init__(self, name: str, documentation: str, kind: str, labelnames: Sequence[str]):
        super().__init__(name, documentation, kind, labelnames)
        self.text: str | None = None

    def freeze(self) -> "FrozenFamily":
        out: list[str] = []
        render_family(self, out, _format_labels)  # rendered once: no point keeping label texts
        self.text = "".join(out)
        return self


def render(items: Iterable[Any]) -> str:
    """Text exposition of families; foreign prometheus_client Metric objects take the generic path."""
    out: list[str] = []
    foreign: list = []
    for item in items:
        if isinstance(item, FrozenFamily) and item.text is not None:
            out.append(item.text)
        elif isinstance(item, Family):
            render_family(item, out)
        else:
            foreign.append(item)
    if foreign:
        from prometheus_client.exposition import generate_latest

        out.append(generate_latest(_Fixed(foreign)).decode())
    return "".join(out)


class _Fixed:
    def __init__(self, metrics: list):
        self.metrics = metrics

    def collect(self) -> list:
        return self.metrics
