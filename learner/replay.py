"""The replay window: the most recent positions, sampled with symmetry augmentation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zeroforge.shared.games.base import Symmetry
from zeroforge.shared.samples import GameSamples


class ReplayWindow:
    """A ring buffer of the last ``capacity`` positions as (s, pi, z) arrays.

    Arrays: ``obs [N, C, H, W] uint8``, ``policy [N, A] float32``, ``value [N] float32``
    (z from the mover's view). ``inserted`` counts every position ever added, so
    samples-per-insert can be computed across restarts.
    """

    def __init__(self, capacity: int, obs_shape: Sequence[int], num_actions: int,
                 symmetries: Sequence[Symmetry] = ()) -> None:
        self.capacity = int(capacity)
        self.obs = np.zeros((self.capacity, *obs_shape), np.uint8)
        self.policy = np.zeros((self.capacity, num_actions), np.float32)
        self.value = np.zeros(self.capacity, np.float32)
        self.symmetries = list(symmetries)
        self.inserted = 0

    def __len__(self) -> int:
        return min(self.inserted, self.capacity)

    def add(self, game: GameSamples) -> None:
        """Append one game's positions, overwriting the oldest when full."""
        self.add_arrays(game.obs, game.policy, game.value_targets())

    def add_arrays(self, obs: np.ndarray, policy: np.ndarray, value: np.ndarray) -> None:
        """Append positions: obs [T, C, H, W], policy [T, A], value [T]."""
        t = obs.shape[0]
        if t > self.capacity:  # only the newest fit
            keep = slice(-self.capacity, None)
            obs, policy, value = obs[keep], policy[keep], value[keep]
        idx = (self.inserted + np.arange(obs.shape[0])) % self.capacity
        self.obs[idx] = obs
        self.policy[idx] = policy
        self.value[idx] = value
        self.inserted += t

    def sample(self, batch: int, rng: np.random.Generator, augment: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A uniform batch (obs [B, C, H, W], policy [B, A], value [B]), each position mapped
        through a random symmetry of the game when ``augment``."""
        n = len(self)
        if n == 0:
            raise ValueError("cannot sample from an empty replay window")
        idx = rng.integers(0, n, size=batch)
        obs, policy, value = self.obs[idx], self.policy[idx], self.value[idx]
        if augment and len(self.symmetries) > 1:
            which = rng.integers(0, len(self.symmetries), size=batch)
            for k, sym in enumerate(self.symmetries):
                rows = np.flatnonzero(which == k)
                if k == 0 or rows.size == 0:
                    continue
                obs[rows] = sym.apply_obs(obs[rows])
                policy[rows] = sym.apply_policy(policy[rows])
        return obs, policy, value

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Contents for a checkpoint, oldest position first."""
        n = len(self)
        order = (self.inserted - n + np.arange(n)) % self.capacity
        return {"obs": self.obs[order], "policy": self.policy[order], "value": self.value[order],
                "inserted": np.array(self.inserted, np.int64)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore from ``state_arrays`` output (the capacity may differ)."""
        self.inserted = 0
        if len(arrays["value"]):
            self.add_arrays(arrays["obs"], arrays["policy"], arrays["value"])
        self.inserted = int(np.asarray(arrays["inserted"]).reshape(-1)[0])
        # positions sit at indices 0..n-1; keep the ring consistent with `inserted`
        n = min(len(arrays["value"]), self.capacity)
        shift = (self.inserted - n) % self.capacity
        for name in ("obs", "policy", "value"):
            arr = getattr(self, name)
            setattr(self, name, np.roll(arr, shift, axis=0))
