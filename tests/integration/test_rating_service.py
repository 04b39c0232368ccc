"""RatingService against a real redis-server: anchors, the best-weights gate, results in
Redis, restarts and unusable weights."""

from __future__ import annotations

import pytest
import torch

from tests.integration.conftest import learner_service, rating_service
from zeroforge.actors.config import EvaluationConfig
from zeroforge.actors.rating_service import BEST
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.learner.learner import LearnerConfig
from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import EvalResultsStore, ResultsFormatError, WeightStore

GAME = "tictactoe"
ANCHORS = ("random", "minimax")


def config() -> TrainConfig:
    return TrainConfig(game=GAME, net=NetConfig.preset("tiny"),
                       search=SearchConfig(num_simulations=8),
                       learner=LearnerConfig(device="cpu"),
                       evaluation=EvaluationConfig(games=4, anchors=ANCHORS),
                       run=RunConfig(torch_threads=1))


def random_weights(seed: int, game: str = GAME) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return build_net(NetConfig.preset("tiny"), make_game(game).spec).state_dict()


def gauges(snapshot: dict, name: str) -> dict[str, float]:
    return {dict(map(tuple, labels)).get("anchor", ""): v
            for labels, v in snapshot["values"].get(name, [])}


def check_anchor(summary: dict, games: int) -> None:
    assert 0.0 <= summary["score"] <= 1.0
    assert summary["wins"] + summary["draws"] + summary["losses"] == summary["games"] == games
    assert summary["score"] == pytest.approx((summary["wins"] + summary["draws"] / 2) / games)
    assert summary["elo_low"] <= summary["elo"] <= summary["elo_high"]
    # Kish's effective size is at most the number of distinct games (Cauchy-Schwarz)
    assert 1 <= summary["effective_games"] <= summary["distinct_games"] <= games


def test_new_weights_are_scored_against_each_anchor_and_the_best(
        redis_server, redis_client, run_id):
    store = WeightStore(redis_client, run_id)
    store.publish(random_weights(1), 3)
    ev = rating_service(config(), redis_server.url, run_id)
    assert ev.results() == {}

    first = ev.run_once()
    assert first["weights_version"] == 3
    assert set(first["anchors"]) == set(ANCHORS)  # the first weights become best unplayed
    for summary in first["anchors"].values():
        check_anchor(summary, 4)
    assert first["best_version"] == 3 and first["promoted"] is False
    stored = EvalResultsStore(redis_client, run_id)
    assert stored.latest() == first == ev.results()
    snap = ev.stats()
    assert gauges(snap, "evaluator_score_ratio") == {
        a: first["anchors"][a]["score"] for a in ANCHORS}
    assert gauges(snap, "evaluator_elo") == {a: first["anchors"][a]["elo"] for a in ANCHORS}
    assert gauges(snap, "evaluator_weights_version") == {"": 3.0}

    assert ev.run_once() is None  # nothing newer

    store.publish(random_weights(2), 4)
    second = ev.run_once()
    assert second["weights_version"] == 4
    assert set(second["anchors"]) == {*ANCHORS, BEST}
    check_anchor(second["anchors"][BEST], 4)
    promoted = second["anchors"][BEST]["score"] > 0.55
    assert second["promoted"] is promoted
    assert second["best_version"] == ev.best_version == (4 if promoted else 3)
    assert stored.best()[0] == ev.best_version
    assert [r["weights_version"] for r in stored.history()] == [4, 3]
    ev.close()

    # A restarted evaluator keeps its best and does not redo version 4.
    again = rating_service(config(), redis_server.url, run_id)
    assert again.best_version == ev.best_version and again.version == 4
    assert again.results() == second
    assert gauges(again.stats(), "evaluator_score_ratio") == {
        a: s["score"] for a, s in second["anchors"].items()}
    assert again.run_once() is None
    again.close()


def test_weights_published_by_the_learner_service_are_evaluated(
        redis_server, run_id, tmp_path):
    learner = learner_service(config(), redis_server.url, run_id, str(tmp_path))
    ev = rating_service(config(), redis_server.url, run_id, anchors=("uct:20",), games=2)
    results = ev.run_once()
    assert results["weights_version"] == 0  # the learner's initial random weights
    check_anchor(results["anchors"]["uct:20"], 2)
    learner.stop()
    ev.close()


def test_unusable_weights_are_skipped_and_the_next_ones_evaluated(
        redis_server, redis_client, run_id, caplog):
    store = WeightStore(redis_client, run_id)
    # Weights of a net for another board: shapes do not fit the tic-tac-toe net.
    store.publish(random_weights(1, "gomoku:width=5,height=5,k=4"), 1)
    ev = rating_service(config(), redis_server.url, run_id, anchors=("random",), games=2)
    with caplog.at_level("WARNING"):
        assert ev.run_once() is None
    assert ev.bad_weights == 1 and ev.version == 1
    assert any("do not fit" in r.getMessage() and "\n" not in r.getMessage()
               for r in caplog.records)
    assert ev.run_once() is None  # skipped for good, not retried

    # A damaged blob (fails its sha256) is skipped too.
    blob = weights_to_bytes(random_weights(2))
    store.publish(blob, 2)
    redis_client.set(store.key(2), blob[:-1] + bytes([blob[-1] ^ 1]))
    assert ev.run_once() is None and ev.bad_weights == 2

    store.publish(random_weights(3), 3)
    assert ev.run_once()["weights_version"] == 3
    ev.close()


