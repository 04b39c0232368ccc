"""Precision names (``torch_evaluator.PRECISIONS``): what each means on the CPU,
bfloat16 inference against float32, and the self-play worker's own network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zeroforge.shared.games import make_game
from zeroforge.shared.nets import (
    InferenceConfig,
    NetConfig,
    TorchEvaluator,
    build_net,
    native_bfloat16,
    resolve_dtype,
)

CPU = torch.device("cpu")


def test_names_resolve_per_device():
    assert resolve_dtype("auto", CPU) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("fast", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("fast", CPU) == (torch.bfloat16 if native_bfloat16(CPU)
                                          else torch.float32)
    assert resolve_dtype("bfloat16", CPU) == torch.bfloat16
    assert resolve_dtype("float32", torch.device("cuda")) == torch.float32
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_dtype("int4", CPU)


@pytest.mark.parametrize("amx, avx512_bf16, native", [
    (False, False, False), (True, False, True), (False, True, True), (True, True, True)])
def test_fast_follows_the_cpus_bfloat16_instructions(monkeypatch, amx, avx512_bf16, native):
    """``fast`` is bfloat16 on a CPU with AMX tiles or AVX-512 BF16 (Zen 4 has only the
    latter, and ran the small net 1.7x faster in it), float32 on one with neither; a torch
    without the probes counts as neither."""
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    assert native_bfloat16(CPU) is native
    assert resolve_dtype("fast", CPU) == (torch.bfloat16 if native else torch.float32)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert native_bfloat16(CPU) is False


def test_bfloat16_inference_on_the_cpu_is_close_to_float32():
    """The worker's bfloat16 net: probabilities within 3e-2 of float32's and values within
    5e-2, on positions from random play (the small net, initialised at random)."""
    game = make_game("gomoku6")
    torch.manual_seed(0)
    net = build_net(NetConfig.preset("small"), game.spec)
    exact = TorchEvaluator(net, config=InferenceConfig(device="cpu", precision="float32"))
    low = TorchEvaluator(net, config=InferenceConfig(device="cpu", precision="bfloat16"))
    assert low.dtype == torch.bfloat16
    rng = np.random.default_rng(0)
    obs = (rng.random((64, *game.spec.obs_shape)) < 0.2).astype(np.uint8)
    legal = np.ones((64, game.spec.num_actions), bool)
    a, b = exact.evaluate(obs, legal), low.evaluate(obs, legal)
    assert b.policy_logits.dtype == np.float32 and b.value.dtype == np.float32
    pa = torch.softmax(torch.from_numpy(a.policy_logits), 1)
    pb = torch.softmax(torch.from_numpy(b.policy_logits), 1)
    assert 0 < float((pa - pb).abs().max()) < 3e-2  # > 0: it really ran in bfloat16
    assert float(np.abs(a.value - b.value).max()) < 5e-2


def test_selfplay_worker_own_network_follows_selfplay_precision(tmp_path):
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay_service import SelfPlayService
    from zeroforge.shared.run_context import RunContext
    from zeroforge.shared.search import SearchConfig
    from zeroforge.shared.transport import MemoryTransport

    transport = MemoryTransport("precision-test")
    store = transport.weights()
    net_config = NetConfig.preset("tiny")
    store.publish(build_net(net_config, make_game("tictactoe").spec), 0)
    ctx = RunContext(run_id="precision-test", run_dir=str(tmp_path / "run"),
                     transport="memory://", game="tictactoe")
    services = {p: SelfPlayService(ctx, net_config, SearchConfig(num_simulations=8),
                                   SelfPlayConfig(games_in_parallel=4, precision=p),
                                   transport.samples(), store, worker_id="w0", seed=1)
                for p in ("auto", "bfloat16")}
    assert services["auto"].evaluator.dtype == torch.float32
    assert services["bfloat16"].evaluator.dtype == torch.bfloat16
    services["bfloat16"].run_once(9)  # plays whole games on the bfloat16 net
    assert services["bfloat16"].appended >= 1
    with pytest.raises(ValueError, match="selfplay.precision must be one of"):
        SelfPlayConfig(precision="fp8")
