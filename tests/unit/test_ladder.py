"""The Elo ladder (shared/players/ladder.py): the Bradley-Terry fit against known answers, its
intervals, the choice of the next pair, and the ladder file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from zeroforge.shared.players import (
    ELO_PER_NAT,
    Fit,
    Ladder,
    LadderError,
    LadderPlayer,
    expected_score,
    fit_ratings,
    format_table,
    load_ladder,
    next_pair,
    save_ladder,
    variance_drop,
)


def ladder_of(ratings: dict[str, float], games: int, rng: np.random.Generator,
              draw_share: float = 0.0) -> Ladder:
    """Every pair plays ``games`` games with outcomes drawn from the Bradley-Terry model
    of ``ratings`` (a share of decisive games turned into draws symmetrically keeps the
    expected score)."""
    lad = Ladder()
    for name in ratings:
        lad.add_player(name, "anchor" if name == "random" else "snapshot", spec=name)
    names = list(ratings)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = 1.0 / (1.0 + 10.0 ** ((ratings[b] - ratings[a]) / 400.0))
            draws = int(rng.binomial(games, draw_share * 2 * min(p, 1 - p)))
            # a draw replaces one win and one loss (score unchanged on average)
            wins = int(rng.binomial(games - draws, (p - draws / games / 2) /
                                    (1 - draws / games)))
            lad.add_games(a, b, wins, draws, games - draws - wins)
    return lad


TRUE = {"random": 0.0, "a": 150.0, "b": 400.0, "c": 520.0, "d": 900.0}


def test_synthetic_ratings_are_recovered_within_their_intervals_at_the_stated_rate():
    """Over many synthetic ladders the 95 % intervals hold the true ratings about 95 % of
    the time, and the estimates are centred on them (prior games bias them a little
    towards each other: 400 games a pair makes that negligible)."""
    rng = np.random.default_rng(7)
    inside = total = 0
    errors = []
    for _ in range(60):
        fit = ladder_of(TRUE, 400, rng).refit()
        for name, true in TRUE.items():
            if name == "random":
                assert fit.elo[name] == 0.0 and fit.sd[name] == 0.0
                continue
            low, high = fit.interval(name)
            inside += low <= true <= high
            total += 1
            errors.append(fit.elo[name] - true)
    assert 0.88 <= inside / total <= 0.995, inside / total
    assert abs(float(np.mean(errors))) < 10.0, np.mean(errors)


def test_two_players_match_the_closed_form():
    """One pair: the fit is the logit of the score with the prior draw, and the sd is
    1 / sqrt(n p (1 - p)) (the Fisher information of a binomial), in Elo."""
    results = {("random", "x"): [12.0, 4.0, 24.0]}  # x: 24 wins, 4 draws, 12 losses
    fit = fit_ratings(["random", "x"], results, "random", prior_draws=1.0)
    score, n = 24 + 2 + 0.5, 40 + 1.0
    p = score / n
    assert fit.elo["x"] == pytest.approx(400 * math.log10(p / (1 - p)), abs=1e-6)
    assert fit.sd["x"] == pytest.approx(ELO_PER_NAT / math.sqrt(n * p * (1 - p)), rel=1e-6)
    assert fit.games == {"random": 40.0, "x": 40.0}


def test_symmetric_results_give_symmetric_ratings():
    lad = Ladder()
    for n in ("random", "x", "y"):
        lad.add_player(n, "anchor" if n == "random" else "snapshot")
    lad.add_games("x", "random", 7, 2, 3)
    lad.add_games("random", "y", 7, 2, 3)  # y: the mirror image of x
    lad.add_games("x", "y", 5, 0, 5)
    fit = lad.refit()
    assert fit.elo["x"] == pytest.approx(-fit.elo["y"], abs=1e-9)
    assert fit.sd["x"] == pytest.approx(fit.sd["y"], rel=1e-9)
    assert fit.elo["x"] > 0
    # even results: equal ratings; draws count as half wins
    even = Ladder()
    for n in ("random", "x", "y"):
        even.add_player(n, "snapshot")
    even.add_games("x", "random", 0, 10, 0)
    even.add_games("y", "random", 5, 0, 5)
    fit = even.refit()
    assert fit.elo["x"] == pytest.approx(0.0, abs=1e-9)
    assert fit.elo["y"] == pytest.approx(0.0, abs=1e-9)
    # the order players were added in does not matter
    names = ["y", "random", "x"]
    again = fit_ratings(names, lad.results, "random")
    assert again.elo["x"] == pytest.approx(lad.fit.elo["x"], abs=1e-9)


def test_a_clean_sweep_stays_finite_and_more_games_narrow_the_interval():
    lad = Ladder()
    lad.add_player("random", "anchor", spec="random")
    lad.add_player("x", "snapshot")
    lad.add_games("x", "random", 20, 0, 0)
    sweep = lad.refit()
    assert math.isfinite(sweep.elo["x"]) and math.isfinite(sweep.sd["x"])
    assert sweep.elo["x"] == pytest.approx(400 * math.log10(20.5 / 0.5), abs=1e-6)
    widths = []
    for games in (10, 40, 160):
        lad = Ladder()
        lad.add_player("random", "anchor")
        lad.add_player("x", "snapshot")
        lad.add_games("x", "random", int(0.7 * games), 0, games - int(0.7 * games))
        low, high = lad.refit().interval("x")
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[1] / widths[2] == pytest.approx(2.0, rel=0.05)  # ~ 1/sqrt(games)


def test_players_without_a_chain_to_the_anchor_are_unrated():
    lad = Ladder()
    for n in ("random", "x", "y", "z"):
        lad.add_player(n, "snapshot")
    lad.add_games("x", "random", 3, 0, 1)
    lad.add_games("y", "z", 3, 0, 1)
    fit = lad.refit()
    assert fit.rated("x") and not fit.rated("y") and not fit.rated("z")
    with pytest.raises(KeyError):
        fit.interval("y")
    assert "y" in format_table(fit, lad)


def test_next_pair_prefers_uncertain_neighbours():
    # newcomers first: an unrated snapshot plays the rated snapshot nearest in time
    lad = Ladder()
    lad.add_player("random", "anchor", spec="random")
    lad.add_player("s60", "snapshot", spec="net:a", order=60)
    lad.add_player("s120", "snapshot", spec="net:b", order=120)
    lad.add_player("s600", "snapshot", spec="net:c", order=600)
    lad.add_games("s60", "random", 8, 0, 2)
    lad.add_games("s120", "random", 9, 0, 1)
    lad.refit()
    assert lad.next_pair() == ("s600", "s120")
    # a version the evaluator played (no spec) is never chosen
    lad.add_player("v7", "version", order=7)
    assert "v7" not in lad.next_pair()
    # rated players: a close, barely measured pair beats a lopsided or well-measured one
    lad = ladder_of({"random": 0.0, "near": 40.0, "far": 1200.0}, 400, np.random.default_rng(1))
    lad.add_player("new", "snapshot", spec="net:new", order=1)
    lad.add_games("new", "near", 3, 0, 2)
    fit = lad.refit()
    assert lad.next_pair(10) == ("near", "new")
    gains = {(a, b): variance_drop(fit, a, b, 10) for a, b in
             [("random", "near"), ("random", "far"), ("near", "new"), ("far", "new"),
              ("random", "new"), ("near", "far")]}
    assert max(gains, key=gains.get) == ("near", "new")
    assert all(g > 0 for g in gains.values())
    # equally well known opponents: the one near in rating tells more (p (1 - p))
    fit = Fit(anchor="random", names=["random", "near", "far", "x"],
                      elo={"random": 0.0, "near": 100.0, "far": 700.0, "x": 150.0},
                      sd={}, games={}, cov=np.diag([0.01, 0.01, 1.0]),
                      free=["near", "far", "x"])
    assert variance_drop(fit, "x", "near", 10) > 2 * variance_drop(fit, "x", "far", 10)
    assert next_pair(fit, [LadderPlayer(n, "snapshot", "s")
                                   for n in ("near", "far", "x")]) == ("near", "x")


def test_variance_drop_matches_refitting_with_the_expected_games():
    """The rank-one update predicts the summed variance after k more games at the
    expected score (with fractional wins, exactly what a refit then computes)."""
    lad = ladder_of({"random": 0.0, "x": 100.0, "y": 250.0}, 30, np.random.default_rng(3))
    fit = lad.refit()
    before = float(np.trace(fit.cov))
    p = expected_score(fit, "x", "y")
    drop = variance_drop(fit, "x", "y", 20)
    results = {k: list(v) for k, v in lad.results.items()}
    key = ("x", "y")
    results[key] = [results[key][0] + 20 * p, results[key][1], results[key][2] + 20 * (1 - p)]
    after = fit_ratings(list(lad.players), results, "random")
    # the ratings move a little when the prior weighs less, so only approximately equal
    assert before - float(np.trace(after.cov)) == pytest.approx(drop, rel=0.05)


def test_the_ladder_file_round_trips_atomically(tmp_path):
    lad = ladder_of({"random": 0.0, "x": 100.0}, 20, np.random.default_rng(0))
    lad.run_id = "r1"
    lad.refit()
    save_ladder(tmp_path, lad)
    assert [p.name for p in tmp_path.iterdir()] == ["ladder.json"]  # no temp file left
    data = json.loads((tmp_path / "ladder.json").read_text())
    assert {r["name"] for r in data["fit"]["ratings"]} == {"random", "x"}
    back = load_ladder(tmp_path)
    assert back.run_id == "r1" and back.players == lad.players
    assert back.results == lad.results
    assert back.refit().elo == pytest.approx(lad.fit.elo)
    assert load_ladder(tmp_path / "nowhere").players == {}  # no file: empty ladder


def test_replayed_games_count_as_their_effective_games():
    """40 games that are 10 effective ones: the fit is that of 10 games at the same score
    (the closed form above with n = 10 + the prior draw), not of 40."""
    lad = Ladder()
    lad.add_player("random", "anchor")
    lad.add_player("x", "snapshot")
    lad.add_games("x", "random", 24, 4, 12, effective=10.0)
    fit = lad.refit()
    share = 10 / 40
    score, n = (24 + 2) * share + 0.5, 40 * share + 1.0
    p = score / n
    assert fit.elo["x"] == pytest.approx(400 * math.log10(p / (1 - p)), abs=1e-6)
    assert fit.sd["x"] == pytest.approx(ELO_PER_NAT / math.sqrt(n * p * (1 - p)), rel=1e-6)
    assert fit.games["x"] == 40.0 and fit.effective["x"] == pytest.approx(10.0)
    every = Ladder(players=dict(lad.players))
    every.add_games("x", "random", 24, 4, 12)  # all 40 distinct
    wide, narrow = fit.interval("x"), every.refit().interval("x")
    assert wide[1] - wide[0] == pytest.approx(2 * (narrow[1] - narrow[0]), rel=0.1)
    assert lad.record("x", "random") == (24, 4, 12)  # the record itself is untouched


def test_effective_games_add_up_over_matches_and_survive_the_file(tmp_path):
    lad = Ladder()
    for name in ("random", "x", "y"):
        lad.add_player(name, "anchor" if name == "random" else "snapshot")
    lad.add_games("x", "random", 10, 0, 10, effective=8.0)
    lad.add_games("random", "x", 5, 0, 15, effective=20.0)  # all distinct
    lad.add_games("y", "random", 6, 0, 4)
    assert lad.effective == {("random", "x"): 28.0, ("random", "y"): 10.0}
    fit = lad.refit()
    save_ladder(tmp_path, lad)
    data = json.loads((tmp_path / "ladder.json").read_text())
    assert {(r["a"], r["b"]): r["effective"] for r in data["results"]} == lad.effective
    assert {r["name"]: r["effective_games"] for r in data["fit"]["ratings"]} == {
        "random": 38.0, "x": 28.0, "y": 10.0}
    back = load_ladder(tmp_path)
    assert back.effective == lad.effective
    assert back.refit().sd == pytest.approx(fit.sd)
    # a file from before effective games were kept: every game counts
    for r in data["results"]:
        del r["effective"]
    (tmp_path / "ladder.json").write_text(json.dumps(data))
    old = load_ladder(tmp_path)
    assert old.effective == {("random", "x"): 40.0, ("random", "y"): 10.0}
    assert old.refit().sd["x"] < fit.sd["x"]


@pytest.mark.parametrize("effective", [0.0, 0.5, 20.5, -1.0])
def test_effective_games_outside_one_to_the_games_played_are_refused(tmp_path, effective):
    lad = Ladder()
    lad.add_player("random", "anchor")
    lad.add_player("x", "snapshot")
    with pytest.raises(ValueError, match="effective games of 20 between 'x' and 'random'"):
        lad.add_games("x", "random", 10, 0, 10, effective=effective)
    assert lad.results == {} and lad.effective == {}
    lad.add_games("x", "random", 10, 0, 10)
    save_ladder(tmp_path, lad)
    data = json.loads((tmp_path / "ladder.json").read_text())
    data["results"][0]["effective"] = effective
    (tmp_path / "ladder.json").write_text(json.dumps(data))
    with pytest.raises(LadderError, match="effective games of 20"):
        load_ladder(tmp_path)


@pytest.mark.parametrize("text", ["{\"format\": 1, \"players\": [{\"nam", "[1, 2]",
                                  "{\"format\": 1, \"players\": [], \"results\": "
                                  "[{\"a\": \"ghost\", \"b\": \"x\"}]}"])
def test_a_corrupt_ladder_is_kept_aside_with_a_one_line_error(tmp_path, text):
    (tmp_path / "ladder.json").write_text(text)
    with pytest.raises(LadderError) as err:
        load_ladder(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "ladder.json" in message and "kept aside" in message
    kept = list(tmp_path.glob("ladder-corrupt-*.json"))
    assert len(kept) == 1 and kept[0].read_text() == text and kept[0].name in message
    assert not (tmp_path / "ladder.json").exists()
    assert load_ladder(tmp_path).players == {}  # the next load starts afresh


def test_bad_games_are_refused():
    lad = Ladder()
    lad.add_player("x", "snapshot")
    with pytest.raises(ValueError, match="unknown player"):
        lad.add_games("x", "y", 1, 0, 0)
    with pytest.raises(ValueError, match="itself"):
        lad.add_games("x", "x", 1, 0, 0)
    with pytest.raises(ValueError, match="kind"):
        lad.add_player("z", "robot")


def test_next_pair_is_the_pair_with_the_largest_variance_drop():
    """The all-pairs computation picks what pair-by-pair ``variance_drop`` would."""
    rng = np.random.default_rng(11)
    for trial in range(5):
        ratings = {"random": 0.0, **{f"s{i}": float(x) for i, x in
                                     enumerate(rng.uniform(-200, 900, 6))}}
        lad = Ladder()
        for name in ratings:
            lad.add_player(name, "snapshot", spec="x", order=ratings[name])
        names = list(ratings)
        for _ in range(10):
            a, b = rng.choice(len(names), 2, replace=False)
            lad.add_games(names[a], names[b], *rng.integers(0, 8, 3))
        for name in names[1:]:  # all rated
            lad.add_games(name, "random", 1, 0, 1)
        fit = lad.refit()
        gains = {(a, b): variance_drop(fit, a, b, 10)
                 for i, a in enumerate(names) for b in names[i + 1:]}
        assert lad.next_pair(10) == max(gains, key=gains.get), trial
