"""The single-file HTML report: tables, the pick, charts as data: URIs; rendered by headless
Chromium (Debian's `chromium`, installed by ./dev test) and checked from its screenshot."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from zfsnas.bench.cli import main

from .seeds import seeded_store

PIL = pytest.importorskip("PIL.Image", reason="matplotlib (the `report` extra) brings Pillow")
IMG = re.compile(r'<img class="chart" data-chart="([a-z-]+)" alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
WIDTH = 1200


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html")
    seeded_store(out / "bench.sqlite", ("fits",)).close()
    assert main(["report", "--db", str(out / "bench.sqlite"), "--format", "html", "--output", str(out / "r.html")]) == 0
    return out / "r.html"


def test_one_self_contained_file(page):
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<h1>fits-copy on astro</h1>" in text
    assert not re.search(r'src="(?!data:)', text) and "<link" not in text      # nothing fetched from elsewhere
    charts = IMG.findall(text)
    assert [name for name, _ in charts] == ["throughput", "space", "write-size", "pareto"]
    for _name, data in charts:
        with PIL.open(io.BytesIO(base64.b64decode(data))) as image:
            assert image.format == "PNG" and image.size[0] == 900
    assert "<td>zstd-1</td><td>180.7</td><td>184.0</td><td>190.6</td><td>175.0</td>" in text
    assert '<p class="pick">Pick: zstd-1 / 512K: 99 % of the fastest' in text


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="Debian's chromium is not installed (./dev test installs it)")
def test_headless_chromium_renders_the_page_with_its_charts(page, tmp_path):
    shot = tmp_path / "shot.png"
    height = 3200
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", f"--window-size={WIDTH},{height}",
         page.as_uri()], capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    with PIL.open(shot) as image:
        rgb = image.convert("RGB")
    assert rgb.size == (WIDTH, height)
    grey = rgb.convert("L")
    # Not blank: the page's ink (text, tables, charts) varies a lot from pixel to pixel.
    histogram = grey.histogram()
    count = sum(histogram)
    mean = sum(i * n for i, n in enumerate(histogram)) / count
    variance = sum(n * (i - mean) ** 2 for i, n in enumerate(histogram)) / count
    assert variance > 200, variance
    # The charts are there: the colours of the FITS bars (lz4 blue, zstd-fast cyan, zstd-1 green, zstd-3
    # olive) cover real areas of the screenshot, which text and tables never do.
    colours = {c: n for n, c in rgb.getcolors(maxcolors=1 << 24)}
    for hex_colour in ("#1f77b4", "#17becf", "#2ca02c", "#98b825"):
        pixel = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        assert colours.get(pixel, 0) > 2000, hex_colour
    # and the first chart sits below the heading, above the tables: its rows are not white.
    rows_with_ink = [y for y in range(0, height, 20)
                     if any(grey.getpixel((x, y)) < 200 for x in range(0, WIDTH, 10))]
    assert len(rows_with_ink) > 60
