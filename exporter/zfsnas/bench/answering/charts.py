"""The report's charts (matplotlib, the optional `report` extra), PNG and SVG, one per matrix and
question, titled with matrix and pool, a fixed colour per compression in every chart:

- `throughput`: grouped bars of throughput per compression, grouped by recordsize or volblocksize
  (one workload: the posts' shape);
- `workloads`: one panel per workload (CrystalDiskMark's tests), throughput against the matrix's
  first axis (volblocksize, recordsize, compression, ...), a bar per setting of the other axes,
  each panel on its own scale so a collapse from 88.9 to 6.0 MB/s is seen beside a flat 118;
- `space`: the on-disk size of each configuration against its baseline (the first configuration, or
  `report --baseline`'s twin), so that 475 and 502 GiB do not look alike, labelled with the size and
  % of uncompressed;
- `write-size`: throughput against total write size, zfs_dirty_data_max marked;
- `cpu`: CPU user/system % stacked per configuration;
- `pareto`: throughput against on-disk share, the Pareto front drawn and the pick labelled.
A value label sits above its error bar, never crossed by it. Nothing leaves the canvas: titles are
wrapped to the figure's width, a legend below the panels takes as many columns as fit and the
room it needs, and every series (every bar colour) has a legend entry, drawn from explicit handles.
Values along an axis are in their natural order (4K < 8K < 16K < 128K < 1M).

Owns drawing only (figures come from report.py, the front and pick from recommend.py). Without
matplotlib every entry point raises `ChartsUnavailable` with the one line to run.
"""

from __future__ import annotations

import io
import textwrap
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .axes import Selector, natural, workload_text
from .recommend import Candidate, candidates, pareto_front, recommend
from .report import DIMENSIONS, GIB, SIZE_KEYS, Section, Summary
from .tables import baseline_of, difference_unit, size_unit

INSTALL = "charts need matplotlib: pip install 'zfsnas[report]'"
COLOURS = {"off": "#8c8c8c", "lz4": "#1f77b4", "lzjb": "#e377c2", "zle": "#c7c7c7", "zstd-fast": "#17becf",
           "zstd-1": "#2ca02c", "zstd-2": "#5fb946", "zstd-3": "#98b825", "zstd-5": "#d8b016", "zstd-7": "#ff7f0e",
           "zstd-9": "#f0560f", "zstd-12": "#e8381c", "zstd-15": "#d62728", "zstd-19": "#9467bd",
           "gzip-1": "#c49c94", "gzip-6": "#a9776d", "gzip-9": "#8c564b"}
_SPARE = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354")
# Series of the `workloads` panels (settings of the other axes): tab10, then tab20's light halves.
SERIES = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
          "#64b5cd", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d")
CPU_COLOURS = {"user": "#4c72b0", "system": "#dd8452"}
DPI = 100


class ChartsUnavailable(RuntimeError):
    pass


def colour(compression: str) -> str:
    """The compression's colour, the same in every chart and report (unknown ones by a stable hash)."""
    return COLOURS.get(compression) or _SPARE[zlib.crc32(compression.encode()) % len(_SPARE)]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ChartsUnavailable(INSTALL) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.titleweight": "bold", "axes.spines.top": False,
                         "axes.spines.right": False, "svg.fonttype": "none", "svg.hashsalt": "zfsnas"})
    return plt


def available() -> bool:
    try:
        _pyplot()
    except ChartsUnavailable:
        return False
    return True


def _title(section: Section, question: str) -> str:
    return f"{section.title}: {question}"


MARGIN = 6.0       # pixels kept free at the canvas's edges


def _wrap_to(fig: Any, artist: Any, width: float) -> None:
    """Wrap a title's text until it is at most `width` pixels wide."""
    renderer = fig.canvas.get_renderer()
    text = " ".join(artist.get_text().split())
    chars = len(text)
    while chars > 12:
        artist.set_text(textwrap.fill(text, chars))
        if artist.get_window_extent(renderer).width <= width:
            return
        chars = int(chars * 0.9)


def _bottom_legend(fig: Any, handles: list[Any], labels: list[str], title: str | None) -> Any:
    """A legend below the panels with as many columns as fit the figure's width."""
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width - 2 * MARGIN
    for ncol in range(min(len(labels), 6), 0, -1):
        legend = fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=ncol, frameon=False,
                            fontsize=8, title=title, title_fontsize=8)
        if legend.get_window_extent(renderer).width <= width or ncol == 1:
            return legend
        legend.remove()
    return None


