"""The engines as users run them, against the real GnuGo (Debian's gnugo, /usr/games):
``zeroforge match`` between GTP engines with GnuGo's ``final_score`` checked against
zeroforge's area score, ``zeroforge gtp`` played by GnuGo, GtpPlayer keeping GnuGo's board
in step over a batch, and ``zeroforge gtp`` / ``pbrain`` over real pipes."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.test_cli import ZF
from tests.unit.test_match import Scripted
from zeroforge.deploy.engines.match import MatchTally, play_game, run_match
from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.shared.formats import read_sgf, read_sgf_file, record_from_session, replay
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.players import GtpPlayer, RandomPlayer, play_match, random_openings

GNUGO = "gnugo --mode gtp --level 1"
# area scoring like zeroforge, and every dead stone captured before it passes: its
# final_score then has nothing to judge that Tromp-Taylor would count differently
GNUGO_PLAYOUT = f"{GNUGO} --chinese-rules --capture-all-dead"


def zf(*args: str, stdin: str = "", timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([*ZF, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("engine-nets")
    out = {}
    for name, spec in (("go9", "go9"), ("go7", "go:size=7"), ("gomoku6", "gomoku6")):
        learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), spec,
                          NetConfig.preset("tiny"))
        out[name] = learner.save(folder / f"{name}.pt")
    return out


def check_records(folder: Path, games: int) -> None:
    """Every SGF the match wrote replays legally to the result it records."""
    for i in range(1, games + 1):
        [record] = read_sgf_file(folder / f"game-{i:03d}.sgf")
        session = replay(record)
        if record.result_text[2:] not in ("R", "F"):
            assert record_from_session(session).result_text == record.result_text


def test_gnugo_final_score_agrees_with_zeroforge(tmp_path: Path) -> None:
    # seeded: GnuGo's games vary from run to run, and one in a few hundred ends in a seki
    # (test below), where GnuGo's count and Tromp-Taylor's may differ by an eye
    seeded = f"{GNUGO_PLAYOUT} --seed 1"
    r = zf("match", "--game", "go9", "--black", f"gtp:{seeded}",
           "--white", f"gtp:{seeded.replace('level 1', 'level 2')}", "--games", "2",
           "--alternate", "--sgf-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    games = [line for line in r.stdout.splitlines() if line.startswith("game ")]
    assert len(games) == 2, r.stdout
    for line in games:  # played out to two passes, and GnuGo's count is zeroforge's
        assert re.search(r": [BW]\+\d+(\.5)? \(passes, \d+ moves\); .* final_score "
                         r"[BW]\+[\d.]+: agrees$", line), line
    assert "agreed with zeroforge's score in 2 of 2 games" in r.stdout
    check_records(tmp_path, 2)


# A GnuGo (level 2 against level 1, --seed 48) game played out to two passes with a seki on
# the upper left: White's eye at A7 inside it is White's area for Tromp-Taylor (W+0.5),
# GnuGo leaves it out and counts B+0.5.
SEKI_GAME = """(;GM[1]SZ[9]KM[7.5];B[ee];W[de];B[ed];W[ge];B[ef];W[cg];B[df];W[ce];B[cf];W[cc]
;B[be];W[bd];B[bg];W[eb];B[fc];W[hc];B[fb];W[dc];B[gg];W[hg];B[hf];W[gf];B[fg];W[hh];B[ch]
;W[ae];B[bf];W[gh];B[fh];W[fa];B[ga];W[ea];B[hb];W[gd];B[ec];W[db];B[bb];W[cb];B[af];W[ad]
;B[ic];W[id];B[ib];W[gc];B[gb];W[ab];B[dd];W[cd];B[ca];W[bc];B[ba];W[fi];B[ei];W[gi];B[he]
;W[if];B[ff];W[ie];B[fe];W[hd];B[fd];W[ii];B[eh];W[hf];B[dg];W[ih];B[bh];W[];B[])"""


def test_a_seki_is_named_when_gnugo_counts_it_differently() -> None:
    game = make_game("go9")
    [record] = read_sgf(SEKI_GAME)
    script = Scripted(record.moves)
    referee = GtpPlayer(GNUGO_PLAYOUT)
    result = play_game(game, script, script, np.random.default_rng(0), referee=referee)
    referee.close()
    assert (result.ended_by, result.result_text, result.engine_score) == ("passes", "W+0.5",
                                                                         "B+0.5")
    assert result.engine_seki == 18  # three Black stones (B9 C9 B8), fifteen White
    assert "differs from W+0.5 (the engine sees 18 stones in seki" in result.note
    tally = MatchTally({"A": "scripted", "B": "scripted"}, [result])
    assert tally.summary()[-1].endswith("in 0 of 1 games ended by two passes; 1 of the "
                                        "others had a seki")


def test_gnugo_plays_zeroforge_gtp(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    engine = shlex.join([*ZF, "gtp", "--checkpoint", str(checkpoints["go7"]),
                         "--simulations", "4"])
    r = zf("match", "--game", "go:size=7", "--black", f"gtp:{engine}", "--white",
           f"gtp:{GNUGO_PLAYOUT}", "--games", "2", "--alternate", "--referee",
           "gtp:gnugo --mode gtp --chinese-rules", "--sgf-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    games = [line for line in r.stdout.splitlines() if line.startswith("game ")]
    assert len(games) == 2 and "Black won" in r.stdout, r.stdout
    for line in games:
        assert re.search(r": [BW]\+(\d+(\.5)?|R) \((passes|rules|resign), \d+ moves\)", line)
        if "(passes" in line:  # GnuGo as referee counts every game ended by passes
            assert "gnugo --mode gtp --chinese-rules final_score" in line
    check_records(tmp_path, 2)


def test_a_net_player_against_gnugo_in_process(checkpoints: dict[str, Path]) -> None:
    out = io.StringIO()
    tally = run_match("go:size=7", f"net:{checkpoints['go7']}:4", f"gtp:{GNUGO_PLAYOUT}",
                      games=1, out=out)
    [result] = tally.games
    assert out.getvalue().startswith(f"game 1: black {checkpoints['go7'].stem}, white gnugo")
    assert result.ended_by in ("passes", "rules", "resign") and result.result_text
    if result.ended_by == "passes":  # GnuGo, a player of the game, scored it too
        assert result.engine_score is not None


def stones(player: GtpPlayer, colour: str) -> set[str]:
    return set(player.engine.send(f"list_stones {colour}").upper().split())


def test_gtp_player_keeps_gnugo_in_step_over_a_batch() -> None:
    game = make_game("go:size=7")
    gnugo = GtpPlayer(GNUGO, on_resign="pass")
    rng = np.random.default_rng(3)
    states = game.init(3)
    checked = 0
    for _ in range(30):  # GnuGo is White in every game, random is Black
        if states.terminal.all():
            break
        running = np.flatnonzero(~states.terminal)
        actions = np.full(3, -1, np.int64)
        actions[running] = RandomPlayer().select(game, states.take(running), rng)
        states = game.step(states, actions)
        running = np.flatnonzero(~states.terminal)
        if not running.size:
            break
        sub = states.take(running)
        actions = np.full(3, -1, np.int64)
        actions[running] = gnugo.select(game, sub, rng)
        # GnuGo's board is the last asked game's, after its move
        after = game.step(sub.take([running.size - 1]), actions[running[-1:]])
        for colour, value in (("black", 1), ("white", 2)):
            ours = {game.format_action(int(p)) for p in np.flatnonzero(after.board[0] == value)}
            assert stones(gnugo, colour) == ours
        checked += 1
        states = game.step(states, actions)
    assert checked >= 10
    assert gnugo.setups == 0 and gnugo.replays > 0  # three games: replayed, never guessed
    # a position it never saw (moves made elsewhere) is set up stone by stone
    fresh = game.step(game.step(game.init(1), np.array([24])), np.array([10]))
    fresh = game.step(fresh, np.array([30]))
    gnugo._games.clear()
    gnugo.select(game, fresh, rng)
    assert gnugo.setups == 1
    gnugo.close()


def test_gnugo_plays_paired_openings_knowing_every_move() -> None:
    """Openings played for GnuGo (``play_match``'s ``openings``) reach its board as moves,
    so it is never set up stone by stone (which would lose ko history each move); each
    pair of games begins with its opening, colours swapped."""
    game = make_game("go:size=7")
    gnugo = GtpPlayer(GNUGO, on_resign="pass")
    rng = np.random.default_rng(5)
    openings = random_openings(game, 2, 3, rng)
    match = play_match(game, gnugo, RandomPlayer(), 4, rng, openings=openings)
    assert [m[:3] for m in match.moves] == [openings[0], openings[0], openings[1], openings[1]]
    assert gnugo.setups == 0
    assert match.distinct_games == 4 and match.wins >= 3  # GnuGo beats random
    gnugo.close()


def test_gtp_over_pipes(checkpoints: dict[str, Path]) -> None:
    script = ("1 protocol_version\n2 name\n# comment\n\n3 boardsize 19\n4 boardsize 9\n"
              "5 clear_board\n6 komi 6.5\n7 play B D4\n8 play w d4\n9 play w I4\n"
              "10 genmove w\n11 undo\n12 final_score\n13 time_settings 10 0 0\n"
              "14 genmove b\n15 fly\n16 quit\n17 name\n")
    r = zf("gtp", "--checkpoint", str(checkpoints["go9"]), "--simulations", "4",
           stdin=script, timeout=120)
    assert r.returncode == 0 and r.stderr == ""
    blocks = r.stdout[:-2].split("\n\n")
    assert blocks[:9] == ["=1 2", "=2 zeroforge", "?3 unacceptable size (this net plays 9x9 "
                          "only)", "=4", "=5", "=6", "=7", "?8 illegal move (D4 is occupied)",
                          "?9 syntax error (invalid vertex 'I4')"]
    assert re.fullmatch(r"=10 ([A-HJ][1-9]|pass)", blocks[9])
    assert blocks[10:12] == ["=11", "=12 B+74.5"]  # one black stone owns 81 points - 6.5
    assert blocks[12] == "=13" and re.fullmatch(r"=14 ([A-HJ][1-9]|pass)", blocks[13])
    assert blocks[14:] == ["?15 unknown command", "=16"]  # nothing read after quit


def test_pbrain_over_pipes(checkpoints: dict[str, Path]) -> None:
    script = ("ABOUT\nSTART 15\nSTART 6\nINFO timeout_turn 500\nINFO timeout_match 0\n"
              "BEGIN\nTURN 9,9\nTURN x\nTURN 0,0\nTURN 0,0\nBOARD\n0,0,2\n5,5,1\n2,2,2\n"
              "DONE\nTAKEBACK 3,3\nRESTART\nEND\nABOUT\n")
    r = zf("pbrain", "--checkpoint", str(checkpoints["gomoku6"]), "--simulations", "4",
           stdin=script, timeout=120)
    assert r.returncode == 0 and r.stderr == ""
    out = r.stdout.splitlines()
    assert out[0].startswith('name="zeroforge"')
    assert out[1:3] == ["ERROR unsupported size 15x15: this net plays 6x6", "OK"]
    move = re.compile(r"[0-5],[0-5]")
    assert move.fullmatch(out[3])  # BEGIN
    assert out[4] == "ERROR coordinate 9,9 is off the 6x6 board"
    assert out[5] == "ERROR bad coordinate 'x' (want x,y)"
    if out[3] == "0,0":  # the brain took the point first: TURN 0,0 is an error at once
        assert out[6].startswith("ERROR 0,0: illegal move")
        rest = out[7:]
    else:
        assert move.fullmatch(out[6]) and out[7].startswith("ERROR 0,0: illegal move")
        rest = out[8:]
    assert move.fullmatch(rest[0])  # BOARD ... DONE
    assert rest[1].startswith("ERROR TAKEBACK 3,3") or rest[1] == "OK"
    assert rest[2:] == ["OK"]  # RESTART; END answers nothing and ends the brain


def test_engines_refuse_wrong_checkpoints(checkpoints: dict[str, Path], tmp_path) -> None:
    for args, message in [
        (("gtp", "--checkpoint", str(checkpoints["gomoku6"])), "zeroforge gtp plays Go"),
        (("pbrain", "--checkpoint", str(checkpoints["go9"])), "zeroforge pbrain plays gomoku"),
        (("gtp", "--checkpoint", str(tmp_path / "none.pt")), "no such checkpoint"),
        (("match", "--black", "gtp:no-such-engine-zf", "--white", "random"), "not found"),
    ]:
        r = zf(*args, stdin="quit\n")
        assert r.returncode == 1 and message in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
