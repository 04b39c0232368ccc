"""Re-run the fault table of issue 9 (docs/reliability.md) and print what happened.

Each row is one fault the issue found, the promise that now holds, and how it is checked:

- ``cli``: ``zeroforge train`` with the bad input, run here as a real process; the promise
  is "fails fast": exit code 1, one line on stderr, no traceback, within seconds, and an
  earlier checkpoint in the run dir neither moved nor renamed. The outcome is that line.
- ``tests``: the pytest tests that induce the fault in real processes (Redis, Ray, the
  learner and workers, the CLI), slow lane included. They run with ``ZF_FAULT_REPORT``
  set to a fresh directory, where each test writes what it measured
  (``tests/fault_report.py``: games appended, trained, lost, doubled, recovery seconds,
  and the row's own figures); the outcome is ``held:`` and those figures when the tests
  pass, else ``FAILED:`` and the first failure (with whatever was measured before it).
  Rows that share their tests run them once.

    python benchmarks/fault_table.py                 # every row (25-35 min on 2 cores)
    python benchmarks/fault_table.py --only 1a,3,C   # some rows
    python benchmarks/fault_table.py --markdown      # the table for docs/reliability.md

Exits 1 when a row did not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zeroforge.shared.transport import RedisServer  # noqa: E402


@dataclass(frozen=True)
class Fault:
    """One row of the table."""

    key: str
    """The issue's number (``C``: the controller, ``K``: a SIGKILLed driver, ``m``:
    minor bad input), with a letter where one number holds several faults."""
    fault: str
    promise: str
    cli: tuple[str, ...] = ()
    """``zeroforge train`` arguments that must fail fast (``{redis}``: a live Redis URL
    with a wrong password)."""
    words: tuple[str, ...] = ()
    """What the one error line must name."""
    tests: tuple[str, ...] = ()
    """pytest node ids holding the fault."""


T = "tests/"
RUN = T + "integration/test_faults_in_a_run.py::"
"""The faults induced one at a time in a real distributed run, with the ledger."""
FAULTS = [
    Fault("1a", "wrong Redis password", "one line, exit 1, nothing started",
          cli=("--redis-url", "{redis}"), words=("rejected our credentials",)),
    Fault("1b", "unreachable --redis-url", "one line within seconds, exit 1",
          cli=("--redis-url", "redis://:x@127.0.0.1:1/0"), words=("cannot reach Redis",)),
    Fault("1c", "corrupt checkpoint with distributed --resume", "one line, exit 1",
          cli=("--resume",), words=("corrupt or not a checkpoint",)),
    Fault("1d", "actors crash on start over and over (wrong Redis password)", "run fails "
          "in one line naming kind and last error; no detached actor left",
          tests=(T + "integration/test_distributed.py::test_crash_loop_fails_the_run_in_one_line",
                 T + "integration/test_controller_restart.py::"
                 "test_a_failed_run_leaves_no_detached_actor")),
    Fault("2", "kill -9 of the run's redis-server mid-run (by pid, 3 times)", "restarted "
          "on its port from its AOF; workers hold and resend; every game trained once; a "
          "worker that cannot append after its stop names what it lost",
          tests=(RUN + "test_kill_9_of_the_runs_redis_server",
                 T + "integration/test_redis_recovery.py::"
                 "test_a_worker_that_cannot_append_after_its_stop_says_what_it_lost")),
    Fault("3", "--address with no cluster there", "one line within seconds, exit 1",
          cli=("--address", "127.0.0.1:1"), words=("no Ray cluster answers at",)),
    Fault("4", "more actors than the cluster holds", "warning at start; status pending + "
          "why; stop does not wait for them",
          tests=(T + "e2e/test_train_failures.py::"
                 "test_sigterm_stops_cleanly_and_pending_actors_are_reported",)),
    Fault("5", "SIGTERM to the driver", "clean stop, final checkpoint, exit 0",
          tests=(T + "e2e/test_train_failures.py::"
                 "test_sigterm_stops_cleanly_and_pending_actors_are_reported",)),
    Fault("6", "failed train (bad --game) after an earlier run", "one line; earlier "
          "checkpoint not moved", cli=("--game", "go:size=abc"), words=("size",)),
    Fault("7", "kill -9 of a redis-server: durability", "AOF everysec; restarted; stream, "
          "groups, pending entries, weights replayed; a crash loop given up in one line",
          tests=(T + "integration/test_redis_recovery.py::"
                 "test_a_crashed_redis_comes_back_with_stream_groups_pending_entries_and_weights",
                 T + "integration/test_transport.py::test_aof_keeps_data_across_a_restart",
                 T + "integration/test_redis_recovery.py::"
                 "test_a_crash_loop_is_given_up_in_one_logged_line")),
    Fault("8", "connection dropped during a batched XADD", "resent whole; learner keeps "
          "each game id once",
          tests=(T + "integration/test_redis_recovery.py::"
                 "test_a_pipeline_cut_after_redis_ran_it_appends_twice_and_the_learner_keeps_one",
                 T + "integration/test_redis_recovery.py::"
                 "test_a_resent_game_is_dropped_by_id_even_after_a_learner_restart")),
    Fault("9", "poison that passes the schema (3000 fuzzed entries)", "nothing trained on; "
          "each rejection counted by reason",
          tests=(T + "unit/test_sample_fuzz.py", T + "unit/test_sample_checks.py",
                 T + "integration/test_learner_service.py::"
                 "test_malformed_entries_are_rejected_counted_and_skipped")),
    Fault("10", "kill -9 of the learner's process (by pid, 3 times)", "successor resumes "
          "from the checkpoint; every game trained once; counters never go back; redone "
          "work counted", tests=(RUN + "test_kill_9_of_the_learner_process",)),
    Fault("11", "kill -9 of a worker's process (by pid, 3 times)", "replaced; its appended "
          "games trained once; status games >= games received",
          tests=(RUN + "test_kill_9_of_a_worker_process",)),
    Fault("12", "stale stream lag in the final status", "final status after every ack",
          tests=(T + "integration/test_controller_restart.py::"
                 "test_a_killed_controller_is_replaced_and_adopts_the_live_actors",)),
    Fault("13", "Ray and Redis on every interface; token 0644", "loopback only; 0600",
          tests=(T + "integration/test_isolation.py",)),
    Fault("14", "status/scale/stop attach to the newest cluster", "act on the named run",
          tests=(T + "e2e/test_isolation.py::"
                 "test_two_runs_each_command_acts_on_the_run_it_names",)),
    Fault("15", "Ctrl-C kills Redis first", "Redis last: clean stop, every game kept",
          tests=(T + "e2e/test_isolation.py::"
                 "test_ctrl_c_to_the_process_group_stops_cleanly_redis_last",)),
    Fault("16", "e2e train/status/scale/stop beside another run", "finds its run; leaves "
          "nothing behind",
          tests=(T + "e2e/test_train_cli.py::test_distributed_job_train_status_scale_stop",)),
    Fault("17", "Redis on another host: TLS", "rediss:// verified; untrusted refused",
          tests=(T + "integration/test_redis_tls.py",)),
    Fault("C", "kill -9 of the controller (twice, once with a worker)", "successor adopts "
          "live actors; same run, counts, counters, metrics URL; CLI keeps working",
          tests=(T + "integration/test_controller_restart.py::"
                 "test_a_killed_controller_is_replaced_and_adopts_the_live_actors",)),
    Fault("S", "SIGSTOP of the learner's process for 30 s, then SIGCONT", "not replaced; "
          "no step meanwhile, workers play on; trains again after SIGCONT; every game once",
          tests=(RUN + "test_sigstop_of_the_learner_for_30_s",)),
    Fault("D", "run directory full (tmpfs), then read-only", "each failed checkpoint write "
          "counted, one log line a run of failures; training goes on; the last good "
          "checkpoint kept byte for byte; every game once; a local run stops with one "
          "error line, exit 1",
          tests=(RUN + "test_a_full_then_read_only_run_dir",
                 T + "integration/test_learner_service.py::"
                 "test_a_full_or_read_only_run_dir_keeps_the_last_good_checkpoint",
                 T + "e2e/test_train_failures.py::"
                 "test_a_local_run_whose_run_dir_fills_up_says_what_it_kept")),
    Fault("D2", "run directory full under the bundled Redis's AOF (RUN_DIR/redis)",
          "Redis refuses writes meanwhile (MISCONF): workers hold their games, the learner "
          "backs off, nothing crashes; Redis writes again by itself; every game once",
          tests=(RUN + "test_a_full_run_dir_under_the_bundled_redis",)),
    Fault("N", "link of the redis host down (netns bed: a 10 s sleep and a probe that "
          "times out; every Redis connection through a relay, +20 ms each way)",
          "nothing reaches Redis meanwhile; the run goes on after; every game once",
          tests=(T + "multihost/test_multihost.py::"
                 "test_added_latency_and_a_10_s_partition_of_redis",)),
    Fault("X", "kill -9 of workers, learner, controller, Redis: 20 at random", "every "
          "appended game trained once or named lost; no counter back",
          tests=(T + "integration/test_chaos.py",)),
    Fault("K", "SIGKILL of the driver", "its redis-server gone within a second (asserted: "
          "2 s), Ray's core within seconds (10 s), Ray's agents in about a minute (90 s)",
          tests=(T + "integration/test_redis_owner_death.py",
                 T + "e2e/test_driver_sigkill.py")),
    Fault("m1", "selfplay.games_in_parallel=0", "one line naming the key",
          cli=("--set", "selfplay.games_in_parallel=0"),
          words=("selfplay.games_in_parallel",)),
    Fault("m2", "learner.lr=-5", "one line naming the key", cli=("--set", "learner.lr=-5"),
          words=("learner.lr",)),
    Fault("m3", "pretrain with SGF files that do not parse", "counted as skipped",
          tests=(T + "e2e/test_pretrain.py::test_pretrain_cli_reports_and_rejects",)),
    Fault("m4", "stop after an unreachable Redis", "no checkpoint named that was never "
          "written", cli=("--redis-url", "redis://:x@127.0.0.1:1/0"),
          words=("cannot reach Redis",)),
]


@dataclass
class Outcome:
    fault: Fault
    ok: bool
    text: str
    seconds: float
    notes: list[str] = field(default_factory=list)


def run_cli(fault: Fault, redis_url: str) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="zeroforge-fault-") as tmp:
        run_dir = Path(tmp)
        earlier = run_dir / "checkpoint.pt"
        earlier.write_bytes(b"an earlier run's checkpoint (not a real one)")
        args = [a.replace("{redis}", redis_url.replace("://:", "://:wrong", 1))
                for a in fault.cli]
        cmd = [sys.executable, "-m", "zeroforge", "train", "--config", "tictactoe",
               "--run-dir", str(run_dir), *args]
        start = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
        seconds = time.monotonic() - start
        lines = r.stderr.strip().splitlines()
        problems = []
        if r.returncode != 1:
            problems.append(f"exit code {r.returncode}")
        if len(lines) != 1 or "Traceback" in r.stderr:
            problems.append(f"{len(lines)} stderr lines")
        problems += [f"line lacks {w!r}" for w in fault.words if lines and w not in lines[0]]
        if not earlier.exists() or list(run_dir.glob("checkpoint-*.pt")):
            problems.append("the earlier checkpoint was moved")
        if "checkpoint" in r.stdout + r.stderr and fault.key == "m4":
            problems.append("names a checkpoint")
        line = lines[0] if lines else "(no output)"
        if problems:
            return Outcome(fault, False, f"FAILED ({'; '.join(problems)}): {line}", seconds)
        return Outcome(fault, True, f"failed fast: `{line}`", seconds)


FIRST = ("appended", "trained", "lost", "doubled", "recovery_s")
"""Figures printed first, in this order (``tests/fault_report.py``)."""


def _value(v: object) -> str:
    if isinstance(v, list):
        return "/".join(_value(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def figures_text(figures: dict) -> str:
    """``appended 812, trained 812, lost 0, doubled 0, recovery 4.1/9.8 s, ...``"""
    keys = [k for k in FIRST if k in figures] + [k for k in figures if k not in FIRST]
    parts = []
    for key in keys:
        name, unit = key, ""
        for suffix in ("_s", "_ms"):
            if key.endswith(suffix):
                name, unit = key.removesuffix(suffix), " " + suffix[1:]
        parts.append(f"{name.replace('_', ' ')} {_value(figures[key])}{unit}")
    return ", ".join(parts)


def read_reports(where: Path) -> dict:
    """Every test's figures of one row, merged (a key two tests gave is numbered)."""
    merged: dict = {}
    for path in sorted(where.glob("*.json")):
        for key, value in json.loads(path.read_text())["figures"].items():
            name, n = key, 2
            while name in merged:
                name, n = f"{key}_{n}", n + 1
            merged[name] = value
    return merged


