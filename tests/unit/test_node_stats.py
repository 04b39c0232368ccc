"""Resource figures of an actor's process and node (deploy/runtime/node_stats.py)."""

from __future__ import annotations

import re

import pytest

from zeroforge.deploy.runtime.node_stats import ResourceReporter, parse_nvidia_smi
from zeroforge.shared import metrics


def test_a_reporter_measures_this_process_and_node():
    reporter = ResourceReporter("selfplay", "3", "abcd1234")
    sum(i * i for i in range(2_000_000))  # some CPU time to count
    first = metrics.merge([reporter.snapshot()])
    labels = {"kind": "selfplay", "actor": "3", "node": "abcd1234"}
    cpu = metrics.value(first, "actor_cpu_seconds_total", **labels)
    assert cpu > 0
    assert metrics.value(first, "actor_memory_bytes", **labels) > 10 * 2**20
    total = metrics.value(first, "node_memory_total_bytes", node="abcd1234")
    used = metrics.value(first, "node_memory_used_bytes", node="abcd1234")
    assert 0 < used < total
    assert 0.0 <= metrics.value(first, "node_cpu_utilisation_ratio", node="abcd1234") <= 1.0
    sum(i * i for i in range(2_000_000))
    second = metrics.merge([reporter.snapshot()])
    # a counter: the second report is the process's whole CPU time, not the time since
    assert metrics.value(second, "actor_cpu_seconds_total", **labels) > cpu


def test_add_to_keeps_the_services_own_metrics():
    r = metrics.Recorder()
    r.inc("learner_steps_total", 5)
    snap = ResourceReporter("learner", "0", "n").add_to(r.snapshot())
    merged = metrics.merge([snap])
    assert metrics.value(merged, "learner_steps_total") == 5
    assert metrics.value(merged, "node_memory_total_bytes", node="n") > 0


def test_nvidia_smi_lines_become_ratios_and_bytes():
    assert parse_nvidia_smi("0, 87, 1024\n1, [N/A], 0\n") == [
        ("0", 0.87, 1024 * 2**20), ("1", 0.0, 0.0)]
    assert parse_nvidia_smi("") == []
    with pytest.raises(ValueError, match="nvidia-smi line"):
        parse_nvidia_smi("0, 87\n")


def test_the_learner_initialises_every_rejection_reason_the_code_can_give():
    """Each reason string the decoder, the stream and the semantic checks raise is in
    ``REJECTION_REASONS`` (so each is a series at 0 from the start)."""
    from pathlib import Path

    from zeroforge.learner.service import REJECTION_REASONS

    repo = Path(__file__).resolve().parents[2]
    root = repo / "shared"
    raised = set()
    for path in [root / "samples.py", repo / "learner" / "sample_checks.py",
                 *sorted((root / "transport").glob("*.py"))]:
        raised |= set(re.findall(r'SampleFormatError\(\s*"(\w+)"', path.read_text()))
    assert raised, "no SampleFormatError reasons found: has the code moved?"
    assert raised <= set(REJECTION_REASONS)
    assert {"wrong_game", "duplicate"} <= set(REJECTION_REASONS)


def test_gpu_figures_come_from_nvidia_smi_on_the_path(tmp_path, monkeypatch):
    """The subprocess path, with a stand-in ``nvidia-smi`` (this machine has no GPU): the
    query's output becomes per-GPU gauges, read again only after ``GPU_POLL_S``."""
    from zeroforge.deploy.runtime import node_stats

    calls = tmp_path / "calls"
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho x >> {calls}\necho '0, 42, 2048'\necho '1, 7, 10'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    reporter = ResourceReporter("inference", "0", "gpu-node")
    merged = metrics.merge([reporter.snapshot()])
    assert metrics.value(merged, "node_gpu_utilisation_ratio", node="gpu-node", gpu="0") == 0.42
    assert metrics.value(merged, "node_gpu_memory_used_bytes", node="gpu-node",
                         gpu="1") == 10 * 2**20
    reporter.snapshot()
    assert calls.read_text().count("x") == 1  # cached within GPU_POLL_S
    monkeypatch.setattr(node_stats, "GPU_POLL_S", 0.0)
    reporter.snapshot()
    assert calls.read_text().count("x") == 2


def test_an_actors_figures_include_its_child_processes():
    """A self-play host's workers may be child processes (``host_workers=process``): their
    CPU time and memory are the actor's, while they run and once they have ended."""
    import subprocess
    import sys

    labels = {"kind": "selfplay", "actor": "0", "node": "n"}
    reporter = ResourceReporter("selfplay", "0", "n")
    before = metrics.merge([reporter.snapshot()])
    own_rss = metrics.value(before, "actor_memory_bytes", **labels)
    # a child that burns half a second of CPU, holds 200 MB, then waits to be told to end
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nt = time.process_time()\n"
         "while time.process_time() - t < 0.5: pass\nb = b'x' * (200 * 2**20)\n"
         "print('ready', flush=True)\nsys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "ready"
    running = metrics.merge([reporter.snapshot()])
    assert metrics.value(running, "actor_memory_bytes", **labels) > own_rss + 150 * 2**20
    cpu_running = metrics.value(running, "actor_cpu_seconds_total", **labels)
    assert cpu_running >= metrics.value(before, "actor_cpu_seconds_total", **labels) + 0.4
    child.stdin.write("\n")
    child.stdin.flush()
    child.wait(30)
    ended = metrics.merge([reporter.snapshot()])
    # its time still counts (once waited for); the counter never goes back
    assert metrics.value(ended, "actor_cpu_seconds_total", **labels) >= cpu_running
    assert metrics.value(ended, "actor_memory_bytes", **labels) < own_rss + 150 * 2**20
