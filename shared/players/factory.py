"""Players: anything that picks moves for a batch of games, and ``make_player(spec)``.

One ``Player`` protocol (``name``, ``select(game, states, rng) -> [B] actions``) and every
player zeroforge has: ``RandomPlayer``, ``MinimaxPlayer`` (perfect tic-tac-toe),
``UCTPlayer`` (pure MCTS with random rollouts, the yardstick), ``MCTSPlayer`` (the trained
agent: PUCT with its network) and ``HumanPlayer`` (a person at the terminal).
``make_player`` builds one from a spec string (``PLAYER_SPECS``); the CLI, the evaluator
and the benchmarks all use it. Search modules and torch are imported only by the players
that need them.

The searching players (``MCTSPlayer``, ``UCTPlayer``) also have ``analyse(game, states,
rng) -> SearchAnalysis``: the move they would play with what their search saw (visit
counts and shares, the net's prior, the root value). Terminal hints, the web board and
engines show it (``SearchAnalysis.top``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

import numpy as np

from zeroforge.shared.games.base import Game, IllegalMoveError, State
from zeroforge.shared.games.sampling import sample_legal

if TYPE_CHECKING:
    from torch import nn

    from zeroforge.shared.nets.model import NetConfig
    from zeroforge.shared.search.config import SearchConfig
    from zeroforge.shared.search.evaluator import Evaluator
    from zeroforge.shared.search.uct import UCTConfig

__all__ = ["Player", "PLAYER_SPECS", "make_player", "load_net", "RandomPlayer", "MinimaxPlayer",
           "UCTPlayer", "MCTSPlayer", "HumanPlayer", "SearchAnalysis", "MoveInfo", "Analyst"]

PLAYER_SPECS: tuple[str, ...] = ("human", "random", "minimax", "uct[:PLAYOUTS]",
                                 "uctsolver[:PLAYOUTS]", "net:PATH[:SIMULATIONS]",
                                 "gtp:COMMAND")
"""The spec strings ``make_player`` accepts (``zeroforge play --help`` lists them)."""

DEFAULT_PLAYOUTS = 1000
"""Playouts a move of ``uct`` / ``uctsolver`` without a number."""


class Player(Protocol):
    """Anything that picks moves for a batch of games."""

    name: str

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B]: a legal action for every running game."""
        ...


@dataclasses.dataclass(frozen=True)
class MoveInfo:
    """One candidate move of a ``SearchAnalysis`` for one game."""

    action: int
    """The action."""
    visits: int
    """Search visits (UCT: playouts) through it."""
    share: float
    """``visits`` over all root visits, in [0, 1]."""
    prior: float | None
    """The net's prior probability of it; None for searches without a net (UCT)."""


@dataclasses.dataclass(frozen=True)
class SearchAnalysis:
    """What a searching player saw at B root positions (``MCTSPlayer.analyse``,
    ``UCTPlayer.analyse``)."""

    action: np.ndarray
    """[B] int: the move the player plays (what ``select`` would return)."""
    visits: np.ndarray
    """[B, A] int: root visit counts per action (0 for illegal or unvisited)."""
    policy: np.ndarray
    """[B, A] float: visit shares, summing to 1 over visited actions."""
    value: np.ndarray
    """[B] float in [-1, 1]: expected result for the player to move at each root."""
    prior: np.ndarray | None = None
    """[B, A] float: the net's prior at the roots; None for searches without a net."""

    def top(self, index: int, n: int = 5) -> list[MoveInfo]:
        """Up to ``n`` candidate moves of game ``index``: the move played first (a proven
        win can have fewer visits than others), then the most visited (ties by prior,
        then action); unvisited moves are left out."""
        visits = self.visits[index]
        prior = self.prior[index] if self.prior is not None else np.zeros(len(visits))
        actions = np.arange(len(visits))
        order = np.lexsort((actions, -prior, -visits, actions != self.action[index]))
        total = max(int(visits.sum()), 1)
        return [MoveInfo(int(a), int(visits[a]), float(visits[a]) / total,
                         None if self.prior is None else float(prior[a]))
                for a in order if visits[a] > 0 or a == self.action[index]][:n]


