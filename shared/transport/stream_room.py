"""Room in a Redis sample stream: a hard bound on its backlog, and waking the producers that
wait for room instead of having them poll.

The bound is hard
    An append is one Lua script (``APPEND_SCRIPT``) that XADDs the whole batch only when
    ``XLEN + len(batch) <= max_backlog``, and otherwise writes nothing and returns the
    length: checking and appending in one step, so N producers cannot overshoot by N
    batches, as a check followed by a separate XADD let them. A batch larger than
    ``max_backlog`` goes in only into an empty stream, alone (it could never fit
    otherwise; refusing it for good would strand its games), so the stream never holds
    more than ``max(max_backlog, the largest batch)``. A producer whose role may trim
    (``_TRIM_LUA``; not the worker's, acl.py) trims in the same script first when the
    batch does not fit, as the old wait did.

Producers are woken, not polling
    Room appears only when a trim removes entries, and every trim that removes some
    (the learner's after each ack, a trimming producer's) pushes one token per removed
    entry onto a small list beside the stream (``room_key``); a waiting producer blocks
    on it with ``BLPOP`` and checks again when it gets a token. Why a token list and
    BLPOP rather than PUBLISH on a channel or XREAD BLOCK on a notification stream:

    - a token pushed while no producer is blocked stays in the list, so a producer that
      is refused and then blocks cannot miss a trim that came in between (a PUBLISH
      then reaches nobody: it would need a subscription before every check);
    - BLPOP hands each token to one blocked client, so a trim that frees k entries wakes
      at most k producers, not every blocked one (PUBLISH and XREAD BLOCK wake them all:
      10,000 blocked workers would each run the append script after every ack);
    - it blocks on an ordinary pooled connection (no pub/sub connection per producer),
      and works alike on Redis 6.2 (the bundled server) and 7.

    Tokens are hints, never trusted: a woken producer runs the append script, which
    decides. Tokens beyond the free room are stale (the room went to producers that
    never waited), so a refused append drops them (``LTRIM`` to the free room), and a
    producer cannot spin through them; they also expire (``ROOM_TOKENS_TTL_MS``), and
    the list is capped (``ROOM_TOKENS_MAX``).

One blocked read a process
    The workers of one host share its transport (one connection pool a server): if each
    of its K blocked workers held a BLPOP, the host would hold K connections again. So a
    process blocks on a room list through one thread at a time (``_Blocker``); its other
    waiting threads wait on a local condition, and the blocking thread, when its BLPOP
    returns (a token, or its fallback), wakes one of them to check and take over the
    read. Connections a host holds to a server stay a handful, whatever its workers.

The fallback
    Correctness never depends on a token: a waiting producer checks again every
    ``StreamConfig.room_check_interval_s`` (jittered), for the wake-ups that never come
    (a learner that crashed between its ack and its trim, a reader with ``notify_room``
    off, a token taken by a producer that then timed out). ``room_checks`` counts the
    checks a producer made while waiting, so tests can show they are few.
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from typing import Any, ClassVar

import redis

from zeroforge.shared.transport.connection import (
    TransportError,
    endpoint,
    redis_errors,
    text,
)
from zeroforge.shared.transport.recent_appends import (
    DEFAULT_WINDOW_S,
    MISSING_SCRIPT,
    RUN_ID_LUA,
    RecentAppends,
)
from zeroforge.shared.transport.writer_counts import ThreadTallies

ROOM_SUFFIX = ":room"
"""A stream's room list is its key plus this (same hash tag: same server and slot)."""
ROOM_TOKENS_MAX = 10_000
"""The most tokens a room list holds: no trim wakes more producers than this at once."""
ROOM_TOKENS_TTL_MS = 60_000
"""Tokens nobody took in this long are dropped with their list (no key outlives a run)."""
MIN_BLOCK_S = 0.01
"""The shortest BLPOP a waiting producer makes (a BLPOP timeout of 0 would block forever)."""
FALLBACK_JITTER = (0.75, 1.0)
"""A fallback check comes after this fraction of ``room_check_interval_s``, drawn per
wait: producers blocked together (a learner restarting) do not all check together."""


