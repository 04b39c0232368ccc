"""Go rules: captures, suicide, ko and superko, game end, Tromp-Taylor scoring, notation,
observations, and random games checked against a slow pure-Python reference.

Boards in pictures read like ``render`` prints them: row 0 at the top, ``X`` black,
``O`` white, ``.`` empty. Points are given in GTP notation (``D4``: column letter without
I, row counted from the bottom).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zeroforge.shared.games import (
    BLACK,
    COUNT_SHIFT,
    EMPTY,
    HASH_MASK,
    WHITE,
    GameSession,
    Go,
    GoState,
    IllegalMoveError,
    make_game,
    make_go,
    sample_legal,
)


def position(game: Go, picture: str, to_play: int = 0, ko_point: int = -1) -> GoState:
    return game.position_from_ascii(picture, to_play=to_play, ko_point=ko_point)


def play(game: Go, state: GoState, *moves: str) -> GoState:
    """Play moves given in GTP notation, one after the other, in game 0 of a batch of 1."""
    for m in moves:
        state = game.step(state, np.array([game.parse_action(m)]))
    return state


def legal(game: Go, state: GoState, move: str) -> bool:
    return bool(state.legal[0, game.parse_action(move)])


def at(game: Go, state: GoState, move: str) -> int:
    return int(state.board[0, game.parse_action(move)])


# --- a slow, obviously-correct reference ------------------------------------------------
def ref_neighbors(p: int, size: int) -> list[int]:
    r, c = divmod(p, size)
    out = []
    for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if 0 <= rr < size and 0 <= cc < size:
            out.append(rr * size + cc)
    return out


def ref_group(board: list[int], p: int, size: int) -> tuple[set[int], set[int]]:
    """Stones of the group at ``p`` and its liberties, by a plain set-based search."""
    color, stones, libs, todo = board[p], {p}, set(), [p]
    while todo:
        q = todo.pop()
        for s in ref_neighbors(q, size):
            if board[s] == EMPTY:
                libs.add(s)
            elif board[s] == color and s not in stones:
                stones.add(s)
                todo.append(s)
    return stones, libs


def ref_play(board: list[int], p: int, color: int, size: int):
    """(board after, captured points, suicide?) for a stone of ``color`` on empty ``p``."""
    b = list(board)
    b[p] = color
    captured: set[int] = set()
    for q in ref_neighbors(p, size):
        if b[q] == 3 - color and q not in captured:
            stones, libs = ref_group(b, q, size)
            if not libs:
                captured |= stones
    for q in captured:
        b[q] = EMPTY
    return b, captured, not ref_group(b, p, size)[1]


def ref_mask(board: list[int], color: int, size: int, ko: str, earlier: set[tuple],
             last_take: tuple[int, int] | None) -> np.ndarray:
    """Legal moves from first principles. ``last_take`` = (point emptied, stone placed) when
    the previous move captured exactly one stone; ``earlier`` = all boards so far."""
    n = size * size
    mask = np.zeros(n + 1, bool)
    mask[n] = True
    for p in range(n):
        if board[p] != EMPTY:
            continue
        after, captured, suicide = ref_play(board, p, color, size)
        if suicide:
            continue
        if ko == "simple":
            if last_take is not None and p == last_take[0] and captured == {last_take[1]}:
                continue
        elif tuple(after) in earlier:
            continue
        mask[p] = True
    return mask


def ref_score(board: list[int], size: int) -> tuple[int, int]:
    """Tromp-Taylor areas (black, white)."""
    black, white = board.count(BLACK), board.count(WHITE)
    seen: set[int] = set()
    for p in range(size * size):
        if board[p] != EMPTY or p in seen:
            continue
        region, reach, todo = {p}, set(), [p]
        while todo:
            q = todo.pop()
            for s in ref_neighbors(q, size):
                if board[s] == EMPTY and s not in region:
                    region.add(s)
                    todo.append(s)
                elif board[s] != EMPTY:
                    reach.add(board[s])
        seen |= region
        if reach == {BLACK}:
            black += len(region)
        elif reach == {WHITE}:
            white += len(region)
    return black, white


# --- registry, spec, notation ---------------------------------------------------------------
def test_defaults_and_spec_round_trip():
    g = make_game("go")
    assert isinstance(g, Go)
    assert (g.size, g.komi, g.ko, g.obs, g.history) == (9, 7.5, "superko", "agz", 8)
    assert g.spec.spec_string == "go:size=9,komi=7.5,ko=superko,obs=agz"
    assert g.spec.num_actions == 82 and g.spec.max_moves == 162
    assert g.spec.obs_shape == (17, 9, 9)
    for spec in ("go:size=13,komi=6,ko=simple", "go:size=7,obs=compact,komi=0.5",
                 "go:size=5,max_moves=30,history=2", "go19"):
        again = make_game(make_game(spec).spec.spec_string)
        assert again.spec == make_game(spec).spec
    assert make_game("go:size=9,komi=7").spec.spec_string == "go:size=9,komi=7,ko=superko,obs=agz"
    assert make_game("go:size=9,max_moves=162").spec == g.spec  # the default cap is implied
    assert make_game("go:size=7,obs=compact").spec.obs_shape == (10, 7, 7)


@pytest.mark.parametrize("bad", ["go:size=4", "go:size=20", "go:ko=japanese", "go:obs=big",
                                 "go:komi=nan", "go:max_moves=0", "go:history=0"])
def test_bad_options_are_rejected(bad):
    with pytest.raises(ValueError):
        make_game(bad)


def test_parse_and_format_round_trip():
    g = make_go(size=19)
    for a in range(g.spec.num_actions):
        assert g.parse_action(g.format_action(a)) == a
    assert g.format_action(0) == "A19" and g.format_action(360) == "T1"
    assert g.parse_action("d4") == g.parse_action("D4") == 15 * 19 + 3
    assert g.parse_action(" PASS ") == g.parse_action("pass") == 361
    assert g.format_action(361) == "pass"
    for bad in ("I5", "U1", "A20", "A0", "pas", ""):
        with pytest.raises(IllegalMoveError):
            g.parse_action(bad)


def test_symmetries_keep_pass_in_place():
    g = make_go(size=9)
    syms = g.symmetries()
    assert len(syms) == 8 and syms[0].name == "identity"
    for s in syms:
        assert s.action_perm[81] == 81
        assert sorted(s.action_perm[:81]) == list(range(81))


# --- captures -------------------------------------------------------------------------------
def test_single_stone_capture_in_the_middle():
    g = make_go(size=5)
    s = position(g, """
        . . . . .
        . . X . .
        . X O . .
        . . X . .
        . . . . .
    """)
    s = play(g, s, "D3")
    assert at(g, s, "C3") == EMPTY and at(g, s, "D3") == BLACK
    assert s.captures[0].tolist() == [1, 0]


def test_edge_and_corner_captures():
    g = make_go(size=5)
    s = position(g, """
        O X . . .
        . . . . .
        . . . . .
        X . . . .
        O . . . .
    """)
    assert (at(g, s, "A5"), at(g, s, "A1")) == (WHITE, WHITE)  # corners with one liberty each
    s = play(g, s, "B1")  # black takes the bottom-left corner
    assert at(g, s, "A1") == EMPTY and at(g, s, "A5") == WHITE
    s = play(g, s, "E3", "A4")  # white plays elsewhere, black takes the top-left corner
    assert at(g, s, "A5") == EMPTY
    assert s.captures[0].tolist() == [2, 0]
    edge = position(g, """
        . . . . .
        X . . . .
        O X . . .
        O X . . .
        . . . . .
    """)
    edge = play(g, edge, "A1")  # two white stones on the edge lose their last liberty
    assert at(g, edge, "A3") == EMPTY and at(g, edge, "A2") == EMPTY
    assert edge.captures[0, 0] == 2


def test_multi_stone_and_double_group_capture():
    g = make_go(size=7)
    s = position(g, """
        . . . . . . .
        . X X X . . .
        X O O O X . .
        . X X . O X .
        . . . X O X .
        . . . . X . .
        . . . . . . .
    """)
    # D4 fills the last liberty of both the three-stone group and the two-stone group.
    s = play(g, s, "D4")
    for p in ("B5", "C5", "D5", "E4", "E3"):
        assert at(g, s, p) == EMPTY, p
    assert s.captures[0].tolist() == [5, 0]
    assert int((s.board[0] == WHITE).sum()) == 0


# --- suicide --------------------------------------------------------------------------------
def test_suicide_is_illegal_but_a_capture_that_looks_like_suicide_is_legal():
    g = make_go(size=5)
    s = position(g, """
        . X . . .
        X . X . .
        . X O . .
        . . . . .
        . . . . .
    """, to_play=1)
    # White in the black eye at B4 has no liberty and captures nothing; A5 likewise.
    assert not legal(g, s, "B4") and not legal(g, s, "A5")
    assert "suicide" in g.illegal_reason(s, 0, g.parse_action("B4"))
    # Multi-stone suicide: White filling the last liberty of its own three stones.
    s2 = position(g, """
        . X X . .
        X O O X .
        X O . X .
        . X X . .
        . . . . .
    """, to_play=1)
    assert not legal(g, s2, "C3")
    assert "suicide" in g.illegal_reason(s2, 0, g.parse_action("C3"))
    assert legal(g, g.with_to_play(s2, 0), "C3")  # for black it captures three stones
    capture = position(g, """
        . X O . .
        X O . . .
        . . . . .
        . . . . .
        . . . . .
    """, to_play=1)
    # A5 has no empty neighbour, but it captures the black B5 stone: legal.
    assert legal(g, capture, "A5")
    after = play(g, capture, "A5")
    assert at(g, after, "B5") == EMPTY and at(g, after, "A5") == WHITE
    # the lone white stone now has B5 as its only liberty: a ko that black can't retake yet
    assert after.ko_point[0] == g.parse_action("B5") and not legal(g, after, "B5")


# --- ko ---------------------------------------------------------------------------------------
KO = """
    . . . . .
    . X O . .
    X O . O .
    . X O . .
    . . . . .
