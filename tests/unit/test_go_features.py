"""Go's ``features`` observation (chain liberties, ko point, last moves) and final ownership.

Boards in pictures read like ``render`` prints them: row 0 at the top, ``X`` black, ``O``
white, ``.`` empty. Expected planes are pictures too: a digit per point, ``.`` for 0.
Random positions are checked against plain set-based searches written here.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_go import DAME, KO, SEKI, play, position
from zeroforge.shared.games import (
    BLACK,
    EMPTY,
    MOVES,
    OPP,
    OPP_LIBS,
    OWN,
    OWN_LIBS,
    WHITE,
    Go,
    GoState,
    make_game,
    make_go,
    sample_legal,
)
from zeroforge.shared.games import KO as KO_PLANE


def grid(picture: str) -> np.ndarray:
    """[H, W] int from a picture of digits and signs (``.`` 0, ``+`` 1, ``-`` -1)."""
    rows = [line.split() for line in picture.strip().splitlines()]
    signs = {".": 0, "+": 1, "-": -1}
    return np.array([[signs[c] if c in signs else int(c) for c in r] for r in rows])


def marks(game: Go, *moves: str) -> np.ndarray:
    """[H, W] uint8 plane with ones at the named points."""
    plane = np.zeros(game.num_points, np.uint8)
    for m in moves:
        plane[game.parse_action(m)] = 1
    return plane.reshape(game.size, game.size)


# --- slow, obviously-correct references -----------------------------------------------------
def ref_neighbors(p: int, size: int) -> list[int]:
    r, c = divmod(p, size)
    return [rr * size + cc for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
            if 0 <= rr < size and 0 <= cc < size]


def ref_region(board: list[int], p: int, size: int) -> tuple[set[int], set[int]]:
    """The points connected to ``p`` holding its value, and the values next to them."""
    region, todo, touching = {p}, [p], set()
    while todo:
        q = todo.pop()
        for s in ref_neighbors(q, size):
            if board[s] == board[p] and s not in region:
                region.add(s)
                todo.append(s)
            elif board[s] != board[p]:
                touching.add((board[s], s))
    return region, touching


def ref_liberties(board: list[int], size: int) -> list[int]:
    """Liberties of the chain through each point (0 on empty points)."""
    out = [0] * len(board)
    for p, v in enumerate(board):
        if v != EMPTY:
            out[p] = len({s for val, s in ref_region(board, p, size)[1] if val == EMPTY})
    return out


def ref_owner(board: list[int], size: int) -> list[int]:
    out = []
    for p, v in enumerate(board):
        if v != EMPTY:
            out.append(1 if v == BLACK else -1)
            continue
        reach = {val for val, _ in ref_region(board, p, size)[1]}
        out.append({frozenset({BLACK}): 1, frozenset({WHITE}): -1}.get(frozenset(reach), 0))
    return out


def ref_features(game: Go, state: GoState, i: int, moves: list[int]) -> np.ndarray:
    """The ``features`` planes of game ``i`` from scratch; ``moves`` are all its actions."""
    n, size = game.num_points, game.size
    board = state.board[i].tolist()
    libs = ref_liberties(board, size)
    me = int(state.to_play[i]) + 1
    out = np.zeros((game.spec.obs_shape[0], n), np.uint8)
    for p, v in enumerate(board):
        if v == EMPTY:
            continue
        side = 0 if v == me else 1
        out[side, p] = 1
        out[(OWN_LIBS, OPP_LIBS)[side] + min(libs[p], 3) - 1, p] = 1
    ko = int(state.ko_point[i])
    if ko >= 0 and not state.legal[i, ko]:
        out[KO_PLANE, ko] = 1
    for t, a in enumerate(reversed(moves[-(game.history - 1):])):
        if a < n:
            out[MOVES + t, a] = 1
    out[-1] = int(state.to_play[i]) == 0
    return out.reshape(-1, size, size)


# --- the preset and its spec ----------------------------------------------------------------
def test_features_preset_spec_and_version():
    g = make_game("go:size=9,obs=features")
    assert isinstance(g, Go) and g.history == 4
    assert g.spec.spec_string == "go:size=9,komi=7.5,ko=superko,obs=features"
    assert g.spec.obs_shape == (13, 9, 9)
    assert make_game(g.spec.spec_string).spec == g.spec
    # a new encoding, a new version; the existing presets keep theirs
    assert g.spec.version == 2
    assert make_game("go9").spec.version == make_game("go:size=9,obs=compact").spec.version == 1
    assert g.piece_planes() == (OWN, OPP) == (0, 1)
    longer = make_game("go:size=7,obs=features,history=6")
    assert longer.spec.obs_shape == (15, 7, 7)
    assert longer.spec.spec_string.endswith("obs=features,history=6")
    assert make_game(longer.spec.spec_string).spec == longer.spec
    assert make_game("go:size=7,obs=features,history=1").spec.obs_shape == (10, 7, 7)
    with pytest.raises(ValueError, match="obs='featurez'"):
        make_game("go:obs=featurez")


# --- liberties ------------------------------------------------------------------------------
CHAINS = """
    X O . . .
    X O . X X
    . X . X O
    . . . . O
    O X . O .