class _Blocker:
    """The one BLPOP a process has open on one room list of one server (module docstring,
    "One blocked read a process")."""

    # Held weakly by pool: a blocker goes with the connection pool it blocks on, so a
    # process that makes clients over and over (a reconnecting host) keeps none of them,
    # and a new pool never inherits a dead one's blocker (as keying by id() allowed).
    _all: ClassVar[weakref.WeakKeyDictionary[Any, dict[str, _Blocker]]] = (
        weakref.WeakKeyDictionary())
    _all_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.free = threading.Condition()
        self.blocking = False

    @classmethod
    def of(cls, client: redis.Redis, key: str) -> _Blocker:
        """The blocker of ``key`` on ``client``'s pool (a pool is a process's connections
        to one server; blockers are few: a stream shard's room list each)."""
        with cls._all_lock:
            return cls._all.setdefault(client.connection_pool, {}).setdefault(key, cls())

    @classmethod
    def count(cls) -> int:
        with cls._all_lock:
            return sum(len(keys) for keys in cls._all.values())

    def wait(self, client: redis.Redis, key: str, wait_s: float) -> None:
        """BLPOP ``key`` for up to ``wait_s`` if no other thread of this process is, else
        wait up to ``wait_s`` for that thread's read to return."""
        with self.free:
            if self.blocking:
                self.free.wait(wait_s)
                return
            self.blocking = True
        try:
            client.blpop([key], timeout=wait_s)
        finally:
            with self.free:
                self.blocking = False
                self.free.notify()  # one waiter checks for room and blocks in turn


def room_blockers() -> int:
    """How many (connection pool, room list) pairs this process keeps a blocker for: one
    for each list its producers have waited on through a pool still alive."""
    return _Blocker.count()


class BackpressureTimeout(TransportError):
    """``append`` waited ``append_timeout_s`` for the learner to drain the backlog."""


def backpressure_timeout(key: str, length: int, limit: int, count: int, waited: float
                         ) -> BackpressureTimeout:
    """The one line of an append that found no room for ``count`` games in ``waited`` s
    (both transports say it alike)."""
    return BackpressureTimeout(
        f"sample stream {key} still holds {length} unacknowledged games (max_backlog "
        f"{limit}, {count} to add) after {waited:.1f} s; is the learner reading?")


def room_key(stream_key: str) -> str:
    """Redis key of the room list of the stream at ``stream_key``."""
    return stream_key + ROOM_SUFFIX


# trim(key): drop the entries below the oldest one some group still needs, atomically with
# reading the groups' state, and return the new length. For each group that is its oldest
# pending entry, or the entry after its last delivered one when nothing is pending.
# Atomic so that no ack, read or group change can slip between computing the bound and
# trimming.
_TRIM_LUA = """
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end
local function trim(key)
  if redis.call('EXISTS', key) == 0 then return 0 end
  local floor = nil
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local info = {}
    for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
    local need
    if info['pending'] > 0 then
      need = redis.call('XPENDING', key, info['name'])[2]
    else
      local ms, seq = parse(info['last-delivered-id'])
      need = string.format('%d-%d', ms, seq + 1)
    end
    if floor == nil or less(need, floor) then floor = need end
  end
  if floor ~= nil then redis.call('XTRIM', key, 'MINID', floor) end
  return redis.call('XLEN', key)
end
"""

