"""The GTP engine's protocol (deploy/engines/gtp.py), driven in-process by scripted
conversations with a tiny untrained 5x5 Go net: framing, every command, errors, time."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from zeroforge import __version__
from zeroforge.deploy.engines.agent import Agent
from zeroforge.deploy.engines.gtp import Clock, GtpEngine, clean_line
from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.shared.nets import NetConfig


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gtp")
    learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), "go:size=5",
                      NetConfig.preset("tiny"))
    return learner.save(folder / "checkpoint.pt")


@pytest.fixture(scope="module")
def agent(checkpoint: Path) -> Agent:
    return Agent(checkpoint, simulations=4, device="cpu")


@pytest.fixture()
def engine(agent: Agent) -> GtpEngine:
    agent.speed = None
    return GtpEngine(agent, resign_below=-2.0)


def talk(engine: GtpEngine, script: str) -> list[str]:
    """The responses (blank-line terminated blocks) to the lines of ``script``."""
    out = io.StringIO()
    engine.serve(io.StringIO(script), out)
    text = out.getvalue()
    assert text.endswith("\n\n") or not text
    return text[:-2].split("\n\n") if text else []


def test_framing_ids_comments_blank_lines_and_case(engine: GtpEngine) -> None:
    script = ("protocol_version\n"
              "  \n# a comment line\n"
              "7 name # trailing comment\n"
              "\t8\tversion\n"
              "9 known_command genmove\n"
              "10 known_command fly\n"
              "11 PROTOCOL_VERSION\n"  # command names are case-sensitive
              "12 no_such_command\n"
              "13\x01 name\n")  # control characters are dropped
    assert talk(engine, script) == ["= 2", "=7 zeroforge", f"=8 {__version__}", "=9 true",
                                    "=10 false", "?11 unknown command",
                                    "?12 unknown command", "=13 zeroforge"]


def test_list_commands_has_every_required_command(engine: GtpEngine) -> None:
    [response] = talk(engine, "list_commands\n")
    listed = response[2:].split("\n")
    required = {"protocol_version", "name", "version", "known_command", "list_commands",
                "quit", "boardsize", "clear_board", "komi", "play", "genmove", "showboard",
                "final_score", "undo", "time_settings", "time_left"}
    assert required <= set(listed)
    for name in listed:
        assert talk(engine, f"known_command {name}\n") == ["= true"]


def test_play_errors_and_coordinates(engine: GtpEngine) -> None:
    responses = talk(engine, "\n".join([
        "1 boardsize 5", "2 clear_board", "3 play b c3", "4 play W C3", "5 play b i3",
        "6 play b J1", "7 play b f1", "8 play green a1", "9 play b", "10 play w A1",
        "11 play b pass", "12 play w Pass", "13 play b resign", "14 play b e5",
        "15 boardsize 9", "16 boardsize x", "17 komi abc", "18 undo"]) + "\n")
    assert responses[:4] == ["=1", "=2", "=3", "?4 illegal move (C3 is occupied)"]
    assert responses[4].startswith("?5 syntax error")  # GTP skips the letter I
    assert responses[5].startswith("?6 syntax error")  # J is the 9th column: off 5x5
    assert responses[6].startswith("?7 syntax error")
    assert responses[7].startswith("?8 syntax error")
    assert responses[8].startswith("?9 syntax error")
    assert responses[9:14] == ["=10", "=11", "=12", "=13", "=14"]
    assert responses[14] == "?15 unacceptable size (this net plays 5x5 only)"
    assert responses[15].startswith("?16 syntax error")
    assert responses[16].startswith("?17 syntax error")
    assert responses[17] == "=18"
    assert [m for _, m in engine.moves] == [12, 20, 25, 25]  # C3, A1, pass, pass


def test_showboard_final_score_komi_and_undo(engine: GtpEngine) -> None:
    script = "play b c3\nplay w pass\nshowboard\nfinal_score\nkomi 0.5\nfinal_score\n" \
             "komi 30\nfinal_score\nundo\nundo\nundo\nfinal_score\n"
    responses = talk(engine, script)
    board = responses[2]
    assert board.startswith("= \n   A B C D E")
    assert " 3 . . X . .  3" in board and "\n\n" not in board
    # Black's one stone owns the whole empty board (area scoring): 25 points
    assert responses[3] == "= B+17.5"  # 25 - 7.5, the checkpoint's komi
    assert responses[4:6] == ["=", "= B+24.5"]
    assert responses[6:8] == ["=", "= W+5"]
    assert responses[8:11] == ["=", "=", "? cannot undo"]
    assert responses[11] == "= W+30"


def test_out_of_turn_moves_and_handicap(engine: GtpEngine) -> None:
    responses = talk(engine, "play b a1\nplay b b1\nplay w e5\nplay w e4\nclear_board\n"
                             "set_free_handicap a1 e5\nset_free_handicap c3\nfinal_score\n")
    assert responses[:5] == ["="] * 5
    assert responses[5] == "="
    assert responses[6] == "? board not empty"
    assert responses[7] == "= B+17.5"
    assert int(engine.state.to_play[0]) == 1  # White moves after the handicap stones


def test_genmove_plays_a_legal_move_and_reg_genmove_does_not(engine: GtpEngine) -> None:
    responses = talk(engine, "play b c3\n5 genmove w\n6 reg_genmove b\n7 genmove b\n"
                             "8 genmove x\n")
    vertex = responses[1].split()[1]
    assert responses[1].startswith("=5 ")
    assert engine.moves[1] == (1, engine.game.parse_action(vertex))
    assert responses[2].startswith("=6 ") and len(engine.moves) == 3  # reg_ plays nothing
    assert responses[3].startswith("=7 ")
    assert responses[4].startswith("?8 syntax error")
    # undo takes back the engine's own move too, and replays the rest
    board = engine.state.board.copy()
    assert talk(engine, "undo\n") == ["="]
    assert len(engine.moves) == 2 and (engine.state.board != board).sum() <= 1


def test_play_goes_on_after_two_passes(engine: GtpEngine) -> None:
    """Two passes end the game for zeroforge, but a controller may play on."""
    assert talk(engine, "play b c3\nplay w pass\nplay b pass\nfinal_score\nplay w a1\n"
                        "play b pass\nplay w pass\nundo\nundo\nplay b b1\n") == [
        "=", "=", "=", "= B+17.5", "=", "=", "=", "=", "=", "="]
    assert not engine.state.terminal[0]
    assert talk(engine, "final_score\n") == ["= W+6.5"]  # 2 stones - 1 - 7.5, dame shared
    assert talk(engine, "genmove w\n")[0].startswith("= ")


def test_resigns_below_the_threshold(agent: Agent) -> None:
    engine = GtpEngine(agent, resign_below=2.0)  # every value is below 2
    assert talk(engine, "genmove b\n") == ["= resign"]
    assert engine.moves == []


def test_quit_answers_and_stops_reading(engine: GtpEngine) -> None:
    assert talk(engine, "name\n3 quit\nname\n") == ["= zeroforge", "=3"]
    assert engine.quit


def test_clean_line() -> None:
    assert clean_line("\t1\tplay  b c3  # x\r\n") == "1 play  b c3"
    assert clean_line("# only a comment") == ""
    assert clean_line("na\x07me\x7f") == "name"


def test_time_settings_and_time_left_set_the_budget(engine: GtpEngine) -> None:
    assert talk(engine, "time_settings 60 0 0\ntime_left w 30 0\ntime_settings 1\n"
                        "time_left q 1 0\ntime_left b -1 0\n") == [
        "=", "=", "? syntax error (time_settings main_time byo_yomi_time byo_yomi_stones)",
        "? syntax error (colour must be b, black, w or white)",
        "? syntax error (time_left takes a colour and two non-negative numbers)"]
    clock = engine.clock
    assert clock.limited and clock.left == {1: (30.0, 0)}
    # White: 30 s over max(10, (60 - 0) / 2) = 30 moves, kept back a safety share
    assert clock.budget(1, 0, 60) == pytest.approx(30 / 30 * 0.8 - 0.1)
    # Black said nothing yet: the whole main time, spread over the expected moves
    assert clock.budget(0, 0, 60) == pytest.approx(60 / 30 * 0.8 - 0.1)


def test_clock_byo_yomi_and_no_limit() -> None:
    assert Clock().budget(0, 0, 80) is None
    assert Clock(main=10, byo_time=5, byo_stones=0).budget(0, 0, 80) is None  # GTP: no limit
    canadian = Clock(main=0, byo_time=60, byo_stones=10)
    assert canadian.budget(0, 0, 80) == pytest.approx(6 * 0.8 - 0.1)
    canadian.left[0] = (12.0, 3)
    assert canadian.budget(0, 40, 80) == pytest.approx(4 * 0.8 - 0.1)
    canadian.spend(0, 2.0)
    assert canadian.left[0] == (10.0, 2)
    canadian.spend(0, 1.0)
    canadian.spend(0, 1.0)
    assert canadian.left[0] == (60.0, 10)  # a new period
    late = Clock(main=300, byo_time=30, byo_stones=1)
    late.left[0] = (2.0, 0)  # little main time left, byo-yomi follows: use its share
    assert late.budget(0, 50, 80) == pytest.approx(15 * 0.8 - 0.1)


def test_kgs_time_settings_of_every_kind(engine: GtpEngine) -> None:
    usage = ("? syntax error (kgs-time_settings none | absolute main_time | byoyomi "
             "main_time period_time periods | canadian main_time period_time stones)")
    assert talk(engine, "kgs-time_settings absolute 600\n") == ["="]
    assert engine.clock == Clock(600.0)
    assert talk(engine, "kgs-time_settings canadian 60 300 25\n") == ["="]
    assert engine.clock == Clock(60.0, 300.0, 25)
    assert talk(engine, "kgs-time_settings byoyomi 0 30 5\n") == ["="]
    assert engine.clock == Clock(0.0, 30.0, 5, japanese=True)
    assert talk(engine, "kgs-time_settings none\n") == ["="]
    assert not engine.clock.limited
    assert talk(engine, "kgs-time_settings byoyomi 60 30\nkgs-time_settings fischer 60 5\n"
                        "kgs-time_settings canadian 60 30 2.5\n"
                        "kgs-time_settings absolute -1\nkgs-time_settings\n") == [usage] * 5
    assert "kgs-time_settings" in talk(engine, "list_commands\n")[0].split("\n")[-1] or \
        any("kgs-time_settings" in line for line in talk(engine, "list_commands\n"))


def test_japanese_byo_yomi_gives_each_move_a_whole_period() -> None:
    japanese = Clock(main=0, byo_time=30, byo_stones=5, japanese=True)
    # in byo-yomi every move may use its period (the other four are a reserve)
    assert japanese.budget(0, 0, 80) == pytest.approx(30 * 0.8 - 0.1)
    japanese.left[0] = (30.0, 5)  # KGS: 30 s of the period, 5 periods left
    assert japanese.budget(0, 40, 80) == pytest.approx(30 * 0.8 - 0.1)
    japanese.spend(0, 20.0)  # within the period: it starts afresh, no period lost
    assert japanese.left[0] == (30.0, 5)
    japanese.spend(0, 31.0)  # overran: one period gone
    assert japanese.left[0] == (30.0, 4)
    late = Clock(main=300, byo_time=30, byo_stones=5, japanese=True)
    late.left[0] = (2.0, 0)  # main time nearly out: at least half a period per move
    assert late.budget(0, 50, 80) == pytest.approx(15 * 0.8 - 0.1)
    late.spend(0, 3.0)  # main time out: byo-yomi begins with all its periods
    assert late.left[0] == (30.0, 5)


def test_genmove_under_a_time_limit_searches_by_measured_speed(engine: GtpEngine) -> None:
    lines: list[str] = []
    engine.log = lines.append
    assert talk(engine, "time_settings 0 5 10\ngenmove b\ngenmove w\n")[0] == "="
    assert all("budget" in line for line in lines) and len(lines) == 2
    assert engine.agent.speed is not None and engine.agent.speed > 0


def test_lz_analyze_streams_info_lines_until_the_next_command(engine: GtpEngine) -> None:
    responses = talk(engine, "play b c3\n4 lz-analyze w 1\n5 name\nlz-analyze b interval 1\n"
                             "lz-analyze q\nplay w pass\nplay b pass\nlz-analyze 1\n")
    assert responses[0] == "="
    head, *infos = responses[1].split("\n")
    assert head == "=4" and len(infos) >= 1  # at least one line before it saw "name"
    moves = infos[0].split("info ")[1:]
    assert moves, infos[0]
    total = 0
    for order, move in enumerate(moves):
        fields = move.split()
        assert fields[0] == "move" and fields[2] == "visits" and fields[4] == "winrate"
        assert fields[6] == "prior" and fields[8:10] == ["order", str(order)]
        assert fields[10] == "pv" and fields[11] == fields[1]
        assert 0 <= int(fields[5]) <= 10000 and 0 <= int(fields[7]) <= 10000
        assert fields[1] != "C3"  # occupied
        total += int(fields[3])
    assert total == 16  # the first search: 16 simulations, one visit below the root each
    assert responses[2] == "=5 zeroforge"
    assert responses[3].startswith("=\ninfo move ")
    assert responses[4].startswith("? syntax error")
    assert responses[5:] == ["=", "=", "="]  # the game is over: nothing to analyse
    assert engine.analysis is None


def test_an_internal_error_is_a_one_line_answer(engine: GtpEngine) -> None:
    def broken(args: list[str]) -> str:
        raise RuntimeError("first line\nsecond line")

    engine.commands["broken"] = broken
    assert talk(engine, "3 broken\nname\n") == ["?3 internal error: RuntimeError: first line",
                                                "= zeroforge"]


class _Sizes:
    """Wraps the agent's evaluator and records the batch size of each call."""

    def __init__(self, inner) -> None:
        self.inner, self.sizes = inner, []

    def evaluate(self, obs, legal):
        self.sizes.append(int(legal.shape[0]))
        return self.inner.evaluate(obs, legal)


@pytest.mark.parametrize("leaf_batch, calls", [(1, 1 + 24), (8, 1 + 3)])
def test_the_agent_sends_its_net_leaf_batches(checkpoint: Path, leaf_batch: int,
                                              calls: int) -> None:
    # One game on an empty 5x5 board: 24 simulations are 24 calls of one leaf, or three
    # rounds of 8 leaves (the first moves below the root never meet).
    agent = Agent(checkpoint, simulations=24, device="cpu", leaf_batch=leaf_batch)
    assert agent.search.leaf_batch == leaf_batch
    agent.evaluator = _Sizes(agent.evaluator)
    choice = agent.choose(agent.game, agent.game.init(1))
    assert agent.evaluator.sizes == [1] + [leaf_batch] * (calls - 1)
    assert choice.simulations == 24
    assert agent.game.legal_mask(agent.game.init(1))[0, choice.action]


def test_the_agent_refuses_an_empty_leaf_batch(checkpoint: Path) -> None:
    with pytest.raises(ValueError, match="leaf_batch must be >= 1"):
        Agent(checkpoint, device="cpu", leaf_batch=0)
