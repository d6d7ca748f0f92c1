#!/bin/sh
# Run by the guest's init from the 9p share: udev, network, the project wheel, then scenario.py.
# Output goes to results/scenario.log on the share; every line starts with the guest's clock.
S=/mnt/share
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
set -x
t0=$(date +%s.%N)
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --type=subsystems
udevadm trigger --action=add --type=devices
udevadm settle --timeout=60
ip link set lo up
IF=$(ls /sys/class/net | grep -v '^lo$' | head -1)
ip link set "$IF" up
ip addr add 10.0.2.15/24 dev "$IF"
ip route add default via 10.0.2.2
modprobe zfs || exit 10
python3 -m pip install -q --no-deps --no-index --break-system-packages "$S"/wheels/*.whl || exit 11
echo "bootstrap_seconds $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')"
exec python3 "$S/guest/scenario.py" "$S"
