"""Leaf batches in flight, measured on the CPU: a worker's positions/s behind a server with
an artificial round trip, against its search's own ceiling (``selfplay.batches_in_flight``).

The GPU's part is replaced by a stand-in with a known cost, so the overlap of search and
round trip shows on a 2-core machine. Self-play workers are OS processes (as in
``bench_gpu_selfplay.py``, whose pipe format this reuses: raw array bytes, never pickle),
one pipe per group of a worker; this process runs one real ``InferenceServer`` (its
batching, wait policy and metrics) whose network call is an instant uniform answer after
``--call-ms`` (one call at a time, like a GPU below its saturation), and each pipe's
thread adds the rest of ``--latency-ms`` as transport delay (half each way, concurrent
across requests): an unqueued request's round trip is ``--latency-ms``.

Rows, for each number in flight (``--in-flight``): self-play positions/s of the worker(s)
and their share of the ceiling (the same worker with the uniform evaluator in-process, no
server, one group), the server's mean positions per call and its fill (/ ``max_batch`` =
workers x B), requests per call, mean queue depth when a batch forms, and the round trip
p50/p99 as the pipe threads saw it (exact, per request). Settings run in interleaved
rounds (``--repeats``), each in fresh worker processes; the table gives medians.

    python benchmarks/bench_in_flight.py                       # go9, B=128, 64 sims, ~10 min
    python benchmarks/bench_in_flight.py --game gomoku15 --batch 64 --simulations 128
    python benchmarks/bench_in_flight.py --quick               # a smoke run, ~1 min
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import multiprocessing as mp
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_gpu_selfplay import PipeEvaluator, decode_request  # benchmarks/ (run from here)
from server_stats import batching

from zeroforge.shared.search import Evaluation

CEILING = 0
"""The ``in_flight`` value of the ceiling rows: uniform evaluator in-process, no server."""


# -- the worker side (a child process) -------------------------------------------------------
def worker_main(conns: list, game_spec: str, batch: int, simulations: int, seed: int,
                positions: Any) -> None:
    """Play self-play moves for ever, adding each move's positions to ``positions``: with
    ``conns`` empty, the ceiling (uniform evaluator, one group); else ``len(conns)``
    groups, each evaluating over its own pipe."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.actors.selfplay_groups import InFlightWorker
    from zeroforge.shared.games import make_game
    from zeroforge.shared.search import SearchConfig, UniformEvaluator

    game = make_game(game_spec)
    search = SearchConfig(num_simulations=simulations)
    groups = max(1, len(conns))
    config = SelfPlayConfig(games_in_parallel=batch, batches_in_flight=groups)
    worker: SelfPlayWorker | InFlightWorker
    if not conns:
        worker = SelfPlayWorker(game, UniformEvaluator(), search, config, seed=seed)
    else:
        pipes = iter(conns)
        worker = InFlightWorker(batch, groups, lambda slots, ids: SelfPlayWorker(
            game, PipeEvaluator(next(pipes), game.spec.num_actions), search, config,
            seed=seed, slots=slots, game_ids=ids))
    while True:
        worker.play_moves(1)
        with positions.get_lock():
            positions.value += batch


# -- the server side (this process) ----------------------------------------------------------
def uniform_after(call_s: float, num_actions: int) -> Any:
    """The stand-in network call: sleeps ``call_s``, answers uniform priors and value 0."""

    def forward(obs: list[np.ndarray], legal: list[np.ndarray]) -> Evaluation:
        time.sleep(call_s)
        b = sum(len(o) for o in obs)
        return Evaluation(np.zeros((b, num_actions), np.float32), np.zeros(b, np.float32))

    return forward


