#!/bin/sh
# Run by the guest's init (guest/init, under systemd) from a copy of this file: the scenario from
# the 9p share, its exit status and the boot's journal on the share, then power off at once
# (nothing of the throw-away root, a qcow2 snapshot, is kept).
S=/mnt/share
hostname guest
sh "$S/guest/scenario.sh" >"$S/results/scenario.log" 2>&1
echo $? >"$S/results/exit_status"
journalctl -b --no-pager -o short-monotonic >"$S/results/journal.txt" 2>&1
sync
umount "$S" 2>/dev/null
systemctl poweroff --force --force || echo o >/proc/sysrq-trigger
sleep 30
