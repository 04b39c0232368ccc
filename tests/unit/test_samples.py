"""The per-game sample codec: round trips, and rejection of every kind of bad entry."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroforge.shared.samples import GameSamples, SampleFormatError, decode, encode


def make_samples(t: int = 5, a: int = 9, shape=(4, 3, 3), seed: int = 0) -> GameSamples:
    rng = np.random.default_rng(seed)
    policy = rng.random((t, a)).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    return GameSamples(
        game="tictactoe", game_version=1,
        obs=rng.integers(0, 2, (t, *shape)).astype(np.uint8),
        policy=policy, to_play=(np.arange(t) % 2).astype(np.int8), outcome=-1,
        weights_version=7, run_id="r1", worker_id="w3", game_id="g42",
    )


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 40), a=st.integers(1, 100), c=st.integers(1, 17),
       h=st.integers(1, 9), seed=st.integers(0, 1000))
def test_round_trip(t, a, c, h, seed):
    g = make_samples(t, a, (c, h, h), seed)
    back = decode(encode(g))
    np.testing.assert_array_equal(back.obs, g.obs)
    np.testing.assert_allclose(back.policy, g.policy, atol=1e-3)
    np.testing.assert_array_equal(back.to_play, g.to_play)
    assert (back.outcome, back.weights_version, back.game_id, back.worker_id, back.run_id) == (
        -1, 7, "g42", "w3", "r1")


def test_value_targets_are_from_the_movers_view():
    g = make_samples(t=4)
    g.outcome = 1  # first player won
    np.testing.assert_array_equal(g.value_targets(), [1, -1, 1, -1])
    g.outcome = 0
    assert (g.value_targets() == 0).all()


def _mutate(**changes) -> bytes:
    entry = msgpack.unpackb(encode(make_samples()), raw=False)
    entry.update(changes)
    return msgpack.packb({k: v for k, v in entry.items() if v is not ...}, use_bin_type=True)


@pytest.mark.parametrize("data, reason", [
    (b"\xc1garbage", "not_msgpack"),
    (msgpack.packb([1, 2, 3]), "not_a_map"),
    (_mutate(schema=99), "unknown_schema"),
    (_mutate(game_id=...), "missing_field"),
    (_mutate(positions="five"), "bad_field"),
    (_mutate(outcome=3), "bad_outcome"),
    (_mutate(positions=6), "bad_length"),
    (_mutate(obs_shape=[4, 3]), "bad_shape"),
    (_mutate(policy=np.full(45, np.nan, np.float16).tobytes()), "bad_policy"),
    (_mutate(to_play=b"\x00\x01\x02\x00\x01"), "bad_to_play"),
    (b"\x00" * (17 * 1024 * 1024), "oversized"),
])
def test_bad_entries_are_rejected_with_a_reason(data, reason):
    with pytest.raises(SampleFormatError) as err:
        decode(data)
    assert err.value.reason == reason
    assert reason in str(err.value)


def _with_aux(g: GameSamples, seed: int = 0) -> GameSamples:
    rng = np.random.default_rng(seed)
    g.ownership = rng.integers(-1, 2, g.obs.shape[2:]).astype(np.int8)
    g.score = float(g.ownership.sum()) - 7.5
    return g


@pytest.mark.parametrize("recorded", [None, [True, False, True, True, False]])
def test_ownership_and_score_round_trip_as_schema_3(recorded):
    g = _with_aux(make_samples())
    if recorded is not None:
        g.policy_recorded = np.array(recorded)
        g.policy[~g.policy_recorded] = 0
    entry = msgpack.unpackb(encode(g), raw=False)
    assert entry["schema"] == 3 and ("policy_recorded" in entry) == (recorded is not None)
    back = decode(encode(g))
    np.testing.assert_array_equal(back.ownership, g.ownership)
    assert back.score == g.score and back.has_aux
    np.testing.assert_array_equal(back.policy_mask, g.policy_mask)


def test_a_game_without_aux_targets_stays_schema_1_byte_for_byte():
    g = make_samples()
    assert msgpack.unpackb(encode(g), raw=False)["schema"] == 1
    back = decode(encode(g))
    assert back.ownership is None and back.score is None and not back.has_aux


def test_aux_targets_are_from_the_movers_view():
    g = _with_aux(make_samples(t=4))
    own = g.ownership_targets()
    assert own.shape == (4, 3, 3) and own.dtype == np.int8
    np.testing.assert_array_equal(own[0], g.ownership)
    np.testing.assert_array_equal(own[1], -g.ownership)
    np.testing.assert_allclose(g.score_targets(), [g.score, -g.score, g.score, -g.score])
    with pytest.raises(ValueError, match="no ownership"):
        make_samples().ownership_targets()


def test_ownership_without_score_cannot_be_encoded():
    g = make_samples()
    g.ownership = np.zeros((3, 3), np.int8)
    with pytest.raises(ValueError, match="come together"):
        encode(g)
    g.score, g.ownership = 1.0, np.zeros((2, 2), np.int8)
    with pytest.raises(ValueError, match="shape"):
        encode(g)


def _mutate_aux(**changes) -> bytes:
    entry = msgpack.unpackb(encode(_with_aux(make_samples())), raw=False)
    entry.update(changes)
    return msgpack.packb({k: v for k, v in entry.items() if v is not ...}, use_bin_type=True)


@pytest.mark.parametrize("data, reason", [
    (_mutate_aux(ownership=b"\x01" * 8), "bad_length"),
    (_mutate_aux(ownership=b"\x02" * 9), "bad_field"),
    (_mutate_aux(score=...), "missing_field"),
    (_mutate_aux(score="7"), "bad_field"),
    (_mutate_aux(score=True), "bad_field"),
    (_mutate_aux(score=float("nan")), "bad_field"),
    (_mutate_aux(score=1e9), "bad_field"),
    (_mutate_aux(policy_recorded=b"\x01\x01"), "bad_length"),
])
def test_bad_aux_fields_are_rejected_with_a_reason(data, reason):
    with pytest.raises(SampleFormatError) as err:
        decode(data)
    assert err.value.reason == reason
