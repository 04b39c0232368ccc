"""The run's dashboard and status server, as a user meets them: a real ``zeroforge
train`` (local, then distributed) serves its page; ``zeroforge status`` answers from it
over HTTP; headless Chromium shows the throughput moving with no console errors and leaves
a screenshot (``tests/e2e/browser.py`` says where); a finished run's page is served from
its RUN_DIR by ``zeroforge dashboard``."""

from __future__ import annotations

import json
import re
import subprocess
import time

from tests.e2e.browser import chromium, console_errors, output_dir, wait_for_chart
from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import ZF, zf
from tests.processes import interrupt
from zeroforge.deploy.dashboard.client import RunClient

LOCAL = ["--set", "net=tiny", "--set", "search.num_simulations=12",
         "--set", "selfplay.games_in_parallel=8", "--set", "learner.min_replay=64",
         "--set", "learner.batch_size=32", "--set", "evaluation.games=4",
         "--set", "evaluation.every_s=5", "--set", "run.progress_every_s=2",
         "--set", "run.dashboard_interval_s=1"]

URL = re.compile(r"dashboard at (http://127\.0\.0\.1:\d+/)")


def _cmd(*args: str) -> list[str]:
    return [*ZF, *args]


def _wait_line(proc: subprocess.Popen, pattern: re.Pattern, lines: list[str],
               timeout: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        found = pattern.search(line)
        if found:
            return found
    raise AssertionError(f"no {pattern.pattern!r} in:\n{''.join(lines)[-3000:]}")


def _look(driver, url: str, name: str, more: tuple[str, ...] = ()) -> None:
    """Open the page, wait for the self-play throughput, check the console, screenshot."""
    driver.get(url)
    assert wait_for_chart(driver, "selfplay-positions") > 0
    wait_for_chart(driver, "learner-steps")
    time.sleep(1.5)  # one more poll: every chart drawn at least once with data
    shot = output_dir() / f"{name}.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000, shot
    errors = console_errors(driver)
    assert errors == [], errors
    charts = driver.execute_script(
        "return Object.fromEntries(Object.entries(window.zfDashboard.charts)"
        ".map(([k, v]) => [k, v.hasData]))")
    for chart in ("actors", "placement", "selfplay-games", "simulations", "evaluations",
                  "loss", "replay", "spi", "throttled", "weights", "policy-lag", "cpu", "memory",
                  "actor-cpu", *more):
        assert charts[chart], (chart, charts)


def test_local_run_dashboard_status_and_finished_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _cmd("train", "--local", "--config", "tictactoe", "--run-dir", str(run_dir),
             "--run-id", "dash-local", "--minutes", "0.8", *LOCAL),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        url = _wait_line(proc, URL, lines).group(1)
        # `zeroforge status` of the running local run: over HTTP from its server
        r = zf("status", "--json", "--run-dir", str(run_dir))
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        assert st["run_id"] == "dash-local" and st["dashboard_url"] == url
        assert st["state"] == "running" and st["inference"] == "local"
        assert [a["kind"] for a in st["actors"]] == ["selfplay", "learner", "evaluator"]
        assert {a["pid"] for a in st["actors"]} == {proc.pid}
        text = zf("status", "--run-id", "dash-local")
        assert text.returncode == 0 and f"dashboard: {url}" in text.stdout, text.stderr
        assert "minimax" in text.stdout and "saw-tooth" in text.stdout  # the legend
        r = zf("dashboard", "--run-dir", str(run_dir))
        assert r.returncode == 0 and r.stdout.strip() == url, r.stderr
        r = zf("scale", "--workers", "2", "--run-dir", str(run_dir))
        assert r.returncode == 1 and "local run" in r.stderr, r.stderr
        with chromium() as driver:
            _look(driver, url, "dashboard-local")
        rest, _ = proc.communicate(timeout=180)
        lines.append(rest)
        assert proc.returncode == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = "".join(lines)
    final = json.loads((run_dir / "status.json").read_text())
    assert final["state"] == "stopped" and final["learner_steps"] > 0
    # the finished run: served read-only from its RUN_DIR
    r = zf("status", "--run-dir", str(run_dir))
    assert r.returncode == 1 and "has ended" in r.stderr
    dash = subprocess.Popen(_cmd("dashboard", "--run-dir", str(run_dir)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = _wait_line(dash, URL, lines, timeout=60).group(1)
        client = RunClient(url)
        history = client.history()
        assert history["run_id"] == "dash-local"
        steps = [v for v in history["series"]["learner_steps_total"] if v is not None]
        assert steps == sorted(steps) and steps[-1] == final["learner_steps"]
        assert history["t"][0] < 2 and history["t"][-1] > 40  # the whole run
        assert client.status().state == "stopped"
        with chromium() as driver:
            # the whole run's history: the ladder chart has the evaluations' ratings
            _look(driver, url, "dashboard-local-finished", ("ladder",))
    finally:
        interrupt(dash)
    assert dash.returncode == 0, output


def test_distributed_run_status_over_http_and_dashboard(tmp_path):
    run_dir = tmp_path / "run"
    # with an inference server, so that its charts (batch fill, latency...) have data
    with TrainProcess(run_dir, "dash-dist", "--set", "run.dashboard_interval_s=1",
                      "--set", "distributed.inference=server",
                      "--set", "inference.num_cpus=0.25") as train:
        train.wait_for("dashboard at http://127.0.0.1:")
        url = URL.search(train.output).group(1)
        record = json.loads((run_dir / "run.json").read_text())
        assert record["dashboard_url"] == url and record["dashboard_token_path"] == ""
        st = train.status()  # zeroforge status --json --run-dir
        assert st["run_id"] == "dash-dist" and st["dashboard_url"] == url
        assert st["desired"]["selfplay"] == 1
        for _ in range(90):
            st = RunClient(url).status_json()
            if st["learner_steps"] > 0 and st["losses"]:
                break
            time.sleep(1)
        assert st["learner_steps"] > 0 and "total" in st["losses"], st
        time.sleep(3)
        assert "| loss " in train.output and "loss -" not in train.output.splitlines()[-1]
        with chromium() as driver:
            _look(driver, url, "dashboard-distributed",
                  ("restarts", "batch-fill", "per-call", "latency"))
        r = zf("stop", "--run-dir", str(run_dir))
        assert r.returncode == 0, r.stderr
        assert train.wait() == 0, train.output


def test_a_dashboard_off_loopback_needs_its_token_and_never_prints_it(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _cmd("train", "--local", "--config", "tictactoe", "--run-dir", str(run_dir),
             "--run-id", "dash-token", "--minutes", "0.6", "--dashboard-host", "0.0.0.0",
             *LOCAL),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        found = _wait_line(proc, re.compile(r"dashboard at (http://\S+:(\d+)/) \(needs its "
                                            r"token"), lines)
        port = found.group(2)
        token_file = run_dir / "dashboard.token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        record = (run_dir / "run.json").read_text()
        assert token not in record and json.loads(record)["dashboard_token_path"] == str(
            token_file)
        local = f"http://127.0.0.1:{port}/"
        try:
            RunClient(local).status()
            raise AssertionError("answered without the token")
        except OSError as err:
            assert "HTTP 401" in str(err)
        # status finds the token file through the run record and sends it
        r = zf("status", "--json", "--run-dir", str(run_dir))
        assert r.returncode == 0 and json.loads(r.stdout)["run_id"] == "dash-token", r.stderr
        assert token not in r.stdout
        r = zf("dashboard", "--run-dir", str(run_dir))
        assert r.returncode == 0 and r.stdout.strip().endswith(f"?token={token}"), r.stderr
        with chromium() as driver:  # the page hands its token to its scripts and API calls
            driver.get(f"{local}?token={token}")
            assert wait_for_chart(driver, "selfplay-positions") > 0
            assert console_errors(driver) == []
        rest, _ = proc.communicate(timeout=180)
        lines.append(rest)
        assert proc.returncode == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert token not in "".join(lines)
