"""Every chart type rendered from the seeds' figures (PNG decodes at its size, SVG parses and is
titled with matrix and pool, one colour per compression across charts); without matplotlib the
tables still work and --png/--svg say in one line what to install."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from zfsnas.bench.answering import charts
from zfsnas.bench.answering.report import sections
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

from .seeds import LOADERS, fits_config, seeded_store

PIL = pytest.importorskip("PIL.Image", reason="matplotlib (the `report` extra) brings Pillow")
ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("charts")
    store = seeded_store(out / "bench.sqlite")
    paths = charts.write(sections(store.results()), out, ("png", "svg"))
    store.close()
    return out, paths


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def pixels(path: Path) -> set[tuple[int, int, int]]:
    with PIL.open(path) as image:
        return {colour for _count, colour in image.convert("RGB").getcolors(maxcolors=1 << 24)}


def test_every_chart_type_is_rendered(rendered):
    _out, paths = rendered
    names = {p.name for p in paths}
    expected = {f"bench-{m}-{c}.{f}" for m, c in (("fits-copy", "throughput"), ("fits-copy", "space"),
                                                  ("fits-copy", "write-size"), ("fits-copy", "pareto"),
                                                  ("iso-rsync", "throughput"), ("iso-rsync", "space"),
                                                  ("iso-rsync", "pareto"), ("fio-seq", "cpu"), ("fio-seq", "pareto"))
                for f in ("png", "svg")}
    assert expected <= names
    # The CDM zvol runs have no compression or space sweep: no chart pretends otherwise.
    assert not any(n.startswith("bench-cdm-zvol-") for n in names)


@pytest.mark.parametrize(("name", "size"), [("fits-copy-throughput", (900, 500)), ("fits-copy-space", (900, 500)),
                                            ("fits-copy-write-size", (900, 500)), ("fio-seq-cpu", (900, 500)),
                                            ("fits-copy-pareto", (900, 550))])
def test_png_decodes_at_its_size_and_svg_is_titled(rendered, name, size):
    out, _ = rendered
    with PIL.open(out / f"bench-{name}.png") as image:
        image.load()
        assert (image.format, image.size) == ("PNG", size)
        colours = len(image.convert("RGB").getcolors(maxcolors=1 << 20) or [])
        assert colours > 50               # bars, text, anti-aliasing: not an empty canvas
    root = ET.parse(out / f"bench-{name}.svg").getroot()
    assert root.tag == f"{SVG}svg"
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    matrix, pool = ("fio-seq", "tank") if name.startswith("fio-seq") else ("fits-copy", "astro")
    assert f"{matrix} on {pool}: " in texts
    assert (out / f"bench-{name}.svg").stat().st_size < 60_000 and (out / f"bench-{name}.png").stat().st_size < 90_000


def test_each_compression_keeps_its_colour_across_charts(rendered):
    out, _ = rendered
    lz4, zstd1, gzip9 = rgb(charts.colour("lz4")), rgb(charts.colour("zstd-1")), rgb(charts.colour("gzip-9"))
    fits, iso = pixels(out / "bench-fits-copy-throughput.png"), pixels(out / "bench-iso-rsync-throughput.png")
    assert lz4 in fits and lz4 in iso
    assert zstd1 in fits and zstd1 not in iso        # the ISO post did not run zstd-1
    assert gzip9 in iso and gzip9 not in fits
    assert charts.colour("zstd-42") == charts.colour("zstd-42")   # unknown ones: stable


def test_write_size_chart_marks_dirty_data_max(rendered):
    out, _ = rendered
    root = ET.parse(out / "bench-fits-copy-write-size.svg").getroot()
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "zfs_dirty_data_max" in " ".join(t or "" for t in texts)
    assert "16.0 GiB" in " ".join(t or "" for t in texts)


def test_pareto_chart_labels_the_front_and_the_pick(rendered, tmp_path):
    out, _ = rendered
    texts = " ".join(t.text or "" for t in ET.parse(out / "bench-fits-copy-pareto.svg").getroot().iter(f"{SVG}text"))
    assert "zstd-1 / 512K" in texts and "Pareto front" in texts and "pick of `recommend`" in texts
    assert "(size of" not in texts          # the post published every size of its sweep: none is borrowed
    # A configuration without an on-disk size takes its compression's, hollow, and says whose.
    store = Store(tmp_path / "b.sqlite")
    store.start_matrix("r", "fits-copy", "astro/scratch", 3)
    for cell, (compression, recordsize, mbs, gib) in enumerate((("lz4", "1M", 138.0, 59.2), ("zstd-1", "1M", 175.0, 47.4),
                                                                 ("zstd-1", "512K", 190.6, None)), 1):
        store.record_result("r", cell, fits_config(compression, recordsize), figures=ResultFigures(
            throughput_bytes_per_second=mbs * 1e6, used_bytes=None if gib is None else int(gib * 2**30),
            compressratio=None if gib is None else {"lz4": 1.19, "zstd-1": 1.48}[compression]))
    charts.write(sections(store.results()), tmp_path, ("svg",))
    store.close()
    texts = " ".join(t.text or "" for t in ET.parse(tmp_path / "bench-fits-copy-pareto.svg").getroot().iter(f"{SVG}text"))
    assert "zstd-1 / 512K (size of 1M)" in texts and "on-disk size measured at another recordsize" in texts


HIDE = "import sys; sys.modules['matplotlib'] = None\n"


def without_matplotlib(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """zfsnas-bench in a Python where `import matplotlib` fails (sitecustomize hides it)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HIDE)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT / 'exporter'}"}
    code = "import sys; from zfsnas.bench.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def test_without_matplotlib_tables_work_and_charts_say_what_to_install(tmp_path):
    seeded_store(tmp_path / "b.sqlite", ("iso",)).close()
    db = ["--db", str(tmp_path / "b.sqlite")]
    tables = without_matplotlib(tmp_path, "report", *db)
    assert tables.returncode == 0, tables.stderr
    assert "| 483.6 | 502.4 | 96.3 |" in tables.stdout
    for flag in ("--png", "--svg"):
        result = without_matplotlib(tmp_path, "report", *db, flag, str(tmp_path / "charts"))
        assert result.returncode == 3
        assert result.stderr.splitlines() == ["charts need matplotlib: pip install 'zfsnas[report]'"]
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "charts").exists()
    page = without_matplotlib(tmp_path, "report", *db, "--format", "html")
    assert page.returncode == 0 and "pip install &#x27;zfsnas[report]&#x27;" in page.stdout
    assert "<img" not in page.stdout and "<td>96.3</td>" in page.stdout


