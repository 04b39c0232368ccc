"""One tree-of-arrays for every search here: batched PUCT, Gumbel AlphaZero and pure UCT.

The B trees of a batch of B games are stored as arrays (the mctx layout). Node ``n`` of
game ``b`` lives at ``[b, n]`` of every per-node array; node 0 is the root. Nodes are
allocated in order, so ``num_nodes[b]`` is both the count and the next free index. A child
is linked from its parent through ``children[b, parent, action]``, which also encodes the
legal mask of the parent (``ILLEGAL``), so priors that underflow to 0 for a legal move
cannot hide it and no separate [B, N, A] mask is needed.

Value convention (all searches): a value is a number in [-1, 1] (win +1, draw 0, loss -1)
from the view of the player to move at the node that holds it. ``value_sum`` adds such
values, ``raw_value`` is the node's own evaluation (network, rollout, or the exact result
once the node is proven). Whoever reads a child's value from its parent flips the sign
when the mover changes (every ply in strictly alternating games; ``child_q`` does it).

The numeric arrays form one ``TreeArrays`` named tuple; every numba kernel takes the tree
as a single argument (``Tree.packed``: the same arrays as a plain tuple, by reference,
nothing copied). The game states of the nodes are kept beside it in ``Tree.states``,
since they are not numba types.

Two measured rules keep the kernels as fast as with one argument per array:

- kernels take ``Tree.packed`` and rebuild the named view with ``TreeArrays(*packed)``
  (free in compiled code): numba dispatches a plain tuple of 11 arrays in about 0.9 µs,
  a named tuple in about 2 µs, and the kernels run every simulation round;
- compiled code reads arrays from locals (``children = t.children`` once per kernel) and
  helpers called per node or per action take the arrays they use, not the tuple: a tuple
  field read in a loop, or a call that passes arrays in a loop, adds reference-count
  updates that made the PUCT descent up to 50% slower (helpers that take only scalars,
  such as ``flip``, are inlined freely).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numba
import numpy as np

from zeroforge.shared.games import State

UNEXPANDED = -1
"""``children`` entry of a legal action whose child node does not exist yet."""
ILLEGAL = -2
"""``children`` entry of an action the rules forbid at that node."""


class TreeArrays(NamedTuple):
    """The numeric arrays of B search trees of capacity N nodes each, over A actions."""

    visits: np.ndarray
    """[B, N] int32: simulations that passed through the node (its own evaluation included)."""
    value_sum: np.ndarray
    """[B, N] float64: sum of backed-up values, from the view of the node's player to move."""
    raw_value: np.ndarray
    """[B, N] float32: the node's own evaluation (network, maybe mixed with a rollout; UCT:
    its first rollout), or the exact result where ``proven``; mover's view."""
    prior: np.ndarray
    """[B, N, A] float32: softmax of the evaluator's logits over the node's legal actions
    (unused by UCT, whose zero-filled pages are never touched)."""
    children: np.ndarray
    """[B, N, A] int32: child node index, ``UNEXPANDED`` (-1) or ``ILLEGAL`` (-2)."""
    parent: np.ndarray
    """[B, N] int32: parent node (-1 for the root)."""
    action: np.ndarray
    """[B, N] int32: action that led from the parent here (-1 for the root)."""
    to_play: np.ndarray
    """[B, N] int8: player to move at the node (0 = first player)."""
    terminal: np.ndarray
    """[B, N] bool: the game is over at this node (it is never expanded)."""
    proven: np.ndarray
    """[B, N] bool: ``raw_value`` is the node's exact game-theoretic value (UCT's
    MCTS-Solver; set for terminal nodes there)."""
    num_nodes: np.ndarray
    """[B] int32: nodes in use; 0 means the game has no tree. Kept last, so that
    ``arrays[:-1]`` are exactly the per-node arrays."""

    @classmethod
    def zeros(cls, batch: int, capacity: int, num_actions: int) -> TreeArrays:
        """Empty arrays: every action ``ILLEGAL``, no parent, no nodes in use."""
        b, n = batch, capacity
        return cls(
            visits=np.zeros((b, n), np.int32),
            value_sum=np.zeros((b, n), np.float64),
            raw_value=np.zeros((b, n), np.float32),
            prior=np.zeros((b, n, num_actions), np.float32),
            children=np.full((b, n, num_actions), ILLEGAL, np.int32),
            parent=np.full((b, n), -1, np.int32),
            action=np.full((b, n), -1, np.int32),
            to_play=np.zeros((b, n), np.int8),
            terminal=np.zeros((b, n), bool),
            proven=np.zeros((b, n), bool),
            num_nodes=np.zeros(b, np.int32),
        )


