"""CPU inference backends (shared/nets/backends.py) against the torch path.

Tolerances, max absolute error against ``TorchEvaluator`` on the same net and inputs:
float32 backends (onnxruntime, openvino) 1e-4 on logits, legal-move probabilities and
values; reduced-precision backends (openvino-bf16, torch-int8) 2e-2 on probabilities
and values (their logits move by up to ~1e-2 on random nets).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from zeroforge.shared.games import GameSpec, make_game
from zeroforge.shared.nets import (
    BACKENDS,
    PRESETS,
    BackendError,
    ExportedEvaluator,
    TorchEvaluator,
    build_net,
    export_onnx,
    fuse_for_inference,
    legal_move_probabilities,
    make_evaluator,
)
from zeroforge.shared.search import check_evaluation

GO_LIKE = GameSpec(name="go-like", version=0, board_shape=(9, 9), num_actions=82,
                   obs_shape=(17, 9, 9), spec_string="go-like", max_moves=200)
TTT = make_game("tictactoe").spec
EXACT = ("onnxruntime", "openvino")
EXACT_TOL = 1e-4
LOOSE_TOL = 2e-2


def trained_like(preset: str, spec: GameSpec, seed: int = 0) -> torch.nn.Module:
    """A random net with non-trivial batch-norm statistics, in eval mode."""
    torch.manual_seed(seed)
    net = build_net(preset, spec)
    net.train()
    with torch.no_grad():
        net(torch.rand(32, *spec.obs_shape))
    return net.eval()


def batch(spec: GameSpec, b: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = (rng.random((b, *spec.obs_shape)) < 0.3).astype(np.uint8)
    legal = rng.random((b, spec.num_actions)) < 0.5
    legal[:, -1] = True
    return obs, legal



def assert_matches(backend: str, got, want, legal: np.ndarray) -> None:
    tol = EXACT_TOL if backend in EXACT else LOOSE_TOL
    if backend in EXACT:
        # Raw logits, illegal entries included: no backend applies the mask.
        np.testing.assert_allclose(got.policy_logits, want.policy_logits, atol=tol, rtol=0)
    np.testing.assert_allclose(legal_move_probabilities(got.policy_logits, legal),
                               legal_move_probabilities(want.policy_logits, legal),
                               atol=tol, rtol=0)
    np.testing.assert_allclose(got.value, want.value, atol=tol, rtol=0)


def check_backend(backend: str, preset: str, spec: GameSpec, batches: tuple[int, ...]) -> None:
    net = trained_like(preset, spec)
    ref = TorchEvaluator(net, device="cpu")
    ev = make_evaluator(net, backend, threads=1, weights_version=3)
    for b in batches:
        obs, legal = batch(spec, b, seed=b)
        want = ref.evaluate(obs, legal)
        got = check_evaluation(ev.evaluate(obs, legal), b, spec.num_actions)
        assert got.policy_logits.dtype == np.float32 and got.value.dtype == np.float32
        assert got.weights_version == 3
        assert_matches(backend, got, want, legal)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("preset,spec", [("tiny", TTT), ("small", GO_LIKE)],
                         ids=["tiny-ttt", "small-go9"])
def test_backend_matches_torch(backend: str, preset: str, spec: GameSpec) -> None:
    check_backend(backend, preset, spec, (1, 37))


@pytest.mark.slow
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "torch"])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_backend_matches_torch_every_preset(backend: str, preset: str) -> None:
    # The big towers on the 3x3 board keep this cheap; the 9x9 board for the smaller ones.
    spec = TTT if preset.startswith(("resnet10", "resnet20", "go_gpu")) else GO_LIKE
    check_backend(backend, preset, spec, (1, 64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_weight_swap_and_state_dict(backend: str) -> None:
    old, new = trained_like("tiny", TTT, seed=0), trained_like("tiny", TTT, seed=1)
    ev = make_evaluator(old, backend, threads=1)
    obs, legal = batch(TTT, 5)
    before = ev.evaluate(obs, legal)
    ev.load_state_dict(new.state_dict(), version=7)
    got = ev.evaluate(obs, legal)
    assert got.weights_version == 7 and ev.weights_version == 7
    assert_matches(backend, got, TorchEvaluator(new, device="cpu").evaluate(obs, legal), legal)
    assert np.abs(got.value - before.value).max() > 1e-3  # the swap changed the outputs
    for k, v in ev.state_dict().items():
        assert torch.equal(v, new.state_dict()[k]), k


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_exported_evaluator_shapes(backend: str) -> None:
    ev = make_evaluator(trained_like("tiny", TTT), backend, threads=1)
    assert isinstance(ev, ExportedEvaluator)
    empty = ev.evaluate(np.zeros((0, *TTT.obs_shape), np.uint8),
                        np.zeros((0, TTT.num_actions), bool))
    assert empty.policy_logits.shape == (0, TTT.num_actions) and empty.value.shape == (0,)
    with pytest.raises(ValueError, match=r"observations of shape \(2, 9, 9\)"):
        ev.evaluate(np.zeros((2, 9, 9), np.uint8), np.ones((2, TTT.num_actions), bool))
    with pytest.raises(ValueError, match="3 legal masks for 2 observations"):
        ev.evaluate(np.zeros((2, *TTT.obs_shape), np.uint8),
                    np.ones((3, TTT.num_actions), bool))


def test_onnx_export_has_a_dynamic_batch_axis() -> None:
    import onnx

    model = onnx.load_from_string(export_onnx(fuse_for_inference(trained_like("tiny", TTT))))
    onnx.checker.check_model(model)
    dims = {v.name: v.type.tensor_type.shape.dim for v in [*model.graph.input,
                                                           *model.graph.output]}
    assert set(dims) == {"obs", "policy_logits", "value"}
    assert all(d[0].dim_param == "batch" for d in dims.values())
    assert [d.dim_value for d in dims["obs"][1:]] == list(TTT.obs_shape)


def test_unknown_backend_is_a_one_line_error() -> None:
    with pytest.raises(BackendError, match=r"^unknown inference backend 'tensorrt'; known: "
                                           r"torch, onnxruntime, openvino"):
        make_evaluator(trained_like("tiny", TTT), "tensorrt")
    with pytest.raises(BackendError, match="threads must be >= 1"):
        make_evaluator(trained_like("tiny", TTT), "onnxruntime", threads=0)


@pytest.mark.parametrize("backend,package", [("onnxruntime", "onnxruntime"),
                                             ("openvino", "openvino"),
                                             ("openvino-bf16", "openvino")])
def test_missing_package_names_the_install_command(backend: str, package: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import package` raise ImportError, as when the
    # package is not installed.
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(BackendError) as info:
        make_evaluator(trained_like("tiny", TTT), backend)
    assert str(info.value) == (f"inference backend {backend!r} needs the {package} package: "
                               "pip install 'zeroforge[backends]'")


def test_int8_is_cpu_only() -> None:
    from zeroforge.shared.nets import InferenceConfig

    with pytest.raises(BackendError, match="'torch-int8' runs on the CPU only"):
        make_evaluator(trained_like("tiny", TTT), "torch-int8",
                       config=InferenceConfig(device="cpu", compile=True))


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_inference_server_runs_a_chosen_backend(backend: str) -> None:
    import asyncio

    from zeroforge.actors.config import InferenceServerConfig
    from zeroforge.actors.inference import InferenceServer
    from zeroforge.shared.formats import weights_to_bytes
    from zeroforge.shared.nets import NetConfig

    net = trained_like("tiny", TTT, seed=2)
    obs, legal = batch(TTT, 6)

    async def main() -> tuple:
        server = InferenceServer("tictactoe", NetConfig.preset("tiny"),
                                 InferenceServerConfig(backend=backend, device="cpu"),
                                 None, "unit")
        assert isinstance(server._evaluator, ExportedEvaluator)
        assert await server.load_weights(weights_to_bytes(net), 5) == 5
        answer = await server.evaluate(obs, legal)
        server.close()
        return answer

    logits, value, version = asyncio.run(main())
    want = TorchEvaluator(net, device="cpu").evaluate(obs, legal)
    assert version == 5
    np.testing.assert_allclose(logits, want.policy_logits, atol=EXACT_TOL, rtol=0)
    np.testing.assert_allclose(value, want.value, atol=EXACT_TOL, rtol=0)


def test_inference_server_config_checks_the_backend() -> None:
    from zeroforge.actors.config import InferenceServerConfig
    from zeroforge.deploy.config import TrainConfig
    from zeroforge.shared import config as cfg

    assert InferenceServerConfig().backend == "torch"
    loaded = cfg.load(TrainConfig, None, ["inference.backend=openvino-bf16"])
    assert loaded.inference.backend == "openvino-bf16"
    with pytest.raises(cfg.ConfigError, match="inference"):
        cfg.load(TrainConfig, None, ["inference.backend=tensorrt"])
    with pytest.raises(ValueError, match="backend must be one of torch, onnxruntime"):
        InferenceServerConfig(backend="tensorrt")
    with pytest.raises(ValueError, match="backend 'openvino' runs on the CPU, not on device"):
        InferenceServerConfig(backend="openvino", device="cuda")


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_selfplay_worker_runs_its_own_net_through_selfplay_backend(backend: str,
                                                                   tmp_path) -> None:
    """``selfplay.backend``: a worker without inference servers exports its own net, takes
    published weights into it (a rebuild) and plays whole games on it."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay_service import SelfPlayService
    from zeroforge.shared.nets import NetConfig
    from zeroforge.shared.run_context import RunContext
    from zeroforge.shared.search import SearchConfig
    from zeroforge.shared.transport import MemoryTransport

    transport = MemoryTransport("backend-test")
    store = transport.weights()
    net = trained_like("tiny", TTT, seed=3)
    store.publish(net, 4)
    ctx = RunContext(run_id="backend-test", run_dir=str(tmp_path / "run"),
                     transport="memory://", game="tictactoe")
    service = SelfPlayService(ctx, NetConfig.preset("tiny"), SearchConfig(num_simulations=8),
                              SelfPlayConfig(games_in_parallel=4, backend=backend),
                              transport.samples(), store, worker_id="w0", seed=1)
    assert isinstance(service.evaluator, ExportedEvaluator)
    assert service.evaluator.weights_version == 4
    obs, legal = batch(TTT, 6)
    want = TorchEvaluator(net, device="cpu").evaluate(obs, legal)
    got = service.evaluator.evaluate(obs, legal)
    np.testing.assert_allclose(got.policy_logits, want.policy_logits, atol=EXACT_TOL, rtol=0)
    service.run_once(9)
    assert service.appended >= 1
    with pytest.raises(ValueError, match="selfplay.backend must be one of"):
        SelfPlayConfig(backend="tensorrt")


def test_train_preflight_names_a_backend_whose_package_is_missing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from zeroforge.deploy.config import TrainConfig
    from zeroforge.deploy.preflight import PreflightError, check_train
    from zeroforge.shared import config as cfg

    check_train(cfg.load(TrainConfig, None, ["selfplay.backend=openvino"]), local=True,
                resume=False)  # installed here: passes
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if not installed
    for key in ("selfplay.backend", "inference.backend"):
        config = cfg.load(TrainConfig, None, [f"{key}=openvino-bf16"])
        with pytest.raises(PreflightError) as info:
            check_train(config, local=True, resume=False)
        assert str(info.value) == (f"{key}: inference backend 'openvino-bf16' needs the "
                                   "openvino package: pip install 'zeroforge[backends]'")
