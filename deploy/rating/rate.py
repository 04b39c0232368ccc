"""``zeroforge rate RUN_DIR``: play the most informative pairs, refit the ladder, show it.

The players are the run's weight snapshots (``RUN_DIR/snapshots/``, played with the run's
net and search config), the fixed anchors, and whatever the in-run evaluator already put on
the ladder (``v<version>``: rated from its games, not played again: their weights are gone).
The ladder itself (fit, choice of pairs, file) is ``zeroforge.shared.players.ladder``.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from zeroforge.shared.players import (
    Fit,
    Ladder,
    LadderPlayer,
    format_table,
    ladder_path,
    load_ladder,
    locked,
    save_ladder,
)
from zeroforge.shared.run_files import CONFIG_NAME, snapshot_files

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from zeroforge.deploy.config import TrainConfig
    from zeroforge.shared.games import Game
    from zeroforge.shared.players import Player

FORMATS = (".png", ".svg", ".pdf")


class RateError(ValueError):
    """A run dir that cannot be rated; the message is one line."""


def run_config(run_dir: Path) -> TrainConfig:
    """The run's config from ``RUN_DIR/config.yaml``; RateError (one line) if unusable."""
    from zeroforge.deploy.config import load_train_config
    from zeroforge.shared.config import ConfigError

    if not run_dir.exists():
        raise RateError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise RateError(f"{run_dir}: not a directory (give the run's run dir)")
    path = run_dir / CONFIG_NAME
    if not path.is_file():
        raise RateError(f"{run_dir}: no {CONFIG_NAME} (every run writes one at its start; "
                        "is this a run dir?)")
    try:
        return load_train_config(str(path), warn=False)
    except ConfigError as err:
        raise RateError(str(err)) from None


def default_anchors(config: TrainConfig, game: Game) -> list[str]:
    """``random``, the run's evaluation anchors, and for Go GnuGo level 1 over GTP where
    both GnuGo and the ``gtp:`` player spec exist."""
    from zeroforge.shared.players import PLAYER_SPECS

    anchors = ["random", *config.evaluation.anchors]
    gnugo = shutil.which("gnugo") or ("/usr/games/gnugo" if Path("/usr/games/gnugo").exists()
                                      else None)
    if game.spec.name == "go" and gnugo and any(s.startswith("gtp:") for s in PLAYER_SPECS):
        anchors.append(f"gtp:{gnugo} --mode gtp --level 1")
    return list(dict.fromkeys(anchors))


def add_players(ladder: Ladder, run_dir: Path, anchors: list[str]) -> None:
    """Every snapshot of the run and every anchor onto ``ladder`` (existing ones kept)."""
    for seconds, path in snapshot_files(run_dir):
        ladder.add_player(path.name.split(".")[0], "snapshot",
                          spec=f"net:{path.relative_to(run_dir)}", order=seconds)
    for spec in anchors:
        ladder.add_player(spec, "anchor", spec=spec)


class _Players:
    """The ladder's players built once each (``make_player``), nets with the run's config."""

    def __init__(self, run_dir: Path, config: TrainConfig, game: Game,
                 simulations: int | None) -> None:
        self.run_dir, self.config, self.game = run_dir, config, game
        search = config.search
        sims = simulations or config.evaluation.simulations
        if sims:
            search = dataclasses.replace(search, num_simulations=sims)
        self.search = search
        self._built: dict[str, Player] = {}

    def close(self) -> None:
        """Stop the players that run something (a GTP engine's process)."""
        for player in self._built.values():
            close = getattr(player, "close", None)
            if callable(close):
                close()

    def get(self, player: LadderPlayer) -> Player:
        from zeroforge.shared.players import make_player

        if player.name not in self._built:
            spec = player.spec or ""
            if spec.startswith("net:") and not Path(spec[4:]).is_absolute():
                spec = f"net:{self.run_dir / spec[4:]}"
            self._built[player.name] = make_player(
                spec, self.game, search=self.search, net_config=self.config.net,
                name=player.name)
        return self._built[player.name]


