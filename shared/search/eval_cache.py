"""A bounded cache of network evaluations, and the Evaluator wrapper that uses it.

Search asks the network about the same positions again and again: transpositions inside
one tree, the subtree of the played move searched afresh at the next move, the same
openings in the B games of a worker and across the workers of an inference server.
``CachedEvaluator`` answers those from an LRU table and sends only the rest (each distinct
position once per batch) to the evaluator it wraps.

The key is the observation itself (a 128-bit BLAKE2b digest of its bytes, dtype and shape)
plus the legal mask: the observation is the network's whole input, so keying on it covers
exactly what the network's answer depends on (history planes, the player to move, a move
counter - whatever a game encodes) without a per-game hash to keep in step with each
``observe``. The legal mask is part of the key so that any evaluator, also one that looks at
the mask, is answered exactly as it would have answered.

Weights changes invalidate the table: every entry belongs to one ``weights_version``; when
the wrapped evaluator reports another version the table is emptied, and a batch is never
answered with rows of two versions.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from zeroforge.shared.search.evaluator import Evaluation, Evaluator, check_evaluation

__all__ = ["CacheStats", "CachedEvaluator", "EvalCache", "position_keys"]


def position_keys(obs: np.ndarray, legal: np.ndarray) -> list[bytes]:
    """One key per row of obs [B, ...] and legal [B, A].

    Observations of 0/1 planes (every game's here) are keyed by their bits and the legal
    mask's, packed 8 to a byte: exact, with no hash to collide, and 8x smaller than the
    planes. Other observations get a 128-bit BLAKE2b digest of their bytes, dtype and row
    shape instead.
    """
    obs = np.ascontiguousarray(obs)
    b = obs.shape[0]
    masks = np.packbits(np.asarray(legal, dtype=bool).reshape(b, -1), axis=1)
    flat = obs.reshape(b, -1)
    if obs.dtype in (np.uint8, np.bool_) and (b == 0 or flat.max(initial=0) <= 1):
        # The row shape is the same for every key of one cache (one game), so it need not
        # be in the key; a leading 0 byte keeps these apart from the digests below.
        rows = np.concatenate([np.zeros((b, 1), np.uint8),
                               np.packbits(flat.astype(bool, copy=False), axis=1), masks],
                              axis=1)
        # A void view's tolist() gives each row's bytes without a Python loop.
        packed = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1])))
        return cast(list[bytes], packed.ravel().tolist())
    prefix = f"{obs.dtype.str}{obs.shape[1:]}".encode()
    raw = flat.view(np.uint8).reshape(b, -1)
    blake = hashlib.blake2b
    return [b"\x01" + blake(prefix + raw[i].tobytes() + masks[i].tobytes(),
                            digest_size=16).digest() for i in range(b)]


class CacheStats:
    """Counters since the cache was made (never reset by invalidation)."""

    __slots__ = ("evaluated", "hits", "invalidations", "lookups")

    def __init__(self) -> None:
        self.lookups = 0
        """Positions asked for."""
        self.hits = 0
        """Positions answered without the network: from the table or a duplicate of an
        earlier row of the same batch."""
        self.evaluated = 0
        """Positions sent to the wrapped evaluator."""
        self.invalidations = 0
        """Times the table was emptied because the weights changed."""

    @property
    def hit_ratio(self) -> float:
        """hits / lookups (0 before the first lookup)."""
        return self.hits / self.lookups if self.lookups else 0.0


def cache_counts(caches: Iterable[CachedEvaluator]) -> tuple[int, int, int] | None:
    """(lookups, hits, evaluated) summed over ``caches`` (one per board size where a run
    plays several); None for no cache at all."""
    stats = [c.stats for c in caches]
    if not stats:
        return None
    return (sum(s.lookups for s in stats), sum(s.hits for s in stats),
            sum(s.evaluated for s in stats))


class EvalCache:
    """LRU table: key -> (policy logits [A] float32, value float32) for one weights version.

    Rows live in preallocated arrays (``capacity`` x A), so memory is bounded by
    ``capacity`` and fixed once the first row arrives.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"EvalCache: capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.version: int | None = None
        """Weights version of the entries (None while empty and never filled)."""
        self._slots: OrderedDict[bytes, int] = OrderedDict()  # oldest use first
        self._logits: np.ndarray | None = None
        self._values = np.zeros(self.capacity, np.float32)

    def __len__(self) -> int:
        return len(self._slots)

    def clear(self, version: int | None = None) -> None:
        """Drop every entry; new entries will belong to ``version``."""
        self._slots.clear()
        self.version = version

    def lookup(self, keys: list[bytes]) -> tuple[list[int], list[int], list[int],
                                                 list[int], list[int]]:
        """One pass over a batch's keys (found keys become most recently used). Returns
        (rows found, their slots, rows to evaluate: the first row of each distinct absent
        key, rows repeating such a key, for each the index of its key's row among those to
        evaluate)."""
        get, touch = self._slots.get, self._slots.move_to_end
        found: list[int] = []
        slots: list[int] = []
        fresh: list[int] = []
        repeats: list[int] = []
        of: list[int] = []
        first: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            slot = get(key)
            if slot is not None:
                touch(key)
                found.append(i)
                slots.append(slot)
                continue
            j = first.get(key)
            if j is None:
                first[key] = len(fresh)
                fresh.append(i)
            else:
                repeats.append(i)
                of.append(j)
        return found, slots, fresh, repeats, of

    def rows(self, slots: list[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(logits [K, A], values [K]) of the given slots (copies)."""
        assert self._logits is not None
        idx = np.asarray(slots, np.int64)
        return self._logits[idx], self._values[idx]

    def put(self, keys: list[bytes], logits: np.ndarray, values: np.ndarray) -> None:
        """Insert rows (keys not already present), evicting the least recently used."""
        if self._logits is None or self._logits.shape[1] != logits.shape[1]:
            self._slots.clear()
            self._logits = np.zeros((self.capacity, logits.shape[1]), np.float32)
        slots, rows, where = self._slots, [], []
        for i, key in enumerate(keys):
            if key in slots:
                continue
            full = len(slots) >= self.capacity
            slot = slots.popitem(last=False)[1] if full else len(slots)
            slots[key] = slot
            rows.append(i)
            where.append(slot)
        # With more new rows than the table holds a slot repeats in ``where``: numpy's
        # assignment then keeps the last row written there, the one its key now names.
        self._logits[where] = logits[rows]
        self._values[where] = values[rows]


class CachedEvaluator:
    """An Evaluator that answers repeated positions from an ``EvalCache``.

    ``inner`` is any Evaluator. Its ``weights_version`` attribute, when it has one, is read
    before each lookup (an in-process network swapped to new weights empties the table at
    once); otherwise, and also for a remote evaluator whose server moves on by itself, the
    version of each answer counts: an answer of another version empties the table, and the
    rows of that batch that came from the table are evaluated again with the new weights.
    With the same weights each row is what the inner evaluator answered for that position
    (bit for bit) the first time it saw it. A network's outputs can differ in the last bits
    with the batch a row is computed in (~1e-8 measured for our nets on CPU), which the
    cache's smaller batches do not make any larger.

    A remote evaluator reports its weights only with an answer, so a worker's table serves
    the old weights until its next miss comes back with the new version: one leaf batch at
    most, as nearly every batch of a search has new positions.
    """

    def __init__(self, inner: Evaluator, capacity: int) -> None:
        self.inner = inner
        self.cache = EvalCache(capacity)
        self.stats = CacheStats()

    @property
    def weights_version(self) -> int:
        """The inner evaluator's version (that of the last answer if it keeps none)."""
        version = getattr(self.inner, "weights_version", None)
        if version is None:
            version = self.cache.version or 0
        return int(version)

    def __getattr__(self, name: str) -> Any:
        # load_state_dict, device, ... of the wrapped evaluator stay reachable. (Only called
        # for names not found otherwise; "inner" itself must not recurse before __init__.)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        b, a = legal.shape
        if b == 0:
            return self.inner.evaluate(obs, legal)
        cache, stats = self.cache, self.stats
        known = getattr(self.inner, "weights_version", None)
        if known is not None and cache.version is not None and int(known) != cache.version:
            self._invalidate(int(known))
        keys = position_keys(obs, legal)
        stats.lookups += b
        found, slots, misses, repeats, repeat_of = cache.lookup(keys)
        stats.hits += b - len(misses)
        logits = np.empty((b, a), np.float32)
        values = np.empty(b, np.float32)
        version = cache.version if cache.version is not None else int(known or 0)
        if found:
            logits[found], values[found] = cache.rows(slots)
        if misses:
            ev = check_evaluation(self.inner.evaluate(obs[misses], legal[misses]),
                                  len(misses), a)
            fresh_logits = np.asarray(ev.policy_logits, np.float32)
            fresh_values = np.asarray(ev.value, np.float32)
            version = int(ev.weights_version)
            if cache.version is not None and version != cache.version:
                self._invalidate(version)
                if found:
                    # Those rows were of the old weights: the whole batch must be of one.
                    stats.hits -= b - len(misses)
                    stats.evaluated += len(misses)
                    return self._evaluate_all(obs, legal, keys)
            cache.version = version
            cache.put([keys[i] for i in misses], fresh_logits, fresh_values)
            stats.evaluated += len(misses)
            logits[misses], values[misses] = fresh_logits, fresh_values
            if repeats:
                logits[repeats], values[repeats] = fresh_logits[repeat_of], fresh_values[repeat_of]
        return Evaluation(logits, values, version)

    def _invalidate(self, version: int) -> None:
        self.cache.clear(version)
        self.stats.invalidations += 1

    def _evaluate_all(self, obs: np.ndarray, legal: np.ndarray,
                      keys: list[bytes]) -> Evaluation:
        """The rare path after a weights change seen mid-batch: evaluate every row anew."""
        b, a = legal.shape
        ev = check_evaluation(self.inner.evaluate(obs, legal), b, a)
        logits = np.asarray(ev.policy_logits, np.float32)
        values = np.asarray(ev.value, np.float32)
        self.stats.evaluated += b
        if int(ev.weights_version) != self.cache.version:
            self._invalidate(int(ev.weights_version))
        self.cache.put(keys, logits, values)
        return Evaluation(logits, values, int(ev.weights_version))
