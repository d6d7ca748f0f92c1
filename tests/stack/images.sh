#!/usr/bin/env bash
# Build (or reuse) the container images of the stack test from local material, no image registry:
#   tests/stack/images.sh            prints one NAME=image line per image (docker-compose.yml's variables)
# A Debian 12 tree made by `debootstrap --variant=minbase` with python3 is `docker import`ed as the
# exporter's base, and with Debian's prometheus, prometheus-alertmanager and prometheus-node-exporter
# added as the daemons' base; images/<name>.Dockerfile turn that into one image per daemon, shaped
# like the upstream images the compose file names (entrypoint, user nobody, data directory). The
# exporter is built from the repo's own Dockerfile with --build-arg BASE=<the exporter's base>.
# Images are tagged with a hash of their recipe (package lists, build_base, images/*), so a warm
# run only checks that the tags exist; the exporter's build is Docker's layer cache (under 1 s
# when the source is unchanged). Needs root, debootstrap and a running dockerd.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
WORK=${ZFSNAS_STACK_CACHE:-/var/cache/zfsnas-stack}
BASE_PACKAGES="python3 python3-venv wget"   # the exporter's base: small enough to carry into a QEMU guest
DAEMON_PACKAGES="prometheus prometheus-alertmanager prometheus-node-exporter"

log() { printf '%s images.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The key of the cached images: what makes them (the package list, build_base, images/*), not the
# rest of this script.
recipe_hash() { { echo "$BASE_PACKAGES $DAEMON_PACKAGES"; declare -f build_base; cat "$HERE"/images/*; } | sha256sum | cut -c1-12; }

# The Debian mirror the host's apt uses (or $ZFSNAS_E2E_MIRROR, as for the QEMU images).
mirror() {
    [ -n "${ZFSNAS_E2E_MIRROR:-}" ] && { echo "$ZFSNAS_E2E_MIRROR"; return; }
    apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2 == "bookworm" { print $1; exit }'
}

# Two imported bases from one debootstrap tree: the exporter's ($1: Python) and the daemons' ($2:
# the same tree with Debian's Prometheus packages added by apt in a chroot).
build_base() {
    local slim=$1 daemons=$2 tree=$WORK/base.tmp m
    m=$(mirror); [ -n "$m" ] || { echo "images.sh: no bookworm mirror in apt's sources; set ZFSNAS_E2E_MIRROR" >&2; exit 1; }
    rm -rf "$tree"; mkdir -p "$WORK"
    log "debootstrap bookworm from $m with $BASE_PACKAGES"
    # Nothing may start in the tree: policy-rc.d answers 101 for every package's service.
    mkdir -p "$tree/usr/sbin"; printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"; chmod +x "$tree/usr/sbin/policy-rc.d"
    debootstrap --variant=minbase --include="${BASE_PACKAGES// /,}" bookworm "$tree" "$m" >"$WORK/base.log" 2>&1 \
        || { tail -30 "$WORK/base.log" >&2; exit 1; }
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/usr/share/doc "$tree"/usr/share/man
    log "docker import $slim"
    tar -C "$tree" --exclude=./var/lib/apt/lists -c . | "$DOCKER" import - "$slim" >/dev/null
    log "apt-get install $DAEMON_PACKAGES"
    cp /etc/resolv.conf "$tree/etc/resolv.conf"
    mount -t proc proc "$tree/proc"
    local rc=0
    chroot "$tree" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get update -q && apt-get install -y -q --no-install-recommends $DAEMON_PACKAGES" >>"$WORK/base.log" 2>&1 || rc=$?
    umount "$tree/proc"
    [ $rc -eq 0 ] || { tail -30 "$WORK/base.log" >&2; exit 1; }
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/* "$tree"/usr/share/doc "$tree"/usr/share/man
    log "docker import $daemons"
    tar -C "$tree" -c . | "$DOCKER" import - "$daemons" >/dev/null
    rm -rf "$tree"
}

# The exporter from the repo's Dockerfile on the local base. Its build context is the checkout's
# package plus wheels/: the build requirement and dependencies, fetched on the host by pip (cached,
# keyed by pyproject.toml), because the build container reaches no index.
build_exporter() {
    local base=$1 context=$WORK/exporter-context wheels
    wheels=$WORK/wheels-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-12)
    if [ ! -d "$wheels" ]; then
        log "pip wheel the exporter's dependencies into $wheels"
        rm -rf "$wheels.tmp"
        "${PYTHON:-python3}" -m pip wheel -q --wheel-dir "$wheels.tmp" "$ROOT" "setuptools>=77" >&2
        rm -f "$wheels.tmp"/zfsnas-*.whl   # the package itself is built in the image, from the source
        mv "$wheels.tmp" "$wheels"
    fi
    rm -rf "$context"; mkdir -p "$context"
    cp -a "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/exporter" "$ROOT/.dockerignore" "$context/"
    mkdir -p "$context/alerts"; cp -a "$ROOT/alerts/thresholds.toml" "$context/alerts/"   # a data file of the wheel
    cp -a "$wheels" "$context/wheels"
    log "build zfsnas-exporter from the repo's Dockerfile on $base"
    local previous
    previous=$("$DOCKER" image inspect -f '{{.Id}}' zfsnas-stack/zfsnas-exporter:test 2>/dev/null || true)
    "$DOCKER" build -q --build-arg "BASE=$base" --build-arg "PIP_OPTIONS=--no-index --find-links=wheels" \
        -t zfsnas-stack/zfsnas-exporter:test -f "$ROOT/Dockerfile" "$context" >/dev/null
    # the image of the previous source, now untagged, is ours to drop
    if [ -n "$previous" ] && [ "$previous" != "$("$DOCKER" image inspect -f '{{.Id}}' zfsnas-stack/zfsnas-exporter:test)" ]; then
        "$DOCKER" rmi "$previous" >/dev/null 2>&1 || true
    fi
}

have() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

main() {
    local hash base name
    hash=$(recipe_hash)
    base=zfsnas-stack/debian:bookworm-$hash
    daemons=zfsnas-stack/debian-prometheus:bookworm-$hash
    have "$base" && have "$daemons" || build_base "$base" "$daemons"
    for file in "$HERE"/images/*.Dockerfile; do
        name=$(basename "$file" .Dockerfile)
        if ! have "zfsnas-stack/$name:$hash"; then
            log "build zfsnas-stack/$name:$hash"
            "$DOCKER" build -q --build-arg "BASE=$daemons" -t "zfsnas-stack/$name:$hash" -f "$file" "$HERE/images" >/dev/null
        fi
    done
    build_exporter "$base"
    echo "ZFSNAS_EXPORTER_IMAGE=zfsnas-stack/zfsnas-exporter:test"
    echo "NODE_EXPORTER_IMAGE=zfsnas-stack/node-exporter:$hash"
    echo "PROMETHEUS_IMAGE=zfsnas-stack/prometheus:$hash"
    echo "ALERTMANAGER_IMAGE=zfsnas-stack/alertmanager:$hash"
}

main "$@"
