"""The replay window: the most recent positions, sampled with symmetry augmentation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zeroforge.shared.games import Symmetry
from zeroforge.shared.samples import GameSamples


@dataclass
class ReplayBatch:
    """One sampled batch; the auxiliary arrays are None in a window without them."""

    obs: np.ndarray
    """[B, C, H, W] uint8."""
    policy: np.ndarray
    """[B, A] float32 (all-zero rows: positions without a policy target)."""
    value: np.ndarray
    """[B] float32 z from the mover's view."""
    ownership: np.ndarray | None = None
    """[B, H, W] int8 final ownership from the mover's view."""
    score: np.ndarray | None = None
    """[B] float32 final score margin from the mover's view."""
    has_aux: np.ndarray | None = None
    """[B] bool: positions whose game carried ownership and score (the others, e.g.
    pre-training positions, train no auxiliary head)."""

    def target_counts(self) -> tuple[float, float]:
        """(positions with a policy target, positions with the auxiliary targets): the
        denominators of the batch's mean losses (``losses.step_scales``)."""
        aux = float(self.has_aux.sum()) if self.has_aux is not None else 0.0
        return float((self.policy.sum(axis=1) > 0).sum()), aux

    def board_points(self) -> int:
        """H x W of the batch's board (one board size a batch, also in a run of several):
        the ownership loss's points a position."""
        return int(self.obs.shape[2] * self.obs.shape[3])


class ReplayWindow:
    """A ring buffer of the last ``capacity`` positions as (s, pi, z) arrays.

    Arrays: ``obs [N, C, H, W] uint8``, ``policy [N, A] float32``, ``value [N] float32``
    (z from the mover's view); with ``aux`` also ``ownership [N, H, W] int8``, ``score
    [N] float32`` and ``has_aux [N] bool`` (KataGo's auxiliary targets, from the mover's
    view). ``inserted`` counts every position ever added, so samples-per-insert can be
    computed across restarts.
    """

    def __init__(self, capacity: int, obs_shape: Sequence[int], num_actions: int,
                 symmetries: Sequence[Symmetry] = (), aux: bool = False) -> None:
        self.capacity = int(capacity)
        self.obs = np.zeros((self.capacity, *obs_shape), np.uint8)
        self.policy = np.zeros((self.capacity, num_actions), np.float32)
        self.value = np.zeros(self.capacity, np.float32)
        self.aux = aux
        board = tuple(obs_shape[1:]) if aux else (0, 0)
        rows = self.capacity if aux else 0
        self.ownership = np.zeros((rows, *board), np.int8)
        self.score = np.zeros(rows, np.float32)
        self.has_aux = np.zeros(rows, bool)
        self.symmetries = list(symmetries)
        self.inserted = 0

    def __len__(self) -> int:
        return min(self.inserted, self.capacity)

    def _names(self) -> tuple[str, ...]:
        return ("obs", "policy", "value", *(("ownership", "score", "has_aux") if self.aux
                                            else ()))

    def add(self, game: GameSamples, keep: np.ndarray | None = None) -> None:
        """Append one game's positions (only those where ``keep`` [T] bool is set),
        overwriting the oldest when full."""
        rows = slice(None) if keep is None else keep
        aux = {}
        if self.aux and game.has_aux:
            aux = {"ownership": game.ownership_targets()[rows],
                   "score": game.score_targets()[rows]}
        self.add_arrays(game.obs[rows], game.policy[rows].astype(np.float32),
                        game.value_targets()[rows], **aux)

    def add_arrays(self, obs: np.ndarray, policy: np.ndarray, value: np.ndarray,
                   ownership: np.ndarray | None = None, score: np.ndarray | None = None
                   ) -> None:
        """Append positions: obs [T, C, H, W], policy [T, A], value [T]; in a window with
        ``aux``, ownership [T, H, W] and score [T] (None: positions without them)."""
        t = obs.shape[0]
        arrays: dict[str, np.ndarray] = {"obs": obs, "policy": policy,
                                         "value": np.asarray(value, np.float32)}
        if self.aux:
            given = ownership is not None and score is not None
            arrays["ownership"] = (ownership if ownership is not None
                                   else np.zeros((t, *self.ownership.shape[1:]), np.int8))
            arrays["score"] = score if score is not None else np.zeros(t, np.float32)
            arrays["has_aux"] = np.full(t, given)
        if t > self.capacity:  # only the newest fit
            arrays = {k: v[-self.capacity:] for k, v in arrays.items()}
        idx = (self.inserted + np.arange(min(t, self.capacity))) % self.capacity
        for name, arr in arrays.items():
            getattr(self, name)[idx] = arr
        self.inserted += t

    def sample(self, batch: int, rng: np.random.Generator, augment: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A uniform batch (obs [B, C, H, W], policy [B, A], value [B]), each position mapped
        through a random symmetry of the game when ``augment``."""
        b = self.sample_batch(batch, rng, augment)
        return b.obs, b.policy, b.value

    def sample_batch(self, batch: int, rng: np.random.Generator, augment: bool = True
                     ) -> ReplayBatch:
        """``sample`` with the auxiliary arrays (mapped through the same symmetries)."""
        n = len(self)
        if n == 0:
            raise ValueError("cannot sample from an empty replay window")
        idx = rng.integers(0, n, size=batch)
        out = ReplayBatch(**{name: getattr(self, name)[idx] for name in self._names()})
        if augment and len(self.symmetries) > 1:
            which = rng.integers(0, len(self.symmetries), size=batch)
            for k, sym in enumerate(self.symmetries):
                rows = np.flatnonzero(which == k)
                if k == 0 or rows.size == 0:
                    continue
                out.obs[rows] = sym.apply_obs(out.obs[rows])
                out.policy[rows] = sym.apply_policy(out.policy[rows])
                if out.ownership is not None:
                    out.ownership[rows] = sym.apply_obs(out.ownership[rows])
        return out

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Contents for a checkpoint, oldest position first."""
        n = len(self)
        order = (self.inserted - n + np.arange(n)) % self.capacity
        return {**{name: getattr(self, name)[order] for name in self._names()},
                "inserted": np.array(self.inserted, np.int64)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore from ``state_arrays`` output (the capacity may differ; a checkpoint from
        before the auxiliary targets restores its positions without them)."""
        self.inserted = 0
        if len(arrays["value"]):
            aux = {}
            if self.aux and "ownership" in arrays:
                aux = {"ownership": arrays["ownership"], "score": arrays["score"]}
            self.add_arrays(arrays["obs"], arrays["policy"], arrays["value"], **aux)
            if aux:
                n = min(len(arrays["value"]), self.capacity)
                self.has_aux[:n] = np.asarray(arrays["has_aux"], bool)[-n:]
        self.inserted = int(np.asarray(arrays["inserted"]).reshape(-1)[0])
        # positions sit at indices 0..n-1; keep the ring consistent with `inserted`
        n = min(len(arrays["value"]), self.capacity)
        shift = (self.inserted - n) % self.capacity
        for name in self._names():
            arr = getattr(self, name)
            setattr(self, name, np.roll(arr, shift, axis=0))