"""


@pytest.mark.parametrize("rule", ["simple", "superko"])
def test_simple_ko_recapture_waits_one_move(rule):
    g = make_go(size=5, ko=rule)
    s = play(g, position(g, KO), "C3")  # black takes the ko
    assert at(g, s, "B3") == EMPTY
    assert not legal(g, s, "B3")
    assert g.illegal_reason(s, 0, g.parse_action("B3")).startswith("ko")
    s = play(g, s, "E5", "E1")  # a ko threat elsewhere, answered
    assert legal(g, s, "B3")
    s = play(g, s, "B3")
    assert at(g, s, "C3") == EMPTY and at(g, s, "B3") == WHITE
    assert not legal(g, s, "C3")  # and now black must wait


def test_recapture_that_takes_more_than_one_stone_is_not_ko():
    g = make_go(size=5, ko="simple")
    # Set-up with the ko marked at B5 (as if black had just taken there with C5). Retaking at
    # B5 also captures the black A5 stone, so it is not the recapture of a single stone.
    more = position(g, """
        X . X O .
        O X O . .
        . . . . .
        . . . . .
        . . . . .
    """, to_play=1, ko_point=g.parse_action("B5"))
    assert legal(g, more, "B5")
    after = play(g, more, "B5")
    assert at(g, after, "A5") == EMPTY and at(g, after, "C5") == EMPTY
    assert after.captures[0].tolist() == [0, 2]
    single = position(g, """
        X . X O .
        . X O . .
        . . . . .
        . . . . .
        . . . . .
    """, to_play=1, ko_point=g.parse_action("B5"))
    assert not legal(g, single, "B5")  # here it would take back C5 alone


TRIPLE_KO = """
    . . . . . . . . .
    . X O . . . X O .
    X O . O . X . X O
    . X O . . . X O .
    . . . . . . . . .
    . X O . . . . . .
    X O . O . . . . .
    . X O . . . . . .
    . . . . . . . . .
