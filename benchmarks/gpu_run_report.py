"""The arithmetic and the process bookkeeping of ``benchmarks/gpu_run.sh``.

The shell script starts ``zeroforge train`` and stops it; this helper does what needs
numbers or process tables:

- ``measure``: waits until the run (found by its run dir, checked by its run id) is going,
  lets it warm up, then scrapes the run's Prometheus endpoint through a timed window while
  sampling ``nvidia-smi`` once a second, and writes the figures as JSON;
- ``table``: prints the markdown table of one or more such JSON files, then each one's
  figures as one JSON line;
- ``remember`` / ``reap``: note every process the run's driver has started (pid and start
  time), and later end those still alive, so that nothing outlives the script even when
  the driver was killed.

Every rate is a counter's change over the window divided by the window's length (two
scrapes of the run's merged metrics, which the controller refreshes once a second). The
request latency quantiles are those of the window's observations, summed over the
servers and interpolated inside their histogram bucket as Prometheus'
``histogram_quantile`` does (buckets 1, 2, 5, 10, 20, 50 ms...: read p50/p99 to about
that resolution). GPU utilisation is the mean and the maximum over every GPU's samples,
GPU memory the most that one GPU held; both "n/a" without a working ``nvidia-smi``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil
import yaml
from prometheus_client.parser import text_string_to_metric_families

from zeroforge.deploy.dashboard.history import quantile
from zeroforge.shared.run_files import CONFIG_NAME

Samples = dict[str, list[tuple[dict[str, str], float]]]
"""One scrape: sample name (``..._bucket``, ``..._total``) -> [(labels, value)]."""

NA = "n/a"


class MeasureError(RuntimeError):
    """The run could not be measured (it ended, or never got going); one line."""


# -- reading the run -------------------------------------------------------------------------
def parse_metrics(text: str) -> Samples:
    """The Prometheus text exposition as {sample name: [(labels, value)]}."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def total(samples: Samples, name: str, **match: str) -> float:
    """Sum of a sample's values over the label sets that carry ``match``."""
    return sum(v for labels, v in samples.get(name, [])
               if all(labels.get(k) == want for k, want in match.items()))


def buckets(samples: Samples, name: str) -> dict[float, float]:
    """A histogram's cumulative bucket counts summed over its other labels: {le: count}."""
    out: dict[float, float] = {}
    for labels, v in samples.get(name + "_bucket", []):
        le = float(labels["le"])
        out[le] = out.get(le, 0.0) + v
    return out


def window_quantiles(before: Samples, after: Samples, name: str,
                     qs: Iterable[float]) -> list[float | None]:
    """Quantiles of the observations a histogram got between two scrapes (None: none)."""
    b, a = buckets(before, name), buckets(after, name)
    bounds = sorted(a)
    cumulative = [a[le] - b.get(le, 0.0) for le in bounds]
    per_bucket = [c - (cumulative[i - 1] if i else 0.0) for i, c in enumerate(cumulative)]
    finite = tuple(le for le in bounds if le != float("inf"))
    return [quantile(finite, per_bucket, q) for q in qs]


def figures(before: Samples, after: Samples, seconds: float) -> dict[str, Any]:
    """The table's rates and ratios over a window of ``seconds`` between two scrapes."""

    def rate(name: str, **match: str) -> float:
        return (total(after, name, **match) - total(before, name, **match)) / seconds

    def delta(name: str) -> float:
        return total(after, name) - total(before, name)

    calls = delta("zeroforge_inference_batch_size_count")
    fill_calls = delta("zeroforge_inference_batch_fill_ratio_count")
    received = delta("zeroforge_learner_positions_received_total")
    p50, p99 = window_quantiles(before, after, "zeroforge_inference_request_latency_seconds",
                                (0.5, 0.99))
    return {
        "positions_per_s": rate("zeroforge_selfplay_positions_total", worker_kind="selfplay"),
        "games_per_s": rate("zeroforge_selfplay_games_total", worker_kind="selfplay"),
        "evaluations_per_s": rate("zeroforge_nn_evaluations_total"),
        "network_calls_per_s": calls / seconds,
        "positions_per_call": (delta("zeroforge_inference_batch_size_sum") / calls
                               if calls else None),
        "requests_per_call": delta("zeroforge_inference_requests_total") / calls if calls else None,
        "batch_fill": (delta("zeroforge_inference_batch_fill_ratio_sum") / fill_calls
                       if fill_calls else None),
        "latency_p50_ms": None if p50 is None else p50 * 1e3,
        "latency_p99_ms": None if p99 is None else p99 * 1e3,
        "learner_steps_per_s": rate("zeroforge_learner_steps_total"),
        "samples_per_insert": (delta("zeroforge_learner_samples_trained_total") / received
                               if received else None),
        "samples_per_insert_run": total(after, "zeroforge_learner_samples_per_insert"),
        "samples_per_insert_target": total(after, "zeroforge_learner_samples_per_insert_target"),
    }


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return parse_metrics(reply.read().decode())