def _finish(fig: Any, legend: Any = None) -> None:
    """Lay the figure out so that nothing leaves the canvas: titles wrapped to its width, the panels
    above a bottom legend (room measured, not guessed)."""
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width - 2 * MARGIN
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None:
        _wrap_to(fig, suptitle, width)
    for ax in fig.axes:
        if ax.get_title():
            _wrap_to(fig, ax.title, width * (0.9 if len(fig.axes) == 1 else 1.0 / max(1, _columns(fig))))
    bottom = 0.0
    if legend is not None:
        bottom = (legend.get_window_extent(renderer).height + MARGIN) / fig.bbox.height
    if suptitle is not None:
        suptitle.set_y(1.0 - MARGIN / fig.bbox.height)
        suptitle.set_va("top")
    fig.tight_layout(rect=(0, bottom, 1, 1))     # it makes room for the suptitle itself


def _columns(fig: Any) -> int:
    spec = fig.axes[0].get_subplotspec() if fig.axes else None
    return spec.get_gridspec().ncols if spec is not None else 1


def _errorbar(ax: Any, x: float, s: Summary, scale: float, figure: str = "throughput") -> float:
    """The repeats' range as an error bar; returns the top of what is drawn (for the value label)."""
    stat = s.get(figure)
    if stat is None:
        return 0.0
    if stat.n > 1 and stat.high > stat.low:
        ax.errorbar(x, stat.median * scale, yerr=[[(stat.median - stat.low) * scale], [(stat.high - stat.median) * scale]],
                    fmt="none", ecolor="#333333", capsize=3, linewidth=1)
    return stat.high * scale


def _top(s: Summary) -> float:
    tp = s.get("throughput")
    return 0.0 if tp is None else tp.high / 1e6


def _comparable(section: Section, figure: str = "throughput") -> list[Summary]:
    """The largest group of configurations that differ only in compression and block size."""
    groups = [g for g in section.groups(DIMENSIONS) if any(s.get(figure) for s in g)]
    return max(groups, key=len) if groups else []


def throughput_chart(section: Section, plt: Any) -> Any:
    if len(section.workloads) > 1:      # several workloads: the `workloads` panels answer
        return None
    group = [s for s in _comparable(section) if s.get("throughput")]
    if len(group) < 2:
        return None
    sizes = list(natural(s.recordsize for s in group))
    fig, ax = plt.subplots(figsize=(9, 5))
    width, x0, ticks = 0.8, 0.0, []
    for rs in sizes:
        members = [s for s in group if s.recordsize == rs]
        bar = width / max(len(members), 1)
        start = x0 - width / 2 + bar / 2
        for i, s in enumerate(members):
            x, value = start + i * bar, s.median("throughput") / 1e6  # type: ignore[operator]
            ax.bar(x, value, bar * 0.92, color=colour(s.compression))
            top = _errorbar(ax, x, s, 1e-6)
            ax.annotate(f"{value:.1f}", (x, top), xytext=(0, 3), textcoords="offset points", ha="center",
                        va="bottom", fontsize=8 if len(members) > 4 else 9)
        ticks.append(x0)
        x0 += 1.0
    block = group[0].block_property
    ax.set_xticks(ticks, [f"{block} {rs}" if rs else "" for rs in sizes])
    ax.set_ylabel("throughput (MB/s = 10^6 bytes/s)")
    ax.set_ylim(0, max(_top(s) for s in group) * 1.15)
    ax.set_title(_title(section, f"throughput by compression and {block}"))
    _compression_legend(ax, [s.compression for s in group])
    ax.grid(axis="y", alpha=0.3)
    _finish(fig)
    return fig


def _compression_legend(ax: Any, compressions: list[str]) -> None:
    """One entry per compression (its colour), right of the axes."""
    from matplotlib.patches import Patch

    names = list(dict.fromkeys(compressions))
    ax.legend([Patch(color=colour(c)) for c in names], names, title="compression", frameon=False, loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=9, title_fontsize=9)


