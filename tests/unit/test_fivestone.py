"""Five-stone chess rules, checked on positions drawn in ASCII and against a plain reference.

Pictures list rows 5 (top, White's start) to 1 (bottom, Black's start), columns a-e.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zeroforge.shared.games import (
    FiveStone,
    FiveStoneState,
    GameSession,
    IllegalMoveError,
    make_game,
)

GAME = FiveStone()


def position(picture: str, to_move: str = "black", game: FiveStone = GAME,
             ply: int = 0) -> FiveStoneState:
    return game.from_ascii(picture, to_move=to_move, ply=ply)


def play(state: FiveStoneState, *moves: str, game: FiveStone = GAME) -> FiveStoneState:
    for move in moves:
        state = game.step(state, np.array([game.parse_action(move)]))
    return state


def picture(state: FiveStoneState, game: FiveStone = GAME) -> str:
    """The board as five rows of B/W/. (the inverse of from_ascii)."""
    lines = game.render(state).splitlines()[1:6]
    return "\n".join("".join(line.split()[1:6]) for line in lines)


def count(state: FiveStoneState, colour: str) -> int:
    return picture(state).count(colour)


# --- start, spec, notation ---------------------------------------------------------------
def test_start_position_and_spec():
    s = GAME.init(3)
    assert picture(s) == "WWWWW\n.....\n.....\n.....\nBBBBB"
    assert GAME.spec.spec_string == "5stone_chess"
    assert GAME.spec.num_actions == 100 and GAME.spec.max_moves == 200
    # Black moves first: only the five bottom stones can step up
    legal = [GAME.format_action(a) for a in np.flatnonzero(s.legal[0])]
    assert legal == ["a1-a2", "b1-b2", "c1-c2", "d1-d2", "e1-e2"]
    assert "Black to play" in GAME.render(s)


def test_white_first_is_the_first_player_and_spec_round_trips():
    game = make_game("5stone_chess:first=white,max_moves=100")
    assert game.spec.spec_string == "5stone_chess:first=white,max_moves=100"
    assert make_game(game.spec.spec_string).spec == game.spec
    assert make_game("5stone_chess:max_moves=50").spec.spec_string == "5stone_chess:max_moves=50"
    s = game.init(1)
    assert s.to_play[0] == 0 and "White to play" in game.render(s)
    legal = [game.format_action(a) for a in np.flatnonzero(s.legal[0])]
    assert legal == ["a5-a4", "b5-b4", "c5-c4", "d5-d4", "e5-e4"]
    with pytest.raises(ValueError):
        make_game("5stone_chess:first=red")


def test_parse_and_format_round_trip():
    for a in range(100):
        text = GAME.format_action(a)
        assert GAME.parse_action(text) == a
        assert GAME.parse_action(f" {text.upper()} ") == a
    assert GAME.format_action(GAME.parse_action("c3-c4")) == "c3-c4"
    assert GAME.parse_action("c3 - b3") == GAME.parse_action("c3-left")
    assert GAME.format_action(GAME.parse_action("a5-up")) == "a5-up"  # off the board


@pytest.mark.parametrize("text, words", [
    ("a1-a3", "not a step"),
    ("a1-b2", "not a step"),
    ("c3-c3", "not a step"),
    ("e1-f1", "off the board"),
    ("a6-a5", "off the board"),
    ("a0-a1", "off the board"),
    ("a1", "not a move"),
    ("a1a2", "not a move"),
    ("a1-sideways", "not a move"),
    ("", "not a move"),
])
def test_parse_rejects_malformed_and_non_adjacent(text, words):
    with pytest.raises(IllegalMoveError, match=words):
        GAME.parse_action(text)


def test_illegal_reasons_through_session():
    session = GameSession(GAME, position("""
        W W W W W
        . . . . .
        . . . . .
        . . . . .
        B B B B B"""))
    for move, reason in [
        ("a5-a4", "no own stone on a5"),
        ("c3-c4", "no own stone on c3"),
        ("a1-b1", "b1 is occupied"),
        ("a1-down", "off the board"),
        ("e1-right", "off the board"),
        ("a1-a3", "not a step"),
    ]:
        with pytest.raises(IllegalMoveError, match=reason):
            session.play(move)
    assert session.state.ply[0] == 0 and not session.history
    session.play("a1-a2")
    with pytest.raises(IllegalMoveError, match="no own stone on a2"):
        session.play("a2-a3")  # White to move now
    session.play("a5-a4")
    assert session.to_play == 0


# --- captures ------------------------------------------------------------------------------
def row3_case(row3: str) -> FiveStoneState:
    """White d5, e5 and Black c2, a1 around a row 3 given before Black plays c2-c3."""
    return position(f"""
        . . . W W
        . . . . .
        {row3}
        . . B . .
        B . . . .""")


@pytest.mark.parametrize("row3, after", [
    ("W B . . .", ". B B . ."),    # enemy at the left end of the new pair: captured
    (". . . B W", ". . B B ."),    # at the right end
    ("W . . B .", "W . B B ."),    # not contiguous: a gap between the enemy and the pair
    ("B W . . .", "B W B . ."),    # own stones not adjacent (a sandwich does not capture)
    ("W . . . B", "W . B . B"),    # own stones not adjacent
    ("W B . B .", "W B B B ."),    # a fourth stone: three own stones on the line
    ("W B . . B", "W B B . B"),    # the other points are not empty
    ("W B . . W", "W B B . W"),    # the opponent has two on the line
    ("W W . B .", "W W B B ."),    # the opponent has two, next to each other
])
def test_capture_conditions_along_a_row(row3, after):
    s = play(row3_case(row3), "c2-c3")
    assert picture(s).splitlines()[2] == after.replace(" ", "")
    assert not s.terminal[0]


def test_capture_along_a_column():
    s = position("""
        W . . . W
        . . W . .
        . B . . .
        . . B . .
        . . . . B""")
    s = play(s, "b3-c3")
    assert picture(s) == "W...W\n.....\n..B..\n..B..\n....B"
    assert not s.terminal[0] and s.to_play[0] == 1


def test_one_move_captures_twice():
    s = position("""
        . . W . W
        . . B . .
        W B . B .
        . . . . .
        W . . . B""")
    s = play(s, "d3-c3")
    assert picture(s) == "....W\n..B..\n.BB..\n.....\nW...B"
    assert not s.terminal[0]  # White still has two stones


def test_safe_entry_next_to_an_enemy_pair():
    s = row3_case("W W . . .")
    s = play(s, "c2-c3")  # a lone stone next to the white pair: nothing happens
    assert picture(s).splitlines()[2] == "WWB.."
    s = play(s, "d5-d4")  # White moves elsewhere: its move captures nothing either
    assert picture(s).splitlines()[2] == "WWB.."
    assert count(s, "B") == 2 and count(s, "W") == 4


def test_the_opponent_captures_when_it_moves_into_the_pattern():
    # White walks into W W B itself: now White is the mover and captures c3
    s = position("""
        . . . . W
        . W . . .
        W . B . .
        . . . . .
        B . . . B""", to_move="white")
    s = play(s, "b4-b3")
    assert picture(s).splitlines()[2] == "WW..."
    assert count(s, "B") == 2


# --- game end --------------------------------------------------------------------------------
def test_win_by_leaving_the_opponent_one_stone():
    s = play(position("""
        . . . . W
        . . . . .
        W B . . .
        . . B . .
        B . . . ."""), "c2-c3")
    assert s.terminal[0] and s.outcome[0] == 1 and not s.legal.any()
    assert "Black wins" in GAME.render(s)


def test_second_player_win_is_minus_one():
    white_first = FiveStone(first="white")
    s = position("""
        . . . . W
        . . . . .
        W B . . .
        . . B . .
        B . . . .""", to_move="black", game=white_first)
    s = play(s, "c2-c3", game=white_first)
    assert s.terminal[0] and s.outcome[0] == -1
    assert "Black wins" in white_first.render(s)


def test_win_by_leaving_the_opponent_no_move():
    s = position("""
        W W . B .
        B B . . .
        . . . . .
        . . . . .
        . . . . .""")
    assert s.legal[0].any()
    s = play(s, "d5-c5")
    assert count(s, "W") == 2  # nothing captured: White is just stuck
    assert s.terminal[0] and s.outcome[0] == 1


def test_a_position_without_moves_for_the_mover_is_already_lost():
    s = position("""
        W W B . .
        B B . . .
        . . . . .
        . . . . .
        . . . . .""", to_move="white")
    assert s.terminal[0] and s.outcome[0] == 1 and not s.legal.any()


def test_repetition_draws():
    s = play(GAME.init(1), "b1-b2", "b5-b4", "b2-b1")
    assert not s.terminal[0]
    # b4-b5 would bring back the start position: the observation marks it
    obs = GAME.observe(s)[0]
    assert obs[3].reshape(-1).tolist() == [0] * 6 + [1] + [0] * 18   # from b4
    assert obs[4].reshape(-1).tolist() == [0, 1] + [0] * 23          # to b5
    s = play(s, "b4-b5")
    assert s.terminal[0] and s.outcome[0] == 0 and not s.legal.any()
    assert "repetition" in GAME.render(s)


def test_no_draw_without_a_repeated_position():
    s = play(GAME.init(1), "b1-b2", "b5-b4", "b2-b1", "c5-c4", "c1-c2", "b4-b5")
    assert not s.terminal[0]


def test_a_capture_makes_earlier_positions_unreachable_but_later_ones_count():
    s = row3_case("W B . . .")
    s = play(s, "c2-c3")  # captures a3
    assert s.since[0] == 1
    s = play(s, "d5-d4", "c3-c2", "d4-d5")
    assert not s.terminal[0]
    s = play(s, "c2-c3")  # back to the position right after the capture
    assert s.terminal[0] and s.outcome[0] == 0


def test_ply_cap_draws_but_a_win_on_the_last_ply_counts():
    game = make_game("5stone_chess:max_moves=3")
    s = play(game.init(1), "b1-b2", "b5-b4", game=game)
    assert not s.terminal[0]
    s = play(s, "c1-c2", game=game)
    assert s.terminal[0] and s.outcome[0] == 0 and "move limit" in game.render(s)
    last = position("""
        . . . . W
        . . . . .
        W B . . .
        . . B . .
        B . . . .""", game=game, ply=2)
    last = play(last, "c2-c3", game=game)
    assert last.terminal[0] and last.outcome[0] == 1


def test_illegal_actions_raise_in_batched_step():
    s = GAME.init(2)
    with pytest.raises(ValueError):
        GAME.step(s, np.array([GAME.parse_action("a1-a2"), GAME.parse_action("a5-a4")]))


# --- symmetry and observations -------------------------------------------------------------
def random_states(game: FiveStone, batch: int, seed: int) -> list[FiveStoneState]:
    rng = np.random.default_rng(seed)
    s, out = game.init(batch), []
    while not s.terminal.all():
        out.append(s)
        a = np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in s.legal])
        s = game.step(s, a)
    return out


def test_reflected_position_has_the_reflected_legal_mask():
    flip = GAME.symmetries()[1]
    assert [s.name for s in GAME.symmetries()] == ["identity", "flip_lr"]
    a = GAME.parse_action("a1-b1")
    assert GAME.format_action(int(np.flatnonzero(flip.action_perm == a)[0])) == "e1-d1"
    checked = 0
    for s in random_states(GAME, batch=8, seed=1)[::3]:
        live = np.flatnonzero(~s.terminal)
        s = s.take(live)
        mirrored = GAME.from_boards(s.board[:, flip.point_perm], s.to_play)
        np.testing.assert_array_equal(mirrored.legal, flip.apply_policy(s.legal))
        fresh = GAME.from_boards(s.board, s.to_play)  # same history-free setting
        np.testing.assert_array_equal(GAME.observe(mirrored), flip.apply_obs(GAME.observe(fresh)))
        checked += live.size
    assert checked > 50


def test_observation_planes():
    s = play(GAME.init(1), "c1-c2")
    obs = GAME.observe(s)
    assert obs.shape == (1, 5, 5, 5) and obs.dtype == np.uint8
    assert obs[0, 0].sum() == 5 and obs[0, 0, 0].all()         # White (the mover) on top
    assert obs[0, 1, 3, 2] == 1 and obs[0, 1, 4, 2] == 0        # Black's stone moved to c2
    assert not obs[0, 2].any()                                  # the mover is second
    assert GAME.observe(GAME.init(1))[0, 2].all()


# --- random games against a plain reference --------------------------------------------------
def ref_moves(board: list[int], me: int) -> list[int]:
    moves = []
    for p in range(25):
        if board[p] != me:
            continue
        r, c = divmod(p, 5)
        for d, (dr, dc) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
            if 0 <= r + dr < 5 and 0 <= c + dc < 5 and board[(r + dr) * 5 + c + dc] == 0:
                moves.append(p * 4 + d)
    return moves


def ref_move(board: list[int], me: int, action: int) -> list[int]:
    board = list(board)
    src, d = divmod(action, 4)
    dst = src + (-5, 5, -1, 1)[d]
    board[src], board[dst] = 0, me
    r, c = divmod(dst, 5)
    for line in ([r * 5 + i for i in range(5)], [i * 5 + c for i in range(5)]):
        mine = [i for i, q in enumerate(line) if board[q] == me]
        theirs = [i for i, q in enumerate(line) if board[q] == 3 - me]
        if (len(mine) == 2 and mine[1] == mine[0] + 1 and len(theirs) == 1
                and theirs[0] in (mine[0] - 1, mine[1] + 1)
                and all(board[q] == 0 for i, q in enumerate(line) if i not in mine + theirs)):
            board[line[theirs[0]]] = 0
    return board


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), max_moves=st.integers(1, 200),
       first=st.sampled_from(["black", "white"]), avoid_repeats=st.booleans())
def test_random_games_match_the_reference(seed, max_moves, first, avoid_repeats):
    """Batched play equals a plain one-position-at-a-time reference of the rules."""
    game = FiveStone(first=first, max_moves=max_moves)
    rng = np.random.default_rng(seed)
    batch = 3
    s = game.init(batch)
    boards = [s.board[i].tolist() for i in range(batch)]
    seen = [{(tuple(b), 0)} for b in boards]
    over = [False] * batch
    while not all(over):
        actions = np.zeros(batch, np.int64)
        for i in range(batch):
            if over[i]:
                continue
            me = int(s.to_play[i]) + 1
            moves = ref_moves(boards[i], me)
            assert np.flatnonzero(s.legal[i]).tolist() == moves
            fresh = [m for m in moves
                     if (tuple(ref_move(boards[i], me, m)), 2 - me) not in seen[i]]
            pool = fresh if avoid_repeats and fresh else moves
            actions[i] = pool[rng.integers(len(pool))]
        before = s
        s = game.step(s, actions)
        for i in range(batch):
            if over[i]:
                np.testing.assert_array_equal(s.board[i], before.board[i])
                continue
            me = int(before.to_play[i]) + 1
            boards[i] = ref_move(boards[i], me, int(actions[i]))
            assert s.board[i].tolist() == boards[i]
            for colour in (1, 2):  # stone counts never increase
                assert (s.board[i] == colour).sum() <= (before.board[i] == colour).sum()
            key = (tuple(boards[i]), 2 - me)
            if boards[i].count(3 - me) < 2 or not ref_moves(boards[i], 3 - me):
                expect = (True, 1 if me == 1 else -1)
            elif key in seen[i] or s.ply[i] == max_moves:
                expect = (True, 0)
            else:
                expect = (False, 0)
            assert (bool(s.terminal[i]), int(s.outcome[i])) == expect
            assert s.ply[i] <= max_moves
            seen[i].add(key)
            over[i] = expect[0]
            if over[i]:
                assert not s.legal[i].any()


def test_compiled_random_playouts_end_like_stepping_with_sample_legal():
    """``FiveStone.random_playout`` (one kernel call to the end) and the batch stepped a ply
    at a time with ``sample_legal`` are the same random process: from the opening and from
    a position six plies in, lengths, captures (stones left), first-player wins and draws
    (repetitions, the ply cap) agree within 4.5 standard errors of 2,000 playouts each; a
    seed repeats; the input is untouched."""
    from zeroforge.shared.games import sample_legal

    game = FiveStone(max_moves=120)
    rng = np.random.default_rng(7)
    for plies in (0, 6):
        state = game.init(1)
        for _ in range(plies):
            state = game.step(state, sample_legal(game.legal_mask(state), rng))
        assert not state.terminal[0]
        batch = state.repeat(2000)
        before = batch.copy()
        fast = game.random_playout_ends(batch, np.random.default_rng(1))
        assert fast.terminal.all() and np.array_equal(before.board, batch.board)
        stepped = batch
        while not stepped.terminal.all():
            stepped = game.step(stepped, sample_legal(game.legal_mask(stepped), rng))
        for name, a, b in (("length", fast.ply, stepped.ply),
                           ("stones left", (fast.board > 0).sum(1), (stepped.board > 0).sum(1)),
                           ("first player wins", fast.outcome == 1, stepped.outcome == 1),
                           ("draws", fast.outcome == 0, stepped.outcome == 0)):
            a, b = a.astype(np.float64), b.astype(np.float64)
            error = np.sqrt((a.var() + b.var()) / 2000)
            assert abs(a.mean() - b.mean()) < 4.5 * error, (name, a.mean(), b.mean(), error)
        assert np.array_equal(game.random_playout(batch, np.random.default_rng(1)),
                              fast.outcome)