def cmd_rate(args: argparse.Namespace) -> int:
    from zeroforge.shared.games import make_game

    run_dir = Path(args.run_dir)
    config = run_config(run_dir)
    game = make_game(config.game)
    if args.plot and Path(args.plot).suffix.lower() not in FORMATS:
        raise RateError(f"--plot {args.plot}: must end in {', '.join(FORMATS)}")
    anchors = list(dict.fromkeys(args.anchors)) if args.anchors else \
        default_anchors(config, game)
    from zeroforge.shared.players import make_player

    for spec in anchors:  # a bad spec fails now, in one line, not after games were played
        if not spec.startswith(("gtp:", "net:")):
            make_player(spec, game)
    with locked(run_dir):
        ladder = load_ladder(run_dir)
        add_players(ladder, run_dir, anchors)
        if args.anchor:
            if args.anchor not in ladder.players:
                raise RateError(f"--anchor {args.anchor}: not a player of this ladder "
                                f"(players: {', '.join(ladder.players)})")
            ladder.anchor = args.anchor
        elif not any(p.kind == "anchor" and p.name == ladder.anchor
                     for p in ladder.players.values()):
            ladder.anchor = anchors[0]
        if not any(p.kind != "anchor" for p in ladder.players.values()):
            raise RateError(f"{run_dir}: nothing to rate: no weight snapshots in "
                            "snapshots/ (learner.snapshot_every_s) and no evaluated versions")
        ladder.refit()
        save_ladder(run_dir, ladder)

    players = _Players(run_dir, config, game, args.simulations)
    try:
        ladder = _play(args, run_dir, anchors, ladder, game, players)
    finally:
        players.close()
    fit = ladder.fit or ladder.refit()
    print(format_table(fit, ladder))
    print(f"(Bradley-Terry fit, {fit.anchor} = 0; ±: 95% interval from the Fisher "
          f"information of the effective games (eff.: replayed lines weigh less); "
          f"{ladder_path(run_dir)})")
    if args.plot:
        out = Path(args.plot)
        out.parent.mkdir(parents=True, exist_ok=True)
        figure(fit, ladder).savefig(out)
        print(f"wrote {out}")
    return 0


def _play(args: argparse.Namespace, run_dir: Path, anchors: list[str],
          ladder: Ladder, game: Game, players: _Players) -> Ladder:
    """``args.games`` games in batches of ``args.per_pair``, each batch between the most
    informative pair, saved after each; returns the ladder as last saved."""
    from zeroforge.shared.players import play_match

    rng = np.random.default_rng(args.seed)
    left = args.games if args.play else 0
    while left > 0:
        pair = ladder.next_pair(min(args.per_pair, left))
        if pair is None:
            print("nothing left to play: fewer than two players can be played")
            break
        n = min(args.per_pair, left)
        a, b = (ladder.players[name] for name in pair)
        match = play_match(game, players.get(a), players.get(b), n, rng)
        left -= n
        with locked(run_dir):
            # Re-read: the in-run evaluator may have added games meanwhile.
            ladder = _reload(run_dir, ladder)
            add_players(ladder, run_dir, anchors)
            ladder.add_games(a.name, b.name, match.wins, match.draws, match.losses,
                             match.effective_games)
            fit = ladder.refit()
            save_ladder(run_dir, ladder)
        print(f"{a.name} vs {b.name}: +{match.wins} ={match.draws} -{match.losses}  "
              f"(now {fit.elo.get(a.name, float('nan')):+.0f} / "
              f"{fit.elo.get(b.name, float('nan')):+.0f})", flush=True)
    return ladder


def _reload(run_dir: Path, current: Ladder) -> Ladder:
    """The ladder on disk (another writer may have changed it); ours if it vanished."""
    on_disk = load_ladder(run_dir)
    if not on_disk.players:
        return current
    on_disk.anchor = current.anchor
    return on_disk


def figure(fit: Fit, ladder: Ladder, confidence: float = 0.95) -> Figure:
    """The ladder as a chart: one row per rated player, best at the top, its rating with
    the interval as an error bar (anchors in another colour). Each bar's gid is the
    player's name, so tests read the data, not the pixels."""
    from matplotlib.figure import Figure

    rated = sorted((n for n in fit.names if fit.rated(n)), key=lambda n: fit.elo[n])
    fig = Figure(figsize=(8, max(2.5, 0.35 * len(rated) + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    for y, name in enumerate(rated):
        low, high = fit.interval(name, confidence)
        anchor = ladder.players[name].kind == "anchor" if name in ladder.players else False
        bars = ax.errorbar([fit.elo[name]], [y], xerr=[[fit.elo[name] - low],
                                                       [high - fit.elo[name]]],
                           fmt="s" if anchor else "o", capsize=3,
                           color="tab:orange" if anchor else "tab:blue")
        bars.lines[0].set_gid(name)
    ax.set_yticks(range(len(rated)), rated)
    ax.axvline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel(f"Elo ({fit.anchor} = 0; bars: {confidence:.0%} interval)")
    ax.set_title("Run ladder (Bradley-Terry)")
    ax.grid(axis="x", alpha=0.3)
    return fig
