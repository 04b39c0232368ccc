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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (commands.CommandError, ValueError) as err:
        print(f"zeroforge {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"zeroforge {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
