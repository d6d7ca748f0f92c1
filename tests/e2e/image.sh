#!/usr/bin/env bash
# Build (or reuse) the QEMU guest images of the end-to-end suite:
#   tests/e2e/image.sh <flavour>...      flavour: 2.3 (OpenZFS 2.3.x, kernel 6.12, bookworm-backports)
#                                                 2.1 (OpenZFS 2.1.x, kernel 6.1, bookworm)
#   tests/e2e/image.sh --cached <flavour>   the image's directory if it is built, else exit 1 (no lock)
# Prints, per flavour, the directory holding root.qcow2, vmlinuz, initrd.img and info.
# Images are cached in ${ZFSNAS_E2E_CACHE:-/var/cache/zfsnas-e2e}, keyed by a hash of this recipe
# (this file and the guest files baked in, BAKED), and rebuilt only when the recipe changes. A
# debootstrap base with the packages both flavours share is built once and copied. Mirror:
# $ZFSNAS_E2E_MIRROR, else the first Debian URI of the host's apt configuration. Needs root,
# debootstrap, qemu-utils, e2fsprogs.
# The guests boot systemd as PID 1 (as a Proxmox or Debian host does) straight into
# zfsnas-e2e.service, which runs guest/init: the shipped systemd unit is then installed and run
# the way docs/stack.md tells a user. Docker and docker-compose are in the image (the compose path,
# as TrueNAS SCALE runs a custom app), and python3-venv and pipx (the documented installs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${ZFSNAS_E2E_CACHE:-/var/cache/zfsnas-e2e}
SUITE=bookworm
BASE_PACKAGES="systemd udev kmod iproute2 procps util-linux fio python3 python3-pip python3-venv pipx
 python3-prometheus-client python3-pyudev python3-yaml python3-bcrypt samba smartmontools hdparm dmsetup
 docker.io docker-compose"
BASE_PACKAGES=$(echo $BASE_PACKAGES)
INITRAMFS_MODULES="virtio_pci virtio_blk ext4"
# What of guest/ is baked into the images (the rest comes on the 9p share at every boot).
BAKED="guest/init guest/zfsnas-e2e.service"
# Units a minimal guest does not need at boot: the full coldplug of every device (the scenario
# triggers its disks and NIC: all devices cost about a minute under TCG), first-boot prompts,
# and timers that would wake apt, fstrim or e2scrub in the middle of a run.
MASKED="systemd-udev-trigger.service systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer
 e2scrub_all.timer fstrim.timer dpkg-db-backup.timer"
KEEP_DAYS=2   # images of other recipes (other checkouts) unused for longer are deleted

