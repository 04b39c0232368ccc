"""``zeroforge top`` without a terminal or a run: the view drawn from plain data
(deploy/top/view.py), and the polling loop over a scripted source (deploy/top/app.py).
The real thing, a run watched in tmux, is tests/e2e/test_top_tmux.py."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.deploy.top import app, view


def _text(renderable, width: int = 140) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def _actor(kind: str, index: int, **counts: float) -> dict:
    return {"kind": kind, "index": index, "state": "alive", "node": "a1b2c3d4",
            "pid": 4000 + index, **counts}


def _status(state: str = "running", t: float = 10.0, scale: float = 1.0) -> RunStatus:
    return RunStatus(
        run_id="r-top", state=state, elapsed_s=t, weights_version=7,
        games=30 * scale, positions=300 * scale, learner_steps=50 * scale,
        losses={"total": 1.25, "policy": 1.0, "value": 0.25}, scores={"random": 0.9},
        actors=[_actor("selfplay", 0, games=10 * scale, positions=100 * scale),
                _actor("selfplay", 1, games=20 * scale, positions=200 * scale),
                _actor("learner", 0, steps=50 * scale),
                _actor("inference", 0, evaluations=1000 * scale)])


def _history(t: list[float], positions: list[list[float | None]], loss: list[float]) -> dict:
    series = {f'selfplay_positions_total{{worker="{w}",worker_kind="selfplay"}}': col
              for w, col in enumerate(positions)}
    series['selfplay_positions_total{worker="0",worker_kind="evaluator"}'] = [1e9] * len(t)
    series['learner_loss{part="total"}'] = loss
    return {"run_id": "r-top", "started": 0.0, "interval_s": 2.0, "t": t, "series": series}


def test_sparkline_scales_between_min_and_max_and_keeps_gaps():
    assert view.sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == "▁▂▃▄▅▆▇█"
    assert view.sparkline([5, None, 10], 8) == "▁ █"
    assert view.sparkline(list(range(100)), 4) == "▁▃▆█"  # the newest 4
    assert view.sparkline([3, 3], 5) == "▅▅" and view.sparkline([0, 0], 5) == "▁▁"
    assert view.sparkline([None, None], 4) == "  " and view.sparkline([], 4) == ""


def test_parse_key():
    assert view.parse_key('a_total{kind="x",worker="1"}') == ("a_total",
                                                               {"kind": "x", "worker": "1"})
    assert view.parse_key("weights_version") == ("weights_version", {})


def test_history_buffer_sums_workers_and_takes_rates_incrementally():
    buf = view.HistoryBuffer(keep=5)
    buf.extend(_history([0, 2, 4], [[0, 10, 30], [0, None, 50]], [2.0, 1.8, 1.6]))
    assert buf.since == 4
    # worker 1's gap at t=2 holds its last value (0); the evaluator's series is left out
    assert buf.counter_sum("selfplay_positions_total", worker_kind="selfplay") == [0, 10, 80]
    assert buf.rate("selfplay_positions_total", worker_kind="selfplay") == [None, 5.0, 35.0]
    # the next reply: only what is new (an old sample repeated is ignored); a worker that
    # went back to 0 (replaced) gives no rate for that sample instead of a negative one
    buf.extend(_history([4, 6, 8], [[30, 40, 60], [50, 0, 10]], [1.6, 1.5, 1.4]))
    assert buf.t == [0, 2, 4, 6, 8]
    assert buf.rate("selfplay_positions_total", worker_kind="selfplay") == [
        None, 5.0, 35.0, None, 15.0]
    assert buf.gauge("learner_loss", part="total") == [2.0, 1.8, 1.6, 1.5, 1.4]
    buf.extend(_history([10], [[70], [20]], [1.3]))
    assert buf.t == [2, 4, 6, 8, 10] and len(buf.gauge("learner_loss", part="total")) == 5


def test_rates_come_from_successive_polls_over_a_window():
    rates = view.Rates(window_s=5.0)
    rates.update(_status(scale=1).actors, now=100.0)
    assert rates.of(_actor("selfplay", 0)).value is None  # one poll: no rate yet
    rates.update(_status(scale=2).actors, now=102.0)
    assert rates.rate("selfplay", 0, "positions") == pytest.approx(50.0)  # +100 in 2 s
    assert rates.of(_actor("learner", 0)) == view.ActorRate(pytest.approx(25.0), "steps/s")
    assert rates.of(_actor("inference", 0)).unit == "evals/s"
    for i, now in enumerate((104.0, 106.0, 108.0), start=3):
        rates.update(_status(scale=i).actors, now=now)
    # the window slides: from the poll at 104 (scale 3) to 108 (scale 5)
    assert rates.rate("selfplay", 1, "positions") == pytest.approx(400 / 4)
    # a replacement actor starts from 0: its window restarts
    rates.update([_actor("selfplay", 1, positions=5)], now=109.0)
    assert rates.rate("selfplay", 1, "positions") is None
    assert rates.rate("selfplay", 0, "positions") is None  # gone from the rows: forgotten


def test_render_shows_header_actor_lines_totals_and_sparklines():
    rates = view.Rates()
    rates.update(_status(scale=1).actors, now=0.0)
    rates.update(_status(scale=3).actors, now=2.0)
    buf = view.HistoryBuffer()
    buf.extend(_history([0, 2, 4, 6], [[0, 10, 30, 60], [0, 0, 0, 0]], [2.0, 1.8, 1.9, 1.5]))
    text = _text(view.render(_status(scale=3), buf, rates, width=30))
    lines = text.splitlines()
    assert lines[0].split() == ["run", "r-top", "running", "elapsed", "0:00:10", "weights",
                                "v7", "loss", "1.250", "(policy", "1.000", "value", "0.250)"]
    assert "score vs random 90%" in text
    rows = {tuple(line.split()[:2]): line.split() for line in lines if line.split()}
    # kind, index, state, node, pid, rate, unit, then the counters this kind has
    assert rows[("selfplay", "0")] == ["selfplay", "0", "alive", "a1b2c3d4", "4000",
                                       "100", "pos/s", "30", "300"]
    assert rows[("selfplay", "1")][5:] == ["200", "pos/s", "60", "600"]
    assert rows[("learner", "0")][5:] == ["50.0", "steps/s", "150"]
    assert rows[("inference", "0")][5:] == ["1,000", "evals/s", "3,000"]
    # totals: the workers' rates added up; the run's counters; evaluations summed
    assert rows[("total", "4")] == ["total", "4", "300", "pos/s", "90", "900", "150", "3,000"]
    spark = {line.split()[0]: line.split() for line in lines
             if line.split() and line.split()[0] in ("positions/s", "games/s", "loss")}
    assert spark["positions/s"][1:3] == ["15", "▁▅█"]  # 5, 10, 15 pos/s
    assert spark["games/s"][1] == "-"  # no games series in this history
    assert spark["loss"][1:3] == ["1.500", "█▅▇▁"]
    assert "q or Ctrl-C to quit" in text


def test_render_before_any_actor_row_and_of_a_failed_run():
    st = RunStatus(run_id="r", state="failed", elapsed_s=3725.0, error="learner crashed")
    text = _text(view.render(st, view.HistoryBuffer(), view.Rates(), note="the run has ended"))
    assert "elapsed 1:02:05" in text and "loss -" in text
    assert "error: learner crashed" in text and "(no actor rows yet)" in text
    assert "the run has ended" in text and "q or Ctrl-C" not in text


class _Source:
    """Scripted replies of a run server (our own seam: app.StatusSource)."""

    def __init__(self, replies: list) -> None:
        self.replies = replies
        self.asked_since: list[float] = []

    def status(self) -> RunStatus:
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def history(self, since: float = 0.0) -> dict:
        self.asked_since.append(since)
        t = since + 2
        return _history([t], [[t * 10]], [1.0])


class _Keys:
    """Scripted key presses (app.Top only calls wait and uses it as a context)."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.entered = self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1

    def wait(self, timeout_s: float) -> str:
        return self.keys.pop(0) if self.keys else ""


