"""Every chart type rendered from the seeds' figures (PNG decodes at its size, SVG parses and is
titled with matrix and pool, one colour per compression across charts); without matplotlib the
tables still work and --png/--svg say in one line what to install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from zfsnas.bench import charts
from zfsnas.bench.report import sections

from zfsnas.bench.store import ResultFigures, Store

from .seeds import fits_config, seeded_store

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