log() { printf '%s image.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

host_mirror() {
    if [ -n "${ZFSNAS_E2E_MIRROR:-}" ]; then echo "$ZFSNAS_E2E_MIRROR"; return; fi
    local uri
    # deb822 .sources: the URIs of a stanza whose Suites name the release (not -security)
    uri=$(awk 'BEGIN{RS=""} /Suites:[^\n]*(bookworm|stable)( |\n|$)/ && !/security/ {
                 if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { s=substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", s); print s; exit } }' \
          /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1=="deb" && $0 !~ /security/ { for (i=2;i<=NF;i++) if ($i ~ /^(https?|ftp|file):/) { print $i; exit } }' /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || { echo "image.sh: no Debian mirror in the host's apt configuration; set ZFSNAS_E2E_MIRROR" >&2; exit 1; }
    echo "$uri"
}

recipe_hash() { (cd "$HERE" && cat image.sh $BAKED) | sha256sum | cut -c1-16; }

# Run a command in a chroot with /proc, /sys, /dev mounted; unmount afterwards.
in_chroot() {
    local root=$1; shift
    mount -t proc proc "$root/proc"
    mount -t sysfs sys "$root/sys"
    mount --bind /dev "$root/dev"
    mount --bind /dev/pts "$root/dev/pts"
    local rc=0
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@" || rc=$?
    umount "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc"
    return $rc
}

build_base() {
    local dir=$1 mirror=$2 tmp=$1.tmp
    rm -rf "$tmp"; mkdir -p "$tmp"
    log "debootstrap $SUITE from $mirror"
    debootstrap --variant=minbase --components=main,contrib "$SUITE" "$tmp" "$mirror" >"$tmp.log" 2>&1 \
        || { tail -30 "$tmp.log" >&2; exit 1; }
    printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"; chmod +x "$tmp/usr/sbin/policy-rc.d"
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$tmp/etc/apt/apt.conf.d/90zfsnas"
    printf 'path-exclude /usr/share/doc/*\npath-exclude /usr/share/man/*\npath-exclude /usr/share/locale/*\n' \
        >"$tmp/etc/dpkg/dpkg.cfg.d/90zfsnas"
    mkdir -p "$tmp/etc/initramfs-tools/conf.d"
    echo MODULES=list >"$tmp/etc/initramfs-tools/conf.d/zfsnas"
    echo "zfs-dkms zfs-dkms/note-incompatible-licenses note true" >"$tmp/root/debconf"
    log "base packages: $BASE_PACKAGES"
    in_chroot "$tmp" sh -c "debconf-set-selections /root/debconf && apt-get install -y -q $BASE_PACKAGES" >>"$tmp.log" 2>&1 \
        || { tail -30 "$tmp.log" >&2; exit 1; }
    # a machine id: no first-boot logic in the guests (systemd-firstboot would prompt on the console)
    in_chroot "$tmp" sh -c "systemd-machine-id-setup && systemctl mask $(echo $MASKED)" >>"$tmp.log" 2>&1 \
        || { tail -30 "$tmp.log" >&2; exit 1; }
    rm -rf "$dir"; mv "$tmp" "$dir"; mv "$tmp.log" "$dir.log"
}

build_flavour() {
    local flavour=$1 base=$2 out=$3 mirror=$4 root=$3.root
    local sources="deb $mirror $SUITE main contrib" target=""
    case "$flavour" in
        2.3) sources="$sources
deb $mirror $SUITE-backports main contrib"; target="-t $SUITE-backports" ;;
        2.1) ;;
        *) echo "image.sh: unknown flavour $flavour (2.3 or 2.1)" >&2; exit 2 ;;
    esac
    rm -rf "$root" "$out"; mkdir -p "$out"
    log "[$flavour] copy base"
    cp -a "$base" "$root"
    echo "$sources" >"$root/etc/apt/sources.list"
    log "[$flavour] kernel, headers, zfs-dkms, zfsutils-linux"
    in_chroot "$root" sh -c "apt-get update -q && apt-get install -y -q $target linux-image-amd64 linux-headers-amd64 \
        && apt-get install -y -q $target zfs-dkms zfsutils-linux" >"$out/build.log" 2>&1 \
        || { tail -40 "$out/build.log" >&2; exit 1; }
    local kver zver
    kver=$(ls "$root/lib/modules" | sort -V | tail -1)
    zver=$(ls -d "$root"/usr/src/zfs-* | sed 's|.*/zfs-||' | sort -V | tail -1)
    if ! ls "$root/lib/modules/$kver"/updates/dkms/zfs.ko* >/dev/null 2>&1; then
        log "[$flavour] dkms install zfs/$zver -k $kver"
        in_chroot "$root" dkms install "zfs/$zver" -k "$kver" >>"$out/build.log" 2>&1 \
            || { tail -40 "$out/build.log" >&2; exit 1; }
    fi
    ls "$root/lib/modules/$kver"/updates/dkms/zfs.ko* >/dev/null
    printf '%s\n' $INITRAMFS_MODULES >>"$root/etc/initramfs-tools/modules"
    in_chroot "$root" update-initramfs -u -k "$kver" >>"$out/build.log" 2>&1
    install -m 0755 "$HERE/guest/init" "$root/sbin/zfsnas-e2e-init"
    install -m 0644 "$HERE/guest/zfsnas-e2e.service" "$root/etc/systemd/system/zfsnas-e2e.service"
    mkdir -p "$root/mnt/share"
    echo guest >"$root/etc/hostname"
    cp "$root/boot/vmlinuz-$kver" "$out/vmlinuz"
    cp "$root/boot/initrd.img-$kver" "$out/initrd.img"
    # what the guest does not need at run time
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/src/* \
        "$root"/var/lib/dkms/zfs/*/build "$root"/boot/*
    local mb
    mb=$(( $(du -sm "$root" | cut -f1) + 400 ))
    log "[$flavour] ext4 root of $mb MiB"
    mkfs.ext4 -q -F -L root -d "$root" "$out/root.img" "${mb}M"
    qemu-img convert -O qcow2 "$out/root.img" "$out/root.qcow2"
    rm -f "$out/root.img"
    {
        echo "flavour=$flavour"; echo "kernel=$kver"; echo "zfs=$zver"; echo "mirror=$mirror"
        echo "built=$(date -u +%FT%TZ)"
    } >"$out/info"
    rm -rf "$root"
}

cached() {
    local out
    out="$CACHE/zfs-$1-$(recipe_hash)"
    [ -f "$out/info" ] && [ -f "$out/root.qcow2" ] || exit 1
    touch "$out/used"
    echo "$out"
}

main() {
    if [ "${1:-}" = "--cached" ]; then cached "$2"; return; fi
    [ $# -gt 0 ] || set -- 2.3 2.1
    [ "$(id -u)" -eq 0 ] || { echo "image.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
    mkdir -p "$CACHE"
    local hash mirror base
    hash=$(recipe_hash)
    mirror=$(host_mirror)
    base="$CACHE/base-$hash"
    exec 9>"$CACHE/.lock"; flock 9
    for flavour in "$@"; do
        local out="$CACHE/zfs-$flavour-$hash"
        if [ -f "$out/info" ] && [ -f "$out/root.qcow2" ]; then
            log "[$flavour] cached: $out"
            touch "$out/used"
        else
            local t0=$SECONDS
            if [ ! -d "$base" ]; then
                build_base "$base" "$mirror"
                log "base built in $((SECONDS - t0)) s"
                echo "base_seconds=$((SECONDS - t0))" >"$base.time"
            fi
            local t1=$SECONDS
            build_flavour "$flavour" "$base" "$out" "$mirror"
            echo "build_seconds=$((SECONDS - t1))" >>"$out/info"
            touch "$out/used"
            log "[$flavour] built in $((SECONDS - t1)) s: $out"
        fi
        echo "$out"
    done
    # Other recipes' images, once unused for KEEP_DAYS: another checkout (a branch with its own
    # recipe, a build still running) may be using them now.
    local old
    for old in "$CACHE"/zfs-*; do
        [ -d "$old" ] && [[ $old != *"$hash"* ]] || continue
        if [ -z "$(find "$old" -maxdepth 1 -name used -mtime -$KEEP_DAYS)" ] && [ -z "$(find "$old" -maxdepth 0 -mmin -600)" ]; then
            rm -rf "$old" "$old.root"
        fi
    done
    for old in "$CACHE"/base-*; do
        [ -e "$old" ] && [[ $old != *"$hash"* ]] || continue
        [ -n "$(find "$old" -maxdepth 0 -mtime -$KEEP_DAYS)" ] || rm -rf "$old"
    done
}

main "$@"
