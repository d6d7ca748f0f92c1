# Shaped like prom/alertmanager: the binary as entrypoint, user nobody, data in /alertmanager.
ARG BASE
FROM ${BASE}
RUN mkdir -p /alertmanager /etc/alertmanager && chown nobody:nogroup /alertmanager
USER nobody
WORKDIR /alertmanager
EXPOSE 9093
ENTRYPOINT ["/usr/bin/prometheus-alertmanager"]
