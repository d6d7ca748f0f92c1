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
        f'zfs_disk_smart_info{{{Z}, {SDC}, protocol="ATA", device_type="sat", model="WDC WD40EFRX-68N32N0", '
        f'firmware="82.00A82", media="hdd"}}': "1x20",
        f'zfs_disk_smart_info{{{Z}, {NVME}, protocol="NVMe", device_type="nvme", model="Samsung SSD 970 EVO Plus 1TB", '
        f'firmware="2B2QEXM7", media="ssd"}}': "1x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {SDC}}}": "36x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {NVME}}}": "41x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {SDD}}}": "34x20",
        f"zfs_disk_smart_temperature_celsius{{{Z}, {SDB}}}": "55x20",   # when it went to sleep
        f"zfs_disk_smart_temperature_limit_celsius{{{Z}, {NVME}}}": "80x20",   # the drive's own (WCTEMP)
        f"zfs_disk_smart_temperature_limit_celsius{{{Z}, {SDC}}}": "60x20",    # an HDD's own (SCT): not its limit
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
    for disk in (SDC, NVME, SDD, SDB):
        series[f'zfs_disk_info{{{Z}, {disk}, model="m", rotational="1"}}'] = "1x20"
    return series


def test_health_table_columns(tmp_path):
    state, info, temperature, hours, reallocated, pending, offline, crc, media, newest, age, vdev, limit, of_limit, \
        health = panel_queries("disks", "Disk health")
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
        # held to the NVMe's own 80 °C, the others (the HDD despite its own 60 °C, SAS and asleep: no
        # media said) to 50 °C, as ZfsDiskTemperatureHigh holds them
        (limit, [(sdc + "}", 50), (nvme + "}", 80), (sdd + "}", 50), (sdb + "}", 50)]),
        (of_limit, [(sdc + "}", 36 / 50), (nvme + "}", 41 / 80), (sdd + "}", 34 / 50)]),   # not the sleeper's 55
        # sdc: sectors pending and reallocated, a failed self-test; sdd: grown defects; sdb hot but asleep
        (health, [(sdc + ', health="warning"}', 1), (nvme + ', health="healthy"}', 1),
                  (sdd + ', health="warning"}', 1), (sdb + ', health="healthy"}', 1)]),
    ], rules=True)


def test_disk_problems_say_why(tmp_path):
    (problems,) = panel_queries("disks", "Disk problems")
    series = smart_series()
    series[f"zfs_disk_smart_healthy{{{Z}, {SDD}}}"] = "1x10 0x10"            # its health check fails at 11m
    sdc = 'instance="nas", device="sdc", serial="WD-WCC7K2BBBBBB", pool="tank", vdev_guid="2280133445316251466"'
    sdd = 'instance="nas", device="sdd", serial="ZA1B2C3D", pool="tank", vdev_guid="16120387443300851052"'
    promtool_eval(tmp_path, series, [(problems, [
        (f'{{{sdc}, severity="warning", problem="reallocated sectors"}}', 1),
        (f'{{{sdc}, severity="warning", problem="pending or uncorrectable sectors"}}', 1),
        (f'{{{sdc}, severity="warning", problem="newest self-test failed"}}', 1),
        (f'{{{sdd}, severity="warning", problem="reallocated sectors"}}', 1),
        (f'{{{sdd}, severity="failing", problem="SMART health check failed"}}', 1)])], eval_time="15m", rules=True)


def test_temperature_by_pool_leaves_sleeping_disks_out(tmp_path):
    hottest, average = panel_queries("disks", "Temperature by pool")
    promtool_eval(tmp_path, smart_series(), [
        (hottest, [('{instance="nas", pool="tank"}', 41)]),   # not the 55 °C of sdb, asleep
        (average, [('{instance="nas", pool="tank"}', 37)]),   # (36 + 41 + 34) / 3
    ])


def test_overview_counts_disks_by_health_and_finds_the_hottest(tmp_path):
    """The Overview's disk row over the same disks: sdd's SMART health check fails; sdc has
    reallocated and pending sectors; the NVMe and the sleeping sdb are healthy. The hottest awake
    disk against its own limit is sdc (36 of 50 °C), not the NVMe (41 of its 80) nor the sleeper."""
    healthy, = panel_queries("overview", "Healthy disks")
    warning, = panel_queries("overview", "Disks with a warning")
    failing, = panel_queries("overview", "Failing disks")
    hottest, = panel_queries("overview", "Hottest disk vs its limit")
    series = smart_series()
    series[f"zfs_disk_smart_healthy{{{Z}, {SDD}}}"] = "0x20"
    tank = '{instance="nas", pool="tank"}'
    promtool_eval(tmp_path, series, [
        (healthy, [(tank, 2)]), (warning, [(tank, 1)]), (failing, [(tank, 1)]),
        (hottest, [('{instance="nas", device="sdc", serial="WD-WCC7K2BBBBBB", pool="tank", '
                    'vdev_guid="2280133445316251466"}', 36 / 50)])], rules=True)
    series[f"zfs_disk_smart_healthy{{{Z}, {SDD}}}"] = "1x20"
    promtool_eval(tmp_path, series, [(failing, [(tank, 0)]), (warning, [(tank, 2)])], rules=True)


def test_smart_status_says_why_there_is_no_health_data(tmp_path):
    """Six exporters: three whose smart collector cannot read the disks and says why (each reason the
    exporter serves, in words), one without a smart collector, one whose smart collector fails
    without a reason, one reading its disks."""
    (status,) = panel_queries("disks", "SMART")
    series = {}
    for instance, reason in (("a", "permission_denied"), ("e", "smartctl_missing"), ("f", "smartctl_too_old")):
        series[f'zfs_exporter_collector_success{{instance="{instance}", job="zfsnas", collector="smart"}}'] = "0x20"
        series[f'zfs_disk_smart_unavailable{{instance="{instance}", job="zfsnas", reason="{reason}"}}'] = "1x20"
    series |= {
        'zfs_exporter_collector_success{instance="b", job="zfsnas", collector="arc"}': "1x20",
        'zfs_exporter_collector_success{instance="c", job="zfsnas", collector="smart"}': "0x20",
        'zfs_exporter_collector_success{instance="d", job="zfsnas", collector="smart"}': "1x20",
        'zfs_disk_smart_state{instance="d", job="zfsnas", device="sda", serial="S", pool="tank", vdev_guid="1", state="ok"}':
            "1x20",
    }
    promtool_eval(tmp_path, series, [(status, [
        ('{instance="a", reason="smartctl may not open the disks (permission denied): docs/disks.md#smart"}', 1),
        ('{instance="e", reason="smartctl missing: install smartmontools 7.0 or later on the host"}', 1),
        ('{instance="f", reason="smartctl too old (no --json): install smartmontools 7.0 or later"}', 1),
        ('{instance="b", reason="no smart collector (--no-collector.smart, or an exporter without it)"}', 1),
        ('{instance="c", reason="the smart collector fails: see the exporter\'s log"}', 1),
        ('{instance="d", reason="reading the disks"}', 0)])])


def test_smart_counters_are_drawn_per_disk(tmp_path):
    pending, = panel_queries("disks", "Pending sectors over time")
    media, = panel_queries("disks", "NVMe media errors over time")
    sdc = '{instance="nas", device="sdc", serial="WD-WCC7K2BBBBBB", pool="tank"}'
    nvme = '{instance="nas", device="nvme0n1", serial="S4EWNX0N123456", pool="tank"}'
    promtool_eval(tmp_path, smart_series(), [(pending, [(sdc, 24)]), (media, [(nvme, 0)])])
