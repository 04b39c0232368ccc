"""The ``zeroforge`` command line.

Every subcommand has ``--help``; a bad argument prints one line and exits with code 2;
a runtime error (bad game spec, illegal move from a file...) prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from deploy import commands

__version__ = "0.1.0"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, not usage + traceback."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="zeroforge",
        description="Train game-playing AIs by self-play and Monte Carlo tree search.",
    )
    parser.add_argument("--version", action="version", version=f"zeroforge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    games = sub.add_parser("games", help="list the games and presets")
    games.set_defaults(func=commands.cmd_games)

    play = sub.add_parser(
        "play",
        help="play one game in the terminal (people or built-in players)",
        description="Play one game. Players: human, random, uct[:PLAYOUTS].",
    )
    play.add_argument("--game", default="tictactoe",
                      help="game name, preset or spec string (default: tictactoe)")
    play.add_argument("--first", default="human", help="player moving first (default: human)")
    play.add_argument("--second", default="random", help="player moving second (default: random)")
    play.add_argument("--seed", type=int, default=None, help="random seed")
    play.add_argument("--sgf", default=None, help="write the game to this SGF file")
    play.add_argument("--quiet", action="store_true", help="print only the final board and result")
    play.set_defaults(func=commands.cmd_play)

    train = sub.add_parser(
        "train",
        help="train an agent by self-play",
        description="Train by self-play. --local runs everything in this process.",
    )
    train.add_argument("--local", action="store_true",
                       help="single-process loop: self-play, learner and evaluation in turn")
    train.add_argument("--config", default=None,
                       help="YAML/TOML config file, or a preset name from deploy/configs")
    train.add_argument("--game", default=None, help="game spec (overrides the config)")
    train.add_argument("--minutes", type=float, default=None, help="stop after this long")
    train.add_argument("--steps", type=int, default=None, help="stop after this many learner steps")
    train.add_argument("--run-dir", default=None, help="directory for checkpoints and logs")
    train.add_argument("--seed", type=int, default=None, help="random seed")
    train.add_argument("--resume", action="store_true",
                       help="continue from RUN_DIR/checkpoint.pt")
    train.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="SECTION.KEY=VALUE",
                       help="override any config field, e.g. --set learner.lr=0.01 (repeatable)")
    train.set_defaults(func=commands.cmd_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (commands.CommandError, ValueError, OSError) as err:
        print(f"zeroforge {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"zeroforge {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