_RAN: dict[tuple[str, ...], Outcome] = {}
"""Tests already run in this table (rows that share tests run them once)."""


def run_tests(fault: Fault) -> Outcome:
    if fault.tests in _RAN:
        first = _RAN[fault.tests]
        return Outcome(fault, first.ok, first.text, 0.0, [f"as {first.fault.key}"])
    with tempfile.TemporaryDirectory(prefix="zeroforge-fault-report-") as where:
        # wide: pytest cuts its one-line failure summary at the terminal's width
        env = {**os.environ, "ZF_FAULT_REPORT": where, "COLUMNS": "300"}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
               *fault.tests]
        start = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        seconds = time.monotonic() - start
        measured = figures_text(read_reports(Path(where)))
    summary = [x for x in r.stdout.splitlines() if re.search(r"\d+ (passed|failed)", x)]
    last = (r.stdout + r.stderr).strip().splitlines() or ["no output"]
    counts = re.sub(r" in [\d.]+s.*", "", summary[-1].strip("= ")) if summary else last[-1]
    if r.returncode == 0:
        text = f"held: {measured} ({counts})" if measured else f"held ({counts}; no figures)"
    else:
        failed = [x for x in r.stdout.splitlines() if x.startswith(("FAILED", "ERROR"))]
        first = (failed or [counts])[0].removeprefix("FAILED ")
        text = f"FAILED: {first[:200]}" + (
            f"; measured before: {measured}" if measured else "")
    _RAN[fault.tests] = Outcome(fault, r.returncode == 0, text, seconds)
    return _RAN[fault.tests]


