"""Semantic checks of a decoded game against the run's rules: poison that passes the schema.

``shared.samples.decode`` checks the *form* of an entry (types, lengths, finite
non-negative policies, movers 0/1). An entry can pass it and still be nonsense: a policy
summing to 63 or to 0, all mass on an occupied point, a 20,000-position tic-tac-toe game,
a win claimed from a position where no move wins. ``check_game`` rejects those with a
``SampleFormatError`` whose ``reason`` is one of ``REASONS``:

``too_long``
    more positions than the game can last (``GameSpec.max_moves``).
``bad_to_play``
    the movers do not alternate from the first player (``to_play[t] == t % 2``): every game
    here has two players moving in turn, passes included.
``bad_observation``
    planes that the rules cannot produce: values other than 0/1, a point holding stones of
    both sides, a "first player to move" plane that disagrees with ``to_play``, and per
    game: gomoku/tic-tac-toe positions whose stone counts do not match the move number or
    whose last-move plane is not one opponent stone; five-stone chess positions where a
    side has fewer than 2 or more than 5 stones.
``bad_policy``
    a policy row that is not a distribution: non-finite, negative, or not summing to 1
    within ``POLICY_SUM_TOL``. Only positions recorded with a policy target are checked
    (``GameSamples.policy_recorded``: the fast moves of playout-cap randomisation carry
    none, and the learner trains only their value).
``illegal_policy``
    more than ``ILLEGAL_MASS_TOL`` of a position's policy on moves that are illegal there.
    The legal moves are derived from the observation (``legal_superset``): exactly for
    gomoku, tic-tac-toe and five-stone chess, as a superset for Go.
``bad_outcome_for_position``
    the outcome cannot follow from the last recorded position: the rules are run for every
    legal move of that position (gomoku, tic-tac-toe, five-stone chess) and the claimed
    outcome must be one that a single move ends the game with; or, for Go, a draw claimed
    with a komi that is not a whole number.
``bad_aux_target``
    ownership and score targets (schema 3) on a game without territory, or, for Go, a score
    that is not the ownership's balance less komi, or an outcome that disagrees with the
    score's sign.

Every check is vectorised over all positions of the game (the rules are run on the last
position only), so all positions are checked; ``docs/lab/reliability.md`` has the cost.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from zeroforge.shared.board_sizes import differs_only_in_size
from zeroforge.shared.games import (
    FIVESTONE_ACTIONS,
    KO,
    OPP,
    OPP_LIBS,
    OWN,
    OWN_LIBS,
    FiveStone,
    Game,
    Go,
    Gomoku,
    GomokuState,
)
from zeroforge.shared.samples import GameSamples, SampleFormatError

POLICY_SUM_TOL = 2e-3
"""Allowed |sum(policy) - 1| per position. Policies travel as float16, which keeps 11
significant bits: each entry is off by at most 2^-11 of itself, so a distribution's sum by
at most 2^-11 ~ 4.9e-4; the tolerance leaves four times that."""
ILLEGAL_MASS_TOL = 1e-3
"""Allowed policy mass per position on moves that are illegal there (float16 noise is far
below it; one misplaced visit out of a few hundred is above it)."""

REASONS = ("too_long", "bad_to_play", "bad_observation", "bad_policy", "illegal_policy",
           "bad_outcome_for_position", "bad_aux_target")
"""The ``SampleFormatError.reason`` labels ``check_game`` raises."""
DECODE_REASONS = ("no_data", "oversized", "not_msgpack", "too_deep", "over_limits", "not_a_map",
                  "unknown_schema", "missing_field", "bad_field", "bad_shape", "bad_length",
                  "bad_outcome", "bad_policy", "bad_to_play")
"""Reasons the stream's decoding gives (``shared.samples.SampleFormatError``)."""
REJECTION_REASONS = tuple(dict.fromkeys((*DECODE_REASONS, "wrong_game", "wrong_size",
                                         "duplicate", *REASONS)))
