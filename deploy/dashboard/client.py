"""``RunClient``: a run's status and history from its run server (``server.py``), over
plain HTTP with a short timeout: ``zeroforge status``, ``top`` and ``dashboard`` use it
instead of joining the Ray cluster."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode, urlsplit

from zeroforge.deploy.runtime.status import RunStatus


class RunClientError(OSError):
    """The run server could not be asked (one line: which URL and why)."""


class RunClient:
    """The run server at ``url`` (the page's URL, e.g. ``http://127.0.0.1:8123/``)."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 3.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not a run server URL: {url!r}")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = token or None
        self.timeout_s = timeout_s

    def _get(self, path: str, **params: Any) -> Any:
        url = self.base + path + (("?" + urlencode(params)) if params else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                return json.loads(reply.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            detail = ""
            with contextlib.suppress(ValueError, AttributeError, OSError):
                detail = json.loads(err.read().decode("utf-8")).get("error", "")
            raise RunClientError(f"{self.base}{path}: HTTP {err.code}"
                                 + (f" ({detail})" if detail else "")) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise RunClientError(f"cannot reach the run server at {self.base}: {reason}"
                                 ) from None
        except ValueError:
            raise RunClientError(f"{self.base}{path}: not a JSON answer") from None

    def status_json(self) -> dict[str, Any]:
        """``/api/status`` as plain data (``RunStatus`` keys plus ``dashboard_url``)."""
        return dict(self._get("/api/status"))

    def status(self) -> RunStatus:
        return RunStatus.from_json(self.status_json())

    def workers(self, page: int = 0) -> dict[str, Any]:
        """``/api/workers``: page ``page`` of per-worker rows."""
        return dict(self._get("/api/workers", page=page))

    def history(self, since: float = 0.0) -> dict[str, Any]:
        """``/api/history``: ``{"run_id", "started", "interval_s", "t", "series"}``."""
        return dict(self._get("/api/history", since=since) if since else
                    self._get("/api/history"))
