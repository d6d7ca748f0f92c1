"""The Grafana annotation client against a server enforcing Grafana's contract, failures included."""

import logging

import pytest

from zfsnas.bench.running.annotate import AnnotationError, Annotator, GrafanaClient, load_token
from zfsnas.store.database import Store

from .configs import configuration
from .conftest import free_port_url
from .grafana import FakeGrafana

TOKEN = "glsa_secretTOKEN_1234567890"
CONFIG = configuration(encryption="aes-256-gcm", parameters={"zfs_dirty_data_max": "1073741824"},
                       swept=("zfs_dirty_data_max",))
T0 = 1_795_000_000_000


@pytest.fixture
def grafana():
    with FakeGrafana(TOKEN) as server:
        yield server


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "bench.sqlite")
    s.start_matrix("run1", "m", "tank/scratch", 1)
    yield s
    s.close()


def result(store) -> int:
    return store.start_result("run1", 1, CONFIG, 1, "tank/scratch/zfsnas-bench-run1-1")


def test_post_and_patch_make_a_region(grafana, store):
    rid = result(store)
    annotator = Annotator(store, GrafanaClient(grafana.url, TOKEN))
    annotator.start(rid, T0, CONFIG, "run1", "seq-write running")
    aid = store.db.execute("SELECT annotation_id FROM results WHERE id=?", (rid,)).fetchone()[0]
    # The same configuration as the exporter's labels (encryption and matrix included, so encrypted and
    # plain runs differ), and the parameter the matrix changed.
    assert grafana.annotations[aid] == {"time": T0, "text": "seq-write running", "tags": [
        "zfsnas-bench", "matrix:m", "workload:seq-write", f"config:{CONFIG.id}", "compression:lz4",
        "recordsize:1M", "encryption:aes-256-gcm", "size:16G", "pool:tank", "zfs_dirty_data_max:1073741824",
        "run:run1"]}
    assert len(CONFIG.id) == 12 and CONFIG.id != configuration().id
    annotator.finish(rid, aid, T0, T0 + 60_000, CONFIG, "run1", "412.0 MB/s, ratio 1.48")
    assert grafana.annotations[aid]["timeEnd"] == T0 + 60_000
    assert grafana.annotations[aid]["text"] == "412.0 MB/s, ratio 1.48"
    assert [(m, p) for m, p, _, _ in grafana.requests] == [("POST", "/api/annotations"), ("PATCH", f"/api/annotations/{aid}")]
    assert all(h["Authorization"] == f"Bearer {TOKEN}" for _, _, h, _ in grafana.requests)
    assert store.pending_annotations() == []


def test_wrong_token_is_401(grafana):
    with pytest.raises(AnnotationError, match="HTTP 401"):
        GrafanaClient(grafana.url, "wrong").post({"text": "x", "time": T0})
    with pytest.raises(AnnotationError, match="HTTP 401"):
        GrafanaClient(grafana.url, None).post({"text": "x", "time": T0})