def machine() -> str:
    """Cores, CPU model, memory, GPU or not, OS and Python: whose seconds these are."""
    model, virtual = platform.machine(), False
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == platform.machine():
                model = line.split(":", 1)[1].strip()
            virtual = virtual or (line.startswith("flags") and " hypervisor" in line)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = "a GPU" if shutil.which("nvidia-smi") else "no GPU"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()}-core {model}{' (virtual machine)' if virtual else ''}, "
            f"{memory:.0f} GiB, {gpu}; {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}; load average at the start {load}")


def _seconds(o: Outcome) -> str:
    """The row's wall time, or which row ran its tests."""
    return o.notes[0] if o.notes else f"{o.seconds:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated row keys")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    wanted = {k.strip() for k in args.only.split(",") if k.strip()}
    rows = [f for f in FAULTS if not wanted or f.key in wanted]
    outcomes = []
    here = machine()
    with RedisServer() as redis:  # for the wrong-password row
        for fault in rows:
            out = run_cli(fault, redis.url) if fault.cli else run_tests(fault)
            outcomes.append(out)
            print(f"[{out.seconds:6.1f}s] {fault.key:>3} {'ok' if out.ok else 'NOT OK'}: "
                  f"{out.text}", file=sys.stderr, flush=True)
    if args.markdown:
        print(f"Machine: {here}\n")
        print("| # | fault | promise | outcome | s |\n|---|---|---|---|---|")
        for o in outcomes:
            text = o.text.replace("|", "\\|")
            print(f"| {o.fault.key} | {o.fault.fault} | {o.fault.promise} | {text} | "
                  f"{_seconds(o)} |")
    else:
        print(f"machine: {here}")
        for o in outcomes:
            print(f"{o.fault.key:>3}  {o.fault.fault[:50]:50}  {_seconds(o):>6}  {o.text}")
    bad = [o.fault.key for o in outcomes if not o.ok]
    print(f"{len(outcomes) - len(bad)}/{len(outcomes)} rows hold"
          + (f"; not holding: {', '.join(bad)}" if bad else ""), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
