"""The ``zeroforge`` command line.

Every subcommand has ``--help``; a bad argument prints one line and exits with code 2;
a runtime error (bad game spec, illegal move from a file...) prints one line and exits 1.
Each subcommand is added by its register function, listed in ``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from zeroforge import __version__
from zeroforge.deploy import commands
from zeroforge.deploy.arg_types import nonneg, positive, seconds_between
from zeroforge.deploy.engines import cli as engines_cli
from zeroforge.deploy.rating import cli as rating_cli
from zeroforge.deploy.subcommand import Register, Subparsers, add_command


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, not usage + traceback."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _PlayParser(_Parser):
    """``play``'s help lists the players; zeroforge.shared.players.factory (numpy, numba)
    is imported only when that help is shown, so that ``status`` and ``top`` start fast."""

    def format_help(self) -> str:
        from zeroforge.shared.players import PLAYER_SPECS

        self.description = (
            "Play one game in the terminal (type a move, or undo, hint, help, resign, quit) "
            "or, with --web, in the browser. Players (--first, --second): "
            + ", ".join(PLAYER_SPECS) + ".")
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="zeroforge",
        description="Train game-playing AIs by self-play and Monte Carlo tree search.",
    )
    parser.add_argument("--version", action="version", version=f"zeroforge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for register in SUBCOMMANDS:
        register(sub)
    return parser


def register_games(sub: Subparsers) -> None:
    add_command(sub, "games", commands.cmd_games, help="list the games and presets")


def register_play(sub: Subparsers) -> None:
    play = add_command(
        sub, "play", commands.cmd_play,
        help="play a game in the terminal or the browser (people, trained nets, built-in players)",
        description="Play one game.",
    )
    play.__class__ = _PlayParser
    play.add_argument("--game", default="tictactoe",
                      help="game name, preset or spec string (default: tictactoe)")
    play.add_argument("--first", default="human", help="player moving first (default: human)")
    play.add_argument("--second", default="random", help="player moving second (default: random)")
    play.add_argument("--seed", type=int, default=None, help="random seed")
    play.add_argument("--sgf", default=None, help="write the game to this SGF file")
    play.add_argument("--quiet", action="store_true", help="print only the final board and result")
    play.add_argument("--hints", action="store_true",
                      help="at each of your turns show the net's (else a UCT search's) top "
                           "moves with visit share and prior, and its value")
    play.add_argument("--web", action="store_true",
                      help="serve a board in the browser instead (any game, any player; "
                           "--game/--first/--second are the page's defaults)")
    play.add_argument("--host", default="127.0.0.1",
                      help="--web: address to bind (default 127.0.0.1; any other needs a "
                           "token, kept in a 0600 file whose path is printed)")
    play.add_argument("--port", type=nonneg, default=8090,
                      help="--web: port (default 8090; 0 picks a free one)")


def register_train(sub: Subparsers) -> None:
    train = add_command(
        sub, "train", commands.cmd_train,
        help="train an agent by self-play",
        description="Train by self-play. --local runs everything in this process.",
    )
    train.add_argument("--local", action="store_true",
                       help="single-process loop: self-play, learner and evaluation in turn "
                            "(default: Ray actors + Redis, started for you)")
    train.add_argument("--address", default=None,
                       help="join this Ray cluster (default: $RAY_ADDRESS or a new local one)")
    train.add_argument("--redis-url", default=None,
                       help="use this Redis (redis://:PASSWORD@host:port/0; without a "
                            "password each process connects as its role with the file in "
                            "$ZEROFORGE_REDIS_AUTH_DIR, else with $ZEROFORGE_REDIS_PASSWORD); "
                            "default: start the bundled one, with a user a role")
    train.add_argument("--workers", type=int, default=None, help="self-play workers")
    train.add_argument("--run-id", default=None, help="name of the run")
    train.add_argument("--config", default=None,
                       help="YAML/TOML config file, or a preset name from deploy/configs "
                            "(default: tictactoe)")
    train.add_argument("--game", default=None, help="game spec (overrides the config)")
    train.add_argument("--minutes", type=float, default=None, help="stop after this long")
    train.add_argument("--steps", type=int, default=None, help="stop after this many learner steps")
    train.add_argument("--run-dir", default=None, help="directory for checkpoints and logs")
    train.add_argument("--seed", type=int, default=None, help="random seed")
    train.add_argument("--resume", nargs="?", const="yes", default=None,
                       choices=["yes", "auto"],
                       help="continue from RUN_DIR/checkpoint.pt (and its run id); "
                            "`--resume auto`: continue this run if RUN_DIR holds its "
                            "checkpoint, start it fresh if RUN_DIR holds none, refuse "
                            "another run's; safe to repeat (a job's restart command)")
    train.add_argument("--dashboard-host", default=None,
                       help="address of the run's dashboard (default: run.dashboard_host, "
                            "127.0.0.1); any other address requires a token, written to "
                            "RUN_DIR/dashboard.token")
    train.add_argument("--dashboard-port", type=nonneg, default=None,
                       help="port of the run's dashboard (default: run.dashboard_port, 0: "
                            "any free one)")
    train.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="SECTION.KEY=VALUE",
                       help="override any config field, e.g. --set learner.lr=0.01 (repeatable)")


def register_pretrain(sub: Subparsers) -> None:
    pre = add_command(
        sub, "pretrain", commands.cmd_pretrain,
        help="supervised pre-training from SGF game records (Go or gomoku)",
        description="Train the policy (move played) and value (result) from SGF records; "
                    "writes RUN_DIR/checkpoint.pt, which `zeroforge train --resume` continues.",
    )
    pre.add_argument("--sgf", required=True, help="directory searched for *.sgf files")
    pre.add_argument("--config", default=None, help="config file or preset (net, learner)")
    pre.add_argument("--game", default=None, help="game spec of the records, e.g. go9")
    pre.add_argument("--steps", type=positive, default=1000, help="SGD steps")
    pre.add_argument("--holdout", type=float, default=0.1, help="share of games held out")
    pre.add_argument("--limit", type=nonneg, default=0, help="use at most this many games")
    pre.add_argument("--run-dir", default=None, help="where the checkpoint goes")
    pre.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="SECTION.KEY=VALUE", help="override any config field")


def register_curve(sub: Subparsers) -> None:
    curve = add_command(
        sub, "curve", commands.cmd_curve,
        help="draw a run's learning curve (PNG/SVG) from its RUN_DIR/eval.jsonl",
        description="Draw the evaluator's score against each anchor, and the Elo it implies, "
                    "over training, from the evaluations the run recorded (works while the run "
                    "is going too).",
    )
    curve.add_argument("run_dir", metavar="RUN_DIR", help="the run's run directory")
    curve.add_argument("-o", "--out", default=None,
                       help="picture to write, .png, .svg or .pdf (default: RUN_DIR/curve.png)")
    curve.add_argument("--x", dest="x_axis", choices=("minutes", "steps", "version"),
                       default="minutes",
                       help="x axis: wall clock since the run started, learner steps (from "
                            "RUN_DIR/history.jsonl), or weights version (default: minutes)")


def register_top(sub: Subparsers) -> None:
    top = add_command(
        sub, "top", commands.cmd_top,
        help="watch a running job live in the terminal (q or Ctrl-C to quit)",
        description="A live view of a running job, refreshed every second from its run "
                    "server: state, weights, loss, one line per actor with its rate, totals, "
                    "and sparklines of positions/s, games/s and loss. q or Ctrl-C quits; "
                    "when the run ends its final state stays on screen.",
    )
    top.add_argument("--run-dir", default=None, help="the run whose run directory this is")
    top.add_argument("--run-id", default=None, help="which live run, if several are going")
    top.add_argument("--interval", type=seconds_between(0.1, 60), default=1.0,
                     help="seconds between refreshes (default: 1)")


def register_dashboard(sub: Subparsers) -> None:
    dash = add_command(
        sub, "dashboard", commands.cmd_dashboard,
        help="the URL of a run's dashboard (a finished run's: served from its RUN_DIR)",
        description="Print (--open: also open) the dashboard URL of a running run. For a "
                    "finished run (--run-dir of a run whose driver is gone) serve its recorded "
                    "history from RUN_DIR/history.jsonl on a loopback port until Ctrl-C.",
    )
    dash.add_argument("--run-dir", default=None, help="the run whose run directory this is")
    dash.add_argument("--run-id", default=None, help="which live run, if several are going")
    dash.add_argument("--open", action="store_true", help="open the page in a web browser")
    dash.add_argument("--port", type=nonneg, default=0,
                      help="port for a finished run's page (default: any free one)")


def register_status(sub: Subparsers) -> None:
    text = "show a running job: actors, throughput, weights, lag"
    status = add_command(sub, "status", commands.cmd_status, help=text, description=text)
    _which_run_arguments(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--workers", type=nonneg, default=None, metavar="PAGE",
                        help="the self-play workers one by one, page PAGE (from 0) of 100 "
                             "(status itself has a row per host)")


def register_scale(sub: Subparsers) -> None:
    text = "change the number of self-play workers, inference servers or learner replicas"
    scale = add_command(sub, "scale", commands.cmd_scale, help=text, description=text)
    _which_run_arguments(scale)
    scale.add_argument("--workers", type=nonneg, default=None, help="self-play workers")
    scale.add_argument("--inference-servers", type=positive, default=None,
                       help="inference servers")
    scale.add_argument("--learners", type=positive, default=None,
                       help="learner replicas (learner.replicas): the learner group stops "
                       "at a checkpoint and starts again at the new size, a few seconds "
                       "without training")


def register_plan(sub: Subparsers) -> None:
    text = ("what a run of N self-play workers needs (stream shards, learner replicas, "
            "weights traffic, inference servers, its Redis servers' sizing) and where it "
            "saturates first")
    plan = add_command(sub, "plan", commands.cmd_plan, help=text,
                       description=text + " (the capacity model: docs/scaling.md)")
    plan.add_argument("--config", default=None, help="preset name or YAML/TOML file")
    plan.add_argument("--set", dest="overrides", action="append", default=[],
                      metavar="SECTION.KEY=VALUE", help="override a config value (repeatable)")
    plan.add_argument("--workers", type=positive, required=True, help="self-play workers")
    plan.add_argument("--nodes", type=positive, default=None,
                      help="nodes the workers run on (default: 8 workers a node)")
    plan.add_argument("--measure", action="store_true",
                      help="measure a worker's positions/s and a replica's steps/s on this "
                           "machine (a few seconds each) instead of giving them")
    plan.add_argument("--worker-positions-per-s", type=float, default=None,
                      help="positions/s of one self-play worker (without --measure)")
    plan.add_argument("--learner-steps-per-s", type=float, default=None,
                      help="steps/s of one learner replica (without --measure)")
    plan.add_argument("--shard-mb-s", type=float, default=None,
                      help="MB/s one Redis stream shard takes in (default: measured 59)")
    plan.add_argument("--network-gbit", type=float, default=10.0,
                      help="network of the run's Redis host, Gbit/s (default: 10)")
    plan.add_argument("--json", action="store_true",
                      help="machine-readable output (the parts and the Redis sizing)")
    plan.add_argument("--k8s", action="store_true",
                      help="print only the Redis sizing as redis.conf lines for "
                           "k8s/base/redis.conf (needs no throughput figures)")


def register_stop(sub: Subparsers) -> None:
    text = "stop a running job cleanly (final checkpoint)"
    stop = add_command(sub, "stop", commands.cmd_stop, help=text, description=text)
    _which_run_arguments(stop)


def _which_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that pick a distributed run (``status``, ``scale``, ``stop``)."""
    parser.add_argument("--run-dir", default=None,
                        help="the run whose run directory this is (its run.json says where "
                             "its cluster is); the surest way to pick a run")
    parser.add_argument("--run-id", default=None,
                        help="which run, if several are going (looked up among this user's "
                             "live runs, or on --address)")
    parser.add_argument("--address", default=None,
                        help="Ray cluster of the job, host:port of its GCS (default: the only "
                             "live run of this user, else $RAY_ADDRESS or the local cluster)")


SUBCOMMANDS: tuple[Register, ...] = (
    register_games, register_play, register_train, register_pretrain, register_curve,
    register_top, register_dashboard,
    engines_cli.register_gtp, engines_cli.register_pbrain, engines_cli.register_match,
    rating_cli.register_rate, rating_cli.register_replay,
    register_status, register_scale, register_stop, register_plan,
)
"""Every subcommand's register function, in the order ``zeroforge --help`` lists them.
Each one calls ``add_command`` with its name and handler (deploy/subcommand.py); their
modules import only argparse, the handlers import the rest when they run."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (commands.CommandError, ValueError, OSError) as err:
        print(f"zeroforge {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"zeroforge {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
