"""``make_player(spec)``: the player a spec string names (``PLAYER_SPECS``).

The CLI, the rating service and the benchmarks all build players this way. The players
themselves are in ``builtin`` (and ``gtp``), their protocol in ``player``, and loading a
net for ``net:PATH`` in ``checkpoint``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from zeroforge.shared.games import Game
from zeroforge.shared.players.builtin import (
    HumanPlayer,
    MCTSPlayer,
    MinimaxPlayer,
    RandomPlayer,
    UCTPlayer,
)
from zeroforge.shared.players.checkpoint import load_net
from zeroforge.shared.players.player import Player

if TYPE_CHECKING:
    from zeroforge.shared.nets import NetConfig
    from zeroforge.shared.search import SearchConfig

__all__ = ["PLAYER_SPECS", "make_player"]

PLAYER_SPECS: tuple[str, ...] = ("human", "random", "minimax", "uct[:PLAYOUTS]",
                                 "uctsolver[:PLAYOUTS]", "net:PATH[:SIMULATIONS]",
                                 "gtp:COMMAND")
"""The spec strings ``make_player`` accepts (``zeroforge play --help`` lists them)."""

DEFAULT_PLAYOUTS = 1000
"""Playouts a move of ``uct`` / ``uctsolver`` without a number."""



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
        from zeroforge.shared.search import UCTConfig

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
    from zeroforge.shared.search import SearchConfig

    path_text, _, sims = arg.rpartition(":")
    if not (path_text and sims.isdigit()):
        path_text, sims = arg, ""
    if sims and int(sims) < 1:
        raise ValueError(f"player {spec!r}: SIMULATIONS must be a positive integer")
    if game is None:
        raise ValueError(f"player {spec!r}: a net player needs the game")
    path = Path(path_text)
    net = load_net(path, game, net_config)
    from zeroforge.shared.nets import TorchEvaluator

    search = search or SearchConfig()
    if sims:
        search = dataclasses.replace(search, num_simulations=int(sims))
    return MCTSPlayer(game, TorchEvaluator(net), search, name=path.stem,
                      opening_moves=opening_moves)