"""Every ``rejected_entries_total`` reason the learner knows (a test checks the list)."""


def check_game(game: Game, samples: GameSamples) -> None:
    """Raise ``SampleFormatError`` (reason in ``REASONS``) if ``samples`` cannot be a game of
    ``game``; return None if every check passes.

    ``samples`` must already match ``game``'s spec string, observation shape [T, C, H, W]
    and action count A (the learner's ``wrong_game`` check comes first).
    """
    spec = game.spec
    obs, policy, to_play = samples.obs, samples.policy, samples.to_play
    t = samples.num_positions
    if t == 0:
        raise SampleFormatError("bad_length", "a game without positions")
    if t > spec.max_moves:
        raise SampleFormatError("too_long", f"{t} positions, but {spec.spec_string} games "
                                f"last at most {spec.max_moves} moves")
    if policy.shape[0] != t or to_play.shape != (t,):
        raise SampleFormatError("bad_length", f"{t} observations, {policy.shape[0]} policy "
                                f"rows and {to_play.shape[0]} movers")
    recorded = samples.policy_mask
    if recorded.shape != (t,):
        raise SampleFormatError("bad_length", f"{t} positions but {recorded.shape} "
                                "policy_recorded flags")
    expected = np.arange(t) % 2
    if not np.array_equal(to_play, expected):
        bad = int(np.flatnonzero(to_play != expected)[0])
        raise SampleFormatError("bad_to_play", f"position {bad} has mover {int(to_play[bad])}, "
                                f"but players alternate from the first (expected {bad % 2})")
    _check_observations(game, obs, to_play)
    if recorded.all():
        _check_policy(game, obs, policy, np.arange(t))
    elif recorded.any():
        rows = np.flatnonzero(recorded)
        _check_policy(game, obs[rows], policy[rows], rows)
    _check_outcome(game, obs, to_play, samples.outcome)
    if samples.ownership is not None or samples.score is not None:
        _check_aux(game, samples)


def legal_superset(game: Game, obs: np.ndarray) -> np.ndarray:
    """[T, A] bool: moves that may be legal in each position of ``obs`` [T, C, H, W].

    Gomoku and tic-tac-toe: the empty points, which is exact. Five-stone chess: steps of a
    mover's stone onto an adjacent empty point, also exact (a move that repeats a position
    is legal; it draws). Go: the empty points and pass, a superset, because suicide and
    (super)ko depend on liberties and on the history, which the planes do not fully show.
    """
    mine, theirs = game.piece_planes()
    t = obs.shape[0]
    empty = ((obs[:, mine] | obs[:, theirs]) == 0).reshape(t, -1)
    if isinstance(game, Gomoku):
        return empty
    if isinstance(game, Go):
        return np.concatenate([empty, np.ones((t, 1), bool)], axis=1)
    if isinstance(game, FiveStone):
        src, dst = _fivestone_steps()
        own = obs[:, mine].reshape(t, -1).astype(bool)
        on_board = dst >= 0
        legal = np.zeros((t, FIVESTONE_ACTIONS), bool)
        legal[:, on_board] = own[:, src[on_board]] & empty[:, dst[on_board]]
        return legal
    raise TypeError(f"no legal-move check for {type(game).__name__}")


def _fivestone_steps() -> tuple[np.ndarray, np.ndarray]:
    """[100] source point and [100] destination point (-1 off the board) of each action."""
    action = np.arange(FIVESTONE_ACTIONS)
    src, direction = np.divmod(action, 4)
    row, col = np.divmod(src, 5)
    row = row + np.array([-1, 1, 0, 0])[direction]
    col = col + np.array([0, 0, -1, 1])[direction]
    inside = (row >= 0) & (row < 5) & (col >= 0) & (col < 5)
    return src, np.where(inside, row * 5 + col, -1)


