"""Node hosts (``distributed.workers_per_host = 0``): new hosts sized to the nodes' free
room, live ones filled up to what they booked, and a scale on a fake cluster of 300 nodes
(``benchmarks/fake_cluster.py``) that keeps about a host a node and never runs a host
past its booking."""

from __future__ import annotations

from benchmarks.fake_cluster import FakeCluster, simulated_run
from zeroforge.deploy.ray.node_hosts import (
    WaitingHosts,
    fill_booked,
    new_host_sizes,
    node_room,
    too_big_to_place,
)


def _node(free_cpu: float, total_cpu: float, **extra: float) -> dict:
    return {"free": {"CPU": free_cpu, **extra}, "total": {"CPU": total_cpu, **extra}}


def test_a_node_holds_its_free_cpus_over_a_workers_share_and_its_resource_units():
    assert node_room(_node(7.5, 8), 1.0, "") == 7
    assert node_room(_node(8, 8), 0.5, "") == 16
    assert node_room(_node(8, 8, zf_selfplay=4), 1.0, "zf_selfplay") == 4
    assert node_room(_node(8, 8), 1.0, "zf_selfplay") == 0  # not a self-play node
    assert node_room(_node(2, 8), 1.0, "", kind="total") == 8


def test_new_hosts_take_the_largest_free_nodes_first_then_wait_in_node_sized_pieces():
    nodes = {"a": _node(3, 8), "b": _node(8, 8), "c": _node(0, 8)}
    assert new_host_sizes(5, nodes, 1.0, "") == [5]
    assert new_host_sizes(10, nodes, 1.0, "") == [8, 2]
    # 11 fit now (8 + 3); the other 14 wait in hosts of a whole node, 8
    assert new_host_sizes(25, nodes, 1.0, "") == [8, 3, 8, 6]
    # no node can ever hold a worker yet (an autoscaling group at zero nodes): hosts of 1
    assert new_host_sizes(3, {"head": _node(4, 4)}, 1.0, "zf_selfplay") == [1, 1, 1]


def test_spread_deals_the_workers_over_the_nodes_a_host_a_node():
    nodes = {"a": _node(3, 8), "b": _node(8, 8), "c": _node(0, 8)}
    assert new_host_sizes(2, nodes, 1.0, "", spread=True) == [1, 1]
    assert new_host_sizes(7, nodes, 1.0, "", spread=True) == [4, 3]
    # a fills at 3; b takes the rest of what fits; what does not waits node-sized
    assert new_host_sizes(13, nodes, 1.0, "", spread=True) == [8, 3, 2]
    bed = {"n1": _node(0, 0, zf_selfplay=4), "n2": _node(0, 0, zf_selfplay=4),
           "head": _node(2, 2)}
    # the multi-host bed: workers book no CPU, a zf_selfplay unit each
    assert new_host_sizes(2, bed, 0.0, "zf_selfplay", spread=True) == [1, 1]


def test_live_hosts_are_filled_up_to_their_booking_oldest_first():
    assert fill_booked([4, 4, 2], 7) == ([4, 3, 0], 0)
    assert fill_booked([4, 4], 11) == ([4, 4], 3)
    assert fill_booked([], 5) == ([], 5)


def _booked(controller) -> list[tuple[int, int]]:
    return [(s.workers, s.booked) for s in sorted(controller.slots["selfplay"],
                                                  key=lambda s: s.index) if not s.stopping]


def test_a_scale_keeps_a_host_a_node_and_no_host_past_its_booking():
    with simulated_run(2000, 300, 0, run_id="node-scale") as (controller, fake):
        assert len(_booked(controller)) == 286
        assert sum(w for w, _ in _booked(controller)) == 2000
        queries = fake.counts["node_queries"]
        controller.scale(workers=700)
        controller.tick()
        hosts = _booked(controller)
        assert sum(w for w, _ in hosts) == 700
        assert all(0 < w <= b for w, b in hosts)
        assert len(hosts) == 100  # the oldest, full; the newest retired, their CPUs freed
        assert fake.counts["node_queries"] == queries  # no new host: nodes not asked
        controller.scale(workers=1500)
        controller.tick()
        hosts = _booked(controller)
        assert sum(w for w, _ in hosts) == 1500
        assert all(0 < w <= b for w, b in hosts)
        assert len(hosts) <= 300
        # worker indexes stay unique across old and new hosts
        firsts = sorted((s.first, s.booked) for s in controller.slots["selfplay"]
                        if not s.stopping)
        assert all(a + n <= b for (a, n), (b, _) in zip(firsts, firsts[1:], strict=False))


def test_a_waiting_host_too_big_for_any_node_is_planned_anew_when_some_have_room():
    nodes = {"a": _node(1, 4), "b": _node(2, 4)}
    # workers of 2 CPUs: a holds none, b one; a waiting host of 2 fits nowhere
    assert too_big_to_place([2], nodes, 2.0, "") == [0]
    # no node holds even one: nothing to gain from planning anew
    assert too_big_to_place([2], {"a": _node(1, 4)}, 2.0, "") == []
    # the run's other unplaced actors are about to take b's room first
    assert too_big_to_place([2], nodes, 2.0, "", {"CPU": 2.0}) == []
    # a waiting host that fits b takes it (Ray places it): the one of 2 is left alone
    assert too_big_to_place([2, 1], nodes, 2.0, "") == []
    big = {"a": _node(2, 4), "b": _node(4, 4)}
    assert too_big_to_place([2, 3], big, 1.0, "") == []  # each fits a node: Ray's to place
    assert too_big_to_place([3, 5], big, 1.0, "") == [1]  # 3 takes b, a still holds 2


def test_waiting_hosts_are_made_anew_to_fit_a_node_that_came_with_room_for_some():
    """As with an autoscaler: the workers no node held wait in node-sized hosts; a node
    comes with room for some of them but not for a whole waiting host. Those too big are
    killed (never placed, nothing played) and planned again: a host that fits the room,
    the rest waiting; then nothing changes while no more room comes. (The fake cluster
    never places a waiting actor by itself: what fits goes only to new hosts.)"""
    fake = FakeCluster(1, 6.0, 0, head_cpus=0.0)
    with simulated_run(2, 1, 0, fake=fake, run_id="refit") as (controller, _):
        controller._waiting = WaitingHosts(every_s=0.0)
        # the learner, the evaluator and a host of 2 leave half a CPU: 2 more fit, 10 wait
        controller.scale(workers=14)
        waiting = [a for a in fake.selfplay() if a.state == "PENDING_CREATION"]
        assert sorted(a.count for a in waiting) == [4, 6]  # a whole node's 6, and the rest
        fake.total["new"] = fake.free["new"] = 3.0  # room for 3: neither waiting host fits
        controller.tick()
        # seen waiting at one check only: Ray may be placing them right now
        assert [a.state for a in waiting] == ["PENDING_CREATION"] * 2
        controller.tick()
        assert all(a.state == "DEAD" for a in waiting)  # killed, not left to be placed
        live = fake.selfplay()
        assert [a.count for a in live if a.node == "new"] == [3]
        assert sorted(a.count for a in live if a.state == "PENDING_CREATION") == [1, 6]
        assert sum(_booked_of(controller)) == 14
        before = [a.name for a in fake.selfplay()]
        controller.tick()
        assert [a.name for a in fake.selfplay()] == before  # no room: no churn


def _booked_of(controller) -> list[int]:
    return [s.workers for s in controller.slots["selfplay"] if not s.stopping]