class Analyst(Protocol):
    """A player that can show what its search saw (``MCTSPlayer``, ``UCTPlayer``)."""

    name: str

    def analyse(self, game: Game, states: State, rng: np.random.Generator
                ) -> SearchAnalysis:
        """Search the running games ``states`` [B] (none may be over)."""
        ...


def make_player(spec: str, game: Game | None = None, *, search: SearchConfig | None = None,
                net_config: NetConfig | str | None = None, name: str | None = None,
                opening_moves: int = 0) -> Player:
    """The player a spec string names (one of ``PLAYER_SPECS``):

    - ``human``: moves typed at the terminal; ``random``: uniformly random legal moves;
    - ``minimax``: perfect play, small free-style m,n,k games (tic-tac-toe) only;
    - ``uct[:PLAYOUTS]`` / ``uctsolver[:PLAYOUTS]``: pure MCTS with random rollouts,
      textbook or with decisive-move checks and MCTS-Solver proofs (default 1000);
    - ``net:PATH[:SIMULATIONS]``: the trained agent (``MCTSPlayer``) with the net of a
      learner checkpoint (its net config is read from it) or of a weights snapshot
      (``net_config`` says its shape, else the run's ``config.yaml`` when the snapshot is
      in ``RUN_DIR/snapshots/``); ``search`` (default ``SearchConfig()``) with
      ``SIMULATIONS`` simulations if given; ``opening_moves`` as in ``MCTSPlayer``.

    ``game`` is needed for ``net:`` players and lets ``minimax`` refuse a game it cannot
    play at once. ``name`` replaces the default name. Raises ValueError in one line.
    """
    kind, _, arg = spec.partition(":")
    if kind in ("human", "random", "minimax") and not arg:
        player: Player = {"human": HumanPlayer, "random": RandomPlayer,
                          "minimax": MinimaxPlayer}[kind]()
        if kind == "minimax" and game is not None:
            player._setup(game)  # type: ignore[attr-defined]
    elif kind in ("uct", "uctsolver"):
        from zeroforge.shared.search.uct import UCTConfig

        playouts = int(arg) if arg.isdigit() else DEFAULT_PLAYOUTS if not arg else 0
        if playouts < 1:
            raise ValueError(f"player {spec!r}: PLAYOUTS must be a positive integer")
        player = UCTPlayer(UCTConfig(playouts=playouts, solver=kind == "uctsolver"),
                           name=f"{kind}{playouts}")
    elif kind == "gtp" and arg:  # an external Go program over GTP (shared/players/gtp.py)
        from zeroforge.shared.players.gtp import GtpPlayer

        # A batch of games has no way to score a resignation: the engine passes instead
        # (the match runner, which scores "B+R", asks for "raise" itself).
        player = GtpPlayer(arg, on_resign="pass")
    elif kind == "net" and arg:
        player = _net_player(spec, arg, game, search, net_config, opening_moves)
    else:
        raise ValueError(f"unknown player {spec!r}; use one of: {', '.join(PLAYER_SPECS)}")
    if name is not None:
        player.name = name
    return player


def _net_player(spec: str, arg: str, game: Game | None, search: SearchConfig | None,
                net_config: NetConfig | str | None, opening_moves: int) -> MCTSPlayer:
    """``net:PATH[:SIMULATIONS]`` (the part after ``net:`` is ``arg``)."""
    from zeroforge.shared.search.config import SearchConfig

    path_text, _, sims = arg.rpartition(":")
    if not (path_text and sims.isdigit()):
        path_text, sims = arg, ""
    if sims and int(sims) < 1:
        raise ValueError(f"player {spec!r}: SIMULATIONS must be a positive integer")
    if game is None:
        raise ValueError(f"player {spec!r}: a net player needs the game")
    path = Path(path_text)
    net = load_net(path, game, net_config)
    from zeroforge.shared.nets.torch_evaluator import TorchEvaluator

    search = search or SearchConfig()
    if sims:
        search = dataclasses.replace(search, num_simulations=int(sims))
    return MCTSPlayer(game, TorchEvaluator(net), search, name=path.stem,
                      opening_moves=opening_moves)


