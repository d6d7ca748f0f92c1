# zfsnas-exporter image: the package of this checkout in a venv at /opt/zfsnas.
# The host's zfs/zpool run through `nsenter --target 1 --mount --` (util-linux, in every Debian base),
# so the image carries no ZFS userland of its own that could disagree with the host's kernel module.
#   docker build -t zfsnas-exporter .                       from the python image of a registry
#   docker build --build-arg BASE=<debian 12 image with python3-venv> \
#                --build-arg PIP_OPTIONS="--no-index --find-links=wheels" <context with wheels/>
#                                                            without a registry (tests/stack/images.sh)
ARG BASE=python:3.11.11-slim-bookworm

FROM ${BASE} AS build
ARG PIP_OPTIONS=
WORKDIR /src
COPY . .
RUN python3 -m venv /opt/zfsnas && /opt/zfsnas/bin/pip install --no-cache-dir $PIP_OPTIONS .

FROM ${BASE}
COPY --from=build /opt/zfsnas /opt/zfsnas
# Unprivileged by default; docker-compose.yml says which user the live-ZFS setup needs and why.
USER nobody
EXPOSE 9923
ENTRYPOINT ["/opt/zfsnas/bin/zfsnas-exporter"]
CMD ["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--zfs.command-prefix=nsenter --target 1 --mount --"]