def _top(source, keys, alive=True, final=None) -> tuple[app.Top, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None, force_terminal=False)
    return app.Top(source, "r-top", lambda: alive, lambda: final, interval_s=0.0,
                   console=console, keys=keys), out


def test_q_quits_and_polls_ask_only_for_new_history():
    keys = _Keys(["", "x", "q"])
    top, out = _top(_Source([_status()]), keys)
    assert top.run() == 0
    assert keys.entered == keys.exited == 1
    assert top.client.asked_since == [0.0, 2.0, 4.0]  # 3 polls: before, after "" and "x"
    assert "run r-top" in out.getvalue()


def test_the_run_ending_shows_its_final_state_and_exits():
    top, out = _top(_Source([_status(), _status(), _status("stopped", scale=2)]), _Keys([]))
    assert top.run() == 0 and top.note == "the run has ended"
    assert out.getvalue().rstrip().endswith(
        "run r-top stopped: 60 games, 100 learner steps, weights v7")


def test_server_gone_with_its_driver_reads_the_final_status():
    final = _status("stopped", scale=5)
    source = _Source([_status(), ConnectionError("refused")])
    top, out = _top(source, _Keys([]), alive=False, final=final)
    assert top.run() == 0 and top.status == final
    assert "run r-top stopped: 150 games" in out.getvalue()
    # without a final status the last one seen is kept, marked ended
    top, out = _top(_Source([_status(), ConnectionError("refused")]), _Keys([]), alive=False)
    assert top.run() == 0 and "run r-top ended: 30 games" in out.getvalue()


def test_unreachable_live_run_retries_then_gives_up_in_one_line():
    top, _ = _top(_Source([ConnectionError("refused")]), _Keys([]))
    with pytest.raises(app.TopError, match="refused"):
        top.run()  # the first poll fails: nothing to show, one error
    source = _Source([_status(), ConnectionError("timed out")])
    top, _ = _top(source, _Keys(["", "q"]))
    assert top.run() == 0  # a live run's failed poll is retried, shown in the footer
    assert top.note.startswith("poll failed, retrying: timed out")
    top, _ = _top(_Source([_status(), ConnectionError("timed out")]), _Keys([]))
    top.give_up_s = 0.0
    with pytest.raises(app.TopError, match="timed out"):
        top.run()


def test_ctrl_c_is_a_clean_exit():
    class _Interrupting(_Keys):
        def wait(self, timeout_s: float) -> str:
            raise KeyboardInterrupt

    keys = _Interrupting([])
    top, _ = _top(_Source([_status()]), keys)
    assert top.run() == 0 and keys.exited == 1
