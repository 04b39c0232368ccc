"""A TCP relay that delays every byte by a fixed time in each direction.

The test bed's kernel has no ``netem`` qdisc (``tc qdisc add ... netem`` answers "Specified
qdisc kind is unknown") and no modules can be loaded, so added latency is made in user
space: the relay listens on one address, connects each client to the target, and hands
every chunk it reads to a delay line that writes it out ``delay_ms`` after it arrived,
in order. Chunks do not wait for each other (a delay line, not a sleep per chunk), so the
relay adds latency, not a bandwidth cap: a request and its answer cross it once each, so
a round trip gains ``2 * delay_ms``.

Run it inside a namespace: ``python -m tests.netbed.relay LISTEN_HOST:PORT
TARGET_HOST:PORT DELAY_MS``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
import time

CHUNK = 65536
"""Largest read, in bytes."""


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay_s: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay_s`` after it was read."""
    line: collections.deque[tuple[float, bytes]] = collections.deque()
    arrived = asyncio.Event()
    done = False

    async def sender() -> None:
        while True:
            while not line:
                if done:
                    return
                arrived.clear()
                await arrived.wait()
            due, data = line.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    task = asyncio.create_task(sender())
    try:
        while data := await reader.read(CHUNK):
            line.append((time.monotonic() + delay_s, data))
            arrived.set()
    except (ConnectionError, OSError):
        pass
    finally:
        done = True
        arrived.set()
        with contextlib.suppress(ConnectionError, OSError):
            await task
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.write_eof()


async def _serve_one(target: tuple[str, int], delay_s: float,
                     client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
    try:
        server_r, server_w = await asyncio.open_connection(*target)
    except OSError:
        client_w.close()
        return
    try:
        await asyncio.gather(_pump(client_r, server_w, delay_s),
                             _pump(server_r, client_w, delay_s))
    finally:
        for w in (client_w, server_w):
            w.close()


async def start(listen: tuple[str, int], target: tuple[str, int], delay_ms: float
                ) -> asyncio.Server:
    """A listening relay from ``listen`` (port 0: any) to ``target``."""
    return await asyncio.start_server(
        lambda r, w: _serve_one(target, delay_ms / 1000.0, r, w), *listen)


async def serve(listen: tuple[str, int], target: tuple[str, int], delay_ms: float) -> None:
    """Relay connections to ``listen`` on to ``target`` until cancelled."""
    server = await start(listen, target, delay_ms)
    async with server:
        await server.serve_forever()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m tests.netbed.relay LISTEN_HOST:PORT TARGET_HOST:PORT "
              "DELAY_MS", file=sys.stderr)
        return 2
    try:
        listen, target, delay = _address(args[0]), _address(args[1]), float(args[2])
    except ValueError as err:
        print(f"relay: bad argument ({err})", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listen, target, delay))
    return 0


if __name__ == "__main__":
    sys.exit(main())
