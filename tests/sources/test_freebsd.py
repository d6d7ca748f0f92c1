"""The sysctl source: FreeBSD's kstat sysctls give the same values as Linux's procfs files."""

import pytest

from tests.conftest import freebsd_sysctl, linux_tree
from zfsnas.sources.commands import CommandRunner
from zfsnas.sources.freebsd import SysctlKstatSource, parse_sysctl
from zfsnas.sources.kstat import ARCSTATS, DMU_TX, DMU_TX_ASSIGN, IOSTATS, KstatFormatError
from zfsnas.sources.linux import ProcfsKstatSource
from zfsnas.sources.model import SourceError

PAIRS = [("13.2", "2.1.11"), ("14.1", "2.2.7")]


def test_parse_sysctl_multiline_values():
    text = ("kstat.zfs.tank.misc.state: ONLINE\nkstat.zfs.tank.misc.txgs: \ntxg birth\n1 2\n"
            "vfs.zfs.arc.max: 0\nkstat.zfs.tank.misc.dmu_tx_assign.1 ns: 5\n")
    values = parse_sysctl(text)
    assert values["kstat.zfs.tank.misc.txgs"] == "\ntxg birth\n1 2"
    assert values["kstat.zfs.tank.misc.dmu_tx_assign.1 ns"] == "5"
    assert values["vfs.zfs.arc.max"] == "0"
    with pytest.raises(KstatFormatError, match="not a name"):
        parse_sysctl("garbage first\n")


@pytest.mark.parametrize("release, linux", PAIRS)
def test_same_values_as_linux(release, linux):
    bsd = SysctlKstatSource(path=str(freebsd_sysctl(release)))
    root = linux_tree(linux)
    lin = ProcfsKstatSource(str(root / "proc"), str(root / "sys"))
    assert bsd.zfs_loaded()
    assert bsd.named(ARCSTATS).values == lin.named(ARCSTATS).values
    assert bsd.named(DMU_TX).values == lin.named(DMU_TX).values
    assert bsd.pools() == lin.pools()
    for pool in bsd.pools():
        assert bsd.txgs(pool) == lin.txgs(pool)
        assert bsd.pool_state(pool) == lin.pool_state(pool)
        assert bsd.optional_named(IOSTATS, pool).values == lin.optional_named(IOSTATS, pool).values
        assert sorted((o.dataset, o.objset_id, tuple(sorted(o.values.items()))) for o in bsd.objsets(pool)) == \
            sorted((o.dataset, o.objset_id, tuple(sorted(o.values.items()))) for o in lin.objsets(pool))
        # FreeBSD keeps every bucket, Linux trims the empty tail: the non-zero buckets agree.
        assert {k: v for k, v in bsd.optional_named(DMU_TX_ASSIGN, pool).values.items() if v} == \
            {k: v for k, v in lin.optional_named(DMU_TX_ASSIGN, pool).values.items() if v}
    assert bsd.dirty_data_max() == lin.dirty_data_max() == 4 << 30
    assert bsd.delay_min_dirty_percent() == 60
    assert bsd.tunables()["txg.timeout"] == "5"
    assert bsd.version().endswith(("FreeBSD_g92e0d9d18", "FreeBSD_g256659204"))


def test_live_mode_runs_sysctl_and_asks_raw_kstats_by_name(tmp_path):
    # A stand-in `sysctl` that answers exactly the two calls the source makes.
    listing = "\n".join(line for line in freebsd_sysctl("14.1").read_text().splitlines()
                        if line.startswith(("kstat.zfs.misc.arcstats.hits", "kstat.zfs.tank.dataset.", "vfs.zfs.")))
    raw = "kstat.zfs.tank.misc.txgs: \n" + (linux_tree("2.2.7") / "proc/spl/kstat/zfs/tank/txgs").read_text() + \
          "kstat.zfs.tank.misc.state: ONLINE\n"
    (tmp_path / "listing").write_text(listing + "\n")
    (tmp_path / "raw").write_text(raw)
    script = tmp_path / "sysctl"
    script.write_text(f"""#!/bin/sh
if [ "$*" = "kstat.zfs vfs.zfs" ]; then cat {tmp_path}/listing; exit 0; fi
if [ "$*" = "-i kstat.zfs.tank.misc.txgs kstat.zfs.tank.misc.state" ]; then cat {tmp_path}/raw; exit 0; fi
echo "unexpected arguments: $*" >&2; exit 2
""")
    script.chmod(0o755)
    src = SysctlKstatSource(CommandRunner(), sysctl=str(script))
    src.refresh()
    assert src.pools() == ["tank"]
    assert src.pool_state("tank") == "ONLINE"
    assert len(src.txgs("tank")) == 24
    assert src.named(ARCSTATS).values == {"hits": 48_211_907}


def test_missing_sysctl_command():
    src = SysctlKstatSource(CommandRunner(), sysctl="/nonexistent/sysctl")
    with pytest.raises(SourceError, match="command not found"):
        src.refresh()


def test_pool_vanished(tmp_path):
    src = SysctlKstatSource(path=str(freebsd_sysctl("14.1")))
    with pytest.raises(SourceError, match="pool 'gone' vanished"):
        src.txgs("gone")


def test_txgs_rows_seen_before_are_not_built_again_and_a_gone_pools_memo_goes(tmp_path):
    text = freebsd_sysctl("14.1").read_text()
    dump = tmp_path / "sysctl.txt"
    dump.write_text(text)
    src = SysctlKstatSource(path=str(dump))
    first = src.txgs("tank")
    last = text.split("kstat.zfs.tank.misc.txgs:", 1)[1].split("\nkstat.", 1)[0].rstrip("\n").rsplit("\n", 1)[1]
    parts = last.split()
    grown = " ".join([*parts[:3], str(int(parts[3]) + 4096), *parts[4:]])  # the open txg's ndirty grew
    dump.write_text(text.replace(last, grown, 1))
    src.refresh()
    second = src.txgs("tank")
    assert second[-1].ndirty == first[-1].ndirty + 4096 and second[-1].txg == first[-1].txg
    assert len(second) == len(first) and all(a is b for a, b in zip(first[:-1], second[:-1]))
    assert set(src._txg_rows) == {"tank"}
    dump.write_text(text.replace("kstat.zfs.tank.", "kstat.zfs.tank2."))  # tank exported, tank2 imported
    src.refresh()
    assert "tank" not in src.pools() and "tank2" in src.pools() and src._txg_rows == {}
