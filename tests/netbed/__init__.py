"""A multi-host test bed on one Linux machine: network namespaces joined by a bridge.

Each host is a network namespace with one veth link to a bridge in the root namespace and
one address in a private /24 that exists only inside the namespaces (the bridge has no
address, so the machine itself cannot reach the bed, nor the bed the machine's network):

- ``redis``: Debian's ``redis-server`` with a user a role (``shared/transport/acl.py``:
  the default user off, the role passwords in 0600 files under ``BED_DIR/redis-auth``, which
  every bed process is pointed at with ``ZEROFORGE_REDIS_AUTH_DIR``; ``zf-admin`` with the
  bed's password for the tests' auditors), AOF on, bound to its bed address only;
  optionally a delaying relay in front of it (``relay.py``). The GCS's server (``gcs_ft``)
  keeps the one password Ray's GCS knows;
- ``head``: ``ray start --head`` (the learner's CPUs, no self-play slots);
- ``node1``, ``node2``: ``ray start --address HEAD`` with ``worker_slots`` units of the
  custom resource ``WORKER_RESOURCE`` each and no CPUs, so self-play workers (run with
  ``distributed.worker_resource=zf_selfplay``) land on them and nothing else does.

Names carry a per-bed prefix (``zf`` + 5 random hex digits): namespaces ``PREFIX-HOST``,
links ``PREFIXbr`` / ``PREFIXvN``, ``/etc/netns/PREFIX-HOST/hosts`` (which ``ip netns exec``
mounts over ``/etc/hosts``, so ``redis`` and ``head`` resolve inside the bed). Two beds, or a
bed and any other run, never share a name, a port space or a directory. ``down`` kills
every process in the bed's namespaces and deletes what ``up`` made; it is idempotent and
runs from ``__exit__`` whatever happened (``with Bed() as bed``), and ``python -m
tests.netbed down PREFIX`` cleans up after a bed whose owner was killed.

Needs root and iproute2. Everything is driven through ``ip``/``ray``/``redis-server``
processes; Python code of the caller reaches into a namespace only through
``Bed.call_in`` (a thread moved into it with setns(2)).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from zeroforge.deploy.ray.private_api import NICENESS_ENV, WORKER_NICENESS
from zeroforge.shared.transport import acl

T = TypeVar("T")

HOSTS = ("redis", "head", "node1", "node2")
"""The bed's hosts, in address order (.2, .3, ...)."""
WORKER_RESOURCE = "zf_selfplay"
"""The custom Ray resource the worker nodes advertise (one unit per self-play worker)."""
LEARNER_RESOURCE = "zf_learner"
"""One unit on each worker node: a learner replica that takes one sits one per node."""
STATE_ROOT = Path("/tmp/zfbed")
"""Each bed's files (configs, Ray temp dirs, logs) live under ``STATE_ROOT/PREFIX``; kept
short because Ray's Unix socket paths must fit in 107 bytes."""
NETNS_ETC = Path("/etc/netns")
CLONE_NEWNET = 0x40000000


class BedError(RuntimeError):
    """A step of building or driving the bed failed; the message names it."""


