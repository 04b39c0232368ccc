"""The learner service's counters and gauges as the metrics catalogue names them
(``shared/metrics.py``): the series it starts at 0, the run's totals a restarted learner
continues, and what each training turn adds."""

from __future__ import annotations

from collections.abc import Mapping

from zeroforge.learner.learner import Learner
from zeroforge.learner.replay_sizes import MixedReplayWindow
from zeroforge.learner.sample_checks import REJECTION_REASONS
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.pace import pause_floor

LOSS_PARTS = (("total", "loss"), ("policy", "policy_loss"), ("value", "value_loss"))
"""``learner_loss{part}`` -> the key of ``Learner.step``'s losses, for every net."""
AUX_LOSS_PARTS = (("ownership", "ownership_loss"), ("score", "score_loss"))
"""The same for a net with an ownership or score head (Go, KataGo-style)."""


def new_recorder() -> Recorder:
    """A recorder whose known label values are series from the start (at 0), so that a
    dashboard's "rejected by reason" or "save failures" shows zeros rather than nothing
    in a healthy run."""
    recorder = Recorder()
    for reason in REJECTION_REASONS:
        recorder.inc("rejected_entries_total", 0, reason=reason)
    for file in ("checkpoint", "snapshot"):
        recorder.inc("learner_save_failures_total", 0, file=file)
    return recorder


def count_restored_totals(recorder: Recorder, learner: Learner, games_received: int,
                          positions_received: int, throttled_s: float,
                          rejected: Mapping[str, int]) -> None:
    """Counters report the run's totals, so a restarted learner continues its series from
    what its checkpoint holds."""
    recorder.inc("learner_steps_total", learner.steps)
    recorder.inc("learner_samples_trained_total", learner.samples_trained)
    recorder.inc("learner_games_received_total", games_received)
    recorder.inc("learner_positions_received_total", positions_received)
    recorder.inc("learner_throttled_seconds_total", throttled_s)
    for reason, n in rejected.items():
        recorder.inc("rejected_entries_total", n, reason=reason)
    for size, n in learner.batches_by_size.items():
        recorder.inc("learner_batches_by_size_total", n, board_size=str(size))


def record_training(recorder: Recorder, learner: Learner,
                    metrics: list[dict[str, float]]) -> None:
    """A turn's training steps (``metrics``: each step's losses, at least one)."""
    recorder.inc("learner_steps_total", len(metrics))
    recorder.inc("learner_samples_trained_total", len(metrics) * learner.config.batch_size)
    for size, n in learner.new_batches_by_size().items():
        recorder.inc("learner_batches_by_size_total", n, board_size=str(size))
    last = metrics[-1]
    for part, key in LOSS_PARTS + (AUX_LOSS_PARTS if learner.aux else ()):
        recorder.set("learner_loss", last[key], part=part)


def set_gauges(recorder: Recorder, learner: Learner, samples_per_insert: float,
               backlog: int) -> None:
    """The gauges a metrics snapshot reports: the samples-per-insert ratio with its
    target and pause floor, the replay window, the stream lag (``backlog``: entries
    written but not yet acknowledged) and the weights version."""
    c = learner.config
    recorder.set("learner_samples_per_insert", samples_per_insert)
    recorder.set("learner_samples_per_insert_target", c.samples_per_insert)
    recorder.set("learner_samples_per_insert_floor",
                 pause_floor(c.samples_per_insert, c.samples_per_insert_tolerance))
    recorder.set("replay_window_positions", len(learner.replay))
    if isinstance(learner.replay, MixedReplayWindow):
        for size, n in learner.replay.positions_by_size().items():
            recorder.set("replay_window_positions_by_size", n, board_size=str(size))
    recorder.set("stream_lag_entries", backlog)
    recorder.set("weights_version", learner.version, component="learner")


def replay_by_size(learner: Learner) -> dict[str, dict[str, int]]:
    """The status keys of a run with several board sizes (``replay_positions_by_size``:
    positions held per size, ``batches_by_size``: training batches per size); none for
    a run of one."""
    if not isinstance(learner.replay, MixedReplayWindow):
        return {}
    return {"replay_positions_by_size": {str(k): v for k, v in
                                         learner.replay.positions_by_size().items()},
            "batches_by_size": {str(k): v for k, v in sorted(learner.batches_by_size.items())}}
