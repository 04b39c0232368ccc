"""Every player ``make_player`` builds, on every game it can play: a ``Player`` that picks a
legal move for every running game of a batch; and a bad spec is a one-line error."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pytest
import torch

from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.shared.formats import save_weights
from zeroforge.shared.games import Game, make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.players import PLAYER_SPECS, Player, load_net, make_player
from zeroforge.shared.search import SearchConfig

GAMES = ["tictactoe", "gomoku6", "go:size=5", "5stone_chess"]
PLIES = 4
BATCH = 3
SEARCH = SearchConfig(num_simulations=4)


@pytest.fixture(scope="module")
def net_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """(learner checkpoint, weights snapshot) of a tiny untrained net for each game."""
    folder = tmp_path_factory.mktemp("nets")
    files = {}
    for i, spec in enumerate(GAMES):
        learner = Learner(LearnerConfig(replay_capacity=64, device="cpu"), spec,
                          NetConfig.preset("tiny"))
        checkpoint = learner.save(folder / f"checkpoint-{i}.pt")
        snapshot = folder / f"weights-{i}.safetensors"
        save_weights(learner.weights(), snapshot)
        files[spec] = (checkpoint, snapshot)
    return files


def specs_for(game_spec: str, files: tuple[Path, Path]) -> list[str]:
    """One spec of every form in PLAYER_SPECS that plays ``game_spec``."""
    checkpoint, snapshot = files
    specs = ["human", "random", "uct", "uct:8", "uctsolver:8", f"net:{checkpoint}",
             f"net:{checkpoint}:3", f"net:{snapshot}:2"]
    if game_spec == "tictactoe":
        specs.append("minimax")
    if game_spec.startswith("go:"):  # GnuGo over GTP (shared/players/gtp.py); CI installs it
        specs.append("gtp:gnugo --mode gtp --level 1")
    return specs


def test_every_form_of_spec_is_listed_and_covered() -> None:
    heads = {s.split(":")[0].split("[")[0] for s in PLAYER_SPECS}
    assert heads == {"human", "random", "minimax", "uct", "uctsolver", "net", "gtp"}


@pytest.mark.parametrize("game_spec", GAMES)
def test_every_player_plays_legal_moves(game_spec: str, net_files, monkeypatch) -> None:
    game = make_game(game_spec)
    current: list = []  # [states being asked, games asked so far]

    def type_first_legal_move() -> str:
        """The person at the keyboard: the first legal move of the game being asked."""
        states, asked = current
        current[1] += 1
        return game.format_action(int(np.flatnonzero(game.legal_mask(states)[asked])[0]))

    monkeypatch.setattr(builtins, "input", type_first_legal_move)
    for spec in specs_for(game_spec, net_files[game_spec]):
        if spec == "uct":  # 1000 playouts a move: one ply of one game is enough
            _play(game, make_player(spec, game), 1, 1, current)
            continue
        player = make_player(spec, game, search=SEARCH, net_config=NetConfig.preset("tiny"))
        assert isinstance(player.name, str) and player.name
        _play(game, player, BATCH, PLIES, current)


def _play(game: Game, player: Player, batch: int, plies: int, current: list) -> None:
    rng = np.random.default_rng(0)
    states = game.init(batch)
    for _ in range(plies):
        running = np.flatnonzero(~states.terminal)
        if not running.size:
            break
        sub = states.take(running)
        current[:] = [sub, 0]
        actions = np.asarray(player.select(game, sub, rng)).reshape(-1)
        assert actions.shape == (running.size,), player.name
        legal = game.legal_mask(sub)
        assert legal[np.arange(running.size), actions].all(), (player.name, actions)
        full = np.full(batch, -1, np.int64)
        full[running] = actions
        states = game.step(states, full)


@pytest.mark.parametrize("spec", ["", "bogus", "uct:abc", "uct:0", "uct:-5", "random:3",
                                  "minimax:2", "net:", "net", "human:x", "alphago"])
def test_bad_specs_are_a_one_line_error_listing_the_specs(spec: str) -> None:
    with pytest.raises(ValueError) as err:
        make_player(spec, make_game("tictactoe"))
    message = str(err.value)
    assert "\n" not in message and spec in message
    if not spec.startswith("uct:"):
        assert all(s in message for s in PLAYER_SPECS)


def test_net_player_errors_are_one_line(tmp_path: Path) -> None:
    ttt, gomoku = make_game("tictactoe"), make_game("gomoku6")
    snapshot = tmp_path / "w.safetensors"
    save_weights(build_net("tiny", ttt.spec), snapshot)
    checkpoint = Learner(LearnerConfig(replay_capacity=16, device="cpu"), "tictactoe",
                         NetConfig.preset("tiny")).save(tmp_path / "checkpoint.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    cases = [
        (f"net:{tmp_path / 'missing.pt'}", ttt, {}, "no such checkpoint or weights file"),
        (f"net:{snapshot}", ttt, {}, "does not say its net's shape"),
        (f"net:{snapshot}", gomoku, {"net_config": "tiny"}, "do not fit this net"),
        (f"net:{checkpoint}", gomoku, {}, "checkpoint of game 'tictactoe'"),
        (f"net:{checkpoint}:0", ttt, {}, "SIMULATIONS must be a positive integer"),
        (f"net:{junk}", ttt, {}, "corrupt checkpoint or weights file"),
        (f"net:{snapshot}", None, {"net_config": "tiny"}, "needs the game"),
    ]
    for spec, game, kwargs, message in cases:
        with pytest.raises(ValueError, match=message) as err:
            make_player(spec, game, **kwargs)
        assert "\n" not in str(err.value)


def test_minimax_refuses_a_game_it_cannot_solve_at_once() -> None:
    with pytest.raises(ValueError, match="MinimaxPlayer"):
        make_player("minimax", make_game("gomoku6"))
    assert make_player("minimax").name == "minimax"  # without a game: checked at select


def test_net_player_reads_the_checkpoint_and_a_name_can_be_given(tmp_path: Path) -> None:
    game = make_game("tictactoe")
    learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), "tictactoe",
                      NetConfig.preset("small"))
    checkpoint = learner.save(tmp_path / "checkpoint.pt")
    # the checkpoint's net config ("small") wins over a different one given for snapshots
    player = make_player(f"net:{checkpoint}:7", game, net_config="tiny", name="champion",
                         opening_moves=2)
    assert player.name == "champion"
    assert player.search_config.num_simulations == 7
    assert player.search_config.temperature_moves == 2
    net = load_net(checkpoint, game, "tiny")
    assert net.state_dict().keys() == learner.weights().keys()
    assert all(torch.equal(net.state_dict()[k], v) for k, v in learner.weights().items())