def test_garbage_in_the_results_keys(redis_server, redis_client, run_id):
    stored = EvalResultsStore(redis_client, run_id)
    redis_client.set(stored.key, b"\xc1 not msgpack")
    with pytest.raises(ResultsFormatError, match="not msgpack"):
        stored.latest()
    stored.put_best(7, b"PAYLOAD-BYTES")
    record = redis_client.get(stored.best_key)
    redis_client.set(stored.best_key, record.replace(b"PAYLOAD-BYTES", b"PAYLOAD-BYTEZ"))
    with pytest.raises(ResultsFormatError, match="sha256"):
        stored.best()

    # The evaluator starts anyway, gating afresh.
    WeightStore(redis_client, run_id).publish(random_weights(1), 1)
    ev = rating_service(config(), redis_server.url, run_id, anchors=("random",), games=2)
    assert ev.best_version is None
    assert ev.run_once()["best_version"] == 1
    assert stored.latest()["weights_version"] == 1
    ev.close()


def test_each_evaluation_joins_the_run_ladder_and_keeps_its_games_as_sgf(
        redis_server, redis_client, run_id, tmp_path):
    from zeroforge.shared.formats import read_sgf_file, replay
    from zeroforge.shared.players import load_ladder
    from zeroforge.shared.run_files import RunFiles

    store = WeightStore(redis_client, run_id)
    ev = rating_service(config(), redis_server.url, run_id, record=RunFiles(tmp_path))
    store.publish(random_weights(1), 3)
    first = ev.run_once()
    store.publish(random_weights(2), 4)
    second = ev.run_once()

    lad = load_ladder(tmp_path)
    assert lad.run_id == run_id and lad.anchor == "random"
    assert set(lad.players) == {"v3", "v4", *ANCHORS}
    assert lad.players["v3"].kind == "version" and lad.players["v3"].spec is None
    for version, results in ((3, first), (4, second)):
        for spec in ANCHORS:
            s = results["anchors"][spec]
            assert lad.record(f"v{version}", spec) == (s["wins"], s["draws"], s["losses"])
            # the fit weighs each match by its effective games (replayed lines weigh less)
            pair = tuple(sorted((f"v{version}", spec)))
            assert lad.effective[pair] == pytest.approx(s["effective_games"], abs=1e-3)
    gate = second["anchors"][BEST]
    assert lad.record("v4", "v3") == (gate["wins"], gate["draws"], gate["losses"])
    fit = lad.refit()
    assert fit.elo["random"] == 0.0 and fit.rated("v4") and fit.rated("minimax")
    # exported: the newest version's rating and interval, and each anchor's
    ladder = {(dict(map(tuple, labels))["player"], dict(map(tuple, labels))["bound"]): v
              for labels, v in ev.stats()["values"]["evaluator_ladder_elo"]}
    low, high = fit.interval("v4")
    assert ladder[("latest", "estimate")] == pytest.approx(fit.elo["v4"])
    assert (ladder[("latest", "low")], ladder[("latest", "high")]) == pytest.approx((low, high))
    assert ladder[("minimax", "estimate")] == pytest.approx(fit.elo["minimax"])
    assert ladder[("random", "estimate")] == 0.0
    # best.safetensors: the version whose interval's low end is higher, and its weights
    import json

    from zeroforge.deploy.runtime.status import RunStatus
    from zeroforge.shared.formats import load_weights

    best = 4 if fit.interval("v4")[0] > fit.interval("v3")[0] else 3
    record = json.loads((tmp_path / "best.json").read_text())
    assert record["version"] == best
    kept = load_weights(tmp_path / "best.safetensors")
    assert all(torch.equal(kept[k], v) for k, v in random_weights(best - 2).items())
    from zeroforge.shared.metrics import merge

    status = RunStatus.from_metrics(merge([ev.stats()]), run_id=run_id, state="running",
                                    elapsed_s=1)
    assert status.best_snapshot["version"] == best
    assert status.best_snapshot["low"] == pytest.approx(fit.interval(f"v{best}")[0])
    assert f"best snapshot: v{best}" in status.text()

    # every game as SGF, replaying to the outcome the match counted
    for version, results in ((3, first), (4, second)):
        for spec, s in results["anchors"].items():
            files = sorted(tmp_path.glob(f"games/eval/v{version}-{spec}-*.sgf"))
            assert len(files) == s["games"] == 4
            score = 0.0
            for f in files:
                (record,) = read_sgf_file(f)
                assert replay(record).outcome == record.result
                agent_black = record.black == f"v{version}"
                assert agent_black or record.white == f"v{version}"
                score += (1 + (record.result if agent_black else -record.result)) / 2
            assert score / 4 == pytest.approx(s["score"])
    ev.close()

    # another run's ladder in the same run dir is kept aside, not mixed with this one's
    other = rating_service(config(), redis_server.url, run_id + "-b",
                              record=RunFiles(tmp_path))
    WeightStore(redis_client, run_id + "-b").publish(random_weights(5), 1)
    other.run_once()
    assert set(load_ladder(tmp_path).players) == {"v1", *ANCHORS}
    assert len(list(tmp_path.glob("ladder-*.json"))) == 1
    # and so are its game records: games/eval holds this run's only
    assert len(list(tmp_path.glob("games/eval-*/v3-random-*.sgf"))) == 4
    assert {p.name.split("-")[0] for p in tmp_path.glob("games/eval/*.sgf")} == {"v1"}
    other.close()
