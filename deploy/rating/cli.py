"""The rating subcommands (``zeroforge rate``, ``replay``).

Only argparse at import time: ``zeroforge status`` builds every parser and must start fast.
"""

from __future__ import annotations

import argparse

from zeroforge.deploy.arg_types import nonneg, positive, seconds_between
from zeroforge.deploy.subcommand import Subparsers, add_command


def register_rate(sub: Subparsers) -> None:
    rate = add_command(
        sub, "rate", _rate,
        help="rate a run's snapshots and anchors on one Elo ladder (table + plot)",
        description="The run's Elo ladder (RUN_DIR/ladder.json): every weights snapshot "
                    "(RUN_DIR/snapshots/), every version the in-run evaluator played and "
                    "fixed anchors, fitted by Bradley-Terry (random = 0) with 95% intervals. "
                    "With --play (the default) it first plays --games more games, each batch "
                    "between the pair that informs the ratings most, and saves them.",
    )
    rate.add_argument("run_dir", metavar="RUN_DIR", help="the run's run directory")
    rate.add_argument("--games", type=nonneg, default=40,
                      help="games to play this time, in all (default: 40)")
    rate.add_argument("--per-pair", type=positive, default=10,
                      help="games per chosen pair before the next choice (default: 10)")
    rate.add_argument("--anchors", nargs="+", default=None, metavar="SPEC",
                      help="fixed players (make_player specs; default: random and the run's "
                           "evaluation.anchors, plus GnuGo over GTP for Go where available)")
    rate.add_argument("--anchor", default=None,
                      help="the player held at 0 Elo (default: random)")
    rate.add_argument("--simulations", type=positive, default=None,
                      help="search simulations a move of the snapshots (default: the run's "
                           "evaluation.simulations, else search.num_simulations)")
    rate.add_argument("--plot", default=None, metavar="FILE",
                      help="also draw the ladder to FILE (.png, .svg or .pdf)")
    rate.add_argument("--seed", type=int, default=0, help="seed of the games played")
    rate.add_argument("--play", action=argparse.BooleanOptionalAction, default=True,
                      help="play more games before fitting (--no-play: fit what is recorded)")


def register_replay(sub: Subparsers) -> None:
    replay = add_command(
        sub, "replay", _replay,
        help="show an SGF game move by move in the terminal and check it replays legally",
        description="Replay an SGF file (zeroforge's own records in RUN_DIR/games/, or any "
                    "Go / gomoku SGF): each move with the board, then the result, checked "
                    "against the recorded one. Exit 1 with one line if a move is illegal or "
                    "the result disagrees.",
    )
    replay.add_argument("file", metavar="FILE.sgf", help="the SGF file")
    replay.add_argument("--game", default=None, metavar="SPEC",
                        help="game spec to replay with (default: the file's own, from its "
                             "ZG/GM/SZ/KM properties)")
    replay.add_argument("--delay", type=seconds_between(0.0, 60.0), default=0.0, metavar="S",
                        help="seconds to wait after each move (default: 0)")
    replay.add_argument("--move", type=nonneg, default=None, metavar="N",
                        help="show only the position after move N (0: the start)")


def _rate(args: argparse.Namespace) -> int:
    from zeroforge.deploy.rating.rate import cmd_rate

    return cmd_rate(args)


def _replay(args: argparse.Namespace) -> int:
    from zeroforge.deploy.rating.replay import cmd_replay

    return cmd_replay(args)
