"""The match runner (deploy/engines/match.py) and the GTP client player's failure modes
(shared/players/gtp.py), with small shell-script engines: one-line errors, resignations,
moves the rules forbid, and the score summary."""

from __future__ import annotations

import io
import shlex

import numpy as np
import pytest

from zeroforge.deploy.engines.match import (
    GameResult,
    MatchTally,
    black_lead,
    play_game,
    run_match,
)
from zeroforge.shared.formats import read_sgf_file
from zeroforge.shared.games import make_game
from zeroforge.shared.players import (
    GtpError,
    GtpPlayer,
    RandomPlayer,
    Resigned,
    make_player,
    resolve_command,
)

GO5 = "go:size=5"


def sh_engine(script: str) -> str:
    """A ``gtp:`` spec running ``script`` in sh (``$c`` is each command line)."""
    return "gtp:sh -c " + shlex.quote(f"while read c; do {script}; done")


ANSWER_ALL = 'printf "= \\n\\n"'
RESIGNER = f'case "$c" in genmove*) printf "= resign\\n\\n";; *) {ANSWER_ALL};; esac'
ALWAYS_A1 = f'case "$c" in genmove*) printf "= A1\\n\\n";; *) {ANSWER_ALL};; esac'


def test_missing_engine_is_one_line() -> None:
    with pytest.raises(ValueError, match="'no-such-engine-zf' not found on PATH or in "
                                         "/usr/games"):
        make_player("gtp:no-such-engine-zf --mode gtp")
    with pytest.raises(ValueError, match="empty engine command"):
        resolve_command("  ")


def test_a_bare_gnugo_is_found_in_usr_games() -> None:
    argv = resolve_command("gnugo --mode gtp")
    assert argv[0].endswith("/gnugo") and argv[1:] == ["--mode", "gtp"]


@pytest.mark.parametrize("script, message", [
    ('echo "engine broke" >&2; exit 3',
     r"exited with code 3 while answering 'boardsize 5': engine broke"),
    ('echo hello; echo', r"answered 'boardsize 5' with 'hello', not a GTP response"),
    ('printf "? nope\\n\\n"', r"refused 'boardsize 5': nope \(the engine cannot play 5x5\)"),
])
def test_a_broken_engine_is_a_one_line_error(script: str, message: str) -> None:
    game = make_game(GO5)
    player = make_player(sh_engine(script), game)
    with pytest.raises(GtpError, match=message) as err:
        player.select(game, game.init(1), np.random.default_rng(0))
    assert "\n" not in str(err.value)
    player.close()  # type: ignore[attr-defined]


def test_a_hung_engine_times_out() -> None:
    game = make_game(GO5)
    player = GtpPlayer(["sh", "-c", "while read c; do :; done"], timeout=0.3)
    with pytest.raises(GtpError, match=r"gave no answer to 'boardsize 5' in 0.3 s"):
        player.select(game, game.init(1), np.random.default_rng(0))
    player.close()
    assert not player.engine.alive


def test_gtp_players_play_go_only() -> None:
    player = make_player(sh_engine(ANSWER_ALL))
    game = make_game("gomoku6")
    with pytest.raises(ValueError, match="plays Go, not gomoku"):
        player.select(game, game.init(1), np.random.default_rng(0))
    player.close()  # type: ignore[attr-defined]


def test_resignation_loses_or_passes() -> None:
    game = make_game(GO5)
    rng = np.random.default_rng(0)
    resigner = make_player(sh_engine(RESIGNER), game)
    result = play_game(game, RandomPlayer(), resigner, rng)
    assert (result.result_text, result.outcome, result.ended_by) == ("B+R", 1, "resign")
    assert len(result.moves) == 1  # Black's first move, then White resigned
    with pytest.raises(Resigned, match="resigned as B"):
        resigner.select(game, game.init(1), rng)
    passer = GtpPlayer(["sh", "-c", f"while read c; do {RESIGNER}; done"], on_resign="pass")
    assert passer.select(game, game.init(1), rng).tolist() == [25]
    for p in (resigner, passer):
        p.close()  # type: ignore[attr-defined]


def test_a_move_the_rules_forbid_becomes_a_pass() -> None:
    game = make_game(GO5)
    player = GtpPlayer(["sh", "-c", f"while read c; do {ALWAYS_A1}; done"])
    state = game.init(1)
    rng = np.random.default_rng(0)
    assert player.select(game, state, rng).tolist() == [20]  # A1 is point 20 on 5x5
    state = game.step(state, np.array([20]))
    state = game.step(state, np.array([24]))  # White E1
    assert player.select(game, state, rng).tolist() == [25]  # A1 is occupied: pass
    assert player.replaced_moves == 1 and player.setups == 0
    player.close()