def load_net(path: str | Path, game: Game, net_config: NetConfig | str | None = None
             ) -> nn.Module:
    """The network (eval mode, CPU) of a learner checkpoint or a weights file for ``game``.

    A checkpoint names its game and net config; a weights file (``save_weights``, any
    format ``load_weights`` reads) needs ``net_config``, or is a run's snapshot
    (``RUN_DIR/snapshots/``) whose run config says it. ValueError in one line if the file
    is missing or unreadable, is for another game, or does not fit the net.
    """
    from zeroforge.shared.config import ConfigError, from_dict
    from zeroforge.shared.formats.weight_blob import load_weights
    from zeroforge.shared.nets.model import NetConfig, build_net

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint or weights file")
    checkpoint = _read_checkpoint(path)
    if checkpoint is not None:
        if isinstance(checkpoint.get("net_config"), dict):
            try:
                net_config = from_dict(NetConfig, checkpoint["net_config"], f"{path}: net")
            except ConfigError as err:
                raise ValueError(str(err)) from None
        trained = checkpoint.get("game")
        if trained is not None and not plays_game(trained, game, net_config):
            raise ValueError(f"{path}: a checkpoint of game {trained!r}, "
                             f"not {game.spec.spec_string!r}")
        state_dict = checkpoint["model"]
    else:
        state_dict = load_weights(path)
        if net_config is None:
            net_config = _run_net_config(path, game)
    if net_config is None:
        raise ValueError(f"{path}: a weights file does not say its net's shape; give the "
                         "net config (or use a checkpoint, which does)")
    net = build_net(net_config, game.spec)
    try:
        net.load_state_dict(state_dict)
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not fit this net "
                         f"({str(err).strip().splitlines()[0]})") from None
    return net.eval()


def _run_net_config(path: Path, game: Game) -> NetConfig | None:
    """The net config of the run a weight snapshot belongs to
    (``RUN_DIR/snapshots/weights-*`` next to ``RUN_DIR/config.yaml``), None if it is not
    in a run directory. ValueError in one line if that run played another game."""
    import yaml

    from zeroforge.shared.config import ConfigError, from_dict
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets.model import NetConfig
    from zeroforge.shared.run_files import CONFIG_NAME, SNAPSHOT_DIR

    config_path = path.parent.parent / CONFIG_NAME
    if path.parent.name != SNAPSHOT_DIR or not config_path.is_file():
        return None
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ValueError(f"{config_path}: unreadable run config ({type(err).__name__})"
                         ) from None
    if not isinstance(data, dict):
        return None
    net = data.get("net")
    net_config = None
    try:
        if isinstance(net, str):
            net_config = NetConfig.preset(net)
        elif isinstance(net, dict):
            net_config = from_dict(NetConfig, net, f"{config_path}: net")
    except (ConfigError, ValueError, KeyError) as err:
        raise ValueError(str(err).splitlines()[0]) from None
    if isinstance(data.get("game"), str):
        played = make_game(data["game"]).spec.spec_string
        if not plays_game(played, game, net_config):
            raise ValueError(f"{path}: a snapshot of game {played!r}, "
                             f"not {game.spec.spec_string!r}")
    return net_config


def plays_game(trained: str, game: Game, net_config: NetConfig | str | None) -> bool:
    """Whether a net trained on the game ``trained`` (a spec string) plays ``game``, by the
    engines' rule (``board_sizes.net_plays``): another komi or rule variant with the same
    inputs, and, for a fully convolutional net (``heads: pooled``), another board size of
    Go, as a ``selfplay.board_sizes`` run trains it to."""
    from zeroforge.shared.board_sizes import net_plays
    from zeroforge.shared.games import make_game

    if isinstance(net_config, str):
        from zeroforge.shared.nets.model import NetConfig

        net_config = NetConfig.preset(net_config)
    pooled = net_config is not None and net_config.heads == "pooled"
    return net_plays(game, make_game(trained), any_size=pooled)


