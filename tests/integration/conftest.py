"""Integration fixtures: one real redis-server (the bundled binary) for the whole session.

Each test gets its own run id, so tests share the server without sharing keys.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from shared.transport import RedisServer, connect


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The bundled redis-server on a free loopback port with a generated password."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = connect(redis_server.url)
    yield client
    client.close()


@pytest.fixture
def run_id() -> str:
    """A fresh run id: the keys of one test never meet another's."""
    return f"t-{uuid.uuid4().hex[:12]}"
