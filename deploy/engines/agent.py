"""What the GTP and Gomocup engines share: a trained net loaded from a checkpoint and a
searcher that spends either a fixed number of simulations or a time budget on a move.

Time budgets become simulations through measured speed: every search records how many
simulations a second it ran (a moving average), and a move with ``budget`` seconds gets
``speed * budget`` simulations. The first timed move with no measurement yet runs a short
probe search first. (Searching in chunks until the clock runs out would need the tree to
survive between searches of the same root, which ``MCTS`` does not promise.)
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zeroforge.shared.board_sizes import net_plays
from zeroforge.shared.games import Game, State, make_game
from zeroforge.shared.search import SearchConfig

PROBE_SIMULATIONS = 8
"""Simulations of the probe search that measures speed before the first timed move."""

DEFAULT_LEAF_BATCH = 8
"""Leaves the engines' search sends the net per call (``SearchConfig.leaf_batch``): one
game searches alone here, and a net evaluates 8 leaves in little more time than one.
On one CPU thread a trained small gomoku 8x8 net ran 2.6-3x the simulations a second at 8
(16: barely more) and scored 0.65 ± 0.06 against 1 at equal time (60 games, 50 ms a
move; 0.45 at equal simulations); ``benchmarks/bench_leaf_batch.py``. 1 is the lock-step
search, one leaf per call."""


@dataclass(frozen=True)
class Choice:
    """The move a search chose and what it cost."""

    action: int
    """The action to play."""
    value: float
    """Root value in [-1, 1] for the player to move."""
    simulations: int
    """Simulations run for this move (the probe included)."""
    seconds: float
    """Wall-clock seconds the move took."""


def checkpoint_game(path: str | Path) -> str | None:
    """The game spec string a learner checkpoint names, or None for a weights file.

    ValueError in one line if the file is missing or unreadable."""
    from zeroforge.shared.players import read_checkpoint

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint")
    blob = read_checkpoint(path)
    game = blob.get("game") if blob is not None else None
    return game if isinstance(game, str) else None


class Agent:
    """A trained net with PUCT search (no noise, most visited move), for one game at a time.

    ``leaf_batch`` leaves go to the net per call, kept apart by virtual loss
    (``SearchConfig.leaf_batch``); 1 is the lock-step search.

    ``net_game`` is the game the net was trained on; ``choose`` accepts any game that
    ``board_sizes.net_plays`` allows (the engines rebuild the game when the komi or rule
    changes, and, for a fully convolutional net, the board size: ``any_size``).
    """

    def __init__(self, checkpoint: str | Path, game_spec: str | None = None,
                 simulations: int = 200, max_simulations: int = 20000,
                 device: str = "auto", leaf_batch: int = DEFAULT_LEAF_BATCH) -> None:
        from zeroforge.shared.nets import InferenceConfig, TorchEvaluator
        from zeroforge.shared.players import load_net

        named = checkpoint_game(checkpoint)
        if named is None and game_spec is None:
            raise ValueError(f"{checkpoint}: a weights file does not say its game; "
                             "give --game")
        self.net_game = make_game(named or game_spec)  # type: ignore[arg-type]
        self.game = make_game(game_spec) if game_spec else self.net_game
        if simulations < 1 or max_simulations < simulations:
            raise ValueError("simulations must be >= 1 and at most max_simulations")
        if leaf_batch < 1:
            raise ValueError(f"leaf_batch must be >= 1, got {leaf_batch}")
        self.evaluator = TorchEvaluator(load_net(checkpoint, self.net_game),
                                        config=InferenceConfig(device=device))
        self.any_size = self.evaluator.any_board
        """The net is fully convolutional: it plays its game at any board size."""
        if not net_plays(self.game, self.net_game, self.any_size):
            raise ValueError(f"{checkpoint}: a net for {self.net_game.spec.spec_string} "
                             f"cannot play {self.game.spec.spec_string}")
        self.search = SearchConfig(num_simulations=simulations, add_noise=False,
                                   temperature_moves=0, reuse_tree=False,
                                   leaf_batch=leaf_batch)
        self.simulations, self.max_simulations = simulations, max_simulations
        self.speed: float | None = None  # simulations a second, moving average

    def _search(self, game: Game, state: State, sims: int, seed: int) -> tuple[int, float, float]:
        from zeroforge.shared.search import MCTS

        mcts = MCTS(game, self.evaluator, dataclasses.replace(self.search, num_simulations=sims))
        start = time.perf_counter()
        result = mcts.search(state, np.random.default_rng(seed))
        took = time.perf_counter() - start
        rate = sims / max(took, 1e-6)
        self.speed = rate if self.speed is None else 0.7 * self.speed + 0.3 * rate
        return int(result.action[0]), float(result.root_value[0]), took

    def analyse(self, game: Game, state: State, sims: int, seed: int = 0
                ) -> list[tuple[int, int, float, float]]:
        """(action, visits, win rate for the mover in [0, 1], prior) of every visited root
        move of the one running game ``state`` [1], most visited first."""
        from zeroforge.shared.search import MCTS

        mcts = MCTS(game, self.evaluator, dataclasses.replace(self.search, num_simulations=sims))
        mcts.search(state, np.random.default_rng(seed))
        tree = mcts.tree
        assert tree is not None
        kids = tree.children[0, 0, :]
        out = []
        for action in np.flatnonzero(kids >= 0):
            node = int(kids[action])
            visits = int(tree.visits[0, node])
            if visits > 0:
                # a child's values are from its own mover's view: the root mover's opponent
                q = -float(tree.value_sum[0, node]) / visits
                out.append((int(action), visits, (1 + q) / 2, float(tree.prior[0, 0, action])))
        out.sort(key=lambda m: (-m[1], -m[3]))
        return out

    def choose(self, game: Game, state: State, budget: float | None = None,
               seed: int = 0) -> Choice:
        """A move for the one running game ``state`` [1]: ``simulations`` simulations, or
        as many as fit in ``budget`` seconds (at least one)."""
        start = time.perf_counter()
        if budget is None:
            action, value, _ = self._search(game, state, self.simulations, seed)
            return Choice(action, value, self.simulations, time.perf_counter() - start)
        spent = 0
        if self.speed is None:
            spent = PROBE_SIMULATIONS
            self._search(game, state, spent, seed)
        left = budget - (time.perf_counter() - start)
        sims = int(min(self.max_simulations, max(1, (self.speed or 1.0) * left)))
        action, value, _ = self._search(game, state, sims, seed)
        return Choice(action, value, spent + sims, time.perf_counter() - start)


def engine_agent(command: str, checkpoint: str, game: str | None, simulations: int,
                 max_simulations: int, device: str, leaf_batch: int,
                 verbose: bool) -> tuple[Agent, Callable[[str], None]]:
    """The ``Agent`` an engine command (``zeroforge gtp``, ``zeroforge pbrain``) serves,
    and its log: lines on stderr with ``verbose`` (stdout is the protocol's), nothing
    otherwise; says how long the net took to load."""
    start = time.perf_counter()
    agent = Agent(checkpoint, game, simulations=simulations,
                  max_simulations=max_simulations, device=device, leaf_batch=leaf_batch)

    def log(text: str) -> None:
        if verbose:
            print(text, file=sys.stderr, flush=True)

    log(f"zeroforge {command}: {agent.game.spec.spec_string} net loaded in "
        f"{time.perf_counter() - start:.1f} s")
    return agent, log