def serve_pipe(conn: Any, server: Any, loop: asyncio.AbstractEventLoop, transport_s: float,
               round_trips: list[float]) -> None:
    """Answer one group's requests through ``server``, ``transport_s`` late in all (half
    before, half after), recording each round trip; until the worker goes away."""
    try:
        while True:
            data = conn.recv_bytes()
            start = time.perf_counter()
            time.sleep(transport_s / 2)
            obs, legal = decode_request(data, server.obs_shape, server.num_actions)
            logits, value, version = asyncio.run_coroutine_threadsafe(
                server.evaluate(obs, legal), loop).result()
            time.sleep(transport_s / 2)
            conn.send_bytes(np.ascontiguousarray(logits, np.float32).tobytes()
                            + np.ascontiguousarray(value, np.float32).tobytes()
                            + np.int64(version).tobytes())
            round_trips.append(time.perf_counter() - start)
    except (EOFError, OSError, RuntimeError, concurrent.futures.CancelledError):
        return


def quantile_ms(sorted_s: list[float], q: float) -> float:
    """The ``q`` quantile of ascending seconds, in ms (0 for none)."""
    if not sorted_s:
        return 0.0
    return sorted_s[min(int(q * len(sorted_s)), len(sorted_s) - 1)] * 1e3


async def measure(args: argparse.Namespace, in_flight: int) -> dict:
    """One setting in fresh worker processes: warm up, then time a window."""
    from zeroforge.actors.inference import InferenceServer, InferenceServerConfig
    from zeroforge.shared.nets import NetConfig

    ctx = mp.get_context("spawn")
    loop = asyncio.get_running_loop()
    max_batch = args.workers * args.batch
    server = InferenceServer(args.game, NetConfig.preset("tiny"),
                             InferenceServerConfig(max_batch=max_batch,
                                                   max_wait_ms=args.max_wait_ms, device="cpu"),
                             None, "bench")
    server._forward = uniform_after(args.call_ms / 1000, server.num_actions)  # type: ignore[method-assign]
    await server.ready()
    transport_s = max(args.latency_ms - args.call_ms, 0.0) / 1000
    counters, procs, round_trips = [], [], []
    for seed in range(args.workers):
        ends = [ctx.Pipe() for _ in range(in_flight)]
        counter = ctx.Value("q", 0)
        proc = ctx.Process(target=worker_main, daemon=True, args=(
            [there for _, there in ends], args.game, args.batch, args.simulations, seed,
            counter))
        proc.start()
        for here, _ in ends:
            threading.Thread(target=serve_pipe, daemon=True, args=(
                here, server, loop, transport_s, round_trips)).start()
        counters.append(counter)
        procs.append(proc)
    try:
        while any(c.value == 0 for c in counters):  # imports, the search kernels' JIT
            await asyncio.sleep(0.1)
        await asyncio.sleep(args.warmup)
        before, played, trips = server.stats(), sum(c.value for c in counters), len(round_trips)
        t0 = time.perf_counter()
        await asyncio.sleep(args.seconds)
        wall = time.perf_counter() - t0
        after, played = server.stats(), sum(c.value for c in counters) - played
        window = sorted(round_trips[trips:])
    finally:
        for proc in procs:
            proc.terminate()
            proc.join()
        server.close()
    totals = batching(before, after)
    calls = max(totals["calls"], 1)
    return {
        "game": args.game, "batch": args.batch, "simulations": args.simulations,
        "workers": args.workers, "in_flight": in_flight, "latency_ms": args.latency_ms,
        "call_ms": args.call_ms, "seconds": round(wall, 1),
        "positions_per_s": played / wall,
        "positions_per_call": totals["positions"] / calls,
        "fill": totals["positions"] / calls / max_batch,
        "requests_per_call": totals["requests"] / calls,
        "queue_depth": totals["depths"][1] / max(totals["depths"][0], 1),
        "round_trip_p50_ms": quantile_ms(window, 0.5),
        "round_trip_p99_ms": quantile_ms(window, 0.99),
    }


