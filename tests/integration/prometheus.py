"""A real Prometheus (Debian's `prometheus` package) on 127.0.0.1 for tests: start, query, stop."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.integration.daemon import stop_process, wait_ready
from tests.integration.exporter_process import ExporterProcess


def prometheus_binary() -> str:
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(binary).exists():
        pytest.fail("prometheus is not installed: run ./dev test, which installs Debian's prometheus package")
    return binary


class QueryApi:
    """The Prometheus HTTP query API at `self.url` (Prometheus itself, or a store that speaks it)."""

    url: str

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=20) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:  # Prometheus says why in the body (bad_data, execution)
            exc.msg = f"{exc.msg}: {exc.read().decode(errors='replace')[:500]}"  # still an OSError: 503 while starting
            raise
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, **params) -> list[dict]:
        return self.api("query", query=expr, **params)["result"]

    def wait_for(self, expr: str, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result:
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr} returned nothing from {self.url} within {timeout}s")

    def wait_for_samples(self, selector: str, window: str, samples: int, timeout: float = 120) -> None:
        """Until every series of `selector` (a plain series selector) has at least `samples` samples in
        the last `window`: the history a rate() or *_over_time() over that window needs before its
        value is checked (rather than a pause that hopes the scrapes came: a busy machine delays them)."""
        self.wait_for(f"min(count_over_time({selector}[{window}])) >= {samples}", timeout)


class PrometheusClient(QueryApi):
    """The HTTP API of a Prometheus at `url`, however it was started (a process here, a container)."""

    def __init__(self, url: str):
        self.url = url

    def scalar(self, expr: str) -> float:
        result = self.query(expr)
        assert len(result) == 1, f"{expr} returned {len(result)} series: {result}"
        return float(result[0]["value"][1])


class Prometheus(PrometheusClient):
    """`targets`: addresses scraped as job `zfsnas` (with `target_labels`), or a dict of address ->
    the labels of that target alone."""

    def __init__(self, workdir: Path, port: int, targets: list[str] | dict[str, dict], scrape_interval: str = "1s",
                 rule_files: list[str] | None = None, extra_config: str = "", target_labels: dict | None = None,
                 evaluation_interval: str | None = None):
        self.url = f"http://127.0.0.1:{port}"
        workdir.mkdir(parents=True, exist_ok=True)
        rules = "".join(f"  - {f}\n" for f in rule_files or [])
        groups = targets.items() if isinstance(targets, dict) else [(", ".join(repr(t) for t in targets), target_labels)]
        static = "".join(f"      - targets: [{t if not isinstance(targets, dict) else repr(t)}]\n"
                         + (f"        labels: {json.dumps(labels)}\n" if labels else "") for t, labels in groups)
        config = (f"global:\n  scrape_interval: {scrape_interval}\n"
                  f"  evaluation_interval: {evaluation_interval or scrape_interval}\n"
                  + (f"rule_files:\n{rules}" if rules else "")
                  + "scrape_configs:\n  - job_name: zfsnas\n    static_configs:\n" + static
                  + extra_config)
        (workdir / "prometheus.yml").write_text(config)
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([prometheus_binary(), f"--config.file={workdir / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={workdir / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{port}"],
                                     stdout=self._log, stderr=self._log)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30) -> None:
        wait_ready(self.proc, self.url + "/-/ready", self.log_path, timeout)

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


@contextmanager
def exporter_and_prometheus(workdir: Path, *flags: str, wait_up: bool = True,
                            **prometheus_options) -> Iterator[tuple[ExporterProcess, Prometheus]]:
    """The exporter process with `flags` and a Prometheus scraping it every second (job `zfsnas`),
    both on free ports with their logs under `workdir`; with `wait_up`, the block starts once
    Prometheus has scraped the exporter. Both are stopped whatever happens in the block."""
    started: list = []
    try:
        exporter = ExporterProcess(free_port(), *flags, log_path=workdir / "exporter.log")
        started.append(exporter)
        exporter.wait_ready()
        prom = Prometheus(workdir / "prom", free_port(), [f"127.0.0.1:{exporter.port}"], **prometheus_options)
        started.append(prom)
        if wait_up:
            prom.wait_for('up{job="zfsnas"} == 1')
        yield exporter, prom
    finally:
        for daemon in reversed(started):
            daemon.stop()
