#!/usr/bin/env bash
# Build (or reuse) the container images of the stack test from local material, no image registry:
#   tests/stack/images.sh            prints one NAME=image line per image (docker-compose.yml's variables)
# A Debian 12 tree made by `debootstrap --variant=minbase` with Debian's prometheus,
# prometheus-alertmanager, prometheus-node-exporter and python3 is `docker import`ed as the base;
# images/<name>.Dockerfile turn it into one image per daemon, shaped like the upstream images the
# compose file names (same entrypoint, user nobody, data directory). The exporter is built from the
# repo's own Dockerfile with --build-arg BASE=<that base>. Images are tagged with a hash of this
# recipe (the base's package list and build steps, images/*), so a warm run only checks that the tags exist; the exporter's
# build is Docker's layer cache. Needs root, debootstrap and a running dockerd.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
WORK=${ZFSNAS_STACK_CACHE:-/var/cache/zfsnas-stack}
PACKAGES="python3 python3-venv wget prometheus prometheus-alertmanager prometheus-node-exporter"

log() { printf '%s images.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The key of the cached images: what makes them (the package list, build_base, images/*), not the
# rest of this script.
recipe_hash() { { echo "$PACKAGES"; declare -f build_base; cat "$HERE"/images/*; } | sha256sum | cut -c1-12; }

# The Debian mirror the host's apt uses (or $ZFSNAS_E2E_MIRROR, as for the QEMU images).
mirror() {
    [ -n "${ZFSNAS_E2E_MIRROR:-}" ] && { echo "$ZFSNAS_E2E_MIRROR"; return; }
    apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2 == "bookworm" { print $1; exit }'
}

build_base() {
    local tag=$1 tree=$WORK/base.tmp m
    m=$(mirror); [ -n "$m" ] || { echo "images.sh: no bookworm mirror in apt's sources; set ZFSNAS_E2E_MIRROR" >&2; exit 1; }
    rm -rf "$tree"; mkdir -p "$WORK"
    log "debootstrap bookworm from $m with $PACKAGES"
    # Nothing may start in the tree: policy-rc.d answers 101 for every package's service.
    mkdir -p "$tree/usr/sbin"; printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"; chmod +x "$tree/usr/sbin/policy-rc.d"
    debootstrap --variant=minbase --include="${PACKAGES// /,}" bookworm "$tree" "$m" >"$WORK/base.log" 2>&1 \
        || { tail -30 "$WORK/base.log" >&2; exit 1; }
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/* "$tree"/usr/share/doc "$tree"/usr/share/man
    log "docker import $tag"
    tar -C "$tree" -c . | "$DOCKER" import - "$tag" >/dev/null
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
    cp -a "$wheels" "$context/wheels"
    log "build zfsnas-exporter from the repo's Dockerfile on $base"
    "$DOCKER" build -q --build-arg "BASE=$base" --build-arg "PIP_OPTIONS=--no-index --find-links=wheels" \
        -t zfsnas-stack/zfsnas-exporter:test -f "$ROOT/Dockerfile" "$context" >/dev/null
}

have() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

main() {
    local hash base name
    hash=$(recipe_hash)
    base=zfsnas-stack/debian:bookworm-$hash
    have "$base" || build_base "$base"
    for file in "$HERE"/images/*.Dockerfile; do
        name=$(basename "$file" .Dockerfile)
        if ! have "zfsnas-stack/$name:$hash"; then
            log "build zfsnas-stack/$name:$hash"
            "$DOCKER" build -q --build-arg "BASE=$base" -t "zfsnas-stack/$name:$hash" -f "$file" "$HERE/images" >/dev/null
        fi
    done
    build_exporter "$base"
    echo "ZFSNAS_EXPORTER_IMAGE=zfsnas-stack/zfsnas-exporter:test"
    echo "NODE_EXPORTER_IMAGE=zfsnas-stack/node-exporter:$hash"
    echo "PROMETHEUS_IMAGE=zfsnas-stack/prometheus:$hash"
    echo "ALERTMANAGER_IMAGE=zfsnas-stack/alertmanager:$hash"
}

main "$@"
