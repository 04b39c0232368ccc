"""The batched arena, anchor evaluation, Elo arithmetic and the perfect tic-tac-toe player."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeroforge.shared.games import Game, State, make_game
from zeroforge.shared.players import (
    MatchResult,
    MCTSPlayer,
    MinimaxPlayer,
    RandomPlayer,
    elo_difference,
    evaluate_against,
    play_match,
    random_openings,
    repeats,
)

TTT = make_game("tictactoe")


class EdgePlayer:
    """Deterministic fake: always the lowest (or highest) legal point; records its calls."""

    def __init__(self, name: str, highest: bool) -> None:
        self.name = name
        self.highest = highest
        self.calls: list[int] = []

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        legal = game.legal_mask(states)
        assert not states.terminal.any() and legal.any(axis=1).all()
        self.calls.append(states.batch_size)
        if self.highest:
            return legal.shape[1] - 1 - np.argmax(legal[:, ::-1], axis=1)
        return np.argmax(legal, axis=1)


def test_colours_alternate_and_results_are_counted_from_a():
    # Lowest-first vs highest-first: whoever moves first completes its edge row at ply 5.
    #   A first: A 0, B 8, A 1, B 7, A 2 -> A wins on the top row.
    #   B first: B 8, A 0, B 7, A 1, B 6 -> B wins on the bottom row.
    low, high = EdgePlayer("low", highest=False), EdgePlayer("high", highest=True)
    result = play_match(TTT, low, high, 5, np.random.default_rng(0))
    assert result.a_first.tolist() == [True, False, True, False, True]
    assert result.outcomes.tolist() == [1, -1, 1, -1, 1]
    assert (result.wins, result.losses, result.draws) == (3, 2, 0)
    assert result.score == pytest.approx(0.6)
    assert result.moves[0] == [0, 8, 1, 7, 2]
    assert result.moves[1] == [8, 0, 7, 1, 6]
    # One call per player per ply, each with every game where it is to move.
    assert low.calls == [3, 2, 3, 2, 3]
    assert high.calls == [2, 3, 2, 3, 2]
    assert (result.player_a, result.player_b) == ("low", "high")
    # Two deterministic players: one game a colour, replayed.
    assert result.distinct_games == 2
    assert result.effective_games == pytest.approx(25 / 13)  # copies 3 and 2


def test_distinct_games_count_moves_and_who_moved_first():
    # The same moves with A second are another game (A played the other side of them).
    result = MatchResult(player_a="a", player_b="b", wins=2, losses=2, draws=0,
                         a_first=np.array([True, True, False, True]),
                         outcomes=np.array([1, 1, -1, -1], np.int8),
                         moves=[[0, 1], [0, 1], [0, 1], [0, 2]])
    assert result.distinct_games == 3
    # Kish: 4 games as copies 2, 1, 1 -> 4² / (2² + 1 + 1) = 16 / 6.
    assert result.effective_games == pytest.approx(16 / 6)
    assert repeats([]) == (0, 0.0) and repeats("aab") == (2, pytest.approx(9 / 5))


def test_replayed_games_widen_the_elo_interval():
    # 12 games, 9 won: all distinct, against the same two lines replayed six times each.
    firsts = np.arange(12) % 2 == 0
    outcomes = np.array([1] * 9 + [-1] * 3, np.int8)
    distinct = MatchResult("a", "b", 9, 3, 0, firsts, outcomes, [[i] for i in range(12)])
    replayed = MatchResult("a", "b", 9, 3, 0, firsts, outcomes, [[0]] * 12)
    assert distinct.effective_games == 12 and replayed.effective_games == 2
    wide, narrow = replayed.elo(), distinct.elo()
    assert wide.elo == narrow.elo  # the same score
    assert wide.low < narrow.low < narrow.high < wide.high
    assert (narrow.low, narrow.high) == (elo_difference(0.75, 12).low,
                                         elo_difference(0.75, 12).high)


def test_draws_count_half():
    result = play_match(TTT, MinimaxPlayer(), MinimaxPlayer(name="minimax2"), 6,
                        np.random.default_rng(1))
    assert (result.wins, result.losses, result.draws) == (0, 0, 6)
    assert result.score == 0.5 and result.elo().elo == 0.0
    assert all(len(m) == 9 for m in result.moves)


def test_a_player_that_cheats_is_caught():
    class Occupier:
        name = "occupier"

        def select(self, game, states, rng):
            return np.zeros(states.batch_size, np.int64)  # point 0, even when taken

    with pytest.raises(ValueError, match="not legal"):
        play_match(TTT, Occupier(), RandomPlayer(), 2, np.random.default_rng(2))

    class Short:
        name = "short"

        def select(self, game, states, rng):
            return np.zeros(0, np.int64)

    with pytest.raises(ValueError, match="returned 0 actions"):
        play_match(TTT, Short(), RandomPlayer(), 2, np.random.default_rng(2))


def test_minimax_knows_tictactoe_is_a_draw():
    values = MinimaxPlayer().values(TTT, np.zeros(9, np.int8), to_play=0)
    assert values.tolist() == [0] * 9  # every opening move draws with best play
    # X to move with 0 1 vs 3 4: 2 wins at once (worth 4 empties + 1), 5 blocks and draws,
    # anything else lets O win at 5 (3 empties + 1 for O); occupied points are very low.
    board = np.array([1, 1, 0, 2, 2, 0, 0, 0, 0], np.int8)
    values = MinimaxPlayer().values(TTT, board, to_play=0)
    occupied = -(10**6)
    assert values.tolist() == [occupied, occupied, 5, occupied, occupied, 0, -4, -4, -4]


def test_minimax_never_loses_to_random():
    result = play_match(TTT, MinimaxPlayer(), RandomPlayer(), 300, np.random.default_rng(3))
    assert result.losses == 0
    assert result.wins > 200, result.summary()  # random blunders most games away


def test_minimax_refuses_games_it_cannot_solve():
    with pytest.raises(ValueError, match="more than"):
        MinimaxPlayer().select(make_game("gomoku6"), make_game("gomoku6").init(1),
                               np.random.default_rng(0))


def test_elo_difference_matches_the_logistic_curve():
    assert elo_difference(0.5).elo == 0.0
    assert elo_difference(0.75).elo == pytest.approx(400 * math.log10(3))
    assert elo_difference(0.25).elo == pytest.approx(-400 * math.log10(3))
    assert elo_difference(1.0).elo == math.inf and elo_difference(0.0).elo == -math.inf
    with pytest.raises(ValueError):
        elo_difference(1.5)


def test_a_clean_sweep_still_has_a_finite_lower_bound():
    sweep = elo_difference(1.0, 20)
    assert sweep.elo == math.inf and sweep.high == math.inf
    assert 200 < sweep.low < 700  # 20-0 is strong evidence, not infinite evidence


def test_elo_interval_shrinks_with_games_and_draws():
    few, many = elo_difference(0.6, 50), elo_difference(0.6, 5000)
    assert few.low < many.low < many.elo < many.high < few.high
    # 100 games at 0.6: score interval 0.6 +- 1.96 * sqrt(0.24 / 100) = [0.504, 0.696].
    # Wilson interval of 0.6 over 100 games: (0.6 + z^2/200 -+ z sqrt(0.0024 + z^2/40000))
    # / (1 + z^2/100) with z = 1.96 gives [0.502, 0.691], about [+1, +140] Elo.
    hundred = elo_difference(0.6, 100)
    assert hundred.low == pytest.approx(1.4, abs=1.0)
    assert hundred.high == pytest.approx(139.5, abs=1.0)
    drawish = elo_difference(0.6, 100, draw_fraction=0.8)
    assert hundred.low < drawish.low < drawish.high < hundred.high


def test_agent_samples_only_its_opening_moves():
    """MCTSPlayer(opening_moves=k): the first k plies follow visit counts at temperature 1
    (different games open differently); without it every game gets the same move."""
    from zeroforge.shared.search import SearchConfig, UniformEvaluator

    game = make_game("gomoku6")
    search = SearchConfig(num_simulations=16, temperature_moves=30)
    states = game.init(64)
    rng = np.random.default_rng(0)
    fixed = MCTSPlayer(game, UniformEvaluator(), search)
    assert len(set(fixed.select(game, states, rng).tolist())) == 1
    opening = MCTSPlayer(game, UniformEvaluator(), search, opening_moves=1)
    first = opening.select(game, states, rng)
    assert len(set(first.tolist())) > 8
    # past the opening the same position always gets the same (most visited) move
    second_ply = game.step(states, np.full(64, int(first[0])))
    assert len(set(opening.select(game, second_ply, rng).tolist())) == 1


def test_evaluate_against_plays_each_anchor_spec():
    results = evaluate_against(TTT, MinimaxPlayer(), ["random", "minimax"], 4,
                               np.random.default_rng(5))
    assert list(results) == ["random", "minimax"]
    assert results["random"].player_b == "random" and results["random"].losses == 0
    assert results["minimax"].draws == 4


class BookKeeper(EdgePlayer):
    """``EdgePlayer`` that also takes ``forced`` moves (as a GTP engine does): records them."""

    def __init__(self, name: str, highest: bool) -> None:
        super().__init__(name, highest)
        self.forced_moves: list[tuple[int, int, int]] = []  # (ply, to play, action)

    def forced(self, game: Game, states: State, index: int, action: int) -> None:
        assert game.illegal_reason(states, index, action) is None
        self.forced_moves.append((int(states.ply[index]), int(states.to_play[index]), action))


def test_paired_openings_begin_both_games_of_a_pair_colours_swapped():
    a, b = BookKeeper("low", highest=False), EdgePlayer("high", highest=True)
    openings = [[4, 0], [8, 2], [1, 7]]  # centre-corner, two corners, two edges
    m = play_match(TTT, a, b, 5, np.random.default_rng(0), openings=openings)
    assert m.a_first.tolist() == [True, False, True, False, True]
    for i, moves in enumerate(m.moves):
        assert moves[:2] == openings[i // 2]
    # pairs replay their opening from both sides: deterministic players give 5 distinct
    # games (without openings they give 2: one a colour)
    assert m.distinct_games == 5
    assert play_match(TTT, a, b, 5, np.random.default_rng(0)).distinct_games == 2
    # A was told of each opening move made for it, in the position it was made in
    assert sorted(a.forced_moves[:5]) == sorted(
        [(0, 0, 4), (1, 1, 0), (0, 0, 8), (1, 1, 2), (0, 0, 1)])


def test_openings_too_few_or_illegal_are_refused():
    a, b = EdgePlayer("low", highest=False), EdgePlayer("high", highest=True)
    with pytest.raises(ValueError, match="2 openings for 5 games"):
        play_match(TTT, a, b, 5, np.random.default_rng(0), openings=[[4], [0]])
    with pytest.raises(ValueError):
        play_match(TTT, a, b, 2, np.random.default_rng(0), openings=[[4, 4]])


def test_random_openings_are_legal_seeded_and_never_pass():
    go = make_game("go:size=5")
    first = random_openings(go, 50, 4, np.random.default_rng(7))
    assert first == random_openings(go, 50, 4, np.random.default_rng(7))
    assert len({tuple(o) for o in first}) > 40
    states = go.init(50)
    for ply in range(4):
        actions = np.array([o[ply] for o in first])
        assert not any(go.format_action(int(x)) == "pass" for x in actions)
        states = go.step(states, actions)  # raises on an illegal move
    with pytest.raises(ValueError, match="can end a game"):
        random_openings(TTT, 10, 9, np.random.default_rng(0))
