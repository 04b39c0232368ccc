"""Players: anything that picks moves, and matches between them.

``player`` holds the ``Player`` protocol; ``builtin`` the players zeroforge has;
``factory`` builds one from a spec string (``human``, ``random``, ``uct:N``,
``net:PATH[:SIMS]``, ``gtp:COMMAND`` ...); ``checkpoint`` loads a trained net for play;
``gtp`` drives an outside engine over the Go Text Protocol as a player; ``arena`` plays
matches between two players and scores them; ``ladder`` rates many players on one Elo
scale from their results. Self-play does not go through players: it runs batched search
directly.

Every name is imported on first use (``__getattr__``): the players need numba, the
checkpoint loader torch, and a caller that wants the ladder should pay for neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroforge.shared.lazy import lazy_getattr

if TYPE_CHECKING:
    from zeroforge.shared.players.arena import (
        ELO_CLIP,
        EloEstimate,
        MatchResult,
        clipped_elo,
        elo_difference,
        evaluate_against,
        play_match,
        random_openings,
        repeats,
    )
    from zeroforge.shared.players.builtin import (
        HumanPlayer,
        MCTSPlayer,
        MinimaxPlayer,
        RandomPlayer,
        UCTPlayer,
    )
    from zeroforge.shared.players.checkpoint import load_net, plays_game, read_checkpoint
    from zeroforge.shared.players.factory import PLAYER_SPECS, make_player
    from zeroforge.shared.players.gtp import GtpError, GtpPlayer, Resigned, resolve_command
    from zeroforge.shared.players.ladder import (
        ELO_PER_NAT,
        Fit,
        Ladder,
        LadderError,
        LadderPlayer,
        expected_score,
        fit_ratings,
        format_table,
        ladder_path,
        load_ladder,
        locked,
        next_pair,
        save_ladder,
        variance_drop,
    )
    from zeroforge.shared.players.player import Analyst, MoveInfo, Player, SearchAnalysis

_MODULES = {
    "arena": ("ELO_CLIP", "EloEstimate", "MatchResult", "clipped_elo", "elo_difference",
              "evaluate_against", "play_match", "random_openings", "repeats"),
    "builtin": ("HumanPlayer", "MCTSPlayer", "MinimaxPlayer", "RandomPlayer", "UCTPlayer"),
    "checkpoint": ("load_net", "plays_game", "read_checkpoint"),
    "factory": ("PLAYER_SPECS", "make_player"),
    "gtp": ("GtpError", "GtpPlayer", "Resigned", "resolve_command"),
    "ladder": ("ELO_PER_NAT", "Fit", "Ladder", "LadderError", "LadderPlayer", "expected_score",
               "fit_ratings", "format_table", "ladder_path", "load_ladder", "locked",
               "next_pair", "save_ladder", "variance_drop"),
    "player": ("Analyst", "MoveInfo", "Player", "SearchAnalysis"),
}

__all__ = [
    "Analyst", "ELO_CLIP", "ELO_PER_NAT", "EloEstimate", "Fit", "GtpError", "GtpPlayer",
    "HumanPlayer", "Ladder", "LadderError", "LadderPlayer", "MCTSPlayer", "MatchResult",
    "MinimaxPlayer", "MoveInfo", "PLAYER_SPECS", "Player", "RandomPlayer", "Resigned",
    "SearchAnalysis", "UCTPlayer", "clipped_elo", "elo_difference", "evaluate_against",
    "expected_score", "fit_ratings", "format_table", "ladder_path", "load_ladder", "load_net",
    "locked", "make_player", "next_pair", "play_match", "plays_game", "read_checkpoint",
    "random_openings", "repeats", "resolve_command", "save_ladder", "variance_drop"
]


__getattr__ = lazy_getattr(__name__, _MODULES)