"""
CHAIN_LIBERTIES = """
    1 2 . . .
    1 2 . 5 5
    . 3 . 5 2
    . . . . 2
    1 2 . 3 .
"""  # the D4-E4-D3 chain has 5 liberties: the ">= 3" plane


def test_liberty_planes_of_known_chains():
    g = make_go(size=5, obs="features")
    libs = grid(CHAIN_LIBERTIES)
    for to_play in (0, 1):
        s = position(g, CHAINS, to_play=to_play)
        obs = g.observe(s)[0]
        board = s.board[0].reshape(5, 5)
        mine, theirs = (BLACK, WHITE) if to_play == 0 else (WHITE, BLACK)
        np.testing.assert_array_equal(obs[OWN], board == mine)
        np.testing.assert_array_equal(obs[OPP], board == theirs)
        for k, want in enumerate([libs == 1, libs == 2, libs >= 3]):
            np.testing.assert_array_equal(obs[OWN_LIBS + k], want & (board == mine), f"own {k}")
            np.testing.assert_array_equal(obs[OPP_LIBS + k], want & (board == theirs),
                                          f"opp {k}")
        assert (obs[KO_PLANE] == 0).all() and (obs[MOVES:-1] == 0).all()  # set-up: no moves
        assert (obs[-1] == (to_play == 0)).all()
    # the reference agrees with the hand count
    np.testing.assert_array_equal(
        np.array(ref_liberties(position(g, CHAINS).board[0].tolist(), 5)).reshape(5, 5), libs)


def test_liberty_planes_follow_merges_and_captures():
    g = make_go(size=5, obs="features")
    s = play(g, position(g, CHAINS), "A3")  # joins A5-A4 and B3: liberties A2, B2, C3
    obs = g.observe(s)[0]  # white's view
    np.testing.assert_array_equal(obs[OPP_LIBS + 0], marks(g))
    np.testing.assert_array_equal(obs[OPP_LIBS + 1], marks(g, "B1"))
    np.testing.assert_array_equal(obs[OPP_LIBS + 2],
                                  marks(g, "A5", "A4", "A3", "B3", "D4", "E4", "D3"))
    np.testing.assert_array_equal(obs[OWN_LIBS + 0], marks(g, "A1"))
    s = play(g, s, "A2", "B2")  # white extends A1 to A2 (one liberty, B2); black takes both
    assert s.captures[0].tolist() == [2, 0]
    obs = g.observe(s)[0]
    np.testing.assert_array_equal(obs[OPP_LIBS + 0], marks(g))
    np.testing.assert_array_equal(obs[OPP_LIBS + 1], marks(g))  # B1 joined B2-B3-...
    np.testing.assert_array_equal(obs[OWN_LIBS + 2], marks(g, "D1"))
    moves = [g.parse_action(m) for m in ("A3", "A2", "B2")]
    np.testing.assert_array_equal(obs, ref_features(g, s, 0, moves))


# --- ko and last moves (KO: test_go's ko shape) ---------------------------------------------


@pytest.mark.parametrize("rule", ["simple", "superko"])
def test_ko_point_after_a_single_stone_capture(rule):
    g = make_go(size=5, ko=rule, obs="features")
    s = play(g, position(g, KO), "C3")  # black takes B3; white may not retake at once
    obs = g.observe(s)[0]
    np.testing.assert_array_equal(obs[KO_PLANE], marks(g, "B3"))
    np.testing.assert_array_equal(obs[MOVES], marks(g, "C3"))
    assert (obs[MOVES + 1] == 0).all() and (obs[MOVES + 2] == 0).all()
    # the black C3 stone is the opponent's now, in atari (its one liberty is B3)
    np.testing.assert_array_equal(obs[OPP_LIBS], marks(g, "C3"))
    s = play(g, s, "E5")  # a ko threat: the ban has lapsed for black's next move
    assert (g.observe(s)[0, KO_PLANE] == 0).all()
    s = play(g, s, "E1", "B3")  # answered; white retakes, and now black must wait
    obs = g.observe(s)[0]
    np.testing.assert_array_equal(obs[KO_PLANE], marks(g, "C3"))
    for t, m in enumerate(["B3", "E1", "E5"]):
        np.testing.assert_array_equal(obs[MOVES + t], marks(g, m), f"{t + 1} moves ago")


def test_ko_point_is_marked_only_when_the_mover_may_not_play_it():
    g = make_go(size=5, obs="features")
    taken = play(g, position(g, KO), "C3")
    # the same position set up with the ko given, and with a ko point that captures nothing
    again = g.from_board(taken.board, to_play=1, ko_point=g.parse_action("B3"))
    np.testing.assert_array_equal(g.observe(again)[0, KO_PLANE], marks(g, "B3"))
    loose = position(g, KO, ko_point=g.parse_action("E5"))
    assert loose.legal[0, g.parse_action("E5")]
    assert (g.observe(loose)[0, KO_PLANE] == 0).all()


def test_last_moves_skip_passes_and_outlive_captures():
    g = make_go(size=5, obs="features", history=6)  # 5 last-move planes
    # black takes the ko at C3, white passes, black E1, white retakes at B3 (capturing C3)
    s = play(g, position(g, KO), "C3", "pass", "E1", "B3", "E2")
    assert s.board[0, g.parse_action("C3")] == EMPTY
    obs = g.observe(s)[0]
    for t, want in enumerate(["E2", "B3", "E1", None, "C3"]):
        plane = marks(g, want) if want else marks(g)
        np.testing.assert_array_equal(obs[MOVES + t], plane, f"{t + 1} moves ago")
    short = make_go(size=5, obs="features", history=1)
    obs = short.observe(play(short, short.init(1), "C3"))[0]
    assert obs.shape[0] == 10 and (obs[-1] == 0).all()  # no move planes; white to move
    np.testing.assert_array_equal(obs[OPP], marks(short, "C3"))


def test_observation_is_the_same_position_seen_by_each_side():
    g = make_go(size=5, obs="features")
    black, white = (g.observe(position(g, CHAINS, to_play=t))[0] for t in (0, 1))
    swap = [OPP, OWN, *range(OPP_LIBS, OPP_LIBS + 3), *range(OWN_LIBS, OWN_LIBS + 3)]
    np.testing.assert_array_equal(white[:8], black[swap])
    assert (black[-1] == 1).all() and (white[-1] == 0).all()


# --- random positions: reference, batching, symmetries --------------------------------------
def random_states(game: Go, batch: int, plies: int, seed: int):
    """A batch of random games after ``plies`` moves, and the actions [T, B] played."""
    rng = np.random.default_rng(seed)
    s = game.init(batch)
    actions = []
    for _ in range(plies):
        a = sample_legal(s.legal, rng)
        actions.append(np.where(s.terminal, -1, a))
        s = game.step(s, a)
    return s, np.array(actions).reshape(-1, batch)


@pytest.mark.parametrize(("size", "ko", "plies"), [(5, "simple", 30), (9, "superko", 70)])
def test_random_positions_match_the_reference(size, ko, plies):
    g = make_go(size=size, ko=ko, obs="features")
    s, actions = random_states(g, batch=8, plies=plies, seed=size)
    obs = g.observe(s)
    assert obs.shape == (8, *g.spec.obs_shape) and obs.dtype == np.uint8
    assert obs[:, OWN_LIBS + 2].any() and obs[:, OPP_LIBS].any()  # the test sees variety
    for i in range(8):
        moves = [int(a) for a in actions[:, i] if a >= 0]
        np.testing.assert_array_equal(obs[i], ref_features(g, s, i, moves), f"game {i}")
        np.testing.assert_array_equal(g.observe(s.take([i]))[0], obs[i])


def test_features_commute_with_every_symmetry():
    g = make_go(size=7, obs="features")
    start = position(g, """
        . . . . . . .
        . . X O . . .
        . X O . O . .
        . . X O . . X
        . . . . . X O
        . O . . . . .
        . . . . . . .
    """)
    # a ko taken (D5 takes C5), a pass, the ko retaken, then random play
    rng = np.random.default_rng(3)
    states, played = [start], []
    for m in ["D5", "G2", "pass", "C5"] + [None] * 8:
        s = states[-1]
        a = g.parse_action(m) if m else int(sample_legal(s.legal, rng)[0])
        states.append(g.step(s, np.array([a])))
        played.append(a)
    np.testing.assert_array_equal(g.observe(states[1])[0, KO_PLANE], marks(g, "C5"))
    np.testing.assert_array_equal(g.observe(states[4])[0, KO_PLANE], marks(g, "D5"))
    for sym in g.symmetries():
        inv = np.empty_like(sym.action_perm)
        inv[sym.action_perm] = np.arange(sym.action_perm.size)
        s = g.from_board(start.board[:, sym.point_perm])
        assert np.array_equal(g.observe(s), sym.apply_obs(g.observe(start)))
        for t, a in enumerate(played):
            s = g.step(s, np.array([inv[a]]))
            np.testing.assert_array_equal(g.observe(s), sym.apply_obs(g.observe(states[t + 1])),
                                          f"{sym.name} after {t + 1} moves")


# --- ownership and score margin -------------------------------------------------------------
# (on test_go's SEKI and DAME positions)
SEKI_OWNER = """
    . + + + .
    - - - - -
    + + + + +
    + + + + +
    + + + + +
