"""The producer's window of recent appends (``shared/transport/recent_appends.py``) on a
fake clock: what it keeps, what it owes after a restart, and that threads owe it once."""

from __future__ import annotations

import threading

from zeroforge.shared.transport import RecentAppends


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def blobs(*names: str) -> list[bytes]:
    return [n.encode() for n in names]


def test_the_window_is_the_last_seconds_before_the_newest_append():
    clock = Clock()
    recent = RecentAppends(window_s=5.0, clock=clock)
    recent.appended("srv-a", ["1-0", "1-1"], blobs("a", "b"), 0)
    clock.now += 4.0
    recent.appended("srv-a", ["2-0"], blobs("c"), 0)
    clock.now += 60.0  # the server down a minute: nothing appended, nothing forgotten
    recent.restarted("srv-b", lambda ids: [1, 2, 3], "s")
    assert recent.take_owed() == blobs("a", "b", "c")
    assert recent.server == "srv-b"

    clock.now += 1.0
    recent.appended("srv-b", ["3-0"], blobs("d"), 0)
    clock.now += 5.5  # "d" is now older than the window before the newest append
    recent.appended("srv-b", ["4-0"], blobs("e"), 0)
    recent.restarted("srv-c", lambda ids: list(range(1, len(ids) + 1)), "s")
    assert recent.take_owed() == blobs("e")


def test_only_what_the_stream_lacks_is_owed_and_given_back_in_order():
    recent = RecentAppends(window_s=5.0, clock=Clock())
    recent.appended("srv-a", ["1-0", "1-1", "1-2"], blobs("a", "b", "c"), 0)
    asked = []
    recent.restarted("srv-b", lambda ids: asked.append(ids) or [2], "s")
    assert asked == [["1-0", "1-1", "1-2"]]
    owed = recent.take_owed()
    assert owed == blobs("b") and recent.take_owed() == []
    recent.give_back(owed)  # that append wrote nothing
    assert recent.take_owed() == blobs("b")
    recent.appended("srv-b", ["9-0", "9-1"], blobs("b", "x"), 1)
    assert recent.resent == 1


def test_a_failed_check_owes_the_whole_window():
    recent = RecentAppends(window_s=5.0, clock=Clock())
    recent.appended("srv-a", ["1-0", "1-1"], blobs("a", "b"), 0)

    def unreachable(ids: list[str]) -> list[int]:
        raise ConnectionError("gone again")

    recent.restarted("srv-b", unreachable, "s")
    assert recent.take_owed() == blobs("a", "b")


def test_threads_that_meet_the_same_restart_owe_its_games_once():
    recent = RecentAppends(window_s=5.0, clock=Clock())
    recent.appended("srv-a", ["1-0", "1-1"], blobs("a", "b"), 0)
    start = threading.Barrier(8)

    def meet() -> None:
        start.wait()
        recent.restarted("srv-b", lambda ids: [1, 2], "s")

    threads = [threading.Thread(target=meet) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert recent.take_owed() == blobs("a", "b")


def test_the_first_append_learns_the_server_and_checks_nothing():
    recent = RecentAppends(window_s=5.0, clock=Clock())
    assert recent.server == ""  # the script answers its own run id
    recent.appended("srv-a", ["1-0"], blobs("a"), 0)
    assert recent.server == "srv-a"
    recent.restarted("srv-a", lambda ids: [1], "s")  # the same server: nothing owed
    assert recent.take_owed() == []
