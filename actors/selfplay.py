"""SelfPlayWorker: B games in lock-step with batched MCTS, emitting finished games.

A plain class: the local training loop calls it directly, the distributed runtime wraps it
in a Ray actor. Where evaluations come from (in-process net or inference server) is the
evaluator's business.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

import numpy as np

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.shared.games import Game
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.search import MCTS, Evaluator, SearchConfig

__all__ = ["GameIds", "SelfPlayConfig", "SelfPlayStats", "SelfPlayWorker"]


@dataclass
class SelfPlayStats:
    """Counters since the worker started."""

    games: int = 0
    positions: int = 0
    """Moves played, summed over the batch (every position is a value sample)."""
    policy_targets: int = 0
    """Positions recorded with a policy target: all of them without playout-cap
    randomisation, only the full-search ones with it."""
    simulations: int = 0
    """Simulations run, summed over the batch (fast and full moves alike)."""
    reused_visits: int = 0
    """Root child visits carried over from the previous move's tree (tree reuse), summed
    over the batch: visits the policy targets got on top of the simulations run."""
    search_seconds: float = 0.0
    outcomes: dict[int, int] = field(default_factory=lambda: {1: 0, -1: 0, 0: 0})

    def set_to_sum(self, parts: Iterable[SelfPlayStats]) -> None:
        """Make every counter the sum of ``parts``' (a worker made of several workers:
        board sizes, groups in flight), in place: callers hold this object."""
        parts = list(parts)
        for f in fields(self):
            if f.name != "outcomes":
                setattr(self, f.name, sum(getattr(part, f.name) for part in parts))
        for outcome in self.outcomes:
            self.outcomes[outcome] = sum(part.outcomes[outcome] for part in parts)


class GameIds:
    """Unique game ids of one worker: ``{worker_id}-{prefix}-{n}``, the prefix random per
    worker process (a restarted worker never repeats an id). Shared by a worker's groups,
    which take ids from their own threads (``next`` of ``itertools.count`` is atomic)."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self._prefix = uuid.uuid4().hex[:8]

    def next(self, worker_id: str) -> str:
        return f"{worker_id}-{self._prefix}-{next(self._count)}"


