"""The terminal game (deploy/play/terminal.py) with scripted input: moves, bad input,
undo, hint/help, resign, quit, --hints with a net; and the searching players' analysis."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import numpy as np
import pytest

from tests.play_nets import tiny_checkpoint
from zeroforge.deploy.play.terminal import (
    TerminalGame,
    example_move,
    hint_player,
    undo_turn,
    write_record,
)
from zeroforge.shared.formats import read_sgf, replay
from zeroforge.shared.games import GameSession, IllegalMoveError, make_game
from zeroforge.shared.players import PLAYER_SPECS, MCTSPlayer, UCTPlayer, make_player

GAMES = ["tictactoe", "gomoku6", "go:size=5", "go9", "5stone_chess", "gomoku15"]


def scripted(lines: list[str]) -> Iterator[str]:
    yield from lines


def terminal(game_spec: str, first: str, second: str, lines: list[str], **kw
             ) -> tuple[TerminalGame, io.StringIO]:
    game = make_game(game_spec)
    feed = scripted(lines)

    def read() -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    players = [make_player(first, game), make_player(second, game)]
    return TerminalGame(game, players, read=read, out=out, rng=np.random.default_rng(3),
                        **kw), out


@pytest.fixture(scope="module")
def gomoku6_net(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny_checkpoint(tmp_path_factory.mktemp("net"), "gomoku6"))


@pytest.mark.parametrize("spec", GAMES)
def test_example_moves_are_legal_moves_of_the_board_being_played(spec: str) -> None:
    game = make_game(spec)
    session = GameSession(game)
    rng = np.random.default_rng(0)
    for _ in range(6):
        text = example_move(session)
        action = game.parse_action(text)
        assert game.illegal_reason(session.state, 0, action) is None, (spec, text)
        assert text != "pass"
        session.play(int(rng.choice(session.legal_actions())))
    # a bad coordinate's message names a point of this board too
    with pytest.raises(IllegalMoveError) as err:
        game.parse_action("Z99")
    example = str(err.value).rsplit(" ", 1)[-1]
    if game.spec.name != "5stone_chess":
        game.parse_action(example)  # names a point of this board, not "D4" on 3x3


def test_a_person_wins_with_bad_input_asked_again_in_one_line() -> None:
    # X takes the left column; O (uct would block, random seeded does not here) cannot win
    lines = ["", "Z9", "A3", "A3", "B3", "A2", "C3", "B2", "A1", "C2", "B1", "C1"]
    t, out = terminal("tictactoe", "human", "random", lines, quiet=True)
    ending = t.run()
    text = out.getvalue()
    assert "'Z9' is not a coordinate like B2; try again (e.g." in text
    assert "illegal move A3: A3 is occupied; try again" in text
    assert ending.how == "rules" and ending.outcome == t.session.outcome
    result = {1: "first player wins", -1: "second player wins", 0: "draw"}[ending.outcome]
    assert f"result: {result} after {ending.moves} moves" in text


def test_undo_takes_back_the_persons_move_and_the_reply() -> None:
    t, out = terminal("tictactoe", "human", "random", ["undo", "B2", "undo", "A1", "quit"])
    ending = t.run()
    text = out.getvalue()
    assert "nothing to undo: you have not moved yet" in text
    assert "took back 2 moves: B2 " in text
    assert ending.how == "quit" and ending.outcome is None and ending.moves == 2
    assert t.session.moves[0] == t.game.parse_action("A1")
    assert "result: none, game abandoned after 2 moves" in text


def test_undo_as_second_player_and_undo_turn() -> None:
    session = GameSession(make_game("tictactoe"))
    for move in ("A1", "B2", "C3"):
        session.play(move)
    assert undo_turn(session, 1) == [session.game.parse_action(m) for m in ("B2", "C3")]
    assert len(session.moves) == 1
    assert undo_turn(session, 1) == []


def test_resign_ends_the_game_for_the_other_side_and_the_record_says_so(tmp_path) -> None:
    t, out = terminal("go:size=5", "random", "human", ["pass", "resign"])
    ending = t.run()
    assert ending.how == "resignation" and ending.outcome == 1 and ending.sgf_result == "B+R"
    assert "result: first player wins by resignation after 3 moves" in out.getvalue()
    path = tmp_path / "g.sgf"
    write_record(t.session, ending, "random", "human", str(path))
    [record] = read_sgf(path.read_text())
    assert record.result_text == "B+R" and record.result == 1
    assert replay(record).moves == t.session.moves


def test_hint_and_help_without_a_net_use_a_quick_uct_search() -> None:
    t, out = terminal("tictactoe", "human", "random", ["hint", "help", "quit"])
    assert isinstance(hint_player(t.players), UCTPlayer)
    t.run()
    text = out.getvalue()
    assert text.count("suggested: ") == 2 and "uct400: value " in text
    assert "type a move like B2, or: undo" in text


def test_hints_show_the_nets_top_moves_prior_and_value(gomoku6_net: str) -> None:
    t, out = terminal("gomoku6", "human", f"net:{gomoku6_net}:8",
                      ["C3", "hint", "resign"], hints=True)
    assert isinstance(hint_player(t.players), MCTSPlayer)
    ending = t.run()
    text = out.getvalue()
    hints = [line for line in text.splitlines() if line.startswith("hint checkpoint: value ")]
    assert len(hints) == 2, text  # at both of the person's turns
    assert "prior" in hints[0] and "%" in hints[0]
    assert "second (checkpoint) plays " in text and "suggested: " in text
    assert ending.how == "resignation" and ending.outcome == -1


def test_input_ending_before_the_game_is_an_error() -> None:
    t, _ = terminal("tictactoe", "human", "random", ["B2"])
    with pytest.raises(IllegalMoveError, match="input ended"):
        t.run()


def test_analysis_of_both_searching_players(gomoku6_net: str) -> None:
    game = make_game("gomoku6")
    states = game.step(game.init(2), np.array([0, 14]))
    rng = np.random.default_rng(0)
    for spec in (f"net:{gomoku6_net}:16", "uct:40"):
        player = make_player(spec, game)
        analysis = player.analyse(game, states, rng)
        assert analysis.visits.shape == (2, game.spec.num_actions)
        assert np.all(analysis.visits[~game.legal_mask(states)] == 0)
        assert np.allclose(analysis.policy.sum(1), 1.0)
        assert np.all(np.abs(analysis.value) <= 1.0)
        for b in range(2):
            top = analysis.top(b, 3)
            assert top[0].action == analysis.action[b] and 1 <= len(top) <= 3
            assert all(game.legal_mask(states)[b, m.action] for m in top)
        if spec.startswith("net"):
            assert analysis.prior is not None
            assert np.allclose(analysis.prior.sum(1), 1.0, atol=1e-4)
            assert top[0].prior is not None and analysis.visits.sum(1).min() > 0
        else:
            assert analysis.prior is None and top[0].prior is None


def test_every_player_spec_form_parses_through_make_player(gomoku6_net: str) -> None:
    """Each form ``play --help`` lists (PLAYER_SPECS) with and without its optional part;
    a form this test cannot build (e.g. an external engine's command) must at least be
    known to make_player: its error, if any, is not "unknown player"."""
    fill = {"PLAYOUTS": "8", "SIMULATIONS": "4", "PATH": gomoku6_net}
    for form in PLAYER_SPECS:
        base = re.sub(r"\[.*\]$", "", form)
        examples = {base, form.replace("[", "").replace("]", "")}
        for example in sorted(examples):
            spec = re.sub(r"[A-Z]+", lambda m: fill.get(m.group(0), m.group(0)), example)
            game = make_game("tictactoe" if spec == "minimax" else "gomoku6")
            if re.search(r"[A-Z]{3,}", spec):  # a placeholder this test does not fill
                try:
                    make_player(spec, game)
                except ValueError as err:
                    assert "unknown player" not in str(err), (form, err)
                continue
            player = make_player(spec, game)
            assert player.name, spec
            if spec.startswith("net:") and spec.count(":") == 2:
                assert player.search_config.num_simulations == 4  # type: ignore[attr-defined]


def test_a_runs_snapshot_plays_with_the_net_config_of_its_run(tmp_path) -> None:
    """``net:RUN_DIR/snapshots/weights-*.safetensors``: the net's shape from the run's
    config.yaml, so a person can play any snapshot without repeating the net config."""
    import yaml

    from zeroforge.learner.learner import Learner, LearnerConfig
    from zeroforge.shared.config import to_dict
    from zeroforge.shared.formats import save_weights
    from zeroforge.shared.nets import NetConfig
    from zeroforge.shared.run_files import snapshot_path

    net = NetConfig.preset("tiny").replace(channels=8, blocks=1)
    learner = Learner(LearnerConfig(replay_capacity=64, device="cpu"), "gomoku6", net)
    snap = snapshot_path(tmp_path / "run", 60)
    snap.parent.mkdir(parents=True)
    save_weights(learner.weights(), snap)
    game = make_game("gomoku6")
    with pytest.raises(ValueError, match="does not say its net's shape"):
        make_player(f"net:{snap}", game)
    (tmp_path / "run" / "config.yaml").write_text(
        yaml.safe_dump({"game": "gomoku6", "net": to_dict(net)}))
    player = make_player(f"net:{snap}:3", game)
    assert player.select(game, game.init(1), np.random.default_rng(0)).shape == (1,)
    with pytest.raises(ValueError, match="a snapshot of game 'gomoku:size=6,k=4'"):
        make_player(f"net:{snap}", make_game("gomoku8"))
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump({"net": "small"}))
    with pytest.raises(ValueError, match="weights do not fit this net"):
        make_player(f"net:{snap}", game)
