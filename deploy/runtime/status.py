"""The status of a run: one frozen dataclass, built from the run's merged metrics.

Every run prints it as its progress line; the run's driver serves it on its run server
(``/api/status``, ``deploy/dashboard/``) to ``zeroforge status`` (text or ``--json``),
``top`` and the dashboard (the distributed driver's copy comes from the Ray controller).
The JSON form's keys, what each means and the version that added it: docs/status.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zeroforge.shared import metrics

WORKER_PAGE = 100
"""Rows of one page of per-worker detail (``zeroforge status --workers PAGE``,
``/api/workers``): status itself has a row per host."""


def page_of(items: Sequence[Any], page: int, page_size: int = WORKER_PAGE
            ) -> tuple[list[Any], int]:
    """The items of page ``page`` (from 0; past the last: none) and how many pages there
    are (at least one). ValueError for a page below 0 or a size below 1."""
    if page < 0 or page_size < 1:
        raise ValueError(f"worker rows: page must be >= 0 and page_size >= 1, got {page}, "
                         f"{page_size}")
    return list(items[page * page_size:(page + 1) * page_size]), max(
        1, -(-len(items) // page_size))


@dataclass(frozen=True)
class RunStatus:
    """A run's state and counters at one moment (see the module docstring for fields)."""

    run_id: str
    state: str
    elapsed_s: float
    stopped_by: str = ""
    inference: str = "local"
    desired: dict[str, int] = field(default_factory=dict)
    alive: dict[str, int] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    games: float = 0.0
    positions: float = 0.0
    games_received: float = 0.0
    learner_steps: float = 0.0
    samples_per_insert: float = 0.0
    weights_version: float = 0.0
    stream_lag: float = 0.0
    replay_positions: float = 0.0
    rejected: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    losses: dict[str, float] = field(default_factory=dict)
    metrics_url: str = ""
    actor_states: dict[str, dict[str, int]] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    error: str = ""
    lost: dict[str, float] = field(default_factory=dict)
    actors: list[dict[str, Any]] = field(default_factory=list)
    throttled_s: dict[str, float] = field(default_factory=dict)
    stream_writes: dict[str, float] = field(default_factory=dict)
    replay_by_size: dict[str, float] = field(default_factory=dict)
    batches_by_size: dict[str, float] = field(default_factory=dict)
    best_snapshot: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_metrics(cls, merged: Mapping, received_before: float | None = None,
                     **fields: Any) -> RunStatus:
        """The counters from a merged metrics snapshot (``shared.metrics.merge``); the
        rest (run_id, state, elapsed_s, actor counts...) from ``fields``.

        ``received_before``: games the learner had received before this run (its resumed
        checkpoint's); given, ``games`` is at least the games received in this run (see
        the module docstring); None, ``games`` is the workers' count alone."""
        v = metrics.value
        games = metrics.total(merged, "selfplay_games_total", worker_kind="selfplay")
        if received_before is not None:
            games = max(games, v(merged, "learner_games_received_total") - received_before)
        values = merged["values"]

        def by(name: str, label: str) -> dict[str, float]:
            # Every series key carries all its metric's labels (Registry checks them).
            return {dict(k)[label]: val for k, val in values.get(name, {}).items()}

        return cls(
            games=games,
            positions=metrics.total(merged, "selfplay_positions_total", worker_kind="selfplay"),
            games_received=v(merged, "learner_games_received_total"),
            learner_steps=v(merged, "learner_steps_total"),
            samples_per_insert=v(merged, "learner_samples_per_insert"),
            weights_version=v(merged, "weights_version", component="learner"),
            stream_lag=v(merged, "stream_lag_entries"),
            replay_positions=v(merged, "replay_window_positions"),
            rejected=by("rejected_entries_total", "reason"),
            scores=by("evaluator_score_ratio", "anchor"),
            losses=by("learner_loss", "part"),
            replay_by_size=by("replay_window_positions_by_size", "board_size"),
            batches_by_size=by("learner_batches_by_size_total", "board_size"),
            best_snapshot=_best_snapshot(merged),
            throttled_s={
                "selfplay": metrics.total(merged, "selfplay_throttled_seconds_total",
                                          worker_kind="selfplay"),
                "learner": v(merged, "learner_throttled_seconds_total")},
            stream_writes={
                key: metrics.total(merged, name, worker_kind="selfplay")
                for key, name in (("backpressure_s", "selfplay_backpressure_seconds_total"),
                                  ("resent", "selfplay_games_resent_total"),
                                  ("rerouted", "selfplay_games_rerouted_total"))},
            **fields)

    def to_json(self) -> dict[str, Any]:
        """Plain data with the keys documented above: ``dataclasses.asdict``'s result,
        made by hand with shallow copies (every field is a scalar, a flat dict, a dict of
        flat dicts or a list of flat dicts), since asdict's recursive deep copy took most
        of a status call with a thousand actor rows."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, dict):
                value = {k: dict(v) if isinstance(v, dict) else v for k, v in value.items()}
            elif isinstance(value, list):
                value = [dict(row) for row in value]
            out[name] = value
        return out

    def json_text(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunStatus:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def progress_line(self) -> str:
        """One line for the terminal of a running job (local or distributed)."""
        elapsed = max(self.elapsed_s, 1e-9)
        workers = ""
        if "selfplay" in self.desired:
            pending = self.actor_states.get("selfplay", {}).get("pending", 0)
            waits = self.waiting.get("selfplay", "")
            workers = (f"workers {self.alive.get('selfplay', 0)}/{self.desired['selfplay']} "
                       + (f"({pending} pending: {waits}) " if pending and waits
                          else f"({pending} pending) " if pending else "") + "| ")
        loss = (f"loss {self.losses['total']:.3f} (p {self.losses.get('policy', 0):.3f} "
                f"v {self.losses.get('value', 0):.3f})" if "total" in self.losses else "loss -")
        scores = " ".join(f"{k} {v:.0%}" for k, v in self.scores.items()) or "-"
        return (f"[{self.elapsed_s:7.1f}s] {workers}games {self.games:.0f} "
                f"({self.games / elapsed:.1f}/s) | positions/s {self.positions / elapsed:.0f} | "
                f"steps {self.learner_steps:.0f} | {loss} | weights v{self.weights_version:.0f} "
                f"| backlog {self.stream_lag:.0f} | score vs {scores}")

    def text(self) -> str:
        """The multi-line form ``zeroforge status`` prints."""
        lines = [f"run {self.run_id}: {self.state}, {self.elapsed_s:.0f}s, "
                 f"inference {self.inference}"]
        if self.error:
            lines.append(f"error: {self.error}")
        if self.desired:
            lines.append("actors (alive/desired, restarts): " + ", ".join(
                f"{k} {self.alive.get(k, 0)}/{n} ({self.restarts.get(k, 0)})"
                for k, n in self.desired.items()))
        others = {k: {s: n for s, n in states.items() if s != "alive" and n}
                  for k, states in self.actor_states.items()}
        if any(others.values()):
            lines.append("not running: " + ", ".join(
                f"{k} " + " ".join(f"{n} {s}" for s, n in states.items())
                for k, states in others.items() if states))
        for kind, why in self.waiting.items():
            lines.append(f"pending {kind}: {why}")
        rate = self.positions / max(self.elapsed_s, 1e-9)
        lines.append(f"self-play: {self.games:.0f} games, {self.positions:.0f} positions "
                     f"({rate:.0f}/s)")
        lines.append(f"learner: {self.learner_steps:.0f} steps, {self.games_received:.0f} "
                     f"games received, samples/insert {self.samples_per_insert:.2f}, replay "
                     f"{self.replay_positions:.0f} positions, weights v{self.weights_version:.0f}")
        if self.replay_by_size:
            lines.append("board sizes: " + ", ".join(
                f"{k}x{k} {n:.0f} positions ({self.batches_by_size.get(k, 0):.0f} batches)"
                for k, n in sorted(self.replay_by_size.items(), key=lambda kv: int(kv[0]))))
        if self.losses:
            lines.append("loss: " + ", ".join(f"{k} {v:.3f}" for k, v in self.losses.items()))
        if self.throttled_s:
            lines.append(f"throttled (samples per insert): self-play "
                         f"{self.throttled_s.get('selfplay', 0.0):.1f} s over all workers, "
                         f"learner {self.throttled_s.get('learner', 0.0):.1f} s")
        writes = self.stream_writes
        full = (f"self-play waited {writes.get('backpressure_s', 0.0):.1f} s for room (stream "
                f"full), games resent {writes.get('resent', 0):.0f}, rerouted "
                f"{writes.get('rerouted', 0):.0f}; ") if writes else ""
        lines.append(f"stream backlog: {self.stream_lag:.0f} entries not yet acknowledged; "
                     f"{full}rejected: " + (", ".join(f"{k} {v:.0f}" for k, v in
                                               self.rejected.items() if v) or "none"))
        if self.scores:
            lines.append("scores: " + ", ".join(f"{k} {v:.0%}" for k, v in self.scores.items()))
        if self.best_snapshot:
            b = self.best_snapshot
            lines.append(f"best snapshot: v{b['version']:.0f}, ladder Elo {b['elo']:.0f} "
                         f"(95% {b['low']:.0f}..{b['high']:.0f}), in RUN_DIR/best.safetensors")
        for row in self.actors:
            hosts = (f" ({row['workers']} workers; `zeroforge status --workers 0` lists them)"
                     if row.get("workers", 1) > 1 else "")
            lines.append(f"  {row.get('kind', '?')} {row.get('index', 0)}: "
                         f"{row.get('state', '?')} on {row.get('node') or '?'} "
                         f"pid {row.get('pid') or '-'}{hosts}")
        lines.append(f"metrics: {self.metrics_url or '-'}")
        return "\n".join(lines)


def _best_snapshot(merged: Mapping) -> dict[str, float]:
    """``{version, elo, low, high}`` of ``RUN_DIR/best.safetensors`` (the evaluator's
    ``evaluator_best_snapshot_*``); {} before the first evaluation names one."""
    values = merged["values"]
    if not values.get("evaluator_best_snapshot_version"):
        return {}
    bounds = {dict(k)["bound"]: v
              for k, v in values.get("evaluator_best_snapshot_elo", {}).items()}
    return {"version": metrics.value(merged, "evaluator_best_snapshot_version"),
            "elo": bounds.get("estimate", 0.0), "low": bounds.get("low", 0.0),
            "high": bounds.get("high", 0.0)}

