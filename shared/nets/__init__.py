"""Policy-value networks and the evaluators that run them.

``model`` builds a torch network from a ``NetConfig`` and a game's spec (the residual
towers, their heads, weight blobs to and from state dicts); ``torch_evaluator`` runs one
as a search ``Evaluator`` (batched, on the CPU or a GPU, in the configured precision);
``backends`` runs the same weights through ONNX Runtime, OpenVINO or torch-int8 instead.
Rules and search never import this package: they see nets only through the ``Evaluator``
seam (``zeroforge.shared.search.evaluator``).

``NetConfig``, its presets and the precision and backend names load at once (configs and
the command line need them without torch); every other name is imported on first use
(``__getattr__``), since it needs torch (~2 s) and the backends ONNX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroforge.shared.lazy import lazy_getattr
from zeroforge.shared.nets.names import BACKENDS, PRECISIONS, check_precision
from zeroforge.shared.nets.net_config import PRESETS, NetConfig

if TYPE_CHECKING:
    from zeroforge.shared.nets.backends import (
        BackendError,
        ExportedEvaluator,
        check_backend,
        export_onnx,
        legal_move_probabilities,
        make_evaluator,
    )
    from zeroforge.shared.nets.model import (
        NetOutputs,
        PolicyValueNet,
        PoolResBlock,
        ResBlock,
        build_net,
        fuse_for_inference,
        masked_log_softmax,
        num_parameters,
        score_scale,
    )
    from zeroforge.shared.nets.pooling import GlobalPoolBias, global_pool, value_pool
    from zeroforge.shared.nets.torch_evaluator import (
        InferenceConfig,
        TorchEvaluator,
        native_bfloat16,
        resolve_device,
        resolve_dtype,
    )

_MODULES = {
    "backends": ("BackendError", "ExportedEvaluator", "check_backend", "export_onnx",
                 "legal_move_probabilities", "make_evaluator"),
    "model": ("NetOutputs", "PolicyValueNet", "PoolResBlock", "ResBlock", "build_net",
              "fuse_for_inference", "masked_log_softmax", "num_parameters", "score_scale"),
    "pooling": ("GlobalPoolBias", "global_pool", "value_pool"),
    "torch_evaluator": ("InferenceConfig", "TorchEvaluator", "native_bfloat16",
                        "resolve_device", "resolve_dtype"),
}

__all__ = [
    "BACKENDS", "BackendError", "ExportedEvaluator", "GlobalPoolBias", "InferenceConfig",
    "NetConfig", "NetOutputs", "PRECISIONS", "PRESETS", "PolicyValueNet", "PoolResBlock",
    "ResBlock", "TorchEvaluator", "build_net", "check_backend", "check_precision", "export_onnx",
    "fuse_for_inference", "global_pool", "legal_move_probabilities", "make_evaluator",
    "masked_log_softmax", "native_bfloat16", "num_parameters", "resolve_device", "resolve_dtype",
    "score_scale", "value_pool"
]


__getattr__ = lazy_getattr(__name__, _MODULES)