class SelfPlayWorker:
    """Plays ``games_in_parallel`` games at once; a finished game's slot restarts at once."""

    def __init__(self, game: Game, evaluator: Evaluator, search: SearchConfig,
                 config: SelfPlayConfig, seed: int = 0, worker_id: str = "local",
                 run_id: str = "", *, slots: range | None = None,
                 game_ids: GameIds | None = None) -> None:
        """``slots``: which of the worker's game slots these are (default: all of
        ``config.games_in_parallel``); ``game_ids``: the id source, shared by the groups
        of one worker (``actors.selfplay_groups``)."""
        self.game = game
        self.evaluator = evaluator
        self.config = config
        self.worker_id = worker_id
        self.run_id = run_id
        slots = range(config.games_in_parallel) if slots is None else slots
        # A generator per game slot, seeded by (seed, slot), for the searches' noise and
        # move choices: a slot plays the same games whichever group of the worker it is
        # searched in (``selfplay.batches_in_flight``), and per-move seeding is saved.
        self._slot_rngs = [np.random.default_rng([seed, slot]) for slot in slots]
        # A generator of its own for the playout cap: with the cap off nothing is drawn
        # from it, so searches stay exactly those of a worker without the feature. Every
        # group draws the same sequence: the k-th move of each has the same budget.
        self._cap_rng = np.random.default_rng([seed, 0xCA9])
        self.mcts = MCTS(game, evaluator, search)
        b = len(slots)
        self.state = game.init(b)
        self._obs: list[list[np.ndarray]] = [[] for _ in range(b)]
        self._policy: list[list[np.ndarray]] = [[] for _ in range(b)]
        self._recorded: list[list[bool]] = [[] for _ in range(b)]
        self._to_play: list[list[int]] = [[] for _ in range(b)]
        self._moves: list[list[int]] = [[] for _ in range(b)]
        self.records: list[tuple[str, list[int]]] = []
        """(game id, actions) of the finished games sampled for SGF records
        (``config.record_every``), for the caller to write and clear."""
        self.game_ids = game_ids or GameIds()
        self.stats = SelfPlayStats()

    def play_moves(self, num_moves: int) -> list[GameSamples]:
        """Advance every game ``num_moves`` moves; return the games that finished."""
        finished: list[GameSamples] = []
        for _ in range(num_moves):
            obs = self.game.observe(self.state)
            full, sims, noise = self._budget()
            start = time.perf_counter()
            result = self.mcts.search(self.state, self._slot_rngs, num_simulations=sims,
                                      add_noise=noise)
            self.stats.search_seconds += time.perf_counter() - start
            # A fast move's visits are too few to teach the policy: it is kept as a value
            # sample with an all-zero policy row and the flag saying so.
            policy = result.visit_policy if full else np.zeros_like(result.visit_policy)
            for i in range(self.state.batch_size):
                self._obs[i].append(obs[i])
                self._policy[i].append(policy[i])
                self._recorded[i].append(full)
                self._to_play[i].append(int(self.state.to_play[i]))
                self._moves[i].append(int(result.action[i]))
            self.state = self.game.step(self.state, result.action)
            self.mcts.advance(result.action)
            self.stats.positions += self.state.batch_size
            self.stats.policy_targets += self.state.batch_size if full else 0
            self.stats.simulations += sims * self.state.batch_size
            self.stats.reused_visits += int(result.visit_counts.sum()) - sims * len(result.action)
            done = np.flatnonzero(self.state.terminal)
            if done.size:
                finished.extend(self._finish(done))
        return finished

    def _budget(self) -> tuple[bool, int, bool]:
        """(full search?, simulations, root noise?) of the next move (playout-cap
        randomisation, ``SearchConfig.full_search_prob``)."""
        cfg = self.mcts.config
        if not cfg.playout_cap or self._cap_rng.random() < cfg.full_search_prob:
            return True, cfg.num_simulations, cfg.add_noise
        # Fast moves drop the Dirichlet noise (KataGo): they only pick the move played.
        # Gumbel search keeps its Gumbel noise, which is what samples its moves.
        return False, cfg.fast_budget, cfg.add_noise and cfg.gumbel

    def play_games(self, num_games: int) -> list[GameSamples]:
        """Play until at least ``num_games`` games have finished."""
        out: list[GameSamples] = []
        while len(out) < num_games:
            out.extend(self.play_moves(1))
        return out

    def _finish(self, slots: np.ndarray) -> list[GameSamples]:
        version = int(getattr(self.evaluator, "weights_version", 0))
        # KataGo's dense targets, for games with territory (Go): the final ownership of
        # every point and the score margin; None for the others
        ended = self.state.take(slots)
        ownership, margin = self.game.ownership(ended), self.game.score_margin(ended)
        games = []
        for k, i in enumerate(slots):
            outcome = int(self.state.outcome[i])
            recorded = np.array(self._recorded[i], bool)
            games.append(GameSamples(
                game=self.game.spec.spec_string,
                game_version=self.game.spec.version,
                obs=np.stack(self._obs[i]),
                policy=np.stack(self._policy[i]).astype(np.float32),
                to_play=np.array(self._to_play[i], np.int8),
                outcome=outcome,
                weights_version=version,
                run_id=self.run_id,
                worker_id=self.worker_id,
                game_id=self.game_ids.next(self.worker_id),
                policy_recorded=None if recorded.all() else recorded,
                ownership=None if ownership is None else ownership[k],
                score=None if margin is None else float(margin[k]),
            ))
            every = self.config.record_every
            if every and self.stats.games % every == 0:
                self.records.append((games[-1].game_id, self._moves[i]))
            self._obs[i], self._policy[i], self._to_play[i], self._moves[i] = [], [], [], []
            self._recorded[i] = []
            self.stats.games += 1
            self.stats.outcomes[outcome] += 1
        self.state.put(slots, self.game.init(len(slots)))
        self.mcts.reset(slots)
        return games
