"""The Grafana dashboard against a real Prometheus scraping a real run.

A distributed ``zeroforge train`` (inference servers, one worker, the evaluator on, a tiny
net) serves its metrics; Debian's ``prometheus`` (``scripts/test`` installs it) scrapes it every
second with the job of ``deploy/monitoring/prometheus.yml``; then every query of every panel
of ``deploy/monitoring/zeroforge.json`` goes through Prometheus' HTTP API, with Grafana's
variables filled in, and must return data. The GPU panels are checked only where
``nvidia-smi`` exists: a machine without an NVIDIA GPU has no GPU series to chart.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import yaml

from tests.e2e.runs import TrainProcess
from zeroforge.deploy.monitoring import build_dashboard

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
CONFIG = Path(build_dashboard.__file__).with_name("prometheus.yml")
SETTINGS = ["--set", "distributed.inference=server", "--set", "distributed.inference_servers=1",
            "--set", "inference.num_cpus=0.25", "--set", "selfplay.workers=1",
            "--set", "distributed.evaluator=true", "--set", "distributed.evaluator_cpus=0.25",
            "--set", "evaluation.every_s=3", "--set", "evaluation.games=2",
            "--set", "evaluation.anchors=[random]", "--set", "learner.checkpoint_every_s=5"]
RATE_INTERVAL = "10s"
"""What ``$__rate_interval`` stands for (Grafana: at least 4 scrape intervals)."""
HAS_GPU = shutil.which("nvidia-smi") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout: float = 10) -> dict:
    """The JSON reply, also of an HTTP error (Prometheus explains a bad query in it)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read().decode())
    except urllib.error.HTTPError as err:
        return json.loads(err.read().decode() or "{}")


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def prometheus_config(target: str, path: Path) -> Path:
    """The committed config's zeroforge job, pointed at ``target``, scraping every second."""
    committed = yaml.safe_load(CONFIG.read_text())
    jobs = {job["job_name"]: job for job in committed["scrape_configs"]}
    assert set(jobs) == {"zeroforge", "ray"}
    assert jobs["ray"]["file_sd_configs"][0]["files"] == [
        "/tmp/ray/prom_metrics_service_discovery.json"]
    job = dict(jobs["zeroforge"], static_configs=[{"targets": [target]}])
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [job]}
    path.write_text(yaml.safe_dump(config))
    return path


def panel_queries(instance: str) -> list[tuple[str, str, bool]]:
    """(panel title, PromQL with Grafana's variables filled in, GPU panel) for every query
    of the committed dashboard JSON."""
    board = json.loads(build_dashboard.OUT.read_text())
    gpu_titles = {p.title for p in build_dashboard.panels() if p.gpu}
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$__rate_interval", RATE_INTERVAL)
                    # a regex inside a PromQL string: its backslashes escaped once more
                    .replace("$instance", re.escape(instance).replace("\\", "\\\\")))
            assert "$" not in expr, expr
            out.append((panel["title"], expr, panel["title"] in gpu_titles))
    return out


def wanted_series(text: str) -> set[str]:
    """Metric names (without ``_bucket``/``_sum``/``_count``) the endpoint serves with a
    sample, histograms only once they have observations."""
    names = set()
    for line in text.splitlines():
        found = re.match(r"^zeroforge_(\w+?)(_bucket|_sum|_count)?(\{[^}]*\})? (\S+)$", line)
        if found and not (found[2] == "_count" and float(found[4]) == 0):
            names.add(found[1])
    return names


