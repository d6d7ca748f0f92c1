#!/bin/sh
# Run by the guest (guest/boot.sh, under systemd) from the 9p share: udev, network, the project
# wheel, then scenario.py. Output goes to results/scenario.log on the share; `==` lines carry the
# guest's uptime.
S=/mnt/share
# The scenario's own exporter and zfsnas-bench: a venv of their own on the guest's Debian packages
# (/opt/zfsnas-e2e), so that /usr/local/bin and /opt/zfsnas stay the user's: the unit phase
# installs there as the docs say (guest/unit.py).
PATH=/opt/zfsnas-e2e/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mark() { echo "== $(cut -d' ' -f1 /proc/uptime) $*"; }
set -x
mark udev
# the drivers of our disks and NIC directly: a full `udevadm trigger` of every device costs ~1 min
# in TCG (the image masks systemd's coldplug); systemd-udevd itself is systemd's
modprobe -a ahci virtio_scsi sd_mod virtio_net
udevadm control --ping || /lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --subsystem-match=block --subsystem-match=net
udevadm settle --timeout=600
mark network
ip link set lo up
IF=$(ls /sys/class/net | grep -v '^lo$' | head -1)
ip link set "$IF" up
ip addr add 10.0.2.15/24 dev "$IF"
ip route add default via 10.0.2.2
mark modprobe zfs
modprobe zfs || exit 10
mark pip install
# no pip of its own (ensurepip costs minutes under TCG): Debian's pip, seen through the system
# site-packages, installs into it
/usr/bin/python3 -m venv --without-pip --system-site-packages /opt/zfsnas-e2e || exit 11
/opt/zfsnas-e2e/bin/python -m pip install -q --no-deps --no-index "$S"/wheels/*.whl || exit 11
mark scenario.py
exec python3 "$S/guest/scenario.py" "$S"
