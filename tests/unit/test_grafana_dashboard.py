"""The committed Grafana dashboard is the one build_dashboard.py builds, and imports."""

from __future__ import annotations

import json

from zeroforge.deploy.monitoring import build_dashboard


def test_committed_dashboard_equals_the_generated_one():
    committed = build_dashboard.OUT.read_text()
    assert committed == build_dashboard.render(), (
        "deploy/monitoring/zeroforge.json is stale: run "
        "`python -m zeroforge.deploy.monitoring.build_dashboard`")


def test_dashboard_reads_through_its_variables_and_has_the_issues_panels():
    board = json.loads(build_dashboard.OUT.read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in board["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert 'instance=~"$instance"' in t["expr"], (p["title"], t["expr"])
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
    titles = {p["title"] for p in panels}
    assert {"Actors alive / desired", "Actor restarts", "Actors per node",
            "Self-play positions/s", "Self-play games/s", "Simulations/s",
            "Inference evaluations/s", "Batch fill", "Requests per network call",
            "Request latency p50 / p99", "Learner steps/s", "Samples per insert", "Loss",
            "Replay window", "Stream backlog", "Stream writes redone/s",
            "Rejected entries/s by reason",
            "Weights version", "Policy lag p50 / p99", "Score per anchor", "Elo vs anchor",
            "Node CPU", "Node memory", "GPU utilisation", "GPU memory"} <= titles
    # panels do not overlap on Grafana's 24-column grid
    cells = set()
    for p in board["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))
