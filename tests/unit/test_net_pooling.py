"""Global pooling blocks, pooled (fully convolutional) heads and the auxiliary ownership
and score heads (shared/nets/pooling.py, shared/nets/model.py); the plain nets are
covered by test_nets.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from zeroforge.shared.formats import weights_from_bytes, weights_to_bytes
from zeroforge.shared.games import GameSpec, make_game
from zeroforge.shared.nets import (
    PRESETS,
    GlobalPoolBias,
    InferenceConfig,
    NetConfig,
    NetOutputs,
    PolicyValueNet,
    PoolResBlock,
    ResBlock,
    TorchEvaluator,
    build_net,
    fuse_for_inference,
    global_pool,
    score_scale,
    value_pool,
)

DATA = Path(__file__).parent / "data"


def go_like(size: int) -> GameSpec:
    """A Go-shaped spec (17 planes, a pass action) built by hand, without the Go rules."""
    return GameSpec(name="go-like", version=0, board_shape=(size, size),
                    num_actions=size * size + 1, obs_shape=(17, size, size),
                    spec_string=f"go-like:{size}", max_moves=200)


GO9, GO7 = go_like(9), go_like(7)
GOMOKU6 = make_game("gomoku6").spec
# A small net with every new part: two pooling blocks of three, pooled and aux heads.
POOLED = NetConfig(kind="resnet", channels=16, blocks=3, global_pool_every=2, pool_channels=4,
                   heads="pooled", policy_channels=4, value_channels=4, value_hidden=(8,),
                   ownership_head=True, score_head=True)


def _obs(shape: tuple[int, ...], batch: int, seed: int = 0) -> torch.Tensor:
    """Random 0/1 planes [batch, *shape] as float."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy((rng.random((batch, *shape)) < 0.3).astype(np.float32))


def _trained_like(config: NetConfig, spec: GameSpec, seed: int = 0) -> PolicyValueNet:
    """A random net whose batch norms have non-trivial running statistics, in eval mode."""
    torch.manual_seed(seed)
    net = build_net(config, spec).train()
    with torch.no_grad():
        for i in range(3):
            net(_obs(spec.obs_shape, 16, seed=i) * 2.0 + 0.1)
    return net.eval()


# -- pooling, by hand ------------------------------------------------------------------


def test_global_pool_and_value_pool_known_answers() -> None:
    # One board of 2x2 (b = sqrt(4) = 2, so (b - 14) / 10 = -1.2 and
    # (b - 14)^2 / 100 - 0.1 = 1.34), two channels.
    x = torch.tensor([[[[1.0, 2.0], [3.0, 6.0]], [[0.0, 0.0], [0.0, -4.0]]]])
    means = torch.tensor([3.0, -1.0])
    torch.testing.assert_close(global_pool(x)[0],
                               torch.cat([means, means * -1.2, torch.tensor([6.0, 0.0])]))
    torch.testing.assert_close(value_pool(x)[0], torch.cat([means, means * -1.2, means * 1.34]))
    # 9x9: the scale terms follow the board: (9 - 14) / 10 = -0.5.
    ones = torch.ones(3, 1, 9, 9)
    torch.testing.assert_close(global_pool(ones), torch.tensor([[1.0, -0.5, 1.0]]).repeat(3, 1))
    # channels_last input: same numbers.
    torch.testing.assert_close(global_pool(x.contiguous(memory_format=torch.channels_last)),
                               global_pool(x))


def test_pool_bias_shifts_the_other_channels_by_a_linear_of_the_pooled_ones() -> None:
    layer = GlobalPoolBias(pooled_channels=1, biased_channels=2)
    with torch.no_grad():
        layer.linear.weight.zero_()
        layer.linear.bias.copy_(torch.tensor([0.0, -1.0]))
        layer.linear.weight[0, 2] = 1.0   # channel 0 += max of the pooled channel
        layer.linear.weight[1, 0] = 2.0   # channel 1 += 2 * the pooled mean, then -1
    g = torch.tensor([[-5.0, 1.0], [3.0, 0.0]])  # relu -> mean 1, max 3
    a = torch.tensor([[-4.0, 0.0], [1.0, -2.0]])
    b = torch.tensor([[0.5, -0.5], [-1.0, -2.0]])
    y, pooled = layer(torch.stack([g, a, b])[None])
    torch.testing.assert_close(pooled, torch.tensor([[1.0, 1.0 * -1.2, 3.0]]))
    torch.testing.assert_close(y[0, 0], torch.relu(a + 3.0))
    torch.testing.assert_close(y[0, 1], torch.relu(b + 2.0 * 1.0 - 1.0))


# -- config ------------------------------------------------------------------------------