def _forward(name: str) -> property:
    return property(lambda self: getattr(self.arrays, name),
                    doc=f"``arrays.{name}`` (see ``TreeArrays``).")


@dataclass
class Tree:
    """B search trees: the numeric ``arrays`` plus the game state of every node."""

    arrays: TreeArrays
    """The per-node arrays, one argument for the numba kernels."""
    states: State | None
    """[B*N] game states of the nodes: node n of game b at index ``b * N + n`` (None: the
    search re-derives states instead of storing them)."""
    packed: tuple = field(init=False, repr=False)
    """``arrays`` as a plain tuple: the one argument the numba kernels take."""

    def __post_init__(self) -> None:
        self.packed = tuple(self.arrays)

    visits = _forward("visits")
    value_sum = _forward("value_sum")
    raw_value = _forward("raw_value")
    prior = _forward("prior")
    children = _forward("children")
    parent = _forward("parent")
    action = _forward("action")
    to_play = _forward("to_play")
    terminal = _forward("terminal")
    proven = _forward("proven")
    num_nodes = _forward("num_nodes")

    @classmethod
    def allocate(cls, roots: State, capacity: int, num_actions: int,
                 store_states: bool = True) -> Tree:
        """Empty trees for the B games of ``roots`` (whose states fill the state store)."""
        arrays = TreeArrays.zeros(roots.batch_size, capacity, num_actions)
        return cls(arrays, roots.repeat(capacity) if store_states else None)

    @property
    def batch_size(self) -> int:
        return int(self.arrays.visits.shape[0])

    @property
    def capacity(self) -> int:
        return int(self.arrays.visits.shape[1])

    def flat(self, games: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Index into ``states`` of nodes [K] of games [K]."""
        return np.asarray(games, np.int64) * self.capacity + np.asarray(nodes, np.int64)

    def gathered(self, old_of_new: np.ndarray, num_nodes: np.ndarray) -> Tree:
        """A new Tree whose node i of game b is node ``old_of_new[b, i]`` of this one.

        ``old_of_new`` is [B, N'] int64 for any capacity N'; child and parent links must
        already make sense in the new numbering (``_relink`` ensures it).
        """
        rows = np.arange(self.batch_size)[:, None]
        # _make: every field but the last (num_nodes) gathered, then the new num_nodes.
        arrays = TreeArrays._make([*(arr[rows, old_of_new] for arr in self.arrays[:-1]),
                                   num_nodes.astype(np.int32)])
        states = None
        if self.states is not None:
            states = self.states.take((rows * self.capacity + old_of_new).reshape(-1))
        return Tree(arrays, states)

    def grown(self, capacity: int) -> Tree:
        """The same trees in arrays of a larger ``capacity``."""
        # Slots past the old capacity copy slot 0; they are unused until allocated.
        idx = np.arange(capacity)
        idx[idx >= self.capacity] = 0
        return self.gathered(np.broadcast_to(idx, (self.batch_size, capacity)), self.num_nodes)

    def reroot(self, new_root: np.ndarray) -> None:
        """Keep for each game b only the subtree of node ``new_root[b]`` (-1: no tree).

        The kept subtree is renumbered breadth-first from 0 (the new root), in place, so
        the arrays stay compact and the next search can add ``capacity - num_nodes``
        nodes. The work is proportional to the kept nodes, not to the capacity.
        """
        b, cap = self.batch_size, self.capacity
        t = self.arrays
        old_of_new = np.zeros((b, cap), np.int64)
        _bfs_order(t.children, np.asarray(new_root, np.int64), old_of_new, t.num_nodes)
        games, new = np.nonzero(np.arange(cap)[None, :] < t.num_nodes[:, None])
        old = old_of_new[games, new]
        # In place: each right-hand side is gathered into a temporary before the scatter,
        # so overlapping old and new slots cannot clobber each other.
        for arr in t[:-1]:  # every per-node array (num_nodes is last)
            arr[games, new] = arr[games, old]
        if self.states is not None:
            self.states.put(self.flat(games, new), self.states.take(self.flat(games, old)))
        _relink(t.children, t.parent, t.action, old_of_new, t.num_nodes)


@numba.njit(cache=True)
def _bfs_order(children, new_root, old_of_new, num_nodes):
    """Breadth-first list of the subtree under ``new_root[b]`` into ``old_of_new[b]``."""
    for b in range(children.shape[0]):
        root = new_root[b]
        if root < 0:
            num_nodes[b] = 0
            continue
        old_of_new[b, 0] = root
        head, tail = 0, 1
        while head < tail:
            node = old_of_new[b, head]
            for a in range(children.shape[2]):
                child = children[b, node, a]
                if child >= 0:
                    old_of_new[b, tail] = child
                    tail += 1
            head += 1
        num_nodes[b] = tail


@numba.njit(cache=True)
def _relink(children, parent, action, old_of_new, num_nodes):
    """Rewrite old node numbers in gathered link arrays to the new numbering."""
    new_of_old = np.empty(old_of_new.shape[1], np.int32)
    for b in range(children.shape[0]):
        n = num_nodes[b]
        for i in range(n):
            new_of_old[old_of_new[b, i]] = i
        for i in range(n):
            for a in range(children.shape[2]):
                child = children[b, i, a]
                if child >= 0:
                    children[b, i, a] = new_of_old[child]
            parent[b, i] = new_of_old[parent[b, i]] if i > 0 else -1
        if n > 0:
            action[b, 0] = -1


@numba.njit(cache=True, inline="always")
def flip(value, from_player, to_player):
    """``value`` seen by ``from_player`` as seen by ``to_player`` (zero-sum: negate)."""
    return value if from_player == to_player else -value


@numba.njit(cache=True)
def _expand(t, games, nodes, node_to_play, node_terminal, legal, logits, values):
    visits, value_sum, raw_value, prior, children, to_play, terminal = (
        t.visits, t.value_sum, t.raw_value, t.prior, t.children, t.to_play, t.terminal)
    num_actions = legal.shape[1]
    for k in range(games.shape[0]):
        b, n = games[k], nodes[k]
        visits[b, n] = 0
        value_sum[b, n] = 0.0
        raw_value[b, n] = values[k]
        to_play[b, n] = node_to_play[k]
        terminal[b, n] = node_terminal[k]
        top = -np.inf
        for a in range(num_actions):
            if legal[k, a] and logits[k, a] > top:
                top = logits[k, a]
        total = 0.0
        for a in range(num_actions):
            if legal[k, a]:
                e = np.exp(np.float64(logits[k, a]) - top)
                prior[b, n, a] = e
                total += e
                children[b, n, a] = UNEXPANDED
            else:
                prior[b, n, a] = 0.0
                children[b, n, a] = ILLEGAL
        if total > 0.0:
            inv = 1.0 / total
            for a in range(num_actions):
                prior[b, n, a] *= inv


@numba.njit(cache=True)
def _backup(t, games, leaves):
    visits, value_sum, raw_value, parent, to_play = (t.visits, t.value_sum, t.raw_value,
                                                     t.parent, t.to_play)
    for k in range(games.shape[0]):
        b = games[k]
        node = leaves[k]
        v = np.float64(raw_value[b, node])
        while node >= 0:
            visits[b, node] += 1
            value_sum[b, node] += v
            up = parent[b, node]
            if up >= 0 and to_play[b, up] != to_play[b, node]:
                v = -v
            node = up


@numba.njit(cache=True)
def expand_kernel(tree, games, nodes, node_to_play, node_terminal, legal, logits, values):
    """Fill in K freshly created nodes (``games`` [K], ``nodes`` [K]) of ``tree``
    (``Tree.packed``).

    ``legal`` [K, A] bool and ``logits`` [K, A] float32 give the priors (a softmax over
    the legal actions, computed in float64); ``values`` [K] is the node's own evaluation
    (mover's view). Visits start at 0: the backup that follows counts the node's first visit.
    """
    _expand(TreeArrays(*tree), games, nodes, node_to_play, node_terminal, legal, logits,
            values)


@numba.njit(cache=True)
def backup_kernel(tree, games, leaves):
    """Add one visit and the leaf's ``raw_value`` along each leaf's path to the root of
    ``tree`` (``Tree.packed``).

    ``games`` [K] and ``leaves`` [K] name the leaves. The value flips sign whenever the
    player to move changes between a node and its parent (every ply in alternating games).
    """
    _backup(TreeArrays(*tree), games, leaves)


@numba.njit(cache=True)
def expand_backup_kernel(tree, games, nodes, node_to_play, node_terminal, legal, logits,
                         values, backup_games, leaves):
    """``expand_kernel`` then ``backup_kernel`` in one call (one dispatch per round)."""
    t = TreeArrays(*tree)
    _expand(t, games, nodes, node_to_play, node_terminal, legal, logits, values)
    _backup(t, backup_games, leaves)


def same_states(a: State, b: State) -> np.ndarray:
    """[B] bool: game i of ``a`` equals game i of ``b`` in every state array."""
    same = np.ones(a.batch_size, bool)
    for name, x in a.arrays().items():
        y = getattr(b, name)
        width = int(np.prod(x.shape[1:]))  # explicit: -1 cannot be inferred for 0 games
        same &= (x.reshape(x.shape[0], width) == y.reshape(y.shape[0], width)).all(axis=1)
    return same