# signal(room, freed): one token per entry a trim removed, onto the room list (up to
# ROOM_TOKENS_MAX in all), each waking one blocked producer. In chunks: Lua's unpack has a
# limit on how many values it spreads.
_SIGNAL_LUA = f"""
local function signal(room, freed)
  if freed <= 0 then return end
  local add = math.min(freed, {ROOM_TOKENS_MAX} - redis.call('LLEN', room))
  local tokens = {{}}
  while add > 0 do
    local n = math.min(add, 1000)
    for i = 1, n do tokens[i] = '1' end
    redis.call('RPUSH', room, unpack(tokens, 1, n))
    add = add - n
  end
  redis.call('PEXPIRE', room, {ROOM_TOKENS_TTL_MS})
end
"""

TRIM_SCRIPT = _TRIM_LUA + _SIGNAL_LUA + """
-- KEYS: the stream, its room list. ARGV: '1' to wake waiting producers, '0' not to.
local before = redis.call('XLEN', KEYS[1])
local after = trim(KEYS[1])
if ARGV[1] == '1' then signal(KEYS[2], before - after) end
return after
"""
"""Trim the stream (``_TRIM_LUA``) and wake as many producers as it freed entries."""

APPEND_SCRIPT = _TRIM_LUA + _SIGNAL_LUA + RUN_ID_LUA + """
-- KEYS: the stream, its room list. ARGV: max_backlog, '1' if this caller may trim, the
-- data field, how many entries must fit, the run id of the server the caller's last
-- appends went to ('': any), then the entries (none: only check for room).
local stream, room = KEYS[1], KEYS[2]
local limit, count = tonumber(ARGV[1]), tonumber(ARGV[4])
local server = server_run_id()
if ARGV[5] ~= '' and ARGV[5] ~= server then return server end
local function fits(length) return length == 0 or length + count <= limit end
local length = redis.call('XLEN', stream)
if not fits(length) and ARGV[2] == '1' then
  local trimmed = trim(stream)
  signal(room, length - trimmed)
  length = trimmed
end
if not fits(length) then
  -- tokens beyond the free room are stale: drop them, so that no waiter spins on them
  local free = math.max(limit - length, 0)
  if free == 0 then redis.call('LTRIM', room, 1, 0)
  else redis.call('LTRIM', room, 0, free - 1) end
  return length
end
local ids = {server}
for i = 6, #ARGV do ids[#ids + 1] = redis.call('XADD', stream, '*', ARGV[3], ARGV[i]) end
return ids
"""
"""Append the batch only if it fits under ``max_backlog``: the server's run id then the
ids; the length (an integer) when it does not fit; the server's run id alone (a string)
when it is not the server the caller's last appends went to (``recent_appends``). Only the
first writes anything."""


def trim_args(notify_room: bool) -> list[str]:
    """``TRIM_SCRIPT``'s arguments for an endpoint with ``StreamConfig.notify_room``."""
    return ["1" if notify_room else "0"]


def script_refused(err: redis.ResponseError) -> bool:
    """Whether the ACL refused the script, or a command in it, to this role."""
    return (isinstance(err, redis.exceptions.NoPermissionError)
            or "can't run this command" in str(err))


