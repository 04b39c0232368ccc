"""Gomoku and tic-tac-toe rules on ASCII boards: every line direction, edges, overlines in
free-style and exact-k, full-board draws, and the reasons a move is illegal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroforge.shared.games import GameSession, IllegalMoveError, make_game


def play_picture(game, picture: str, last: str) -> GameSession:
    """Set up the X and O stones of ``picture`` (rows top to bottom) by legal alternate play,
    then play ``last`` (an X or O point written like D4) and return the session.

    The stones of ``picture`` must not already contain a finished line."""
    rows = [r.split() for r in picture.strip().splitlines()]
    h, w = len(rows), len(rows[0])
    assert (h, w) == game.spec.board_shape
    xs = [r * w + c for r in range(h) for c in range(w) if rows[r][c] == "X"]
    os_ = [r * w + c for r in range(h) for c in range(w) if rows[r][c] == "O"]
    last_point = game.parse_action(last)
    mover_is_x = len(xs) == len(os_)
    (xs if mover_is_x else os_).append(last_point)
    assert len(xs) - len(os_) in (0, 1)
    s = GameSession(game)
    for i in range(len(xs) + len(os_)):
        s.play(xs[i // 2] if i % 2 == 0 else os_[i // 2])
    assert s.moves[-1] == last_point
    return s


G7 = make_game("gomoku:size=7,k=4")

# Four in a row by X in each direction; the last stone completes it (at an edge or corner).
WINS = {
    "horizontal at the top edge": ("""
        X X X . . . .
        O O O . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", "D7"),
    "vertical at the right edge": ("""
        . . . . . O X
        . . . . . O X
        . . . . . O X
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", "G4"),
    "diagonal down-right into the corner": ("""
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . X . . .
        O . . . X . .
        O . . . . X .
        O . . . . . .""", "G1"),
    "anti-diagonal, stone in the middle": ("""
        . . . . . . .
        . . . . . . .
        . . . . . X .
        . . . . . . .
        . . . X . . .
        . . X . . . .
        O O O . . . .""", "E4"),
}


@pytest.mark.parametrize("name", list(WINS))
def test_k_in_a_row_wins_in_every_direction(name):
    picture, last = WINS[name]
    s = play_picture(G7, picture, last)
    assert s.over and s.outcome == 1
    assert "X wins" in s.render()


def test_second_player_win_is_minus_one():
    s = play_picture(G7, """
        X X X . . . .
        O O O . . . .
        X . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", "D6")
    assert s.over and s.outcome == -1


def test_broken_line_does_not_win():
    s = play_picture(G7, """
        X X . X . . .
        O O O . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", "F7")
    assert not s.over


OVERLINE = """
    X X . X X . .
    O O O . . . .
    O . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . ."""


def test_overline_wins_in_free_style():
    s = play_picture(make_game("gomoku:size=7,k=4"), OVERLINE, "C7")  # five in a row
    assert s.over and s.outcome == 1


def test_overline_does_not_win_with_exact_k():
    exact = make_game("gomoku:size=7,k=4,exact=true")
    s = play_picture(exact, OVERLINE, "C7")
    assert not s.over
    # an exact four still wins
    s = play_picture(exact, """
        X X X . . . .
        O O O . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", "D7")
    assert s.over and s.outcome == 1


def test_full_board_without_a_line_is_a_draw():
    ttt = make_game("tictactoe")
    s = GameSession(ttt)
    for move in ["A3", "B3", "C3", "B2", "A2", "C2", "B1", "A1", "C1"]:  # X O X / X O O / O X X
        assert not s.over
        s.play(move)
    assert s.over and s.outcome == 0
    assert "draw" in s.render()


def test_illegal_moves_name_the_reason_and_change_nothing():
    s = GameSession(make_game("gomoku6"))
    s.play("C3")
    before = s.state.copy()
    with pytest.raises(IllegalMoveError, match="illegal move C3: C3 is occupied"):
        s.play("C3")
    with pytest.raises(IllegalMoveError, match="off the 6x6 board"):
        s.play("G1")
    with pytest.raises(IllegalMoveError, match="not a coordinate"):
        s.play("33")
    with pytest.raises(IllegalMoveError, match="out of range"):
        s.play(36)
    np.testing.assert_array_equal(s.state.board, before.board)
    assert s.undo() == s.game.parse_action("C3") and not s.moves


def test_tictactoe_accepts_cell_numbers():
    ttt = make_game("tictactoe")
    assert ttt.parse_action("1") == 0 and ttt.parse_action("9") == 8
    assert ttt.parse_action("B2") == 4
    with pytest.raises(IllegalMoveError):
        ttt.parse_action("10")


def _has_line(board: np.ndarray, h: int, w: int, k: int, color: int, exact: bool) -> bool:
    """Slow reference: scan every maximal run in every direction."""
    grid = board.reshape(h, w)
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(h):
            for c in range(w):
                pr, pc = r - dr, c - dc
                if 0 <= pr < h and 0 <= pc < w and grid[pr, pc] == color:
                    continue  # not the start of a run
                n, rr, cc = 0, r, c
                while 0 <= rr < h and 0 <= cc < w and grid[rr, cc] == color:
                    n, rr, cc = n + 1, rr + dr, cc + dc
                if n == k or (n > k and not exact):
                    return True
    return False


@settings(max_examples=40, deadline=None)
@given(w=st.integers(3, 9), h=st.integers(3, 9), k=st.integers(3, 5), exact=st.booleans(),
       seed=st.integers(0, 10_000))
def test_random_games_agree_with_a_slow_reference(w, h, k, exact, seed):
    k = min(k, max(w, h))
    game = make_game("gomoku", width=w, height=h, k=k, exact=exact)
    rng = np.random.default_rng(seed)
    state = game.init(1)
    while not state.terminal[0]:
        legal = np.flatnonzero(state.legal[0])
        np.testing.assert_array_equal(legal, np.flatnonzero(state.board[0] == 0))
        mover = int(state.to_play[0]) + 1
        state = game.step(state, rng.choice(legal, size=1))
        won = _has_line(state.board[0], h, w, k, mover, exact)
        full = not (state.board[0] == 0).any()
        assert bool(state.terminal[0]) == (won or full)
        if won:
            assert state.outcome[0] == (1 if mover == 1 else -1)
        elif full:
            assert state.outcome[0] == 0


def _random_play_outcomes(game, state) -> dict[int, float]:
    """{outcome: probability} of uniformly random play from the one game of ``state``,
    by enumeration (each legal move equally likely), memoised on the board."""
    memo: dict[bytes, dict[int, float]] = {}

    def visit(s) -> dict[int, float]:
        key = s.board[0].tobytes()
        if key not in memo:
            if s.terminal[0]:
                memo[key] = {int(s.outcome[0]): 1.0}
            else:
                moves = np.flatnonzero(s.legal[0])
                total: dict[int, float] = {}
                for a in moves:
                    for outcome, p in visit(game.step(s, np.array([a]))).items():
                        total[outcome] = total.get(outcome, 0.0) + p / len(moves)
                memo[key] = total
        return memo[key]

    return visit(state)


def test_compiled_random_playouts_win_as_often_as_random_play_does():
    """``Gomoku.random_playout`` (one kernel call to the end) against the exact odds of
    uniformly random tic-tac-toe, enumerated with the game's own ``step`` (X wins 737/1260,
    O 121/420, drawn 8/63): 20,000 playouts each within 4.5 standard errors, from the
    empty board and positions two, five and six plies in (there the odds hang on which of
    three or four empty cells is drawn, so a draw that favours some is seen); a seed
    repeats; the input is untouched."""
    game = make_game("tictactoe")
    for moves in ([], [4, 0], [4, 0, 8, 2, 1], [4, 0, 8, 2, 1, 7]):
        start = game.init(1)
        for a in moves:
            start = game.step(start, np.array([a]))
        exact = _random_play_outcomes(game, start)
        if not moves:
            assert exact[1] == pytest.approx(737 / 1260) and exact[0] == pytest.approx(8 / 63)
        batch = start.repeat(20_000)
        before = batch.copy()
        ends = game.random_playout_ends(batch, np.random.default_rng(1))
        assert ends.terminal.all() and np.array_equal(batch.board, before.board)
        for outcome, p in exact.items():
            seen = (ends.outcome == outcome).mean()
            assert abs(seen - p) < 4.5 * np.sqrt(p * (1 - p) / 20_000), (moves, outcome, seen, p)
        again = game.random_playout(batch, np.random.default_rng(1))
        assert np.array_equal(ends.outcome, again)


def test_compiled_random_playouts_end_like_stepping_with_sample_legal():
    """On gomoku 6x6/4 from a middle game, the kernel's playouts and the batch stepped a ply
    at a time with ``sample_legal`` agree on length, stones and wins within 4.5 standard
    errors of 2,000 playouts each; games over at the start keep their outcome."""
    from zeroforge.shared.games import sample_legal

    game = make_game("gomoku:size=6,k=4")
    rng = np.random.default_rng(5)
    state = game.init(1)
    for _ in range(6):
        state = game.step(state, sample_legal(game.legal_mask(state), rng))
    assert not state.terminal[0]
    batch = state.repeat(2000)
    fast = game.random_playout_ends(batch, np.random.default_rng(1))
    stepped = batch
    while not stepped.terminal.all():
        stepped = game.step(stepped, sample_legal(game.legal_mask(stepped), rng))
    for name, a, b in (("length", fast.ply, stepped.ply),
                       ("black stones", (fast.board == 1).sum(1), (stepped.board == 1).sum(1)),
                       ("black wins", fast.outcome == 1, stepped.outcome == 1)):
        a, b = a.astype(np.float64), b.astype(np.float64)
        error = np.sqrt((a.var() + b.var()) / 2000)
        assert abs(a.mean() - b.mean()) < 4.5 * error, (name, a.mean(), b.mean(), error)
    assert 0.05 < (stepped.outcome == 1).mean() < 0.95
    over = stepped.take(np.arange(3))  # finished: played out as they stand
    assert np.array_equal(game.random_playout(over, rng), over.outcome)
