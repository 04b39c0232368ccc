"""The names configs accept for a network's precision and inference backend. Apart from
the modules that implement them (``torch_evaluator.py``, ``backends.py``) so that a config
is checked, by the command line too, without importing torch."""

from __future__ import annotations

PRECISIONS: tuple[str, ...] = ("auto", "fast", "float32", "bfloat16", "float16")
"""The precision names the configs accept: ``"auto"`` is bfloat16 on CUDA and float32 on
the CPU (exact outputs); ``"fast"`` is bfloat16 wherever the device runs it natively (CUDA,
or a CPU with AMX or AVX-512 BF16) and float32 elsewhere; the others are the dtype they name, on any
device."""

BACKENDS: tuple[str, ...] = ("torch", "onnxruntime", "openvino", "openvino-bf16", "torch-int8")
"""Names ``backends.make_evaluator`` accepts; ``"torch"`` is the default everywhere."""


def check_precision(name: str, value: str, allowed: tuple[str, ...] = PRECISIONS) -> None:
    """ValueError naming the config field ``name`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
