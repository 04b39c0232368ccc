"""The evaluator service: plays the newest published weights against fixed anchors.

A plain class (the distributed runtime wraps it in a Ray actor). Each ``run_once`` fetches
the newest weights from the run's weight store, if they are newer than the last ones
evaluated, and plays ``games`` games (colours alternating) against each anchor
(``random``, ``uct:N``, ``minimax`` ... see ``players.factory.make_player``) with the
trained agent: the run's search (PUCT, or Gumbel where ``search.gumbel`` says so) with
its net, no noise, most-visited move (Gumbel: the sequential-halving winner).

The "best" anchor
    Besides the fixed anchors the newest weights play the best weights so far (AlphaGo
    Zero's gating). The first weights evaluated become the best without a match; later
    ones replace it when they score more than ``best_threshold`` (default 0.55, AlphaGo
    Zero's 55 %) against it. Two deterministic searchers would play the same two games
    over and over, so in this match both sides pick their first ``opening_moves`` moves in
    proportion to visit counts (temperature 1) and play the most-visited move after that.
    The best weights live under ``zf:{RUN}:eval:best`` (``EvalResultsStore``), so a
    restarted evaluator keeps gating against them after the weight store pruned them.

Results go to the metrics (``evaluator_score_ratio{anchor}``, ``evaluator_elo{anchor}``,
``evaluator_weights_version``), to ``results()`` and to ``zf:{RUN}:eval``. Elo is the
agent's advantage over the anchor, ±inf after a clean sweep either way.

With a run record (``record``) every game is also kept as SGF
(``RUN_DIR/games/eval/v<version>-<anchor>-<n>.sgf``, ``zeroforge.actors.game_records``) and every
match goes into the run's Elo ladder (``RUN_DIR/ladder.json``, ``players.ladder``): the
version as player ``v<version>``, the anchors under their specs, the gate match against
the best weights as ``v<version>`` against ``v<best>``. After each evaluation the ladder is
refitted and ``evaluator_ladder_elo{player,bound}`` gives the newest version's rating
(``player="latest"``) and each anchor's, with their 95 % intervals.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence

import numpy as np

from zeroforge.actors.best_snapshot import BestSnapshot
from zeroforge.actors.config import EvaluationConfig
from zeroforge.actors.game_records import RecordWriter, eval_writer
from zeroforge.shared.formats import StateDict, weights_from_bytes, weights_to_bytes
from zeroforge.shared.games import make_game
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.nets import InferenceConfig, NetConfig, TorchEvaluator, build_net
from zeroforge.shared.players import (
    Ladder,
    LadderError,
    MatchResult,
    MCTSPlayer,
    clipped_elo,
    ladder_path,
    load_ladder,
    locked,
    make_player,
    play_match,
    save_ladder,
)
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.run_files import RunFiles, keep_aside
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import (
    RefusedVersions,
    ResultsFormatError,
    Transport,
    TransportError,
    WeightsIntegrityError,
    verifier_for,
)

log = logging.getLogger(__name__)

BEST = "best"
"""Anchor label of the match against the best weights so far."""


class RatingService:
    """Evaluates each new weights version of a run against anchors and the best so far.

    ``anchors``/``games`` default to ``evaluation.anchors``/``evaluation.games``; the agent
    searches with ``evaluation.simulations`` simulations (0: the search section's number).
    ``weights_channel``: the run's weights channel it judges ("": self-play's;
    ``AVERAGE_CHANNEL`` when the learner keeps its average apart).
    Each evaluation is also appended to the run record (``RUN_DIR/eval.jsonl``) when
    ``record`` is given.
    """

    def __init__(self, ctx: RunContext, net: NetConfig, search: SearchConfig,
                 evaluation: EvaluationConfig, transport: Transport,
                 anchors: Sequence[str] | None = None, games: int | None = None, *,
                 best_threshold: float | None = None, opening_moves: int = 2,
                 seed: int | None = None, record: RunFiles | None = None,
                 weights_channel: str = "") -> None:
        self.anchors = tuple(evaluation.anchors if anchors is None else anchors)
        self.games = int(evaluation.games if games is None else games)
        if best_threshold is None:
            best_threshold = evaluation.best_threshold
        if self.games < 1:
            raise ValueError(f"RatingService: games must be >= 1, got {self.games}")
        if not 0.0 <= best_threshold <= 1.0:
            raise ValueError(f"RatingService: best_threshold must be in [0, 1], "
                             f"got {best_threshold}")
        if BEST in self.anchors:
            raise ValueError(f"RatingService: {BEST!r} is always played; do not list it")
        self.config = evaluation
        self.run_id = ctx.run_id
        self.record = record
        self.best_snapshot = BestSnapshot(record.run_dir) if record is not None else None
        """``RUN_DIR/best.safetensors``, the strongest version by the ladder (with a record)."""
        self.best_threshold = best_threshold
        self.opening_moves = opening_moves
        self.seed = ctx.seed if seed is None else seed
        self.game = make_game(ctx.game)
        self.search = search
        if evaluation.simulations:
            self.search = dataclasses.replace(search, num_simulations=evaluation.simulations)
        # Built once: a minimax anchor keeps its solved positions between evaluations.
        self._anchor_players = {spec: make_player(spec, self.game, search=self.search,
                                                  net_config=net)
                                for spec in self.anchors}
        model = build_net(net, self.game.spec)
        # One thread: the evaluator shares its machine with self-play and the learner.
        inference = InferenceConfig(device="cpu", num_threads=ctx.torch_threads or None)
        self._agent_eval = TorchEvaluator(model, config=inference)
        self._best_eval = TorchEvaluator(model, config=inference)
        self.recorder = Recorder()

        self.version = -1
        """Newest weights version evaluated (or skipped as unusable); -1 before any."""
        self.best_version: int | None = None
        self.bad_weights = 0
        """Versions that could not be fetched or loaded (logged, skipped)."""
        self.transport_errors = 0
        self.ladder_errors = 0
        """Ladder updates that failed (a corrupt ladder file, kept aside; an OS error)."""
        self.games_records: RecordWriter | None = (
            eval_writer(record.run_dir, self.game) if record is not None else None)
        self._results: dict = {}

        self.transport = transport
        # weights not signed by the run's learner are refused (ctx.weights_public_key)
        self.store = transport.weights(verifier=verifier_for(ctx.weights_public_key),
                                       channel=weights_channel)
        self._refused = RefusedVersions("evaluator", self.recorder, "evaluator")
        self.results_store = transport.results()
        self._started = time.monotonic()
        self._last_evaluation: float | None = None
        self._recover()

    # --- one evaluation --------------------------------------------------------------------
    def run_once(self) -> dict | None:
        """Evaluate the newest weights if they are newer than the last evaluated; returns
        the results, or None when there was nothing (usable) to evaluate."""
        try:
            got = self.store.fetch(newer_than=self.version)
        except WeightsIntegrityError as err:
            # Skip that version rather than fail on it at every call.
            self.bad_weights += 1
            self._refused.note(err, self.version)  # one line, counted
            latest = self.store.latest_version()
            if latest is not None:
                self.version = max(self.version, latest)
            return None
        if got is None:
            return None
        version, state_dict = got
        try:
            self._agent_eval.load_state_dict(state_dict, version)
        except (RuntimeError, ValueError, KeyError) as err:
            self.bad_weights += 1
            self.version = version
            log.warning("evaluator skips weights v%d: they do not fit the %s net (%s)",
                        version, self.game.spec.spec_string, str(err).splitlines()[0][:200])
            return None
        started = time.monotonic()
        rng = np.random.default_rng([self.seed, version])
        agent = MCTSPlayer(self.game, self._agent_eval, self.search, name=f"v{version}")
        matches = {spec: play_match(self.game, agent, player, self.games, rng)
                   for spec, player in self._anchor_players.items()}
        holder = self.best_version
        best = self._gate(version, state_dict, rng)
        if best is not None:
            matches[BEST] = best["match"]
        self.version = version
        # first: it may keep games/eval aside
        self._update_ladder(version, holder, matches, state_dict)
        self._keep_games(version, matches)
        self._results = {
            "run_id": self.run_id,
            "weights_version": version,
            "time": time.time(),
            "seconds": round(time.monotonic() - started, 3),
            "games_per_anchor": self.games,
            "simulations": self.search.num_simulations,
            "anchors": {spec: _summary(m) for spec, m in matches.items()},
            "best_version": self.best_version,
            "promoted": bool(best and best["promoted"]),
            "best_threshold": self.best_threshold,
        }
        self._record(version, matches)
        self.results_store.put(self._results)
        self._last_evaluation = time.monotonic()
        if self.record is not None:
            self.record.append_eval({
                **self._results, "elapsed_s": round(time.monotonic() - self._started, 1),
                "score": {spec: m.score for spec, m in matches.items()}})
        log.info("evaluated weights v%d in %.1f s: %s", version, self._results["seconds"],
                 " ".join(f"{k} {m.score:.2f}" for k, m in matches.items()))
        return self.results()

    def _gate(self, version: int, state_dict: StateDict, rng: np.random.Generator
              ) -> dict | None:
        """Play the best weights; promote ``version`` if it scores above the threshold.
        Returns None when there was no match (no best yet, or it is this version)."""
        if self.best_version is None:
            self._promote(version, state_dict)
            return None
        if self.best_version == version:
            return None
        challenger = MCTSPlayer(self.game, self._agent_eval, self.search, f"v{version}",
                                opening_moves=self.opening_moves)
        holder = MCTSPlayer(self.game, self._best_eval, self.search,
                            f"best-v{self.best_version}", opening_moves=self.opening_moves)
        match = play_match(self.game, challenger, holder, self.games, rng)
        promoted = match.score > self.best_threshold
        if promoted:
            self._promote(version, state_dict)
        return {"match": match, "promoted": promoted}

    def _promote(self, version: int, state_dict: StateDict) -> None:
        self._best_eval.load_state_dict(state_dict, version)
        self.best_version = version
        self.results_store.put_best(version, weights_to_bytes(state_dict))

    def _recover(self) -> None:
        """Pick up the best weights and last results of a previous incarnation."""
        self._export_best()
        try:
            best = self.results_store.best()
            if best is not None:
                version, blob = best
                self._best_eval.load_state_dict(weights_from_bytes(blob), version)
                self.best_version = version
            last = self.results_store.latest()
        except (ResultsFormatError, RuntimeError, ValueError) as err:
            # Unusable leftovers: start gating afresh rather than refuse to evaluate.
            log.warning("evaluator ignores stored results of run %s: %s", self.run_id,
                        str(err).splitlines()[0][:200])
            self.best_version = None
            return
        if last is not None and isinstance(last.get("weights_version"), int):
            self._results = last
            self.version = last["weights_version"]
            # Gauges show the last evaluation again rather than nothing until the next one.
            r = self.recorder
            for spec, summary in (last.get("anchors") or {}).items():
                if isinstance(summary, dict) and all(
                        isinstance(summary.get(k), int | float) for k in ("score", "elo")):
                    r.set("evaluator_score_ratio", summary["score"], anchor=spec)
                    r.set("evaluator_elo", summary["elo"], anchor=spec)
                    r.set("evaluator_elo_vs_anchor", clipped_elo(summary["elo"]),
                          anchor=spec)
            r.set("evaluator_weights_version", self.version)
            r.set("weights_version", self.version, component="evaluator")

    def _keep_games(self, version: int, matches: dict[str, MatchResult]) -> None:
        """Every game of this evaluation as SGF (``zeroforge.actors.game_records``)."""
        if self.games_records is None:
            return
        for spec, m in matches.items():
            for n, moves in enumerate(m.moves):
                black, white = ((m.player_a, m.player_b) if m.a_first[n]
                                else (m.player_b, m.player_a))
                self.games_records.write(
                    f"v{version}-{spec}-{n}", moves, black=black, white=white,
                    comment=f"evaluation of weights v{version} against {spec}, run "
                            f"{self.run_id}")

    def _update_ladder(self, version: int, holder: int | None,
                       matches: dict[str, MatchResult], weights: StateDict) -> None:
        """Add this evaluation's matches to the run's ladder, refit, save, export; the
        version's ``weights`` become ``best.safetensors`` if the refit ranks it best."""
        if self.record is None:
            return
        run_dir = self.record.run_dir
        me = f"v{version}"
        try:
            with locked(run_dir):
                try:
                    ladder = load_ladder(run_dir)
                except LadderError as err:
                    self.ladder_errors += 1
                    log.warning("evaluator starts a new ladder: %s", err)
                    ladder = Ladder()
                if ladder.run_id and ladder.run_id != self.run_id:
                    # An earlier run's ladder and records: its v<n> are other weights than
                    # ours (and our v<n>-... files would overwrite its).
                    kept = keep_aside(ladder_path(run_dir))
                    if self.games_records is not None:
                        keep_aside(self.games_records.directory)
                    log.info("evaluator: the ladder and evaluation games of run %s kept "
                             "aside as %s", ladder.run_id, kept)
                    ladder = Ladder()
                if not ladder.players:
                    ladder.anchor = ("random" if "random" in self.anchors or not self.anchors
                                     else self.anchors[0])
                ladder.run_id = self.run_id
                ladder.add_player(me, "version", order=version)
                for spec, m in matches.items():
                    if spec == BEST:
                        if holder is None or holder == version:
                            continue
                        other = ladder.add_player(f"v{holder}", "version", order=holder).name
                    else:
                        other = ladder.add_player(spec, "anchor", spec=spec).name
                    ladder.add_games(me, other, m.wins, m.draws, m.losses,
                                     m.effective_games)
                fit = ladder.refit()
                save_ladder(run_dir, ladder)
        except (OSError, ValueError, np.linalg.LinAlgError) as err:
            self.ladder_errors += 1
            log.warning("evaluator cannot update the ladder: %s", str(err).splitlines()[0])
            return
        r = self.recorder
        for label, name in [("latest", me), *((s, s) for s in self.anchors)]:
            if fit.rated(name):
                low, high = fit.interval(name)
                for bound, value in (("estimate", fit.elo[name]), ("low", low),
                                     ("high", high)):
                    r.set("evaluator_ladder_elo", value, player=label, bound=bound)
        if self.best_snapshot is not None:
            self.best_snapshot.consider(version, fit, weights)
            self._export_best()

    def _export_best(self) -> None:
        """The best snapshot's version and rating as metrics (``status``: best_snapshot)."""
        best = self.best_snapshot.record if self.best_snapshot is not None else None
        if best is None:
            return
        self.recorder.set("evaluator_best_snapshot_version", best["version"])
        for bound, key in (("estimate", "elo"), ("low", "low"), ("high", "high")):
            self.recorder.set("evaluator_best_snapshot_elo", best[key], bound=bound)

    def _record(self, version: int, matches: dict[str, MatchResult]) -> None:
        r = self.recorder
        for spec, m in matches.items():
            r.set("evaluator_score_ratio", m.score, anchor=spec)
            r.set("evaluator_elo", m.elo().elo, anchor=spec)
            r.set("evaluator_elo_vs_anchor", clipped_elo(m.elo().elo), anchor=spec)
        r.set("evaluator_weights_version", version)
        r.set("weights_version", version, component="evaluator")

    # --- loop and reporting ----------------------------------------------------------------
    def due(self) -> bool:
        """Whether ``evaluation.every_s`` has passed since the last evaluation (an
        evaluator that has not evaluated yet waits that long from its start, so the first
        weights worth measuring are not the random ones)."""
        every = self.config.every_s
        since = self._last_evaluation if self._last_evaluation is not None else self._started
        return bool(every) and time.monotonic() - since >= every

    def run(self, stop: threading.Event, interval_s: float | None = None) -> None:
        """``run_once`` every ``interval_s`` (default ``evaluation.every_s``, at least 1 s)
        until ``stop`` is set; transport failures are logged, counted and retried."""
        interval = max(self.config.every_s if interval_s is None else interval_s, 1.0)
        while not stop.is_set():
            try:
                self.run_once()
            except TransportError as err:
                self.transport_errors += 1
                log.warning("evaluation failed, retrying in %.0f s: %s", interval, err)
            stop.wait(interval)

    def results(self) -> dict:
        """The newest results (also stored under ``zf:{RUN}:eval``); {} before the first."""
        return dict(self._results)

    def stats(self) -> dict:
        """The metrics snapshot (``shared.metrics.Recorder.snapshot``)."""
        return self.recorder.snapshot()

    def game_ids(self) -> list[str]:
        return []

    def close(self) -> None:
        self.transport.close()


def _summary(match: MatchResult) -> dict:
    elo = match.elo()
    return {**match.counts(), "elo": elo.elo, "elo_low": elo.low, "elo_high": elo.high,
            "games": match.num_games}

