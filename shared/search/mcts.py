"""Batched AlphaZero search: B games advance in lock-step, one leaf per game per round.

Each simulation round is four batched steps, whatever B is:

1. one numba kernel walks all B trees from the root to a leaf (PUCT, or Gumbel's rules)
   and allocates the new node;
2. one ``game.step`` call plays the leaf moves of all games whose leaf is new;
3. one evaluator call values every new non-terminal leaf (terminal ones are scored by the
   rules), optionally mixed with random rollouts (AlphaGo's λ);
4. one numba kernel backs the values up all B paths.

With ``SearchConfig.leaf_batch`` > 1 (PUCT only), each round instead descends every tree
up to ``leaf_batch`` times, the descents kept apart by virtual loss, so one game alone
still fills the evaluator's batches (``vloss.py``); the steps are the same four.

Randomness is per game: game i draws only from its own generator, always in the same
order (rollout seed if λ > 0, root noise, move sampling), so a game searched alone with
generator g gets the same result as inside any batch where its generator is g. Rollouts
are the exception: they run batched on one generator seeded from all games, so with
``rollout_mix > 0`` results are reproducible but depend on the batch.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from zeroforge.shared.games import Game, State
from zeroforge.shared.search.config import SearchConfig
from zeroforge.shared.search.evaluator import Evaluator, check_evaluation
from zeroforge.shared.search.forced import forced_root_pick, prune_forced_visits
from zeroforge.shared.search.gumbel import (
    GumbelRoot,
    finish_kernel,
    interior_pick,
    root_actions_kernel,
)
from zeroforge.shared.search.puct import puct_pick
from zeroforge.shared.search.tactics import winning_actions
from zeroforge.shared.search.tree import (
    ILLEGAL,
    UNEXPANDED,
    Tree,
    TreeArrays,
    backup_kernel,
    expand_backup_kernel,
    expand_kernel,
    same_states,
)
from zeroforge.shared.search.vloss import search_rounds

DIRICHLET_SCALE = 10.0
"""Default Dirichlet α is this over the number of legal moves (AlphaZero's α ≈ 10 / moves)."""

RngLike = np.random.Generator | Sequence[np.random.Generator]


@dataclass
class SearchResult:
    """What one search call decided for its B games."""

    action: np.ndarray
    """[B] int64: the move to play."""
    visit_policy: np.ndarray
    """[B, A] float32: policy training target, summing to 1 over legal moves: root visit
    shares (PUCT; with forced playouts, the shares after policy-target pruning) or the
    completed-Q improved policy (Gumbel)."""
    root_value: np.ndarray
    """[B] float32: mean backed-up value at the root, for the player to move there."""
    visit_counts: np.ndarray
    """[B, A] int32: visits of each root action (kept subtree visits included, forced
    playouts included: the move played follows these)."""


def per_game_rngs(rng: RngLike, batch: int) -> list[np.random.Generator]:
    """One generator per game: ``rng`` itself if it is a sequence of B generators, else B
    generators seeded from ``rng`` (reproducible, but tied to the position in the batch)."""
    if isinstance(rng, np.random.Generator):
        return [np.random.default_rng(int(s)) for s in rng.integers(0, 2**63, size=batch)]
    rngs = list(rng)
    if len(rngs) != batch:
        raise ValueError(f"search: got {len(rngs)} generators for {batch} games")
    return rngs


def dirichlet_noise(prior: np.ndarray, legal: np.ndarray, rngs: Sequence[np.random.Generator],
                    alpha: float | None, fraction: float) -> np.ndarray:
    """[B, A] float32: (1 - fraction) * prior + fraction * Dirichlet(α) on legal moves only.

    ``prior`` [B, A], ``legal`` [B, A] bool; game b draws from ``rngs[b]``. α None means
    10 / (legal moves of that game). Illegal entries are returned as they were.
    """
    out = np.array(prior, np.float32, copy=True)
    for b in range(out.shape[0]):
        idx = np.flatnonzero(legal[b])
        a = alpha if alpha is not None else DIRICHLET_SCALE / idx.size
        eta = rngs[b].dirichlet(np.full(idx.size, a))
        out[b, idx] = (1.0 - fraction) * prior[b, idx] + fraction * eta
    return out


def sample_actions(visit_counts: np.ndarray, temperature: np.ndarray,
                   uniforms: np.ndarray) -> np.ndarray:
    """[B] int64: per game, argmax of ``visit_counts`` [B, A] where ``temperature`` [B] is 0,
    else an action drawn with probability ∝ counts^(1/T) using ``uniforms`` [B] in [0, 1)."""
    counts = np.asarray(visit_counts, np.float64)
    action = counts.argmax(axis=1)
    hot = np.flatnonzero(np.asarray(temperature) > 0)
    if hot.size:
        with np.errstate(divide="ignore"):
            log_c = np.log(counts[hot])
        # Powers taken in log space relative to the largest count: no overflow at small T.
        w = np.exp((log_c - log_c.max(axis=1, keepdims=True)) / temperature[hot][:, None])
        cum = np.cumsum(w, axis=1)
        threshold = np.asarray(uniforms)[hot] * cum[:, -1]
        action[hot] = (cum > threshold[:, None]).argmax(axis=1)
    return action


@numba.njit(cache=True)
def _descend_kernel(tree, root_prior, root_action, gumbel, c_puct, c_base, fpu, fpu_relative,
                    forced_k, c_visit, c_scale, out_leaf, out_parent, out_action, out_new):
    """Walk every tree of ``tree`` (``Tree.packed``) from its root to a leaf; create the
    leaf's node if it is new.

    ``root_prior`` [B, A] replaces the root's stored priors (it carries the noise);
    ``root_action`` [B] forces the root's move where >= 0 (Gumbel's halving). Below the
    root the rule is PUCT or, with ``gumbel``, the paper's deterministic selection.
    ``forced_k`` > 0 adds forced playouts to the PUCT root (0: none; ``forced.py``).
    Writes per game the leaf node, its parent and action, and whether it is new (an
    existing leaf is a terminal node). Returns the first game stuck at a non-terminal
    node without legal moves, or -1.
    """
    t = TreeArrays(*tree)
    visits, value_sum, raw_value, prior, children, parent, action, to_play, terminal = (
        t.visits, t.value_sum, t.raw_value, t.prior, t.children, t.parent, t.action,
        t.to_play, t.terminal)
    num_nodes = t.num_nodes
    num_actions = children.shape[2]
    q = np.empty(num_actions)
    pi = np.empty(num_actions)
    for b in range(children.shape[0]):
        n = 0
        while True:
            if n == 0 and root_action[b] >= 0:
                a = root_action[b]
            elif gumbel:
                a = interior_pick(visits, value_sum, raw_value, prior, children, to_play, b, n,
                                  c_visit, c_scale, q, pi)
            elif n == 0:
                a = -1
                if forced_k > 0:  # a separate pass: no cost to PUCT's loop when off
                    a = forced_root_pick(visits, children, b, root_prior[b], forced_k)
                if a < 0:
                    a = puct_pick(visits, value_sum, children, to_play, b, n, root_prior[b],
                                   c_puct, c_base, fpu, fpu_relative)
            else:
                a = puct_pick(visits, value_sum, children, to_play, b, n, prior[b, n],
                               c_puct, c_base, fpu, fpu_relative)
            if a < 0:
                return b
            child = children[b, n, a]
            if child == UNEXPANDED:
                child = num_nodes[b]
                num_nodes[b] += 1
                children[b, n, a] = child
                parent[b, child] = n
                action[b, child] = a
                out_new[b] = True
            else:
                out_new[b] = False
            if out_new[b] or terminal[b, child]:
                out_leaf[b], out_parent[b], out_action[b] = child, n, a
                break
            n = child
    return -1


class MCTS:
    """Batched PUCT / Gumbel AlphaZero search over a ``Game`` with an ``Evaluator``.

    ``tree`` holds the B trees of the last search (arrays, see ``tree.py``); with
    ``config.reuse_tree`` the subtree under the played move survives ``advance``.
    ``timings`` accumulates seconds spent in the tree kernels (``tree``), the rules
    (``step``), the evaluator with observation and checks (``evaluate``) and rollouts.
    """

    def __init__(self, game: Game, evaluator: Evaluator, config: SearchConfig) -> None:
        self.game = game
        self.evaluator = evaluator
        self.config = config
        self.tree: Tree | None = None
        self.root_prior: np.ndarray | None = None
        """[B, A] float32: the root priors the last search used, noise included (the
        tree's stored priors stay clean network priors)."""
        self.timings: dict[str, float] = {"tree": 0.0, "step": 0.0, "evaluate": 0.0,
                                          "rollout": 0.0}

    # --- public -----------------------------------------------------------------------
    def search(self, states: State, rng: RngLike, num_simulations: int | None = None,
               add_noise: bool | None = None) -> SearchResult:
        """Search the B running games of ``states`` and choose a move for each.

        ``rng``: one generator per game (batch-independent results, see the module
        docstring) or a single generator from which per-game ones are seeded.
        ``num_simulations`` and ``add_noise`` override the config's for this call (the
        fast moves of playout-cap randomisation).
        Raises ValueError for finished games, EvaluationError for bad evaluator output.
        """
        cfg = self.config
        sims = cfg.num_simulations if num_simulations is None else int(num_simulations)
        noise = cfg.add_noise if add_noise is None else bool(add_noise)
        if sims < 1:
            raise ValueError(f"search: num_simulations must be >= 1, got {sims}")
        batch = states.batch_size
        over = np.flatnonzero(self.game.terminal(states))
        if over.size:
            raise ValueError(f"search: game {int(over[0])} of the batch is already over "
                             f"({over.size} finished in all)")
        rngs = per_game_rngs(rng, batch)
        rollout_rng = None
        if cfg.rollout_mix > 0:
            rollout_rng = np.random.default_rng([int(r.integers(2**63)) for r in rngs])

        tree = self._prepare_tree(states, sims)
        fresh = np.flatnonzero(tree.num_nodes == 0)
        if fresh.size:
            root = np.zeros(fresh.size, np.int64)
            tree.num_nodes[fresh] = 1
            tree.parent[fresh, 0] = -1
            tree.action[fresh, 0] = -1
            self._add_nodes(tree, fresh, root, states.take(fresh), rollout_rng,
                            backup=(fresh, root))

        legal = tree.children[:, 0, :] != ILLEGAL
        # The stored root priors are the network's, also for a root kept from the last
        # move: noise is added afresh to a copy each search and never written to the tree.
        clean_prior = tree.prior[:, 0, :]
        halving = None
        if cfg.gumbel:
            if noise:
                g = np.stack([r.gumbel(size=legal.shape[1]) for r in rngs])
            else:
                g = np.zeros(legal.shape)
            halving = GumbelRoot(clean_prior, legal, g, cfg.gumbel_max_considered, sims)
            root_prior = np.ascontiguousarray(clean_prior)  # unused: halving picks the root move
        elif noise:
            root_prior = dirichlet_noise(clean_prior, legal, rngs, cfg.dirichlet_alpha,
                                         cfg.dirichlet_fraction)
        else:
            root_prior = np.ascontiguousarray(clean_prior)

        self.root_prior = root_prior
        # Forced playouts only where root noise is on: they exist to make the noise
        # explore (SearchConfig refuses them with Gumbel search).
        forced_k = cfg.forced_playouts_k if noise else 0.0
        self._simulate(tree, root_prior, halving, rollout_rng, sims, forced_k)
        return self._result(tree, states, rngs, halving, root_prior, forced_k)

    def advance(self, actions: np.ndarray) -> None:
        """Tell the search which moves [B] were played; with reuse, keep their subtrees.

        A game whose move was never expanded (or ends the game, or is -1) starts fresh.
        """
        tree = self.tree
        if not self.config.reuse_tree or tree is None:
            return
        actions = np.asarray(actions, np.int64).reshape(-1)
        if actions.shape[0] != tree.batch_size:
            raise ValueError(f"advance: got {actions.shape[0]} actions for "
                             f"{tree.batch_size} games")
        ok = (actions >= 0) & (actions < tree.children.shape[2]) & (tree.num_nodes > 0)
        rows = np.arange(tree.batch_size)
        child = np.where(ok, tree.children[rows, 0, np.where(ok, actions, 0)], -1)
        child = np.where(child >= 0, child, -1)
        child[tree.terminal[rows, np.maximum(child, 0)] & (child >= 0)] = -1
        tree.reroot(child)

    def reset(self, index: np.ndarray | Sequence[int] | None = None) -> None:
        """Forget the trees of the games at ``index`` (all games if None)."""
        if self.tree is not None:
            self.tree.num_nodes[slice(None) if index is None else np.asarray(index)] = 0

    # --- one search --------------------------------------------------------------------
    def _prepare_tree(self, states: State, sims: int) -> Tree:
        """Trees with room for a search of ``sims`` simulations; roots that cannot be
        reused are emptied."""
        cfg = self.config
        tree = self.tree
        if (tree is None or tree.batch_size != states.batch_size
                or type(tree.states) is not type(states)):
            # With reuse a kept subtree (up to one search's nodes) comes on top: room for two.
            most = max(cfg.num_simulations, sims)
            capacity = most * (2 if cfg.reuse_tree else 1) + 1
            tree = Tree.allocate(states, capacity, self.game.spec.num_actions)
        elif not cfg.reuse_tree:
            tree.num_nodes[:] = 0
            if sims + 1 > tree.capacity:  # a per-call budget above the config's
                tree = Tree.allocate(states, sims + 1, self.game.spec.num_actions)
        else:
            # Reuse only a tree whose stored root is exactly this position: a caller that
            # swaps in a new game without ``reset`` still gets a correct (fresh) search.
            kept = np.flatnonzero(tree.num_nodes > 0)
            assert tree.states is not None  # MCTS allocates its trees with their states stored
            if kept.size:
                match = same_states(tree.states.take(tree.flat(kept, np.zeros_like(kept))),
                                    states.take(kept))
                tree.num_nodes[kept[~match]] = 0
            need = max(1, int(tree.num_nodes.max())) + sims
            if need > tree.capacity:
                # Headroom of one more search, so a growing kept tree rarely reallocates.
                tree = tree.grown(need + max(cfg.num_simulations, sims))
        self.tree = tree
        return tree

    def _simulate(self, tree: Tree, root_prior: np.ndarray, halving: GumbelRoot | None,
                  rollout_rng: np.random.Generator | None, sims: int, forced_k: float) -> None:
        cfg = self.config
        if cfg.leaf_batch > 1:  # several leaves per tree and evaluator call (vloss.py)
            search_rounds(tree, root_prior, sims, forced_k, cfg,
                          functools.partial(self._grow, tree, rollout_rng), self.timings)
            return
        batch = tree.batch_size
        games = np.arange(batch)
        leaf = np.empty(batch, np.int64)
        parent = np.empty(batch, np.int64)
        leaf_action = np.empty(batch, np.int64)
        new = np.empty(batch, bool)
        root_action = np.full(batch, -1, np.int64)
        c_base = -1.0 if cfg.c_base is None else float(cfg.c_base)
        timings = self.timings
        t = tree.packed
        for _ in range(sims):
            t0 = time.perf_counter()
            if halving is not None:
                root_actions_kernel(t, halving.packed, cfg.gumbel_c_visit, cfg.gumbel_c_scale,
                                    root_action)
            stuck = _descend_kernel(t, root_prior, root_action, cfg.gumbel, cfg.c_puct, c_base,
                                    cfg.fpu, cfg.fpu_relative, forced_k, cfg.gumbel_c_visit,
                                    cfg.gumbel_c_scale, leaf, parent, leaf_action, new)
            if stuck >= 0:
                raise RuntimeError(f"search: game {stuck} reached a running position "
                                   "without legal moves")
            timings["tree"] += time.perf_counter() - t0
            grow = np.flatnonzero(new)
            if grow.size:
                # The backup rides along with the expansion: one kernel call per round.
                self._grow(tree, rollout_rng, grow, parent[grow], leaf_action[grow], leaf[grow],
                           (games, leaf))
            else:  # every leaf is an existing terminal node
                t0 = time.perf_counter()
                backup_kernel(t, games, leaf)
                timings["tree"] += time.perf_counter() - t0

    def _grow(self, tree: Tree, rollout_rng: np.random.Generator | None, games: np.ndarray,
              parents: np.ndarray, actions: np.ndarray, nodes: np.ndarray,
              backup: tuple[np.ndarray, np.ndarray]) -> None:
        """Play ``actions`` [K] from nodes ``parents`` [K] of trees ``games`` [K] into the
        new nodes ``nodes`` [K]; value and expand them, then back up ``backup``."""
        t0 = time.perf_counter()
        assert tree.states is not None  # MCTS allocates its trees with their states stored
        after = self.game.step(tree.states.take(tree.flat(games, parents)), actions)
        self.timings["step"] += time.perf_counter() - t0
        self._add_nodes(tree, games, nodes, after, rollout_rng, backup=backup)

    def _add_nodes(self, tree: Tree, games: np.ndarray, nodes: np.ndarray, states: State,
                   rollout_rng: np.random.Generator | None,
                   backup: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Store, value and expand K new nodes (``games`` [K], ``nodes`` [K]) of ``states``;
        then back up the leaves ``backup`` = (games [L], leaves [L]) if given."""
        game, timings = self.game, self.timings
        t0 = time.perf_counter()
        assert tree.states is not None  # MCTS allocates its trees with their states stored
        tree.states.put(tree.flat(games, nodes), states)
        terminal = np.asarray(game.terminal(states), bool)
        to_play = np.asarray(game.to_play(states), np.int8)
        legal = np.asarray(game.legal_mask(states), bool)
        timings["step"] += time.perf_counter() - t0
        running = np.flatnonzero(~terminal)
        everyone = running.size == terminal.size
        if running.size:
            t0 = time.perf_counter()
            sub = states if everyone else states.take(running)
            ev = self.evaluator.evaluate(game.observe(sub), legal if everyone else legal[running])
            check_evaluation(ev, running.size, legal.shape[1])
            net_value = np.asarray(ev.value, np.float32)
            timings["evaluate"] += time.perf_counter() - t0
            lam = self.config.rollout_mix
            if lam > 0:
                from zeroforge.shared.search.rollout import (
                    random_rollout_values,  # only AlphaGo mode
                )

                t0 = time.perf_counter()
                assert rollout_rng is not None  # search() makes one whenever rollout_mix > 0
                z = random_rollout_values(game, sub, rollout_rng)
                net_value = ((1.0 - lam) * net_value + lam * z).astype(np.float32)
                timings["rollout"] += time.perf_counter() - t0
        if everyone:
            logits = np.asarray(ev.policy_logits, np.float32)
            values = net_value
        else:
            # Terminal nodes are scored by the rules, from the view of their player to move.
            values = (np.asarray(game.outcome(states), np.float32)
                      * np.where(to_play == 0, 1.0, -1.0).astype(np.float32))
            logits = np.zeros(legal.shape, np.float32)
            if running.size:
                logits[running] = ev.policy_logits
                values[running] = net_value
        t0 = time.perf_counter()
        if backup is None:
            expand_kernel(tree.packed, games, nodes, to_play, terminal, legal, logits, values)
        else:
            expand_backup_kernel(tree.packed, games, nodes, to_play, terminal, legal, logits,
                                 values, *backup)
        timings["tree"] += time.perf_counter() - t0

    def _result(self, tree: Tree, states: State, rngs: list[np.random.Generator],
                halving: GumbelRoot | None, root_prior: np.ndarray,
                forced_k: float) -> SearchResult:
        cfg = self.config
        batch = tree.batch_size
        rows = np.arange(batch)[:, None]
        kids = tree.children[:, 0, :]
        counts = np.where(kids >= 0, tree.visits[rows, np.maximum(kids, 0)], 0).astype(np.int32)
        root_value = (tree.value_sum[:, 0] / tree.visits[:, 0]).astype(np.float32)
        if halving is not None:
            action = np.empty(batch, np.int64)
            policy = np.empty(kids.shape, np.float64)
            finish_kernel(tree.packed, halving.base, halving.alive, cfg.gumbel_c_visit,
                          cfg.gumbel_c_scale, action, policy)
        else:
            target = counts
            if forced_k > 0 and cfg.prune_policy_target:
                target = self._pruned(tree, counts, root_prior, forced_k)
            policy = target / target.sum(axis=1, keepdims=True)
            young = np.asarray(states.ply) < cfg.temperature_moves
            temperature = np.where(young, cfg.temperature, 0.0)
            uniforms = np.array([r.random() for r in rngs])
            action = sample_actions(counts, temperature, uniforms)
        if cfg.take_immediate_wins:
            winning = winning_actions(self.game, states)
            action = np.where(winning >= 0, winning, action)
        return SearchResult(action=action, visit_policy=policy.astype(np.float32),
                            root_value=root_value, visit_counts=counts)

    def _pruned(self, tree: Tree, counts: np.ndarray, root_prior: np.ndarray,
                forced_k: float) -> np.ndarray:
        """[B, A] int32: the root ``counts`` [B, A] with the forced playouts taken out
        (``forced.prune_forced_visits``), from the root children's mean values."""
        rows = np.arange(tree.batch_size)[:, None]
        child = np.maximum(tree.children[:, 0, :], 0)
        visits = tree.visits[rows, child]
        q = tree.value_sum[rows, child] / np.maximum(visits, 1)
        # Child values are from the child's mover's view; the root's mover reads them.
        q = np.where(tree.to_play[rows, child] == tree.to_play[:, :1], q, -q)
        return prune_forced_visits(counts, q, root_prior, tree.visits[:, 0],
                                   self.config.c_puct, self.config.c_base, forced_k)
