"""SGF read/write/replay: round trips, hand-written files, malformed input, directories."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zeroforge.shared.formats import (
    GameRecord,
    SgfDirStats,
    SgfError,
    iter_sgf_dir,
    parse_result,
    read_sgf,
    read_sgf_file,
    record_from_session,
    replay,
    write_sgf,
)
from zeroforge.shared.games import GameSession, IllegalMoveError, make_game, sample_legal

FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def random_session(spec: str, seed: int, max_plies: int) -> GameSession:
    """A game of random legal moves, stopped after ``max_plies`` or at its end."""
    rng = np.random.default_rng(seed)
    session = GameSession(make_game(spec))
    while not session.over and len(session.moves) < max_plies:
        session.play(int(sample_legal(session.state.legal, rng)[0]))
    return session


def one(text: str) -> GameRecord:
    records = read_sgf(text)
    assert len(records) == 1
    return records[0]


# --- round trips ---------------------------------------------------------------------------
names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)
comments = st.text(st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("\n]\\[:;()"),
                   max_size=40)


@FAST
@given(
    shape=st.sampled_from([(3, 3, 3), (6, 6, 4), (8, 8, 5), (7, 5, 4), (5, 9, 4)]),
    seed=st.integers(0, 2**31),
    max_plies=st.integers(0, 80),
    black=names,
    white=names,
    comment=comments,
)
def test_random_gomoku_games_round_trip(shape, seed, max_plies, black, white, comment):
    width, height, k = shape
    spec = f"gomoku:width={width},height={height},k={k}"
    session = random_session(spec, seed, max_plies)
    record = record_from_session(session, black=black, white=white, comment=comment,
                                 date="2024-05-01")
    text = write_sgf(record)
    assert "GM[4]" in text
    assert (f"SZ[{width}]" if width == height else f"SZ[{width}:{height}]") in text
    back = one(text)
    assert back == record
    again = replay(back)
    assert again.moves == session.moves
    assert again.outcome == session.outcome and again.over == session.over
    np.testing.assert_array_equal(again.state.board, session.state.board)


@FAST
@given(
    size=st.integers(5, 19),
    moves=st.data(),
    komi=st.sampled_from([None, 0.0, 6.5, 7.5, -3.0, 0.25]),
    result_text=st.sampled_from(["", "?", "B+3.5", "W+R", "0", "Void", "B+T"]),
)
def test_go_records_with_passes_round_trip(size, moves, komi, result_text):
    pass_action = size * size
    actions = moves.draw(st.lists(st.integers(0, pass_action), max_size=60))
    record = GameRecord(game=f"go:size={size}", moves=actions, komi=komi, width=size,
                        height=size, result_text=result_text, black="B", white="W")
    text = write_sgf(record)
    assert "GM[1]" in text and f"SZ[{size}]" in text
    assert text.count("[]") == actions.count(pass_action)  # passes are written as []
    assert one(text) == record


def test_text_escapes_round_trip_exactly():
    record = GameRecord(game="gomoku:size=6,k=4", moves=[0, 7],
                        black="A]li\\ce", white="[Bob]",
                        comment="line one\nclosing ] and \\ backslash\\\nend\\")
    text = write_sgf(record)
    assert "A\\]li\\\\ce" in text
    assert one(text) == record


def test_write_then_read_a_collection():
    a = GameRecord(game="gomoku:size=8,k=5", moves=[1, 2, 3], result_text="W+")
    b = GameRecord(game="go:size=9,komi=6.5", moves=[40, 81, 81], width=9, height=9,
                   komi=6.5, result_text="W+6.5")
    assert read_sgf(write_sgf(a) + "\n" + write_sgf(b)) == [a, b]


def test_write_rejects_what_sgf_cannot_say():
    with pytest.raises(ValueError, match="no game type"):
        write_sgf(GameRecord(game="5stone_chess", width=5, height=5))
    with pytest.raises(ValueError, match="move 2"):
        write_sgf(GameRecord(game="gomoku:size=6,k=4", moves=[0, 36]))  # gomoku has no pass


def test_record_takes_a_game_or_a_spec_and_fills_in_the_board():
    by_game = GameRecord(game=make_game("gomoku:width=7,height=5,k=4"), moves=[3])
    assert by_game.game == "gomoku:width=7,height=5,k=4"
    assert (by_game.width, by_game.height, by_game.komi) == (7, 5, None)
    by_spec = GameRecord(game="go:size=7,komi=6")
    assert (by_spec.width, by_spec.height, by_spec.komi) == (7, 7, 6.0)
    assert by_spec.name == "go" and GameRecord(game="ttt").name == "tictactoe"


def test_record_result_and_text_fill_each_other_and_must_agree():
    assert GameRecord(game="gomoku:size=6,k=4", result=-1).result_text == "W+"
    assert GameRecord(game="gomoku:size=6,k=4", result=0).result_text == "0"
    assert GameRecord(game="gomoku:size=6,k=4", result_text="B+R").result == 1
    with pytest.raises(ValueError, match="disagrees"):
        GameRecord(game="gomoku:size=6,k=4", result=1, result_text="W+R")


# --- hand-written SGF ----------------------------------------------------------------------
@pytest.mark.parametrize(("text", "outcome"), [
    ("B+R", 1), ("B+3.5", 1), ("B+T", 1), ("b+", 1), ("W+0.5", -1), ("W+R", -1), ("W+F", -1),
    ("0", 0), ("Draw", 0), ("?", None), ("Void", None), ("", None),
])
def test_result_values(text, outcome):
    assert parse_result(text) == outcome
    record = one(f"(;GM[1]SZ[9]RE[{text}];B[ee])")
    assert record.result == outcome
    assert record.result_text == text


def test_main_line_follows_first_variations():
    text = """(;GM[1]FF[4]SZ[9]KM[6.5]
        ;B[ee];W[cc]
        (;B[gg]  (;W[gc];B[cg]) (;W[aa]))
        (;B[aa];W[bb];B[ii])
    )"""
    record = one(text)
    assert record.moves == [4 * 9 + 4, 2 * 9 + 2, 6 * 9 + 6, 2 * 9 + 6, 6 * 9 + 2]
    assert record.komi == 6.5
    assert record.game == "go:size=9,komi=6.5"


def test_coordinates_are_column_then_row_from_the_top():
    record = one("(;GM[4]SZ[15:10];B[ba];W[aj];B[oa])")
    assert (record.width, record.height) == (15, 10)
    assert record.moves == [1, 9 * 15, 14]
    game = make_game(record.game)
    assert [game.format_action(a) for a in record.moves] == ["B10", "A1", "P10"]


def test_escapes_soft_line_breaks_and_whitespace():
    text = ("(\n ;\tGM [1] SZ\n[9]\r\n PB[Shin \\] Jin\\\\seo]\n"
            "GC[first\\\nhalf; second\\\r\nhalf\r\nnew line\tand tab]\n ; B [cd] )\n")
    record = one(text)
    assert record.black == "Shin ] Jin\\seo"
    assert record.comment == "firsthalf; secondhalf\nnew line and tab"
    assert record.moves == [3 * 9 + 2]


def test_collection_of_games():
    text = "(;GM[4]SZ[15];B[hh])\n(;GM[1]SZ[9]KM[7.5]RE[W+R];B[ee];W[])  (;GM[1];B[dp])"
    a, b, c = read_sgf(text)
    assert a.name == "gomoku" and a.moves == [7 * 15 + 7]
    assert b.name == "go" and b.moves == [40, 81] and b.result == -1
    assert (c.width, c.height) == (19, 19) and c.moves == [15 * 19 + 3]  # SZ defaults to 19


def test_pass_written_tt_or_empty_on_small_boards_but_tt_is_a_point_beyond_19():
    assert one("(;GM[1]SZ[19];B[tt];W[];B[aa])").moves == [361, 361, 0]
    assert one("(;GM[1]SZ[9];B[tt])").moves == [81]
    big = one("(;GM[1]SZ[21];B[tt])")
    assert big.moves == [19 * 21 + 19]


def test_properties_with_several_values_and_compressed_point_lists():
    record = one("(;GM[1]SZ[9]AB[aa][cc:dd]AW[ii]AB[ee];W[ff])")
    assert sorted(record.setup_black) == sorted([0, 20, 21, 29, 30, 40])
    assert record.setup_white == [80]
    assert record.first_player == 1 and record.moves == [5 * 9 + 5]
    assert one(write_sgf(record)) == record


def test_old_long_property_names_and_byte_order_mark():
    record = one("\ufeff(;GaMe[1]SiZe[9]AddBlack[aa];White[bb])")
    assert record.setup_black == [0] and record.moves == [10]


def test_zeroforge_spec_property_keeps_options_sgf_has_no_property_for():
    record = GameRecord(game="gomoku:size=7,k=4,exact=true", moves=[24])
    back = one(write_sgf(record))
    assert back.game == "gomoku:size=7,k=4,exact=true"
    # Without it, a GM[4] record defaults to five in a row (fewer on tiny boards).
    assert one("(;GM[4]SZ[7];B[dd])").game == "gomoku:size=7,k=5"
    assert one("(;GM[4]SZ[3];B[bb])").game == "gomoku:size=3,k=3"


def test_deeply_nested_variations_do_not_hit_the_recursion_limit():
    depth = 5000
    moves = "".join(f"(;{'BW'[i % 2]}[{'ab'[i % 2]}a]" for i in range(depth))
    record = one("(;GM[1]SZ[9]" + moves + ")" * depth + ")")
    assert len(record.moves) == depth


# --- malformed -----------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "message"), [
    ("", "offset 0: no game tree"),
    ("   \n", "no game tree"),
    ("x(;GM[1])", "offset 0: expected '('"),
    ("(;GM[1];B[aa]", "game 1, offset 13: end of text inside the game tree opened at offset 0"),
    ("(;GM[1];B[aa", "game 1, offset 9: property value never closed"),
    ("(;GM[1];C[a\\]", "property value never closed"),
    ("()", "empty game tree"),
    ("(;GM[1](;B[aa]);W[bb])", "game 1, offset 15: node after a variation"),
    ("(;GM[1];B)", "game 1, offset 8: property B has no value"),
    ("(;GM[1];B[aa]]", "unexpected ']'"),
    ("(;GM[1])(;GM[1];B[aa];B[bb])", "game 2, offset 22: move 2 is B but W is to play"),
    ("(;GM[1])\n(;GM[1]SZ[9];B[zz])", "game 2, offset 22: B[zz] is off the 9x9 board"),
    ("(;GM[1]SZ[9];W[a])", "W[a] is not a point"),
    ("(;GM[3];B[aa])", "GM[3] is neither Go (1) nor gomoku (4)"),
    ("(;GM[x])", "GM[x] is not a number"),
    ("(;GM[4]SZ[15];B[hh];W[])", "move 2 is a pass, which gomoku does not have"),
    ("(;GM[1]SZ[9];B[aa]W[bb])", "both a B and a W move"),
    ("(;GM[1]SZ[9];B[aa][bb])", "move B with 2 values"),
    ("(;GM[1]SZ[9:7])", "Go boards here are square"),
    ("(;GM[1]SZ[nine])", "SZ[nine] is not a size"),
    ("(;GM[1]SZ[60])", "sides must be 1..52"),
    ("(;GM[1]KM[six])", "KM[six] is not a number"),
    ("(;GM[1]SZ[9];B[aa];AB[bb])", "setup stones (AB) after move 1 are not supported"),
    ("(;GM[1]ZG[gomoku:size=9])", "is not a GM[1] game"),
    ("(;GM[1]ZG[go:size])", "is not key=value"),
])
def test_malformed_sgf_raises_one_line_sgf_error(text, message):
    with pytest.raises(SgfError) as info:
        read_sgf(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("();[]\\:BWGMSZKRE1 \nabt"), max_size=40))
def test_any_text_is_read_or_rejected_with_sgf_error(text):
    try:
        records = read_sgf(text)
    except SgfError:
        return
    assert all(isinstance(r, GameRecord) for r in records)


# --- replay -------------------------------------------------------------------------------
GOMOKU_WIN = """(;FF[4]GM[4]SZ[15]PB[Alice]PW[Bob]RE[B+]
;B[hh];W[ih];B[hg];W[ig];B[hf];W[if];B[he];W[ie];B[hd])"""


def test_gomoku_sgf_replays_to_the_expected_board_and_winner():
    record = one(GOMOKU_WIN)
    assert record.game == "gomoku:size=15,k=5"
    assert (record.black, record.white, record.result) == ("Alice", "Bob", 1)
    session = replay(record)
    assert session.over and session.outcome == 1 == record.result
    board = session.state.board[0].reshape(15, 15)
    expected = np.zeros((15, 15), np.int8)
    expected[3:8, 7] = 1  # Black's five down column H, rows 12..8
    expected[4:8, 8] = 2  # White's four beside it
    np.testing.assert_array_equal(board, expected)
    assert session.game.format_action(session.moves[-1]) == "H12"
    assert record_from_session(session, black="Alice", white="Bob").result_text == "B+"


def test_replay_names_the_illegal_move():
    record = one("(;GM[4]SZ[6];B[aa];W[bb];B[cc];W[bb])")
    with pytest.raises(IllegalMoveError, match=r"record move 4 \(W\): .*B5 is occupied"):
        replay(record, make_game("gomoku6"))
    over = one(GOMOKU_WIN.replace(";B[hd])", ";B[hd];W[aa])"))
    with pytest.raises(IllegalMoveError, match="record move 10 .*game is over"):
        replay(over)


def test_replay_checks_the_board_and_refuses_setup_it_cannot_play():
    with pytest.raises(ValueError, match="does not match"):
        replay(one("(;GM[4]SZ[8];B[aa])"), make_game("gomoku6"))
    with pytest.raises(ValueError, match=r"set-up position \(2 AB/AW stones, White first\)"):
        replay(one("(;GM[4]SZ[8]AB[aa][bb];W[cc])"))


def test_unfinished_and_overridden_results_from_a_session():
    session = random_session("gomoku8", seed=3, max_plies=4)
    record = record_from_session(session)
    assert record.result is None and record.result_text == ""
    assert "RE[" not in write_sgf(record)
    resigned = record_from_session(session, result_text="W+R")
    assert resigned.result == -1 and "RE[W+R]" in write_sgf(resigned)


# --- files and directories -----------------------------------------------------------------
def test_read_file_decodes_the_declared_charset(tmp_path):
    path = tmp_path / "old.sgf"
    path.write_bytes("(;GM[1]CA[ISO-8859-1]SZ[9]PB[Jos\u00e9];B[ee])".encode("latin-1"))
    (record,) = read_sgf_file(path)
    assert record.black == "Jos\u00e9"
    bad = tmp_path / "bad.sgf"
    bad.write_text("(;GM[1]")
    with pytest.raises(SgfError, match="bad.sgf: SGF game 1"):
        read_sgf_file(bad)


def test_iter_dir_streams_good_games_and_counts_bad_ones(tmp_path, caplog):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "deep").mkdir()
    (tmp_path / "a" / "one.sgf").write_text("(;GM[4]SZ[15];B[hh])")
    (tmp_path / "a" / "deep" / "two.SGF").write_text(
        "(;GM[1]SZ[9];B[ee])(;GM[1]SZ[9];B[zz])(;GM[1]SZ[9];B[aa];W[bb])")
    (tmp_path / "broken.sgf").write_text("(;GM[1];B[ee]")
    (tmp_path / "notes.txt").write_text("not sgf at all")
    stats = SgfDirStats()
    with caplog.at_level(logging.WARNING, logger="zeroforge.shared.formats.sgf"):
        records = list(iter_sgf_dir(tmp_path, stats))
    assert [r.moves for r in records] == [[7 * 15 + 7], [40], [0, 10]]
    assert stats == SgfDirStats(files=3, games=3, skipped_files=1, skipped_games=1)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert all("\n" not in w for w in warnings)
    assert any("broken.sgf" in w and "missing ')'" in w for w in warnings)
    assert any("two.SGF" in w and "B[zz] is off the 9x9 board" in w for w in warnings)


def test_iter_dir_needs_a_directory(tmp_path):
    with pytest.raises(NotADirectoryError):
        list(iter_sgf_dir(tmp_path / "missing"))


# --- Go through the engine (needs shared/games/go.py) -----------------------------------------
def test_go_record_from_session_counts_the_margin():
    game = make_game("go:size=5,komi=7.5")
    session = GameSession(game)
    session.play(game.spec.num_actions - 1)  # pass
    session.play(game.spec.num_actions - 1)
    record = record_from_session(session)
    assert record.result_text == "W+7.5" and record.result == -1  # empty board: komi wins
    assert record.komi == 7.5 and (record.width, record.height) == (5, 5)

    session = GameSession(game)
    for move in (12, 25, 25):  # Black takes the centre, then both pass
        session.play(move)
    record = record_from_session(session)
    assert record.result_text == "B+17.5"  # 25 points of area minus 7.5 komi
    back = one(write_sgf(record))
    assert back == record and back.moves == [12, 25, 25]
    assert replay(back).outcome == 1


@settings(max_examples=10, deadline=None)
@given(size=st.sampled_from([5, 7, 9]), seed=st.integers(0, 2**31))
def test_random_go_games_round_trip_and_replay(size, seed):
    session = random_session(f"go:size={size},komi=6.5", seed, max_plies=3 * size * size)
    record = record_from_session(session, black="rand", white="rand")
    back = one(write_sgf(record))
    assert back == record
    again = replay(back)
    assert again.moves == session.moves and again.outcome == session.outcome
    np.testing.assert_array_equal(again.state.legal, session.state.legal)


def test_go_sgf_with_tt_pass_and_capture_replays():
    # Black captures White's corner stone at aa, then both pass (tt and []).
    record = one("(;GM[1]SZ[5]KM[0.5];B[ba];W[aa];B[ab];W[tt];B[])")
    assert record.moves == [1, 0, 5, 25, 25]
    session = replay(record)
    assert session.over and session.outcome == 1
    assert session.state.board[0, 0] == 0  # the white stone was captured
    assert record_from_session(session).result_text == "B+24.5"  # Black owns all 25 points
    with pytest.raises(IllegalMoveError, match="record move 2"):
        replay(one("(;GM[1]SZ[5];B[cc];W[cc])"))
