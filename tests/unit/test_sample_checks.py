"""Semantic checks of decoded games (``zeroforge.learner.sample_checks``): real self-play games of
every game pass, and a hand-made bad game of each kind is rejected with its reason."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.learner.sample_checks import REASONS, check_game, legal_superset
from zeroforge.shared.games import Game, make_game
from zeroforge.shared.samples import GameSamples, SampleFormatError, decode, encode
from zeroforge.shared.search import SearchConfig, UniformEvaluator

GAMES = ("tictactoe", "gomoku6", "gomoku:size=5,k=4,exact=true", "go:size=9",
         "go:size=7,obs=features",
         "go:size=5,komi=0", "5stone_chess", "5stone_chess:first=white,max_moves=40")


@cache
def played(spec: str, gumbel: bool = False, games: int = 12) -> tuple[Game, list[GameSamples]]:
    """Real self-play games (rules-only evaluator, few simulations), through the codec as
    the learner gets them."""
    game = make_game(spec)
    worker = SelfPlayWorker(game, UniformEvaluator(),
                            SearchConfig(num_simulations=8, gumbel=gumbel),
                            SelfPlayConfig(games_in_parallel=games), seed=3)
    return game, [decode(encode(g)) for g in worker.play_games(games)]


def rejected(game: Game, samples: GameSamples) -> str:
    with pytest.raises(SampleFormatError) as err:
        check_game(game, samples)
    assert err.value.reason in REASONS or err.value.reason == "bad_length"
    return err.value.reason


@pytest.mark.parametrize("gumbel", [False, True], ids=["puct", "gumbel"])
@pytest.mark.parametrize("spec", GAMES)
def test_real_selfplay_games_pass(spec, gumbel):
    game, games = played(spec, gumbel)
    outcomes = set()
    for g in games:
        check_game(game, g)
        outcomes.add(g.outcome)
        legal = legal_superset(game, g.obs)
        assert legal.any(axis=1).all()
    assert outcomes  # something finished


def test_every_outcome_kind_passes():
    """Wins of both sides and draws (tic-tac-toe, many games) all pass."""
    game, games = played("tictactoe", False, 200)
    assert {g.outcome for g in games} == {-1, 0, 1}
    for g in games:
        check_game(game, g)


def ttt_game() -> tuple[Game, GameSamples]:
    """A real tic-tac-toe game of at least 6 positions."""
    game, games = played("tictactoe")
    return game, next(g for g in games if g.num_positions >= 6)


def replace(g: GameSamples, **fields) -> GameSamples:
    arrays = {"obs": g.obs.copy(), "policy": g.policy.copy(), "to_play": g.to_play.copy()}
    arrays.update(fields)
    return dataclasses.replace(g, **arrays)


# --- one bad game per reason -------------------------------------------------------------
def test_too_long():
    game, g = ttt_game()
    reps = 20_000 // g.num_positions + 1
    huge = replace(g, obs=np.tile(g.obs, (reps, 1, 1, 1)), policy=np.tile(g.policy, (reps, 1)),
                   to_play=(np.arange(reps * g.num_positions) % 2).astype(np.int8))
    assert rejected(game, huge) == "too_long"


def test_bad_to_play():
    game, g = ttt_game()
    to_play = g.to_play.copy()
    to_play[2] = 1
    assert rejected(game, replace(g, to_play=to_play)) == "bad_to_play"
    assert rejected(game, replace(g, to_play=1 - g.to_play)) == "bad_to_play"


@pytest.mark.parametrize("how", ["both_sides", "first_plane", "swapped", "stone_added",
                                 "last_move", "not_binary"])
def test_bad_observation(how):
    game, g = ttt_game()
    obs = g.obs.copy()
    if how == "both_sides":
        obs[3, 1] |= obs[3, 0]  # the mover's stones also the opponent's
    elif how == "first_plane":
        obs[2, 3] = 0
    elif how == "swapped":
        obs[[1, 4]] = obs[[4, 1]]
    elif how == "stone_added":
        empty = np.argwhere((obs[2, 0] | obs[2, 1]) == 0)[0]
        obs[2, 0, empty[0], empty[1]] = 1
    elif how == "last_move":
        obs[3, 2] = 0
    else:
        obs[1, 0, 0, 0] = 2
    assert rejected(game, replace(g, obs=obs)) == "bad_observation"


def test_bad_observation_fivestone_stone_counts():
    game, games = played("5stone_chess")
    g = games[0]
    obs = g.obs.copy()
    obs[1, 1] = 0  # the opponent has no stones left: the game was over
    assert rejected(game, replace(g, obs=obs)) == "bad_observation"


@pytest.mark.parametrize("how", ["scaled", "zero", "nan", "negative", "half"])
def test_bad_policy(how):
    game, g = ttt_game()
    policy = g.policy.copy()
    if how == "scaled":
        policy *= 63
    elif how == "zero":
        policy[1] = 0
    elif how == "nan":
        policy[0, 0] = np.nan
    elif how == "negative":
        policy[0] = -policy[0]
    else:
        policy[2] *= 0.99
    assert rejected(game, replace(g, policy=policy)) == "bad_policy"


@pytest.mark.parametrize("spec", ["tictactoe", "gomoku6", "go:size=9", "5stone_chess"])
def test_illegal_policy_mass_on_an_occupied_point_or_impossible_step(spec):
    game, games = played(spec)
    g = max(games, key=lambda x: x.num_positions)
    t = g.num_positions - 1
    legal = legal_superset(game, g.obs[t:t + 1])[0]
    policy = g.policy.copy()
    policy[t] = 0
    policy[t, np.flatnonzero(~legal)[0]] = 1.0  # all mass on one illegal move
    assert rejected(game, replace(g, policy=policy)) == "illegal_policy"


def test_legal_superset_matches_the_rules_where_exact():
    """Gomoku and five-stone chess: the observation's legal moves are the rules' exactly;
    Go: the rules' legal moves are a subset."""
    for spec, exact in (("gomoku6", True), ("5stone_chess", True), ("go:size=9", False)):
        game = make_game(spec)
        rng = np.random.default_rng(0)
        state = game.init(8)
        for _ in range(30):
            running = ~state.terminal
            mask = game.legal_mask(state)
            got = legal_superset(game, game.observe(state))
            assert (got[running] >= mask[running]).all(), spec
            if exact:
                np.testing.assert_array_equal(got[running], mask[running], err_msg=spec)
            actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in mask])
            state = game.step(state, actions)