def _bar_labels(section: Section, group: list[Summary]) -> list[str]:
    """What tells each configuration apart: its values of the axes that vary among `group`."""
    names = [a.name for a in section.axes if len({a.value(s.config) for s in group}) > 1]
    workloads = len({s.workload for s in group}) > 1
    labels = [", ".join([workload_text(s.workload)] * workloads + [a.value(s.config) for a in section.axes
                                                                    if a.name in names]) for s in group]
    if len(set(labels)) < len(labels) or not all(labels):
        labels = [s.label for s in group]
    return labels


def _panel_axis(section: Section) -> Any:
    preferred = ("volblocksize", "recordsize", "compression")
    return next((a for name in preferred for a in section.axes if a.name == name), section.axes[0])


@dataclass(frozen=True)
class _Series:
    """The bars of a panel chart: the other axes' values of each configuration (a series) and its colour."""
    others: list[Any]
    palette: dict[str, str]

    def of(self, s: Summary) -> str:
        return ", ".join(a.value(s.config) for a in self.others)


def _panel(ax: Any, section: Section, axis: Any, workload: str, series: _Series, figure: str, scale: float,
           lower: str) -> None:
    """One workload's bars: `figure` x `scale` at each value of `axis`, a bar per series."""
    width = 0.8 / max(len(series.palette), 1)
    top = 0.0
    for j, name in enumerate(series.palette):
        for i, value in enumerate(axis.values):
            s = next((m for m in section.summaries if m.workload == workload and axis.value(m.config) == value
                      and series.of(m) == name), None)
            if s is None or s.median(figure) is None:
                continue
            x = i - 0.4 + width * (j + 0.5)
            height = (s.median(figure) or 0.0) * scale
            ax.bar(x, height, width * 0.9, color=series.palette[name])
            if lower and s.median(lower) is not None:
                ax.bar(x, (s.median(lower) or 0.0) * scale, width * 0.9, color=series.palette[name], hatch="////",
                       edgecolor="white", linewidth=0)
            high = max(_errorbar(ax, x, s, scale, figure), height)
            top = max(top, high)
            if len(series.palette) <= 2:
                ax.annotate(f"{height:.1f}", (x, high), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7)
    ax.set_title(workload_text(workload), fontsize=10)
    ax.set_xticks(range(len(axis.values)), axis.values, fontsize=8)
    if len(axis.values) * max(len(v) for v in axis.values) > 28:
        ax.tick_params(axis="x", labelrotation=25)
        for label in ax.get_xticklabels():
            label.set_ha("right")
    ax.set_ylim(0, top * 1.22 if top else 1)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3)


