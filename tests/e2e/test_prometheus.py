"""A real Prometheus on the host scraped the guest's exporter through the forwarded port during the run."""

from __future__ import annotations

import os

import pytest

from tests.integration.prometheus import Prometheus

pytestmark = pytest.mark.e2e


class Remote(Prometheus):
    """The harness's running Prometheus (query side only)."""

    def __init__(self, url: str):
        self.url = url


@pytest.fixture(scope="module")
def prom(results) -> Remote:
    url = os.environ.get("ZFSNAS_E2E_PROMETHEUS")
    if not url:
        pytest.skip("no host Prometheus (ZFSNAS_E2E_PROMETHEUS)")
    return Remote(url)


def test_scraped_the_guest(prom):
    assert prom.scalar("max_over_time(up[2h])") == 1, "Prometheus never scraped the guest exporter successfully"
    assert prom.scalar("count_over_time(up[2h])") >= 5


def test_anon_peak_and_arc_seen_by_prometheus(prom, moment):
    peak = prom.scalar("max_over_time(zfs_arc_anon_size_bytes[2h])")
    rest = prom.scalar("min_over_time(zfs_arc_anon_size_bytes[2h])")
    # Prometheus scrapes every 10 s and dirty data lives for about a txg, so it catches only part of
    # the peak the guest samples itself (test_anon_bytes_rise_during_a_write wants 4 MiB): 1 MiB is 8x the
    # ~131 KB at rest, well clear of idle noise.
    assert peak >= 1 << 20 and peak > 4 * rest, f"zfs_arc_anon_size_bytes over the run: {rest}..{peak}"
    c_max = prom.scalar("max_over_time(zfs_arc_max_size_bytes[2h])")
    assert c_max == moment("steady").kstat("arcstats")["c_max"]


def test_degraded_pool_seen_by_prometheus(prom, moment):
    if not moment("degraded").collector_enabled("pools"):
        pytest.skip("collector 'pools' is not in this build")
    assert prom.scalar('max_over_time(zfs_pool_health{pool="tank",state="DEGRADED"}[2h])') == 1
    assert prom.scalar('max_over_time(zfs_pool_health{pool="tank",state="ONLINE"}[2h])') == 1
