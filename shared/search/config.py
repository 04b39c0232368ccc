"""SearchConfig: every knob of the batched PUCT / Gumbel search, in one frozen section."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SearchConfig:
    """How one search call spends its simulations and turns them into a move."""

    num_simulations: int = 200
    """Simulations per ``search`` call and per game (one new leaf each). With tree reuse
    these come on top of the visits kept from the previous move's tree."""

    c_puct: float = 1.25
    """PUCT exploration constant c: score = Q + c * P * sqrt(N_parent) / (1 + N_child).
    With ``c_base`` set it is the AlphaZero ``c_init``."""

    c_base: float | None = None
    """If set, c grows with the parent's visits N as in AlphaZero:
    c = c_puct + log((1 + N + c_base) / c_base) (the paper used c_base=19652, c_init=1.25).
    None keeps c constant."""

    fpu: float = 0.0
    """First-play urgency: the Q (parent mover's view, in [-1, 1]) used for children that
    were never visited. 0 treats an unknown move as a draw, which lets the prior alone order
    the first visits; see ``fpu_relative`` for the Leela-Zero style alternative."""

    fpu_relative: bool = False
    """If True, unvisited children get Q = (parent's mean value) - ``fpu`` instead of ``fpu``:
    the "FPU reduction" that makes a strong network look at fewer new moves."""

    dirichlet_alpha: float | None = None
    """Concentration of the root Dirichlet noise. None scales it to the position:
    10 / (number of legal moves), i.e. ~0.3 for chess-like counts, ~0.03 on 19x19 Go."""

    dirichlet_fraction: float = 0.25
    """Weight ε of the noise: root prior = (1 - ε) * P + ε * Dirichlet(α), legal moves only."""

    add_noise: bool = True
    """Exploration noise at the root: Dirichlet for PUCT, Gumbel for Gumbel search.
    True for self-play; False for evaluation, analysis and play against people."""

    temperature: float = 1.0
    """While a game is young (see ``temperature_moves``), play an action with probability
    proportional to visits^(1/temperature); 0 always plays the most visited action.
    Ignored by Gumbel search, whose Gumbel noise already samples the move."""

    temperature_moves: int = 30
    """Plies (``State.ply`` of the root) during which ``temperature`` applies; later moves
    are the most visited action."""

    rollout_mix: float = 0.0
    """λ of AlphaGo's leaf evaluation: value = (1 - λ) * v_network + λ * z_rollout, with
    z the result of one uniformly random playout. 0 (AlphaZero) plays no rollouts."""

    gumbel: bool = False
    """False: AlphaZero PUCT everywhere. True: Gumbel AlphaZero (Danihelka et al. 2022):
    Gumbel top-m sampling and sequential halving at the root, the deterministic
    completed-Q selection below it, and the completed-Q improved policy as target."""

    gumbel_max_considered: int = 16
    """m: at most this many root actions take part in sequential halving."""

    gumbel_c_visit: float = 50.0
    """c_visit of σ(q) = (c_visit + max_b N(b)) * c_scale * q."""

    gumbel_c_scale: float = 1.0
    """c_scale of σ(q) = (c_visit + max_b N(b)) * c_scale * q."""

    take_immediate_wins: bool = True
    """Play a move that wins on the spot whenever one exists (every legal root move is tried
    through the rules in one batched ``step``). Search values a win now and a forced win
    later both at +1, so without this it may dawdle; the training target stays the search
    policy either way."""

    reuse_tree: bool = False
    """Keep the subtree under the played move for the next search (``MCTS.advance``). The
    kept root gets fresh root noise on top of its clean network priors at each search (the
    previous move's noise is never stored in the tree). Off by default: not yet measured to
    win strength at equal wall clock."""

    full_search_prob: float = 1.0
    """Self-play playout-cap randomisation (KataGo): the probability that a move is searched
    with the full ``num_simulations`` and its search policy recorded as a policy target.
    The other moves get ``fast_simulations``, no Dirichlet noise (Gumbel search keeps its
    Gumbel noise: it is what samples the move), and their positions train the value only.
    1.0 (the default) searches every move in full: no randomisation.
    One draw per search call decides for all B games of a worker (a batched search runs
    its rounds in lock-step, so mixing budgets in one call would cost the full budget)."""

    fast_simulations: int | None = None
    """Simulations of a fast move under playout-cap randomisation; None means
    ``num_simulations // 6`` (KataGo's 600 / 100), at least 1. Must not exceed
    ``num_simulations``. Unused while ``full_search_prob`` is 1."""

    forced_playouts_k: float = 0.0
    """k of KataGo's forced playouts (Wu 2019, section 3.1; ``forced.py``): at the root
    of a search with root noise, a child c with fewer visits than
    sqrt(k · P(c) · Σ_c' N(c')) (P with the noise) is picked before the PUCT formula
    (the one furthest below it first), so every noised move gets a few visits. KataGo
    used 2; 0 (the default) turns it off. Searches without root noise (evaluation, play,
    fast moves of playout-cap randomisation) never force. PUCT only: an error with
    ``gumbel``."""

    prune_policy_target: bool = True
    """KataGo's policy-target pruning, the other half of forced playouts: the training
    target (``SearchResult.visit_policy``) is built from the root visits with the forced
    ones taken out again (``forced.prune_forced_visits``), while the move played still
    follows the unpruned visits. It acts only on searches that forced playouts, so it is
    implied by ``forced_playouts_k`` > 0 and does nothing without it (Gumbel search
    included, whose target is its improved policy). False keeps the forced visits in the
    target: an ablation, which teaches the network the noise."""

    leaf_batch: int = 1
    """Leaves each tree collects per evaluator call (``vloss.py``): a round descends the
    tree this many times, each descent marking its path with a virtual loss so the next
    ones look elsewhere, then values the new leaves in one evaluator call (B games give
    up to B * leaf_batch positions). Every descent that reaches a new or terminal leaf
    counts as one of the ``num_simulations``; one that reaches a leaf already taken this
    round is dropped. 1 (the default) is the lock-step search, one leaf per game per call,
    unchanged. Worth raising where one game searches alone on an evaluator that batches
    (a GPU, an inference server; engines, play against people): batches of B games fill
    it in self-play. PUCT only: an error with ``gumbel``."""

    virtual_loss: float = 1.0
    """Size of the virtual loss with ``leaf_batch`` > 1: while a descent is in flight, each
    node on its path counts one more visit and, for the player who moved into it, this
    much more loss (1: a lost game; 0: only the visit, which still lowers the node's
    exploration bonus). Removed exactly before the real values are backed up."""

    def __post_init__(self) -> None:
        checks = [
            (self.num_simulations >= 1, "num_simulations must be >= 1"),
            (self.c_puct >= 0, "c_puct must be >= 0"),
            (self.c_base is None or self.c_base > 0, "c_base must be > 0 or None"),
            (self.dirichlet_alpha is None or self.dirichlet_alpha > 0,
             "dirichlet_alpha must be > 0 or None"),
            (0.0 <= self.dirichlet_fraction <= 1.0, "dirichlet_fraction must be in [0, 1]"),
            (self.temperature >= 0, "temperature must be >= 0"),
            (self.temperature_moves >= 0, "temperature_moves must be >= 0"),
            (0.0 <= self.rollout_mix <= 1.0, "rollout_mix must be in [0, 1]"),
            (self.gumbel_max_considered >= 1, "gumbel_max_considered must be >= 1"),
            (self.gumbel_c_visit >= 0, "gumbel_c_visit must be >= 0"),
            (self.gumbel_c_scale >= 0, "gumbel_c_scale must be >= 0"),
            (0.0 < self.full_search_prob <= 1.0,
             f"full_search_prob must be in (0, 1], got {self.full_search_prob}"),
            (self.fast_simulations is None
             or 1 <= self.fast_simulations <= self.num_simulations,
             f"fast_simulations must be in [1, num_simulations={self.num_simulations}] or "
             f"None, got {self.fast_simulations}"),
            (0.0 <= self.forced_playouts_k < float("inf"),
             f"forced_playouts_k must be finite and >= 0, got {self.forced_playouts_k}"),
            (not (self.gumbel and self.forced_playouts_k > 0),
             "forced_playouts_k > 0 is for PUCT search; Gumbel search (gumbel=True) has its "
             "own root exploration and policy target: set forced_playouts_k=0"),
            (self.leaf_batch >= 1, f"leaf_batch must be >= 1, got {self.leaf_batch}"),
            (0.0 <= self.virtual_loss < float("inf"),
             f"virtual_loss must be finite and >= 0, got {self.virtual_loss}"),
            (not (self.gumbel and self.leaf_batch > 1),
             "leaf_batch > 1 is for PUCT search; Gumbel search (gumbel=True) picks its root "
             "moves by sequential halving, one simulation at a time: set leaf_batch=1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"SearchConfig: {message}")

    @property
    def playout_cap(self) -> bool:
        """Whether self-play randomises the playout cap (``full_search_prob`` below 1)."""
        return self.full_search_prob < 1.0

    @property
    def fast_budget(self) -> int:
        """Simulations of a fast move: ``fast_simulations`` or ``num_simulations // 6``."""
        if self.fast_simulations is not None:
            return self.fast_simulations
        return max(1, self.num_simulations // 6)
