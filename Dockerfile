# zfsnas-exporter image: the wheel of this checkout in a venv on Debian 12's Python.
# The host's zfs/zpool run through `nsenter --target 1 --mount --` (util-linux, in the base image),
# so the image carries no ZFS userland of its own that could disagree with the host's kernel module.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY exporter ./exporter
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
COPY --from=build /wheels /wheels
RUN python -m venv /opt/zfsnas && /opt/zfsnas/bin/pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
EXPOSE 9923
ENTRYPOINT ["/opt/zfsnas/bin/zfsnas-exporter"]
CMD ["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--zfs.command-prefix=nsenter --target 1 --mount --"]