def test_bad_outcome_flipped_or_drawn():
    game, games = played("tictactoe", False, 200)
    for g in games[:40]:
        for wrong in {-1, 0, 1} - {g.outcome}:
            assert rejected(game, dataclasses.replace(g, outcome=wrong)) == \
                "bad_outcome_for_position", (g.outcome, wrong)


def test_bad_outcome_truncated_game():
    """Positions cut off at the end: no move of the last one ends the game."""
    game, g = ttt_game()
    cut = g.num_positions - 2
    short = replace(g, obs=g.obs[:cut], policy=g.policy[:cut], to_play=g.to_play[:cut])
    assert rejected(game, short) == "bad_outcome_for_position"


def test_one_position_games():
    """The shortest entry, a game of one position, is checked without errors: tic-tac-toe
    cannot end after its first move."""
    game, g = ttt_game()
    first = replace(g, obs=g.obs[:1], policy=g.policy[:1], to_play=g.to_play[:1])
    assert rejected(game, first) == "bad_outcome_for_position"


def test_bad_outcome_fivestone_and_go():
    game, games = played("5stone_chess")
    for g in games[:6]:
        for wrong in {-1, 0, 1} - {g.outcome}:
            mover = 1 if g.to_play[-1] == 0 else -1
            if wrong == 0 and g.num_positions == game.spec.max_moves:
                continue  # a win or a draw at the ply cap are both possible
            if wrong == 0 and g.obs[-1, 3].any():
                continue  # a repeating move was possible: a draw can follow
            if wrong == mover and g.outcome == 0:
                continue  # a draw game whose last mover could also have won: not checkable
            assert rejected(game, dataclasses.replace(g, outcome=wrong)) == \
                "bad_outcome_for_position"
    go, go_games = played("go:size=9")
    drawn = dataclasses.replace(go_games[0], outcome=0)
    assert rejected(go, drawn) == "bad_outcome_for_position"  # komi 7.5 cannot draw
    go0, go0_games = played("go:size=5,komi=0")
    # (without its aux targets, whose score would contradict the draw)
    check_game(go0, dataclasses.replace(go0_games[0], outcome=0, ownership=None, score=None))


def test_bad_outcome_line_already_on_the_board():
    """A gomoku game that goes on after a winning line."""
    game = make_game("tictactoe")
    moves = [0, 3, 1, 4, 2, 5, 6]  # X wins with 0-1-2 at move 5, then play continues
    state = game.init(1)
    obs = []
    for i, move in enumerate(moves):
        obs.append(game.observe(state)[0])
        if i == 4:  # the rules end the game here: put the stone by hand and go on
            board = state.board.copy()
            board[0, move] = 1
            state = dataclasses.replace(state, board=board, to_play=np.array([1], np.int8),
                                        ply=state.ply + 1, last_action=np.array([move], np.int32),
                                        legal=board == 0)
        else:
            state = game.step(state, np.array([move]))
    t = len(moves)
    policy = np.zeros((t, 9), np.float32)
    policy[np.arange(t), moves] = 1
    g = GameSamples("tictactoe", 1, np.stack(obs), policy,
                    (np.arange(t) % 2).astype(np.int8), outcome=1)
    assert rejected(game, g) == "bad_outcome_for_position"


def test_go_games_carry_consistent_ownership_and_score():
    go, games = played("go:size=9")
    for g in games:
        assert g.has_aux and g.ownership.shape == (9, 9)
        assert g.score == pytest.approx(g.ownership.sum() - go.komi)
        assert np.sign(g.score) == g.outcome
    _, gomoku_games = played("gomoku6")
    assert not any(g.has_aux for g in gomoku_games)


def test_bad_aux_targets_are_rejected():
    go, games = played("go:size=9")
    g = games[0]
    assert rejected(go, dataclasses.replace(g, score=g.score + 2)) == "bad_aux_target"
    flipped = dataclasses.replace(g, ownership=-g.ownership, score=-g.ownership.sum() - go.komi)
    if np.sign(flipped.score) != g.outcome:
        assert rejected(go, flipped) == "bad_aux_target"
    assert rejected(go, dataclasses.replace(g, score=None)) == "bad_aux_target"
    gomoku, gomoku_games = played("gomoku6")
    h = gomoku_games[0]
    tagged = dataclasses.replace(h, ownership=np.zeros((6, 6), np.int8), score=0.0)
    assert rejected(gomoku, tagged) == "bad_aux_target"
