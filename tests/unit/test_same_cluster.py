"""``zeroforge status --address A --run-id R`` answers from the run's own server when the
registry's driver of R is on cluster A: which addresses name the same cluster."""

from __future__ import annotations

from zeroforge.deploy.commands import same_cluster


def test_one_cluster_by_ip_or_by_name_and_port():
    assert same_cluster("127.0.0.1:6390", "127.0.0.1:6390")
    assert same_cluster("127.0.0.1:6390", "localhost:6390")  # /etc/hosts resolves it


def test_another_port_host_or_form_is_another_cluster():
    assert not same_cluster("127.0.0.1:6390", "127.0.0.1:6391")
    assert not same_cluster("127.0.0.1:6390", "127.0.0.2:6390")
    assert not same_cluster("127.0.0.1:6390", "auto")
    assert not same_cluster("127.0.0.1:6390", "ray://127.0.0.1:10001")
    assert not same_cluster("", "127.0.0.1:6390")  # a local run records no address
    assert not same_cluster("127.0.0.1:6390", "no-such-host.invalid:6390")
