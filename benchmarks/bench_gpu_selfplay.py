"""Self-play positions/s through one InferenceServer under real load, per network precision.

Self-play workers are OS processes (no Ray needed, so it runs on a bare GPU machine): each
runs a ``SelfPlayWorker`` (B games, batched PUCT search) whose evaluations go over a pipe
to this process, where one ``InferenceServer`` merges every worker's leaf batches into
network calls. The pipe carries raw array bytes (never pickle): a request is
``b`` (int32) + obs [b, C, H, W] uint8 + legal [b, A] bool; an answer is logits [b, A]
float32 + value [b] float32 + the weights version (int64).

The workers start once per game and keep playing while the server behind them is swapped,
one server per mode, so every mode sees the same workers, games and search:

- ``float32``: the network in float32;
- ``bfloat16``: in bfloat16 (``inference.precision``; the default on CUDA);
- ``bfloat16+graphs``: bfloat16 and ``torch.compile(mode="reduce-overhead")``, which
  replays CUDA graphs (``inference.compile``); batches are padded to powers of two.

Per mode, over the timed window: self-play positions/s (moves played, summed over all
games), network evaluations/s, mean positions per network call, requests merged per call,
mean queue wait, and the mean request latency inside the server (wait + network call).

    python benchmarks/bench_gpu_selfplay.py --game go9 --game gomoku15 --modes float32,bfloat16
    python benchmarks/bench_gpu_selfplay.py --game go9 --modes bfloat16+graphs   # per game
    python benchmarks/bench_gpu_selfplay.py --game gomoku6 --net small --workers 1 \\
        --batch 8 --simulations 8 --seconds 5 --warmup 3 --modes float32   # a CPU smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import multiprocessing as mp
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from zeroforge.shared.games import make_game
from zeroforge.shared.search import Evaluation

MODES = {
    "float32": {"precision": "float32"},
    "bfloat16": {"precision": "bfloat16"},
    "bfloat16+graphs": {"precision": "bfloat16", "compile": True},
}
"""Mode name -> InferenceServerConfig fields it sets."""


# -- the worker side (a child process) -------------------------------------------------------
class PipeEvaluator:
    """An Evaluator whose network is behind a pipe (see the module docstring's format)."""

    def __init__(self, conn: Any, num_actions: int) -> None:
        self.conn = conn
        self.num_actions = num_actions
        self.weights_version = 0

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        b = len(obs)
        self.conn.send_bytes(np.int32(b).tobytes() + np.ascontiguousarray(obs, np.uint8).tobytes()
                             + np.ascontiguousarray(legal, np.bool_).tobytes())
        answer = self.conn.recv_bytes()
        logits = np.frombuffer(answer, np.float32, b * self.num_actions).reshape(b, -1)
        value = np.frombuffer(answer, np.float32, b, offset=4 * b * self.num_actions)
        self.weights_version = int(np.frombuffer(answer, np.int64, 1, offset=4 * b * (
            self.num_actions + 1))[0])
        return Evaluation(logits, value, self.weights_version)


def worker_main(conn: Any, game_spec: str, batch: int, simulations: int, seed: int,
                positions: Any) -> None:
    """Play self-play moves for ever, adding each move's positions to ``positions``."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.shared.search import SearchConfig

    game = make_game(game_spec)
    worker = SelfPlayWorker(game, PipeEvaluator(conn, game.spec.num_actions),
                            SearchConfig(num_simulations=simulations),
                            SelfPlayConfig(games_in_parallel=batch), seed=seed)
    while True:
        worker.play_moves(1)
        with positions.get_lock():
            positions.value += batch


# -- the server side (this process) ----------------------------------------------------------
def decode_request(data: bytes, obs_shape: tuple[int, ...],
                   num_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """(obs [b, *obs_shape] uint8, legal [b, A] bool) from a PipeEvaluator request."""
    b = int(np.frombuffer(data, np.int32, 1)[0])
    obs_size = b * int(np.prod(obs_shape))
    obs = np.frombuffer(data, np.uint8, obs_size, offset=4).reshape(b, *obs_shape)
    legal = np.frombuffer(data, np.bool_, b * num_actions, offset=4 + obs_size)
    return obs, legal.reshape(b, num_actions)


def serve_pipe(conn: Any, holder: dict, loop: asyncio.AbstractEventLoop) -> None:
    """Answer one worker's requests with whichever server ``holder["server"]`` is now,
    until the worker or the event loop goes away (the end of a game's measurement)."""
    try:
        while True:
            data = conn.recv_bytes()
            while (server := holder.get("server")) is None:  # the first is still warming
                time.sleep(0.05)
            obs, legal = decode_request(data, server.obs_shape, server.num_actions)
            logits, value, version = asyncio.run_coroutine_threadsafe(
                server.evaluate(obs, legal), loop).result()
            conn.send_bytes(np.ascontiguousarray(logits, np.float32).tobytes()
                            + np.ascontiguousarray(value, np.float32).tobytes()
                            + np.int64(version).tobytes())
    except (EOFError, OSError, RuntimeError, concurrent.futures.CancelledError):
        return


async def measure_mode(args: argparse.Namespace, game: str, mode: str, holder: dict,
                       counters: list) -> dict:
    """Swap in a server for ``mode``, warm it up under the workers' load, time a window."""
    from server_stats import batching, mean_ms

    from zeroforge.actors.inference import InferenceServer, InferenceServerConfig
    from zeroforge.shared.nets import NetConfig

    config = InferenceServerConfig(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms,
                                   device=args.device, num_threads=0, **MODES[mode])
    server = InferenceServer(game, NetConfig.preset(args.net), config, None, "bench")
    await server.ready()
    start = time.perf_counter()
    if config.compile:
        # Compile every padded size once before the workers' traffic meets it.
        size = 1
        while size <= args.max_batch:
            await server.evaluate(np.zeros((size, *server.obs_shape), np.uint8),
                                  np.ones((size, server.num_actions), bool))
            size *= 2
    old, holder["server"] = holder.get("server"), server
    while any(c.value == 0 for c in counters):  # workers still starting (imports, JIT)
        await asyncio.sleep(0.1)
    await asyncio.sleep(args.warmup)
    if old is not None:
        old.close()  # its last requests were answered long ago
    warm_s = time.perf_counter() - start
    before, played_before = server.stats(), sum(c.value for c in counters)
    t0 = time.perf_counter()
    await asyncio.sleep(args.seconds)
    wall = time.perf_counter() - t0
    after, played_after = server.stats(), sum(c.value for c in counters)
    totals = batching(before, after)
    calls = max(totals["calls"], 1)
    return {
        "game": game, "net": args.net, "mode": mode, "device": server.device,
        "workers": args.workers, "batch": args.batch, "simulations": args.simulations,
        "warmup_s": round(warm_s, 1), "seconds": round(wall, 1),
        "positions_per_s": (played_after - played_before) / wall,
        "evals_per_s": totals["positions"] / wall,
        "positions_per_call": totals["positions"] / calls,
        "requests_per_call": totals["requests"] / calls,
        "wait_ms": mean_ms(totals["waits"]),
        "latency_ms": mean_ms(totals["latencies"]),
    }


async def bench_game(args: argparse.Namespace, game: str, out: Path | None) -> list[dict]:
    """Start the workers for ``game``, measure each mode behind them, stop the workers."""
    ctx = mp.get_context("spawn")  # no fork of a process that holds CUDA and threads
    loop = asyncio.get_running_loop()
    holder: dict = {}
    counters, procs = [], []
    for seed in range(args.workers):
        here, there = ctx.Pipe()
        counter = ctx.Value("q", 0)
        proc = ctx.Process(target=worker_main, daemon=True, args=(
            there, game, args.batch, args.simulations, seed, counter))
        proc.start()
        threading.Thread(target=serve_pipe, args=(here, holder, loop), daemon=True).start()
        counters.append(counter)
        procs.append(proc)
    rows = []
    try:
        for mode in args.modes:
            row = await measure_mode(args, game, mode, holder, counters)
            rows.append(row)
            print_row(row)
            if out is not None:
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        for proc in procs:
            proc.terminate()
            proc.join()
        if holder.get("server") is not None:
            holder["server"].close()
    return rows


def print_row(row: dict) -> None:
    print(f"| {row['game']} | {row['mode']} | {row['positions_per_s']:,.0f} "
          f"| {row['evals_per_s']:,.0f} | {row['positions_per_call']:.0f} "
          f"| {row['requests_per_call']:.1f} | {row['wait_ms']:.1f} "
          f"| {row['latency_ms']:.1f} | {row['warmup_s']:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", dest="games", action="append", help="repeatable")
    parser.add_argument("--net", default="resnet10x128", help="net preset")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                        help="self-play processes (default: all cores but two)")
    parser.add_argument("--batch", type=int, default=64, help="B: games per worker")
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--seconds", type=float, default=30.0, help="timed window per mode")
    parser.add_argument("--warmup", type=float, default=10.0, help="load before the window")
    parser.add_argument("--max-batch", type=int, default=1024)
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--jsonl", type=Path, help="rows also appended here")
    args = parser.parse_args()
    args.games = args.games or ["go9"]
    args.modes = args.modes.split(",")
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)} (known: {', '.join(MODES)})")
    if len(args.games) > 1 and any(MODES[m].get("compile") for m in args.modes):
        # torch.compile's CUDA-graph trees keep per-thread state: a second compiled server
        # on a new network thread fails (docs/lab/gpu.md, "On a GPU under real self-play load").
        parser.error("CUDA-graph modes measure one --game per invocation")
    if args.workers < 1 or args.batch < 1 or args.simulations < 1:
        parser.error("--workers, --batch and --simulations must be >= 1")

    import torch
    from machine import machine_line

    # One recompilation per padded batch size: allow them all.
    torch._dynamo.config.recompile_limit = 32  # type: ignore[attr-defined]
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    print(f"# self-play through one InferenceServer: net {args.net}, {args.workers} worker "
          f"processes x B={args.batch} games, {args.simulations} simulations, max_batch "
          f"{args.max_batch}, max_wait {args.max_wait_ms} ms; {gpu}")
    print(f"# {machine_line()}\n")
    print("| game | mode | self-play positions/s | evaluations/s | positions/call "
          "| requests/call | queue wait ms | latency ms | warm-up s |\n" + "|---" * 9 + "|")
    for game in args.games:
        asyncio.run(bench_game(args, game, args.jsonl))


if __name__ == "__main__":
    main()
