"""`./dev demo` (demo/replay_demo.py) as a newcomer runs it: the committed guest capture and
captures of our committed live trees replayed and looped, scraped by a real Prometheus (Debian's
2.42) with our rules, at a 1 s interval here so that the guest's two snapshots loop several times.

Checked: every URL it prints answers; each replay is one NAS named after its capture; the live
trees' ARC size arrives unchanged; looping continues every counter (no reset: the guest's txg count
rises by the same step at every scrape, across laps); the only alert is the watchdog (the captured
NAS had healthy pools); the graph page, rendered by headless Chromium, shows a line per NAS."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, free_port
from tests.integration.prometheus import PrometheusClient

ROOT = Path(__file__).resolve().parents[2]
GUEST = FIXTURES / "captures" / "linux-zfs-2.3.2-guest.tar.gz"


def arcstat(tree: Path, field: str) -> int:
    for line in (tree / "proc/spl/kstat/zfs/arcstats").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == field:
            return int(parts[2])
    raise KeyError(field)


def committed_txgs(capture: Path, snapshot: int, pool: str) -> list[int]:
    """The txg numbers in state C(ommitted) of a pool's txg history in a capture's snapshot."""
    with tarfile.open(capture) as tar:
        member = tar.extractfile(f"zfsnas-capture/snapshots/{snapshot}/proc/spl/kstat/zfs/{pool}/txgs")
        assert member is not None
        rows = [line.split() for line in member.read().decode().splitlines()[1:]]
    return [int(row[0]) for row in rows if len(row) > 2 and row[2] == "C"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out.txt"
    with out.open("w") as handle:
        proc = subprocess.Popen([sys.executable, str(ROOT / "demo" / "replay_demo.py"), "--port", str(free_port()),
                                 "--scrape-interval", "1s"], stdout=handle, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while "Ctrl-C stops the demo" not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text() + proc.stderr.read()
            time.sleep(0.5)
        lines = out.read_text().splitlines()
        prom = PrometheusClient(next(line.split()[1] for line in lines if line.startswith("Prometheus: ")).split("/classic")[0]
                                .split("/graph")[0])
        # Eight scrapes of every replay: the guest's two snapshots loop four times.
        prom.wait_for('min(count_over_time(up{job="zfsnas"}[1m])) >= 8', timeout=60)
        yield {"lines": lines, "prom": prom, "proc": proc}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_the_printed_urls_answer(demo):
    urls = [u for line in demo["lines"] for u in re.findall(r"http://\S+", line)]
    pages = [u for u in urls if not u.endswith("/metrics") and ":" in u.split("//")[1]]
    assert any("/alerts" in u for u in pages) and any("/targets" in u for u in pages) and len(pages) >= 8
    for url in urls:
        with urllib.request.urlopen(url, timeout=20) as response:
            assert response.status == 200, url


def test_each_replay_is_a_nas_named_after_its_capture(demo):
    prom = demo["prom"]
    trees = sorted(FIXTURES.glob("linux-zfs-*-live"))
    committed = sorted((FIXTURES / "captures").glob("*.tar.gz"))
    names = {t.name for t in trees} | {c.name.removesuffix(".tar.gz") for c in committed}
    up = prom.query('up{job="zfsnas"}')
    assert {r["metric"]["nas"] for r in up} == names and all(r["metric"]["instance"] == r["metric"]["nas"] for r in up)
    assert all(r["value"][1] == "1" for r in up)
    for tree in trees:
        assert prom.scalar(f'zfs_arc_size_bytes{{nas="{tree.name}"}}') == arcstat(tree, "size")


def test_looping_continues_the_counters(demo):
    prom = demo["prom"]
    rows = prom.query('{job="zfsnas", __name__=~".+_total|.+_bucket|.+_count|.+_sum"}[1m]')
    assert len(rows) > 500
    went_back = [(r["metric"], a, b) for r in rows for (_, a), (_, b) in zip(r["values"], r["values"][1:])
                 if float(b) < float(a)]
    assert not went_back, went_back[:5]
    # The guest's txg count goes up by what synced between its two snapshots at every scrape, the
    # step from the last snapshot back to the first included.
    for pool in ("tank", "fast"):
        before = max(committed_txgs(GUEST, 0, pool))
        step = len([txg for txg in committed_txgs(GUEST, 1, pool) if txg > before])
        assert step > 0
        series = prom.query(f'zfs_pool_txgs_synced_total{{nas="linux-zfs-2.3.2-guest", pool="{pool}"}}[1m]')
        values = [float(v) for _, v in series[0]["values"]]
        steps = [b - a for a, b in zip(values, values[1:])]
        # (one scrape of the replay's own URL in between, as test_the_printed_urls_answer does, is two steps)
        assert len(values) >= 8 and all(d > 0 and d % step == 0 for d in steps) and steps.count(step) >= 6, values


def test_only_the_alerts_the_captured_nas_had(demo):
    prom = demo["prom"]
    # The guest's pools were ONLINE with no errors, scrubbed minutes before: nothing but the watchdog.
    assert {r["metric"]["alertname"] for r in prom.query("ALERTS")} == {"ZfsWatchdog"}
    assert prom.query("zfs_exporter_collector_success == 0") == []
    assert prom.query("zfs_exporter_source_success == 0") == []
    # Ages stay as they were when the snapshot was taken: the guest's scrub ended minutes before it.
    ages = [float(r["value"][1]) for r in prom.query('time() - zfs_pool_scan_end_timestamp_seconds{nas="linux-zfs-2.3.2-guest"}')]
    assert len(ages) == 2 and all(0 < age < 3600 for age in ages), ages


def test_what_to_look_at_shows_data(demo):
    prom = demo["prom"]
    queries = [urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)["g0.expr"][0]
               for line in demo["lines"] for u in re.findall(r"http://\S+graph\?\S+", line)][1:]
    assert len(queries) == 3
    for expr in queries:
        assert prom.wait_for(expr + " > 0", timeout=30), expr


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="Debian's chromium is not installed (./dev test installs it)")
def test_headless_chromium_shows_a_line_per_nas_on_the_graph_page(demo, tmp_path):
    image_module = pytest.importorskip("PIL.Image", reason="matplotlib (the `report` extra) brings Pillow")
    url = next(line.split()[1] for line in demo["lines"] if line.startswith("Prometheus: "))
    url = url.replace("g0.range_input=15m", "g0.range_input=1m")   # the demo has run for seconds, not minutes
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000"]
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    legend = set(re.findall(r'zfs_arc_size_bytes\{[^}]*nas="([^"]+)"', dom.stdout.replace("&quot;", '"')))
    assert legend == {r["metric"]["nas"] for r in demo["prom"].query("zfs_arc_size_bytes")}, dom.stdout[-2000:]
    shot = tmp_path / "graph.png"
    result = subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1200,900", url],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    with image_module.open(shot) as image:
        rgb = image.convert("RGB")
    # The plot area (left of the legend, below the controls): coloured lines, at two heights at
    # least (the guest's ARC is about six times the live trees').
    rows = {}
    for y in range(330, 750):
        coloured = sum(1 for x in range(80, 1140, 2) if max(rgb.getpixel((x, y))) - min(rgb.getpixel((x, y))) > 80)
        if coloured > 20:
            rows[y] = coloured
    bands = [y for y in sorted(rows) if y - 1 not in rows]
    assert len(bands) >= 2 and max(bands) - min(bands) > 150, rows


def test_stops_cleanly_without_error_lines(demo):
    proc = demo["proc"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    errors = proc.stderr.read()
    assert not [line for line in errors.splitlines() if line.strip()], errors
