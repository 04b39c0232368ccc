"""The first line of a benchmark's table: the machine and how busy it was.

Figures are only comparable on the same machine under the same load, so every benchmark
prints this before its rows. The processor is named down to what changes our figures: the
same "2-core AMD EPYC" host has been a Zen 4 with AVX-512 BF16 (the presets' ``fast``
precision runs bfloat16 there) and a Zen 3 with AVX2 only (float32, about a third of the
go9 preset's self-play rate).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
"""Where Linux describes the processor (the model name, family and instruction sets)."""

VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile")
"""The instruction sets named in the line: the widest vectors and native bfloat16."""


def load_averages() -> str:
    """``0.98, 1.20, 1.51``: the 1-, 5- and 15-minute load averages now."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_description(cpuinfo: str | None = None) -> str:
    """``AMD EPYC (family 25 model 1; avx2)``: the model name, family and model, and which
    of ``VECTOR_FLAGS`` the processor has, from ``/proc/cpuinfo`` (or ``cpuinfo``, its
    text); ``platform``'s name where there is none (not Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text()
        except OSError:
            return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor describes them all
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    name = fields.get("model name") or platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    vector = ", ".join(f for f in VECTOR_FLAGS if f in flags) or "no AVX2"
    family = (f"family {fields['cpu family']} model {fields['model']}; "
              if "cpu family" in fields and "model" in fields else "")
    return f"{name} ({family}{vector})"


def machine_line() -> str:
    """Processor (``cpu_description``), cores, load average, Python, torch (with its thread
    count) and whether the CPU runs bfloat16 natively (what the presets' ``fast`` precision
    picks)."""
    import torch

    from zeroforge.shared.nets import native_bfloat16

    bf16 = "bfloat16 native" if native_bfloat16(torch.device("cpu")) else "no native bfloat16"
    return (f"machine: {cpu_description()} {platform.machine()}, {os.cpu_count()} cores, "
            f"load average {load_averages()} (1/5/15 min), "
            f"python {platform.python_version()}, torch {torch.__version__} "
            f"on CPU with {torch.get_num_threads()} thread, {bf16}")
