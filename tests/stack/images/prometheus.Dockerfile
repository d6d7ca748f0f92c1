# Shaped like prom/prometheus: the binary as entrypoint, user nobody, data in /prometheus.
ARG BASE
FROM ${BASE}
RUN mkdir -p /prometheus /etc/prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
