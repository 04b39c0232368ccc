"""Forward time of the nets alone: a batch of Go 9x9 positions, batch norm folded, float32.

Unlike ``bench_nets.py`` (evaluations/s through TorchEvaluator, one net at a time), this
times ``module(x)`` only, and interleaves the nets within each round, so a load that
changes during the run slows every net alike and their ratios hold on a shared machine.
Prints the minimum and median milliseconds per batch, NCHW and channels-last.

    python benchmarks/bench_net_forward.py --batch 64 --rounds 30
    python benchmarks/bench_net_forward.py --nets go_cpu,go_cpu:channels=64 --batch 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from zeroforge.shared.games import GameSpec
from zeroforge.shared.nets import NetConfig, build_net, fuse_for_inference, num_parameters

DEFAULT_NETS = "small,resnet6x64,go_cpu,go_cpu:channels=64,resnet6x64:channels=48"
# Go 9x9 as the Go rules encode it (AlphaGo Zero's 17 planes, a pass action), by hand so
# that this runs without them.
GO9 = GameSpec(name="go", version=1, board_shape=(9, 9), num_actions=82, obs_shape=(17, 9, 9),
               spec_string="go:size=9", max_moves=162)


def parse_net(text: str) -> NetConfig:
    """``preset`` or ``preset:field=int;...`` (e.g. ``go_cpu:channels=64;blocks=8``)."""
    name, _, changes = text.partition(":")
    config = NetConfig.preset(name)
    if changes:
        config = config.replace(**{k: int(v) for k, v in
                                   (kv.split("=") for kv in changes.split(";"))})
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default=DEFAULT_NETS,
                        help=f"comma list of preset[:field=int;...] (default {DEFAULT_NETS})")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = (torch.rand(args.batch, *GO9.obs_shape) < 0.3).float()
    xcl = x.contiguous(memory_format=torch.channels_last)
    nets: dict[str, tuple[int, torch.nn.Module, torch.nn.Module]] = {}
    for text in args.nets.split(","):
        net = build_net(parse_net(text), GO9)
        cl = fuse_for_inference(net).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        nets[text] = (num_parameters(net), fuse_for_inference(net), cl)
    times: dict[tuple[str, str], list[float]] = {(n, v): [] for n in nets for v in ("nchw", "cl")}
    with torch.inference_mode():
        for _, plain, cl in nets.values():  # warm-up: allocator, oneDNN primitive cache
            plain(x)
            cl(xcl)
        for _ in range(args.rounds):
            for name, (_, plain, cl) in nets.items():
                for variant, model, inp in (("nchw", plain, x), ("cl", cl, xcl)):
                    start = time.perf_counter()
                    model(inp)
                    times[(name, variant)].append(time.perf_counter() - start)
    print(f"torch {torch.__version__}, {args.threads} thread(s), Go 9x9, batch {args.batch}, "
          f"{args.rounds} rounds; ms per batch")
    print(f"{'net':<28}{'params':>8}{'NCHW min':>10}{'median':>8}{'CL min':>8}{'median':>8}")
    for name, (params, _, _) in nets.items():
        a, b = times[(name, "nchw")], times[(name, "cl")]
        print(f"{name:<28}{params / 1e6:>7.2f}M{min(a) * 1e3:>10.1f}"
              f"{statistics.median(a) * 1e3:>8.1f}{min(b) * 1e3:>8.1f}"
              f"{statistics.median(b) * 1e3:>8.1f}")


if __name__ == "__main__":
    main()