"""
DAME_OWNER = """
    + + - - -
    + + - - -
    + + . - -
    + + - - -
    + + - - -
"""


def test_ownership_of_known_positions():
    g = make_go(size=5, komi=0.5)
    both = GoState.concat([position(g, SEKI), position(g, DAME)])
    owner = g.ownership(both)
    assert owner.shape == (2, 5, 5) and owner.dtype == np.int8
    np.testing.assert_array_equal(owner[0], grid(SEKI_OWNER))
    np.testing.assert_array_equal(owner[1], grid(DAME_OWNER))
    np.testing.assert_allclose(owner.sum((1, 2)) - g.komi, g.score(both))
    np.testing.assert_allclose(g.score_margin(both), [18 - 5 - 0.5, 10 - 14 - 0.5])
    assert g.score_margin(both).dtype == np.float32
    assert (g.ownership(g.init(3)) == 0).all()


@pytest.mark.parametrize(("size", "plies"), [(5, 20), (7, 60), (9, 200)])
def test_ownership_sums_to_the_score_on_random_positions(size, plies):
    g = make_go(size=size, komi=6.5)
    s, _ = random_states(g, batch=16, plies=plies, seed=plies)
    owner = g.ownership(s)
    np.testing.assert_allclose(owner.sum((1, 2)) - g.komi, g.score(s))
    np.testing.assert_allclose(g.score_margin(s), g.score(s).astype(np.float32))
    for i in range(4):
        want = np.array(ref_owner(s.board[i].tolist(), size)).reshape(size, size)
        np.testing.assert_array_equal(owner[i], want, f"game {i}")
    if s.terminal.any():  # a finished game's outcome is the sign of the ownership margin
        done = s.terminal
        assert (np.sign(owner[done].sum((1, 2)) - g.komi) == s.outcome[done]).all()


@pytest.mark.parametrize("spec", ["tictactoe", "gomoku6", "5stone_chess"])
def test_games_without_territory_have_no_ownership_or_score(spec):
    game = make_game(spec)
    state = game.init(2)
    assert game.ownership(state) is None and game.score_margin(state) is None
