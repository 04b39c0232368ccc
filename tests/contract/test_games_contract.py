"""One conformance suite over every game and preset (pgx style).

Random games, checked for dtypes and shapes, legal masks against step, terminal behaviour,
batched play against one-game-at-a-time play, symmetries, the mover's-view observations,
spec-string and notation round trips.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from zeroforge.shared.games import Game, IllegalMoveError, State, make_game, sample_legal

SPECS = [
    "tictactoe",
    "gomoku6",
    "gomoku8",
    "gomoku15",
    "gomoku:size=7,k=4,exact=true",
    "gomoku:width=7,height=5,k=4",
    "go9",
    "go:size=9,ko=simple",
    "go:size=7,obs=compact,komi=6",
    "go:size=7,obs=features",
    "go:size=5,max_moves=30",
    "go13",
    "5stone_chess",
    "5stone_chess:first=white,max_moves=60",
]


@pytest.fixture(params=SPECS, scope="module")
def game(request) -> Game:
    return make_game(request.param)


def random_play(game: Game, batch: int, seed: int, plies: int | None = None):
    """Play random games; returns the list of states and the actions [T, B] played."""
    rng = np.random.default_rng(seed)
    state = game.init(batch)
    states, actions = [state], []
    limit = plies if plies is not None else game.spec.max_moves + 1
    while not state.terminal.all() and len(actions) < limit:
        a = sample_legal(state.legal, rng)
        actions.append(a)
        state = game.step(state, a)
        states.append(state)
    return states, np.array(actions, dtype=np.int64).reshape(-1, batch)


def assert_states_equal(a: State, b: State) -> None:
    for f in dataclasses.fields(a):
        np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name), err_msg=f.name)


def test_spec_round_trips_through_make_game(game: Game):
    again = make_game(game.spec.spec_string)
    assert again.spec == game.spec
    c, h, w = game.spec.obs_shape
    assert (h, w) == game.spec.board_shape


def test_initial_state_shapes_and_dtypes(game: Game):
    s = game.init(5)
    a = game.spec.num_actions
    assert s.batch_size == 5
    assert game.legal_mask(s).shape == (5, a) and game.legal_mask(s).dtype == bool
    assert game.legal_mask(s).any(axis=1).all()
    assert game.terminal(s).dtype == bool and not game.terminal(s).any()
    assert (game.to_play(s) == 0).all()
    assert (s.last_action == -1).all()
    obs = game.observe(s)
    assert obs.shape == (5, *game.spec.obs_shape) and obs.dtype == np.uint8
    for name, arr in s.arrays().items():
        assert arr.shape[0] == 5, name


def test_random_games_end_with_an_outcome(game: Game):
    states, actions = random_play(game, batch=16, seed=1)
    final = states[-1]
    assert final.terminal.all(), "every game ends within spec.max_moves"
    assert len(actions) <= game.spec.max_moves
    assert set(np.unique(final.outcome)) <= {-1, 0, 1}
    assert not final.legal.any(), "a finished game has no legal move"
    for prev, nxt in zip(states, states[1:], strict=False):
        running = ~prev.terminal
        # the mover alternates in every running game; plies count up by one
        assert (nxt.to_play[running] == 1 - prev.to_play[running]).all()
        assert (nxt.ply[running] == prev.ply[running] + 1).all()
        # finished games stay exactly as they were
        assert (nxt.ply[~running] == prev.ply[~running]).all()
        assert (nxt.outcome[~running] == prev.outcome[~running]).all()


def test_random_rollouts_end_every_game_and_leave_their_input_alone(game: Game):
    """Both ways ``search.rollout`` plays a game out at random: the game's compiled playout
    (``Game.random_playout``, which every game here has) and the ply-at-a-time rollout
    (``rollout_outcomes``, for games without one and for policy rollouts): finished games
    keep their outcomes, running ones end with one, the input is not modified."""
    from zeroforge.shared.search import random_outcomes, rollout_outcomes

    assert game.random_playout(game.init(1), np.random.default_rng(0)) is not None
    states, _ = random_play(game, batch=8, seed=3, plies=6)
    mid = states[-1]
    before = mid.copy()
    rng = np.random.default_rng(0)
    for outcomes in (random_outcomes(game, mid, rng),
                     rollout_outcomes(game, mid, lambda s: sample_legal(game.legal_mask(s), rng))):
        assert_states_equal(before, mid)
        assert outcomes.shape == (mid.batch_size,) and set(np.unique(outcomes)) <= {-1, 0, 1}
        assert (outcomes[mid.terminal] == mid.outcome[mid.terminal]).all()


def test_step_does_not_modify_its_input(game: Game):
    states, _ = random_play(game, batch=4, seed=2, plies=5)
    before = states[-1].copy()
    game.step(states[-1], sample_legal(states[-1].legal, np.random.default_rng(0)))
    assert_states_equal(before, states[-1])


def test_batched_play_equals_one_game_at_a_time(game: Game):
    batch = 6
    states, actions = random_play(game, batch=batch, seed=3)
    for i in range(batch):
        single = game.init(1)
        for t in range(len(actions)):
            if single.terminal[0]:
                break
            single = game.step(single, actions[t, i : i + 1])
            assert_states_equal(single, states[t + 1].take([i]))


def test_legal_mask_agrees_with_step(game: Game):
    states, _ = random_play(game, batch=3, seed=4)
    rng = np.random.default_rng(5)
    picks = rng.choice(len(states), size=min(6, len(states)), replace=False)
    for t in picks:
        one = states[t].take([0])
        if one.terminal[0]:
            continue
        legal = one.legal[0]
        for a in rng.choice(game.spec.num_actions, size=min(30, game.spec.num_actions),
                            replace=False):
            if legal[a]:
                game.step(one, np.array([a]))
                assert game.illegal_reason(one, 0, int(a)) is None
            else:
                with pytest.raises(ValueError):
                    game.step(one, np.array([a]))
                assert game.illegal_reason(one, 0, int(a))


def test_finished_games_ignore_actions_and_reject_nothing(game: Game):
    states, _ = random_play(game, batch=2, seed=6)
    final = states[-1]
    again = game.step(final, np.array([-5, 10**6]))
    assert_states_equal(again, final)


def _inverse(perm: np.ndarray) -> np.ndarray:
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.shape[0])
    return inv


def test_symmetries_map_play_consistently(game: Game):
    syms = game.symmetries()
    assert syms[0].name == "identity"
    assert (syms[0].action_perm == np.arange(game.spec.num_actions)).all()
    states, actions = random_play(game, batch=1, seed=7, plies=12)
    for sym in syms:
        # new[i] = old[perm[i]], so old action a becomes new action inv[a]
        inv = _inverse(sym.action_perm)
        assert sorted(sym.action_perm.tolist()) == list(range(game.spec.num_actions))
        s = game.init(1)
        for t in range(len(actions)):
            original = states[t + 1]
            s = game.step(s, inv[actions[t]])
            np.testing.assert_array_equal(game.observe(s), sym.apply_obs(game.observe(original)))
            np.testing.assert_array_equal(s.legal, sym.apply_policy(original.legal))
            np.testing.assert_array_equal(s.outcome, original.outcome)
        policy = np.random.default_rng(8).random((1, game.spec.num_actions))
        assert np.allclose(sym.apply_policy(policy).sum(), policy.sum())


def test_observation_is_from_the_movers_view(game: Game):
    """Swapping who is to move changes which planes hold whose stones."""
    states, actions = random_play(game, batch=1, seed=9, plies=6)
    first_view = game.observe(states[4])    # first player to move
    second_view = game.observe(states[5])   # second player to move
    assert states[4].to_play[0] == 0 and states[5].to_play[0] == 1
    # after the first player's move, its pieces appear in the opponent plane of the
    # second player's view
    mine, theirs = game.piece_planes()
    first_pieces_after = second_view[0, theirs]
    first_pieces_before = first_view[0, mine]
    moved_or_placed = (first_pieces_after.astype(int) - first_pieces_before.astype(int))
    assert moved_or_placed.sum() in (0, 1), "one piece placed, or one piece moved"
    assert first_pieces_after.sum() >= 1


def test_notation_round_trips(game: Game):
    for a in range(game.spec.num_actions):
        text = game.format_action(a)
        assert game.parse_action(text) == a, text
        assert game.parse_action(text.lower()) == a, text.lower()
    for bad in ("", "zz", "Z99", "@#!"):
        with pytest.raises(IllegalMoveError):
            game.parse_action(bad)


def test_render_shows_board_and_result(game: Game):
    states, _ = random_play(game, batch=1, seed=10)
    start, end = game.render(states[0]), game.render(states[-1])
    h, _ = game.spec.board_shape
    assert len(start.splitlines()) >= h
    assert start != end
    assert any(w in end.lower() for w in ("win", "draw", "over", "+"))
