"""Build the Grafana dashboard ``zeroforge.json`` from a plain list of panels.

Run ``python -m zeroforge.deploy.monitoring.build_dashboard`` after changing a panel: it rewrites
``deploy/monitoring/zeroforge.json`` next to this file (a test checks the committed JSON
equals what this builds, and that every panel's query returns data from a real run scraped
by a real Prometheus). Each panel is a title, a unit and its PromQL queries; every query
selects the run with the ``$instance`` variable and reads through the ``$datasource``
variable, so the file imports into any Grafana without editing.

No dashboard library: the panels are a few dicts in Grafana's JSON model (schema 39), which
keeps the dependency list short and the queries in plain sight.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zeroforge.shared.metrics import CATALOGUE, PREFIX

OUT = Path(__file__).with_name("zeroforge.json")
RUN = '{instance=~"$instance"}'
"""Selector of every series: the run picked in the dashboard's ``instance`` variable."""
RATE = "$__rate_interval"


def m(name: str, labels: str = "") -> str:
    """The series selector of metric ``name`` (a CATALOGUE name, or its ``_bucket``,
    ``_sum``, ``_count`` part) with extra label matchers ``labels``."""
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    if base not in CATALOGUE:
        raise KeyError(f"dashboard: metric {base!r} is not in shared/metrics.py CATALOGUE")
    inner = 'instance=~"$instance"' + (f", {labels}" if labels else "")
    return f"{PREFIX}{name}{{{inner}}}"


def rate(name: str, labels: str = "") -> str:
    return f"rate({m(name, labels)}[{RATE}])"


def quantile(q: float, name: str, by: str) -> str:
    return (f"histogram_quantile({q}, sum by ({by}, le) "
            f"({rate(name + '_bucket')}))")


@dataclass(frozen=True)
class Query:
    """One line (or set of lines) of a panel."""

    expr: str
    """PromQL."""
    legend: str = ""
    """Grafana legend format (``{{label}}`` placeholders)."""


@dataclass(frozen=True)
class Panel:
    """One time-series panel."""

    title: str
    """Panel title (docs/metrics.md names panels by it)."""
    queries: tuple[Query, ...]
    """Its PromQL queries."""
    unit: str = "short"
    """Grafana unit of the y axis."""
    description: str = ""
    """Hover text: what the panel shows and how to read it."""
    gpu: bool = False
    """Has data only on nodes with an NVIDIA GPU."""


@dataclass(frozen=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)


def Q(expr: str, legend: str = "") -> Query:  # noqa: N802 - reads like a constructor
    return Query(expr, legend)


