"""Toy games and evaluators with known answers, shared by the search tests (fakes of our
own seams only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeroforge.shared.games import Game, GameSpec, State, make_game
from zeroforge.shared.search import Evaluation

TTT = make_game("tictactoe")


def ttt(board: str) -> State:
    """A tic-tac-toe position (batch of one) drawn as three rows of X, O and '.'."""
    cells = "".join(board.split())
    xs = [i for i, c in enumerate(cells) if c == "X"]
    os_ = [i for i, c in enumerate(cells) if c == "O"]
    assert len(cells) == 9 and len(xs) - len(os_) in (0, 1)
    state = TTT.init(1)
    for i in range(len(xs) + len(os_)):
        move = xs[i // 2] if i % 2 == 0 else os_[i // 2]
        state = TTT.step(state, np.array([move]))
    return state


# --- a 1-ply bandit whose arm values are known exactly ---------------------------------
@dataclass
class ArmState(State):
    arm: np.ndarray
    """[B] int32: the arm pulled at the root (-1 before)."""


class Bandit(Game):
    """Pull one of A arms, then keep 'playing' forever: every position below arm a is worth
    ``values[a]`` to the root player, so Q(root, a) is exactly ``values[a]``."""

    name = "bandit"

    def __init__(self, num_arms: int) -> None:
        self.spec = GameSpec("bandit", 1, (1, num_arms), num_arms, (2, 1, num_arms), "bandit",
                             10**6)

    def init(self, batch: int) -> ArmState:
        a = self.spec.num_actions
        return ArmState(to_play=np.zeros(batch, np.int8), ply=np.zeros(batch, np.int32),
                        terminal=np.zeros(batch, bool), outcome=np.zeros(batch, np.int8),
                        legal=np.ones((batch, a), bool), last_action=np.full(batch, -1, np.int32),
                        arm=np.full(batch, -1, np.int32))

    def _step(self, state: ArmState, actions: np.ndarray) -> ArmState:
        s = state.copy()
        go = actions >= 0
        s.arm = np.where(go & (s.arm < 0), actions, s.arm).astype(np.int32)
        s.to_play = np.where(go, 1 - s.to_play, s.to_play).astype(np.int8)
        s.ply = s.ply + go
        s.last_action = np.where(go, actions, s.last_action).astype(np.int32)
        return s

    def observe(self, state: ArmState) -> np.ndarray:
        b, a = state.batch_size, self.spec.num_actions
        obs = np.zeros((b, 2, 1, a), np.uint8)
        pulled = np.flatnonzero(state.arm >= 0)
        obs[pulled, 0, 0, state.arm[pulled]] = 1
        obs[:, 1] = state.to_play[:, None, None]
        return obs


class BanditEvaluator:
    """Uniform priors (or ``logits``); value values[arm] for the root player, mover's view."""

    def __init__(self, values, logits=None) -> None:
        self.values = np.asarray(values, np.float32)
        self.logits = None if logits is None else np.asarray(logits, np.float32)
        self.calls = 0

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        self.calls += 1
        pulled = obs[:, 0, 0, :].astype(bool)
        v = np.where(pulled.any(1), self.values[pulled.argmax(1)], 0.0)
        mover_is_root_player = obs[:, 1, 0, 0] == 0
        v = np.where(mover_is_root_player, v, -v).astype(np.float32)
        logits = (np.zeros(legal.shape, np.float32) if self.logits is None
                  else np.broadcast_to(self.logits, legal.shape).copy())
        return Evaluation(logits, v)


ARM_VALUES = [-0.5, 0.0, 0.3, 0.6, 0.1]
