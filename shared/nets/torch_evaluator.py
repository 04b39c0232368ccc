"""An in-process Evaluator backed by a torch policy-value network.

``TorchEvaluator`` keeps two copies of the network: a CPU *source* copy in training
format (what ``load_state_dict`` accepts, so learner state dicts load as they are) and an
*inference* copy on the device, prepared once for speed (batch norm folded into the
convolutions, optionally channels-last, lower precision, ``torch.compile``).
New weights are prepared on the CPU and then copied into the inference copy's tensors in
place, so a compiled model is not recompiled on every weight swap.

The defaults come from measurements (``benchmarks/bench_nets.py``, CPU and an H200):
folding batch norm gained 5-25 % and channels-last another 5-70 % on CPU and GPU alike;
bfloat16 on CUDA doubled large-batch throughput of the big towers at ~1e-3 logit error,
and on a CPU with AMX made the nets 2.0-2.9x faster at batch 128 and up but 0.5-0.75x
at batch 1; AVX-512 BF16 without AMX (AMD Zen 4) 1.7x at batch 128, 0.5x at batch 1 (a CPU
with neither emulates it);
``torch.compile`` gave no consistent CPU gain (5-55 s to compile), while on CUDA its
``"reduce-overhead"`` mode (CUDA graphs) tripled small-batch throughput: opt-in, since
it costs seconds of compilation and shares dynamo's per-process recompile limit.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from zeroforge.shared.formats import StateDict
from zeroforge.shared.nets.model import fuse_for_inference
from zeroforge.shared.nets.names import PRECISIONS, check_precision
from zeroforge.shared.search import Evaluation

__all__ = ["PRECISIONS", "InferenceConfig", "TorchEvaluator", "check_precision",
           "native_bfloat16", "resolve_device", "resolve_dtype"]

_PRECISIONS = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
assert set(PRECISIONS) == {"auto", "fast", *_PRECISIONS}, "names.PRECISIONS out of step"


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` runs bfloat16 natively: CUDA, or a CPU with AMX tiles or the
    AVX-512 BF16 dot-product instructions (Intel Cooper Lake and later, AMD Zen 4 and
    later). Other CPUs emulate bfloat16 convolutions, slower than float32."""
    if device.type == "cuda":
        return True
    if device.type != "cpu":
        return False
    # private probes of torch's CPU dispatch; a torch that drops them falls back to float32
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The dtype a precision name (one of ``PRECISIONS``) means on ``device``."""
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if precision == "fast":
        return torch.bfloat16 if native_bfloat16(device) else torch.float32
    check_precision("precision", precision)
    return _PRECISIONS[precision]


@dataclass(frozen=True)
class InferenceConfig:
    """How a TorchEvaluator runs its network."""

    device: str = "auto"
    """``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
    fuse_bn: bool = True
    """Fold batch norm into the preceding convs in the inference copy (exact, faster)."""
    channels_last: bool = True
    """Run convolutions in NHWC memory format (faster with oneDNN on CPU and cuDNN)."""
    compile: bool = False
    """Wrap the inference copy in ``torch.compile`` (slow first calls; batches are padded
    to powers of two so only a few shapes are ever compiled)."""
    compile_mode: str = "reduce-overhead"
    """``torch.compile`` mode; ``"reduce-overhead"`` replays CUDA graphs on CUDA."""
    num_threads: int | None = None
    """If set, ``torch.set_num_threads`` for this process (a process-wide setting). Use 1
    when several processes share the cores: measured on a 2-core box with one core busy
    elsewhere, 2 threads ran 10-50x slower than 1 (OpenMP threads wait on each other)."""
    precision: str = "auto"
    """Inference dtype (``PRECISIONS``): ``"auto"`` is bfloat16 on CUDA and float32 on
    the CPU; ``"fast"`` bfloat16 also on a CPU with AMX or AVX-512 BF16. Outputs are
    float32 either way."""

    def __post_init__(self) -> None:
        check_precision("InferenceConfig.precision", self.precision)
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError("InferenceConfig.num_threads must be >= 1 or None")


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> CUDA when available else CPU; anything else as torch names it."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def check_batch(who: str, obs: np.ndarray, legal: np.ndarray,
                obs_shape: tuple[int, ...] | None, num_actions: int | None,
                weights_version: int) -> Evaluation | None:
    """The checks every evaluator makes of a batch: obs [B, C, H, W] of the net's shape
    (when known), legal [B, A] with the same B. ValueError naming ``who`` if not; the
    empty Evaluation for B = 0 (nothing to run); None for a batch to evaluate."""
    if obs.ndim != 4 or (obs_shape is not None and obs.shape[1:] != obs_shape):
        raise ValueError(f"{who}: observations of shape {obs.shape}, "
                         f"expected [B, {', '.join(map(str, obs_shape or ()))}]")
    b = obs.shape[0]
    if legal.shape[0] != b:
        raise ValueError(f"{who}: {legal.shape[0]} legal masks for {b} observations")
    if b == 0:
        a = num_actions if num_actions is not None else legal.shape[1]
        return Evaluation(np.zeros((0, a), np.float32), np.zeros(0, np.float32),
                          weights_version)
    return None


