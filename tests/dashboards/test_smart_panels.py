"""The Disks dashboard's SMART panels on known input (the smartctl fixtures' numbers), computed by
Prometheus's engine as in test_panel_values.py: the health table's columns and temperature by pool."""

from tests.dashboards.test_panel_values import panel_queries, promtool_eval

Z = 'instance="nas", job="zfsnas"'
SDC = 'device="sdc", serial="WD-WCC7K2BBBBBB", pool="tank", vdev_guid="2280133445316251466"'   # failing, raidz2-0
NVME = 'device="nvme0n1", serial="S4EWNX0N123456", pool="tank", vdev_guid="9803362419451837265"'  # tank's cache
SDD = 'device="sdd", serial="ZA1B2C3D", pool="tank", vdev_guid="16120387443300851052"'          # SAS
SDB = 'device="sdb", serial="WD-WCC7K1AAAAAA", pool="tank", vdev_guid="11498310984210357301"'   # asleep


def smart_series() -> dict[str, str]:
    series = {}
    for disk, state in ((SDC, "ok"), (NVME, "ok"), (SDD, "ok"), (SDB, "standby")):
        for name in ("ok", "standby", "unsupported", "failed"):
            series[f'zfs_disk_smart_state{{{Z}, {disk}, state="{name}"}}'] = "1x20" if name == state else "0x20"
    series.update({
        f'zfs_disk_smart_info{{{Z}, {SDC}, protocol="ATA", device_type="sat", model="WDC WD40EFRX-68N32N0", firmware="82.00A82", media="hdd"}}': "1x20",
        f'zfs_disk_smart_info{{{Z}, {NVME}, protocol="NVMe", device_type="nvme", model="Samsung SSD 970 EVO Plus 1TB", firmware="2B2QEXM7", media="ssd"}}': "1x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {SDC}}}": "36x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {NVME}}}": "41x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {SDD}}}": "34x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {SDB}}}": "55x20",   # when it went to sleep
        f"zfs_disk_smart_power_on_seconds_total{{{Z}, {SDC}}}": f"{30144 * 3600}x20",
        f"zfs_disk_smart_reallocated_sectors{{{Z}, {SDC}}}": "16x20",
        f"zfs_disk_smart_grown_defects{{{Z}, {SDD}}}": "3x20",
        f"zfs_disk_smart_pending_sectors{{{Z}, {SDC}}}": "24x20",
        f"zfs_disk_smart_offline_uncorrectable_sectors{{{Z}, {SDC}}}": "24x20",
        f"zfs_disk_smart_udma_crc_errors_total{{{Z}, {SDC}}}": "0x20",
        f"zfs_disk_smart_nvme_media_errors_total{{{Z}, {NVME}}}": "0x20",
        f'zfs_disk_smart_self_test_info{{{Z}, {SDC}, type="short", result="failed"}}': "1x20",
        f'zfs_disk_smart_self_test_info{{{Z}, {SDC}, type="extended", result="passed"}}': "1x20",
        f'zfs_disk_smart_self_test_age_seconds{{{Z}, {SDC}, type="short"}}': "122400x20",
        f'zfs_disk_smart_self_test_age_seconds{{{Z}, {SDC}, type="extended"}}': "698400x20",
        f'zfs_vdev_state{{{Z}, pool="tank", vdev="/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K2BBBBBB-part1", '
        f'vdev_guid="2280133445316251466", role="data", parent="raidz2-0", state="ONLINE"}}': "1x20",
        # sdd: a hot spare in use, listed twice by zpool status (in the tree and INUSE in the spares)
        f'zfs_vdev_state{{{Z}, pool="tank", vdev="/dev/disk/by-id/scsi-ZA1B2C3D-part1", '
        f'vdev_guid="16120387443300851052", role="data", parent="spare-1", state="ONLINE"}}': "1x20",
        f'zfs_vdev_state{{{Z}, pool="tank", vdev="/dev/disk/by-id/scsi-ZA1B2C3D-part1", '
        f'vdev_guid="16120387443300851052", role="spare", parent="tank", state="INUSE"}}': "1x20",
        # sdb: a spare waiting (AVAIL), only in the spares list
        f'zfs_vdev_state{{{Z}, pool="tank", vdev="/dev/disk/by-id/ata-WDC_WD40EFRX_WD-WCC7K1AAAAAA-part1", '
        f'vdev_guid="11498310984210357301", role="spare", parent="tank", state="AVAIL"}}': "1x20",
    })
    return series


def test_health_table_columns(tmp_path):
    state, info, temperature, hours, reallocated, pending, offline, crc, media, newest, age, vdev = \
        panel_queries("disks", "Disk health")
    sdc = '{instance="nas", device="sdc", serial="WD-WCC7K2BBBBBB", pool="tank", vdev_guid="2280133445316251466"'
    nvme = '{instance="nas", device="nvme0n1", serial="S4EWNX0N123456", pool="tank", vdev_guid="9803362419451837265"'
    sdd = '{instance="nas", device="sdd", serial="ZA1B2C3D", pool="tank", vdev_guid="16120387443300851052"'
    sdb = '{instance="nas", device="sdb", serial="WD-WCC7K1AAAAAA", pool="tank", vdev_guid="11498310984210357301"'
    promtool_eval(tmp_path, smart_series(), [
        (state, [(sdc + ', state="ok"}', 1), (nvme + ', state="ok"}', 1), (sdd + ', state="ok"}', 1),
                 (sdb + ', state="standby"}', 1)]),
        (info, [(sdc + ', model="WDC WD40EFRX-68N32N0", media="hdd"}', 1),
                (nvme + ', model="Samsung SSD 970 EVO Plus 1TB", media="ssd"}', 1)]),
        (temperature, [(sdc + "}", 36), (nvme + "}", 41), (sdd + "}", 34), (sdb + "}", 55)]),
        (hours, [(sdc + "}", 30144)]),
        (reallocated, [(sdc + "}", 16), (sdd + "}", 3)]),   # SAS: its grown defects
        (pending, [(sdc + "}", 24)]), (offline, [(sdc + "}", 24)]), (crc, [(sdc + "}", 0)]), (media, [(nvme + "}", 0)]),
        (newest, [(sdc + ', type="short", result="failed"}', 1)]),   # the newer of its two tests
        (age, [(sdc + "}", 122400)]),
        # each disk's vdev from zpool status: the spare in use where it serves, not twice; the disks it
        # does not list (here the cache) are rows all the same
        (vdev, [(sdc + ', parent="raidz2-0"}', 1), (nvme + "}", 1), (sdd + ', parent="spare-1"}', 1),
                (sdb + ', parent="tank"}', 1)]),
    ])


def test_temperature_by_pool_leaves_sleeping_disks_out(tmp_path):
    hottest, average = panel_queries("disks", "Temperature by pool")
    promtool_eval(tmp_path, smart_series(), [
        (hottest, [('{instance="nas", pool="tank"}', 41)]),   # not the 55 °C of sdb, asleep
        (average, [('{instance="nas", pool="tank"}', 37)]),   # (36 + 41 + 34) / 3
    ])
