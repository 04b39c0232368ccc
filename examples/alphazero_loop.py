"""AlphaZero in one file, on zeroforge's own parts: start reading here.

The whole training loop of the distributed system, in one process and one thread, with
no Ray, no Redis and no transport in between:

    self-play (batched MCTS guided by the net)  ->  finished games as (s, pi, z) samples
      -> the learner's replay window  ->  SGD steps  ->  new weights into the evaluator
      -> the next games are played with them; now and then a match against fixed players

Each arrow is one call into the library, and each of those calls is the seam the
distributed run also uses: there ``SelfPlayWorker`` runs inside a Ray actor and sends its
games through a Redis stream, and the ``Learner`` publishes weights to a store that the
workers poll. Run it:

    .venv/bin/python examples/alphazero_loop.py                 # tic-tac-toe, ~1-2 min
    .venv/bin/python examples/alphazero_loop.py --help          # every flag
    .venv/bin/python examples/alphazero_loop.py --game gomoku6 --iterations 200 \
        --net small --simulations 100 --save g6.pt

Tic-tac-toe is solved, so its numbers mean something: the score against ``minimax``
(perfect play) reaches 0.5 when the net never loses, and against ``random`` it nears 1.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import time
from dataclasses import dataclass

import numpy as np
import torch

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import InferenceConfig, NetConfig, TorchEvaluator
from zeroforge.shared.players import MCTSPlayer, evaluate_against
from zeroforge.shared.search import SearchConfig


@dataclass(frozen=True)
class Args:
    """Every knob of the loop; each field is a flag (``games_per_iteration`` is
    ``--games-per-iteration``) and its docstring is the flag's help."""

    game: str = "tictactoe"
    """Game spec for ``make_game``: a preset (tictactoe, gomoku6, go9...) or
    ``name:key=value,...`` (``zeroforge games`` lists them)."""
    net: str = "tiny"
    """Network preset (``NetConfig.preset``): tiny, small, resnet6x64, ..."""
    iterations: int = 40
    """Rounds of play -> train -> publish."""
    games_per_iteration: int = 64
    """Self-play games finished per iteration (at least; a round ends on a whole move)."""
    games_in_parallel: int = 64
    """B: games played in lock-step, so one net call evaluates a leaf of each of them."""
    simulations: int = 64
    """MCTS simulations per move."""
    c_puct: float = 1.5
    """PUCT exploration constant."""
    temperature_moves: int = 4
    """Plies of a game whose move is sampled from the visit counts (the rest: most
    visited); with the root's Dirichlet noise this is all the exploration self-play has."""
    batch_size: int = 128
    """Positions per SGD step."""
    lr: float = 0.01
    """AdamW learning rate."""
    replay_capacity: int = 20_000
    """Positions the replay window keeps (the newest)."""
    min_replay: int = 500
    """No training until the window holds this many positions."""
    samples_per_insert: float = 8.0
    """Positions trained per position played: the cap that keeps a small window from being
    over-fitted (0: no cap, every iteration trains ``max_steps_per_iteration`` steps)."""
    max_steps_per_iteration: int = 200
    """Most SGD steps per iteration (the samples-per-insert cap usually binds first)."""
    eval_every: int = 10
    """Play the strength check every this many iterations (and after the last; 0: never)."""
    eval_games: int = 40
    """Games per opponent in a strength check (colours alternate)."""
    opponents: str = ""
    """Comma-separated player specs to measure against (random, uct:N, minimax...);
    empty: random and minimax for tic-tac-toe, random and uct:200 otherwise."""
    device: str = "cpu"
    """Where the learner trains (cpu, cuda, auto); self-play always runs on the CPU."""
    threads: int = 1
    """torch threads; one is fastest for a tiny net on a small machine."""
    seed: int = 0
    """Seed of the weights, the self-play searches and the strength checks."""
    save: str = ""
    """Write the learner's checkpoint here at the end (then e.g.
    ``zeroforge play --game tictactoe --first human --second net:PATH``)."""


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring (the string under it), read from the source."""
    tree = ast.parse(inspect.getsource(cls)).body[0]
    assert isinstance(tree, ast.ClassDef)
    return {a.target.id: " ".join(b.value.value.split())
            for a, b in zip(tree.body, tree.body[1:], strict=False)
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
            and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
            and isinstance(b.value.value, str)}


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    docs = field_docs(Args)
    for f in dataclasses.fields(Args):
        # ``type(default)``: the annotations are strings under ``from __future__``.
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default),
                            default=f.default, help=f"{docs.get(f.name, '')} "
                            f"(default: {f.default!r})")
    return Args(**vars(parser.parse_args(argv)))


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    start = time.monotonic()

    # --- the parts ------------------------------------------------------------------------
    # A Game is batched: every call takes and returns B positions at once (numba kernels).
    game = make_game(args.game)
    net_config = NetConfig.preset(args.net)

    # The learner owns the one trainable copy of the net, the optimizer, the replay window
    # (with the game's symmetries as augmentation) and the step counters. It never sees
    # where games come from or where weights go: that is this loop's (or a service's) job.
    learner = Learner(
        LearnerConfig(batch_size=args.batch_size, optimizer="adamw", lr=args.lr,
                      replay_capacity=args.replay_capacity, min_replay=args.min_replay,
                      samples_per_insert=args.samples_per_insert,
                      train_steps_per_round=args.max_steps_per_iteration,
                      device=args.device, seed=args.seed),
        game.spec.spec_string, net_config)

    # Self-play searches through an Evaluator (obs, legal -> logits, value). TorchEvaluator
    # keeps its own inference copy of the net (batch norm folded in, eval mode): games are
    # played with the last *published* weights while the learner's copy moves on, as a
    # worker's copy does in the distributed run. It starts as the learner's random
    # initialisation, weights version 0.
    evaluator = TorchEvaluator(learner.net, config=InferenceConfig(device="cpu"))

    # PUCT with root Dirichlet noise and early-move temperature: the self-play settings.
    # (The search knobs not set here, e.g. Gumbel search or tree reuse, keep the defaults.)
    search = SearchConfig(num_simulations=args.simulations, c_puct=args.c_puct,
                          temperature_moves=args.temperature_moves)

    # B games in lock-step: each move is one batched search over all of them, and a game
    # that ends is replaced at once by a new one in its slot. record_every=0: no SGF files.
    worker = SelfPlayWorker(game, evaluator, search,
                            SelfPlayConfig(games_in_parallel=args.games_in_parallel,
                                           record_every=0),
                            seed=args.seed)

    # The agent of the strength check: the same evaluator (so always the newest weights)
    # with the noise off and the most visited move played, except on the first ply, which
    # is sampled from the visits so that a deterministic opponent does not meet one game
    # over and over. (More sampled plies would hand a perfect opponent some lost games.)
    agent = MCTSPlayer(game, evaluator, search, name="agent", opening_moves=1)
    opponents = [s for s in args.opponents.split(",") if s] or (
        ["random", "minimax"] if game.spec.name == "tictactoe" else ["random", "uct:200"])
    eval_rng = np.random.default_rng([args.seed, 1])

    def strength() -> str:
        """Matches of the agent against each opponent; score: win 1, draw 1/2, loss 0."""
        results = evaluate_against(game, agent, opponents, args.eval_games, eval_rng)
        return "  score " + " ".join(f"vs {spec} {r.score:.2f} (+{r.wins} ={r.draws} "
                                     f"-{r.losses})" for spec, r in results.items())

    print(f"{game.spec.spec_string}: net {args.net}, {args.simulations} simulations, "
          f"{args.games_in_parallel} games in parallel, opponents {', '.join(opponents)}",
          flush=True)
    if args.eval_every:
        # The untrained net's strength, to measure the learning against: search over the
        # rules with a random prior already beats a random player.
        print(f"iter   0  weights v0{strength()}", flush=True)

    for iteration in range(1, args.iterations + 1):
        # --- 1. self-play: (s, pi, z) ---------------------------------------------------
        # Each finished game is a GameSamples: per position the observation s (from the
        # mover's view), the search's visit distribution pi, and the mover; z is the final
        # outcome seen from each mover (``GameSamples.value_targets``). Games still running
        # when the round ends go on in the next round with newer weights, like games in the
        # distributed run that straddle a weight update.
        games = worker.play_games(args.games_per_iteration)

        # --- 2. learn: replay window + SGD ----------------------------------------------
        # ``train_available`` steps only while the samples-per-insert budget lasts (and not
        # before ``min_replay`` positions), so the loop cannot overfit a tiny window by
        # training faster than self-play feeds it.
        learner.add(games)
        losses = learner.train_available(args.max_steps_per_iteration)

        # --- 3. publish: the next games use the new weights --------------------------------
        # In the distributed run this state dict goes through the weight store (Redis) to
        # every worker and inference server; here it is loaded straight into the evaluator.
        if losses:
            version = learner.publish()  # a new version number for the current weights
            evaluator.load_state_dict(learner.weights(), version)

        # --- 4. report, and now and then a strength check ---------------------------------
        line = (f"iter {iteration:3d}  games {worker.stats.games:5d}  "
                f"positions {worker.stats.positions:6d}  steps {learner.steps:5d}  ")
        if losses:
            mean = {k: sum(m[k] for m in losses) / len(losses) for k in losses[0]}
            line += (f"loss {mean['loss']:.3f} (policy {mean['policy_loss']:.3f} "
                     f"value {mean['value_loss']:.3f})  ")
        else:
            line += f"loss - (replay {len(learner.replay)} < {args.min_replay})  "
        line += f"weights v{evaluator.weights_version}"
        last = iteration == args.iterations
        if args.eval_every and (iteration % args.eval_every == 0 or last):
            line += strength()
        print(f"{line}  {time.monotonic() - start:.1f}s", flush=True)

    if args.save:
        # The learner's checkpoint (weights, optimizer, replay window, counters): the file
        # `zeroforge train` keeps as RUN_DIR/checkpoint.pt, which a net:PATH player loads.
        print(f"checkpoint: {learner.save(args.save)}")
    print(f"done: {learner.steps} SGD steps on {learner.games_seen} games "
          f"in {time.monotonic() - start:.1f}s")


if __name__ == "__main__":
    main(parse_args())