def test_the_exporter_never_needs_matplotlib(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT / 'exporter'}"}
    code = ("import sys, zfsnas.cli, zfsnas.bench.cli, zfsnas.collectors.bench; "
            "assert sys.modules['matplotlib'] is None; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                            check=False)
    assert result.stdout == "ok\n", result.stderr
    extras = (ROOT / "pyproject.toml").read_text()
    assert 'report = ["matplotlib>=3.6"]' in extras and "matplotlib" not in extras.split("dependencies = [")[1].split("]")[0]


def test_docs_show_every_chart_type_rendered_from_the_seeds():
    from .seeds import DOC_CHARTS

    assert {name for _matrix, name in DOC_CHARTS} == set(charts.CHARTS)
    shown = re.findall(r"\]\((img/bench-[a-z0-9-]+\.png)\)", (ROOT / "docs" / "benchmarks.md").read_text())
    assert sorted(shown) == sorted(f"img/bench-{m}-{n}.png" for m, n in DOC_CHARTS)
    for rel in shown:
        with PIL.open(ROOT / "docs" / rel) as image:
            assert image.format == "PNG" and image.size[0] == 900
        svg = ET.parse(ROOT / "docs" / rel.replace(".png", ".svg")).getroot()
        assert svg.tag == f"{SVG}svg"
        assert (ROOT / "docs" / rel).stat().st_size < 90_000


# --- nothing leaves the canvas, every series has its legend entry (every chart of every seed shape) ---------

def _text_boxes(svg: Path):
    """(text, corners) of every <text> of an SVG written by matplotlib (svg.fonttype none): its anchor
    point, alignment, font size and weight, rotation, measured with the font's metrics."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    measure = TextToPath()
    root = ET.parse(svg).getroot()
    for element in root.iter(f"{SVG}text"):
        text = "".join(element.itertext())
        if not text.strip():
            continue
        style = dict(part.split(":", 1) for part in element.get("style", "").split(";") if ":" in part)
        style = {k.strip(): v.strip() for k, v in style.items()}
        size = float(style["font-size"].rstrip("px"))
        font = FontProperties(family="DejaVu Sans", size=size, weight=style.get("font-weight", "normal"))
        width, height, descent = measure.get_text_width_height_descent(text, font, ismath=False)
        transform = element.get("transform", "")
        if element.get("x") is not None:
            x, y = float(element.get("x")), float(element.get("y"))
        else:
            x, y = (float(v) for v in re.search(r"translate\(([-\d.e]+) ([-\d.e]+)\)", transform).groups())
        angle = float(m.group(1)) if (m := re.search(r"rotate\(([-\d.e]+)", transform)) else 0.0
        anchor = style.get("text-anchor", "start")
        left = {"start": 0.0, "middle": -width / 2, "end": -width}[anchor]
        corners = [(left, descent), (left + width, descent), (left, descent - height), (left + width, descent - height)]
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        yield text, [(x + dx * cos - dy * sin, y + dx * sin + dy * cos) for dx, dy in corners]


def _seed_sections(tmp_path_factory):
    store = seeded_store(tmp_path_factory.mktemp("all") / "bench.sqlite", tuple(LOADERS))
    found = sections(store.results())
    store.close()
    return found


@pytest.fixture(scope="module")
def every_chart(tmp_path_factory):
    """Every chart of every seed shape and of a few generated shapes, as SVG files."""
    from .variations import load_variation

    out = tmp_path_factory.mktemp("every")
    paths = charts.write(_seed_sections(tmp_path_factory), out, ("svg",))
    for seed in range(6):
        store = Store(out / f"variation-{seed}.sqlite")
        load_variation(store, seed)
        paths += charts.write(sections(store.results()), out, ("svg",), prefix=f"variation{seed}")
        store.close()
    return paths


def test_every_text_of_every_chart_lies_inside_the_canvas(every_chart):
    assert len(every_chart) > 25
    for svg in every_chart:
        root = ET.parse(svg).getroot()
        _x, _y, width, height = (float(v) for v in root.get("viewBox").split())
        for text, corners in _text_boxes(svg):
            for cx, cy in corners:
                assert -0.5 <= cx <= width + 0.5 and -0.5 <= cy <= height + 0.5, (svg.name, text, cx, cy)


def test_every_series_has_a_legend_entry(tmp_path_factory):
    """Every colour of a bar or a line in a chart is a legend handle's, each with its text."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    plt = charts._pyplot()
    checked = 0
    for section in _seed_sections(tmp_path_factory):
        for name, fig in charts.figures(section, plt):
            legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
            entries = {}
            for legend in legends:
                for handle, text in zip(legend.legend_handles, legend.get_texts()):
                    colour = handle.get_facecolor() if hasattr(handle, "get_facecolor") and not isinstance(
                        handle, Line2D) else handle.get_color()
                    entries[to_hex(colour)] = text.get_text()
            drawn = set()
            for ax in fig.axes:
                drawn |= {to_hex(p.get_facecolor()) for p in ax.patches if isinstance(p, Rectangle) and not p.get_hatch()}
                drawn |= {to_hex(line.get_color()) for line in ax.get_lines() if line.get_label()
                          and not line.get_label().startswith("_")}
            if name != "pareto":       # the Pareto chart names each point beside it
                assert drawn and drawn <= set(entries), (section.matrix, name, drawn - set(entries))
                assert all(entries[c].strip() for c in drawn), (section.matrix, name)
                checked += 1
            plt.close(fig)
    assert checked >= 12


def test_the_space_chart_follows_the_baseline(tmp_path_factory, tmp_path):
    [archive] = [s for s in _seed_sections(tmp_path_factory) if s.matrix == "archive-recordsize"]
    charts.write([archive], tmp_path, ("svg",), baseline=(("recordsize", "128K"),))
    texts = [t.text or "" for t in ET.parse(tmp_path / "bench-archive-recordsize-space.svg").getroot().iter(f"{SVG}text")]
    # each recordsize against its own compression's 128K: zstd-3 / 1M is -184.0 MiB, not -4623.0
    assert "-184.0 MiB" in texts and "-4623.0 MiB" not in texts and texts.count("+0.0 MiB") == 2


def test_sizes_along_an_axis_in_their_natural_order(tmp_path_factory, tmp_path):
    [fits] = [s for s in _seed_sections(tmp_path_factory) if s.matrix == "fits-copy"]
    charts.write([fits], tmp_path, ("svg",))
    texts = [t.text or "" for t in ET.parse(tmp_path / "bench-fits-copy-throughput.svg").getroot().iter(f"{SVG}text")]
    ticks = [t for t in texts if t.startswith("recordsize ")]
    assert ticks == ["recordsize 128K", "recordsize 256K", "recordsize 512K", "recordsize 1M"]