def _read_checkpoint(path: Path) -> dict | None:
    """The dict of a learner checkpoint (``torch.save`` with a ``model`` state dict) or
    None for any other file; read with ``weights_only=True`` and memory-mapped, so the
    replay window it also holds is not read."""
    import torch

    from zeroforge.shared.formats.weight_blob_legacy import ZIP_MAGIC

    with open(path, "rb") as f:
        if f.read(len(ZIP_MAGIC)) != ZIP_MAGIC:
            return None
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise ValueError(f"{path}: corrupt checkpoint or weights file ({type(err).__name__})"
                         ) from None
    if isinstance(blob, dict) and isinstance(blob.get("model"), dict):
        return blob
    return None


class RandomPlayer:
    """Uniformly random legal moves."""

    name = "random"

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        return sample_legal(game.legal_mask(states), rng)


class UCTPlayer:
    """The pure-MCTS baseline (``shared.search.uct``): ``select`` searches all running
    games at once."""

    def __init__(self, config: UCTConfig | None = None, name: str | None = None) -> None:
        from zeroforge.shared.search.uct import UCTConfig

        self.config = config or UCTConfig()
        self.name = name or f"uct{self.config.playouts}"

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] int32 actions for ``states`` [B]; -1 for games that are already over."""
        from zeroforge.shared.search.uct import uct_search

        actions = np.full(states.batch_size, -1, np.int32)
        running = np.flatnonzero(~states.terminal)
        if running.size:
            roots = states if running.size == states.batch_size else states.take(running)
            actions[running] = uct_search(game, roots, self.config, rng).action
        return actions

    def analyse(self, game: Game, states: State, rng: np.random.Generator
                ) -> SearchAnalysis:
        """The search's view of the running games ``states`` [B] (no prior: no net)."""
        from zeroforge.shared.search.uct import uct_search

        result = uct_search(game, states, self.config, rng)
        visits = result.visits.astype(np.int64)
        return SearchAnalysis(action=result.action.astype(np.int64), visits=visits,
                              policy=visits / np.maximum(visits.sum(1, keepdims=True), 1),
                              value=result.value.astype(np.float64))


class MCTSPlayer:
    """The trained agent: PUCT search with its network, no noise, most-visited move.

    With ``opening_moves`` > 0 the first that many plies of a game are sampled in
    proportion to visit counts (temperature 1) instead: two deterministic searchers would
    otherwise play the same two games over and over."""

    def __init__(self, game: Game, evaluator: Evaluator, search: SearchConfig,
                 name: str = "agent", opening_moves: int = 0) -> None:
        from zeroforge.shared.search.mcts import MCTS

        self.name = name
        self.search_config = dataclasses.replace(
            search, add_noise=False, reuse_tree=False, temperature_moves=opening_moves,
            temperature=1.0 if opening_moves else search.temperature)
        self._mcts = MCTS(game, evaluator, self.search_config)

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B]."""
        return self._mcts.search(states, rng).action

    def analyse(self, game: Game, states: State, rng: np.random.Generator
                ) -> SearchAnalysis:
        """One search of the running games ``states`` [B], as ``select`` does it, with
        the root visits, visit shares, the net's prior and the root value."""
        from zeroforge.shared.search.tree import ILLEGAL

        result = self._mcts.search(states, rng)
        tree = self._mcts.tree
        prior = None
        if tree is not None:  # the search leaves its trees: the root's prior is row 0
            prior = np.where(tree.children[:, 0, :] != ILLEGAL, tree.prior[:, 0, :], 0.0)
            prior = prior.astype(np.float64)
        visits = np.asarray(result.visit_counts, np.int64)
        # visit shares, not result.visit_policy: with Gumbel search that is the improved
        # policy, and a person reading "share" expects the fraction of the search
        return SearchAnalysis(action=np.asarray(result.action, np.int64), visits=visits,
                              policy=visits / np.maximum(visits.sum(1, keepdims=True), 1),
                              value=np.asarray(result.root_value, np.float64), prior=prior)


