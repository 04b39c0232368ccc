"""Batched tree search over the Game seam; no torch here.

The public API (shapes: B games searched together, A actions, N nodes per tree):

- ``MCTS(game, evaluator, SearchConfig)``: batched PUCT or Gumbel AlphaZero.
  ``search(states [B], rng) -> SearchResult`` with ``action`` [B], ``visit_policy``
  [B, A], ``root_value`` [B] and ``visit_counts`` [B, A]; ``advance(actions [B])`` keeps
  the played subtrees when ``SearchConfig.reuse_tree``; ``reset(index)`` forgets trees.
  ``SearchConfig.leaf_batch`` > 1 values several leaves of each tree per evaluator call
  (virtual loss, ``vloss.py``): for a game searched alone.
- ``Evaluator``: anything with ``evaluate(obs [B, C, H, W], legal [B, A]) -> Evaluation``
  (``policy_logits`` [B, A], ``value`` [B] in [-1, 1] for the player to move);
  ``UniformEvaluator`` is the rules-only one; bad output raises ``EvaluationError``.
- ``uct_search(game, roots [B], UCTConfig, rng) -> UCTResult``: pure UCT with random
  rollouts (the baseline yardstick), ``action`` [B], ``visits`` [B, A], ``value`` [B],
  ``proven`` [B], ``playouts`` [B].
- ``Tree`` / ``TreeArrays``: the one tree-of-arrays all three searches use ([B, N] and
  [B, N, A] arrays; values in [-1, 1] from the view of the node's player to move), for
  reading a search's tree (``MCTS.tree``).
"""

from zeroforge.shared.search.config import SearchConfig
from zeroforge.shared.search.eval_cache import (
    CachedEvaluator,
    CacheStats,
    EvalCache,
    cache_counts,
    position_keys,
)
from zeroforge.shared.search.evaluator import (
    Evaluation,
    EvaluationError,
    Evaluator,
    UniformEvaluator,
    VersionedEvaluator,
    check_evaluation,
)
from zeroforge.shared.search.forced import forced_root_pick, prune_forced_visits
from zeroforge.shared.search.mcts import MCTS, SearchResult, dirichlet_noise, sample_actions
from zeroforge.shared.search.rollout import (
    policy_rollout_values,
    random_outcomes,
    random_rollout_values,
    rollout_outcomes,
    sample_from_policy,
)
from zeroforge.shared.search.tactics import winning_actions
from zeroforge.shared.search.tree import ILLEGAL, UNEXPANDED, Tree, TreeArrays, same_states
from zeroforge.shared.search.uct import UCTConfig, UCTResult, uct_search
from zeroforge.shared.search.vloss import search_rounds

# Everything loads at once: every module here is numba and numpy, and ``mcts`` alone
# already needs most of them.
__all__ = [
    "ILLEGAL",
    "MCTS",
    "UNEXPANDED",
    "CacheStats",
    "CachedEvaluator",
    "EvalCache",
    "Evaluation",
    "EvaluationError",
    "Evaluator",
    "SearchConfig",
    "SearchResult",
    "Tree",
    "TreeArrays",
    "UCTConfig",
    "UCTResult",
    "UniformEvaluator",
    "VersionedEvaluator",
    "cache_counts",
    "check_evaluation",
    "dirichlet_noise",
    "forced_root_pick",
    "policy_rollout_values",
    "position_keys",
    "prune_forced_visits",
    "random_outcomes",
    "random_rollout_values",
    "rollout_outcomes",
    "same_states",
    "sample_actions",
    "sample_from_policy",
    "search_rounds",
    "uct_search",
    "winning_actions",
]
