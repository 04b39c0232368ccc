"""A learner replica of rank >= 1 in a process of its own, for tests of the replica group
without Ray: ``python -m tests.replica_peer RANK REPLICAS HOST PORT CONFIG_JSON``.

CONFIG_JSON holds ``game``, ``net`` (a NetConfig as a dict) and ``learner`` (a
LearnerConfig as a dict). Its first line on stderr says it is ready to join; it follows
rank 0 until it says STOP, then prints one JSON line ``{"rank": R, "steps": N}``; a failed
group exits 1 with the error's line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.learner.replica_group import GroupAddress, LearnerReplica, ReplicaGroupError
from zeroforge.shared import config as cfg
from zeroforge.shared.nets import NetConfig

READY = "replica ready"
"""The first line on stderr, once the replica is about to join."""


def main(argv: list[str]) -> int:
    rank, replicas, host, port = int(argv[0]), int(argv[1]), argv[2], int(argv[3])
    spec = json.loads(argv[4])
    learner_config = cfg.from_dict(LearnerConfig, spec["learner"], "learner")
    net = cfg.from_dict(NetConfig, spec["net"], "net")
    # a replica keeps no replay window: rank 0 samples for the group
    learner = Learner(dataclasses.replace(learner_config, replay_capacity=1), spec["game"], net)
    replica = LearnerReplica(learner, rank, replicas, lambda: GroupAddress(host, port),
                             timeout_s=float(spec.get("timeout_s", 60.0)))
    # torch imported and the net built (seconds on a busy machine): rank 0 may start the
    # group's clock now (the test waits for this line before it forms the group)
    print(READY, file=sys.stderr, flush=True)
    try:
        result = replica.run()
    except ReplicaGroupError as err:
        print(str(err), file=sys.stderr)
        return 1
    print(json.dumps({"rank": rank, "steps": result}))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: it would destroy the left group's gloo objects, which can
    # block (see replica_group._LEFT_GROUPS)
    os._exit(code)
