"""Implementations of the CLI subcommands (parsing lives in cli.py)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from deploy import preflight
from shared.games import GAMES, PRESETS, make_game

if TYPE_CHECKING:
    from shared.games.session import GameSession


class CommandError(Exception):
    """A failure the CLI reports in one line with exit code 1."""


def cmd_games(args: argparse.Namespace) -> int:
    print("games:   " + ", ".join(sorted(GAMES)))
    print("presets:")
    for short, spec in PRESETS.items():
        print(f"  {short:10s} {spec}")
    print('spec strings: NAME[:key=value,...], e.g. "go:size=13,komi=6.5,ko=simple"')
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    import numpy as np

    from shared.games.session import GameSession
    from shared.players import make_player

    game = make_game(args.game)
    players = [make_player(args.first, game), make_player(args.second, game)]
    rng = np.random.default_rng(args.seed)
    session = GameSession(game)
    labels = ("first", "second")
    while not session.over:
        mover = session.to_play
        player = players[mover]
        if not args.quiet or player.name == "human":
            print(session.render())
            if player.name == "human":
                print(f"your move ({labels[mover]} player), e.g. "
                      f"{game.format_action(session.legal_actions()[0])}:")
        action = int(player.select(game, session.state, rng)[0])
        session.play(action)
        if not args.quiet:
            print(f"{labels[mover]} ({player.name}) plays {game.format_action(action)}")
    print(session.render())
    result = {1: "first player wins", -1: "second player wins", 0: "draw"}[session.outcome]
    print(f"result: {result} after {len(session.moves)} moves")
    if args.sgf:
        _write_sgf(session, args)
    return 0


def keep_earlier_checkpoint(run_dir: Path) -> Path | None:
    """A fresh run (no ``--resume``) in a folder that holds an earlier run's checkpoint
    would overwrite it at its first save: move it aside (timestamped) and say where."""
    from learner.learner import CHECKPOINT_NAME

    earlier = run_dir / CHECKPOINT_NAME
    if not earlier.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(earlier.stat().st_mtime))
    kept = earlier.with_name(f"checkpoint-{stamp}.pt")
    earlier.rename(kept)
    print(f"{earlier} is an earlier run's checkpoint (no --resume): kept as {kept}")
    return kept


def cmd_train(args: argparse.Namespace) -> int:
    from deploy.config import load_train_config

    overrides = list(args.overrides)
    for flag, key in (("game", "game"), ("minutes", "run.minutes"), ("steps",
                      "run.max_learner_steps"), ("run_dir", "run.run_dir"), ("seed", "run.seed"),
                      ("workers", "selfplay.workers"), ("run_id", "run.run_id")):
        value = getattr(args, flag, None)
        if value is not None:
            overrides.append(f"{key}={value}")
    # with no config, the preset that shows learning within minutes on a laptop
    config = load_train_config(args.config or "tictactoe", overrides)
    # Everything that can be checked is checked before anything is started or moved: a
    # run that fails here leaves the run directory (and an earlier checkpoint) as it was.
    preflight.check_train(config, local=args.local, resume=args.resume,
                          address=args.address, redis_url=args.redis_url)
    if not args.resume:
        keep_earlier_checkpoint(Path(config.run.run_dir))
    with sigterm_as_interrupt():
        if args.local:
            from deploy.local_run import LocalRun

            LocalRun(config, resume=args.resume).run()
            return 0
        from deploy import distributed

        status = distributed.train(config, address=args.address, redis_url=args.redis_url,
                                   resume=args.resume)
    if status.error:
        raise CommandError(status.error)
    return 0


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler ending the job) is handled like Ctrl-C: the first
    one raises KeyboardInterrupt in the main thread (drain, final checkpoint, report);
    later ones are ignored so that the clean stop can finish. ``install_sigterm`` puts the
    handler back after a library (``ray.init``) replaced it."""
    previous = signal.getsignal(signal.SIGTERM)
    install_sigterm()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def install_sigterm() -> None:
    """Make SIGTERM raise KeyboardInterrupt once (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    fired = []

    def handler(signum: int, frame: object) -> None:
        if not fired:
            fired.append(signum)
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def cmd_pretrain(args: argparse.Namespace) -> int:
    from deploy.config import load_train_config
    from learner.pretrain import pretrain

    overrides = list(args.overrides)
    if args.game:
        overrides.append(f"game={args.game}")
    if args.run_dir:
        overrides.append(f"run.run_dir={args.run_dir}")
    if not 0 <= args.holdout < 1:
        raise CommandError(f"--holdout must be in [0, 1), got {args.holdout}")
    config = load_train_config(args.config, overrides)
    report = pretrain(config, args.sgf, args.steps, args.holdout, args.limit)
    print(f"pretrain: {report.games_used} games, {report.positions} positions, "
          f"held-out move accuracy {report.holdout_accuracy:.1%} on "
          f"{report.holdout_positions} positions, {report.games_skipped} games skipped, "
          f"{report.seconds:.0f}s")
    return 0


def _run(args: argparse.Namespace):
    from deploy import ray_runtime

    try:
        return ray_runtime.find_run(args.address, args.run_id, args.run_dir)
    except ray_runtime.RunNotFound as err:
        raise CommandError(str(err)) from None


def cmd_status(args: argparse.Namespace) -> int:
    st = _run(args).status()
    print(st.json_text() if args.json else st.text())
    return 0


def cmd_scale(args: argparse.Namespace) -> int:
    if args.workers is None and args.inference_servers is None:
        raise CommandError("nothing to change: give --workers and/or --inference-servers")
    run = _run(args)
    desired = run.scale(args.workers, args.inference_servers)
    print(f"run {run.run_id}: desired " + ", ".join(f"{k} {v}" for k, v in desired.items()))
    if run.warning:
        print(f"zeroforge scale: warning: {run.warning}", file=sys.stderr)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    run = _run(args)
    st = run.stop()
    print(f"run {run.run_id}: {st.state} after {st.games:.0f} games, "
          f"{st.learner_steps:.0f} learner steps, weights v{st.weights_version:.0f}")
    if st.error:
        raise CommandError(st.error)
    return 0


def cmd_curve(args: argparse.Namespace) -> int:
    from deploy import curve

    drawn = curve.read_eval_log(args.run_dir)
    out = curve.write(drawn, args.out or Path(args.run_dir) / "curve.png", args.x_axis)
    print(f"wrote {out}: {curve.summary(drawn)}")
    return 0


def _write_sgf(session: GameSession, args: argparse.Namespace) -> None:
    from shared.formats.sgf import record_from_session, write_sgf

    record = record_from_session(session, black=args.first, white=args.second)
    with open(args.sgf, "w", encoding="utf-8") as f:
        f.write(write_sgf(record))
    print(f"wrote {args.sgf}")