@pytest.mark.parametrize("changes,message", [
    ({"heads": "conv"}, "heads must be 'fc' or 'pooled'"),
    ({"global_pool_every": -1}, "global_pool_every must be >= 0"),
    ({"global_pool_every": 2, "pool_channels": 16}, r"pool_channels must be in 1..channels-1"),
    ({"global_pool_every": 2, "pool_channels": 0}, r"pool_channels must be in 1..channels-1"),
    ({"kind": "convnet", "global_pool_every": 1}, "global_pool_every needs kind 'resnet'"),
    ({"heads": "pooled", "policy_hidden": (32,)}, "pooled heads have no policy_hidden"),
])
def test_bad_configs_are_one_line_value_errors(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        NetConfig(channels=16, **changes)
    assert "\n" not in str(info.value)


def test_pooled_heads_need_an_action_per_point() -> None:
    fewer = GameSpec(name="columns", version=0, board_shape=(6, 7), num_actions=7,
                     obs_shape=(2, 6, 7), spec_string="columns", max_moves=42)
    with pytest.raises(ValueError, match="pooled heads need an action per board point"):
        build_net(POOLED, fewer)
    assert build_net("tiny", fewer)(torch.zeros(1, 2, 6, 7))[0].shape == (1, 7)  # fc: as before


def test_every_kth_block_pools() -> None:
    config = NetConfig(channels=16, blocks=7, global_pool_every=3, pool_channels=4)
    net = build_net(config, GO9)
    blocks = list(net.trunk)[1:]
    assert [type(b) for b in blocks] == [ResBlock, ResBlock, PoolResBlock] * 2 + [ResBlock]
    pool_block = blocks[2]
    assert isinstance(pool_block, PoolResBlock)
    assert pool_block.b.conv.in_channels == 16 - 4 and pool_block.pool.linear.in_features == 12
    assert [type(b) for b in build_net(config.replace(global_pool_every=0), GO9).trunk[1:]] \
        == [ResBlock] * 7


# -- fc nets are as they were -----------------------------------------------------------


def test_fc_presets_keep_their_state_dict_names_and_shapes() -> None:
    """The fixture was written by the code before pooling (commit 5f6cca5) for the Go-like
    9x9 spec: a state dict saved from any of those presets must still load (strict)."""
    before = json.loads((DATA / "net_state_dicts_before_pooling.json").read_text())
    assert set(before) <= set(PRESETS)
    for name, entries in before.items():
        with torch.device("meta"):  # shapes only: no memory for the big towers
            net = build_net(name, GO9)
        now = [[k, list(t.shape)] for k, t in net.state_dict().items()]
        assert now == entries, name
        assert PRESETS[name].heads == "fc" and PRESETS[name].global_pool_every == 0
    old_tiny = build_net("tiny", GO9).state_dict()
    build_net("tiny", GO9).load_state_dict(old_tiny, strict=True)


# -- pooled heads on any board -----------------------------------------------------------


@pytest.mark.parametrize("spec,other", [(GO9, GO7), (GOMOKU6, None)], ids=["go", "gomoku"])
def test_pooled_net_runs_on_two_board_sizes(spec: GameSpec, other: GameSpec | None) -> None:
    net = _trained_like(POOLED, spec)
    extra = spec.num_actions - spec.board_shape[0] * spec.board_shape[1]
    assert net.extra_actions == extra == (1 if spec is GO9 else 0)
    c = spec.obs_shape[0]
    for size in (spec.board_shape[0], spec.board_shape[0] - 2):
        x = _obs((c, size, size), 5, seed=size)
        with torch.no_grad():
            logits, value = net(x)
            out = net.forward_all(x)
        assert logits.shape == (5, size * size + extra) and value.shape == (5,)
        assert out.ownership is not None and out.score is not None
        assert out.ownership.shape == (5, size, size) and out.score.shape == (5,)
        assert ((out.ownership >= -1) & (out.ownership <= 1)).all()
        assert ((value >= -1) & (value <= 1)).all()
        torch.testing.assert_close(out.policy, logits)
        torch.testing.assert_close(out.value, value)
    if other is not None:
        # No layer depends on the board: the 9x9 net's weights load into a net built for
        # 7x7, which then computes exactly what the 9x9 net computes on 7x7 inputs.
        small = build_net(POOLED, other).eval()
        small.load_state_dict(net.state_dict(), strict=True)
        x = _obs(other.obs_shape, 4, seed=3)
        with torch.no_grad():
            a, b = net.forward_all(x), small.forward_all(x)
        for got, want in zip(b, a, strict=True):
            torch.testing.assert_close(got, want)


def test_point_logits_are_row_major_and_local() -> None:
    """With the pooled bias switched off and no residual blocks, the logit of point (r, c)
    sees only the 3x3 stem's window: a change at (2, 5) moves exactly the logits of its
    neighbourhood, at indices r * 9 + c, and not the pass logit."""
    config = POOLED.replace(blocks=0, global_pool_every=0, ownership_head=False,
                            score_head=False)
    net = _trained_like(config, GO9)
    with torch.no_grad():
        net.policy_pool.linear.weight.zero_()
        net.policy_extra.weight.zero_()
        x = _obs(GO9.obs_shape, 1, seed=1)
        y = x.clone()
        y[0, :, 2, 5] = 1.0 - y[0, :, 2, 5]
        for layout in (torch.contiguous_format, torch.channels_last):
            net = net.to(memory_format=layout)  # type: ignore[call-overload]
            moved = (net(x.contiguous(memory_format=layout))[0]
                     != net(y.contiguous(memory_format=layout))[0])[0]
            want = {r * 9 + c for r in (1, 2, 3) for c in (4, 5, 6)}
            assert set(torch.nonzero(moved).flatten().tolist()) == want


def test_score_is_in_points_of_the_board_width() -> None:
    net = build_net(POOLED, GO9).eval()
    assert net.score_fc is not None
    last = net.score_fc[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(0.5)  # half a unit, on any board
        for size in (9, 7):
            score = net.forward_all(_obs((17, size, size), 2)).score
            assert score is not None
            torch.testing.assert_close(score, torch.full((2,), 0.5 * size))
    assert score_scale(9, 9) == 9.0 and score_scale(19, 19) == 19.0


def test_aux_heads_are_off_by_default_and_forward_skips_them() -> None:
    plain = build_net("tiny", GO9).eval()
    out = plain.forward_all(_obs(GO9.obs_shape, 2))
    assert isinstance(out, NetOutputs) and out.ownership is None and out.score is None
    assert not any("ownership" in k or "score" in k for k in plain.state_dict())

    net = build_net(POOLED, GO9).train()
    x = _obs(GO9.obs_shape, 4)
    logits, value = net(x)
    (logits.sum() + value.sum()).backward()
    aux = [n for n, p in net.named_parameters() if n.startswith(("ownership", "score"))]
    assert aux and all(net.get_parameter(n).grad is None for n in aux)
    # forward_all reaches every parameter (none of the new layers is left unconnected).
    net.zero_grad(set_to_none=True)
    out = net.forward_all(x)
    assert out.ownership is not None and out.score is not None
    (out.policy.sum() + out.value.sum() + out.ownership.sum() + out.score.sum()).backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_aux_heads_learn_a_fixed_batch() -> None:
    """~60 Adam steps fit ownership and score targets (plus policy and value) far down."""
    torch.manual_seed(5)
    net = build_net(POOLED, GO7).train()
    x = _obs(GO7.obs_shape, 16, seed=9)
    own_target = torch.sign(x[:, 0] - x[:, 1])  # a function of the input planes
    score_target = own_target.sum(dim=(1, 2)) + 0.5
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def losses() -> tuple[torch.Tensor, torch.Tensor]:
        out = net.forward_all(x)
        assert out.ownership is not None and out.score is not None
        own = ((out.ownership - own_target) ** 2).mean()
        score = (((out.score - score_target) / score_scale(7, 7)) ** 2).mean()
        return own, score

    first = [t.item() for t in losses()]
    for _ in range(60):
        opt.zero_grad()
        sum(losses()).backward()
        opt.step()
    last = [t.item() for t in losses()]
    assert last[0] < 0.3 * first[0] and last[1] < 0.1 * first[1], (first, last)


# -- inference copies, weights and evaluators --------------------------------------------


@pytest.mark.parametrize("config", [
    POOLED,
    POOLED.replace(heads="fc"),                                   # pooling blocks, fc heads
    NetConfig(kind="convnet", trunk=(8, 16), heads="pooled", policy_channels=4,
              value_channels=2, value_hidden=(8,), ownership_head=True),  # convnet
    NetConfig(kind="convnet", trunk=(8,), batch_norm=False, heads="pooled",
              policy_channels=4, value_channels=2, value_hidden=(8,), score_head=True),
], ids=["pooled-resnet", "pool-blocks-fc-heads", "pooled-convnet", "pooled-no-bn"])
def test_fused_copy_gives_every_head_the_same_outputs(config: NetConfig) -> None:
    net = _trained_like(config, GO9, seed=2)
    fused = fuse_for_inference(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    x = _obs(GO9.obs_shape, 8, seed=5)
    with torch.no_grad():
        want, got = net.forward_all(x), fused.forward_all(x)
    assert [t is None for t in want] == [t is None for t in got]
    for a, b in zip(want, got, strict=True):
        if a is not None:
            torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)


def test_weights_round_trip_and_evaluators_serve_an_aux_net() -> None:
    net = _trained_like(POOLED, GO9, seed=3)
    blob = weights_to_bytes(net)
    copy = build_net(POOLED, GO9).eval()
    copy.load_state_dict(weights_from_bytes(blob), strict=True)
    x = _obs(GO9.obs_shape, 6, seed=7)
    with torch.no_grad():
        for a, b in zip(net.forward_all(x), copy.forward_all(x), strict=True):
            assert a is not None and b is not None and torch.equal(a, b)
        want_p, want_v = net(x)

    obs = x.numpy().astype(np.uint8)
    legal = np.ones((6, GO9.num_actions), bool)
    plain = InferenceConfig(device="cpu", fuse_bn=False, channels_last=False)
    for config in (InferenceConfig(device="cpu"), plain):  # default: fused + channels-last
        ev = TorchEvaluator(net, config=config, weights_version=2)
        out = ev.evaluate(obs, legal)
        np.testing.assert_allclose(out.policy_logits, want_p.numpy(), atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(out.value, want_v.numpy(), atol=1e-5)
        # Swapping in other weights: the evaluator follows them.
        other = _trained_like(POOLED, GO9, seed=4)
        ev.load_state_dict(weights_from_bytes(weights_to_bytes(other)), version=3)
        with torch.no_grad():
            np.testing.assert_allclose(ev.evaluate(obs, legal).policy_logits,
                                       other(x)[0].numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("backend", ["onnxruntime", "torch-int8"])
def test_exported_backends_run_a_pooled_aux_net(backend: str) -> None:
    from zeroforge.shared.nets import legal_move_probabilities, make_evaluator

    net = _trained_like(POOLED, GO9, seed=6)
    obs = _obs(GO9.obs_shape, 5, seed=8).numpy().astype(np.uint8)
    legal = np.ones((5, GO9.num_actions), bool)
    want = TorchEvaluator(net, device="cpu").evaluate(obs, legal)
    got = make_evaluator(net, backend, threads=1).evaluate(obs, legal)
    tol = 1e-4 if backend == "onnxruntime" else 2e-2
    np.testing.assert_allclose(legal_move_probabilities(got.policy_logits, legal),
                               legal_move_probabilities(want.policy_logits, legal), atol=tol)
    np.testing.assert_allclose(got.value, want.value, atol=tol)


def test_inference_server_serves_a_go_preset_from_the_config() -> None:
    """``net: go_cpu``-style configs load (new fields included) and the inference server
    runs such a net as any other, on tic-tac-toe here to stay cheap."""
    import asyncio

    from zeroforge.actors.config import InferenceServerConfig
    from zeroforge.actors.inference import InferenceServer
    from zeroforge.deploy.config import TrainConfig
    from zeroforge.shared import config as cfg

    loaded = cfg.load(TrainConfig, None, ["net.heads=pooled", "net.global_pool_every=1",
                                          "net.pool_channels=4", "net.ownership_head=true",
                                          "net.score_head=true"]).net
    assert (loaded.heads, loaded.global_pool_every, loaded.ownership_head) == ("pooled", 1, True)
    assert cfg.from_dict(NetConfig, cfg.to_dict(PRESETS["go_cpu"])) == PRESETS["go_cpu"]
    spec = make_game("tictactoe").spec
    net = _trained_like(loaded, spec, seed=1)
    obs = _obs(spec.obs_shape, 3).numpy().astype(np.uint8)
    legal = np.ones((3, 9), bool)

    async def main() -> tuple:
        server = InferenceServer("tictactoe", loaded, InferenceServerConfig(device="cpu"),
                                 None, "unit")
        assert await server.load_weights(weights_to_bytes(net), 7) == 7
        answer = await server.evaluate(obs, legal)
        server.close()
        return answer

    logits, value, version = asyncio.run(main())
    with torch.no_grad():
        want_p, want_v = net(torch.from_numpy(obs).float())
    assert version == 7
    np.testing.assert_allclose(logits, want_p.numpy(), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(value, want_v.numpy(), atol=1e-5)


@pytest.mark.parametrize("preset", ["go_small", "go_cpu", "go_gpu"])
def test_go_presets_build_with_every_part(preset: str) -> None:
    config = PRESETS[preset]
    with torch.device("meta"):
        net = build_net(preset, make_game("go9").spec)
    pool_blocks = sum(isinstance(b, PoolResBlock) for b in net.trunk)
    assert pool_blocks == config.blocks // config.global_pool_every >= 1
    assert config.heads == "pooled" and net.ownership_conv is not None and net.score_fc is not None