ROWS: tuple[Row, ...] = (
    Row("Actors", (
        Panel("Actors alive / desired", (
            Q(f"sum by (kind) ({m('actors_alive')})", "alive {{kind}}"),
            Q(f"sum by (kind) ({m('actors_desired')})", "desired {{kind}}")),
            description="Actors alive against those the controller wants, by kind."),
        Panel("Actor restarts", (
            Q(f"sum by (kind) ({m('actor_restarts_total')})", "{{kind}}"),),
            description="Actors replaced after they died (cumulative), by kind."),
        Panel("Actors per node", (
            Q(f"count by (node, kind) ({m('actor_memory_bytes')})", "{{node}} {{kind}}"),),
            description="Where the scheduler placed the actors (node = short Ray node id)."),
    )),
    Row("Self-play", (
        Panel("Self-play positions/s", (
            Q(f"sum({rate('selfplay_positions_total')})", "total"),
            Q(f"sum by (worker) ({rate('selfplay_positions_total')})", "worker {{worker}}")),
            unit="ops"),
        Panel("Self-play games/s", (
            Q(f"sum({rate('selfplay_games_total')})", "total"),
            Q(f"sum by (worker) ({rate('selfplay_games_total')})", "worker {{worker}}")),
            unit="ops"),
        Panel("Simulations/s", (
            Q(f"sum({rate('selfplay_simulations_total')})", "total"),
            Q(f"sum by (worker) ({rate('selfplay_simulations_total')})",
              "worker {{worker}}")), unit="ops"),
        Panel("Weights delivery p50 / p99", (
            Q(f"histogram_quantile(0.5, sum by (le) ({rate('weights_delivery_seconds_bucket')}))",
              "p50"),
            Q(f"histogram_quantile(0.99, sum by (le) "
              f"({rate('weights_delivery_seconds_bucket')}))", "p99")), unit="s",
            description="A weights publish to a self-play worker or an inference server "
                        "having the blob (workers poll every 2 s, servers hear an "
                        "announcement; bucket bounds)."),
        Panel("Network evaluations/s", (
            Q(f"sum by (source) ({rate('nn_evaluations_total')})", "{{source}}"),),
            unit="ops",
            description="Positions evaluated by a network: in the workers' own nets (local) "
                        "or by inference servers (server)."),
    )),
    Row("Inference servers", (
        Panel("Inference evaluations/s", (
            Q(f"sum by (server) ({rate('inference_batch_size_sum')})", "server {{server}}"),),
            unit="ops", description="Positions evaluated per second, by server."),
        Panel("Batch fill", (
            Q(f"sum by (server) ({rate('inference_batch_fill_ratio_sum')}) / sum by (server) "
              f"({rate('inference_batch_fill_ratio_count')})", "server {{server}}"),),
            unit="percentunit",
            description="Mean positions per network call / inference.max_batch."),
        Panel("Requests per network call", (
            Q(f"sum by (server) ({rate('inference_requests_total')}) / sum by (server) "
              f"({rate('inference_batch_size_count')})", "server {{server}}"),),
            description="Workers' leaf batches merged into one network call."),
        Panel("Request latency p50 / p99", (
            Q(quantile(0.5, "inference_request_latency_seconds", "server"),
              "p50 server {{server}}"),
            Q(quantile(0.99, "inference_request_latency_seconds", "server"),
              "p99 server {{server}}")), unit="s",
            description="Arrival of a request at its server to its answer."),
        Panel("Queue depth", (
            Q(f"sum by (server) ({rate('inference_queue_depth_sum')}) / sum by (server) "
              f"({rate('inference_queue_depth_count')})", "server {{server}}"),),
            description="Mean requests queued when a server forms a batch (taken and "
                        "left): above 1, workers' batches in flight are waiting for it."),
        Panel("Queue wait p50 / p99", (
            Q(quantile(0.5, "inference_queue_wait_seconds", "server"), "p50 server {{server}}"),
            Q(quantile(0.99, "inference_queue_wait_seconds", "server"),
              "p99 server {{server}}")), unit="s"),
    )),
    Row("Learner", (
        Panel("Learner steps/s", (
            Q(f"sum({rate('learner_steps_total')})", "steps"),
            Q(f"sum({rate('learner_steps_redone_total')})", "steps redone")), unit="ops",
            description="SGD steps per second; redone: steps taken again after a restart."),
        Panel("Samples per insert", (
            Q(f"max({m('learner_samples_per_insert')})", "actual"),
            Q(f"max({m('learner_samples_per_insert_target')})", "target"),
            Q(f"max({m('learner_samples_per_insert_floor')})", "floor")),
            description="Positions trained per position inserted so far, against "
                        "learner.samples_per_insert (the learner waits for data, so actual "
                        "stays at or below target) and the floor below which self-play "
                        "waits for the learner (target x (1 - "
                        "learner.samples_per_insert_tolerance))."),
        Panel("Time throttled per side", (
            Q(f"sum by (worker) ({rate('selfplay_throttled_seconds_total')})",
              "worker {{worker}}"),
            Q(f"sum by (worker) ({rate('selfplay_backpressure_seconds_total')})",
              "worker {{worker}}, stream full"),
            Q(f"sum({rate('learner_throttled_seconds_total')})", "learner")),
            unit="percentunit",
            description="Share of the time each side waited for the other: a self-play "
                        "worker while the learner's samples per insert was below its "
                        "floor, or while its appends waited for room in a full stream "
                        "(stream full: the learner behind on reading), the learner while "
                        "it was at its target."),
        Panel("Loss", (
            Q(f"max by (part) ({m('learner_loss')})", "{{part}}"),),
            description="The last step's loss: total, policy, value."),
        Panel("Learner intake/s", (
            Q(f"sum({rate('learner_games_received_total')})", "games"),
            Q(f"sum({rate('learner_positions_received_total')})", "positions"),
            Q(f"sum({rate('learner_samples_trained_total')})", "samples trained"),
            Q(f"sum({rate('learner_games_received_again_total')})", "games again"),
            Q(f"sum({rate('learner_positions_received_again_total')})", "positions again"),
            Q(f"sum({rate('learner_samples_redone_total')})", "samples redone")), unit="ops",
            description="What the learner takes from the stream and trains on; 'again' and "
                        "'redone': work repeated after a learner restart."),
        Panel("Replay window", (
            Q(f"max({m('replay_window_positions')})", "positions"),)),
        Panel("Stream backlog", (
            Q(f"max({m('stream_lag_entries')})", "entries"),),
            description="Entries written but not yet acknowledged; it saw-tooths because "
                        "the learner acknowledges after each checkpoint."),
        Panel("Stream writes redone/s", (
            Q(f"sum({rate('selfplay_games_resent_total')})", "resent"),
            Q(f"sum({rate('selfplay_games_rerouted_total')})", "rerouted")), unit="ops",
            description="Games self-play appended again because a restarted Redis had "
                        "lost them (resent), or to another stream shard than their own "
                        "because theirs refused them (rerouted): zero in a healthy run."),
        Panel("Rejected entries/s by reason", (
            Q(f"sum by (reason) ({rate('rejected_entries_total')})", "{{reason}}"),),
            unit="ops"),
        Panel("Weights version", (
            Q(f"max by (component) ({m('weights_version')})", "{{component}}"),
            Q(f"max({m('evaluator_weights_version')})", "last evaluated"))),
        Panel("Policy lag p50 / p99", (
            Q(quantile(0.5, "learner_policy_lag_versions", "instance"), "p50"),
            Q(quantile(0.99, "learner_policy_lag_versions", "instance"), "p99")),
            description="Versions behind the learner's newest that the games arriving now "
                        "were played with."),
    )),
    Row("Evaluator", (
        Panel("Score per anchor", (
            Q(f"max by (anchor) ({m('evaluator_score_ratio')})", "{{anchor}}"),),
            unit="percentunit",
            description="(wins + draws/2) / games of the newest weights; 50% against "
                        "minimax in tic-tac-toe is perfect play."),
        Panel("Elo vs anchor", (
            Q(f"max by (anchor) ({m('evaluator_elo_vs_anchor')})", "{{anchor}}"),),
            description="Elo difference implied by the score, clipped to +-800."),
    )),
    Row("Nodes", (
        Panel("Node CPU", (
            Q(f"max by (node) ({m('node_cpu_utilisation_ratio')})", "{{node}}"),),
            unit="percentunit"),
        Panel("Node memory", (
            Q(f"max by (node) ({m('node_memory_used_bytes')})", "used {{node}}"),
            Q(f"max by (node) ({m('node_memory_total_bytes')})", "total {{node}}")),
            unit="bytes"),
        Panel("Actor CPU", (
            Q(f"sum by (kind, actor) ({rate('actor_cpu_seconds_total')})",
              "{{kind}} {{actor}}"),), unit="percentunit",
            description="CPU seconds per second of each actor's process (1 = one core)."),
        Panel("Actor memory", (
            Q(f"sum by (kind, actor) ({m('actor_memory_bytes')})", "{{kind}} {{actor}}"),),
            unit="bytes"),
        Panel("GPU utilisation", (
            Q(f"max by (node, gpu) ({m('node_gpu_utilisation_ratio')})",
              "{{node}} gpu {{gpu}}"),), unit="percentunit", gpu=True),
        Panel("GPU memory", (
            Q(f"max by (node, gpu) ({m('node_gpu_memory_used_bytes')})",
              "{{node}} gpu {{gpu}}"),), unit="bytes", gpu=True),
    )),
)
"""The dashboard, row by row."""

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_WIDTH, _HEIGHT, _PER_ROW = 8, 8, 3


