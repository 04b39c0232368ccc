"""Proof of learning 1: tic-tac-toe from random weights within a wall-clock budget.

Trains with ``deploy/configs/tictactoe.yaml`` (the budget includes everything), then checks
the trained agent (search without noise, most-visited move):
- against the perfect minimax player with both colours: it must never lose;
- against a random player over >= 1,000 games: whenever the agent has a winning move, it
  must play one (every such position is counted);
- against every opponent at once (``losing_lines``): no line of replies beats it.

    python benchmarks/learn_tictactoe.py [--minutes 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import numpy as np

from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.local_run import LocalRun
from zeroforge.shared.games import make_game
from zeroforge.shared.players import MCTSPlayer, make_player, play_match
from zeroforge.shared.search import winning_actions


def missed_wins_against_random(game, agent, num_games: int, rng) -> tuple[int, int, object]:
    """Play ``num_games`` (colours alternating) against random; count the positions where
    the agent could win at once and how many of those it did not take."""
    chances = missed = 0
    states = game.init(num_games)
    agent_color = np.arange(num_games) % 2
    opponent = make_player("random", game)
    while not states.terminal.all():
        running = ~states.terminal
        agent_turn = running & (states.to_play == agent_color)
        actions = np.full(num_games, -1, np.int64)
        idx = np.flatnonzero(agent_turn)
        if idx.size:
            sub = states.take(idx)
            chosen = agent.select(game, sub, rng)
            can_win = winning_actions(game, sub) >= 0
            after = game.step(sub, chosen)
            won = after.terminal & (after.outcome != 0)
            chances += int(can_win.sum())
            missed += int((can_win & ~won).sum())
            actions[idx] = chosen
        idx = np.flatnonzero(running & ~agent_turn)
        if idx.size:
            actions[idx] = opponent.select(game, states.take(idx), rng)
        states = game.step(states, actions)
    first = states.outcome
    agent_view = np.where(agent_color == 0, first, -first)
    return chances, missed, agent_view


def losing_lines(game, agent, rng) -> tuple[int, int]:
    """(lines lost, lines played) against every opponent at once: from the empty board,
    with each colour, the agent answers every position it meets and the opponent tries
    every legal reply, to the end of each line. 0 lines lost is perfect play, whatever the
    opponent does (a stronger check than games against minimax, which only plays optimal
    moves and samples among them). Positions of one ply go to the agent as one batch."""
    lost = played = 0
    for agent_color in (0, 1):
        frontier = game.init(1)
        while frontier.batch_size:
            mine = np.flatnonzero(frontier.to_play == agent_color)
            theirs = np.flatnonzero(frontier.to_play != agent_color)
            after = []
            if mine.size:
                sub = frontier.take(mine)
                after.append(game.step(sub, np.asarray(agent.select(game, sub, rng))))
            if theirs.size:
                rows, actions = np.nonzero(game.legal_mask(frontier.take(theirs)))
                after.append(game.step(frontier.take(theirs[rows]), actions))
            states = type(frontier).concat(after)
            ended = states.terminal
            agent_view = np.where(agent_color == 0, states.outcome, -states.outcome)
            lost += int((ended & (agent_view < 0)).sum())
            played += int(ended.sum())
            frontier = states.take(np.flatnonzero(~ended))
    return lost, played


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--random-games", type=int, default=1000)
    parser.add_argument("--minimax-games", type=int, default=200)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores")
    run_dir = tempfile.mkdtemp(prefix="zf-ttt-")
    config = load_train_config("tictactoe", [f"run.minutes={args.minutes}",
                                             f"run.seed={args.seed}", f"run.run_dir={run_dir}"])
    start = time.monotonic()
    run = LocalRun(config)
    run.run()
    trained_s = time.monotonic() - start
    game = make_game("tictactoe")
    agent = MCTSPlayer(game, run.evaluator, config.search)
    rng = np.random.default_rng(args.seed + 7)
    vs_minimax = play_match(game, agent, make_player("minimax", game), args.minimax_games, rng)
    chances, missed, vs_random = missed_wins_against_random(game, agent, args.random_games, rng)
    lost, lines = losing_lines(game, agent, rng)
    print()
    print(f"| check | result |\n|---|---|\n| training wall clock | {trained_s:.0f} s |")
    print(f"| vs minimax, {vs_minimax.num_games} games, both colours | +{vs_minimax.wins} "
          f"={vs_minimax.draws} -{vs_minimax.losses} |")
    print(f"| vs random, {args.random_games} games | +{int((vs_random > 0).sum())} "
          f"={int((vs_random == 0).sum())} -{int((vs_random < 0).sum())} |")
    print(f"| immediate wins available / missed (vs random) | {chances} / {missed} |")
    print(f"| lines lost against every reply, both colours | {lost} of {lines} |")
    ok = vs_minimax.losses == 0 and missed == 0 and lost == 0
    print(f"\nPASS: {ok}")


if __name__ == "__main__":
    main()