class HumanPlayer:
    """Reads moves in the game's notation from a text stream, re-asking after a bad one."""

    name = "human"

    def __init__(self, read: Callable[[], str] | None = None, out: TextIO | None = None) -> None:
        self._read = read or input
        self._out = out

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B], one question per game."""
        return np.array([self._ask(game, states, i) for i in range(states.batch_size)])

    def _ask(self, game: Game, states: State, index: int) -> int:
        while True:
            try:
                text = self._read()
            except EOFError:
                raise IllegalMoveError("input ended before the game did") from None
            try:
                action = game.parse_action(text)
                reason = game.illegal_reason(states, index, action)
                if reason is None:
                    return action
                print(f"illegal move {text.strip()}: {reason}", file=self._out)
            except IllegalMoveError as err:
                print(err, file=self._out)


class MinimaxPlayer:
    """A perfect player for tic-tac-toe (any m,n,k gomoku of at most 12 points).

    Exhaustive negamax over the whole game tree, memoised on (board, player to move). It
    prefers faster wins and slower losses, and picks uniformly among equally good moves
    (``randomize=True``) so that matches against it are not one game repeated.
    """

    MAX_POINTS = 12  # 3^12 positions at most: the memo stays small and the solve fast

    def __init__(self, randomize: bool = True, name: str = "minimax") -> None:
        self.randomize = randomize
        self.name = name
        self._memo: dict[tuple[bytes, int], int] = {}
        self._shape: tuple[int, int, int] | None = None
        self._lines: list[list[tuple[int, ...]]] = []

    def _setup(self, game: Game) -> None:
        width, height, k = (getattr(game, attr, None) for attr in ("width", "height", "k"))
        if width is None or height is None or k is None or getattr(game, "exact", False):
            raise ValueError(f"MinimaxPlayer plays free-style m,n,k games, not {game!r}")
        if width * height > self.MAX_POINTS:
            raise ValueError(f"MinimaxPlayer: {width}x{height} has more than "
                             f"{self.MAX_POINTS} points")
        if self._shape != (height, width, k):
            self._shape = (height, width, k)
            self._memo.clear()
            self._lines = _lines_through(height, width, k)

    def values(self, game: Game, board: np.ndarray, to_play: int) -> np.ndarray:
        """[A] int: exact value of every action on ``board`` [A] of ``game`` for ``to_play``.

        A win in ``m`` more moves of the mover is worth ``points + 1 - m`` > 0, a loss the
        negative of that, a draw 0; an occupied point a very low number.
        """
        self._setup(game)
        cells = bytearray(board.astype(np.int8).tobytes())
        color = to_play + 1
        out = np.full(len(cells), -10**6, np.int64)
        for a in range(len(cells)):
            if cells[a] == 0:
                out[a] = self._move_value(cells, a, color)
        return out

    def _move_value(self, cells: bytearray, a: int, color: int) -> int:
        """Value for ``color`` of playing ``a`` (memo lookups on the position after it)."""
        cells[a] = color
        empties = cells.count(0)
        if self._wins(cells, a, color):
            value = empties + 1
        elif empties == 0:
            value = 0
        else:
            value = -self._negamax(cells, 3 - color)
        cells[a] = 0
        return value

    def _negamax(self, cells: bytearray, color: int) -> int:
        key = (bytes(cells), color)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        best = -(10**6)
        for a in range(len(cells)):
            if cells[a] == 0:
                best = max(best, self._move_value(cells, a, color))
        self._memo[key] = best
        return best

    def _wins(self, cells: bytearray, a: int, color: int) -> bool:
        return any(all(cells[p] == color for p in line) for line in self._lines[a])

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        board = getattr(states, "board", None)
        if board is None:
            raise ValueError(f"MinimaxPlayer needs a board in the state of {game!r}")
        actions = np.full(states.batch_size, -1, np.int32)
        for i in np.flatnonzero(~states.terminal):
            v = self.values(game, board[i], int(states.to_play[i]))
            best = np.flatnonzero(v == v.max())
            actions[i] = rng.choice(best) if self.randomize else best[0]
        return actions


def _lines_through(height: int, width: int, k: int) -> list[list[tuple[int, ...]]]:
    """For each point, the k-long lines (as point tuples) that contain it."""
    lines = []
    for r in range(height):
        for c in range(width):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                if 0 <= end_r < height and 0 <= end_c < width:
                    lines.append(tuple((r + dr * i) * width + c + dc * i for i in range(k)))
    through: list[list[tuple[int, ...]]] = [[] for _ in range(height * width)]
    for line in lines:
        for p in line:
            through[p].append(line)
    return through
