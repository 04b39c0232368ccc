"""The learner service's checkpoint state: round trip, the local loop's defaults, and
one-line errors for a foreign or malformed state."""

from pathlib import Path

import pytest

from zeroforge.learner.learner import CheckpointError
from zeroforge.learner.received_games import ReceivedGames
from zeroforge.learner.service_state import SERVICE_STATE_FORMAT, ServiceState

WHERE = Path("runs/r/checkpoint.pt")


def read(extra):
    return ServiceState.from_extra(extra, WHERE, games_seen=7, positions_inserted=70)


def test_round_trip_keeps_every_field():
    state = ServiceState(stream_cursor="17-3", games_received=12, positions_received=340,
                         steps_at_publish=40, rejected={"duplicate": 2, "wrong_game": 1},
                         recent_game_ids=["a", "b", "c"], throttled_s=3.5, run_id="r1",
                         trained_s=12.5, received=ReceivedGames())
    for game_id in ("w-x-0", "w-x-1", "w-x-5", "v-y-2", "other"):
        state.received.remember(game_id)
    extra = state.to_extra()
    assert extra["format"] == SERVICE_STATE_FORMAT
    assert read(extra) == state


def test_a_local_loop_checkpoint_takes_the_learners_own_counters():
    for extra in (None, {}):
        state = read(extra)
        assert (state.stream_cursor, state.games_received, state.positions_received,
                state.steps_at_publish, state.rejected, state.recent_game_ids,
                state.throttled_s) == (None, 7, 70, -1, {}, [], 0.0)


@pytest.mark.parametrize("extra, needle", [
    ({"format": "zeroforge-learner-service-v9"}, "unknown learner-service state"),
    ({"format": SERVICE_STATE_FORMAT, "stream_cursor": 17}, "malformed.*stream_cursor"),
    ({"format": SERVICE_STATE_FORMAT, "games_received": "many"}, "malformed.*ValueError"),
    ({"format": SERVICE_STATE_FORMAT, "rejected": ["duplicate"]}, "malformed"),
    ({"format": SERVICE_STATE_FORMAT, "throttled_s": None}, "malformed.*TypeError"),
    ({"format": SERVICE_STATE_FORMAT, "received_games": {"w-x": [2, [1]]}},
     "malformed.*received games of 'w-x'"),
])
def test_a_bad_state_is_one_error_naming_the_file(extra, needle):
    with pytest.raises(CheckpointError, match=needle) as caught:
        read(extra)
    message = str(caught.value)
    assert message.startswith(str(WHERE)) and "\n" not in message
