"""The replay window of a run with several board sizes (``selfplay.board_sizes``).

One ``ReplayWindow`` per size, each a ring buffer of that size's arrays (obs
``[N_s, C, s, s]``, policy ``[N_s, s*s + 1]``, ownership ``[N_s, s, s]``...), its capacity
``learner.replay_capacity`` times the size's share (``board_size_weights``). Self-play
plays the sizes in those shares, so each part spans about the same stretch of recent
play, and the window as a whole keeps the newest ``replay_capacity`` positions as one
ring would.

A training batch is of one size (the net runs on one board shape per call, and the
ownership loss is a mean over that board's points): the size is drawn in proportion to
its part's positions, then the batch is drawn uniformly from that part and mapped
through that board's symmetries. So every position held is as likely to be trained as
in one uniform window, and a full window trains each size in its share.

Why parts rather than one ring padded to the largest board: a 7x7 position padded to
13x13 would carry 120 of 169 points that are not board, which the net, the policy's
softmax and the symmetries would all have to mask; and separate rings keep each size's
arrays exactly those of a one-size run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zeroforge.learner.replay import ReplayBatch, ReplayWindow
from zeroforge.shared.games import make_game
from zeroforge.shared.samples import GameSamples

PREFIX = "size{}."
"""Checkpoint keys of a size other than the evaluation size: ``size7.obs``...; the
evaluation size's part keeps a one-size window's keys (``obs``, ``inserted``...), so a
one-size run's checkpoint resumes with sizes added, its positions in that part."""


def split_capacity(capacity: int, shares: Sequence[float]) -> list[int]:
    """``capacity`` split in proportion to ``shares`` (each at least 1, summing to
    ``capacity`` when it allows)."""
    parts = [max(int(capacity * s), 1) for s in shares]
    parts[int(np.argmax(shares))] += max(capacity - sum(parts), 0)
    return parts


class MixedReplayWindow:
    """A replay window of positions of several board sizes (see the module docstring).

    It answers what the learner asks of a ``ReplayWindow``: ``add``, ``add_arrays``,
    ``sample_batch``, ``len``, ``inserted`` (every position ever added, all sizes),
    ``state_arrays`` and ``load_arrays``.
    """

    def __init__(self, capacity: int, specs: Sequence[str], shares: Sequence[float],
                 eval_size: int, aux: bool = False) -> None:
        """``specs``: the spec string of each size's game, ``shares`` their shares;
        ``eval_size``: the run's own size (its part checkpoints under plain keys)."""
        self.eval_size = int(eval_size)
        self.parts: dict[int, ReplayWindow] = {}
        """Board size -> that size's window."""
        for spec, cap in zip(specs, split_capacity(capacity, shares), strict=True):
            game = make_game(spec)
            size = int(game.spec.board_shape[0])
            self.parts[size] = ReplayWindow(cap, game.spec.obs_shape, game.spec.num_actions,
                                            game.symmetries(), aux=aux)
        self.capacity = sum(p.capacity for p in self.parts.values())
        self.aux = aux

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts.values())

    @property
    def inserted(self) -> int:
        """Positions ever added, every size (samples-per-insert's denominator)."""
        return sum(p.inserted for p in self.parts.values())

    def positions_by_size(self) -> dict[int, int]:
        """Board size -> positions held."""
        return {size: len(p) for size, p in self.parts.items()}

    def part_for(self, obs: np.ndarray) -> ReplayWindow:
        """The part of observations ``obs`` [T, C, H, W] (KeyError naming the size for a
        board this window has no part for: the learner's intake rejects those first)."""
        h = int(obs.shape[2])
        try:
            return self.parts[h]
        except KeyError:
            raise KeyError(f"no {h}x{h} part in this replay window (sizes "
                           f"{sorted(self.parts)})") from None

    def add(self, game: GameSamples, keep: np.ndarray | None = None) -> None:
        """``ReplayWindow.add`` into the part of the game's board size."""
        self.part_for(game.obs).add(game, keep)

    def add_arrays(self, obs: np.ndarray, policy: np.ndarray, value: np.ndarray,
                   ownership: np.ndarray | None = None, score: np.ndarray | None = None
                   ) -> None:
        """``ReplayWindow.add_arrays`` into the part of ``obs``'s board size."""
        self.part_for(obs).add_arrays(obs, policy, value, ownership, score)

    def sample(self, batch: int, rng: np.random.Generator, augment: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = self.sample_batch(batch, rng, augment)
        return b.obs, b.policy, b.value

    def sample_batch(self, batch: int, rng: np.random.Generator, augment: bool = True
                     ) -> ReplayBatch:
        """A batch of one board size: the size drawn in proportion to its positions held,
        the positions uniformly from its part (``ReplayWindow.sample_batch``)."""
        held = np.array([len(p) for p in self.parts.values()], np.float64)
        if held.sum() == 0:
            raise ValueError("cannot sample from an empty replay window")
        which = int(rng.choice(len(held), p=held / held.sum()))
        return list(self.parts.values())[which].sample_batch(batch, rng, augment)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Every part's ``state_arrays``: the evaluation size's under plain keys, the
        others under ``size{N}.``-prefixed ones."""
        out: dict[str, np.ndarray] = {}
        for size, part in self.parts.items():
            prefix = "" if size == self.eval_size else PREFIX.format(size)
            out.update({prefix + k: v for k, v in part.state_arrays().items()})
        return out

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore from ``state_arrays`` output (or a one-size window's, whose positions
        go to the evaluation size's part). A size the checkpoint has no positions of
        starts empty; positions of a size no longer played are dropped."""
        for size, part in self.parts.items():
            prefix = "" if size == self.eval_size else PREFIX.format(size)
            mine = {k[len(prefix):]: v for k, v in arrays.items()
                    if k.startswith(prefix) and (prefix or not k.startswith("size"))}
            if "value" in mine:
                part.load_arrays(mine)
