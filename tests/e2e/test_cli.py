"""The ``zeroforge`` command as a user runs it: a real subprocess, real stdin/stdout."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from zeroforge.shared.formats import read_sgf_file

EXE = shutil.which("zeroforge") or ""
ZF = [EXE] if EXE else [sys.executable, "-m", "zeroforge"]
"""The ``zeroforge`` command: the installed script, else ``python -m zeroforge``."""


def zf(*args: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*ZF, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def test_help_everywhere():
    top = zf("--help")
    assert top.returncode == 0 and "train" in top.stdout and "play" in top.stdout
    for sub in ("games", "play", "train"):
        r = zf(sub, "--help")
        assert r.returncode == 0 and "usage: zeroforge " + sub in r.stdout


@pytest.mark.parametrize("args", [("--bogus",), ("play", "--seed", "x"), ("nosuchcommand",), ()])
def test_bad_arguments_exit_2_with_one_line(args):
    r = zf(*args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "error:" in r.stderr and "Traceback" not in r.stderr


def test_runtime_errors_exit_1_with_one_line():
    r = zf("play", "--game", "chess", "--first", "random")
    assert r.returncode == 1 and "unknown game 'chess'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = zf("train", "--local", "--set", "learner.nosuch=1")
    assert r.returncode == 1 and "unknown key 'nosuch'" in r.stderr


def test_random_game_writes_sgf(tmp_path):
    out = tmp_path / "g.sgf"
    r = zf("play", "--game", "gomoku6", "--first", "random", "--second", "random",
           "--seed", "3", "--quiet", "--sgf", str(out))
    assert r.returncode == 0, r.stderr
    assert "result:" in r.stdout
    [record] = read_sgf_file(out)
    assert len(record.moves) >= 7 and record.width == 6


def test_human_gets_reasons_and_can_win():
    # X plays the left column; O (random, seeded) cannot stop three moves in a row unless
    # it happens to block, so feed the whole column and the other cells in order.
    moves = "A3\nA3\nZ9\nA2\nB3\nA1\nB2\nB1\nC3\nC2\nC1\n"
    r = zf("play", "--game", "tictactoe", "--first", "human", "--second", "random",
           "--seed", "1", stdin=moves)
    assert "illegal move A3: A3 is occupied" in r.stdout
    assert "'Z9' is not a coordinate" in r.stdout or "off the" in r.stdout
    assert "result:" in r.stdout and r.returncode == 0


def test_human_input_ending_early_is_an_error():
    r = zf("play", "--game", "tictactoe", "--first", "human", stdin="B2\n")
    assert r.returncode == 1 and "input ended" in r.stderr


def test_plan_prints_the_parts_and_refuses_missing_figures():
    r = zf("plan", "--config", "tictactoe", "--workers", "64", "--worker-positions-per-s",
           "500", "--learner-steps-per-s", "2")
    assert r.returncode == 0, r.stderr
    assert "64 workers on 8 nodes" in r.stdout
    for part in ("sample intake", "learner steps", "weights out of Redis", "controller:"):
        assert part in r.stdout
    assert "saturates first" in r.stdout
    r = zf("plan", "--config", "tictactoe", "--workers", "64")
    assert r.returncode == 1 and "--measure" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