def _first_player_plane(game: Game) -> int:
    """Index of the plane of ones when the first player is to move."""
    if isinstance(game, Gomoku):
        return 3
    if isinstance(game, Go):
        # agz/compact: after the 2H stone planes; features: the last plane
        return game.spec.obs_shape[0] - 1 if game.obs == "features" else 2 * game.history
    if isinstance(game, FiveStone):
        return 2
    raise TypeError(f"no observation check for {type(game).__name__}")


def _check_observations(game: Game, obs: np.ndarray, to_play: np.ndarray) -> None:
    t = obs.shape[0]
    if obs.dtype != np.uint8 or (obs > 1).any():
        raise SampleFormatError("bad_observation", "observation planes are not 0/1 uint8")
    if isinstance(game, Go) and game.obs == "features":
        pairs = [game.piece_planes()]
        _check_go_features(obs)
    elif isinstance(game, Go):
        h = game.history
        pairs = [(i, h + i) for i in range(h)]
    else:
        pairs = [game.piece_planes()]
    for mine, theirs in pairs:
        both = (obs[:, mine] & obs[:, theirs]).reshape(t, -1).any(axis=1)
        if both.any():
            raise SampleFormatError("bad_observation", f"position {int(np.argmax(both))} has "
                                    f"stones of both sides on one point (planes {mine}, {theirs})")
    first = obs[:, _first_player_plane(game)].reshape(t, -1)
    want = (to_play == 0)[:, None]
    wrong = (first != want).any(axis=1)
    if wrong.any():
        raise SampleFormatError("bad_observation", f"position {int(np.argmax(wrong))}: the "
                                "first-player-to-move plane disagrees with to_play")
    mine_n = obs[:, 0].reshape(t, -1).sum(axis=1, dtype=np.int64)
    theirs_n = obs[:, 1].reshape(t, -1).sum(axis=1, dtype=np.int64)
    if isinstance(game, Gomoku):
        ply = np.arange(t)
        wrong = (mine_n != ply // 2) | (theirs_n != (ply + 1) // 2)
        if wrong.any():
            i = int(np.argmax(wrong))
            raise SampleFormatError("bad_observation", f"position {i} has {mine_n[i]} + "
                                    f"{theirs_n[i]} stones, but {i} moves were played")
        last = obs[:, 2].reshape(t, -1)
        opponent = obs[:, 1].reshape(t, -1)
        ok = np.zeros(t, bool)
        ok[0] = not last[0].any()
        ok[1:] = (last[1:].sum(axis=1) == 1) & (last[1:] & opponent[1:]).any(axis=1)
        if not ok.all():
            raise SampleFormatError("bad_observation", f"position {int(np.argmin(ok))}: the "
                                    "last-move plane is not the opponent's last stone")
    elif isinstance(game, FiveStone):
        wrong = (mine_n < 2) | (mine_n > 5) | (theirs_n < 2) | (theirs_n > 5)
        if wrong.any():
            i = int(np.argmax(wrong))
            raise SampleFormatError("bad_observation", f"position {i} has {mine_n[i]} and "
                                    f"{theirs_n[i]} stones; a running game has 2 to 5 a side")


def _check_go_features(obs: np.ndarray) -> None:
    """Go's ``features`` planes: each side's liberty classes split its stones exactly
    (every stone in one class), and the ko point is empty."""
    for stones, first in ((OWN, OWN_LIBS), (OPP, OPP_LIBS)):
        classes = obs[:, first:first + 3].astype(np.int64).sum(axis=1)
        wrong = (classes != obs[:, stones]).reshape(obs.shape[0], -1).any(axis=1)
        if wrong.any():
            raise SampleFormatError("bad_observation", f"position {int(np.argmax(wrong))}: "
                                    "the liberty planes do not split the stones")
    on_stone = (obs[:, KO] & (obs[:, OWN] | obs[:, OPP])).reshape(obs.shape[0], -1).any(axis=1)
    if on_stone.any():
        raise SampleFormatError("bad_observation", f"position {int(np.argmax(on_stone))}: "
                                "the ko point holds a stone")


def _check_policy(game: Game, obs: np.ndarray, policy: np.ndarray,
                  positions: np.ndarray) -> None:
    """Check the policy rows of ``obs``/``policy``; ``positions`` numbers them in the game."""
    if not np.isfinite(policy).all() or (policy < 0).any():
        raise SampleFormatError("bad_policy", "policy has negative or non-finite entries")
    sums = policy.sum(axis=1, dtype=np.float64)
    off = np.abs(sums - 1.0) > POLICY_SUM_TOL
    if off.any():
        i = int(np.argmax(off))
        raise SampleFormatError("bad_policy", f"policy of position {positions[i]} sums to "
                                f"{sums[i]:.6g}, not 1 (+-{POLICY_SUM_TOL})")
    illegal = np.where(legal_superset(game, obs), 0.0, policy).sum(axis=1, dtype=np.float64)
    bad = illegal > ILLEGAL_MASS_TOL
    if bad.any():
        i = int(np.argmax(bad))
        raise SampleFormatError("illegal_policy", f"position {positions[i]} puts "
                                f"{illegal[i]:.4g} of its policy on illegal moves")


SCORE_TOL = 1e-3
"""Allowed |score - (ownership balance - komi)|: both are exact, the score a float."""


def _check_aux(game: Game, samples: GameSamples) -> None:
    """The final ownership and score of a Go game agree with each other and the outcome."""
    if not isinstance(game, Go):
        raise SampleFormatError("bad_aux_target", f"{game.spec.spec_string} has no "
                                "territory: its games carry no ownership or score")
    if samples.ownership is None or samples.score is None:
        raise SampleFormatError("bad_aux_target", "ownership and score come together")
    balance = int(samples.ownership.astype(np.int64).sum())
    if abs(balance - game.komi - samples.score) > SCORE_TOL:
        raise SampleFormatError("bad_aux_target", f"score {samples.score:g} is not the "
                                f"ownership's balance {balance} less komi {game.komi:g}")
    sign = int(np.sign(samples.score))
    if sign != samples.outcome:
        raise SampleFormatError("bad_aux_target", f"outcome {samples.outcome} disagrees with "
                                f"the final score {samples.score:g}")


def _check_outcome(game: Game, obs: np.ndarray, to_play: np.ndarray, outcome: int) -> None:
    if isinstance(game, Go):
        if outcome == 0 and not float(game.komi).is_integer():
            raise SampleFormatError("bad_outcome_for_position", f"a draw with komi {game.komi} "
                                    "(only a whole-number komi can draw)")
        return  # the score depends on the unrecorded last move: nothing more to tell
    possible = _final_outcomes(game, obs[-1], int(to_play[-1]), obs.shape[0])
    if outcome not in possible:
        can = ", ".join(f"{o:+d}" for o in sorted(possible)) or "none: no move ends the game"
        raise SampleFormatError("bad_outcome_for_position", f"outcome {outcome:+d} cannot "
                                f"follow from the last position (possible: {can})")


def _final_outcomes(game: Game, last: np.ndarray, mover: int, plies: int) -> set[int]:
    """Outcomes a single legal move from ``last`` [C, H, W] (``plies - 1`` moves played,
    ``mover`` to move) can end the game with, by running the rules on every such move."""
    legal = np.flatnonzero(legal_superset(game, last[None])[0])
    if legal.size == 0:
        return set()
    mine, theirs = game.piece_planes()
    board = np.where(last[mine].reshape(-1) == 1, mover + 1,
                     np.where(last[theirs].reshape(-1) == 1, 2 - mover, 0)).astype(np.int8)
    n = legal.size
    if isinstance(game, Gomoku):
        if _has_line(game, board):
            return set()  # a line already stands: the game was over before this position
        state = GomokuState(
            to_play=np.full(n, mover, np.int8), ply=np.full(n, plies - 1, np.int32),
            terminal=np.zeros(n, bool), outcome=np.zeros(n, np.int8),
            legal=np.tile(board == 0, (n, 1)), last_action=np.full(n, -1, np.int32),
            board=np.tile(board, (n, 1)))
        after = game.step(state, legal)
        return {int(o) for o in after.outcome[after.terminal]}
    if isinstance(game, FiveStone):
        start = game.from_boards(np.tile(board, (n, 1)), np.full(n, mover, np.int8), plies - 1)
        if start.terminal.any():
            return set()  # the mover had already lost: the game was over
        moved = game.step(start, legal)
        possible = {int(o) for o in moved.outcome[moved.terminal]}
        if last[3].any():
            possible.add(0)  # a move repeats an earlier position: the planes say so
        return possible
    raise TypeError(f"no outcome check for {type(game).__name__}")


def _has_line(game: Gomoku, board: np.ndarray) -> bool:
    """Whether ``board`` [H*W] (0 empty, 1 and 2 the sides' stones) has a winning line:
    a maximal run of k stones of one side (k or more unless ``exact``)."""
    grid = board.reshape(game.height, game.width)
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r, c in zip(*np.nonzero(grid), strict=True):
            pr, pc = r - dr, c - dc
            if 0 <= pr < game.height and 0 <= pc < game.width and grid[pr, pc] == grid[r, c]:
                continue  # not the start of its run
            n, rr, cc = 0, r, c
            while 0 <= rr < game.height and 0 <= cc < game.width and grid[rr, cc] == grid[r, c]:
                n, rr, cc = n + 1, rr + dr, cc + dc
            if n == game.k or (n > game.k and not game.exact):
                return True
    return False


def mismatch(game: Game, samples: GameSamples) -> str | None:
    """Why ``samples`` cannot train a net for ``game`` (another game, rules version,
    observation or action shape), or None if they can."""
    spec = game.spec
    if samples.game != spec.spec_string or samples.game_version != spec.version:
        return (f"game {samples.game!r} v{samples.game_version}, but this run plays "
                f"{spec.spec_string!r} v{spec.version}")
    if tuple(samples.obs.shape[1:]) != tuple(spec.obs_shape):
        return f"observations {tuple(samples.obs.shape[1:])}, expected {spec.obs_shape}"
    if samples.policy.shape[1] != spec.num_actions:
        return f"{samples.policy.shape[1]} actions, expected {spec.num_actions}"
    return None


def size_rejection(games: Mapping[str, Game], run_game: Game, samples: GameSamples
                   ) -> tuple[str, str | None]:
    """``rejection`` in a run that plays several board sizes (``selfplay.board_sizes``):
    ``games`` are its games by spec string, one per size. A game of one of them is checked
    against that size's rules; the run's game at a size it does not play is
    ``wrong_size``; anything else is checked against ``run_game`` (so ``wrong_game``)."""
    game = games.get(samples.game)
    if game is not None:
        return rejection(game, samples)
    if differs_only_in_size(samples.game, run_game.spec.spec_string):
        sizes = ", ".join(f"{g.spec.board_shape[0]}x{g.spec.board_shape[1]}"
                          for g in games.values())
        return "wrong_size", (f"a game of {samples.game!r}, a board size this run does not "
                              f"play (it plays {sizes})")
    return rejection(run_game, samples)


def rejection(game: Game, samples: GameSamples) -> tuple[str, str | None]:
    """``(reason, why)`` if ``samples`` must not enter the replay window of a learner of
    ``game``, else ``("", None)``: ``wrong_game`` (``mismatch``), then the semantic checks
    of ``check_game``."""
    problem = mismatch(game, samples)
    if problem:
        return "wrong_game", problem
    try:
        check_game(game, samples)
    except SampleFormatError as err:
        return err.reason, str(err)
    return "", None
