"""Evaluations per second of the policy-value nets through TorchEvaluator.

Prints one table per (net preset, game) case: rows are inference variants (batch-norm
folding, channels-last, torch.compile, thread count, bfloat16 on CUDA or a CPU with AMX or
AVX-512 BF16), columns are batch sizes, cells are positions evaluated per second (uint8
observations in, numpy float32 out, so conversion and transfer are included).

    python benchmarks/bench_nets.py --quick
    python benchmarks/bench_nets.py --threads 1,2 --compile
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from zeroforge.shared.games import GameSpec, make_game
from zeroforge.shared.nets import (
    InferenceConfig,
    TorchEvaluator,
    build_net,
    native_bfloat16,
    num_parameters,
    resolve_device,
)

DEFAULT_CASES = "small:gomoku6,resnet6x64:gomoku15,resnet6x64:go9"


def game_spec(name: str) -> GameSpec:
    """The registered game's spec; Go 9x9 by hand if the Go rules are not there yet."""
    try:
        return make_game(name).spec
    except Exception:  # Go's rules may be missing or broken in a partial checkout
        if name != "go9":
            raise
        return GameSpec(name="go", version=0, board_shape=(9, 9), num_actions=82,
                        obs_shape=(17, 9, 9), spec_string="go:size=9", max_moves=200)


def inputs(spec: GameSpec, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Random 0/1 observations [batch, C, H, W] uint8 and all-legal masks [batch, A]."""
    rng = np.random.default_rng(batch)
    obs = (rng.random((batch, *spec.obs_shape)) < 0.3).astype(np.uint8)
    return obs, np.ones((batch, spec.num_actions), bool)


def variants(device: torch.device, with_compile: bool) -> dict[str, InferenceConfig]:
    """Variant name -> inference config (all on ``device``)."""
    d = str(device)

    def cfg(fuse: bool, cl: bool, precision: str = "float32",
            compile_mode: str = "") -> InferenceConfig:
        return InferenceConfig(device=d, fuse_bn=fuse, channels_last=cl, precision=precision,
                               compile=bool(compile_mode), compile_mode=compile_mode or "default")

    out = {"plain": cfg(False, False), "fuse": cfg(True, False),
           "channels_last": cfg(False, True), "fuse+cl": cfg(True, True)}
    if native_bfloat16(device):  # CUDA, or a CPU with AMX or AVX-512 BF16
        out["fuse+bf16"] = cfg(True, False, "bfloat16")
        out["fuse+cl+bf16"] = cfg(True, True, "bfloat16")
    if with_compile:
        out["fuse+cl+compile"] = cfg(True, True, compile_mode="default")
        if device.type == "cuda":
            out["fuse+cl+bf16+cudagraph"] = cfg(True, True, "bfloat16", "reduce-overhead")
    return out


def trained_like_net(preset: str, spec: GameSpec) -> torch.nn.Module:
    """``build_net(preset, spec)``, seeded, in eval mode with non-trivial batch-norm
    statistics, as after training, so fused and plain variants do equal work."""
    torch.manual_seed(0)
    net = build_net(preset, spec)
    net.train()
    with torch.no_grad():
        net(torch.rand(64, *spec.obs_shape))
    return net.eval()


def time_evals(ev: TorchEvaluator, obs: np.ndarray, legal: np.ndarray,
               min_time: float) -> float:
    """Evaluations per second at obs's batch size over at least ``min_time`` seconds."""
    ev.evaluate(obs, legal)  # warm-up: allocator, oneDNN primitive cache
    reps, start = 0, time.perf_counter()
    while True:
        ev.evaluate(obs, legal)
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and reps >= 2:
            return reps * obs.shape[0] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="batch sizes 1,32,256, short timing, plain vs fuse+cl only")
    parser.add_argument("--cases", default=DEFAULT_CASES,
                        help=f"comma list of preset:game (default {DEFAULT_CASES})")
    parser.add_argument("--batches", default="1,8,32,128,256")
    parser.add_argument("--threads", default=None,
                        help="comma list of torch thread counts to try (default: torch's)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--variants", default=None, help="comma list to run a subset")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="seconds per cell and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved timing rounds; the best is reported")
    args = parser.parse_args()

    batches = [int(b) for b in args.batches.split(",")]
    min_time = args.min_time
    if args.quick:
        batches, min_time = [1, 32, 256], min(min_time, 0.1)
    device = resolve_device(args.device)
    threads = ([int(t) for t in args.threads.split(",")] if args.threads
               else [torch.get_num_threads()])
    chosen = variants(device, args.compile)
    if args.variants:
        chosen = {k: v for k, v in chosen.items() if k in args.variants.split(",")}
    elif args.quick:
        chosen = {k: v for k, v in chosen.items() if k in ("plain", "fuse+cl")}
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {name}; evaluations/s, best of interleaved rounds")

    rounds = args.rounds if not args.quick else 1

    for case in args.cases.split(","):
        preset, game = case.split(":")
        spec = game_spec(game)
        # Dynamo's recompile limit counts per code object (PolicyValueNet.forward) across
        # all instances; start each case afresh so earlier cases cannot use it up.
        torch._dynamo.reset()
        net = trained_like_net(preset, spec)
        print(f"\n{preset} on {spec.spec_string} obs {spec.obs_shape} A={spec.num_actions}, "
              f"{num_parameters(net) / 1e6:.2f}M params")
        # Reference outputs: the unfused float32 net on the CPU; "max err" is each
        # variant's largest deviation from them (fusion rounding, bf16, compiled kernels).
        ref_obs = inputs(spec, 8)[0]
        with torch.no_grad():
            ref_logits, ref_value = (t.numpy() for t in net(torch.from_numpy(ref_obs).float()))
        print(f"{'variant':>22} {'thr':>3} "
              + " ".join(f"{'B=' + str(b):>11}" for b in batches) + f" {'max err':>8}")
        for n_threads in threads:
            torch.set_num_threads(n_threads)
            evs, first, error = {}, {}, {}
            for vname, cfg in chosen.items():
                t0 = time.perf_counter()  # first call: includes any compilation
                try:
                    ev = TorchEvaluator(net, config=cfg)
                    out = ev.evaluate(ref_obs, np.ones((8, spec.num_actions), bool))
                except Exception as err:  # e.g. torch.compile without a working compiler
                    print(f"{vname:>22} {n_threads:>3} failed: {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:120] if str(err) else ''}")
                    continue
                evs[vname] = ev
                first[vname] = time.perf_counter() - t0
                error[vname] = max(np.abs(out.policy_logits - ref_logits).max(),
                                   np.abs(out.value - ref_value).max())
            best = {v: [0.0] * len(batches) for v in evs}
            # Variants are interleaved over several rounds and the best round kept, so a
            # burst of load from another process cannot single out one variant.
            for _ in range(rounds):
                for i, b in enumerate(batches):
                    obs, legal = inputs(spec, b)
                    for vname, ev in evs.items():
                        best[vname][i] = max(best[vname][i], time_evals(ev, obs, legal, min_time))
            for vname, rates in best.items():
                cells = " ".join(f"{r:>11,.0f}" for r in rates)
                note = f"  (first call {first[vname]:.1f}s)" if first[vname] > 1 else ""
                print(f"{vname:>22} {n_threads:>3} {cells} {error[vname]:>8.1e}{note}",
                      flush=True)


if __name__ == "__main__":
    main()