def run_status(python: str, run_dir: str) -> dict | None:
    """``zeroforge status --json --run-dir`` (from the run's own server), None until the run
    has written its record."""
    r = subprocess.run([python, "-m", "zeroforge", "status", "--json", "--run-dir", run_dir],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


# -- the GPUs --------------------------------------------------------------------------------
def nvidia_smi(*query: str) -> list[list[str]] | None:
    """Rows of ``nvidia-smi --query-gpu=...`` (one per GPU), None without a working one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, f"--query-gpu={','.join(query)}",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in r.stdout.splitlines()
            if line.strip()]
    return rows or None


class GpuSampler:
    """Utilisation (%) and memory used (MiB) of every GPU, once a second, in a thread."""

    def __init__(self, read: Callable[..., list[list[str]] | None] = nvidia_smi,
                 every_s: float = 1.0) -> None:
        self.read = read
        self.every_s = every_s
        self.util: list[float] = []
        self.memory_mib: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            for row in self.read("utilization.gpu", "memory.used") or []:
                with contextlib.suppress(ValueError, IndexError):
                    util, mem = float(row[0]), float(row[1])
                    self.util.append(util)
                    self.memory_mib.append(mem)
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - t)))

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def summary(self) -> dict[str, Any]:
        if not self.util:
            return {"gpu_util_mean": None, "gpu_util_max": None, "gpu_memory_max_mib": None,
                    "gpu_samples": 0}
        return {"gpu_util_mean": sum(self.util) / len(self.util),
                "gpu_util_max": max(self.util),
                "gpu_memory_max_mib": max(self.memory_mib),
                "gpu_samples": len(self.util)}


def machine() -> dict[str, Any]:
    """CPU model and cores, GPUs, and the versions that matter."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpus = nvidia_smi("name", "memory.total", "driver_version") or []

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    return {"cpu": cpu, "cores": os.cpu_count(),
            "gpus": [f"{g[0]} ({float(g[1]) / 1024:.0f} GiB)" for g in gpus if len(g) >= 2],
            "gpu_driver": gpus[0][2] if gpus and len(gpus[0]) > 2 else None,
            "python": platform.python_version(), "torch": version("torch"),
            "ray": version("ray")}


# -- processes -------------------------------------------------------------------------------
def remember(root: int, path: Path) -> None:
    """Add ``root``'s descendants (pid and start time) to the file at ``path``."""
    known = _read_pids(path)
    with contextlib.suppress(psutil.Error):
        for p in psutil.Process(root).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                known.setdefault(p.pid, p.create_time())
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{pid} {t!r}\n" for pid, t in sorted(known.items())))
    tmp.replace(path)


def _read_pids(path: Path) -> dict[int, float]:
    known: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                pid, started = line.split()
                known[int(pid)] = float(started)
    return known


def reap(path: Path, grace_s: float = 5.0) -> list[str]:
    """End the remembered processes that are still alive (the same pid *and* start time,
    so a reused pid is left alone): SIGTERM, then SIGKILL after ``grace_s``. Returns
    ``pid name`` of each one ended."""
    alive = []
    for pid, started in _read_pids(path).items():
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if abs(p.create_time() - started) < 0.01 and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
    ended = []
    for p in alive:
        with contextlib.suppress(psutil.Error):
            ended.append(f"{p.pid} {p.name()}")
            p.terminate()
    _, still = psutil.wait_procs(alive, timeout=grace_s)
    for p in still:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(still, timeout=grace_s)
    return ended


# -- measure ---------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Wait for the run, warm up, measure the window; the figures as a dict."""
    pids = Path(args.pids) if args.pids else None

    def note() -> None:
        if pids is not None:
            remember(args.train_pid, pids)

    def check_driver(what: str) -> None:
        if not _alive(args.train_pid):
            raise MeasureError(f"the run's driver (pid {args.train_pid}) ended {what}")

    deadline = time.monotonic() + args.start_timeout
    status: dict | None = None
    while True:
        note()
        check_driver("before the run got going")
        status = run_status(args.python, args.run_dir)
        if status is not None and status.get("run_id") != args.run_id:
            raise MeasureError(f"{args.run_dir} holds run {status.get('run_id')!r}, not "
                               f"{args.run_id!r}")
        if status is not None and status.get("state") == "running" and status.get(
                "metrics_url") and _all_alive(status):
            break
        if time.monotonic() > deadline:
            waiting = (status or {}).get("waiting") or {}
            why = "; ".join(f"{k}: {v}" for k, v in waiting.items()) or (
                f"state {(status or {}).get('state', 'no record yet')}")
            raise MeasureError(f"run {args.run_id} not going with every actor alive after "
                               f"{args.start_timeout:g} s ({why})")
        time.sleep(2)
    url = status["metrics_url"]
    print(f"gpu_run: run {args.run_id} is going (metrics at {url}); warming up "
          f"{args.warmup:g} s", file=sys.stderr, flush=True)
    _sleep_watching(args.warmup, note, check_driver)
    # the learner starts at learner.min_replay: a window begun before its first step
    # would undercount its rate, so wait for one (within the start timeout again)
    learner_deadline = time.monotonic() + args.start_timeout
    while total(scrape(url), "zeroforge_learner_steps_total") <= 0:
        check_driver("before the learner's first step")
        if time.monotonic() > learner_deadline:
            raise MeasureError(f"the learner took no step within {args.warmup:g} + "
                               f"{args.start_timeout:g} s of warm-up (learner.min_replay "
                               "not reached?)")
        note()
        time.sleep(2)
    print(f"gpu_run: measuring {args.window:g} s", file=sys.stderr, flush=True)
    node_cpu: list[float] = []
    with GpuSampler() as gpu:
        t0 = time.monotonic()
        before = scrape(url)

        def every_few_seconds() -> None:
            note()
            node_cpu.extend(_node_cpu(scrape(url)))

        _sleep_watching(args.window, every_few_seconds, check_driver)
        after = scrape(url)
        seconds = time.monotonic() - t0
    final = run_status(args.python, args.run_dir) or status
    note()
    return {
        "preset": args.preset, "replicas": args.replicas, "run_id": args.run_id,
        "overrides": args.overrides, "warmup_s": args.warmup, "window_s": round(seconds, 1),
        "inference": final.get("inference"),
        "workers": (final.get("alive") or {}).get("selfplay"),
        "servers": (final.get("alive") or {}).get("inference"),
        **run_config(Path(args.run_dir)),
        **figures(before, after, seconds), **gpu.summary(),
        "node_cpu_util": sum(node_cpu) / len(node_cpu) if node_cpu else None,
        "machine": machine(),
    }


def run_config(run_dir: Path) -> dict[str, Any]:
    """The settings the table names, from the run's own record of its config (so that
    ``--set`` overrides are seen as the run took them)."""
    try:
        c = yaml.safe_load((run_dir / CONFIG_NAME).read_text()) or {}
    except (OSError, yaml.YAMLError):
        c = {}
    net = c.get("net") or {}
    return {"game": c.get("game"),
            "net": f"{net.get('kind', '?')} {net.get('blocks', '?')}x{net.get('channels', '?')}"
            if isinstance(net, dict) else str(net),
            "simulations": (c.get("search") or {}).get("num_simulations"),
            "games_in_parallel": (c.get("selfplay") or {}).get("games_in_parallel"),
            "max_batch": (c.get("inference") or {}).get("max_batch")}


def _all_alive(status: dict) -> bool:
    desired, alive = status.get("desired") or {}, status.get("alive") or {}
    return all(alive.get(kind, 0) >= n for kind, n in desired.items())


def _node_cpu(samples: Samples) -> list[float]:
    """Each node's CPU utilisation (0..1) as the run's actors last reported it."""
    return [v for _, v in samples.get("zeroforge_node_cpu_utilisation_ratio", [])]


def _sleep_watching(seconds: float, tick: Callable[[], None],
                    check: Callable[[str], None]) -> None:
    """Sleep ``seconds``, checking the driver and calling ``tick`` every 5 s."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 5.0))
        check("before the measurement ended")
        tick()


# -- the table -------------------------------------------------------------------------------
def _num(v: Any, fmt: str = "{:,.0f}") -> str:
    return NA if v is None else fmt.format(v)


COLUMNS = ("preset", "R", "workers x B", "servers", "positions/s", "evaluations/s",
           "batch fill (positions/call)", "request latency p50 / p99",
           "learner steps/s", "samples per insert (target)", "GPU util mean / max",
           "GPU memory max", "node CPU")


def row(f: dict[str, Any]) -> list[str]:
    fill = (NA if f.get("batch_fill") is None
            else f"{f['batch_fill']:.2f} ({_num(f.get('positions_per_call'))})")
    latency = (NA if f.get("latency_p50_ms") is None
               else f"{f['latency_p50_ms']:.1f} / {f['latency_p99_ms']:.1f} ms")
    gpu_util = (NA if f.get("gpu_util_mean") is None
                else f"{f['gpu_util_mean']:.0f}% / {f['gpu_util_max']:.0f}%")
    gpu_mem = (NA if f.get("gpu_memory_max_mib") is None
               else f"{f['gpu_memory_max_mib'] / 1024:.1f} GiB")
    spi = (f"{_num(f.get('samples_per_insert'), '{:.2f}')} "
           f"({_num(f.get('samples_per_insert_target'), '{:g}')})")
    servers = f.get("servers") if f.get("inference") == "server" else "none (local nets)"
    return [str(f.get("preset")), str(f.get("replicas")),
            f"{_num(f.get('workers'), '{}')} x {_num(f.get('games_in_parallel'), '{}')}",
            str(servers), _num(f.get("positions_per_s")), _num(f.get("evaluations_per_s")),
            fill, latency, _num(f.get("learner_steps_per_s"), "{:.2f}"), spi, gpu_util,
            gpu_mem, _num(f.get("node_cpu_util"), "{:.0%}")]


def machine_text(m: dict[str, Any]) -> str:
    gpus = ", ".join(m.get("gpus") or []) or "no GPU"
    driver = f", driver {m['gpu_driver']}" if m.get("gpu_driver") else ""
    return (f"machine: {m.get('cpu')}, {m.get('cores')} cores; {gpus}{driver}; python "
            f"{m.get('python')}, torch {m.get('torch')}, ray {m.get('ray')}")


def table(runs: list[dict[str, Any]]) -> str:
    lines = []
    for text in dict.fromkeys(machine_text(f.get("machine") or {}) for f in runs):
        lines.append(text)
    for f in runs:
        extra = f" with {' '.join(f['overrides'])}" if f.get("overrides") else ""
        lines.append(f"run {f.get('run_id')} ({f.get('preset')}: {f.get('game')}, net "
                     f"{f.get('net')}, {f.get('simulations')} simulations, max_batch "
                     f"{f.get('max_batch')}): {f.get('window_s')} s measured after "
                     f"{f.get('warmup_s'):g} s of warm-up{extra}")
    lines += ["", "| " + " | ".join(COLUMNS) + " |",
              "|" + "|".join("---" if i < 4 else "---:" for i in range(len(COLUMNS))) + "|"]
    lines += ["| " + " | ".join(row(f)) + " |" for f in runs]
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpu_run_report.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    m = sub.add_parser("measure", help="wait for the run, warm up, measure; write the figures")
    m.add_argument("--run-dir", required=True)
    m.add_argument("--run-id", required=True)
    m.add_argument("--train-pid", type=int, required=True)
    m.add_argument("--python", default=sys.executable)
    m.add_argument("--warmup", type=float, default=60)
    m.add_argument("--window", type=float, default=90)
    m.add_argument("--start-timeout", type=float, default=300)
    m.add_argument("--preset", default="")
    m.add_argument("--replicas", type=int, default=1)
    m.add_argument("--set", dest="overrides", action="append", default=[])
    m.add_argument("--pids", default=None, help="file noting the driver's descendants")
    m.add_argument("--out", required=True, help="where the figures go (JSON)")
    t = sub.add_parser("table", help="print the markdown table of figure files")
    t.add_argument("files", nargs="+")
    t.add_argument("--json", default=None, help="also write the figures here (one file: "
                   "its dict; several: a list)")
    t.add_argument("--table-only", action="store_true",
                   help="print the table without the JSON lines")
    r = sub.add_parser("remember", help="note the descendants of a process")
    r.add_argument("--pid", type=int, required=True)
    r.add_argument("--pids", required=True)
    k = sub.add_parser("reap", help="end the noted processes still alive")
    k.add_argument("--pids", required=True)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "measure":
            Path(args.out).write_text(json.dumps(measure(args), indent=1) + "\n")
        elif args.command == "table":
            runs = [json.loads(Path(f).read_text()) for f in args.files]
            print(table(runs))
            for f in [] if args.table_only else runs:
                print(json.dumps(f, sort_keys=True))
            if args.json:
                Path(args.json).write_text(json.dumps(runs[0] if len(runs) == 1 else runs,
                                                      indent=1) + "\n")
        elif args.command == "remember":
            remember(args.pid, Path(args.pids))
        else:
            ended = reap(Path(args.pids))
            if ended:
                print(f"gpu_run: ended {len(ended)} process(es) the run left behind: "
                      + ", ".join(ended), file=sys.stderr)
    except (MeasureError, OSError, ValueError) as err:
        print(f"gpu_run: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
