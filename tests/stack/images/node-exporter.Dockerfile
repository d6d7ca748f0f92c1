# Shaped like quay.io/prometheus/node-exporter: the binary as entrypoint, user nobody.
ARG BASE
FROM ${BASE}
USER nobody
EXPOSE 9100
ENTRYPOINT ["/usr/bin/prometheus-node-exporter"]
