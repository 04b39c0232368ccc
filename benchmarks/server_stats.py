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


def _hist_delta(before: dict, after: dict, name: str) -> tuple[float, float]:
    """(count, sum) a histogram gained between two snapshots."""
    count_after, sum_after = hist_totals(after, name)
    count_before, sum_before = hist_totals(before, name)
    return count_after - count_before, sum_after - sum_before


def mean_ms(count_sum: tuple[float, float]) -> float:
    """Mean of a (count, seconds summed) pair, in ms (0 when nothing was counted)."""
    count, total = count_sum
    return total / max(count, 1) * 1e3


def batching(before: dict, after: dict) -> dict:
    """Between two snapshots: network calls, positions evaluated, requests answered,
    (count, seconds summed) of the requests' queue waits and of their latency in the server
    (wait + network call), and (count, sum) of the queue depths batches formed at."""
    return {
        "calls": _hist_delta(before, after, "inference_batch_size")[0],
        "positions": (counter(after, "nn_evaluations_total")
                      - counter(before, "nn_evaluations_total")),
        "requests": (counter(after, "inference_requests_total")
                     - counter(before, "inference_requests_total")),
        "waits": _hist_delta(before, after, "inference_queue_wait_seconds"),
        "latencies": _hist_delta(before, after, "inference_request_latency_seconds"),
        "depths": _hist_delta(before, after, "inference_queue_depth"),
    }
