"""The run server (deploy/dashboard/server.py) and its client: routes, the token rule,
loopback by default. A real HTTP server on a free loopback port; the run behind it is a
fixed RunStatus and a History fed by hand (our own seams)."""

from __future__ import annotations

import json
import socket
import stat
import urllib.error
import urllib.request

import pytest

from zeroforge.deploy.dashboard.client import RunClient, RunClientError
from zeroforge.deploy.dashboard.history import History
from zeroforge.deploy.dashboard.server import (
    TOKEN_FILE,
    RunServer,
    is_loopback,
    page_url,
    read_token,
)
from zeroforge.deploy.runtime.status import RunStatus


def _status() -> RunStatus:
    return RunStatus(run_id="srv", state="running", elapsed_s=12.5, games=40.0,
                     losses={"total": 1.5, "policy": 1.0, "value": 0.5},
                     actors=[{"kind": "learner", "index": 0, "state": "alive"}])


def _history() -> History:
    history = History("srv", 1000.0)
    history.add(2.0, {"learner_steps_total": 5.0})
    history.add(4.0, {"learner_steps_total": 9.0, 'actors_alive{kind="learner"}': 1.0})
    return history


@pytest.fixture
def server():
    srv = RunServer(_status, _history()).start()
    yield srv
    srv.close()


def _get(url: str, headers: dict | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read()


def test_loopback_by_default_without_token(server):
    assert server.url.startswith("http://127.0.0.1:") and server.token is None
    assert server._httpd.server_address[0] == "127.0.0.1"


def test_routes(server):
    code, ctype, body = _get(server.url)
    assert code == 200 and ctype.startswith("text/html")
    assert b'src="/static/plotly.min.js"' in body and b"{{QS}}" not in body
    code, ctype, body = _get(server.url + "static/plotly.min.js")
    assert code == 200 and "javascript" in ctype and len(body) > 1_000_000
    code, _, body = _get(server.url + "static/dashboard.js")
    assert code == 200 and b"zfDashboard" in body
    code, ctype, body = _get(server.url + "api/status")
    data = json.loads(body)
    assert code == 200 and ctype == "application/json"
    assert data["run_id"] == "srv" and data["games"] == 40.0
    assert data["dashboard_url"] == server.url
    assert data["actors"][0]["kind"] == "learner"
    code, _, body = _get(server.url + "api/history")
    hist = json.loads(body)
    assert hist["run_id"] == "srv" and hist["started"] == 1000.0 and hist["t"] == [2.0, 4.0]
    assert hist["series"]['actors_alive{kind="learner"}'] == [None, 1.0]
    code, _, body = _get(server.url + "api/history?since=2")
    assert json.loads(body)["t"] == [4.0]
    code, _, body = _get(server.url + "api/history?since=soon")
    assert code == 400 and "since" in json.loads(body)["error"]
    code, _, body = _get(server.url + "nope")
    assert code == 404 and "error" in json.loads(body)


def test_client(server):
    client = RunClient(server.url)
    st = client.status()
    assert st.run_id == "srv" and st.losses["total"] == 1.5
    assert client.history()["t"] == [2.0, 4.0]
    assert client.history(since=2.0)["t"] == [4.0]


def test_client_errors_are_one_line():
    with pytest.raises(ValueError, match="not a run server URL"):
        RunClient("localhost:80")
    srv = RunServer(_status, _history()).start()
    url = srv.url
    srv.close()
    with pytest.raises(RunClientError, match="cannot reach the run server") as err:
        RunClient(url, timeout_s=2).status()
    assert "\n" not in str(err.value)


def test_a_token_is_required_when_one_is_set():
    srv = RunServer(_status, _history(), token="s3cret").start()
    try:
        for path in ("", "api/status", "api/history", "static/plotly.min.js"):
            code, ctype, body = _get(srv.url + path)
            assert code == 401 and ctype == "application/json", path
            assert "token" in json.loads(body)["error"]
            assert b"s3cret" not in body
        assert _get(srv.url + "api/status", {"Authorization": "Bearer wrong"})[0] == 401
        assert _get(srv.url + "api/status", {"Authorization": "Bearer s3cret"})[0] == 200
        assert _get(srv.url + "api/status?token=s3cret")[0] == 200
        # the page passes its token on to the scripts it loads
        code, _, body = _get(srv.url + "?token=s3cret")
        assert code == 200 and b"/static/dashboard.js?token=s3cret" in body
        assert "s3cret" not in srv.url and srv.url_with_token().endswith("?token=s3cret")
        with pytest.raises(RunClientError, match="HTTP 401"):
            RunClient(srv.url).status()
        assert RunClient(srv.url, token="s3cret").status().run_id == "srv"
    finally:
        srv.close()


def test_a_non_loopback_bind_generates_a_private_token(tmp_path):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    with pytest.raises(ValueError, match="needs a token"):
        RunServer(_status, _history(), host="0.0.0.0")
    srv = RunServer(_status, _history(), host="0.0.0.0", run_dir=tmp_path).start()
    try:
        path = tmp_path / TOKEN_FILE
        assert srv.token_path == path and stat.S_IMODE(path.stat().st_mode) == 0o600
        assert read_token(path) == srv.token and len(srv.token) >= 24
        assert srv.token not in srv.url
        port = srv.port
        assert _get(f"http://127.0.0.1:{port}/api/status")[0] == 401
        assert RunClient(f"http://127.0.0.1:{port}/", token=srv.token).status().state == \
            "running"
    finally:
        srv.close()


def test_run_dashboard_keeps_an_earlier_history_and_leaves_the_final_status(tmp_path):
    from zeroforge.deploy.config import RunConfig
    from zeroforge.deploy.dashboard.history import HISTORY_FILE, load
    from zeroforge.deploy.dashboard.run import FINAL_STATUS, RunDashboard

    (tmp_path / HISTORY_FILE).write_text("an earlier run's\n")
    source = {"values": {"learner_steps_total": {(): 3.0}}, "hists": {}}
    dash = RunDashboard(RunConfig(dashboard_interval_s=0.05), "rd", tmp_path, _status,
                        lambda: source)
    try:
        assert dash.announce() == f"dashboard at {dash.url}" and dash.token_path == ""
        assert RunClient(dash.url).history()["series"]["learner_steps_total"][0] == 3.0
    finally:
        dash.close()
    kept = list(tmp_path.glob("history-*.jsonl"))
    assert len(kept) == 1 and kept[0].read_text() == "an earlier run's\n"
    assert load(tmp_path / HISTORY_FILE).run_id == "rd"
    assert json.loads((tmp_path / FINAL_STATUS).read_text())["run_id"] == "srv"


def test_page_url_names_what_others_can_reach():
    assert page_url("127.0.0.1", 8265) == "http://127.0.0.1:8265/"
    assert page_url("::1", 80) == "http://[::1]:80/"
    for every_interface in ("", "0.0.0.0", "::"):
        assert page_url(every_interface, 9) == f"http://{socket.gethostname()}:9/"
