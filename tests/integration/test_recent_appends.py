"""Games a redis-server acknowledged and then lost in a restart are appended again by their
producer (``shared/transport/recent_appends.py``), against real servers of both binaries a
run meets, with the worker's ACL role.

The loss is made as a slow disk makes it: the server's data directory is copied after the
first batch (its AOF then holds that batch), the second batch is appended and acknowledged,
the server is killed with SIGKILL and started again from the copy, so that it comes back
without the second batch, as one whose AOF write was still postponed behind an fsync does.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.integration.test_transport import make_games
from zeroforge.shared.transport import (
    RedisServer,
    RedisServerConfig,
    SampleStream,
    StreamConfig,
    acl,
    connect,
)

BINARIES = {"bundled-6.2": None, "debian-7": shutil.which("redis-server")}


@pytest.fixture(params=sorted(BINARIES))
def server(request, tmp_path):
    """An unsupervised redis-server with role users and its AOF in ``tmp_path/data``."""
    binary = BINARIES[request.param]
    if request.param == "debian-7":
        assert binary, "Debian's redis-server is not installed (apt-get install redis-server)"
    passwords = tuple(sorted(acl.new_passwords().items()))
    config = RedisServerConfig(binary=binary, data_dir=str(tmp_path / "data"),
                               supervise=False, role_passwords=passwords)
    started = [RedisServer(config).start()]
    yield started
    for s in started:
        s.stop()


def restart_from(server: RedisServer, copy: Path) -> RedisServer:
    """SIGKILL ``server``, put its data directory back as ``copy`` held it, start it again
    on its port."""
    os.kill(server.pid, signal.SIGKILL)
    server._proc.wait(10)
    data = Path(server.config.data_dir)
    shutil.rmtree(data)
    shutil.copytree(copy, data)
    return RedisServer(dataclasses.replace(server.config, port=server.port)).start()


def streams(server: RedisServer, run_id: str) -> tuple[SampleStream, SampleStream]:
    """(the learner's reader, a worker's producer), each with its role's user."""
    reader = SampleStream(connect(server.role_url("learner")), run_id)
    worker = SampleStream(connect(server.role_url("worker")), run_id)
    return reader, worker


def read_all(reader: SampleStream) -> list[str]:
    ids = []
    while got := reader.read(50):
        ids += [g.game_id for _, g in got]
        reader.ack([i for i, _ in got])
    return ids


def wait_in_files(folder: Path, marker: bytes, timeout_s: float = 10.0) -> None:
    """Until some file under ``folder`` contains ``marker``."""
    deadline = time.monotonic() + timeout_s
    while not any(marker in f.read_bytes() for f in folder.rglob("*") if f.is_file()):
        assert time.monotonic() < deadline, f"{marker!r} never reached {folder}"
        time.sleep(0.05)


def test_games_a_restarted_server_lost_are_appended_again_once(server, run_id, tmp_path,
                                                               caplog):
    games = make_games(24)
    reader, worker = streams(server[0], run_id)
    worker.append(games[:8])  # in the AOF of the copy
    # Redis writes its AOF after replying, later still under load: copy once it holds them
    # (CI copied too early once, and the copy lacked all 16)
    wait_in_files(Path(server[0].config.data_dir), games[7].game_id.encode())
    copy = tmp_path / "copy"
    shutil.copytree(server[0].config.data_dir, copy)
    worker.append(games[8:16])  # acknowledged, then lost with the restart
    server.append(restart_from(server[0], copy))
    caplog.set_level(logging.WARNING)
    # the same producer, its connections broken by the kill, appends its next batch (from
    # another thread, as a host's other worker would: the resend is that thread's count)
    carried: dict = {}

    def next_batch() -> None:
        carried["ids"] = worker.append(games[16:])
        carried["counts"] = worker.writer_counts()

    thread = threading.Thread(target=next_batch)
    thread.start()
    thread.join(60)
    assert len(carried["ids"]) == 8
    assert worker.resent == 8
    assert carried["counts"].resent == 8 and worker.writer_counts().resent == 0
    got = read_all(reader)
    assert sorted(got) == sorted(g.game_id for g in games)  # each once: the first 8 not again
    lines = [r.getMessage() for r in caplog.records if "restarted" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "8 of the 16 games" in lines[0]
    # the next append finds the same server: nothing more is resent
    worker.append(make_games(4, start=100))
    assert worker.resent == 8 and len(read_all(reader)) == 4


def test_a_restart_that_kept_every_append_resends_nothing(server, run_id, tmp_path):
    """A restart that lost nothing (the AOF had every acknowledged append) costs one
    check, and no copy. On 7.x this also holds the ACL file's default user to what Redis's
    AOF replay needs (``acl.DEFAULT_USER``): with ``-@all`` it came back with no stream."""
    games = make_games(12)
    reader, worker = streams(server[0], run_id)
    worker.append(games[:6])
    worker.append(games[6:])
    copy = tmp_path / "copy"
    shutil.copytree(server[0].config.data_dir, copy)
    server.append(restart_from(server[0], copy))
    worker.append(make_games(2, start=50))
    assert worker.resent == 0
    assert len(read_all(reader)) == 14


def test_resends_wait_for_room_like_any_append(server, run_id, tmp_path):
    """The games owed after a restart go in ahead of the next batch, under the stream's
    bound: with no room for both, nothing is written and both are still held."""
    config = StreamConfig(max_backlog=10, append_timeout_s=0.3, room_check_interval_s=0.1)
    reader = SampleStream(connect(server[0].role_url("learner")), run_id, config)
    worker = SampleStream(connect(server[0].role_url("worker")), run_id, config)
    worker.append(make_games(2))
    copy = tmp_path / "copy"
    shutil.copytree(server[0].config.data_dir, copy)
    worker.append(make_games(4, start=2))  # lost
    server.append(restart_from(server[0], copy))
    with pytest.raises(Exception, match="max_backlog 10"):
        worker.append(make_games(5, start=10))  # 2 held + 4 owed + 5 > 10
    assert worker.resent == 0 and reader.info().length == 2
    assert read_all(reader) == ["g0", "g1"]
    worker.append(make_games(5, start=10))
    assert worker.resent == 4
    assert sorted(read_all(reader)) == sorted(f"g{i}" for i in (2, 3, 4, 5, 10, 11, 12, 13,
                                                                 14))
