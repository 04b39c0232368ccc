"""Resource figures of an actor's process and of the node it runs on, as metrics.

Each actor host (``deploy/ray/hosts.py``) owns one ``ResourceReporter`` and adds its
figures to every metrics snapshot the actor reports: the process's CPU time and resident
memory (``actor_*``, its child processes' included: a host's process workers), and the
node's CPU utilisation, memory and GPUs (``node_*``). Every
actor on a node reports the same node figures; the merge takes their maximum
(``shared.metrics.NODE_GAUGES``). GPUs are read with ``nvidia-smi`` where it exists
(no extra Python dependency, nothing on machines without one), at most every
``GPU_POLL_S`` seconds since a call costs tens of milliseconds.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Mapping

import psutil

from zeroforge.shared.metrics import Recorder

log = logging.getLogger(__name__)

GPU_POLL_S = 5.0
"""Seconds between two ``nvidia-smi`` calls of one reporter."""
_MIB = 1024 * 1024


class ResourceReporter:
    """Process and node gauges for one actor: ``kind`` (selfplay, inference, learner,
    evaluator), ``actor`` (its index) and ``node`` (the host name or short Ray node id)."""

    def __init__(self, kind: str, actor: str, node: str) -> None:
        self.labels = {"kind": kind, "actor": actor, "node": node}
        self.node = node
        self.recorder = Recorder()
        self._process = psutil.Process()
        self._cpu_reported = 0.0
        self._node_cpu = psutil.cpu_times()
        self._nvidia_smi = shutil.which("nvidia-smi")
        self._gpus: list[tuple[str, float, float]] = []
        self._gpu_polled = float("-inf")

    def snapshot(self) -> dict:
        """The figures now, as a ``Recorder`` snapshot of this reporter's own."""
        r = self.recorder
        cpu, rss = self._process_figures()
        # The counter grows by what the process used since the last report.
        r.inc("actor_cpu_seconds_total", max(cpu - self._cpu_reported, 0.0), **self.labels)
        self._cpu_reported = max(cpu, self._cpu_reported)
        r.set("actor_memory_bytes", rss, **self.labels)
        node = {"node": self.node}
        r.set("node_cpu_utilisation_ratio", self._node_cpu_ratio(), **node)
        memory = psutil.virtual_memory()
        r.set("node_memory_used_bytes", memory.total - memory.available, **node)
        r.set("node_memory_total_bytes", memory.total, **node)
        for gpu, utilisation, used in self._gpu_figures():
            r.set("node_gpu_utilisation_ratio", utilisation, gpu=gpu, **node)
            r.set("node_gpu_memory_used_bytes", used, gpu=gpu, **node)
        return r.snapshot()

    def _process_figures(self) -> tuple[float, int]:
        """The actor's CPU seconds and resident bytes, its child processes' included (a
        self-play host's workers with ``distributed.host_workers=process``): the live
        children's own figures, plus the CPU time of the ended ones it has waited for."""
        times = self._process.cpu_times()
        cpu = times.user + times.system + times.children_user + times.children_system
        rss = self._process.memory_info().rss
        for child in self._process.children(recursive=True):
            try:
                with child.oneshot():
                    ct = child.cpu_times()
                    cpu += ct.user + ct.system
                    rss += child.memory_info().rss
            except psutil.Error:  # it ended meanwhile: its time counts once it is waited for
                continue
        return cpu, rss

    def add_to(self, snapshot: Mapping) -> dict:
        """``snapshot`` (a service's) with this reporter's figures added (distinct names)."""
        own = self.snapshot()
        return {**snapshot, "values": {**snapshot.get("values", {}), **own["values"]},
                "hists": {**snapshot.get("hists", {}), **own["hists"]}}

    def _node_cpu_ratio(self) -> float:
        """Busy share of all cores since the previous report (psutil's own
        ``cpu_percent`` keeps one module-wide baseline; several reporters would share it)."""
        now = psutil.cpu_times()
        before, self._node_cpu = self._node_cpu, now
        total = sum(now) - sum(before)
        idle = (now.idle + getattr(now, "iowait", 0.0)) - (
            before.idle + getattr(before, "iowait", 0.0))
        return 0.0 if total <= 0 else min(max(1.0 - idle / total, 0.0), 1.0)

    def _gpu_figures(self) -> list[tuple[str, float, float]]:
        """[(gpu index, utilisation 0..1, memory used bytes)]; [] without nvidia-smi."""
        if self._nvidia_smi is None or time.monotonic() - self._gpu_polled < GPU_POLL_S:
            return self._gpus
        self._gpu_polled = time.monotonic()
        try:
            out = subprocess.run(
                [self._nvidia_smi, "--query-gpu=index,utilization.gpu,memory.used",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=5, check=True).stdout
            self._gpus = parse_nvidia_smi(out)
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            log.warning("nvidia-smi: no GPU figures (%s)", str(err).splitlines()[0][:200])
            self._gpus = []
        return self._gpus


def parse_nvidia_smi(text: str) -> list[tuple[str, float, float]]:
    """``index, utilization.gpu [%], memory.used [MiB]`` lines -> [(index, ratio, bytes)];
    a field nvidia-smi cannot read (``[N/A]``) reads as 0."""
    gpus = []
    for line in text.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            raise ValueError(f"unexpected nvidia-smi line {line!r}")
        index, util, used = fields
        gpus.append((index, _number(util) / 100.0, _number(used) * _MIB))
    return gpus


def _number(field: str) -> float:
    try:
        return float(field)
    except ValueError:
        return 0.0
