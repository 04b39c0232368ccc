"""The run server: one small HTTP server in each run's driver process, serving the
dashboard page, the run's status and its metric history.

Routes (``docs/metrics.md``, "Dashboard"):

- ``GET /``: the dashboard page; ``/static/dashboard.js`` (ours) and
  ``/static/plotly.min.js`` (from the installed ``plotly`` package: nothing is fetched
  from the internet, clusters and CI are offline);
- ``GET /api/status``: ``RunStatus.to_json()`` plus ``dashboard_url``;
- ``GET /api/workers?page=N``: page N (from 0) of per-worker rows (status has a row per
  host): ``{"rows", "page", "pages", "workers"}``;
- ``GET /api/history?since=S``: the samples after ``S`` seconds since the run's start
  (``History.to_json``).

Loopback by default. Bound to any other address it requires a token: every request
carries ``Authorization: Bearer TOKEN`` or ``?token=TOKEN``, else HTTP 401. The token is
generated here and kept in ``RUN_DIR/dashboard.token`` (0600); it is never logged (the
server's access log is off) and never part of the recorded URL.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import math
import os
import secrets
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from zeroforge.deploy.dashboard.history import History
from zeroforge.deploy.runtime.status import RunStatus, page_of

TOKEN_FILE = "dashboard.token"
"""The token's name in the run dir (0600; only for a non-loopback bind)."""

_HERE = Path(__file__).resolve().parent


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def page_url(host: str, port: int) -> str:
    """The URL (no token) of a page served on ``host:port``: a server bound to every
    interface shows the machine's name, which is what others can reach; IPv6 in brackets."""
    shown = socket.gethostname() if host in ("", "0.0.0.0", "::") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def plotly_js() -> Path:
    """The plotly.js bundle shipped inside the ``plotly`` Python package."""
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.exists():
        raise FileNotFoundError(f"plotly.js not found at {path} (is the plotly package "
                                "installed?)")
    return path


def write_token(run_dir: str | Path) -> tuple[str, Path]:
    """A new random token in ``RUN_DIR/dashboard.token``, readable by its owner only."""
    token = secrets.token_urlsafe(24)
    path = Path(run_dir) / TOKEN_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return token, path


def read_token(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8").strip()


def token_ok(token: str | None, headers: Any, query: dict[str, list[str]]) -> bool:
    """A request carries ``token`` (``Authorization: Bearer`` or ``?token=``); always
    true without one (loopback). Also used by ``zeroforge play --web``."""
    if token is None:
        return True
    given = ""
    auth = headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        given = auth[len("Bearer "):].strip()
    elif query.get("token"):
        given = query["token"][0]
    return hmac.compare_digest(given.encode(), token.encode())


class RunServer:
    """Serves one run: ``status()`` answers ``/api/status`` (it must answer at once: the
    distributed driver gives its cached status), ``history`` ``/api/history``.

    ``token``: required on every request (None: no token, only allowed on loopback);
    ``run_dir`` given and a non-loopback host: a token is generated into it."""

    def __init__(self, status: Callable[[], RunStatus], history: History,
                 host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 run_dir: str | Path | None = None,
                 workers: Callable[[int], dict] | None = None) -> None:
        """``workers``: page -> one page of per-worker rows (``/api/workers``); None: the
        status's self-play rows are the workers (a local run)."""
        self.status = status
        self.workers = workers or self._status_workers
        self.history = history
        self.token_path: Path | None = None
        if token is None and not is_loopback(host):
            if run_dir is None:
                raise ValueError(f"dashboard host {host} is not loopback: it needs a token")
            token, self.token_path = write_token(run_dir)
        self.token = token
        self._plotly = plotly_js()
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self.url = page_url(host, self._httpd.server_port)
        """The page's URL, without the token."""
        # a short poll interval: close() (shutdown) returns within 0.1 s
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.1,),
                                        name="run-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_port)

    def url_with_token(self) -> str:
        return self.url + (f"?token={quote(self.token)}" if self.token else "")

    def start(self) -> RunServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- request handling (called from the handler's threads) -----------------------------

    def authorized(self, headers: Any, query: dict[str, list[str]]) -> bool:
        return token_ok(self.token, headers, query)

    def page(self, token: str | None) -> bytes:
        html = (_HERE / "page.html").read_text(encoding="utf-8")
        qs = f"?token={quote(token)}" if token else ""
        return html.replace("{{QS}}", qs).encode()

    def status_json(self) -> dict[str, Any]:
        return _finite(self.status().to_json() | {"dashboard_url": self.url})

    def _status_workers(self, page: int) -> dict:
        """Per-worker rows of a run whose status rows are its workers (a local run)."""
        listed = [r for r in self.status().actors if r.get("kind") == "selfplay"]
        chosen, pages = page_of(listed, page)
        return {"rows": [{"index": r.get("index", 0), "host": r.get("index", 0),
                          "state": r.get("state", ""), "node": r.get("node", ""),
                          "games": r.get("games", 0.0), "positions": r.get("positions", 0.0)}
                         for r in chosen],
                "page": page, "pages": pages, "workers": len(listed)}


def _finite(data: Any) -> Any:
    """JSON has no NaN or infinity (a browser's JSON.parse refuses them): None instead."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def _handler(server: RunServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no access log: a ?token= in a request line must not end up anywhere

        def _send(self, code: int, body: bytes, ctype: str, cache: bool = False) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def _json(self, code: int, data: Any) -> None:
            self._send(code, json.dumps(data, allow_nan=False).encode(),
                       "application/json")

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if not server.authorized(self.headers, query):
                self._json(401, {"error": "this run's dashboard needs its token "
                                          "(Authorization: Bearer TOKEN or ?token=TOKEN)"})
                return
            token = query.get("token", [None])[0] if server.token else None
            try:
                if parts.path in ("/", "/index.html"):
                    self._send(200, server.page(token), "text/html; charset=utf-8")
                elif parts.path == "/static/plotly.min.js":
                    self._send(200, server._plotly.read_bytes(),
                               "text/javascript; charset=utf-8", cache=True)
                elif parts.path == "/static/dashboard.js":
                    self._send(200, (_HERE / "dashboard.js").read_bytes(),
                               "text/javascript; charset=utf-8")
                elif parts.path == "/api/status":
                    self._json(200, server.status_json())
                elif parts.path == "/api/workers":
                    page = query.get("page", ["0"])[0]
                    if not page.isdigit():
                        self._json(400, {"error": "page must be a whole number >= 0"})
                        return
                    self._json(200, _finite(server.workers(int(page))))
                elif parts.path == "/api/history":
                    try:
                        since = float(query.get("since", ["0"])[0])
                    except ValueError:
                        self._json(400, {"error": "since must be a number of seconds"})
                        return
                    self._json(200, server.history.to_json(since))
                elif parts.path == "/favicon.ico":
                    self._send(204, b"", "image/x-icon")
                else:
                    self._json(404, {"error": f"no such page {parts.path}"})
            except Exception as err:  # one bad request must not end the server
                self._json(500, {"error": f"{type(err).__name__}: {err}"})

    return Handler