def test_match_prints_results_summary_and_sgf(tmp_path) -> None:
    out = io.StringIO()
    tally = run_match(GO5, "random", "uct:4", games=3, alternate=True,
                      sgf_dir=str(tmp_path), seed=1, out=out)
    lines = out.getvalue().splitlines()
    assert len(tally.games) == 3 and len(lines) == 3 + 4
    assert lines[0].startswith("game 1: black random, white uct4: ")
    assert lines[1].startswith("game 2: black uct4, white random: ")
    assert lines[3].startswith("A random: ") and lines[4].startswith("B uct4: ")
    a, b = tally.points("A"), tally.points("B")
    assert a[0] == b[2] and a[1] == b[1] and sum(a) == 3
    assert lines[5].startswith("Elo A - B: ") and lines[5].endswith(
        " over 3 distinct games (3.0 effective)")
    for i, result in enumerate(tally.games, 1):
        [record] = read_sgf_file(tmp_path / f"game-{i:03d}.sgf")
        assert record.moves == result.moves and record.result_text == result.result_text
        assert (record.black == "random") == (i % 2 == 1)


def test_replayed_games_count_once_in_the_elo_interval() -> None:
    # four games, A Black each time, three of them the same moves: 4² / (3² + 1) = 1.6
    games = [GameResult("A", 1, "B+1", [0, 1, 2], "rules") for _ in range(3)]
    games.append(GameResult("A", -1, "W+1", [0, 2, 1], "rules"))
    tally = MatchTally({"A": "a", "B": "b"}, games)
    elo_line = tally.summary()[2]
    assert elo_line.endswith(" over 2 distinct games (1.6 effective)")
    fresh = MatchTally({"A": "a", "B": "b"},
                       [GameResult("A", g.outcome, g.result_text, [i, *g.moves], "rules")
                        for i, g in enumerate(games)]).summary()[2]
    assert fresh.endswith(" over 4 distinct games (4.0 effective)")
    # the same score, a wider interval
    low, high = (float(x) for x in elo_line.split("[")[1].split("]")[0].split(", "))
    low4, high4 = (float(x) for x in fresh.split("[")[1].split("]")[0].split(", "))
    assert low < low4 and high4 < high


def test_a_forfeit_goes_on_record() -> None:
    class Cheater:
        name = "cheater"

        def select(self, game, states, rng):
            return np.zeros(states.batch_size, np.int64)  # always A5, soon occupied

    game = make_game(GO5)
    result = play_game(game, Cheater(), RandomPlayer(), np.random.default_rng(0))
    assert (result.result_text, result.ended_by) == ("W+F", "forfeit")
    assert "cheater played an illegal move" in result.note


def test_margins() -> None:
    assert black_lead("B+3.5") == 3.5 and black_lead("W+12") == -12 and black_lead("0") == 0
    assert black_lead("W+R") is None and black_lead(None) is None and black_lead("?") is None


def test_bad_sgf_game_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="SGF records Go and gomoku games"):
        run_match("5stone_chess", "random", "random", sgf_dir=str(tmp_path), out=io.StringIO())


class Scripted:
    """Plays ``moves`` (actions) in order, one game at a time, then passes."""

    name = "scripted"

    def __init__(self, moves: list[int]) -> None:
        self.moves = moves

    def select(self, game, states, rng) -> np.ndarray:
        ply = int(states.ply[0])
        return np.array([self.moves[ply] if ply < len(self.moves)
                         else game.spec.num_actions - 1])


@pytest.mark.parametrize("seki_answer, seki", [('printf "? unknown command\\n\\n"', 0),
                                               ('printf "= A1 B2\\nC3\\n\\n"', 3),
                                               (ANSWER_ALL, 0)])
def test_a_differing_engine_count_asks_for_its_seki(seki_answer: str, seki: int) -> None:
    # two passes at once: zeroforge's area count is White's komi; the referee says B+1
    referee = make_player(sh_engine(f'case "$c" in final_score*) printf "= B+1\\n\\n";; '
                                    f'final_status_list*) {seki_answer};; *) {ANSWER_ALL};; '
                                    'esac'))
    game = make_game(GO5)
    passer = Scripted([])
    result = play_game(game, passer, passer, np.random.default_rng(0), referee=referee)
    referee.close()
    assert result.ended_by == "passes" and result.result_text.startswith("W+")
    assert result.engine_score == "B+1" and result.engine_seki == seki
    assert ("in seki" in result.note) == (seki > 0)
    assert f"final_score B+1: differs from {result.result_text}" in result.note
