"""The e2e failure phase's alert checks (tests/e2e/test_failures.py `fire`) against today's rules,
on series shaped as the guest's exporter serves them at those moments.

The guest run costs an hour; a rule change that its checks no longer fit (a second rule under an
alert's name, an input the rule now needs) is found here in seconds. The series are ours, in the
exporter's label sets (state labels upper-case, one 0/1 series per state); the e2e suite checks the
same alerts on what the live exporter really served.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Capture
from tests.e2e.test_failures import fire

STATES = ("DEGRADED", "FAULTED", "OFFLINE", "ONLINE", "REMOVED", "SUSPENDED", "UNAVAIL")


def capture(tmp_path, name: str, lines: list[str]) -> Capture:
    path = tmp_path / name
    path.mkdir()
    (path / "metrics.txt").write_text("\n".join(lines) + "\n")
    return Capture(path)


def pool_state(pool: str, state: str) -> list[str]:
    return [f'zfs_pool_state{{pool="{pool}",state="{s}"}} {int(s == state)}' for s in STATES]


@pytest.fixture(autouse=True)
def _promtool():
    import shutil

    if not shutil.which("promtool"):
        pytest.skip("promtool not installed (./dev test installs it)")


def test_exported_and_never_imported_pools_page_once_each(tmp_path):
    """`exported`: lab gone, backup never there, both in --pools.expected: the page (critical) fires
    for both at 16 minutes and the warning of the same name stays silent."""
    lines = [*pool_state("tank", "ONLINE"), *pool_state("fast", "ONLINE"),
             *(f'zfs_pool_expected_imported{{pool="{p}"}} {v}' for p, v in
               (("tank", 1), ("fast", 1), ("lab", 0), ("backup", 0))),
             'zfs_exporter_collector_success{collector="poolstats"} 1',
             'zfs_exporter_collector_success{collector="pools"} 1']
    cap = capture(tmp_path, "exported", lines)
    fire(cap, {"zfs_pool_expected_imported": {}, "zfs_pool_state": {}, "zfs_exporter_collector_success": {}},
         "ZfsPoolMissing", [{"pool": "lab"}, {"pool": "backup"}], minutes=16)


def test_a_suspended_pool_pages_and_an_online_one_does_not(tmp_path):
    cap = capture(tmp_path, "suspended", [*pool_state("one", "SUSPENDED"), *pool_state("lab", "ONLINE")])
    fire(cap, {"zfs_pool_state": {"pool": "one"}}, "ZfsPoolNotOnline", [{"state": "SUSPENDED"}], minutes=5)
    fire(cap, {"zfs_pool_state": {"pool": "lab"}}, "ZfsPoolNotOnline", [], minutes=5)


def test_a_faulted_leaf_and_its_errors_alert(tmp_path):
    vdev = "/dev/mapper/labB"
    # one series per vdev (value 1), its state in `state`; the pool's root and the mirror too
    states = ['zfs_vdev_state{parent="",pool="lab",role="data",state="ONLINE",vdev="lab",vdev_guid=""} 1',
              'zfs_vdev_state{parent="lab",pool="lab",role="data",state="ONLINE",vdev="mirror-0",vdev_guid="9"} 1',
              f'zfs_vdev_state{{parent="mirror-0",pool="lab",role="data",state="FAULTED",vdev="{vdev}",vdev_guid="123"}} 1',
              'zfs_vdev_state{parent="mirror-0",pool="lab",role="data",state="ONLINE",vdev="/dev/loop3",vdev_guid="7"} 1']
    errors = [f'zfs_vdev_errors{{parent="mirror-0",pool="lab",role="data",type="{t}",vdev="{vdev}",'
              f'vdev_guid="123"}} {n}' for t, n in (("read", 3), ("write", 5), ("checksum", 0))]
    cap = capture(tmp_path, "faulted", [*states, *errors])
    fire(cap, {"zfs_vdev_state": {"pool": "lab"}}, "ZfsVdevNotOnline", [{"vdev": vdev}], minutes=5)
    fire(cap, {"zfs_vdev_errors": {"pool": "lab"}}, "ZfsVdevErrors", [{"type": "read"}, {"type": "write"}], minutes=2)


def test_a_locked_dataset_and_data_errors_alert(tmp_path):
    cap = capture(tmp_path, "aux_missing", ['zfs_dataset_key_loaded{dataset="lab/secret",pool="lab"} 0',
                                            'zfs_pool_data_errors{pool="one"} 2'])
    fire(cap, {"zfs_dataset_key_loaded": {}}, "ZfsDatasetLocked", [{"pool": "lab", "dataset": "lab/secret"}], minutes=20)
    fire(cap, {"zfs_pool_data_errors": {}}, "ZfsPoolDataErrors", [{"pool": "one"}], minutes=1)
