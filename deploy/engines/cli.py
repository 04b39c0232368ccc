"""The engine subcommands (``zeroforge gtp``, ``pbrain``, ``match``).

Only argparse at import time: ``zeroforge status`` builds every parser and must start fast.
"""

from __future__ import annotations

import argparse

from zeroforge.deploy.arg_types import positive
from zeroforge.deploy.subcommand import Subparsers, add_command


def register_gtp(sub: Subparsers) -> None:
    gtp = add_command(
        sub, "gtp", _gtp,
        help="a trained Go net as a GTP engine on stdin/stdout (Sabaki, GoGui, GnuGo...)",
        description="Speak GTP version 2 on stdin/stdout with the net of a learner "
                    "checkpoint (its game, board size and rules are read from it). Moves "
                    "search --simulations each, or as many as fit the time GTP's "
                    "time_settings/time_left leave. See docs/engines.md.",
    )
    _net_arguments(gtp, "Go")
    gtp.add_argument("--resign-below", type=float, default=-0.95, metavar="V",
                     help="resign when the search's root value falls below V "
                          "(default: -0.95; -1 never resigns)")


def register_pbrain(sub: Subparsers) -> None:
    brain = add_command(
        sub, "pbrain", _pbrain,
        help="a trained gomoku net as a Gomocup (piskvork) brain on stdin/stdout",
        description="Speak the Gomocup brain protocol (START, BEGIN, TURN, BOARD, INFO, "
                    "TAKEBACK, ABOUT, END...) on stdin/stdout with the net of a learner "
                    "checkpoint. Time limits from INFO set each move's search. "
                    "See docs/engines.md.",
    )
    _net_arguments(brain, "gomoku")


def register_match(sub: Subparsers) -> None:
    match = add_command(
        sub, "match", _match,
        help="play games between two players (nets, baselines, GTP engines such as GnuGo)",
        description="Play --games games, --black against --white (any player spec, e.g. "
                    "net:PATH[:SIMS], uct:N, random, gtp:\"gnugo --mode gtp --level 1\"), "
                    "print each result and a score summary, optionally save SGF. Go games "
                    "ended by two passes are also scored by a GTP engine's final_score "
                    "(--referee, else a GTP player of the game), and the runner says "
                    "whether it agrees with zeroforge's area score.",
    )
    match.add_argument("--game", default="go9", help="game spec (default: go9)")
    match.add_argument("--black", required=True, metavar="SPEC", help="player A, Black first")
    match.add_argument("--white", required=True, metavar="SPEC", help="player B, White first")
    match.add_argument("--games", type=positive, default=1, help="games to play (default: 1)")
    match.add_argument("--alternate", action="store_true",
                       help="swap colours every other game")
    match.add_argument("--sgf-dir", default=None, metavar="DIR",
                       help="write each game to DIR/game-NNN.sgf")
    match.add_argument("--referee", default=None, metavar="gtp:COMMAND",
                       help="a GTP engine that scores Go games ended by two passes with its "
                            "final_score (e.g. gtp:\"gnugo --mode gtp --chinese-rules\")")
    match.add_argument("--simulations", type=positive, default=None,
                       help="search simulations a move of net: players without their own")
    match.add_argument("--seed", type=int, default=0, help="seed of the players' choices")


def _net_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--checkpoint", required=True, metavar="PATH",
                        help=f"a learner checkpoint of a {what} net (it names its game "
                             "and net config)")
    parser.add_argument("--simulations", type=positive, default=200,
                        help="simulations a move without time limits (default: 200)")
    parser.add_argument("--max-simulations", type=positive, default=20000,
                        help="most simulations a move under a time budget (default: 20000)")
    parser.add_argument("--game", default=None, metavar="SPEC",
                        help="game spec to play (default: the checkpoint's own); it must "
                             "fit the net, e.g. another komi or rule")
    parser.add_argument("--device", default="cpu",
                        help="where the net runs: cpu (default), cuda, auto")
    parser.add_argument("--verbose", action="store_true",
                        help="log each move's value, simulations and time on stderr")
    # The default is agent.DEFAULT_LEAF_BATCH, written out: the agent module imports numpy.
    parser.add_argument("--leaf-batch", type=positive, default=8, metavar="L",
                        help="leaves the search sends the net per call, kept apart by "
                             "virtual loss (default: 8; 1: one leaf per call)")


def _gtp(args: argparse.Namespace) -> int:
    from zeroforge.deploy.engines.gtp import run

    return run(args.checkpoint, args.simulations, args.game, args.resign_below,
               args.max_simulations, args.device, args.verbose, leaf_batch=args.leaf_batch)


def _pbrain(args: argparse.Namespace) -> int:
    from zeroforge.deploy.engines.pbrain import run

    return run(args.checkpoint, args.simulations, args.game, args.max_simulations,
               args.device, args.verbose, leaf_batch=args.leaf_batch)


def _match(args: argparse.Namespace) -> int:
    from zeroforge.deploy.engines.match import run_match

    run_match(args.game, args.black, args.white, args.games, args.alternate, args.sgf_dir,
              args.referee, args.simulations, args.seed)
    return 0

