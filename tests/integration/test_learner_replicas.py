"""The data-parallel learner group (``learner/replica_group.py``) with real gloo between
real processes: rank 0 in the test, rank 1 in a child process (``tests/replica_peer.py``).

- R = 2 at b/2 each makes the same update as R = 1 at b (a net without batch norm, whose
  statistics are per replica by design): weights within 1e-5 after several SGD and AdamW
  steps, also when rank 0 had trained alone first (its optimizer state is shared).
- A replica killed with SIGKILL, or stopped with SIGSTOP, makes rank 0's next step fail
  with one line naming it, within the group timeout: never a hang.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.replica_peer import READY
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.learner.replica_group import ReplicaGroup, ReplicaGroupError
from zeroforge.shared import config as cfg
from zeroforge.shared.board_sizes import size_mix
from zeroforge.shared.nets import NetConfig

GAME = "tictactoe"
NET = NetConfig(kind="convnet", trunk=(8, 16), batch_norm=False, policy_channels=2,
                value_channels=1, value_hidden=(16,))
AUX_GAME = "go:size=5"
AUX_NET = NetConfig(kind="convnet", trunk=(8, 16), batch_norm=False, policy_channels=2,
                    value_channels=2, value_hidden=(16,), heads="pooled",
                    ownership_head=True, score_head=True)
"""A net with KataGo's ownership and score heads (no batch norm: per-shard statistics
would differ from the whole batch's)."""
TOLERANCE = 1e-5
"""Largest weight difference allowed between R=2 and R=1 after the steps: float32 sums in
another order (two half-batch gradients averaged vs one) differ by ~1e-7 a step."""


def learner_config(**changes) -> LearnerConfig:
    base = LearnerConfig(batch_size=64, lr=0.05, min_replay=1, samples_per_insert=0,
                         replay_capacity=500, device="cpu", seed=3)
    return dataclasses.replace(base, **changes)


def filled(config: LearnerConfig, game: str = GAME, net: NetConfig = NET) -> Learner:
    """A learner whose window holds the same 300 made-up positions in every call; one in
    five has no policy target (a playout-cap fast move); with an aux net, two in three
    carry ownership and score targets."""
    learner = Learner(config, game, net)
    spec = learner.game.spec
    rng = np.random.default_rng(11)
    n = 300
    obs = rng.integers(0, 2, size=(n, *spec.obs_shape), dtype=np.uint8)
    policy = rng.random((n, spec.num_actions)).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    policy[::5] = 0.0
    value = rng.choice([-1.0, 0.0, 1.0], size=n).astype(np.float32)
    if not learner.aux:
        learner.replay.add_arrays(obs, policy, value)
        return learner
    ownership = rng.integers(-1, 2, size=(n, *spec.obs_shape[1:])).astype(np.int8)
    score = rng.normal(0, 8, size=n).astype(np.float32)
    keep = np.arange(n) % 3 != 0
    learner.replay.add_arrays(obs[keep], policy[keep], value[keep], ownership[keep],
                              score[keep])
    learner.replay.add_arrays(obs[~keep], policy[~keep], value[~keep])
    return learner


class Peer:
    """Rank 1 in a child process."""

    def __init__(self, group: ReplicaGroup, config: LearnerConfig, timeout_s: float,
                 game: str = GAME, net: NetConfig = NET) -> None:
        spec = {"game": game, "net": cfg.to_dict(net), "learner": cfg.to_dict(config),
                "timeout_s": timeout_s}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.replica_peer", "1", "2", group.address.host,
             str(group.address.port), json.dumps(spec)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the group's timeouts are short (seconds) and start when rank 0 forms the group:
        # wait until the peer has imported torch and built its net (a parallel suite on
        # two cores took over 8 s), so that they time the group, not the interpreter start
        before = []  # whatever it wrote first (a warning, an error)
        while self.proc.stderr and (line := self.proc.stderr.readline()):
            if line.strip() == READY:
                break
            before.append(line)
        else:
            raise AssertionError(f"the peer ended before it was ready: {''.join(before)}")

    def finish(self, timeout_s: float = 60) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


def max_diff(a: Learner, b: Learner) -> float:
    sa, sb = a.net.state_dict(), b.net.state_dict()
    return max(float((sa[k].float() - sb[k].float()).abs().max()) for k in sa)


@pytest.mark.parametrize("optimizer, game, net", [
    ("sgd", GAME, NET), ("adamw", GAME, NET), ("adamw", AUX_GAME, AUX_NET)],
    ids=["sgd", "adamw", "aux-heads"])
def test_two_replicas_make_the_update_of_one(optimizer, game, net):
    config = learner_config(optimizer=optimizer)
    alone, grouped = filled(config, game, net), filled(config, game, net)
    assert max_diff(alone, grouped) == 0.0
    # Three steps alone first: the group must carry rank 0's optimizer state over.
    alone_losses = [alone.step() for _ in range(7)]
    grouped_losses = [grouped.step() for _ in range(3)]
    group = ReplicaGroup(2, timeout_s=30)
    peer = Peer(group, config, 30, game, net)
    try:
        grouped.join_group(group)
        grouped_losses += [grouped.step() for _ in range(4)]
        group.stop()
        code, out, err = peer.finish()
    finally:
        peer.kill()
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"rank": 1, "steps": 4}
    assert grouped.steps == alone.steps == 7
    assert grouped.samples_trained == alone.samples_trained == 7 * 64
    diff = max_diff(alone, grouped)
    assert diff < TOLERANCE, f"R=2 weights differ from R=1 by {diff:g}"
    for mine, theirs in zip(grouped_losses, alone_losses, strict=True):
        for key in ("loss", "policy_loss", "value_loss", "target_entropy",
                    "ownership_loss", "score_loss"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-6), key
    if alone.aux:  # the auxiliary parts were trained, not zero
        assert min(m["ownership_loss"] for m in alone_losses) > 0.1
        assert min(m["score_loss"] for m in alone_losses) > 0.1
    # and the group did train: the weights moved from the start
    assert max_diff(alone, filled(config, game, net)) > 1e-3


