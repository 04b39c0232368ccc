"""Integration fixtures: one real redis-server (the bundled binary) for the whole session.

Each test gets its own run id, so tests share the server without sharing keys.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import ray
import redis

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.rating_service import RatingService
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.ray.naming import NAMESPACE
from zeroforge.deploy.ray.private_api import init_on_node_ip
from zeroforge.deploy.runtime.builder import build_learner, build_rating_service
from zeroforge.learner.service import LearnerService
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import RedisServer, RedisServerConfig, acl, connect, open_transport


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray cluster of this module's own (2 CPUs, loopback): never one that another
    test (or test process) started with ``ray start`` on this machine."""
    init_on_node_ip("127.0.0.1", address="local", num_cpus=2, include_dashboard=False,
                    namespace=NAMESPACE, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def no_ray_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that found Ray down leaves it down (unless a Ray fixture holds it): many Ray
    calls (``ray.util.list_named_actors`` ...) start a local cluster when none is up, and
    one left in a test process made the next module's ``local_ray`` fail there."""
    was_up = ray.is_initialized()
    yield
    if not was_up and ray.is_initialized() and not {"local_ray", "ray_cluster"} & set(
            request.fixturenames):
        ray.shutdown()
        pytest.fail(f"{request.node.nodeid} left Ray initialized in the test process")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The bundled redis-server on a free loopback port with a generated password."""
    with RedisServer() as server:
        yield server


@dataclasses.dataclass
class RoleRedis:
    """A redis-server with a user a role (``acl.py``) and the default user off, as a
    distributed run starts its own; its role passwords in files under ``auth_dir``."""

    server: RedisServer
    auth_dir: str
    """The role password files (``RunContext.redis_auth_dir``)."""

    @property
    def url(self) -> str:
        """The owner's URL (``zf-admin``, every right): for tests that look inside."""
        return self.server.url

    @property
    def endpoint(self) -> str:
        """``redis://HOST:PORT/0``, no credentials: what a run's actors are given."""
        return self.server.endpoint

    def role_url(self, role: str) -> str:
        return self.server.role_url(role)

    def context(self, ctx):
        """``ctx`` (a ``RunContext``) on this server with role users."""
        return dataclasses.replace(ctx, transport=self.endpoint, redis_auth_dir=self.auth_dir)


@pytest.fixture(scope="session")
def roles_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoleRedis]:
    """The bundled redis-server with role users, shared by the session (runs use their own
    run ids, as with ``redis_server``)."""
    passwords = acl.new_passwords()
    auth_dir = acl.write_credentials(Path(tmp_path_factory.mktemp("redis")) / "auth",
                                     passwords)
    config = RedisServerConfig(role_passwords=tuple(sorted(passwords.items())))
    with RedisServer(config) as server:
        yield RoleRedis(server, str(auth_dir))


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = connect(redis_server.url)
    yield client
    client.close()


@pytest.fixture
def run_id() -> str:
    """A fresh run id: the keys of one test never meet another's."""
    return f"t-{uuid.uuid4().hex[:12]}"


def learner_service(config: TrainConfig, url: str, run_id: str, run_dir: str,
                    resume: bool = True, **options: object) -> LearnerService:
    """The run's learner as the Ray runtime builds it, over the Redis at ``url``."""
    ctx = dataclasses.replace(config.context(run_id, url), run_dir=run_dir)
    return build_learner(config, ctx, open_transport(url, run_id), resume, **options)


def rating_service(config: TrainConfig, url: str, run_id: str,
                      anchors: Sequence[str] | None = None, games: int | None = None,
                      run_dir: str = "", **options: object) -> RatingService:
    """The run's evaluator as the Ray runtime builds it (no run record unless
    ``run_dir``)."""
    ctx = dataclasses.replace(config.context(run_id, url), run_dir=run_dir)
    options.setdefault("record", None)
    return build_rating_service(config, ctx, open_transport(url, run_id), anchors=anchors,
                           games=games, **options)


def tiny_net_games(game_spec: str, count: int, simulations: int, parallel: int,
                   worker_id: str) -> list[GameSamples]:
    """``count`` real self-play games of a tiny random net (``simulations`` a move,
    ``parallel`` at a time): valid games for tests of what consumes them."""
    game = make_game(game_spec)
    evaluator = TorchEvaluator(build_net(NetConfig.preset("tiny"), game.spec), device="cpu")
    worker = SelfPlayWorker(game, evaluator, SearchConfig(num_simulations=simulations),
                            SelfPlayConfig(games_in_parallel=parallel), seed=0,
                            worker_id=worker_id)
    return worker.play_games(count)[:count]


def renamed(games: list[GameSamples], prefix: str) -> list[GameSamples]:
    """Copies with ids unique to one test."""
    return [dataclasses.replace(g, game_id=f"{prefix}-{i}") for i, g in enumerate(games)]
