"""Sources read the operating system and return plain values.

They own all I/O (files under /proc and /sys, sysctl, the zfs/zpool commands, udev) and import
nothing from prometheus_client. Collectors turn what they return into metric families.
"""
