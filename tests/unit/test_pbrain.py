"""The Gomocup brain (deploy/engines/pbrain.py), driven in-process by scripted manager
conversations with a tiny untrained 6x6 gomoku net: every command, errors, time."""

from __future__ import annotations

import io

import pytest

from zeroforge import __version__
from zeroforge.deploy.engines.agent import Agent
from zeroforge.deploy.engines.pbrain import Brain
from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.shared.nets import NetConfig


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Agent:
    folder = tmp_path_factory.mktemp("pbrain")
    learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), "gomoku6",
                      NetConfig.preset("tiny"))
    return Agent(learner.save(folder / "checkpoint.pt"), simulations=4, device="cpu")


@pytest.fixture()
def brain(agent: Agent) -> Brain:
    agent.speed = None
    return Brain(agent)


def talk(brain: Brain, script: str) -> list[str]:
    out = io.StringIO()
    brain.serve(io.StringIO(script), out)
    return out.getvalue().splitlines()


def xy(text: str) -> tuple[int, int]:
    x, y = (int(v) for v in text.split(","))
    assert 0 <= x < 6 and 0 <= y < 6, text
    return x, y


def test_start_begin_turn_and_end(brain: Brain) -> None:
    out = talk(brain, "START 6\nBEGIN\nTURN 0,0\nturn 5,5\nEND\nABOUT\n")
    assert out[0] == "OK"
    moves = [xy(m) for m in out[1:]]
    assert len(moves) == 3 and len({*moves, (0, 0), (5, 5)}) == 5  # all distinct, legal
    assert brain.ended  # END: no answer, nothing after it is read
    assert brain.session is not None and len(brain.session.moves) == 5
    # x is the column, y the row: point = y * width + x
    assert brain.session.moves[1] == 0 and brain.session.moves[3] == 35


def test_errors_are_answered_not_raised(brain: Brain) -> None:
    out = talk(brain, "TURN 1,1\nSTART 15\nRECTSTART 6,7\nSTART x\nSTART 6\nTURN 6,0\n"
                      "TURN a,b\nTURN 2,2\nFLY\nINFO timeout_turn fast\n")
    assert out[0] == "ERROR no game: send START first"
    assert out[1] == "ERROR unsupported size 15x15: this net plays 6x6"
    assert out[2] == "ERROR unsupported size 6x7: this net plays 6x6"
    assert out[3].startswith("ERROR START wants a board size")
    assert out[4] == "OK"
    assert out[5] == "ERROR coordinate 6,0 is off the 6x6 board"
    assert out[6] == "ERROR bad coordinate 'a,b' (want x,y)"
    reply = xy(out[7])
    assert out[8] == "UNKNOWN command FLY"
    assert out[9].startswith("ERROR INFO timeout_turn wants an integer")
    occupied = f"{reply[0]},{reply[1]}"
    assert talk(brain, f"TURN {occupied}\n")[0].startswith(f"ERROR {occupied}: illegal move")


def test_board_position_takeback_restart_and_play(brain: Brain) -> None:
    out = talk(brain, "START 6\nBOARD\n0,0,2\n1,0,1\n0,1,2\nDONE\n")
    assert out[0] == "OK"
    move = xy(out[1])
    session = brain.session
    assert session is not None and session.moves[:3] == [0, 1, 6]  # opponent moved first
    assert session.state.board[0][0] == 1 and session.state.board[0][1] == 2  # brain is O
    assert session.moves[3] == move[1] * 6 + move[0]
    assert talk(brain, f"TAKEBACK {move[0]},{move[1]}\nTAKEBACK 0,0\n") == [
        "OK", "ERROR TAKEBACK 0,0: not the last move played"]
    assert talk(brain, "PLAY 3,3\n") == ["3,3"] and session.moves[-1] == 21
    assert talk(brain, "RESTART\n") == ["OK"]
    assert brain.session is not None and brain.session.moves == []
    assert talk(brain, "BOARD\n0,0,1\n0,0,2\nDONE\n") == ["ERROR BOARD names a point twice"]
    assert talk(brain, "BOARD\n0,0,1\n1,1,1\nDONE\n")[0].startswith(
        "ERROR BOARD with 2 own and 0 opponent stones")
    assert talk(brain, "BOARD\n0,0,5\nDONE\n") == ["ERROR BOARD line '0,0,5': want x,y,1|2|3"]


def test_a_won_game_is_over(brain: Brain) -> None:
    # the opponent has three of four in a column (k=4 on 6x6); block or not, play until over
    out = talk(brain, "START 6\nBOARD\n0,0,2\n0,1,2\n0,2,2\n5,5,1\n3,3,1\nDONE\n")
    assert out[0] == "OK"
    session = brain.session
    assert session is not None
    if not session.over and session.state.board[0][18] == 0:  # the brain did not block
        assert talk(brain, "TURN 0,3\n") == ["ERROR the game is over"]
        assert session.over and session.outcome == 1


def test_info_about_and_rules(brain: Brain) -> None:
    out = talk(brain, "INFO timeout_turn 1000\nINFO timeout_match 60000\nINFO time_left 30000\n"
                      "INFO max_memory 83886080\nINFO game_type 1\nINFO folder /tmp\n"
                      "INFO evaluate 1,1\nINFO rule 1\n")
    assert out == []  # INFO is never answered (unless it asks for a rule we lack)
    assert brain.info == {"timeout_turn": 1000, "timeout_match": 60000, "time_left": 30000,
                          "max_memory": 83886080, "game_type": 1}
    assert brain.game.exact  # rule 1: exactly k in a row wins
    out = talk(brain, "INFO rule 4\nABOUT\n")
    assert out[0].startswith("MESSAGE zeroforge plays free-style or exact-five")
    assert not brain.game.exact  # rule 4 (renju) has no exact bit
    assert out[1].startswith(f'name="zeroforge", version="{__version__}"')


def test_time_limits_budget_each_move(brain: Brain) -> None:
    talk(brain, "START 6\n")
    session = brain.session
    assert session is not None
    assert brain._budget(session) is None
    talk(brain, "INFO timeout_turn 1000\n")
    assert brain._budget(session) == pytest.approx(1.0 * 0.7 - 0.05)
    talk(brain, "INFO timeout_match 20000\nINFO time_left 2000\n")
    # 2 s left over max(10, 36 empty / 2) = 18 moves
    assert brain._budget(session) == pytest.approx(2.0 / 18 * 0.7 - 0.05)
    talk(brain, "INFO timeout_turn 0\nINFO timeout_match 0\n")  # 0: play at once
    assert brain._budget(session) == 0.0
    out = talk(brain, "BEGIN\n")
    xy(out[0])
    assert brain.agent.speed is not None
