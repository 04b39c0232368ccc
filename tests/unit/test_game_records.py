"""Game records (actors/game_records.py, the self-play sample) and ``zeroforge replay``."""

from __future__ import annotations

import numpy as np
import pytest

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.game_records import RecordWriter, safe_name, sgf_of_moves
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.deploy.cli import main
from zeroforge.shared.formats import GameRecord, read_sgf, read_sgf_file, replay, write_sgf
from zeroforge.shared.games import make_game
from zeroforge.shared.players import RandomPlayer, make_player, play_match
from zeroforge.shared.search import SearchConfig, UniformEvaluator


@pytest.mark.parametrize("spec, gm", [("go:size=5", 1), ("gomoku:width=6,height=6,k=4", 4),
                                      ("tictactoe", 4)])
def test_match_games_are_written_and_replay_to_their_outcome(tmp_path, spec, gm):
    game = make_game(spec)
    match = play_match(game, RandomPlayer(), make_player("uct:2"), 4,
                       np.random.default_rng(1))
    writer = RecordWriter(tmp_path / "eval", game)
    for n, moves in enumerate(match.moves):
        black, white = ("random", "uct2") if match.a_first[n] else ("uct2", "random")
        assert writer.write(f"v3-uct:2-{n}", moves, black=black, white=white) is not None
    files = sorted((tmp_path / "eval").glob("*.sgf"))
    assert [f.name for f in files] == [f"v3-uct2-{n}.sgf" for n in range(4)]
    for n, f in enumerate(files):
        text = f.read_text()
        assert f"GM[{gm}]" in text
        (record,) = read_sgf_file(f)
        assert record.moves == match.moves[n]
        session = replay(record)
        assert session.over
        # the record's result is Black's (the first mover's) view of the match outcome
        a_view = int(match.outcomes[n])
        assert record.result == (a_view if match.a_first[n] else -a_view) == session.outcome
        assert record.black == ("random" if match.a_first[n] else "uct2")


def test_the_directory_keeps_at_most_keep_files(tmp_path):
    game = make_game("tictactoe")
    writer = RecordWriter(tmp_path, game, keep=5)
    for n in range(12):
        writer.write(f"g{n:02d}", [0, 3, 1, 4, 2])
    names = sorted(p.name for p in tmp_path.glob("*.sgf"))
    assert names == [f"g{n:02d}.sgf" for n in range(7, 12)] and writer.written == 12


def test_games_sgf_cannot_hold_and_bad_moves_are_not_written(tmp_path, caplog):
    five = make_game("fivestone")
    writer = RecordWriter(tmp_path / "five", five)
    assert writer.write("g", [0]) is None and not (tmp_path / "five").exists()
    ttt = RecordWriter(tmp_path / "ttt", make_game("tictactoe"))
    with caplog.at_level("WARNING"):
        assert ttt.write("bad", [0, 0]) is None  # the same point twice
    assert ttt.errors == 1 and not list((tmp_path / "ttt").glob("*.sgf"))
    assert safe_name("../uct:100") == "..uct100" and "/" not in safe_name("a/b")


def test_selfplay_keeps_one_game_in_record_every():
    game = make_game("tictactoe")
    worker = SelfPlayWorker(game, UniformEvaluator(), SearchConfig(num_simulations=2),
                            SelfPlayConfig(games_in_parallel=4, record_every=3), seed=1)
    finished = worker.play_games(12)
    assert len(worker.records) == len(range(0, len(finished), 3))
    by_id = {g.game_id: g for g in finished}
    for game_id, moves in worker.records:
        record = read_sgf(sgf_of_moves(game, moves))[0]
        # the moves are the game's own: as many as its positions, ending in its outcome
        assert len(moves) == len(by_id[game_id].to_play)
        assert replay(record).outcome == record.result == by_id[game_id].outcome
    none = SelfPlayWorker(game, UniformEvaluator(), SearchConfig(num_simulations=2),
                          SelfPlayConfig(games_in_parallel=4, record_every=0), seed=1)
    none.play_games(4)
    assert none.records == []


def test_replay_shows_every_move_and_the_result(tmp_path, capsys):
    game = make_game("go:size=5")
    match = play_match(game, RandomPlayer(), RandomPlayer(), 1, np.random.default_rng(4))
    path = tmp_path / "g.sgf"
    path.write_text(sgf_of_moves(game, match.moves[0], black="a", white="b"))
    result = read_sgf_file(path)[0].result_text
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    moves = len(match.moves[0])
    assert out.startswith(f"{game.spec.spec_string}: a (black) vs b (white), {moves} moves")
    assert out.count("\nmove ") == moves and f"\nmove {moves}: " in out
    assert out.rstrip().endswith(f"result: {result} (as recorded)")

    assert main(["replay", str(path), "--move", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nmove ") == 1 and "\nmove 3: " in out


@pytest.mark.parametrize("case, expected", [
    ("illegal", "move 2 (W A3): illegal move A3"),
    ("wrong_result", "ends B+ on the board but the record says W+"),
    ("missing", "no such file"),
    ("garbage", "g.sgf: "),
    ("wrong_game", "does not match"),
    ("move_past_end", "--move 9: the game has only 5 moves"),
])
def test_replay_errors_are_one_line(tmp_path, capsys, case, expected):
    path = tmp_path / "g.sgf"
    moves = [0, 3, 1, 4, 2]
    text = write_sgf(GameRecord(game="tictactoe", moves=moves, result_text="B+"))
    extra: list[str] = []
    if case == "illegal":
        text = write_sgf(GameRecord(game="tictactoe", moves=[0, 0, 1]))
    elif case == "wrong_result":
        text = text.replace("RE[B+]", "RE[W+]")
    elif case == "garbage":
        text = "(;FF[4]GM[4]SZ[3"
    elif case == "wrong_game":
        extra = ["--game", "gomoku"]
    elif case == "move_past_end":
        extra = ["--move", "9"]
    if case != "missing":
        path.write_text(text)
    assert main(["replay", str(path), *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zeroforge replay: error: ") and expected in err, err
    assert len(err.strip().splitlines()) == 1