"""
# Three kos; Black can take the left two (C7, C3), White the right one (G7). Taking them in
# turn returns to the start after six captures, none of them an immediate recapture.
CYCLE = ("C7", "G7", "C3", "B7", "H7", "B3")


def test_triple_ko_cycle_is_allowed_by_simple_ko_and_forbidden_by_superko():
    simple = make_go(size=9, ko="simple")
    s = position(simple, TRIPLE_KO)
    start = s.board.copy()
    for move in CYCLE:
        assert legal(simple, s, move), move
        s = play(simple, s, move)
    np.testing.assert_array_equal(s.board, start)  # the whole board repeats
    assert s.to_play[0] == 0 and s.captures[0].tolist() == [3, 3]

    superko = make_go(size=9, ko="superko")
    s = position(superko, TRIPLE_KO)
    s = play(superko, s, *CYCLE[:-1])
    last = superko.parse_action(CYCLE[-1])
    assert not s.legal[0, last]
    assert s.legal[0, superko.pass_action]
    assert superko.illegal_reason(s, 0, last).startswith("superko (repeats an earlier position)")
    with pytest.raises(ValueError):
        superko.step(s, np.array([last]))
    session = GameSession(superko, s)
    with pytest.raises(IllegalMoveError, match="superko"):
        session.play(CYCLE[-1])


def test_only_positions_before_the_last_capture_are_checked_for_repeats():
    g = make_go(size=5)
    s = play(g, g.init(1), "C3", "D4")
    assert s.repeat_limit[0] == 0 and s.num_positions[0] == 3  # no capture yet: no repeats
    s = play(g, position(g, KO), "E5", "A1", "C3")  # black captures
    assert s.num_positions[0] == 4 and s.repeat_limit[0] == 3  # everything before C3's result
    s = play(g, s, "E1")
    assert s.repeat_limit[0] == 3


def test_superko_bans_exactly_the_repeatable_positions():
    g = make_go(size=5)
    s = g.init(1)
    after_c3 = g.position_keys(play(g, s, "C3").board)[0]
    # Pretend the position after C3 occurred earlier; it is banned only inside the window.
    fake = s.copy()
    fake.position_hashes[0, 1] = after_c3
    fake.num_positions[0] = 2
    fake.repeat_limit[0] = 2
    assert not legal(g, g.with_to_play(fake, 0), "C3")
    fake.repeat_limit[0] = 1
    assert legal(g, g.with_to_play(fake, 0), "C3")
    assert legal(g, g.with_to_play(fake, 1), "C3")  # a white stone there is another position


def test_superko_hash_counts_a_group_touching_the_move_twice_once():
    g = make_go(size=5)
    s = position(g, """
        . X X . .
        X O O X .
        X O . X .
        . X X X .
        . . . . .
    """)
    result = play(g, s, "C3")  # captures the three white stones, which touch C3 twice
    assert result.captures[0, 0] == 3
    fake = s.copy()
    fake.position_hashes[0, 1] = g.position_keys(result.board)[0]
    fake.num_positions[0] = fake.repeat_limit[0] = 2
    assert not legal(g, g.with_to_play(fake, 0), "C3")


def test_superko_bans_both_a_capturing_and_a_quiet_repeat():
    # One earlier position is recreated by a move that takes two stones, another by a move
    # that takes nothing: both are banned, and nothing else.
    g = make_go(size=5)
    s = position(g, """
        . X X O .
        . O O . .
        . . . . .
        . . . . .
        . . . . .
    """, to_play=1)
    take_two = play(g, s, "A5")  # white takes B5 and C5
    assert take_two.captures[0].tolist() == [0, 2]
    quiet = play(g, s, "E1")
    fake = s.copy()
    fake.position_hashes[0, 1] = g.position_keys(take_two.board)[0]
    fake.position_hashes[0, 2] = g.position_keys(quiet.board)[0]
    fake.num_positions[0] = fake.repeat_limit[0] = 3
    banned = g.with_to_play(fake, 1)
    expected = s.legal.copy()
    expected[0, [g.parse_action("A5"), g.parse_action("E1")]] = False
    np.testing.assert_array_equal(banned.legal, expected)


# --- end of game, scoring ---------------------------------------------------------------------
SEKI = """
    . X X X .
    O O O O O
    X X X X X
    . . . . .
    . . . . .
