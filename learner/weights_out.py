"""Where a learner's weights go: self-play's channel and, with a separate average, the
averaged weights' channel.

Each publish is a new version on self-play's channel (``Learner.selfplay_weights``: the
raw weights, or the average with ``learner.average_selfplay``); when the average is kept
apart (``Learner.separate_average``) the averaged weights follow under the same version on
``AVERAGE_CHANNEL``, which the evaluator reads. Versions only go up on each channel; a
resumed learner does not publish again what a channel already holds.
"""

from __future__ import annotations

import logging

from zeroforge.learner.learner import Learner
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.transport import (
    AVERAGE_CHANNEL,
    StaleVersionError,
    Transport,
    WeightSigner,
)

log = logging.getLogger(__name__)


class PublishedWeights:
    """A learner's weights channels in the run's transport, and what it published last."""

    def __init__(self, transport: Transport, run_id: str, learner: Learner,
                 recorder: Recorder, keep: int, signer: WeightSigner | None) -> None:
        """``keep``: versions each channel keeps; ``signer``: the run's learner key (every
        publish is signed with it: readers refuse weights without it)."""
        self.run_id = run_id
        self.learner = learner
        self.recorder = recorder
        self.store = transport.weights(keep=keep, signer=signer)
        """Self-play's weights."""
        self.average = transport.weights(
            keep=keep, signer=signer, channel=AVERAGE_CHANNEL,
        ) if learner.separate_average else None
        """The averaged weights for the evaluator when self-play plays the raw ones;
        else None."""
        self.steps_at_publish = 0
        """The learner's steps when its weights were last published (checkpointed by the
        service: -1 when not known)."""

    def publish_initial(self) -> None:
        """At start: the random initialisation as version 0 on a fresh run, nothing when
        the channels hold exactly the restored weights already, else a new version."""
        latest = self.store.latest_version()
        if latest is None and self.learner.version == 0 and self.learner.steps == 0:
            self.store.publish(self.learner.selfplay_weights(), 0)
            self._publish_average(0)
            self.steps_at_publish = 0
        elif (latest == self.learner.version and self.steps_at_publish == self.learner.steps
              and self.learner.steps > 0):
            # the average too, unless the last learner died between the two publishes
            self._publish_average(latest)
        else:
            if latest is not None and latest > self.learner.version:
                self.learner.version = latest
            self.publish()
        self.recorder.set("weights_version", self.learner.version, component="learner")

    def publish(self) -> int:
        """Publish the current weights as the next version; returns it."""
        version = self.learner.publish()
        try:
            self.store.publish(self.learner.selfplay_weights(), version)
        except StaleVersionError as err:
            # Someone published past us: a previous incarnation of this learner, or a second
            # learner on the same run (a bug of the deployment). Move past it, loudly.
            latest = self.store.latest_version() or version
            log.error("%s; continuing from version %d (two learners on run %s?)", err,
                      latest + 1, self.run_id)
            self.learner.version = latest
            version = self.learner.publish()
            self.store.publish(self.learner.selfplay_weights(), version)
        self._publish_average(version)
        self.steps_at_publish = self.learner.steps
        self.recorder.set("weights_version", version, component="learner")
        return version

    def _publish_average(self, version: int) -> None:
        """The averaged weights as ``version`` on their channel, unless it has it already
        (a resumed learner's first publish)."""
        if self.average is None:
            return
        latest = self.average.latest_version()
        if latest is None or latest < version:
            self.average.publish(self.learner.weights(), version)
