"""Connecting to Redis, and turning its failures into one-line ``TransportError``s.

Every Redis call of the transport runs inside ``redis_errors`` so that a dead or
unreachable server surfaces as ``TransportError: cannot reach Redis at HOST:PORT: REASON``
instead of a redis-py traceback that names neither the address nor what to do; so does a
server that refuses writes because it cannot write to its disk (``MISCONF``) or because
its memory is at ``maxmemory`` (``OOM``: ``RedisFull``).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from zeroforge.shared.transport import acl

log = logging.getLogger(__name__)
T = TypeVar("T")

PASSWORD_ENV = "ZEROFORGE_REDIS_PASSWORD"
"""Environment variable holding the Redis password when the URL carries none."""
CA_ENV = "ZEROFORGE_REDIS_CA"
"""Environment variable naming a PEM file of CA certificates that ``rediss://`` connections
trust (besides the system's) when the URL has no ``ssl_ca_certs`` option."""
URL_OPTIONS = ("ssl_ca_certs",)
"""Query options a Redis URL may carry."""


_MISCONF = re.compile(r"(^|caused error: |-)MISCONF ")
"""Redis refusing writes because it cannot write its disk, as a command, a pipeline or a
script reports it."""


_OOM = re.compile(r"(^|caused error: |-)OOM ")
"""Redis refusing a write at its ``maxmemory``, as a pipeline or a script reports it."""


class TransportError(RuntimeError):
    """Redis is unreachable, refuses us, or answered something we cannot use."""


class RedisFull(TransportError):
    """Redis refused a write: its memory is at ``maxmemory`` and its policy is
    ``noeviction`` (it never drops games or weights to make room). A ``TransportError``:
    the learner's acks and trims free memory, so the writers' retries apply (a worker
    holds its games) as for an outage."""


class RoleRefused(PermissionError):
    """Redis's ACL refused a command to this process's role (NOPERM). Not a
    ``TransportError``: waiting does not help, so nothing retries it."""


WAIT_LOG_S = 30.0
"""While ``patiently`` waits for a Redis, one log line this often."""


def patiently(call: Callable[[], T], what: str, patience_s: float | None = None, *,
              sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> T:
    """``call()``, retried with backoff (0.2 s doubling to 5 s) while it raises
    ``TransportError`` (an unreachable Redis): for up to ``patience_s``, or, with None,
    until it answers; one log line when the wait starts and one every ``WAIT_LOG_S``,
    saying it waits to ``what``."""
    began = clock()
    backoff, logged = 0.2, None
    while True:
        try:
            return call()
        except TransportError as err:
            waited = clock() - began
            if patience_s is not None and waited + backoff > patience_s:
                raise
            if logged is None or waited - logged >= WAIT_LOG_S:
                logged = waited
                log.warning("cannot %s yet (waited %.0f s; retrying until Redis answers): "
                            "%s", what, waited, err)
            sleep(backoff)
            backoff = min(backoff * 2, 5.0)


class PartialAckError(TransportError):
    """An ack over several stream shards of which some failed: the others' ids were
    acked, ``failed`` holds the ids (as given) that were not."""

    def __init__(self, message: str, failed: list[str]) -> None:
        super().__init__(message)
        self.failed = failed


@dataclass(frozen=True)
class RedisConfig:
    """Where the transport's Redis is and how patiently to talk to it.

    The password is deliberately not a field: config files are saved beside each run, so
    a secret belongs in ``ZEROFORGE_REDIS_PASSWORD`` (or, for a server we started
    ourselves, in the URL it hands out) rather than in a file.
    """

    url: str = "redis://127.0.0.1:6379/0"
    """``redis://[:PASSWORD@]HOST:PORT/DB``; without a password ``ZEROFORGE_REDIS_PASSWORD``
    is used, and with neither ``connect`` refuses (our Redis always has a password).
    ``rediss://...`` connects over TLS to a Redis ``tls-port`` and always verifies the
    server's certificate and host name, against the system's CAs plus the PEM file of
    ``?ssl_ca_certs=PATH`` or, without it, ``ZEROFORGE_REDIS_CA``."""
    connect_timeout_s: float = 5.0
    """Seconds to wait for a TCP connection before giving up on one attempt."""
    socket_timeout_s: float = 30.0
    """Seconds a single command may take; blocking reads must ask for less than this."""
    retries: int = 2
    """Extra attempts (with a short backoff) on a dropped connection before failing."""

    def __post_init__(self) -> None:
        if self.connect_timeout_s <= 0 or self.socket_timeout_s <= 0 or self.retries < 0:
            raise ValueError(f"RedisConfig: timeouts must be > 0 and retries >= 0, got {self}")


def connect(target: str | RedisConfig, role: str | None = None,
            auth_dir: str | None = None, max_connections: int | None = None) -> redis.Redis:
    """A client for ``target`` (a URL or ``RedisConfig``), checked with a PING.

    Credentials: the URL's user and password if it has a password; else, with ``role``,
    that role's user (``zf-ROLE``) and the password in its file under ``auth_dir`` or
    ``$ZEROFORGE_REDIS_AUTH_DIR`` (``acl.py``) when there is one; else the default user
    with ``$ZEROFORGE_REDIS_PASSWORD``. Raises TransportError with a one-line message
    when there is no password, the server cannot be reached, or it rejects the password.

    ``max_connections``: the most connections the client opens, for one shared by many
    threads (a host's workers): a thread that finds them all busy waits for one (up to the
    socket timeout, then a TransportError its caller retries), so the server's client count
    follows hosts, not threads. None: one per thread in a call at once.
    """
    config = RedisConfig(url=target) if isinstance(target, str) else target
    parts = urlsplit(config.url)
    if parts.scheme not in ("redis", "rediss"):
        raise TransportError(f"Redis URL must start with redis:// or rediss://, "
                             f"got {_redact(config.url)!r}")
    try:
        host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    except ValueError:
        raise TransportError(f"Redis URL has a bad port: {_redact(config.url)!r}") from None
    db_text = parts.path.lstrip("/") or "0"
    if not db_text.isdigit():
        raise TransportError(f"Redis URL database must be a number, got {db_text!r}")
    username, password = _credentials(parts, role, auth_dir, f"{host}:{port}")
    client = redis.Redis(
        host=host, port=port, db=int(db_text), password=password, username=username,
        **_tls_options(parts.scheme, parts.query, f"{host}:{port}"),
        socket_connect_timeout=config.connect_timeout_s,
        socket_timeout=config.socket_timeout_s,
        # redis-py's default retries for ~4 s on a refused port; a short backoff rides out
        # a blip but still reports a dead server within a fraction of a second.
        retry=Retry(ExponentialBackoff(cap=0.25, base=0.02), config.retries),
        # Samples and weights are binary: never let the client decode them as text.
        decode_responses=False,
    )
    if max_connections is not None:
        # the same connections, handed out by a pool that waits when all are busy (the
        # client's own raises "too many connections")
        pool = client.connection_pool
        client.connection_pool = redis.BlockingConnectionPool(
            max_connections=max_connections, timeout=config.socket_timeout_s,
            connection_class=pool.connection_class, **pool.connection_kwargs)
    with redis_errors(client):
        client.ping()
    return client


def _credentials(parts: SplitResult, role: str | None, auth_dir: str | None, where: str
                 ) -> tuple[str | None, str]:
    """(user, password) for a URL (see ``connect``)."""
    if parts.password:
        return (unquote(parts.username) if parts.username else None), unquote(parts.password)
    if role is not None:
        try:
            password = acl.role_password(role, auth_dir)
        except ValueError as err:
            raise TransportError(f"Redis at {where}: {err}") from None
        if password is not None:
            return acl.username(role), password
    password = os.environ.get(PASSWORD_ENV)
    if not password:
        files = f"a {role} password file in ${acl.AUTH_DIR_ENV}, " if role else ""
        raise TransportError(f"no password for Redis at {where}: put it in the URL "
                             f"(redis://:PASSWORD@{where}/0), {files}or set {PASSWORD_ENV}")
    return None, password


def _tls_options(scheme: str, query: str, where: str) -> dict[str, Any]:
    """redis-py's TLS keywords for a URL: none for ``redis://``; for ``rediss://`` the
    server's certificate and host name verified, with the extra CA file if one is named."""
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - set(URL_OPTIONS))
    if unknown:
        raise TransportError(f"Redis URL for {where} has unknown option(s) {', '.join(unknown)}"
                             f"; known: {', '.join(URL_OPTIONS)}")
    ca_option = options.get("ssl_ca_certs", [""])[-1]
    if scheme != "rediss":
        if ca_option:
            raise TransportError(f"Redis URL for {where}: ssl_ca_certs needs a rediss:// "
                                 f"(TLS) URL")
        return {}
    ca = ca_option or os.environ.get(CA_ENV) or None
    if ca is not None and not Path(ca).is_file():
        source = "the URL's ssl_ca_certs" if ca_option else CA_ENV
        raise TransportError(f"CA file {ca} for Redis at {where} (from {source}) is not a file")
    return {"ssl": True, "ssl_cert_reqs": "required", "ssl_check_hostname": True,
            "ssl_ca_certs": ca}


def endpoint(client: redis.Redis) -> str:
    """``host:port`` of a client, for error messages."""
    kwargs = client.connection_pool.connection_kwargs
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"


@contextmanager
def redis_errors(client: redis.Redis) -> Iterator[None]:
    """Re-raise connection-level redis-py errors as one-line ``TransportError``s."""
    try:
        yield
    except redis.exceptions.NoPermissionError as err:
        # NOPERM: the server's ACL does not let this role's user run that (acl.py): a
        # refusal by design, not a blip, so no caller retries it.
        user = client.connection_pool.connection_kwargs.get("username") or "default"
        raise RoleRefused(f"Redis at {endpoint(client)} refused user {user}: "
                          f"{_first_line(err)}") from None
    except redis.AuthenticationError as err:
        # NOAUTH / WRONGPASS: the server is there but will not talk to us.
        raise TransportError(f"Redis at {endpoint(client)} rejected our credentials: "
                             f"{_first_line(err)}") from None
    except (redis.ConnectionError, redis.TimeoutError) as err:
        raise TransportError(f"cannot reach Redis at {endpoint(client)}: {_reason(err)}") from None
    except redis.ResponseError as err:
        # MISCONF: Redis cannot write its append-only file (a full or read-only disk) and
        # refuses every write until it can again, by itself: as passing as a restart, so
        # the callers' retries (a worker holding its games, the learner's backoff) apply,
        # where a bare ResponseError would end the actor
        # (a pipeline's error names the command first: "Command # 1 (XADD ...) of
        # pipeline caused error: MISCONF ...", a script's its line: "Error running script
        # (call to f_...): @user_script:10: ... -MISCONF ...")
        text = str(err)
        if isinstance(err, redis.exceptions.OutOfMemoryError) or _OOM.search(text):
            # not the error's own text: a pipeline's names the command with its arguments,
            # a whole encoded game or weights blob
            raise RedisFull(f"Redis at {endpoint(client)} is full: it refused a write at its "
                            f"maxmemory (OOM; policy noeviction, nothing is evicted); size "
                            f"it with `zeroforge plan` (docs/scaling.md, \"Redis sized by "
                            f"the plan\")") from None
        if _MISCONF.search(text):
            raise TransportError(f"Redis at {endpoint(client)} cannot write to its disk: "
                                 f"{_first_line(err)}") from None
        raise


def text(value: bytes | str | int) -> str:
    """A reply field as text: redis-py gives bytes (no ``decode_responses``), a Lua number
    an int."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(err: Exception) -> str:
    """The operating system's words for a failure ("Connection refused"), if it gave any."""
    cause = err.__cause__ or err.__context__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    if isinstance(err, redis.TimeoutError):
        return "timed out"
    return _first_line(err).rstrip(".")


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _redact(url: str) -> str:
    """``url`` with any password replaced, so it can go into an error message."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