class StreamRoom:
    """The producer's side of one Redis sample stream's bound: append within it, waiting
    for room (see the module docstring). The numbers are the stream's ``StreamConfig``'s
    (not imported here: ``stream`` imports this module)."""

    def __init__(self, client: redis.Redis, stream_key: str, field: bytes, *,
                 max_backlog: int, append_timeout_s: float,
                 room_check_interval_s: float, resend_window_s: float = DEFAULT_WINDOW_S
                 ) -> None:
        self.redis = client
        self.key = stream_key
        self.room_key = room_key(stream_key)
        self.field = field
        self.max_backlog = max_backlog
        self.append_timeout_s = append_timeout_s
        self.room_check_interval_s = room_check_interval_s
        self.may_trim = True
        """Whether this role may trim (a refused trim turns it off for good)."""
        self.room_checks = 0
        """Times a waiting append checked for room again (woken, or at the fallback)."""
        self.backpressure_wait_s = 0.0
        """Total seconds appends spent waiting for room."""
        self.tallies = ThreadTallies()
        """The same waits and the games resent, per appending thread."""
        self.recent = RecentAppends(resend_window_s)
        """This producer's last appends, appended again if a restarted server lost them."""
        self._append = client.register_script(APPEND_SCRIPT)
        self._missing = client.register_script(MISSING_SCRIPT)

    def append(self, blobs: list[bytes], timeout_s: float | None) -> list[str]:
        """XADD one entry per blob once they all fit; returns their ids. Writes nothing and
        raises BackpressureTimeout when they do not fit within ``timeout_s``."""
        return self._until_room(len(blobs), blobs, timeout_s)

    def wait(self, count: int, timeout_s: float | None) -> None:
        """Return once ``count`` entries would fit (BackpressureTimeout after ``timeout_s``)."""
        self._until_room(count, [], timeout_s)

    def _until_room(self, count: int, blobs: list[bytes], timeout_s: float | None
                    ) -> list[str]:
        timeout = self.append_timeout_s if timeout_s is None else timeout_s
        started: float | None = None
        with redis_errors(self.redis):
            while True:
                # games a restarted server lost go in first, under the same bound
                owed = self.recent.take_owed() if blobs else []
                try:
                    reply = self._try(count + len(owed), owed + blobs)
                except BaseException:
                    self.recent.give_back(owed)
                    raise
                now = time.monotonic()
                if isinstance(reply, list):
                    waited = 0.0 if started is None else now - started
                    self.backpressure_wait_s += waited
                    self.tallies.add(backpressure_wait_s=waited, resent=len(owed))
                    ids = [text(i) for i in reply[1:]]
                    self.recent.appended(text(reply[0]), ids, owed + blobs, len(owed))
                    return ids[len(owed):]
                self.recent.give_back(owed)  # nothing was written
                if isinstance(reply, bytes | str):  # another server: owe it what it lost
                    self.recent.restarted(text(reply), self._lacks, self.where)
                    continue
                started = now if started is None else started
                waited = now - started
                if waited >= timeout:
                    self.backpressure_wait_s += waited
                    self.tallies.add(backpressure_wait_s=waited)
                    raise backpressure_timeout(self.key, int(reply), self.max_backlog, count,
                                               waited)
                self._await_token(timeout - waited)
                self.room_checks += 1

    def _try(self, count: int, blobs: list[bytes]) -> Any:
        """One run of the append script: a list of ids (appended, or room when ``blobs``
        is empty), or the stream's length (no room)."""
        while True:
            try:
                return self._append(keys=[self.key, self.room_key],
                                    args=[self.max_backlog, int(self.may_trim),
                                          self.field, count, self.recent.server, *blobs])
            except redis.ResponseError as err:
                # A role that may not trim (the worker's) is refused at the script's first
                # trim command, before anything was written: append without trimming
                # from now on; the learner trims with every ack.
                if not (self.may_trim and script_refused(err)):
                    raise
                self.may_trim = False

    @property
    def where(self) -> str:
        """The stream, and the server it is on, for log lines."""
        return f"sample stream {self.key} at {endpoint(self.redis)}"

    def _lacks(self, ids: list[str]) -> list[int]:
        """Positions (1-based) of the entry ids the stream no longer holds."""
        return [int(i) for i in self._missing(keys=[self.key], args=ids)]

    def _await_token(self, left_s: float) -> None:
        """Block until a trim's token comes, the fallback interval passes or ``left_s``
        runs out, whichever is first (below the socket timeout: a blocked read longer
        than it would count as a dead connection)."""
        wait = min(self.room_check_interval_s * random.uniform(*FALLBACK_JITTER),
                   left_s)
        socket_timeout = self.redis.connection_pool.connection_kwargs.get("socket_timeout")
        if socket_timeout:
            wait = min(wait, socket_timeout / 2)
        _Blocker.of(self.redis, self.room_key).wait(self.redis, self.room_key,
                                                    max(wait, MIN_BLOCK_S))


