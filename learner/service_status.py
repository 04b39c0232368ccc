"""What ``LearnerService.status`` reports: human-level numbers, from memory (no Redis call);
stream figures are as of the service's last turn. The service's own reporting, kept apart
so that its module holds the loop."""

from __future__ import annotations

import time
from typing import Any

from zeroforge.learner.service_metrics import replay_by_size


def service_status(service: Any) -> dict:
    """The status of ``service``, a ``LearnerService`` (typed ``Any``: naming the class
    here would make the two modules import each other)."""
    learner, config = service.learner, service.config
    stream_info = service._stream_info
    return {
        "run_id": service.run_id,
        "steps": learner.steps,
        "samples_trained": learner.samples_trained,
        "games_received": service.games_received,
        "positions_received": service.positions_received,
        "weights_version": learner.version,
        "replay_positions": len(learner.replay),
        **replay_by_size(learner),
        "samples_per_insert": round(service.samples_per_insert(), 3),
        "samples_per_insert_target": config.samples_per_insert,
        "samples_per_insert_tolerance": config.samples_per_insert_tolerance,
        "selfplay_paused": bool(service.pacer.pauses),
        "throttled_s": round(service.throttled_s, 1),
        "stream_backlog": stream_info.get("backlog"),
        "stream_undelivered": stream_info.get("undelivered"),
        "unacked": len(service.pending),
        "stream_cursor": service.cursor,
        "skipped_duplicates": service.stream.skipped_duplicates,
        "rejected": dict(service.rejected),
        "losses": dict(service.last_losses),
        "seconds_since_checkpoint": round(time.monotonic() - service._last_checkpoint, 1),
        "transport_errors": service.transport_errors,
        "undrained": service.undrained,
        "checkpoint_failures": service.checkpoint_health.failures,
        "checkpoint_error": service.checkpoint_health.error,
        "unpublished_steps": learner.steps - max(service.out.steps_at_publish, 0),
        "replicas": service.group.replicas if service.group is not None else 1,
        "stream_shards": len(getattr(service.stream, "shards", ())) or 1,
        "stream_shard_errors": dict(getattr(service.stream, "shard_errors", {})),
        "epoch": service.epoch,
        "fenced_by": service.fenced_by,
    }