"""
# The white row and the black top row share their only liberties A5 and E5: whoever plays
# there first is captured, so both live (seki) and A5, E5 are neutral.

DAME = """
    . X O . .
    . X O . .
    . X . O .
    . X O . .
    . X O . .
"""


def test_tromp_taylor_scores_of_known_positions():
    g = make_go(size=5, komi=0.5)
    seki = position(g, SEKI)
    assert g.score(seki)[0] == pytest.approx(18 - 5 - 0.5)  # 8 stones + 10 territory vs 5
    dame = position(g, DAME)
    assert g.score(dame)[0] == pytest.approx(10 - 14 - 0.5)  # C3 touches both: nobody's
    assert g.score(g.init(1))[0] == pytest.approx(-0.5)
    both = GoState.concat([seki, dame])
    np.testing.assert_allclose(g.score(both), [12.5, -4.5])
    for pic in (SEKI, DAME):
        board = position(g, pic).board[0].tolist()
        b, w = ref_score(board, 5)
        assert g.score(position(g, pic))[0] == pytest.approx(b - w - 0.5)


def test_seki_is_left_alone_by_sensible_play():
    g = make_go(size=5)
    s = position(g, SEKI)
    assert legal(g, s, "A5") and legal(g, g.with_to_play(s, 1), "A5")  # legal self-ataris
    s = play(g, s, "A5")  # black self-ataris in the seki ...
    assert legal(g, s, "E5")
    s = play(g, s, "E5")  # ... and white captures four black stones
    assert s.captures[0].tolist() == [0, 4]


@pytest.mark.parametrize(("komi", "outcome"), [(5, 0), (4.5, 1), (5.5, -1), (4, 1), (6, -1)])
def test_two_passes_end_the_game_and_komi_decides(komi, outcome):
    g = make_go(size=5, komi=komi)
    s = position(g, """
        . . X O .
        . . X O .
        . . X O .
        . . X O .
        . . X O .
    """)
    s = play(g, s, "pass")
    assert not s.terminal[0] and s.passes[0] == 1
    s = play(g, s, "pass")
    assert s.terminal[0] and not s.legal.any()
    assert int(s.outcome[0]) == outcome  # 15 - 10 = 5 points for black before komi
    assert g.score(s)[0] == pytest.approx(5 - komi)
    shown = {1: "B+", -1: "W+", 0: "game over: 0 (draw)"}[outcome]
    assert "game over" in g.render(s) and shown in g.render(s)


def test_a_move_between_passes_keeps_the_game_going():
    g = make_go(size=5)
    s = play(g, g.init(1), "pass", "C3", "pass")
    assert not s.terminal[0] and s.passes[0] == 1


def test_move_cap_ends_the_game_and_scores_it_as_it_stands():
    g = make_game("go:size=5,max_moves=6,komi=0.5")
    assert g.spec.max_moves == 6
    s = play(g, g.init(1), "C3", "D4", "B2", "pass", "A1")
    assert not s.terminal[0]
    s = play(g, s, "E5")
    assert s.terminal[0] and s.ply[0] == 6
    # the open area touches both colours: 3 black stones against 2 white
    assert g.score(s)[0] == pytest.approx(0.5) and s.outcome[0] == 1


# --- people: reasons, render, set-up ------------------------------------------------------------
def test_illegal_reasons_through_a_session():
    g = make_go(size=5)
    session = GameSession(g, play(g, position(g, KO), "C3"))
    with pytest.raises(IllegalMoveError, match="occupied"):
        session.play("C3")
    with pytest.raises(IllegalMoveError, match="ko"):
        session.play("B3")
    eye = GameSession(g, position(g, """
        . X . . .
        X . . . .
        . . . . .
        . . . . .
        . . . . .
    """, to_play=1))
    with pytest.raises(IllegalMoveError, match="suicide"):
        eye.play("A5")
    with pytest.raises(IllegalMoveError, match="off the 5x5 board"):
        eye.play("F1")
    eye.play("pass")
    eye.play("pass")
    with pytest.raises(IllegalMoveError, match="over"):
        eye.play("C3")


def test_render_shows_coordinates_and_status_and_reads_back():
    g = make_go(size=9)
    s = play(g, g.init(1), "E5", "D4")
    text = g.render(s)
    assert "A B C D E F G H J" in text and " 9 " in text
    assert "Black (X) to play" in text and "komi 7.5" in text and "last move D4" in text
    again = g.position_from_ascii(text)
    np.testing.assert_array_equal(again.board, s.board)


def test_from_board_rejects_dead_groups_and_bad_pictures():
    g = make_go(size=5)
    with pytest.raises(ValueError, match="no liberty"):
        position(g, """
            X O . . .
            O . . . .
            . . . . .
            . . . . .
            . . . . .
        """)
    with pytest.raises(ValueError, match="5x5"):
        position(g, ". . .\n. . .")


def test_with_to_play_changes_the_mover_and_the_mask():
    g = make_go(size=5)
    s = position(g, """
        . X . . .
        X . . . .
        . . . . .
        . . . . .
        . . . . .
    """)
    assert legal(g, s, "A5")  # black fills its own eye: legal (not suicide)
    w = g.with_to_play(s, 1)
    assert w.to_play[0] == 1 and not legal(g, w, "A5")
    assert s.to_play[0] == 0  # the input is unchanged


# --- observations ---------------------------------------------------------------------------
def test_agz_observation_history_and_movers_view():
    g = make_go(size=5)
    s = play(g, g.init(1), "C3", "D4", "B2")  # white to move
    obs = g.observe(s)
    assert obs.shape == (1, 17, 5, 5) and obs.dtype == np.uint8
    c3, d4, b2 = (divmod(g.parse_action(m), 5) for m in ("C3", "D4", "B2"))
    # planes 0-7: white (the mover) stones now, 1 move ago, ...; planes 8-15: black's
    assert obs[0, 0][d4] == 1 and obs[0, 0].sum() == 1
    assert obs[0, 1][d4] == 1 and obs[0, 2].sum() == 0
    assert obs[0, 8][c3] == 1 and obs[0, 8][b2] == 1 and obs[0, 8].sum() == 2
    assert obs[0, 9].sum() == 1 and obs[0, 10].sum() == 1 and obs[0, 11].sum() == 0
    assert (obs[0, 16] == 0).all()  # white to move
    s = play(g, s, "pass")
    assert (g.observe(s)[0, 16] == 1).all()
    assert g.observe(s)[0, 0][c3] == 1  # black's view now


def test_compact_observation_has_last_move_plane():
    g = make_game("go:size=7,obs=compact")
    s = play(g, g.init(1), "D4")
    obs = g.observe(s)
    assert obs.shape == (1, 10, 7, 7)
    assert obs[0, 4][divmod(g.parse_action("D4"), 7)] == 1  # opponent (black) now
    assert obs[0, 9].sum() == 1 and obs[0, 9][divmod(g.parse_action("D4"), 7)] == 1
    assert obs[0, 8].sum() == 0  # white to move
    s = play(g, s, "pass")
    assert g.observe(s)[0, 9].sum() == 0  # a pass marks nothing


def test_zobrist_hashes_are_reproducible():
    a, b = make_go(size=9), make_go(size=9, ko="simple")
    s = play(a, a.init(1), "E5", "D4", "C3")
    assert s.zobrist[0] == a.board_hash(s.board)[0] == b.board_hash(s.board)[0]
    assert a.board_hash(np.zeros((1, 81), np.int8))[0] == 0
    big = make_go(size=19)
    np.testing.assert_array_equal(big._keys[:81], a._keys)


def test_stored_position_keys_are_the_hash_low_bits_under_the_stone_count():
    g = make_go(size=9)
    s = play(g, g.init(1), "E5", "D4", "C3", "pass", "F6")
    keys = s.position_hashes[0, :s.num_positions[0]]
    assert (keys >> np.uint64(COUNT_SHIFT)).tolist() == [0, 1, 2, 3, 3, 4]
    low = keys[-1] & HASH_MASK
    assert low == s.zobrist[0] & HASH_MASK and low != 0
    assert len(set(keys.tolist())) == 5  # only the pass repeats a key
    # the reverse tables keep the keys' low bits, still one point per key and colour
    for colour in (0, 1):
        used = g._rev_pt[colour] >= 0
        assert sorted(g._rev_pt[colour][used].tolist()) == list(range(81))
        assert len(set(g._rev_key[colour][used].tolist())) == 81


# --- random games against the reference -------------------------------------------------------
def check_random_game(game: Go, seed: int, start: GoState | None = None,
                      greedy: bool = False, plies: int | None = None) -> int:
    """Play one random game, checking every position against the reference; returns how
    many moves superko (beyond simple ko) forbade along the way. ``greedy`` games capture
    whenever they can and pass only when nothing else is legal, which keeps kos going."""
    size, n = game.size, game.num_points
    rng = np.random.default_rng(seed)
    s = game.init(1) if start is None else start
    board = s.board[0].tolist()
    earlier = {tuple(board)}
    last_take = None
    captures = s.captures[0].tolist()
    extra_bans = 0
    while not s.terminal[0] and (plies is None or s.ply[0] < plies):
        color = int(s.to_play[0]) + 1
        mask = ref_mask(board, color, size, game.ko, earlier, last_take)
        np.testing.assert_array_equal(s.legal[0], mask)
        if game.ko == "superko":
            simple = ref_mask(board, color, size, "simple", earlier, last_take)
            extra_bans += int((simple & ~mask).sum())
        # every legal action steps; a few illegal ones raise
        moves = np.flatnonzero(mask)
        game.step(s.take(np.zeros(moves.size, int)), moves)
        for bad in np.flatnonzero(~mask)[:3]:
            with pytest.raises(ValueError):
                game.step(s, np.array([bad]))
        choice = s.legal.copy()
        if greedy:
            takes = [p for p in moves[:-1] if ref_play(board, p, color, size)[1]]
            if takes:
                choice[0] = False
                choice[0, takes] = True
            elif moves.size > 1:
                choice[0, n] = False
        a = int(sample_legal(choice, rng)[0])
        s = game.step(s, np.array([a]))
        last_take = None
        if a < n:
            board, captured, _ = ref_play(board, a, color, size)
            captures[color - 1] += len(captured)
            if len(captured) == 1:
                last_take = (next(iter(captured)), a)
        earlier.add(tuple(board))
        assert s.board[0].tolist() == board
        assert s.captures[0].tolist() == captures
        assert s.zobrist[0] == game.board_hash(s.board)[0]
        for p in np.flatnonzero(s.board[0]):
            assert ref_group(board, int(p), size)[1], "a group without liberties"
    b, w = ref_score(board, size)
    assert game.score(s)[0] == pytest.approx(b - w - game.komi)
    if s.terminal[0]:
        assert int(s.outcome[0]) == int(np.sign(b - w - game.komi))
    return extra_bans


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), size=st.sampled_from([5, 6, 7]),
       ko=st.sampled_from(["superko", "simple"]), komi=st.sampled_from([7.5, 0.5, 2.0]))
def test_random_games_agree_with_the_reference(seed, size, ko, komi):
    check_random_game(make_go(size=size, ko=ko, komi=komi), seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_games_through_a_triple_ko_exercise_superko(seed):
    # Random games rarely repeat a position beyond simple ko; greedy capturing from the
    # triple ko does, and the reference must agree on every ban.
    game = make_go(size=9)
    start = position(game, TRIPLE_KO)
    assert check_random_game(game, seed, start=start, greedy=True, plies=40) > 0


def test_batched_random_play_keeps_invariants():
    g = make_go(size=9)
    rng = np.random.default_rng(7)
    s = g.init(64)
    while not s.terminal.all():
        s = g.step(s, sample_legal(s.legal, rng))
        np.testing.assert_array_equal(s.zobrist, g.board_hash(s.board))
        np.testing.assert_array_equal(s.board_history[:, 0], s.board)
        newest = s.position_hashes[np.arange(64), s.num_positions - 1]
        np.testing.assert_array_equal(newest, g.position_keys(s.board))
    assert (s.ply <= g.spec.max_moves).all()
    margin = g.score(s)
    np.testing.assert_array_equal(s.outcome, np.sign(margin).astype(np.int8))


# --- batched play against the reference, move by move ------------------------------------------
def check_groups_against_reference(game: Go, s: GoState, i: int, board: list[int]) -> None:
    """The groups and liberty counts the state keeps for game ``i`` match a recount."""
    visited: set[int] = set()
    for p in range(game.num_points):
        if board[p] == EMPTY or p in visited:
            continue
        stones, libs = ref_group(board, p, game.size)
        visited |= stones
        roots = {int(s.group[i, q]) for q in stones}
        assert len(roots) == 1, f"game {i}: one group, several roots {roots}"
        root = roots.pop()
        assert root in stones
        assert int(s.liberties[i, root]) == len(libs), f"game {i}: liberties of {p}"


def check_batch_against_reference(game: Go, seed: int, batch: int, plies: int,
                                  start: GoState | None = None, greedy: float = 0.5,
                                  count_bans: bool = False) -> tuple[int, int]:
    """Play ``batch`` games at once, checking every running game's legal mask, board,
    captures, hash, groups and liberties against the reference after every move, and the
    scores at the end. A ``greedy`` share of the games captures whenever it can and passes
    only when nothing else is legal (which keeps kos going). Returns (positions checked,
    moves superko forbade beyond simple ko, if ``count_bans``)."""
    size, n = game.size, game.num_points
    rng = np.random.default_rng(seed)
    s = game.init(batch) if start is None else start.take(np.zeros(batch, int))
    boards = [s.board[i].tolist() for i in range(batch)]
    earlier = [{tuple(b)} for b in boards]
    last_take: list[tuple[int, int] | None] = [None] * batch
    captures = s.captures.tolist()
    capturer = rng.random(batch) < greedy
    checked = bans = 0
    for _ in range(plies):
        running = np.flatnonzero(~s.terminal)
        if running.size == 0:
            break
        for i in running:
            colour = int(s.to_play[i]) + 1
            mask = ref_mask(boards[i], colour, size, game.ko, earlier[i], last_take[i])
            np.testing.assert_array_equal(s.legal[i], mask, err_msg=f"game {i}")
            if count_bans:
                simple = ref_mask(boards[i], colour, size, "simple", earlier[i], last_take[i])
                bans += int((simple & ~mask).sum())
            check_groups_against_reference(game, s, i, boards[i])
            checked += 1
        choice = s.legal.copy()
        for i in running[capturer[running]]:
            # captures: empty points next to an enemy group in atari (the state's own counts
            # only steer the choice; the reference checks the outcome)
            opp = 2 - int(s.to_play[i])
            takes = [p for p in np.flatnonzero(choice[i, :n])
                     if any(boards[i][q] == opp and s.liberties[i, s.group[i, q]] == 1
                            for q in ref_neighbors(int(p), size))]
            if takes:
                choice[i] = False
                choice[i, takes] = True
            elif choice[i, :n].any():
                choice[i, n] = False
        actions = sample_legal(choice, rng)
        s = game.step(s, actions)
        for i in running:
            a, colour = int(actions[i]), 2 - int(s.to_play[i])
            last_take[i] = None
            if a < n:
                boards[i], captured, _ = ref_play(boards[i], a, colour, size)
                captures[i][colour - 1] += len(captured)
                if len(captured) == 1:
                    last_take[i] = (next(iter(captured)), a)
            earlier[i].add(tuple(boards[i]))
        assert s.board.tolist() == boards
        assert s.captures.tolist() == captures
        np.testing.assert_array_equal(s.zobrist, game.board_hash(s.board))
    score = game.score(s)
    for i in range(batch):
        b, w = ref_score(boards[i], size)
        assert score[i] == pytest.approx(b - w - game.komi)
        if s.terminal[i]:
            assert int(s.outcome[i]) == int(np.sign(b - w - game.komi))
    return checked, bans


@pytest.mark.parametrize("size,ko,batch,plies", [
    (9, "superko", 8, 200), (9, "simple", 8, 200), (19, "superko", 2, 110),
    (19, "simple", 2, 110)])
def test_batched_games_agree_with_the_reference_move_by_move(size, ko, batch, plies):
    # Thousands of positions in batches: the group and liberty counts carried from move to
    # move, and the per-call scratch shared by the games of a batch, must never drift.
    game = make_go(size=size, ko=ko)
    checked, _ = check_batch_against_reference(game, seed=size, batch=batch, plies=plies)
    assert checked >= batch * min(plies, 60)


def test_batched_greedy_games_from_the_triple_ko_agree_on_every_superko_ban():
    game = make_go(size=9)
    start = position(game, TRIPLE_KO)
    checked, bans = check_batch_against_reference(game, seed=3, batch=6, plies=60,
                                                  start=start, greedy=1.0, count_bans=True)
    assert bans > 0 and checked == 6 * 60


def test_set_up_positions_and_with_to_play_recount_groups():
    game = make_go(size=9)
    s = position(game, TRIPLE_KO)
    check_groups_against_reference(game, s, 0, s.board[0].tolist())
    s = play(game, s, "C7", "G7")
    t = game.with_to_play(s, 1 - int(s.to_play[0]))
    check_groups_against_reference(game, t, 0, t.board[0].tolist())
    np.testing.assert_array_equal(t.liberties[0, t.group[0, t.board[0] > 0]],
                                  s.liberties[0, s.group[0, s.board[0] > 0]])


# --- random playouts in one kernel call (the pure-UCT baseline's rollouts) --------------

TWO_EYES = """
.XXXX
XXXXX
XXXXX
XXXXX
XXXX.
"""


def test_a_random_playout_where_only_a_pass_is_left_ends_at_once():
    """Black passed; White's only legal move is a pass (both points are suicide), so every
    playout ends there: Black's 25 points against komi 7.5."""
    game = Go(size=5, komi=7.5)
    state = play(game, position(game, TWO_EYES), "pass")
    assert state.legal[0].sum() == 1
    before = {k: v.copy() for k, v in state.arrays().items()}
    outcomes = game.random_playout(state.repeat(8), np.random.default_rng(0))
    assert outcomes.tolist() == [1] * 8
    assert all(np.array_equal(before[k], v) for k, v in state.arrays().items())  # untouched


