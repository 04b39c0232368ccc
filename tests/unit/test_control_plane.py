"""The controller's real code on a fake cluster of thousands of simulated actors
(``benchmarks/fake_cluster.py``, at the controller's one Ray seam ``ray_calls``): what it
keeps, fetches and asks per tick grows with the hosts of a run, not its workers; status
has a row per host and pages through the workers; a successor controller takes the run
over from the small state."""

from __future__ import annotations

import pytest

from benchmarks.control_plane import measure
from benchmarks.fake_cluster import simulated_run
from zeroforge.shared import metrics
from zeroforge.shared.transport import encode_control_state

NODES = 300


def _agents(slots: int) -> int:
    """Workers a host: a node's share of ``slots`` (one host a node)."""
    return -(-slots // NODES)


def test_state_ticks_and_calls_do_not_grow_with_the_workers() -> None:
    """600 and 2,000 workers on the same 300 nodes, one host a node: the state the driver
    fetches stays under 100 kB and the same size, and so do the Ray calls of a tick; a
    steady tick asks the GCS nothing."""
    small = measure(600, NODES, _agents(600), ticks=3)
    large = measure(2000, NODES, _agents(2000), ticks=3)
    assert small["hosts"] == 300 and large["hosts"] == 286
    for row in (small, large):
        assert row["state_bytes"] <= 100_000, row
        assert row["gcs_calls_per_tick"] == 0, row
    assert large["state_bytes"] <= 1.1 * small["state_bytes"], (small, large)
    assert large["ray_calls_per_tick"] <= small["ray_calls_per_tick"], (small, large)


def test_the_state_of_one_worker_per_actor_grows_with_the_actors() -> None:
    """The same measure tells the other shape apart: with one worker an actor the
    controller has an actor per worker, and its state grows with them (what the node
    agents are for)."""
    few = measure(200, NODES, 1, ticks=1)
    many = measure(800, NODES, 1, ticks=1)
    assert many["state_bytes"] > 3 * few["state_bytes"], (few, many)


def test_status_has_a_row_per_host_and_pages_through_the_workers() -> None:
    per = _agents(2000)
    with simulated_run(2000, NODES, per, run_id="rows") as (controller, fake):
        st = controller.status()
        rows = [r for r in st["actors"] if r["kind"] == "selfplay"]
        assert len(rows) == len(fake.selfplay()) == 286
        assert sum(r["workers"] for r in rows) == 2000
        total = metrics.total(controller.metrics.merged, "selfplay_games_total")
        assert sum(r["games"] for r in rows) == pytest.approx(total)
        first = controller.worker_rows(0)
        assert first["workers"] == 2000 and first["pages"] == 20
        assert [r["index"] for r in first["rows"]] == list(range(100))
        assert first["rows"][8]["host"] == 8 // per
        last = controller.worker_rows(19)
        assert [r["index"] for r in last["rows"]] == list(range(1900, 2000))
        assert controller.worker_rows(20)["rows"] == []
        with pytest.raises(ValueError, match="page must be >= 0"):
            controller.worker_rows(-1)


def test_a_successor_takes_over_from_the_small_state() -> None:
    """A controller dies; its successor adopts the live hosts from its last state. One
    host died while no controller watched: its games still count (under
    ``worker="ended"``), and the run's totals do not go back."""
    per = _agents(1200)
    with simulated_run(1200, NODES, per, run_id="takeover") as (first, fake):
        first.tick()
        state = first.controller_state()
        games = metrics.total(first.metrics.merged, "selfplay_games_total")
        assert len(encode_control_state(state)) <= 100_000
        lost = fake.selfplay()[5]
        lost_games = metrics.snapshot_total(lost._reply, "selfplay_games_total")
        lost.die()
    with simulated_run(1200, NODES, per, fake=fake, takeover=state,
                       run_id="takeover") as (second, _):
        second.tick()
        merged = second.metrics.merged
        assert second.restarts["selfplay"] == 1
        live = [s for s in second.slots["selfplay"] if not s.stopping]
        assert len(live) == 300  # 299 adopted, one replacing the lost host
        replacement = fake.selfplay()[-1]
        assert replacement.index == 300
        new_games = metrics.snapshot_total(replacement._reply, "selfplay_games_total")
        assert metrics.total(merged, "selfplay_games_total") == \
            pytest.approx(games + new_games)
        assert metrics.total(merged, "selfplay_games_total", worker="ended") == \
            pytest.approx(lost_games)
