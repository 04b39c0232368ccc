"""CPU inference backends behind the Evaluator seam: torch, ONNX Runtime, OpenVINO, int8.

``make_evaluator(net, backend)`` returns an evaluator with TorchEvaluator's interface
(``evaluate(obs [B, C, H, W] uint8, legal [B, A] bool) -> Evaluation(policy_logits [B, A]
float32, value [B] float32, weights_version)``, ``load_state_dict(state_dict, version)``,
``state_dict()``, ``weights_version``), so search, players and the inference batcher take
any of them. Backends:

- ``"torch"``: ``TorchEvaluator`` (batch norm folded, channels-last): the default.
- ``"onnxruntime"``: the fused net exported to ONNX (dynamic batch axis), run by an ONNX
  Runtime CPU session.
- ``"openvino"``: the same ONNX model compiled by OpenVINO for its CPU device in float32
  (OpenVINO would otherwise pick bfloat16 on CPUs with AMX/AVX-512 bf16).
- ``"openvino-bf16"``: the same, letting OpenVINO run in bfloat16 (on a trained net up to
  2.5e-3 off in probabilities and 2e-2 in values).
- ``"torch-int8"``: ``torch.ao.quantization.quantize_dynamic`` of the fused net's Linear
  layers. Dynamic quantisation covers only Linear (and RNN) layers: in our nets that is
  the FC layers of the two heads; every convolution, i.e. nearly all the arithmetic of
  the trunks, stays float32.

Which backend wins where is measured by ``benchmarks/bench_backends.py``
(docs/lab/inference-backends.md). The exported backends rebuild their model on every
``load_state_dict`` (export + compile: tenths of a second to seconds), so they suit
evaluators whose weights change rarely.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from zeroforge.shared.formats import StateDict
from zeroforge.shared.nets.model import fuse_for_inference
from zeroforge.shared.nets.names import BACKENDS
from zeroforge.shared.nets.torch_evaluator import InferenceConfig, TorchEvaluator, check_batch
from zeroforge.shared.search import Evaluation

__all__ = ["BACKENDS", "BackendError", "make_evaluator", "export_onnx", "ExportedEvaluator",
           "legal_move_probabilities"]


# backend -> the module it imports (and the pip name in the error message).
_PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "openvino-bf16": "openvino"}

# A model run: float32 observations [B, C, H, W] -> (logits [B, A], value [B]) as numpy.
Runner = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def legal_move_probabilities(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Softmax of logits [B, A] over the legal moves (legal [B, A] bool; at least one a
    row), float64 [B, A]: the priors search uses, on which backends' errors are stated."""
    z = np.where(legal, logits.astype(np.float64), -np.inf)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


class BackendError(ValueError):
    """An unknown backend name, or a backend whose package is not installed."""


def _require(backend: str) -> Any:
    """The backend's module; BackendError with the install command when it is missing."""
    name = _PACKAGES[backend]
    try:
        return importlib.import_module(name)
    except ImportError:
        raise BackendError(f"inference backend {backend!r} needs the {name} package: "
                           "pip install 'zeroforge[backends]'") from None


def check_backend(backend: str) -> None:
    """BackendError if ``backend`` is not one of ``BACKENDS`` or its package is missing;
    builds nothing."""
    if backend not in BACKENDS:
        raise BackendError(f"unknown inference backend {backend!r}; known: "
                           f"{', '.join(BACKENDS)}")
    if backend in _PACKAGES:
        _require(backend)


def export_onnx(net: nn.Module) -> bytes:
    """``net`` (already fused, eval mode) as an ONNX model with a dynamic batch axis.

    Input ``obs`` float32 [B, C, H, W]; outputs ``policy_logits`` [B, A], ``value`` [B].
    Uses torch's TorchScript exporter (``dynamo=False``): the torch.export-based default
    needs the onnxscript package, and our nets have no control flow it would help with.
    """
    obs_shape = tuple(getattr(net, "obs_shape"))  # noqa: B009 - PolicyValueNet attribute
    # A file rather than BytesIO: torch types the target as a path (BytesIO works only
    # by accident of the old exporter).
    with tempfile.TemporaryDirectory(prefix="zeroforge-onnx-") as tmp:
        path = Path(tmp) / "net.onnx"
        with warnings.catch_warnings():
            # The TorchScript exporter is deprecated in favour of the dynamo one (above).
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                _PolicyValue(net), (torch.zeros(2, *obs_shape),), path, dynamo=False,
                input_names=["obs"], output_names=["policy_logits", "value"],
                dynamic_axes={"obs": {0: "batch"}, "policy_logits": {0: "batch"},
                              "value": {0: "batch"}})
        return path.read_bytes()