class TorchEvaluator:
    """Evaluator over a ``PolicyValueNet`` (or any module with the same forward).

    evaluate(obs [B, C, H, W] uint8 (or bool/float), legal [B, A] bool) ->
    Evaluation(policy_logits [B, A] float32, value [B] float32, weights_version).

    Thread-safe: evaluate and load_state_dict may be called from different threads.
    The given ``net`` is copied, never modified.
    """

    def __init__(self, net: nn.Module, device: str | None = None, *,
                 config: InferenceConfig | None = None, weights_version: int = 0):
        config = config or InferenceConfig()
        if device is not None:
            config = dataclasses.replace(config, device=device)
        self.config = config
        self.device = resolve_device(config.device)
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        self.dtype = resolve_dtype(config.precision, self.device)
        self.obs_shape: tuple[int, ...] | None = getattr(net, "obs_shape", None)
        self.num_actions: int | None = getattr(net, "num_actions", None)
        self.any_board = getattr(getattr(net, "config", None), "heads", None) == "pooled"
        """A fully convolutional net: it also takes boards other than its spec's (of the
        same planes), with H W + ``extra_actions`` actions (``selfplay.board_sizes``)."""
        self._extra_actions = int(getattr(net, "extra_actions", 0))
        self.weights_version = int(weights_version)
        self._lock = threading.Lock()
        self._source = copy.deepcopy(net).cpu()
        self._module = self._prepare(self._source).to(self.device)
        self._model: nn.Module = self._module
        if config.compile:
            # torch.compile of a Module returns an OptimizedModule (a Module), but its
            # overloads type the result as a plain callable.
            self._model = torch.compile(self._module, mode=config.compile_mode)  # type: ignore[assignment]

    # -- weights -------------------------------------------------------------------------
    def _prepare(self, source: nn.Module) -> nn.Module:
        """An eval-mode inference copy of ``source`` (still on the CPU)."""
        model = fuse_for_inference(source) if self.config.fuse_bn else copy.deepcopy(source)
        model.eval().requires_grad_(False)
        if self.config.channels_last:
            # Module.to takes memory_format at run time, but torch's overloads leave it out.
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        return model.to(self.dtype)

    def load_state_dict(self, state_dict: StateDict, version: int) -> None:
        """Swap in new weights (training-format state dict, e.g. from the learner)."""
        self._source.load_state_dict(state_dict)
        prepared = self._prepare(self._source).state_dict()
        with self._lock:
            # In-place copy keeps tensor identities, so a compiled graph stays valid.
            self._module.load_state_dict(prepared)
            self.weights_version = int(version)

    def state_dict(self) -> StateDict:
        """The current weights in training format (CPU tensors)."""
        return self._source.state_dict()

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        """Evaluate obs [B, C, H, W] with legal [B, A] bool (the mask is not applied:
        search ignores illegal logits)."""
        obs = np.asarray(obs)
        shape, actions = self.obs_shape, self.num_actions
        if self.any_board and shape is not None and obs.ndim == 4 and obs.shape[1] == shape[0]:
            shape = tuple(obs.shape[1:])
            actions = obs.shape[2] * obs.shape[3] + self._extra_actions
        empty = check_batch("TorchEvaluator", obs, legal, shape, actions,
                            self.weights_version)
        if empty is not None:
            return empty
        b = obs.shape[0]
        x = torch.from_numpy(np.ascontiguousarray(obs))
        if self.config.compile and _next_pow2(b) != b:
            # Few distinct shapes -> few compilations; the padding rows are discarded.
            x = torch.cat([x, x.new_zeros((_next_pow2(b) - b, *x.shape[1:]))])
        # Transfer the compact uint8 planes, convert on the device.
        x = x.to(self.device, non_blocking=True).to(self.dtype)
        if self.config.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with self._lock, torch.inference_mode():
            logits, value = self._model(x)
            # Copy out under the lock: a CUDA-graph replay by another caller reuses the
            # output buffers.
            logits = logits[:b].float().cpu().numpy()
            value = value[:b].float().cpu().numpy()
            version = self.weights_version
        return Evaluation(logits, value, version)