def panels() -> list[Panel]:
    """Every panel, in order."""
    return [p for row in ROWS for p in row.panels]


def _panel_json(panel: Panel, ident: int, x: int, y: int) -> dict:
    return {
        "id": ident,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": _HEIGHT, "w": _WIDTH, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit,
                                     "custom": {"drawStyle": "line", "lineWidth": 1,
                                                "fillOpacity": 0, "showPoints": "never",
                                                "spanNulls": True}},
                        "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom",
                               "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": q.expr,
                     "legendFormat": q.legend, "range": True}
                    for i, q in enumerate(panel.queries)],
    }


def build() -> dict:
    """The dashboard as Grafana's JSON model."""
    out: list[dict] = []
    y, ident = 0, 1
    for row in ROWS:
        out.append({"id": ident, "type": "row", "title": row.title, "collapsed": False,
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        ident, y = ident + 1, y + 1
        for i, panel in enumerate(row.panels):
            out.append(_panel_json(panel, ident, (i % _PER_ROW) * _WIDTH,
                                   y + (i // _PER_ROW) * _HEIGHT))
            ident += 1
        y += -(-len(row.panels) // _PER_ROW) * _HEIGHT
    return {
        "title": "zeroforge",
        "uid": "zeroforge",
        "description": "Throughput, learning and resources of a zeroforge run "
                       "(deploy/monitoring/README.md).",
        "tags": ["zeroforge"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "graphTooltip": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource",
             "query": "prometheus", "current": {}, "hide": 0, "refresh": 1,
             "options": [], "regex": "", "includeAll": False, "multi": False},
            {"name": "instance", "label": "Run (metrics endpoint)", "type": "query",
             "datasource": DATASOURCE,
             "query": {"query": f"label_values({PREFIX}learner_steps_total, instance)",
                       "refId": "instance"},
             "definition": f"label_values({PREFIX}learner_steps_total, instance)",
             "current": {}, "hide": 0, "refresh": 2, "options": [], "regex": "",
             "sort": 1, "includeAll": False, "multi": False},
        ]},
        "panels": out,
    }


def render() -> str:
    """The JSON text as committed (stable key order, trailing newline)."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else OUT
    target.write_text(render())
    print(f"wrote {target} ({len(panels())} panels)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