class _PolicyValue(nn.Module):
    """``net`` with ``forward(x)`` only: the exporter traces every argument of the forward
    it is given, and the net's ``all_heads`` flag would become a traced constant."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(x)


def _onnxruntime_runner(net: nn.Module, threads: int) -> Runner:
    ort = _require("onnxruntime")
    options = ort.SessionOptions()
    # One process per core in a run: more threads than asked for would fight over cores.
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(export_onnx(net), options,
                                   providers=["CPUExecutionProvider"])

    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, value = session.run(None, {"obs": x})
        return logits, value

    return run


def _openvino_runner(net: nn.Module, threads: int, bf16: bool) -> Runner:
    ov = _require("openvino-bf16" if bf16 else "openvino")
    core = ov.Core()
    # Reading the ONNX bytes avoids openvino's torch frontend (seconds of tracing).
    model = core.read_model(export_onnx(net))
    config: dict[str, Any] = {
        "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
        # Other processes share the cores in a run; pinning ours would crowd theirs.
        "ENABLE_CPU_PINNING": False,
        "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32",
    }
    compiled = core.compile_model(model, "CPU", config)
    request = compiled.create_infer_request()

    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        request.infer({0: x})
        # The request reuses its output buffers on the next call: copy out.
        return (np.array(request.get_output_tensor(0).data, np.float32),
                np.array(request.get_output_tensor(1).data, np.float32))

    return run


class ExportedEvaluator:
    """An Evaluator running an exported/converted copy of a policy-value net.

    Same contract as ``TorchEvaluator``: the given ``net`` is copied, never modified;
    ``load_state_dict`` takes training-format state dicts and rebuilds the model;
    ``evaluate`` and ``load_state_dict`` may be called from different threads.
    """

    def __init__(self, net: nn.Module, backend: str, threads: int, weights_version: int = 0):
        self.backend = backend
        self.threads = threads
        self.device = torch.device("cpu")
        self.obs_shape: tuple[int, ...] | None = getattr(net, "obs_shape", None)
        self.num_actions: int | None = getattr(net, "num_actions", None)
        if self.obs_shape is None:
            raise BackendError(f"inference backend {backend!r} needs a net with obs_shape "
                               "(a PolicyValueNet) to export it")
        self.weights_version = int(weights_version)
        self._lock = threading.Lock()
        self._source = copy.deepcopy(net).cpu()
        self._run = self._build(self._source)

    def _build(self, source: nn.Module) -> Runner:
        fused = fuse_for_inference(source)
        if self.backend == "onnxruntime":
            return _onnxruntime_runner(fused, self.threads)
        if self.backend in ("openvino", "openvino-bf16"):
            return _openvino_runner(fused, self.threads, bf16=self.backend == "openvino-bf16")
        raise BackendError(f"unknown exported backend {self.backend!r}")

    def load_state_dict(self, state_dict: StateDict, version: int) -> None:
        """Swap in new weights (training-format state dict): re-export and recompile."""
        self._source.load_state_dict(state_dict)
        run = self._build(self._source)
        with self._lock:
            self._run = run
            self.weights_version = int(version)

    def state_dict(self) -> StateDict:
        """The current weights in training format (CPU tensors)."""
        return self._source.state_dict()

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        """Evaluate obs [B, C, H, W] with legal [B, A] bool (the mask is not applied, as
        in TorchEvaluator: search ignores illegal logits)."""
        obs = np.asarray(obs)
        empty = check_batch(f"{self.backend} evaluator", obs, legal, self.obs_shape,
                            self.num_actions, self.weights_version)
        if empty is not None:
            return empty
        b = obs.shape[0]
        x = np.ascontiguousarray(obs, dtype=np.float32)
        with self._lock:
            logits, value = self._run(x)
            version = self.weights_version
        return Evaluation(logits, value.reshape(b), version)


class Int8Evaluator(TorchEvaluator):
    """TorchEvaluator whose inference copy has int8 dynamically quantised Linear layers.

    Only the heads' FC layers are quantised (weights int8, activations quantised per
    batch at run time); convolutions stay float32 and channels-last.
    """

    def _prepare(self, source: nn.Module) -> nn.Module:
        model = super()._prepare(source)
        with warnings.catch_warnings():
            # torch deprecates torch.ao.quantization and its quantized tensor types (in
            # favour of torchao); they still work in the torch this project pins.
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.ao.quantization.quantize_dynamic(model, {nn.Linear},
                                                          dtype=torch.qint8)

    def load_state_dict(self, state_dict: StateDict, version: int) -> None:
        """Swap in new weights: the quantised copy is rebuilt (packed int8 weights cannot
        be copied into in place)."""
        self._source.load_state_dict(state_dict)
        prepared = self._prepare(self._source)
        with self._lock:
            self._module = self._model = prepared
            self.weights_version = int(version)


def make_evaluator(net: nn.Module, backend: str = "torch", *, threads: int | None = None,
                   config: InferenceConfig | None = None,
                   weights_version: int = 0) -> TorchEvaluator | ExportedEvaluator:
    """An evaluator for ``net`` on the CPU through ``backend`` (one of ``BACKENDS``).

    ``threads``: intra-op threads of the backend (None: torch's current thread count;
    for the torch backends it sets ``torch.set_num_threads``, a process-wide setting).
    ``config``: the torch backends' InferenceConfig (default: CPU, fused, channels-last).
    Raises BackendError for an unknown name or a backend whose package is missing.
    """
    check_backend(backend)  # fail before copying the net
    if threads is not None and threads < 1:
        raise BackendError(f"inference backend threads must be >= 1, got {threads}")
    if backend in ("torch", "torch-int8"):
        config = config or InferenceConfig(device="cpu")
        if threads is not None:
            config = dataclasses.replace(config, num_threads=threads)
        if backend == "torch-int8":
            if config.device not in ("cpu", "auto") or config.compile:
                raise BackendError("inference backend 'torch-int8' runs on the CPU only, "
                                   "without torch.compile")
            config = dataclasses.replace(config, device="cpu")
            return Int8Evaluator(net, config=config, weights_version=weights_version)
        return TorchEvaluator(net, config=config, weights_version=weights_version)
    return ExportedEvaluator(net, backend, threads or torch.get_num_threads(),
                             weights_version=weights_version)