@dataclasses.dataclass(frozen=True)
class BedConfig:
    """What the bed builds."""

    worker_slots: int = 3
    """Units of ``WORKER_RESOURCE`` on each worker node (self-play workers it can hold)."""
    head_cpus: float = 1.0
    """CPUs the head advertises (the learner's)."""
    ray_port: int = 6390
    """The head's GCS port."""
    redis_port: int = 6379
    """redis-server's port on the ``redis`` host."""
    relay_port: int = 6380
    """Port of the delaying relay on the ``redis`` host (when ``delay_ms`` > 0)."""
    delay_ms: float = 0.0
    """Latency the relay adds each way; 0: no relay."""
    object_store_bytes: int = 80 * 1024 * 1024
    """Ray object store per node (small: the run passes little through it)."""
    redis_server: str = "/usr/bin/redis-server"
    """The redis-server binary (Debian's, 7.x)."""
    ray: str = ""
    """The ``ray`` executable; "" : the one beside this Python."""
    gcs_ft: bool = False
    """Ray's GCS fault tolerance: the head's GCS keeps the cluster's tables in a Redis of
    its own on the ``redis`` host (``gcs_redis_port``), so a head killed and started again
    (``start_head``) finds the worker nodes and their actors still there."""
    gcs_redis_port: int = 6381
    """Port of the GCS's redis-server on the ``redis`` host (with ``gcs_ft``)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise BedError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def _used_subnets() -> set[str]:
    """Third octets of 10.213.x.0/24 addresses already on this machine or in a namespace."""
    texts = [_ip("-o", "addr", check=False).stdout]
    for ns in namespaces():
        texts.append(_ip("-n", ns, "-o", "addr", check=False).stdout)
    used = set()
    for text in texts:
        for word in text.split():
            if word.startswith("10.213."):
                used.add(word.split(".")[2])
    return used


def namespaces(prefix: str = "") -> list[str]:
    """Names of network namespaces (those starting with ``prefix``)."""
    out = _ip("netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(prefix)]


def namespace_pids(ns: str) -> list[int]:
    """Every process in namespace ``ns``."""
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _setns(ns: str) -> None:
    """Move the calling thread into network namespace ``ns`` (sockets it opens from now on,
    and threads it starts, live there)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise BedError(f"setns({ns}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Bed:
    """One test bed; ``with Bed(config) as bed:`` builds it and always tears it down."""

    def __init__(self, config: BedConfig | None = None, prefix: str | None = None) -> None:
        self.config = config or BedConfig()
        self.prefix = prefix or "zf" + secrets.token_hex(3)[:5]
        self.dir = STATE_ROOT / self.prefix
        self.subnet = ""
        self.password = secrets.token_hex(24)
        """The tests' own (``zf-admin`` on the run's servers; the GCS server's only one)."""
        self.procs: list[subprocess.Popen] = []
        self._starts: dict[str, int] = {}

    @classmethod
    def load(cls, prefix: str) -> Bed:
        """The bed ``prefix`` that ``up`` built (another process's: ``python -m
        tests.netbed up``), to run commands in it or take it down."""
        state_dir = STATE_ROOT / prefix
        try:
            state = json.loads((state_dir / "bed.json").read_text())
        except (OSError, ValueError) as err:
            raise BedError(f"no bed {prefix!r} ({err})") from None
        bed = cls(BedConfig(**state.get("config", {})), prefix)
        bed.subnet = state["subnet"]
        with contextlib.suppress(OSError):
            bed.password = bed.password_file.read_text().strip()
        return bed

    # --- names and addresses -----------------------------------------------------------
    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def ip(self, host: str) -> str:
        return f"{self.subnet}.{HOSTS.index(host) + 2}"

    def link(self, host: str) -> str:
        """The root-namespace end of ``host``'s veth pair (``ip link set ... down``: the
        host is cut off)."""
        return f"{self.prefix}v{HOSTS.index(host)}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def ray_address(self) -> str:
        return f"{self.ip('head')}:{self.config.ray_port}"

    @property
    def redis_url(self) -> str:
        """The run's Redis URL, by host name, without credentials (each bed process finds
        its role's password in ``ZEROFORGE_REDIS_AUTH_DIR``); through the relay when one
        runs."""
        port = self.config.relay_port if self.config.delay_ms > 0 else self.config.redis_port
        return f"redis://redis:{port}/0"

    @property
    def password_file(self) -> Path:
        return self.dir / "redis-password"

    @property
    def auth_dir(self) -> Path:
        """The role password files of the run's servers (``acl.write_credentials``)."""
        return self.dir / "redis-auth"

    def admin_url(self, port: int | None = None) -> str:
        """``zf-admin``'s URL of the run's server on ``port`` (default ``redis_port``), by
        address, straight to redis-server: the tests' auditors read everything."""
        return (f"redis://{acl.ADMIN_USER}:{self.password}@{self.ip('redis')}:"
                f"{port or self.config.redis_port}/0")

    @property
    def token_file(self) -> Path:
        return self.dir / "ray-token"

    def env(self) -> dict[str, str]:
        """The environment of every process the bed starts (and of ``exec``)."""
        env = dict(os.environ)
        env.update({acl.AUTH_DIR_ENV: str(self.auth_dir), "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN_PATH": str(self.token_file),
                    "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
                    # the GCS declares a silent node dead after 5 missed 1 s checks (a
                    # lost machine's actors are replaced within seconds, not minutes)
                    "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                    "RAY_health_check_failure_threshold": "5",
                    # as docs/cluster.md says for machines shared with other work: Ray's
                    # default niceness 15 starves the run's actors beside busy processes
                    NICENESS_ENV: WORKER_NICENESS})
        env.pop("RAY_ADDRESS", None)
        env.pop("RAY_AUTH_TOKEN", None)
        env.pop("ZEROFORGE_REDIS_PASSWORD", None)
        return env

    # --- build -------------------------------------------------------------------------
    def up(self) -> Bed:
        """Build the network and start Redis and Ray (tears down what it made on failure)."""
        try:
            self._network()
            self._files()
            self.start_redis()
            if self.config.gcs_ft:
                self.start_redis(self.config.gcs_redis_port)
            if self.config.delay_ms > 0:
                self.start_relay(self.config.delay_ms)
            self._ray()
        except BaseException:
            self.down()
            raise
        return self

    def _network(self) -> None:
        used = _used_subnets()
        free = [str(i) for i in range(1, 255) if str(i) not in used]
        if not free:
            raise BedError("no free 10.213.x.0/24 subnet")
        self.subnet = f"10.213.{secrets.choice(free)}"
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._save_state()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        hosts_lines = "".join(f"{self.ip(h)} {h}\n" for h in HOSTS)
        for host in HOSTS:
            ns, link = self.ns(host), self.link(host)
            _ip("netns", "add", ns)
            _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", link, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            etc = NETNS_ETC / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{hosts_lines}")

    def _files(self) -> None:
        for path, text in ((self.password_file, self.password),
                           (self.token_file, secrets.token_hex(32))):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        acl.write_credentials(self.auth_dir, acl.new_passwords())

    def _save_state(self) -> None:
        (self.dir / "bed.json").write_text(json.dumps(
            {"prefix": self.prefix, "subnet": self.subnet, "hosts": list(HOSTS),
             "config": dataclasses.asdict(self.config)}))

    def start_redis(self, port: int | None = None) -> subprocess.Popen:
        """redis-server on the ``redis`` host: password, AOF, its bed address only; on
        ``port`` (default ``redis_port``; another port: a second server, its own data
        directory, e.g. for stream shards). Started again on the same port, it reloads
        its AOF."""
        port = port or self.config.redis_port
        data = self.dir / ("redis" if port == self.config.redis_port else f"redis-{port}")
        data.mkdir(exist_ok=True, mode=0o700)
        conf = data / "redis.conf"
        auth = f"requirepass {self.password}"
        if not (self.config.gcs_ft and port == self.config.gcs_redis_port):
            users = data / "users.acl"
            fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(acl.acl_text(acl.read_credentials(self.auth_dir), self.password))
            auth = f"aclfile {users}"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"bind {self.ip('redis')}\nport {port}\n"
                    f"{auth}\nprotected-mode yes\n"
                    f"dir {data}\nappendonly yes\nappendfsync everysec\nsave \"\"\n"
                    "daemonize no\nlogfile redis.log\n")
        proc = self.popen("redis", [self.config.redis_server, str(conf)])
        self.wait_port("redis", port)
        return proc

    def redis_pid(self, port: int | None = None) -> int:
        """The pid of the redis-server on ``port`` (default ``redis_port``) of the
        ``redis`` host (Redis titles its process ``redis-server HOST:PORT``)."""
        title = f"redis-server {self.ip('redis')}:{port or self.config.redis_port}"
        for pid in namespace_pids(self.ns("redis")):
            with contextlib.suppress(OSError):
                if title in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    return pid
        raise BedError(f"no {title} on the bed")

    def start_relay(self, delay_ms: float) -> subprocess.Popen:
        """The delaying relay on the ``redis`` host, ``relay_port`` -> redis-server."""
        proc = self.popen("redis", [
            sys.executable, str(Path(__file__).with_name("relay.py")),
            f"{self.ip('redis')}:{self.config.relay_port}",
            f"{self.ip('redis')}:{self.config.redis_port}", str(delay_ms)],
            log=self.dir / "relay.log")
        self.wait_port("redis", self.config.relay_port)
        return proc

    def _ray_exe(self) -> str:
        return self.config.ray or str(Path(sys.executable).with_name("ray"))

    def _ray(self) -> None:
        self.start_head()
        for host in ("node1", "node2"):
            self.start_worker_node(host)

    def start_head(self) -> None:
        """``ray start --head`` on ``head`` (also to bring it back after
        ``kill_host("head")``: with ``gcs_ft`` the new GCS reloads the cluster's tables,
        and the worker nodes' raylets, which retry for 60 s, reconnect to it)."""
        c = self.config
        args = ["--head", f"--port={c.ray_port}", f"--num-cpus={c.head_cpus:g}",
                "--include-dashboard=false", "--disable-usage-stats",
                f"--object-store-memory={c.object_store_bytes}"]
        env = None
        if c.gcs_ft:
            # Ray reads the GCS's Redis from the environment; the password goes on the
            # command line (Ray passes it to the GCS on its own command line anyway)
            env = {"RAY_REDIS_ADDRESS": f"{self.ip('redis')}:{c.gcs_redis_port}",
                   "RAY_external_storage_namespace": self.prefix}
            args += [f"--redis-password={self.password}", "--redis-username=default"]
        self.start_ray_node("head", args, env)

    def start_worker_node(self, host: str) -> None:
        """``ray start`` on worker node ``host``: no CPUs, ``worker_slots`` self-play slots
        (also to bring back a node after ``kill_host``)."""
        c = self.config
        self.start_ray_node(host, [
            f"--address={self.ray_address}", "--num-cpus=0",
            f"--resources={json.dumps({WORKER_RESOURCE: c.worker_slots, LEARNER_RESOURCE: 1})}",
            "--disable-usage-stats", f"--object-store-memory={c.object_store_bytes}"])

    def start_ray_node(self, host: str, args: Sequence[str],
                       env: dict[str, str] | None = None) -> None:
        """``ray start`` on ``host`` with its own temp dir (nodes share one filesystem; a
        restarted node gets a fresh one); ``env``: added to the bed's environment."""
        self._starts[host] = self._starts.get(host, 0) + 1
        temp = self.dir / f"{host}{self._starts[host]}"
        temp.mkdir()
        r = self.run(host, [self._ray_exe(), "start", f"--node-ip-address={self.ip(host)}",
                            f"--temp-dir={temp}", *args], timeout=180,
                     env={**self.env(), **(env or {})})
        if r.returncode != 0:
            raise BedError(f"ray start on {host} failed:\n{(r.stdout + r.stderr)[-3000:]}")

    # --- processes in the bed ------------------------------------------------------------
    def _argv(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def run(self, host: str, argv: Sequence[str], timeout: float = 120,
            **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` on ``host`` to its end (output captured)."""
        kwargs.setdefault("env", self.env())
        return subprocess.run(self._argv(host, argv), capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    def popen(self, host: str, argv: Sequence[str], log: Path | None = None,
              **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` on ``host`` in its own session; ``down`` kills it."""
        with contextlib.ExitStack() as files:
            if log is not None:
                kwargs.setdefault("stdout", files.enter_context(open(log, "ab")))
                kwargs.setdefault("stderr", subprocess.STDOUT)
            else:
                kwargs.setdefault("stdout", subprocess.DEVNULL)
                kwargs.setdefault("stderr", subprocess.DEVNULL)
            proc = subprocess.Popen(self._argv(host, argv),
                                    env=kwargs.pop("env", self.env()),
                                    start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def call_in(self, host: str, fn: Callable[[], T], timeout: float = 120) -> T:
        """``fn()`` in a thread inside ``host``'s network namespace; its sockets (and the
        threads it starts) stay there."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                _setns(self.ns(host))
                box["value"] = fn()
            except BaseException as err:  # handed to the caller
                box["error"] = err

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise BedError(f"call in {host} did not return within {timeout} s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def wait_port(self, host: str, port: int, timeout: float = 30) -> None:
        """Until something accepts TCP connections on ``host``'s address and ``port``."""
        def probe() -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(
                        (self.ip(host), port), timeout=1):
                    return True
                time.sleep(0.1)
            return False

        if not self.call_in(host, probe, timeout + 5):
            raise BedError(f"nothing listens on {host}:{port} after {timeout} s")

    def redis_rtt(self, port: int | None = None, rounds: int = 20, host: str = "head"
                  ) -> float:
        """Median round trip, in seconds, of a Redis ``PING`` (after ``AUTH``) from ``host``
        to the ``redis`` host on ``port`` (default: redis-server's; the relay's: its
        added latency shows)."""
        port = port or self.config.redis_port

        def measure() -> float:
            with socket.create_connection((self.ip("redis"), port), timeout=10) as s:
                f = s.makefile("rb")
                pw, user = self.password.encode(), acl.ADMIN_USER.encode()
                s.sendall(b"*3\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                          % (len(user), user, len(pw), pw))
                if f.readline() != b"+OK\r\n":
                    raise BedError("redis refused the bed's password")
                times = []
                for _ in range(rounds):
                    t = time.perf_counter()
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    if f.readline() != b"+PONG\r\n":
                        raise BedError("redis did not answer PING")
                    times.append(time.perf_counter() - t)
                return sorted(times)[len(times) // 2]

        return self.call_in(host, measure)

    # --- faults --------------------------------------------------------------------------
    def kill_host(self, host: str) -> list[int]:
        """SIGKILL every process in ``host``'s namespace (a machine lost); returns the pids."""
        killed = []
        for _ in range(5):  # a process may fork while we kill
            pids = namespace_pids(self.ns(host))
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.2)
        return killed

    def set_link(self, host: str, up: bool) -> None:
        """Cut ``host`` off the bridge (down) or reconnect it (up)."""
        _ip("link", "set", self.link(host), "up" if up else "down")

    @contextlib.contextmanager
    def partition(self, host: str) -> Iterator[None]:
        """``host`` unreachable for the duration of the block."""
        self.set_link(host, False)
        try:
            yield
        finally:
            self.set_link(host, True)

    @contextlib.contextmanager
    def cut(self, host: str, other: str) -> Iterator[None]:
        """``host`` and ``other`` cannot reach each other (both see the other's packets
        vanish: a blackhole route each way), while both still reach every other host: a
        partial partition, e.g. a node that lost its head but not its Redis."""
        pairs = ((host, other), (other, host))
        for a, b in pairs:
            _ip("-n", self.ns(a), "route", "add", "blackhole", f"{self.ip(b)}/32")
        try:
            yield
        finally:
            for a, b in pairs:
                _ip("-n", self.ns(a), "route", "del", "blackhole", f"{self.ip(b)}/32",
                    check=False)

    # --- teardown ------------------------------------------------------------------------
    def down(self) -> None:
        """Kill every process of the bed, delete its links, bridge, namespaces and files.
        Safe to call twice, or on a half-built bed."""
        teardown(self.prefix)
        for proc in self.procs:
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
        self.procs.clear()

    def __enter__(self) -> Bed:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


def teardown(prefix: str) -> None:
    """Remove every trace of the bed ``prefix`` (idempotent)."""
    if not prefix.startswith("zf") or "/" in prefix:
        raise BedError(f"not a bed prefix: {prefix!r}")
    for ns in namespaces(prefix + "-"):
        for _ in range(10):
            pids = namespace_pids(ns)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        _ip("netns", "delete", ns, check=False)
        shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
    links = _ip("-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(prefix) and name != f"{prefix}br":
                _ip("link", "delete", name, check=False)
    _ip("link", "delete", f"{prefix}br", check=False)
    keep = os.environ.get("ZEROFORGE_BED_LOGS")
    if keep and (STATE_ROOT / prefix).is_dir():
        # a failure to read later: the nodes' Ray logs and the run's files
        with contextlib.suppress(shutil.Error):
            shutil.copytree(STATE_ROOT / prefix, Path(keep) / prefix, dirs_exist_ok=True,
                            ignore_dangling_symlinks=True, symlinks=True,
                            ignore=shutil.ignore_patterns("sockets"))
    shutil.rmtree(STATE_ROOT / prefix, ignore_errors=True)


def beds() -> list[str]:
    """Prefixes of beds that exist now (a namespace or a state directory)."""
    found = {ns.split("-")[0] for ns in namespaces("zf") if "-" in ns}
    if STATE_ROOT.exists():
        found.update(p.name for p in STATE_ROOT.iterdir() if p.name.startswith("zf"))
    return sorted(found)
