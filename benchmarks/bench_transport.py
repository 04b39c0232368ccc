"""Sample-stream throughput on loopback: 15x15 gomoku games, one producer, one consumer.

Games are synthetic but shaped like self-play output: 60-120 positions, 4 binary planes
(own stones, opponent stones, last move, side to move) and visit policies of 800
simulations spread over 10-40 moves. Phases:

- encode / decode: the msgpack codec alone, no Redis;
- append: ``SampleStream.append`` (encode + pipelined XADD) in batches;
- read: ``SampleStream.read`` (XREADGROUP + decode) then ``ack`` (XACK + trim);
- end to end: a producer process appends while this process reads and acks, with the
  default backpressure limit; timed from the producer's start to the last ack.

Prints a markdown table; "Redis share" is the phase time minus the codec time.

    python benchmarks/bench_transport.py                 # 1000 games per phase
    python benchmarks/bench_transport.py --games 300     # quicker
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import time

import numpy as np

from zeroforge.shared.samples import GameSamples, decode, encode
from zeroforge.shared.transport import RedisServer, SampleStream, StreamConfig, connect

BOARD = 15
ACTIONS = BOARD * BOARD


def synth_game(rng: np.random.Generator, game_id: str) -> GameSamples:
    """One gomoku-shaped game of 60-120 positions."""
    t = int(rng.integers(60, 121))
    moves = rng.choice(ACTIONS, t, replace=False)
    board = np.zeros(ACTIONS, np.int8)  # 0 empty, 1 first player, 2 second
    obs = np.zeros((t, 4, ACTIONS), np.uint8)
    policy = np.zeros((t, ACTIONS), np.float32)
    for ply in range(t):
        mover = ply % 2 + 1
        obs[ply, 0] = board == mover
        obs[ply, 1] = (board != mover) & (board != 0)
        if ply:
            obs[ply, 2, moves[ply - 1]] = 1
        obs[ply, 3] = ply % 2 == 0
        empty = np.flatnonzero(board == 0)
        k = min(int(rng.integers(10, 41)), len(empty))
        support = np.union1d(rng.choice(empty, k, replace=False), [moves[ply]])
        counts = rng.multinomial(800, rng.dirichlet(np.full(len(support), 0.3)))
        policy[ply, support] = counts / 800
        board[moves[ply]] = mover
    return GameSamples(game="gomoku:size=15,k=5", game_version=1,
                       obs=obs.reshape(t, 4, BOARD, BOARD), policy=policy,
                       to_play=(np.arange(t) % 2).astype(np.int8),
                       outcome=int(rng.choice([-1, 1])), weights_version=1,
                       run_id="bench", worker_id="w0", game_id=game_id)


def game_pool(size: int = 200, seed: int = 0) -> list[GameSamples]:
    rng = np.random.default_rng(seed)
    return [synth_game(rng, f"g{i}") for i in range(size)]


def games_for(pool: list[GameSamples], n: int) -> list[GameSamples]:
    return [pool[i % len(pool)] for i in range(n)]


def producer(url: str, run_id: str, n: int, batch: int, ready: mp.Event, start: mp.Event,
             result: mp.Queue) -> None:
    """Append ``n`` games in batches once ``start`` is set; report seconds spent waiting."""
    games = games_for(game_pool(), n)
    stream = SampleStream(connect(url), run_id)
    ready.set()  # imports and game generation stay out of the timing
    start.wait()
    for i in range(0, n, batch):
        stream.append(games[i:i + batch])
    result.put(stream.backpressure_wait_s)


def row(name: str, games: int, positions: int, nbytes: int, seconds: float,
        note: str = "") -> str:
    return (f"| {name} | {games / seconds:,.0f} | {positions / seconds:,.0f} | "
            f"{nbytes / seconds / 1e6:,.1f} | {seconds:.2f} | {note} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=1000, help="games per phase")
    parser.add_argument("--batch", type=int, default=16, help="games per append")
    parser.add_argument("--read-batch", type=int, default=64, help="games per read")
    parser.add_argument("--url", help="an existing Redis (default: start the bundled one)")
    args = parser.parse_args()

    pool = game_pool()
    games = games_for(pool, args.games)
    positions = sum(g.num_positions for g in games)
    blobs = [encode(g) for g in pool]
    nbytes = sum(len(blobs[i % len(pool)]) for i in range(args.games))
    print(f"{args.games} games, {positions} positions ({positions / args.games:.0f} per game), "
          f"{nbytes / args.games / 1e3:.1f} kB per encoded game, "
          f"{nbytes / positions:.0f} B per position; {platform.python_version()}, "
          f"{os.cpu_count()} CPUs\n")

    t0 = time.perf_counter()
    for g in games:
        encode(g)
    t_encode = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(args.games):
        decode(blobs[i % len(pool)])
    t_decode = time.perf_counter() - t0

    server = None if args.url else RedisServer().start()
    url = args.url or server.url
    try:
        client = connect(url)
        bulk = StreamConfig(max_backlog=args.games + 1)
        stream = SampleStream(client, f"bench-{os.getpid()}", bulk)
        t0 = time.perf_counter()
        for i in range(0, args.games, args.batch):
            stream.append(games[i:i + args.batch])
        t_append = time.perf_counter() - t0

        t0 = time.perf_counter()
        got = 0
        t_ack = 0.0
        while got < args.games:
            batch = stream.read(args.read_batch, block_ms=1000)
            got += len(batch)
            a0 = time.perf_counter()
            stream.ack([i for i, _ in batch])
            t_ack += time.perf_counter() - a0
        t_read = time.perf_counter() - t0

        run_id = f"bench-e2e-{os.getpid()}"
        consumer = SampleStream(client, run_id)  # default max_backlog: real backpressure
        ctx = mp.get_context("spawn")
        ready, start, result = ctx.Event(), ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=producer,
                           args=(url, run_id, args.games, args.batch, ready, start, result))
        proc.start()
        if not ready.wait(timeout=120):
            raise RuntimeError("the producer process did not start")
        t0 = time.perf_counter()
        start.set()
        got = 0
        while got < args.games:
            batch = consumer.read(args.read_batch, block_ms=1000)
            got += len(batch)
            consumer.ack([i for i, _ in batch])
        t_e2e = time.perf_counter() - t0
        waited = result.get(timeout=60)
        proc.join()
    finally:
        if server is not None:
            server.stop()

    n, p = args.games, positions
    print("| phase | games/s | positions/s | MB/s | seconds | note |")
    print("|---|---:|---:|---:|---:|---|")
    print(row("encode (codec only)", n, p, nbytes, t_encode,
              f"{t_encode / n * 1e6:.0f} µs/game"))
    print(row("decode (codec only)", n, p, nbytes, t_decode,
              f"{t_decode / n * 1e6:.0f} µs/game"))
    print(row(f"append, batch {args.batch}", n, p, nbytes, t_append,
              f"Redis share {(t_append - t_encode) / t_append:.0%}"))
    print(row(f"read+decode+ack, batch {args.read_batch}", n, p, nbytes, t_read,
              f"Redis share {(t_read - t_decode) / t_read:.0%} (ack+trim "
              f"{t_ack / t_read:.0%})"))
    print(row("end to end, 2 processes", n, p, nbytes, t_e2e,
              f"producer waited {waited:.2f} s on backpressure"))


if __name__ == "__main__":
    main()