def _panels(section: Section, plt: Any, figure: str, scale: float, ylabel: str, question: str,
            lower: str = "") -> Any:
    """A panel per workload: `figure` (x `scale`) against the section's first axis, a bar per setting of
    the other axes, each panel on its own scale; `lower` (a figure drawn as the bar's hatched lower
    part: CPU user time under user+system). None when no workload has two values of the axis."""
    from matplotlib.patches import Patch

    axis = _panel_axis(section)
    others = [a for a in section.axes if a is not axis]
    workloads = [w for w in section.workloads
                 if len({axis.value(s.config) for s in section.summaries if s.workload == w and s.get(figure)}) > 1]
    if not workloads:
        return None
    names = _Series(others, {})
    measured = [s for s in section.summaries if s.workload in workloads and s.get(figure)]
    # series in the natural order of the other axes' values (16G before 64G), not as the runs came
    ordered = sorted(measured, key=lambda s: tuple(a.values.index(a.value(s.config)) for a in others))
    series = list(dict.fromkeys(names.of(s) for s in ordered))
    bars = _Series(others, {name: SERIES[i % len(SERIES)] for i, name in enumerate(series)})
    shown = workloads[:12]
    cols = min(4, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axs = plt.subplots(rows, cols, figsize=(9.0, 2.7 * rows + 1.6), squeeze=False)
    for index, workload in enumerate(shown):
        ax = axs[index // cols][index % cols]
        _panel(ax, section, axis, workload, bars, figure, scale, lower)
        if index % cols == 0:
            ax.set_ylabel(ylabel, fontsize=9)
        if index // cols == rows - 1 or index + cols >= len(shown):
            ax.set_xlabel(axis.name, fontsize=9)
    for index in range(len(shown), rows * cols):
        axs[index // cols][index % cols].axis("off")
    fig.suptitle(_title(section, f"{question} by {axis.name}, one panel per workload (own scale each)"),
                 fontsize=12, fontweight="bold")
    handles = [Patch(color=bars.palette[name]) for name in series] if others else []
    labels = list(series) if others else []
    if lower:
        handles.append(Patch(facecolor="#bbbbbb", hatch="////", edgecolor="white"))
        labels.append("hatched: user time, the rest: system")
    legend = _bottom_legend(fig, handles, labels, ", ".join(a.name for a in others) or None) if labels else None
    _finish(fig, legend)
    return fig


def workloads_chart(section: Section, plt: Any) -> Any:
    """Throughput, a panel per workload (CrystalDiskMark's tests, write and read)."""
    if len(section.workloads) < 2 or not section.axes:
        return None
    return _panels(section, plt, "throughput", 1e-6, "MB/s", "throughput")


def space_chart(section: Section, plt: Any, baseline: Selector | None = None) -> Any:
    """Each configuration's on-disk size minus its baseline's (the first configuration with a size, or
    its twin at `baseline`), bars from zero: the differences are what the chart shows, at any size."""
    group = [s for s in section.summaries if s.get("used")]
    if len(group) < 2:
        return None
    if section.axes and (len({s.workload for s in group}) > 1 or len(group) > 12):
        # too many bars to label one by one: the sizes themselves, a panel per workload
        name, unit = size_unit(s.median("used") for s in group)
        return _panels(section, plt, "used", 1 / unit, f"on disk ({name})", "on-disk size")
    bases = [baseline_of(section, s, baseline) for s in group]
    pairs = [(s, b) for s, b in zip(group, bases) if b is not None]
    if len(pairs) < 2:
        return None
    used = [s.median("used") or 0.0 for s, _b in pairs]
    deltas = [u - (b.median("used") or 0.0) for u, (_s, b) in zip(used, pairs)]
    name, unit = difference_unit(deltas)
    if not any(deltas):
        name, unit = size_unit(used)
    fig, ax = plt.subplots(figsize=(9, 5))
    xs = list(range(len(pairs)))
    values = [d / unit for d in deltas]
    ax.bar(xs, values, 0.7, color=[colour(s.compression) for s, _b in pairs])
    abs_name, abs_unit = size_unit(used)
    span = (max(values) - min(values)) or 1.0
    for x, (s, _b), v, u in zip(xs, pairs, values, used):
        pct = section.percent_of_uncompressed(s)
        digits = section.percent_digits(s)
        text = f"{v:+.1f} {name}\n{u / abs_unit:.1f} {abs_name}" + (f"\n{pct:.{digits}f} %" if pct is not None else "")
        ax.annotate(text, (x, v), xytext=(0, 3 if v >= 0 else -3), textcoords="offset points", ha="center",
                    va="bottom" if v >= 0 else "top", fontsize=8)
    ax.axhline(0, color="#333333", linewidth=0.8)
    labels = _bar_labels(section, [s for s, _b in pairs])
    ax.set_xticks(xs, labels, rotation=0 if len(pairs) <= 6 else 30, ha="center" if len(pairs) <= 6 else "right")
    ax.set_ylabel(f"on disk minus baseline ({name})")
    ax.set_ylim(min(0.0, min(values)) - span * 0.35, max(0.0, max(values)) + span * 0.35)
    base_text = "% of uncompressed (off = 100 %)" if any(section.uncompressed_used(s) for s, _b in pairs) \
        else "% of logical size"
    against = ("; ".join(f"{k}={v}" for k, v in baseline) + " (each against its twin)") if baseline else labels[0]
    ax.set_title(_title(section, f"space on disk against {against}"))
    ax.set_xlabel(f"bar labels: difference, on-disk size, {base_text}", fontsize=9, color="#555555")
    _compression_legend(ax, [s.compression for s, _b in pairs])
    ax.grid(axis="y", alpha=0.3)
    _finish(fig)
    return fig


def write_size_chart(section: Section, plt: Any) -> Any:
    groups = [g for g in section.groups(SIZE_KEYS) if len({s.total_bytes for s in g}) > 1]
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(9, 5))
    top = 0.0
    dirty_marked: set[int] = set()
    for group in groups:
        points = sorted((s.total_bytes / GIB, s.median("throughput") / 1e6, s) for s in group  # type: ignore[operator]
                        if s.total_bytes and s.get("throughput"))
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        c = colour(group[0].compression)
        ax.plot(xs, ys, marker="o", color=c, linewidth=2, label=group[0].label)
        for x, y, _s in points:
            ax.annotate(f"{y:.0f}", (x, y), xytext=(5, 5), textcoords="offset points", ha="left", fontsize=8.5)
        top = max(top, *ys)
        dirty = group[0].dirty_data_max
        if dirty and dirty not in dirty_marked:
            dirty_marked.add(dirty)
            ax.axvline(dirty / GIB, color="#c0392b", linestyle="--", linewidth=1.2)
            ax.annotate(f"zfs_dirty_data_max\n{dirty / GIB:.1f} GiB", (dirty / GIB, 0.97), xycoords=("data", "axes fraction"),
                        xytext=(6, 0), textcoords="offset points", va="top", color="#c0392b", fontsize=9)
    ax.set_xlabel("total written (GiB)")
    ax.set_ylabel("throughput (MB/s = 10^6 bytes/s)")
    ax.set_xlim(left=0)
    ax.set_ylim(0, top * 1.15)
    ax.set_title(_title(section, "throughput by total write size"))
    ax.legend(frameon=False, loc="upper right")
    ax.grid(alpha=0.3)
    _finish(fig)
    return fig


def cpu_chart(section: Section, plt: Any) -> Any:
    """CPU user and system time: stacked per configuration, or as panels per workload when there are
    several workloads or more configurations than bars fit."""
    group = [s for s in section.summaries if s.get("cpu_user") and s.get("cpu_system")]
    if not group:
        return None
    if section.axes and (len({s.workload for s in group}) > 1 or len(group) > 12):
        return _panels(section, plt, "cpu", 100.0, "CPU % of all cores", "CPU user+system", lower="cpu_user")
    fig, ax = plt.subplots(figsize=(9, 5))
    xs = list(range(len(group)))
    user = [s.median("cpu_user") * 100 for s in group]  # type: ignore[operator]
    system = [s.median("cpu_system") * 100 for s in group]  # type: ignore[operator]
    ax.bar(xs, user, 0.65, color=CPU_COLOURS["user"], label="user")
    ax.bar(xs, system, 0.65, bottom=user, color=CPU_COLOURS["system"], label="system")
    for x, u, sy in zip(xs, user, system):
        ax.annotate(f"{u + sy:.1f} %", (x, u + sy), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=9)
    ax.set_xticks(xs, _bar_labels(section, group), rotation=0 if len(group) <= 6 else 30,
                  ha="center" if len(group) <= 6 else "right")
    for tick, summary in zip(ax.get_xticklabels(), group):
        tick.set_color(colour(summary.compression))
    ax.set_ylabel("CPU time, % of all cores")
    ax.set_ylim(0, max(u + sy for u, sy in zip(user, system)) * 1.2)
    ax.set_title(_title(section, "CPU user and system time per configuration"))
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    _finish(fig)
    return fig


def _spread(ys: list[float], gap: float) -> list[float]:
    """Label heights for points at `ys`, pushed apart to at least `gap` (data units), order kept."""
    order = sorted(range(len(ys)), key=ys.__getitem__)
    placed = list(ys)
    last = float("-inf")
    for i in order:
        placed[i] = max(ys[i], last + gap)
        last = placed[i]
    return placed


def pareto_chart(section: Section, plt: Any) -> Any:
    cands, _notes = candidates(section)
    sized = [c for c in cands if c.space is not None and c.throughput is not None]
    if len(sized) < 2:
        return None
    front = pareto_front(sized)
    pick = recommend(section).pick
    fig, ax = plt.subplots(figsize=(9, 5.5))
    xs = [c.space * 100 for c in sized]  # type: ignore[operator]
    ys = [c.mbs for c in sized]
    for c, x, y in zip(sized, xs, ys):
        hollow = bool(c.space_from)
        ax.scatter([x], [y], s=70, color="white" if hollow else colour(c.summary.compression),
                   edgecolors=colour(c.summary.compression), linewidths=2 if hollow else 0.8, zorder=3)
        _errorbar(ax, x, c.summary, 1e-6)
    ordered = sorted(front, key=lambda c: (c.space or 0.0, -c.mbs))
    ax.plot([c.space * 100 for c in ordered], [c.mbs for c in ordered], color="#444444",  # type: ignore[operator]
            linestyle="--", linewidth=1.2, zorder=2, label="Pareto front")
    span_y = (max(ys) - min(ys)) or max(ys)
    span_x = (max(xs) - min(xs)) or 1.0
    # Labels beside their points, left of the left half and right of the right half, pushed apart.
    middle = (min(xs) + max(xs)) / 2
    sides = {side: [i for i, x in enumerate(xs) if (x <= middle) == (side == "left")] for side in ("left", "right")}
    for side, members in sides.items():
        heights = _spread([ys[i] for i in members], span_y * 0.08)
        for i, ly in zip(members, heights):
            c = sized[i]
            text = c.label    # the pick is the star (legend): a longer label would leave the axes
            if c.space_from:
                text += f" (size of {c.space_from.rsplit(' / ', 1)[-1]})"
            dx = span_x * 0.09 * (-1 if side == "left" else 1)
            ax.annotate(text, (xs[i], ys[i]), xytext=(xs[i] + dx, ly), textcoords="data", va="center",
                        ha="right" if side == "left" else "left", fontsize=9,
                        fontweight="bold" if c in front else "normal", color="#222222",
                        arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.6})
    if pick is not None:
        ax.scatter([pick.space * 100], [pick.mbs], s=320, marker="*", color="#f1c40f", edgecolors="#333333",  # type: ignore[operator]
                   zorder=4, label="pick of `recommend`")
    if any(c.space_from for c in sized):
        ax.scatter([], [], s=70, color="white", edgecolors="#555555", linewidths=2,
                   label="on-disk size measured at another recordsize")
    ax.set_xlabel("on disk, % of the logical size (lower is better); bold: on the Pareto front")
    ax.set_ylabel("throughput (MB/s, higher is better)")
    ax.set_xlim(min(xs) - span_x * 0.6, max(xs) + span_x * 0.6)
    ax.set_ylim(min(ys) - span_y * 0.12, max(ys) + span_y * 0.35)
    ax.set_title(_title(section, "throughput vs space, Pareto front"))
    ax.legend(frameon=False, loc="lower right", fontsize=9)
    ax.grid(alpha=0.3)
    _finish(fig)
    return fig


CHARTS: dict[str, Callable[..., Any]] = {
    "throughput": throughput_chart, "workloads": workloads_chart, "space": space_chart,
    "write-size": write_size_chart, "cpu": cpu_chart, "pareto": pareto_chart,
}


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in text)


