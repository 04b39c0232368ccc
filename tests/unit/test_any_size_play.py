"""A fully convolutional net (``heads: pooled``, as a ``selfplay.board_sizes`` run trains)
plays its game at other board sizes: ``net:`` players, a run's snapshots, and the GTP
engine's ``boardsize``. A net with size-bound heads still plays its own size only."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import yaml

from zeroforge.deploy.engines.agent import Agent
from zeroforge.deploy.engines.gtp import GtpEngine
from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.shared.config import to_dict
from zeroforge.shared.formats import save_weights
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.players import load_net, make_player
from zeroforge.shared.run_files import snapshot_path

TRAINED = "go:size=5,obs=features"
POOLED = NetConfig.preset("go_small").replace(channels=8, blocks=1, global_pool_every=1,
                                              pool_channels=4)
SIZE_BOUND = NetConfig.preset("tiny")


def checkpoint(folder: Path, net: NetConfig, game: str = TRAINED) -> Path:
    learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), game, net)
    return learner.save(folder / f"{net.heads}.pt")


@pytest.fixture(scope="module")
def pooled_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkpoint(tmp_path_factory.mktemp("pooled"), POOLED)


def test_a_pooled_checkpoint_plays_other_sizes_of_its_game(pooled_checkpoint, tmp_path):
    seven = make_game("go:size=7,obs=features")
    player = make_player(f"net:{pooled_checkpoint}:4", seven)
    state = seven.init(1)
    action = player.select(seven, state, np.random.default_rng(0))
    assert seven.legal_mask(state)[0, int(action[0])]  # a 7x7 move (50 actions)
    # other input planes are another game, whatever the heads
    with pytest.raises(ValueError, match="a checkpoint of game 'go:size=5"):
        load_net(pooled_checkpoint, make_game("go:size=7"))
    bound = checkpoint(tmp_path, SIZE_BOUND)
    with pytest.raises(ValueError, match="a checkpoint of game 'go:size=5"):
        load_net(bound, seven)


def test_a_pooled_runs_snapshot_plays_other_sizes(tmp_path):
    learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), TRAINED, POOLED)
    snap = snapshot_path(tmp_path / "run", 60)
    snap.parent.mkdir(parents=True)
    save_weights(learner.weights(), snap)
    (tmp_path / "run" / "config.yaml").write_text(
        yaml.safe_dump({"game": TRAINED, "net": to_dict(POOLED)}))
    nine = make_game("go:size=9,obs=features")
    assert load_net(snap, nine).config.heads == "pooled"
    (tmp_path / "run" / "config.yaml").write_text(
        yaml.safe_dump({"game": TRAINED, "net": to_dict(SIZE_BOUND)}))
    with pytest.raises(ValueError, match="a snapshot of game 'go:size=5"):
        load_net(snap, nine)


def talk(engine: GtpEngine, script: str) -> list[str]:
    out = io.StringIO()
    engine.serve(io.StringIO(script), out)
    return out.getvalue()[:-2].split("\n\n")


def test_gtp_boardsize_with_a_pooled_net(pooled_checkpoint):
    engine = GtpEngine(Agent(pooled_checkpoint, simulations=4, device="cpu"),
                       resign_below=-2.0)
    assert engine.agent.any_size
    responses = talk(engine, "1 boardsize 7\n2 play b g7\n3 genmove w\n4 final_score\n"
                             "5 boardsize 4\n6 boardsize 9\n7 play b j9\n")
    assert responses[:2] == ["=1", "=2"]
    assert engine.game.size == 9 and engine.game.max_moves == 2 * 81  # the 9x9 cap
    vertex = responses[2].split()[1]
    assert responses[2].startswith("=3 ") and vertex.upper() != "G7"
    assert responses[3].startswith("=4 ")
    assert responses[4].startswith("?5 unacceptable size (go size=4")
    assert responses[5:] == ["=6", "=7"]  # J9: on 9x9 only


def test_gtp_boardsize_with_a_size_bound_net(tmp_path):
    engine = GtpEngine(Agent(checkpoint(tmp_path, SIZE_BOUND), simulations=4,
                             device="cpu"), resign_below=-2.0)
    assert not engine.agent.any_size
    assert talk(engine, "boardsize 7\nboardsize 5\n") == [
        "? unacceptable size (this net plays 5x5 only)", "="]


def test_an_agent_for_another_size(pooled_checkpoint, tmp_path):
    agent = Agent(pooled_checkpoint, "go:size=9,obs=features", simulations=4, device="cpu")
    choice = agent.choose(agent.game, agent.game.init(1))
    assert 0 <= choice.action < 82
    with pytest.raises(ValueError, match="cannot play go:size=9"):
        Agent(checkpoint(tmp_path, SIZE_BOUND), "go:size=9,obs=features", simulations=4,
              device="cpu")


def test_one_rule_decides_which_games_a_net_plays():
    """``board_sizes.net_plays``, shared by ``net:`` players, ``play``, GTP and Gomocup."""
    from zeroforge.shared.board_sizes import net_plays

    go9 = make_game("go:size=9,obs=features")
    assert net_plays(make_game("go:size=9,obs=features,komi=6.5"), go9)  # komi: same inputs
    assert not net_plays(make_game("go:size=7,obs=features"), go9)  # size-bound heads
    assert net_plays(make_game("go:size=7,obs=features"), go9, any_size=True)
    assert not net_plays(make_game("go:size=7"), go9, any_size=True)  # other planes
    six = make_game("gomoku:size=6,k=4")
    assert net_plays(make_game("gomoku:size=6,k=4,exact=true"), six)
    assert not net_plays(make_game("gomoku:size=8,k=5"), six, any_size=True)  # not sized
    assert not net_plays(make_game("tictactoe"), six)


def test_a_net_player_takes_another_komi_as_the_engines_do(tmp_path):
    """Before, ``net:`` refused a komi that GTP's ``komi`` command accepted."""
    bound = checkpoint(tmp_path, SIZE_BOUND)
    komi = make_game(f"{TRAINED},komi=6.5")
    player = make_player(f"net:{bound}:4", komi)
    state = komi.init(1)
    assert komi.legal_mask(state)[0, int(player.select(komi, state,
                                                          np.random.default_rng(0))[0])]
    agent = Agent(bound, komi.spec.spec_string, simulations=4)
    assert agent.game.spec.spec_string == komi.spec.spec_string
