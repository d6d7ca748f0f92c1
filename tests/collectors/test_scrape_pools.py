"""One scrape lists the pools once for every collector that reads per-pool kstats; the next scrape
lists them again, and so does every call outside a scrape."""

import shutil

from tests.conftest import copy_tree, value
from zfsnas.collectors.base import Context
from zfsnas.collectors.objset import ObjsetCollector
from zfsnas.collectors.poolstats import PoolstatsCollector
from zfsnas.collectors.txg import TxgCollector
from zfsnas.scrape import ScrapeCollector
from zfsnas.sources.linux import ProcfsKstatSource
from zfsnas.sources.model import SourceError


class CountingSource(ProcfsKstatSource):
    listings = 0
    broken = False

    def pools(self):
        self.listings += 1
        if self.broken:
            raise SourceError("listing failed")
        return super().pools()


def test_pools_are_listed_once_a_scrape(tmp_path):
    root = copy_tree(tmp_path / "t")
    kstat = CountingSource(str(root / "proc"), str(root / "sys"))
    ctx = Context(kstat=kstat, commands=None)
    scrape = ScrapeCollector([TxgCollector(ctx), PoolstatsCollector(ctx), ObjsetCollector(ctx)], kstat)
    text = scrape.render()
    assert kstat.listings == 1
    for collector in ("txg", "poolstats", "objset"):
        assert value(text, "zfs_exporter_collector_success", collector=collector) == 1
    assert value(text, "zfs_pool_state", pool="backup", state="DEGRADED") == 1
    assert value(text, "zfs_pool_txg_history_length", pool="backup") > 0

    shutil.rmtree(root / "proc/spl/kstat/zfs/backup")  # exported between two scrapes
    text = scrape.render()
    assert kstat.listings == 2
    assert value(text, "zfs_pool_state", pool="tank", state="ONLINE") == 1
    assert 'pool="backup"' not in text
    assert value(text, "zfs_exporter_collector_success", collector="txg") == 1

    assert ctx.pools() == ["tank"] and ctx.pools() == ["tank"]  # outside a scrape: listed at each call
    assert kstat.listings == 4


def test_a_failed_listing_fails_each_collector_and_the_next_scrape_lists_again(tmp_path):
    root = copy_tree(tmp_path / "t")
    kstat = CountingSource(str(root / "proc"), str(root / "sys"))
    ctx = Context(kstat=kstat, commands=None)
    scrape = ScrapeCollector([TxgCollector(ctx), PoolstatsCollector(ctx)], kstat)
    kstat.broken = True
    text = scrape.render()
    assert kstat.listings == 2  # a failure is not kept: each collector tried
    assert value(text, "zfs_exporter_collector_success", collector="txg") == 0
    assert value(text, "zfs_exporter_collector_success", collector="poolstats") == 0
    kstat.broken = False
    text = scrape.render()
    assert kstat.listings == 3
    assert value(text, "zfs_exporter_collector_success", collector="poolstats") == 1
    assert value(text, "zfs_pool_state", pool="tank", state="ONLINE") == 1