def filled_mixed(config: LearnerConfig) -> Learner:
    """A learner of ``AUX_GAME`` at 7x7 that also trains 5x5 (``selfplay.board_sizes``),
    its window holding the same made-up positions of both sizes in every call."""
    mix = size_mix("go:size=7", (5, 7))
    learner = Learner(config, "go:size=7", AUX_NET, mix)
    rng = np.random.default_rng(12)
    for size, n in ((5, 150), (7, 200)):
        spec = learner.games[mix.spec_for(size)].spec
        policy = rng.random((n, spec.num_actions)).astype(np.float32)
        policy /= policy.sum(axis=1, keepdims=True)
        learner.replay.add_arrays(
            rng.integers(0, 2, size=(n, *spec.obs_shape), dtype=np.uint8), policy,
            rng.choice([-1.0, 1.0], size=n).astype(np.float32),
            rng.integers(-1, 2, size=(n, size, size)).astype(np.int8),
            rng.normal(0, 8, size=n).astype(np.float32))
    return learner


def test_two_replicas_make_the_update_of_one_on_mixed_board_sizes():
    """Each step's board (5x5 or 7x7) reaches the replica in the header: the group makes
    one learner's update, the ownership mean over the step's own points."""
    config = learner_config(optimizer="adamw")
    alone, grouped = filled_mixed(config), filled_mixed(config)
    alone_losses = [alone.step() for _ in range(8)]
    group = ReplicaGroup(2, timeout_s=30)
    peer = Peer(group, config, 30, "go:size=7", AUX_NET)
    try:
        grouped.join_group(group)
        grouped_losses = [grouped.step() for _ in range(8)]
        group.stop()
        code, out, err = peer.finish()
    finally:
        peer.kill()
    assert code == 0, err
    assert set(grouped.batches_by_size) == {5, 7}, grouped.batches_by_size
    assert grouped.batches_by_size == alone.batches_by_size
    diff = max_diff(alone, grouped)
    assert diff < TOLERANCE, f"R=2 weights differ from R=1 by {diff:g}"
    for mine, theirs in zip(grouped_losses, alone_losses, strict=True):
        for key in ("loss", "policy_loss", "value_loss", "ownership_loss", "score_loss"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-6), key


def test_the_batch_must_split_evenly():
    config = learner_config(batch_size=63)
    learner = filled(config)
    group = ReplicaGroup(2, timeout_s=10, join_timeout_s=20)
    peer = Peer(group, config, 10)
    try:
        with pytest.raises(ReplicaGroupError, match="not divisible by learner.replicas 2"):
            learner.join_group(group)
    finally:
        peer.kill()


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_lost_replica_fails_the_next_step_in_one_line(fault):
    timeout_s = 8.0
    config = learner_config()
    learner = filled(config)
    group = ReplicaGroup(2, timeout_s=timeout_s)
    peer = Peer(group, config, timeout_s)
    try:
        learner.join_group(group)
        learner.step()
        time.sleep(1.5)  # a heartbeat or two in the store
        os.kill(peer.proc.pid, getattr(signal, fault))
        time.sleep(3.5 * 1.0)  # older than three heartbeats
        started = time.monotonic()
        with pytest.raises(ReplicaGroupError) as caught:
            for _ in range(3):  # a send may still fit in a socket buffer: the step after fails
                learner.step()
        waited = time.monotonic() - started
    finally:
        peer.kill()
    line = str(caught.value)
    assert "\n" not in line
    assert "replica 1 (last heard" in line, line
    assert waited < timeout_s + 5, f"took {waited:.1f} s against a {timeout_s} s timeout"
    assert learner.steps == 1  # the failed step changed nothing


def test_an_idle_group_outlives_its_timeout_through_keep_alives():
    """Rank 0 with nothing to train (its window never warms up) for 2.5 group timeouts:
    ``train_available`` pings the replicas, which keep waiting, and the group trains on."""
    timeout_s = 8.0  # (forming waits this long for the peer, which imports torch first)
    config = learner_config(min_replay=10_000)
    learner = filled(config)
    group = ReplicaGroup(2, timeout_s=timeout_s)
    peer = Peer(group, config, timeout_s)
    try:
        learner.join_group(group)
        learner.step()
        idle_until = time.monotonic() + 2.5 * timeout_s
        while time.monotonic() < idle_until:
            assert learner.train_available(5) == []  # nothing may be trained: a ping
            time.sleep(0.2)
        assert peer.proc.poll() is None, peer.finish()  # still in the group
        learner.step()
        group.stop()
        code, out, err = peer.finish()
    finally:
        peer.kill()
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"rank": 1, "steps": 2}


def test_the_rendezvous_listens_on_the_group_address_only():
    """torch's TCPStore, given a port, listens on every interface; the group's store takes
    a socket bound to the address the replicas use (on Kubernetes the pod's, where the Ray
    pods' NetworkPolicy closes it to other pods), and a host it cannot bind is one line."""
    import psutil

    group = ReplicaGroup(2, host="127.0.0.1", join_timeout_s=5)
    port = group.address.port
    listening = {(c.laddr.ip, c.laddr.port) for c in psutil.net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
    assert listening == {("127.0.0.1", port)}
    with pytest.raises(ReplicaGroupError, match=r"cannot listen on 203\.0\.113\.77"):
        ReplicaGroup(2, host="203.0.113.77", join_timeout_s=5)  # TEST-NET: not ours