def test_contract_violations_are_rejected_by_the_server(grafana):
    client = GrafanaClient(grafana.url, TOKEN)
    with pytest.raises(AnnotationError, match="HTTP 400"):
        client.post({"time": T0})                          # no text
    with pytest.raises(AnnotationError, match="HTTP 400"):
        client.post({"text": "x", "time": T0 // 1000})     # seconds, not milliseconds
    with pytest.raises(AnnotationError, match="HTTP 404"):
        client.patch(999, {"text": "x"})


def test_failures_are_queued_then_retried(grafana, store, caplog):
    caplog.set_level(logging.DEBUG)
    rid = result(store)
    annotator = Annotator(store, GrafanaClient(grafana.url, TOKEN))
    grafana.fail_next = 1
    annotator.start(rid, T0, CONFIG, "run1", "running")         # 500: queued
    annotator.finish(rid, None, T0, T0 + 5000, CONFIG, "run1", "done 100 MB/s")
    [queued] = store.pending_annotations()
    assert queued.method == "POST" and "HTTP 500" in queued.last_error
    assert grafana.annotations == {}
    assert annotator.retry() == (1, 0)
    [(aid, region)] = grafana.annotations.items()
    assert region["time"] == T0 and region["timeEnd"] == T0 + 5000 and region["text"] == "done 100 MB/s"
    assert store.db.execute("SELECT annotation_id FROM results WHERE id=?", (rid,)).fetchone()[0] == aid
    assert store.pending_annotations() == []
    # The token is never logged nor stored.
    assert TOKEN not in caplog.text
    dump = "\n".join(store.db.iterdump())
    assert TOKEN not in dump and "Bearer" not in dump


def test_patch_failure_is_queued(grafana, store):
    rid = result(store)
    annotator = Annotator(store, GrafanaClient(grafana.url, TOKEN))
    annotator.start(rid, T0, CONFIG, "run1", "running")
    aid = next(iter(grafana.annotations))
    grafana.fail_next = 1
    annotator.finish(rid, aid, T0, T0 + 7000, CONFIG, "run1", "done")
    assert "timeEnd" not in grafana.annotations[aid]
    assert annotator.retry() == (1, 0)
    assert grafana.annotations[aid]["timeEnd"] == T0 + 7000


def test_grafana_down_and_slow(store):
    down = GrafanaClient(free_port_url(), TOKEN, timeout=1)
    rid = result(store)
    Annotator(store, down).start(rid, T0, CONFIG, "run1", "running")
    assert len(store.pending_annotations()) == 1
    with FakeGrafana(TOKEN) as slow:
        slow.delay = 2
        with pytest.raises(AnnotationError, match="timed out|TimeoutError"):
            GrafanaClient(slow.url, TOKEN, timeout=0.5).post({"text": "x", "time": T0})
        slow.delay = 0
        # Retried later against the URL given now (the stored one is down).
        sent, failed = Annotator(store, GrafanaClient(slow.url, TOKEN)).retry(slow.url)
        # The timed-out "x" is still stored by the fake once its 2 s pass (its handler thread sleeps
        # on): whether before or after the retry depends on the machine's load, so it is left out.
        retried = [a for a in slow.annotations.values() if a["text"] != "x"]
        assert (sent, failed) == (1, 0) and len(retried) == 1


def test_retry_keeps_failures_queued(store):
    rid = result(store)
    client = GrafanaClient(free_port_url(), TOKEN, timeout=1)
    annotator = Annotator(store, client)
    annotator.start(rid, T0, CONFIG, "run1", "running")
    assert annotator.retry() == (0, 1)
    [row] = store.pending_annotations()
    assert row.attempts == 2


def test_token_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("ZFSNAS_GRAFANA_TOKEN", raising=False)
    (tmp_path / "t").write_text(TOKEN + "\n")
    assert load_token(None, str(tmp_path / "t")) == TOKEN
    assert load_token("flag", None) == "flag"
    monkeypatch.setenv("ZFSNAS_GRAFANA_TOKEN", "env")
    assert load_token("flag", None) == "env"


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_no_credentials_across_origins(grafana, code):
    """A redirect to another origin (here: the same host, another port) gets no Authorization;
    what the redirect target receives is read on a second real server."""
    with FakeGrafana(TOKEN) as elsewhere:
        grafana.redirect(code, "/api", elsewhere.url + "/api")
        with pytest.raises(AnnotationError, match="HTTP 401"):   # elsewhere wants a token it never got
            GrafanaClient(grafana.url, TOKEN).post({"text": "x", "time": T0})
        [(method, path, headers, _)] = elsewhere.requests
        assert path == "/api/annotations"
        assert "Authorization" not in headers and "Cookie" not in headers
        # 307/308 keep the method and body; urllib turns a redirected POST into a GET for the others.
        assert method == ("POST" if code in (307, 308) else "GET")
        assert elsewhere.annotations == {}
    assert grafana.requests[0][2]["Authorization"] == f"Bearer {TOKEN}"   # the origin asked got it


@pytest.mark.parametrize("code", [307, 308])
def test_same_origin_redirect_keeps_authenticating(grafana, code):
    grafana.redirect(code, "/grafana/", "/")        # Grafana moved from a sub-path on the same origin
    client = GrafanaClient(grafana.url + "/grafana", TOKEN)
    aid = client.post({"text": "moved", "time": T0})
    client.patch(aid, {"timeEnd": T0 + 1000})
    assert grafana.annotations[aid] == {"text": "moved", "time": T0, "timeEnd": T0 + 1000}
    assert [(m, p) for m, p, _, _ in grafana.requests] == [
        ("POST", "/grafana/api/annotations"), ("POST", "/api/annotations"),
        ("PATCH", f"/grafana/api/annotations/{aid}"), ("PATCH", f"/api/annotations/{aid}")]
    assert all(h["Authorization"] == f"Bearer {TOKEN}" for _, _, h, _ in grafana.requests)


def test_origins_compared_by_scheme_host_and_port():
    from zfsnas.bench.running.annotate import same_origin

    assert same_origin("http://grafana:3000/a", "http://GRAFANA:3000/b?x")
    assert same_origin("https://g.example/a", "https://g.example:443/b")
    assert same_origin("http://g.example/a", "http://g.example:80/b")
    assert not same_origin("http://127.0.0.1:3000/", "http://127.0.0.1:3001/")
    assert not same_origin("https://g.example/", "http://g.example/")
    assert not same_origin("http://g.example/", "http://g.example.evil/")
    assert not same_origin("http://localhost:3000/", "http://127.0.0.1:3000/")
