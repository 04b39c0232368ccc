"""Games a Redis acknowledged and then lost: a producer's last seconds of appends, kept
until they are safely older than what a restart can take away, and appended again when it
did.

Why
    With ``appendfsync everysec`` (the bundled server's setting, and the usual one) Redis
    answers a write before it is on disk, and while the previous second's fsync is still
    running it postpones even the write into its append-only file, for up to 2 s. A
    redis-server killed then (OOM killer, kill -9, a crashed node) comes back from its AOF
    without the games it had acknowledged in those last moments: seen on a busy two-core
    machine, 3 to 14 games of a stream shard acknowledged 0.5-1 s before a kill -9, gone
    after the restart, never trained. The producer is the one place that still holds them.

How
    Every append script also returns the server's ``run_id`` (``INFO server``: a new one
    at each start of a redis-server), and every later append hands it back in: a server
    that finds another id than the one handed in appends nothing and answers its own
    (it restarted, or another server now answers on that address). The producer then looks
    up which of its appends of the last ``window_s`` before the restart the stream no
    longer holds (``MISSING_SCRIPT``: by entry id) and appends those again, ahead of its
    next batch and within the backlog's bound. An entry that is missing because the
    learner had already acked it (and a trim removed it) comes again as a copy; the
    learner drops copies by game id, however late (``learner.received_games``).

What it does not cover
    A producer that dies together with the server (its games are nowhere else), a producer
    that never appends again after the restart (a worker stopping then), and a machine
    whose disk stalled for longer than ``window_s`` before it lost power.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

DEFAULT_WINDOW_S = 5.0
"""Seconds of a producer's appends kept for a resend: a process crash loses at most the
last ~2 s (Redis postpones its AOF write no longer), a machine crash about as much while
the disk keeps up with the fsync each second."""

RUN_ID_LUA = """
local function server_run_id()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end
"""
"""Lua: the answering redis-server's ``run_id`` (new at every start of the process)."""

MISSING_SCRIPT = """
-- KEYS: the stream. ARGV: entry ids. Returns the (1-based) positions of those it lacks.
local missing = {}
for i = 1, #ARGV do
  if #redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i]) == 0 then
    missing[#missing + 1] = i
  end
end
return missing
"""


class RecentAppends:
    """One producer's appends to one stream of the last ``window_s`` seconds (before its
    newest append), the server they went to, and the games owed to it after a restart.
    Shared by the threads of a host (one lock)."""

    def __init__(self, window_s: float = DEFAULT_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._server = ""
        """The run id of the server our window went to ("" before the first append)."""
        self._recent: collections.deque[tuple[float, str, bytes]] = collections.deque()
        """(when acknowledged, entry id, data), oldest first."""
        self._owed: list[bytes] = []
        self.resent = 0
        """Entries appended again after a restarted server had lost them."""

    @property
    def server(self) -> str:
        """The run id an append hands in ("" : do not check, answer your own)."""
        return self._server

    def take_owed(self) -> list[bytes]:
        """The games owed to the server, to go ahead of the next batch (``give_back``
        them if that append writes nothing)."""
        with self._lock:
            owed, self._owed = self._owed, []
            return owed

    def give_back(self, owed: list[bytes]) -> None:
        """Games ``take_owed`` handed out that were not appended after all."""
        if owed:
            with self._lock:
                self._owed[:0] = owed

    def appended(self, server: str, ids: list[str], blobs: list[bytes], resent: int) -> None:
        """``blobs`` went in as ``ids`` on ``server`` (the first ``resent`` of them owed)."""
        now = self._clock()
        with self._lock:
            self._server = self._server or server
            self.resent += resent
            self._recent.extend((now, i, b) for i, b in zip(ids, blobs, strict=True))
            while self._recent and self._recent[0][0] < now - self.window_s:
                self._recent.popleft()

    def restarted(self, server: str, missing: Callable[[list[str]], list[int]],
                  where: str) -> None:
        """The server now answers as ``server``: owe it the window's games it lacks
        (``missing``: positions of the ids the stream no longer holds; if it fails, the
        whole window is owed: copies the learner drops)."""
        with self._lock:
            if server == self._server:
                return  # another thread of this process got there first
            old, self._server = self._server, server
            window, self._recent = list(self._recent), collections.deque()
        if not window:
            return
        try:
            lost = [window[i - 1] for i in missing([i for _, i, _ in window])]
        except Exception as err:  # noqa: BLE001 (any failure: owe everything, lose nothing)
            log.warning("could not check %s after its server restarted (%s); appending "
                        "its last %d games again", where, err, len(window))
            lost = window
        if lost:
            log.warning("%s: the redis-server restarted (run id %s... now %s...) without %d "
                        "of the %d games appended in the last %.0f s before; appending "
                        "them again", where, old[:8], server[:8], len(lost), len(window),
                        self.window_s)
            with self._lock:
                self._owed.extend(b for _, _, b in lost)
