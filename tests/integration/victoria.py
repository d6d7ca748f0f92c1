"""Debian's VictoriaMetrics (`victoria-metrics` package: the single-node store and `vmalert`) on
127.0.0.1 for tests, plus Prometheus in agent mode remote-writing to it: start, query, stop by PID."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from tests.integration.daemon import Daemon
from tests.integration.prometheus import QueryApi, prometheus_binary


class VictoriaMetrics(QueryApi, Daemon):
    """The central store: Prometheus remote_write in at /api/v1/write, PromQL (MetricsQL) out."""

    def __init__(self, workdir: Path, port: int):
        self.workdir, self.port = workdir, port
        self.url = f"http://127.0.0.1:{port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.start()

    def start(self) -> None:
        # latencyOffset: by default the newest 30 s are hidden from queries (samples still arriving);
        # the tests write every second and read at once. The cache would serve results of a moment ago.
        super().__init__(["victoria-metrics", f"-storageDataPath={self.workdir / 'data'}",
                          f"-httpListenAddr=127.0.0.1:{self.port}", "-retentionPeriod=1d",
                          "-search.latencyOffset=0s", "-search.disableCache"],
                         self.workdir / f"victoria-metrics-{time.monotonic_ns()}.log", self.url + "/health")


class Vmalert(Daemon):
    """Evaluates rule files centrally: queries the store, writes recorded series and ALERTS back,
    sends alerts to Alertmanager."""

    def __init__(self, workdir: Path, port: int, store: str, alertmanager: str, rule_files: list[Path]):
        super().__init__(["vmalert", f"-httpListenAddr=127.0.0.1:{port}", f"-datasource.url={store}",
                          f"-remoteWrite.url={store}", f"-remoteRead.url={store}", f"-notifier.url={alertmanager}",
                          "-evaluationInterval=1s", "-remoteWrite.flushInterval=1s",
                          *[f"-rule={path}" for path in rule_files]],
                         workdir / "vmalert.log", f"http://127.0.0.1:{port}/health")
        self.url = f"http://127.0.0.1:{port}"

    def groups(self) -> list[dict]:
        with urllib.request.urlopen(self.url + "/api/v1/rules", timeout=10) as response:
            return json.load(response)["data"]["groups"]


class PrometheusAgent(Daemon):
    """One NAS's Prometheus in agent mode: scrapes, keeps a WAL, remote-writes; no local queries or rules."""

    def __init__(self, workdir: Path, port: int, nas: str, scrape_configs: str, remote_write_url: str):
        workdir.mkdir(parents=True, exist_ok=True)
        self.url = f"http://127.0.0.1:{port}"
        config = workdir / "prometheus.yml"
        config.write_text(agent_config(nas, scrape_configs, remote_write_url))
        super().__init__([prometheus_binary(), "--enable-feature=agent", f"--config.file={config}",
                          f"--storage.agent.path={workdir / 'wal'}", f"--web.listen-address=127.0.0.1:{port}"],
                         workdir / "prometheus.log", self.url + "/-/ready")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            return response.read().decode()


def agent_config(nas: str, scrape_configs: str, remote_write_url: str) -> str:
    """The recipe of docs/stack.md (many NAS), with a 1 s scrape and a 1 s send deadline for the test."""
    return (f"global:\n  scrape_interval: 1s\n  external_labels:\n    nas: {nas}\n"
            f"scrape_configs:\n{scrape_configs}"
            f"remote_write:\n  - url: {remote_write_url}\n    queue_config:\n      batch_send_deadline: 1s\n"
            f"      min_backoff: 100ms\n      max_backoff: 1s\n")
