"""The first line of a benchmark's table: the machine and how busy it was.

Figures are only comparable on the same machine under the same load, so every benchmark
prints this before its rows.
"""

from __future__ import annotations

import os
import platform


def load_averages() -> str:
    """``0.98, 1.20, 1.51``: the 1-, 5- and 15-minute load averages now."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_line() -> str:
    """Processor, cores, load average, Python and torch (with its thread count)."""
    import torch

    machine = platform.processor() or platform.machine()
    return (f"machine: {machine}, {os.cpu_count()} cores, load average {load_averages()} "
            "(1/5/15 min), "
            f"python {platform.python_version()}, torch {torch.__version__} "
            f"on CPU with {torch.get_num_threads()} thread")
