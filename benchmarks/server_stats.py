"""Reading an InferenceServer's ``stats()`` snapshot (``shared.metrics.Recorder``) in the
benchmarks: totals of its counters and unlabelled histograms, and the batching row both
inference benchmarks print."""

from __future__ import annotations


def hist_totals(snapshot: dict, name: str) -> tuple[float, float]:
    """(count, sum) of an unlabelled histogram of a server snapshot."""
    [[_, hist]] = snapshot["hists"].get(name, [[[], [0.0, 0.0]]])
    return sum(hist[:-1]), hist[-1]


def counter(snapshot: dict, name: str) -> float:
    """A counter's total over all its label sets."""
    return sum(v for _, v in snapshot["values"].get(name, []))


def batching(before: dict, after: dict) -> dict:
    """Between two snapshots: network calls, positions evaluated, requests answered and
    the queue wait (count, seconds summed) of the requests."""
    calls = (hist_totals(after, "inference_batch_size")[0]
             - hist_totals(before, "inference_batch_size")[0])
    wait_after = hist_totals(after, "inference_queue_wait_seconds")
    wait_before = hist_totals(before, "inference_queue_wait_seconds")
    return {
        "calls": calls,
        "positions": (counter(after, "nn_evaluations_total")
                      - counter(before, "nn_evaluations_total")),
        "requests": (counter(after, "inference_requests_total")
                     - counter(before, "inference_requests_total")),
        "waits": (wait_after[0] - wait_before[0], wait_after[1] - wait_before[1]),
    }
