"""Policy-value nets, masked policy, BN folding and TorchEvaluator (weight formats:
test_weights_format.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zeroforge.shared.games import GameSpec, make_game
from zeroforge.shared.nets import (
    PRESETS,
    InferenceConfig,
    NetConfig,
    TorchEvaluator,
    build_net,
    fuse_for_inference,
    masked_log_softmax,
)
from zeroforge.shared.search import check_evaluation

# Go 9x9 as AlphaGo Zero encodes it (8 history planes per colour + colour to move) with
# the pass action; built by hand so these tests do not depend on the Go rules.
GO_LIKE = GameSpec(name="go-like", version=0, board_shape=(9, 9), num_actions=82,
                   obs_shape=(17, 9, 9), spec_string="go-like", max_moves=200)
SPECS = {"tictactoe": make_game("tictactoe").spec, "gomoku6": make_game("gomoku6").spec,
         "go_like": GO_LIKE}
# The big towers cost seconds per forward on a shared CPU; shapes are checked on the
# smallest board only, where their cost is small.
CHEAP = ["tiny", "small", "qpt", "resnet6x64", "go_cpu"]


def _obs(spec: GameSpec, batch: int, seed: int = 0) -> np.ndarray:
    """Random 0/1 planes [batch, C, H, W] uint8."""
    rng = np.random.default_rng(seed)
    return (rng.random((batch, *spec.obs_shape)) < 0.3).astype(np.uint8)


def _warm_bn(net: torch.nn.Module, spec: GameSpec) -> None:
    """Give every batch norm non-trivial running statistics, as training would."""
    net.train()
    with torch.no_grad():
        for seed in range(3):
            net(torch.from_numpy(_obs(spec, 16, seed)).float() * 2.0 + 0.1)
    net.eval()


@pytest.mark.parametrize("spec_name", list(SPECS))
@pytest.mark.parametrize("preset", CHEAP)
def test_output_shapes_and_value_range(preset: str, spec_name: str) -> None:
    spec = SPECS[spec_name]
    torch.manual_seed(0)
    net = build_net(preset, spec).eval()
    with torch.no_grad():
        logits, value = net(torch.from_numpy(_obs(spec, 5)).float())
    assert logits.shape == (5, spec.num_actions)
    assert value.shape == (5,)
    assert torch.isfinite(logits).all()
    assert ((value >= -1) & (value <= 1)).all()


@pytest.mark.parametrize("preset", ["resnet10x128", "resnet20x256"])
def test_big_towers_build_and_run_on_tictactoe(preset: str) -> None:
    spec = SPECS["tictactoe"]
    net = build_net(preset, spec).eval()
    with torch.no_grad():
        logits, value = net(torch.from_numpy(_obs(spec, 2)).float())
    assert logits.shape == (2, 9) and value.shape == (2,)
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()) == (
        1 + 2 * PRESETS[preset].blocks + 2)


def test_qpt_matches_the_published_shape_on_go9() -> None:
    net = build_net("qpt", GO_LIKE)
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    dims = [(m.in_features, m.out_features) for m in linears]
    # policy: 8 planes x 81 -> 256 -> 82; value: 4 x 81 -> 128 -> 64 -> 1
    assert dims == [(8 * 81, 256), (256, 82), (4 * 81, 128), (128, 64), (64, 1)]
    convs = [m.out_channels for m in net.trunk.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs == [32, 64, 128]


def test_preset_lookup_and_validation() -> None:
    assert NetConfig.preset("small").kind == "convnet"
    with pytest.raises(ValueError, match="unknown net preset"):
        NetConfig.preset("nope")
    with pytest.raises(ValueError, match="kind"):
        NetConfig(kind="transformer")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        NetConfig(channels=0)


def test_masked_log_softmax_zero_on_illegal_and_no_nan() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0, 50.0], [0.0, 0.0, 0.0, 0.0], [5.0, -3.0, 2.0, 1e30]])
    legal = torch.tensor([[True, False, True, False], [False] * 4, [False, True, True, False]])
    logp = masked_log_softmax(logits, legal)
    p = logp.exp()
    assert torch.isfinite(logp).all()
    assert (p[legal == 0][[0, 1, 6, 7]] == 0).all()  # illegal entries of the rows with legals
    assert torch.allclose(p.sum(-1), torch.ones(3))
    assert torch.allclose(p[0, [0, 2]], torch.softmax(torch.tensor([1.0, 3.0]), 0))
    assert torch.allclose(p[1], torch.full((4,), 0.25))  # all-illegal row: uniform, not NaN
    # A cross-entropy against a target that is 0 on illegal moves stays finite, grads too.
    x = logits.clone().requires_grad_(True)
    target = torch.tensor([[0.5, 0, 0.5, 0], [0, 0, 0, 0], [0, 0.2, 0.8, 0]])
    loss = -(target * masked_log_softmax(x, legal)).sum()
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all()
    # Half precision, as under autocast: still finite.
    assert torch.isfinite(masked_log_softmax(logits.clamp(-1e4, 1e4).half(), legal)).all()


FUSE_CASES = {
    "tiny": PRESETS["tiny"],
    "resnet2x16": NetConfig(channels=16, blocks=2, value_hidden=(32,)),
    "small": PRESETS["small"],
    "qpt": PRESETS["qpt"],  # no batch norm: fusing must leave it as it is
    "convnet_bn": NetConfig(kind="convnet", trunk=(8, 16), batch_norm=True),
}


@pytest.mark.parametrize("name", list(FUSE_CASES))
def test_fused_copy_matches_unfused(name: str) -> None:
    spec = SPECS["go_like"]
    torch.manual_seed(2)
    net = build_net(FUSE_CASES[name], spec)
    _warm_bn(net, spec)
    fused = fuse_for_inference(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    x = torch.from_numpy(_obs(spec, 8, seed=5)).float()
    with torch.no_grad():
        (p0, v0), (p1, v1) = net(x), fused(x)
    assert torch.allclose(p0, p1, atol=1e-4, rtol=1e-4)
    assert torch.allclose(v0, v1, atol=1e-5)
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()) == (name != "qpt")
    assert net.training is False and all(p.requires_grad for p in net.parameters())


def test_torch_evaluator_matches_forward_and_swaps_weights() -> None:
    spec = SPECS["gomoku6"]
    torch.manual_seed(3)
    net = build_net("tiny", spec)
    _warm_bn(net, spec)
    ev = TorchEvaluator(net, device="cpu", weights_version=4)
    obs = _obs(spec, 6)
    legal = np.ones((6, spec.num_actions), bool)
    out = check_evaluation(ev.evaluate(obs, legal), 6, spec.num_actions)
    assert out.policy_logits.dtype == np.float32 and out.value.dtype == np.float32
    assert out.weights_version == 4
    with torch.no_grad():
        p, v = net.eval()(torch.from_numpy(obs).float())
    np.testing.assert_allclose(out.policy_logits, p.numpy(), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(out.value, v.numpy(), atol=1e-5)

    # New weights: the evaluator follows them; the caller's net is not modified.
    other = build_net("tiny", spec)
    _warm_bn(other, spec)
    before = {k: t.clone() for k, t in net.state_dict().items()}
    ev.load_state_dict(other.state_dict(), version=5)
    out2 = ev.evaluate(obs, legal)
    with torch.no_grad():
        p2, _ = other(torch.from_numpy(obs).float())
    np.testing.assert_allclose(out2.policy_logits, p2.numpy(), atol=1e-4, rtol=1e-4)
    assert out2.weights_version == ev.weights_version == 5
    assert not np.allclose(out2.policy_logits, out.policy_logits)
    assert all(torch.equal(before[k], t) for k, t in net.state_dict().items())

    empty = ev.evaluate(obs[:0], legal[:0])
    assert empty.policy_logits.shape == (0, spec.num_actions) and empty.value.shape == (0,)
    with pytest.raises(ValueError, match="shape"):
        ev.evaluate(_obs(SPECS["tictactoe"], 2), np.ones((2, 9), bool))


def test_torch_evaluator_variants_agree() -> None:
    """Plain (unfused, NCHW) and the default (fused, channels-last) give the same outputs."""
    spec = SPECS["go_like"]
    net = build_net("tiny", spec)
    _warm_bn(net, spec)
    obs = _obs(spec, 3)
    legal = np.ones((3, 82), bool)
    a = TorchEvaluator(net, "cpu").evaluate(obs, legal)
    plain = InferenceConfig(device="cpu", fuse_bn=False, channels_last=False)
    b = TorchEvaluator(net, config=plain).evaluate(obs, legal)
    np.testing.assert_allclose(a.policy_logits, b.policy_logits, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(a.value, b.value, atol=1e-5)
    with pytest.raises(ValueError, match="precision"):
        InferenceConfig(precision="int8")  # type: ignore[arg-type]


def test_tiny_net_fits_a_fixed_batch() -> None:
    """~50 Adam steps drive policy cross-entropy + value MSE far down on a fixed batch."""
    spec = SPECS["gomoku6"]
    torch.manual_seed(4)
    net = build_net("tiny", spec).train()
    obs = torch.from_numpy(_obs(spec, 16, seed=9)).float()
    legal = torch.from_numpy(np.random.default_rng(1).random((16, 36)) < 0.7)
    legal[:, 0] = True
    # One legal target move per position and a value in [-0.9, 0.9].
    target_action = torch.multinomial(legal.float(), 1).squeeze(1)
    target_pi = torch.nn.functional.one_hot(target_action, 36).float()
    target_z = torch.linspace(-0.9, 0.9, 16)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def loss_fn() -> torch.Tensor:
        logits, value = net(obs)
        ce = -(target_pi * masked_log_softmax(logits, legal)).sum(-1).mean()
        return ce + ((value - target_z) ** 2).mean()

    first = loss_fn().item()
    for _ in range(50):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    last = loss_fn().item()
    assert np.isfinite(last)
    assert last < 0.1 * first, (first, last)