def summarise(rows: list[dict]) -> list[dict]:
    """Median of each setting's repeats; ``of_ceiling``: against the ceiling's median."""
    by: dict[int, list[dict]] = {}
    for row in rows:
        by.setdefault(row["in_flight"], []).append(row)
    ceiling = statistics.median(r["positions_per_s"] for r in by.get(CEILING, [])) if (
        CEILING in by) else None
    out = []
    for in_flight, group in sorted(by.items()):
        med = {key: statistics.median(r[key] for r in group)
               for key in group[0] if isinstance(group[0][key], float)}
        med.update(in_flight=in_flight, repeats=len(group),
                   each=[round(r["positions_per_s"]) for r in group])
        med["of_ceiling"] = med["positions_per_s"] / ceiling if ceiling else None
        out.append(med)
    return out


def print_table(summary: list[dict]) -> None:
    print("| in flight | positions/s (each) | of ceiling | positions/call | fill "
          "| requests/call | queue depth | round trip p50 / p99 ms |\n" + "|---" * 8 + "|")
    for s in summary:
        name = "ceiling (uniform, no server)" if s["in_flight"] == CEILING else str(
            s["in_flight"])
        each = ", ".join(f"{v:,}" for v in s["each"])
        if s["in_flight"] == CEILING:
            print(f"| {name} | {s['positions_per_s']:,.0f} ({each}) | 100% | - | - | - | - "
                  "| - |")
            continue
        print(f"| {name} | {s['positions_per_s']:,.0f} ({each}) | {s['of_ceiling']:.0%} "
              f"| {s['positions_per_call']:.0f} | {s['fill']:.2f} "
              f"| {s['requests_per_call']:.2f} | {s['queue_depth']:.2f} "
              f"| {s['round_trip_p50_ms']:.1f} / {s['round_trip_p99_ms']:.1f} |")


async def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for r in range(args.repeats):
        for in_flight in [CEILING, *args.in_flight]:
            row = await measure(args, in_flight)
            row["round"] = r
            rows.append(row)
            print(f"# round {r}, in flight {in_flight or 'ceiling'}: "
                  f"{row['positions_per_s']:,.0f} positions/s", flush=True)
            if args.jsonl is not None:
                with args.jsonl.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="go9")
    parser.add_argument("--batch", type=int, default=128, help="B: games per worker")
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1, help="self-play processes")
    parser.add_argument("--in-flight", default="1,2,4", help="comma-separated group counts")
    parser.add_argument("--latency-ms", type=float, default=10.0,
                        help="an unqueued request's round trip")
    parser.add_argument("--call-ms", type=float, default=2.0,
                        help="the stand-in network call, one at a time (part of the round trip)")
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=20.0, help="timed window per setting")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds after the first move before the window")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: gomoku6, B=8, 8 simulations, short windows, 1 round")
    parser.add_argument("--jsonl", type=Path, help="raw rows also appended here")
    args = parser.parse_args()
    if args.quick:
        args.game, args.batch, args.simulations = "gomoku:size=6,k=4", 8, 8
        args.seconds, args.warmup, args.repeats = 3.0, 1.0, 1
    args.in_flight = [int(x) for x in args.in_flight.split(",")]
    if any(not 1 <= g <= args.batch for g in args.in_flight):
        parser.error(f"--in-flight: each between 1 and --batch ({args.batch})")
    if args.workers < 1 or args.batch < 1 or args.simulations < 1 or args.repeats < 1:
        parser.error("--workers, --batch, --simulations and --repeats must be >= 1")
    if args.call_ms < 0 or args.latency_ms < args.call_ms:
        parser.error("--call-ms must be >= 0 and at most --latency-ms")

    from machine import machine_line

    print(f"# leaf batches in flight: {args.game}, {args.workers} worker process(es) x "
          f"B={args.batch} games, {args.simulations} simulations; round trip "
          f"{args.latency_ms:g} ms ({args.call_ms:g} ms of it the stand-in network call, one "
          f"at a time); max_wait {args.max_wait_ms:g} ms; medians of {args.repeats} "
          "interleaved rounds")
    print(f"# {machine_line()}\n")
    rows = asyncio.run(run(args))
    print()
    print_table(summarise(rows))


if __name__ == "__main__":
    main()
