"""RunStatus.actors (per-actor rows): JSON round trip and reading JSON from before it."""

from __future__ import annotations

import json

from zeroforge.deploy.runtime.status import RunStatus

ROWS = [
    {"kind": "learner", "index": 0, "state": "alive", "node": "a1b2c3d4", "pid": 4242,
     "games": 0.0, "positions": 0.0, "steps": 120.0, "evaluations": 0.0},
    {"kind": "selfplay", "index": 3, "state": "restarting", "node": "", "pid": 0,
     "games": 0.0, "positions": 0.0, "steps": 0.0, "evaluations": 0.0},
]


def test_actor_rows_survive_a_json_round_trip():
    status = RunStatus(run_id="r", state="running", elapsed_s=3.0, actors=ROWS)
    text = status.json_text()
    back = RunStatus.from_json(json.loads(text))
    assert back == status
    assert back.actors == ROWS
    assert json.loads(text)["actors"][1]["state"] == "restarting"


def test_json_from_before_the_rows_reads_as_no_rows_and_unknown_keys_are_ignored():
    old = RunStatus(run_id="r", state="stopped", elapsed_s=1.0, games=5.0).to_json()
    del old["actors"]
    old["from_the_future"] = 1
    back = RunStatus.from_json(old)
    assert back.actors == []
    assert back.games == 5.0


def test_to_json_is_asdict_made_by_hand_and_shares_nothing_with_the_status():
    import dataclasses

    status = RunStatus(run_id="r", state="running", elapsed_s=3.0, desired={"selfplay": 2},
                       actor_states={"selfplay": {"alive": 2}}, rejected={"dup": 1.0},
                       waiting={"selfplay": "1 waiting"}, actors=ROWS, games=7.0)
    data = status.to_json()
    assert data == dataclasses.asdict(status)
    data["actors"][0]["state"] = "gone"
    data["actor_states"]["selfplay"]["alive"] = 0
    data["desired"]["selfplay"] = 9
    assert status.actors[0]["state"] == "alive"
    assert status.actor_states["selfplay"]["alive"] == 2
    assert status.desired["selfplay"] == 2