def test_every_panel_of_the_grafana_dashboard_has_data_in_prometheus(tmp_path):
    assert Path(PROMETHEUS).exists(), (
        "prometheus is not installed (Debian: apt-get install prometheus; scripts/test does)")
    run_id = f"prom-{uuid.uuid4().hex[:10]}"
    queries = panel_queries("127.0.0.1:1")  # every metric the panels read
    charted = {re.sub(r"_(bucket|sum|count)$", "", n)
               for _, expr, gpu in queries if not gpu
               for n in re.findall(r"zeroforge_(\w+)", expr)}
    prom: subprocess.Popen | None = None
    with TrainProcess(tmp_path / "run", run_id, *SETTINGS) as train:
        train.wait_for("metrics at http://127.0.0.1:", timeout=240)
        url = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", train.output)[1]
        instance = urllib.parse.urlsplit(url).netloc
        # the run's own view first: every charted metric has a sample (the evaluator's
        # first result, the learner's first steps and games)
        deadline = time.monotonic() + 240
        while True:
            missing = charted - wanted_series(scrape(url))
            if not missing:
                break
            assert time.monotonic() < deadline, f"the run never served {sorted(missing)}"
            assert train.proc.poll() is None, f"run ended:\n{train.output[-3000:]}"
            time.sleep(2)
        port = free_port()
        api = f"http://127.0.0.1:{port}/api/v1"
        log = (tmp_path / "prometheus.log").open("w")
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={prometheus_config(instance, tmp_path / 'p.yml')}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_for_scrapes(api, instance, prom, tmp_path / "prometheus.log")
            failures, checked, skipped = [], 0, set()
            values: dict[str, list[float]] = {}
            for title, expr, gpu in panel_queries(instance):
                if gpu and not HAS_GPU:
                    skipped.add(title)  # no NVIDIA GPU here: no GPU series to chart
                    continue
                reply = get_json(f"{api}/query?" + urllib.parse.urlencode({"query": expr}))
                checked += 1
                if reply.get("status") != "success":
                    failures.append(f"{title}: {expr}: {reply.get('error')}")
                    continue
                result = reply["data"]["result"]
                if not result:
                    failures.append(f"{title}: no data for {expr}")
                values.setdefault(title, []).extend(float(r["value"][1]) for r in result)
            # what each panel showed, for a person to read (the test's output folder)
            (tmp_path / "panel_values.json").write_text(json.dumps(values, indent=1))
            for title, vs in values.items():
                if vs and not any(math.isfinite(v) for v in vs):
                    failures.append(f"{title}: only NaN/Inf values {vs[:5]}")
            assert not failures, "\n".join(failures)
            assert checked >= 30
            assert skipped == (set() if HAS_GPU else {"GPU utilisation", "GPU memory"})
            # the numbers are the run's: positions/s is positive while it plays
            [positions] = [v for t, v in values.items() if t == "Self-play positions/s"]
            assert max(positions) > 0
        finally:
            prom.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                prom.wait(timeout=20)
            if prom.poll() is None:
                prom.kill()
                prom.wait(timeout=10)
            log.close()


def _wait_for_scrapes(api: str, instance: str, prom: subprocess.Popen, log: Path,
                      scrapes: int = 12, timeout: float = 90) -> None:
    """Until Prometheus has scraped the run ``scrapes`` times, each one up."""
    query = urllib.parse.urlencode(
        {"query": f'sum_over_time(up{{job="zeroforge", instance="{instance}"}}[1m])'})
    deadline = time.monotonic() + timeout
    while True:
        assert prom.poll() is None, f"prometheus exited:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(OSError, ValueError):
            result = get_json(f"{api}/query?{query}")["data"]["result"]
            if result and float(result[0]["value"][1]) >= scrapes:
                return
        assert time.monotonic() < deadline, (
            f"prometheus did not scrape {instance} {scrapes} times:\n"
            f"{log.read_text()[-3000:]}")
        time.sleep(1)


def test_the_committed_scrape_config_is_valid_for_prometheus():
    """``promtool`` (from the same package) accepts ``prometheus.yml`` as committed (the
    Ray job's discovery file may be missing here: a warning, not an error)."""
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    assert Path(promtool).exists(), "promtool is not installed (Debian package prometheus)"
    r = subprocess.run([promtool, "check", "config", str(CONFIG)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout + r.stderr, r.stdout + r.stderr
