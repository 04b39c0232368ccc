"""Several board sizes in one run (``selfplay.board_sizes``): which games, in what shares.

A run names one game (``game: go:size=9,...``): the evaluation size, which evaluation,
snapshots, checkpoints, ``play`` and ``gtp`` use. With ``selfplay.board_sizes`` its
self-play also plays the same game at other sizes (Go only: the spec string with another
``size=``), and its learner trains one fully convolutional net (``net.heads: pooled``) on
all of them. ``SizeMix`` is that plan in plain data: the spec string of every size and
its share of the self-play positions, hence of the replay window and of the training
batches (``learner.replay_sizes``). Pure Python: the config is checked without numpy,
torch or the rules' kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zeroforge.shared.games import Game, make_game, parse_spec

SIZED_GAMES = ("go",)
"""Games whose spec strings take another ``size=`` for ``selfplay.board_sizes``: Go's
rules, planes and symmetries are the same at every size, and every point is an action
(the pooled policy head's one logit per point, plus the pass)."""


@dataclass(frozen=True)
class SizeMix:
    """The board sizes a run plays, with the spec string and share of each."""

    eval_spec: str
    """The run's own game (``TrainConfig.game``, in full): the evaluation size."""
    sizes: tuple[int, ...]
    """Board sizes played, in the order the config gives them (H = W = size)."""
    specs: tuple[str, ...]
    """Spec string of each size's game (the run's game with ``size=`` replaced)."""
    shares: tuple[float, ...]
    """Each size's share of the self-play positions (the weights, normalised to sum 1)."""

    def spec_for(self, size: int) -> str:
        """The spec string of ``size``'s game (KeyError for a size not played)."""
        return self.specs[self.sizes.index(size)]

    def size_of(self, spec: str) -> int | None:
        """The size whose game ``spec`` is, or None if it is none of this run's."""
        return self.sizes[self.specs.index(spec)] if spec in self.specs else None

    def describe(self) -> str:
        """``7x7, 9x9`` (for messages)."""
        return ", ".join(f"{s}x{s}" for s in self.sizes)


def board_size_of(spec: str) -> int | None:
    """The ``size`` of a sized game's spec string (Go's default 9 when it has none); None
    for a game that has no board size to vary."""
    name, _ = parse_spec(spec)
    if name not in SIZED_GAMES:
        return None
    return int(make_game(spec).spec.board_shape[0])


def resized(spec: str, size: int) -> str:
    """The full spec string of ``spec``'s game at board ``size`` (ValueError, one line,
    for a size the game does not have)."""
    name, options = parse_spec(spec)
    options["size"] = int(size)
    return make_game(name, **options).spec.spec_string


def differs_only_in_size(spec: str, other: str) -> bool:
    """Whether two full spec strings name one sized game at two board sizes."""
    name, options = parse_spec(spec)
    other_name, other_options = parse_spec(other)
    if name != other_name or name not in SIZED_GAMES:
        return False
    options.pop("size", None)
    other_options.pop("size", None)
    return options == other_options and spec != other


def net_plays(game: Game, net_game: Game, any_size: bool = False) -> bool:
    """Whether a net made for ``net_game`` plays ``game``: the same game with the same
    inputs and outputs (so another komi or rule variant fits: Go with komi 6.5, gomoku
    with exact-five), or, for a fully convolutional net (``any_size``: ``heads: pooled``),
    the same sized game (Go) at another board size with the same input planes. The one
    rule for ``net:`` players, ``play``, GTP and Gomocup."""
    if game.spec.name != net_game.spec.name:
        return False
    if any_size and game.spec.name in SIZED_GAMES:
        return game.spec.obs_shape[0] == net_game.spec.obs_shape[0]
    return (game.spec.obs_shape == net_game.spec.obs_shape
            and game.spec.num_actions == net_game.spec.num_actions)


def size_mix(game: str, sizes: Sequence[int], weights: Sequence[float] = ()
             ) -> SizeMix | None:
    """The run's ``SizeMix``, or None when it plays its own size only (``sizes`` empty, or
    just that size: the run is then exactly a run without the field). ValueError, one
    line, for a game without board sizes or a size its rules do not allow."""
    if not sizes:
        return None
    own = board_size_of(game)
    if own is None:
        raise ValueError(f"selfplay.board_sizes needs a game with board sizes "
                         f"({', '.join(SIZED_GAMES)}: go:size=N,...), not {game!r}")
    if tuple(sizes) == (own,):
        return None
    eval_spec = make_game(game).spec.spec_string
    weights = tuple(weights) or (1.0,) * len(sizes)
    total = float(sum(weights))
    specs = []
    for s in sizes:
        try:
            specs.append(resized(eval_spec, s))
        except ValueError as err:
            raise ValueError(f"selfplay.board_sizes: size {s}: {err}") from None
    return SizeMix(eval_spec, tuple(int(s) for s in sizes), tuple(specs),
                   tuple(float(w) / total for w in weights))


def check_board_sizes(sizes: Sequence[int], weights: Sequence[float]) -> None:
    """The checks of ``selfplay.board_sizes`` and ``board_size_weights`` on their own
    (ValueError, one line); the game and the net are checked by ``check_mix``."""
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"board_sizes has a size twice: {list(sizes)}")
    if any(int(s) < 1 for s in sizes):
        raise ValueError(f"board_sizes must be positive, got {list(sizes)}")
    if weights and not sizes:
        raise ValueError("board_size_weights without board_sizes")
    if weights and len(weights) != len(sizes):
        raise ValueError(f"board_size_weights has {len(weights)} weights for "
                         f"{len(sizes)} board_sizes (one each, or none for equal shares)")
    if any(not float(w) > 0 for w in weights):
        raise ValueError(f"board_size_weights must be > 0, got {list(weights)}")


def check_mix(game: str, sizes: Sequence[int], weights: Sequence[float], heads: str,
              backends: dict[str, str]) -> None:
    """Whether a run can play ``sizes``: a sized game, sizes its rules allow, a net whose
    heads are fully convolutional (``net.heads: pooled``), and torch running the net
    wherever a worker's or server's network runs (``backends``: config key -> backend;
    an exported model has the evaluation board's shape built in). ValueError, one line."""
    mix = size_mix(game, sizes, weights)
    if mix is None:
        return
    if heads != "pooled":
        raise ValueError(f"selfplay.board_sizes {list(sizes)} needs a fully convolutional "
                         f"net (net.heads: pooled, as the go_small, go_cpu and go_gpu "
                         f"presets), not heads {heads!r}, whose layers are sized by the board")
    for key, backend in backends.items():
        if backend != "torch":
            raise ValueError(f"selfplay.board_sizes needs {key}: torch (an exported "
                             f"{backend} model has one board size built in)")
