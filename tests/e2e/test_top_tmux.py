"""``zeroforge top`` in a real terminal: a real short local run, ``top`` started in a tmux
pane (its own tmux server on a socket of its own), its screen read until it shows the run
and an actor line with live numbers, then ``q``: top exits 0 and leaves the terminal as it
found it (``stty -g`` before and after, cursor shown); a second ``top`` quit with Ctrl-C
does the same. Then the run is stopped cleanly."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.test_cli import ZF
from tests.e2e.test_curve_cli import TINY_LOCAL

ROOT = Path(__file__).resolve().parents[2]


def _wait(what: str, check, timeout: float, pane=None):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            shown = f"\nscreen:\n{pane()}" if pane else ""
            pytest.fail(f"no {what} after {timeout:.0f} s{shown}")
        time.sleep(0.3)


def _live_selfplay_line(screen: str) -> bool:
    """An actor line ``selfplay 0 alive NODE PID RATE pos/s GAMES POSITIONS`` with a
    non-zero rate and counters."""
    for line in screen.splitlines():
        m = re.match(r"\s*selfplay\s+0\s+alive\s+\S+\s+\d+\s+([\d,.]+) pos/s\s+([\d,]+)\s+"
                     r"([\d,]+)", line)
        if m and all(float(g.replace(",", "")) > 0 for g in m.groups()):
            return True
    return False


def test_top_watches_a_local_run_and_quits_on_q(tmp_path):
    run_id = f"top-e2e-{uuid.uuid4().hex[:8]}"
    run_dir, home = tmp_path / "run", tmp_path / "home"
    env = {**os.environ, "ZEROFORGE_HOME": str(home)}
    log = open(tmp_path / "train.log", "w")  # noqa: SIM115 (closed below)
    train = subprocess.Popen(
        [*ZF, "train", "--local", "--config", "tictactoe", "--minutes", "4", "--run-dir",
         str(run_dir), "--run-id", run_id, *TINY_LOCAL],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    socket = f"zf-top-{uuid.uuid4().hex[:10]}"
    tmux = ["tmux", "-L", socket]
    done, before, after = tmp_path / "top.rc", tmp_path / "stty.before", tmp_path / "stty.after"
    done2, after2 = tmp_path / "top2.rc", tmp_path / "stty.after2"
    go2 = tmp_path / "top2.go"  # the second top waits for it: the first's end is checked first
    try:
        _wait("run record", lambda: (run_dir / "run.json").exists() or train.poll() is not None,
              120)
        assert train.poll() is None, (tmp_path / "train.log").read_text()
        top = " ".join(shlex.quote(a) for a in [*ZF, "top", "--run-dir", str(run_dir)])
        # top twice: quit with q, then with Ctrl-C; the terminal checked after each
        top = f"ZEROFORGE_HOME={shlex.quote(str(home))} {top}"
        script = (f"stty -g > {before}; {top}; echo $? > {done}; stty -g > {after}; clear; "
                  f"while [ ! -e {go2} ]; do sleep 0.1; done; "
                  f"{top}; echo $? > {done2}; stty -g > {after2}; sleep 300")
        subprocess.run([*tmux, "-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "150",
                        "-y", "45", "-c", str(ROOT), "bash", "--norc", "-c", script],
                       check=True, env=env)

        def pane() -> str:
            return subprocess.run([*tmux, "capture-pane", "-p", "-t", "top"],
                                  capture_output=True, text=True).stdout

        _wait("run id on screen", lambda: f"run {run_id}" in pane(), 60, pane)
        _wait("selfplay line with live numbers", lambda: _live_selfplay_line(pane()), 90, pane)
        screen = pane()
        (tmp_path / "screen.txt").write_text(screen)  # what a person would have seen
        assert re.search(rf"run {run_id}\s+running\s+elapsed \d+:\d\d:\d\d\s+weights v\d+",
                         screen), screen
        assert all(word in screen for word in ("learner", "evaluator", "positions/s",
                                               "games/s", "loss", "q or Ctrl-C to quit"))
        subprocess.run([*tmux, "send-keys", "-t", "top", "q"], check=True)
        _wait("top's exit", lambda: done.exists() and after.exists(), 20, pane)
        assert done.read_text().strip() == "0", pane()
        assert after.read_text() == before.read_text()  # cbreak undone, echo back on
        cursor = subprocess.run([*tmux, "display-message", "-p", "-t", "top",
                                 "#{cursor_flag}"], capture_output=True, text=True).stdout
        assert cursor.strip() == "1"  # rich's Live hid the cursor while it ran
        go2.touch()
        _wait("second top", lambda: f"run {run_id}" in pane() and "q or Ctrl-C" in pane(),
              60, pane)
        subprocess.run([*tmux, "send-keys", "-t", "top", "C-c"], check=True)
        _wait("second top's exit", lambda: done2.exists() and after2.exists(), 20, pane)
        assert done2.read_text().strip() == "0", pane()
        assert after2.read_text() == before.read_text()
        cursor = subprocess.run([*tmux, "display-message", "-p", "-t", "top",
                                 "#{cursor_flag}"], capture_output=True, text=True).stdout
        assert cursor.strip() == "1"
        assert "Traceback" not in pane()
        assert train.poll() is None  # watching did not disturb the run
        # stop the run as a scheduler would (SIGTERM = Ctrl-C: final checkpoint, exit 0)
        os.kill(train.pid, signal.SIGTERM)
        assert train.wait(timeout=120) == 0, (tmp_path / "train.log").read_text()
        assert (run_dir / "checkpoint.pt").exists()
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        if train.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(train.pid, signal.SIGKILL)
            train.wait(timeout=30)
        log.close()


@pytest.mark.parametrize("case, expected", [
    ("no_run", "no live run to watch"),
    ("not_a_run_dir", "no run record in"),
    ("ended", "has ended"),
])
def test_nothing_to_watch_is_one_line(tmp_path, case, expected):
    home = tmp_path / "home"
    args = []
    if case == "not_a_run_dir":
        args = ["--run-dir", str(tmp_path)]
    elif case == "ended":  # a run record whose driver is gone (pid of a process that ended)
        gone = subprocess.Popen(["true"])
        gone.wait()
        (tmp_path / "run.json").write_text(
            '{"run_id": "old", "address": "", "token_path": "", "metrics_url": "", '
            f'"driver_pid": {gone.pid}, "run_dir": "{tmp_path}", '
            '"dashboard_url": "http://127.0.0.1:9/"}')
        args = ["--run-dir", str(tmp_path)]
    r = subprocess.run([*ZF, "top", *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "ZEROFORGE_HOME": str(home)}, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("zeroforge top: error: ") and expected in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
