"""``zeroforge play`` as a person meets it: a trained net (a tiny checkpoint made here) as
the opponent with ``--hints``, undo and resign typed at the terminal; ``play --help`` lists
exactly the player specs ``make_player`` accepts; ``--web`` serves the board."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from tests.e2e.test_cli import ZF, zf
from tests.play_nets import tiny_checkpoint
from tests.processes import ignores_sigint
from zeroforge.shared.formats import read_sgf_file, replay
from zeroforge.shared.players import PLAYER_SPECS


@pytest.fixture(scope="module")
def gomoku8_net(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny_checkpoint(tmp_path_factory.mktemp("g8"), "gomoku8"))


def test_play_against_a_net_with_hints_undo_and_resign(gomoku8_net: str, tmp_path) -> None:
    sgf = tmp_path / "game.sgf"
    r = zf("play", "--game", "gomoku8", "--second", f"net:{gomoku8_net}:8", "--hints",
           "--seed", "2", "--sgf", str(sgf),
           stdin="D5\nZ9\nundo\nE4\nhint\nE5\nresign\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert len(re.findall(r"^second \(checkpoint\) plays [A-H][1-8]$", out, re.M)) == 3, out
    hints = re.findall(r"^hint checkpoint: value [+-]\d\.\d\d for the player to move; top "
                       r"moves \(visit share, net prior\): ([A-H][1-8] \d+% prior \d+%.*)$",
                       out, re.M)
    assert len(hints) == 5, out  # every turn of the person: 2 before undo, 3 after
    assert "'Z9' is not a coordinate like E4; try again" in out
    assert re.search(r"^took back 2 moves: D5 [A-H][1-8]$", out, re.M)
    assert "suggested: " in out
    assert "result: second player wins by resignation after 4 moves" in out
    [record] = read_sgf_file(sgf)
    assert record.result_text == "W+R" and record.white == f"net:{gomoku8_net}:8"
    moves = replay(record).moves
    assert len(moves) == 4 and record.moves[0] == 4 * 8 + 4  # E4: row 4 from the top


def test_a_net_plays_a_whole_game_and_a_net_for_another_game_is_refused(gomoku8_net) -> None:
    r = zf("play", "--game", "gomoku8", "--first", f"net:{gomoku8_net}:2", "--second",
           "random", "--quiet", "--seed", "1")
    assert r.returncode == 0 and "result: " in r.stdout, r.stderr
    r = zf("play", "--game", "gomoku6", "--first", f"net:{gomoku8_net}")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "a checkpoint of game 'gomoku:size=8,k=5'" in r.stderr


def test_play_help_lists_exactly_the_player_specs() -> None:
    r = zf("play", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    listed = re.search(r"Players \(--first, --second\): (.*?)\.(?: |$)", text)
    assert listed, text
    assert listed.group(1).split(", ") == list(PLAYER_SPECS)
    for flag in ("--hints", "--web", "--port", "--host"):
        assert flag in text


def test_play_web_serves_until_interrupted() -> None:
    import urllib.request

    cmd = ZF
    proc = subprocess.Popen([*cmd, "play", "--web", "--port", "0", "--game", "go9"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.match(r"board at (http://127\.0\.0\.1:\d+/)$", line.strip())
        assert found, line
        with urllib.request.urlopen(found.group(1) + "api/state", timeout=30) as resp:
            assert b'"game": "go:size=9' in resp.read()
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "board closed" in rest, rest


def test_play_web_started_in_the_background_by_a_script_stops_on_sigint() -> None:
    """A shell without job control starts ``cmd &`` with SIGINT ignored, and Python keeps
    it so: the board must still stop cleanly on ``kill -INT`` (deploy/signals.py)."""
    import os
    import shlex

    cmd = ZF
    play = [*cmd, "play", "--web", "--port", "0", "--game", "tictactoe"]
    proc = subprocess.Popen(["sh", "-c", f"{shlex.join(play)} & echo pid=$!; wait $!"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("pid="), first
        pid = int(first.removeprefix("pid="))
        line = proc.stdout.readline()
        assert re.match(r"board at http://127\.0\.0\.1:\d+/$", line.strip()), line
        assert not ignores_sigint(pid), "SIGINT still ignored"
        os.kill(pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, rest
    assert "Traceback" not in rest