def test_a_random_playout_scores_finished_games_as_they_stand():
    game = Go(size=5, komi=7.5)
    over = play(game, position(game, TWO_EYES), "pass", "pass")
    assert over.terminal[0]
    assert game.random_playout(over, np.random.default_rng(0)).tolist() == [int(over.outcome[0])]


def test_random_playouts_draw_like_stepping_with_sample_legal():
    """The kernel's playouts and the batch stepped a ply at a time with ``sample_legal`` are
    the same random process: from one 7x7 middle game, the playouts' lengths, final stone
    counts and win rates agree within the sampling error of 2,000 playouts each (4.5
    standard errors), and a seed repeats."""
    game = Go(size=7, komi=7.5)
    rng = np.random.default_rng(5)
    state = game.init(1)
    for _ in range(12):
        state = game.step(state, sample_legal(game.legal_mask(state), rng))
    batch = state.repeat(2000)
    fast = game.random_playout_arrays(batch, np.random.default_rng(1))
    stepped = batch
    while not stepped.terminal.all():
        stepped = game.step(stepped, sample_legal(game.legal_mask(stepped), rng))
    for name, a, b in (
        ("length", fast["ply"], stepped.ply),
        ("black stones", (fast["board"] == BLACK).sum(axis=1), (stepped.board == BLACK).sum(1)),
        ("black wins", fast["outcome"] == 1, stepped.outcome == 1),
    ):
        a, b = a.astype(np.float64), b.astype(np.float64)
        error = np.sqrt((a.var() + b.var()) / 2000)
        assert abs(a.mean() - b.mean()) < 4.5 * error, (name, a.mean(), b.mean(), error)
    assert 0.05 < (stepped.outcome == 1).mean() < 0.95  # a position with something to decide
    again = game.random_playout(batch, np.random.default_rng(1))
    assert np.array_equal(fast["outcome"], again)
