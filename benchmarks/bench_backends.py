"""Evaluations per second of the CPU inference backends (shared/nets/backends.py).

Prints one Markdown table: a row per (net preset, game, backend), a column per batch
size, cells are positions evaluated per second through the backend's evaluator (uint8
observations in, numpy float32 out, so conversion is included), plus each backend's
largest absolute deviation from the torch backend on policy probabilities (softmax over
the legal moves) and values. Backends are timed interleaved over several rounds and the
best round kept, as in bench_nets.py.

    OMP_NUM_THREADS=1 python benchmarks/bench_backends.py --quick
    python benchmarks/bench_backends.py --threads 2 --backends torch,openvino
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bench_nets import game_spec, inputs, time_evals, trained_like_net  # noqa: E402
from benchmarks.machine import machine_line  # noqa: E402
from zeroforge.shared.nets import (  # noqa: E402
    BACKENDS,
    BackendError,
    legal_move_probabilities,
    make_evaluator,
    num_parameters,  # noqa: E402
)

DEFAULT_CASES = ("tiny:tictactoe,small:gomoku6,small:go9,resnet6x64:go9,resnet6x64:gomoku15,"
                 "resnet10x128:go9,resnet10x128:gomoku15")
QUICK_CASES = "tiny:tictactoe,small:gomoku6,resnet6x64:go9"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"cases {QUICK_CASES}, batches 1,32,256, one short round")
    parser.add_argument("--cases", default=None,
                        help=f"comma list of preset:game (default {DEFAULT_CASES})")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--batches", default="1,8,32,128,256")
    parser.add_argument("--threads", type=int, default=1, help="threads of every backend")
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="seconds per cell and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved timing rounds; the best is reported")
    args = parser.parse_args()

    batches = [int(b) for b in args.batches.split(",")]
    cases, min_time, rounds = args.cases or DEFAULT_CASES, args.min_time, args.rounds
    if args.quick:
        cases = args.cases or QUICK_CASES
        batches, min_time, rounds = [1, 32, 256], min(min_time, 0.1), 1
    torch.set_num_threads(args.threads)
    print(machine_line())
    print(f"\nevaluations/s with {args.threads} thread(s), best of {rounds} interleaved "
          f"round(s); err: max |p - p_torch| over legal-move probabilities and |v - v_torch|\n")
    print("| net, game | backend | " + " | ".join(f"B={b}" for b in batches)
          + " | err p | err v | build s |")
    print("|---|---|" + "---:|" * (len(batches) + 3))

    for case in cases.split(","):
        preset, game = case.split(":")
        spec = game_spec(game)
        net = trained_like_net(preset, spec)
        label = f"`{preset}` ({num_parameters(net) / 1e6:.2f}M), {game}"
        # Accuracy inputs: random observations, random legal masks (at least one legal).
        rng = np.random.default_rng(1)
        acc_obs = (rng.random((64, *spec.obs_shape)) < 0.3).astype(np.uint8)
        acc_legal = rng.random((64, spec.num_actions)) < 0.5
        acc_legal[:, 0] = True
        evs, built, errs = {}, {}, {}
        ref = None
        for backend in args.backends.split(","):
            t0 = time.perf_counter()
            try:
                ev = make_evaluator(net, backend, threads=args.threads)
                out = ev.evaluate(acc_obs, acc_legal)
            except BackendError as err:
                print(f"| {label} | {backend} | {err} |")
                continue
            built[backend] = time.perf_counter() - t0
            probs = legal_move_probabilities(out.policy_logits, acc_legal)
            if ref is None:  # the first backend (torch by default) is the reference
                ref = (probs, out.value)
            errs[backend] = (np.abs(probs - ref[0]).max(), np.abs(out.value - ref[1]).max())
            evs[backend] = ev
        best = {b: [0.0] * len(batches) for b in evs}
        # Interleaved rounds: a burst of load from another process hits every backend.
        for _ in range(rounds):
            for i, b in enumerate(batches):
                obs, legal = inputs(spec, b)
                for backend, ev in evs.items():
                    best[backend][i] = max(best[backend][i],
                                           time_evals(ev, obs, legal, min_time))  # type: ignore[arg-type]
        for backend, rates in best.items():
            ep, evv = errs[backend]
            print(f"| {label} | {backend} | " + " | ".join(f"{r:,.0f}" for r in rates)
                  + f" | {ep:.1e} | {evv:.1e} | {built[backend]:.2f} |", flush=True)
            label = ""


if __name__ == "__main__":
    main()