def render(section: Section, baseline: Selector | None = None) -> list[tuple[str, dict[str, bytes]]]:
    """[(chart name, {"png": bytes, "svg": bytes})] of every chart the section has data for; the
    space chart against `baseline` (report --baseline) when given."""
    plt = _pyplot()
    out = []
    for name, fig in figures(section, plt, baseline):
        images = {}
        for fmt in ("png", "svg"):
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=DPI, metadata={"Date": None} if fmt == "svg" else {"Software": None})
            images[fmt] = buf.getvalue()
        plt.close(fig)
        out.append((name, images))
    return out


def figures(section: Section, plt: Any | None = None, baseline: Selector | None = None) -> list[tuple[str, Any]]:
    """[(chart name, matplotlib figure)]: for callers that look inside (the caller closes them)."""
    plt = plt or _pyplot()
    out = []
    for name, draw in CHARTS.items():
        fig = draw(section, plt, baseline) if name == "space" else draw(section, plt)
        if fig is not None:
            out.append((name, fig))
    return out


def write(sections: list[Section], directory: Path, formats: tuple[str, ...], prefix: str = "bench",
          baseline: Selector | None = None) -> list[Path]:
    """Each chart of each section as <directory>/<prefix>-<matrix>-<chart>.<format>."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for section in sections:
        for name, images in render(section, baseline):
            for fmt in formats:
                path = directory / f"{prefix}-{_slug(section.matrix)}-{name}.{fmt}"
                path.write_bytes(images[fmt])
                paths.append(path)
    return paths


__all__ = ["INSTALL", "Candidate", "ChartsUnavailable", "available", "colour", "figures", "render", "write"]
