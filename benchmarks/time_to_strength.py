"""Time to strength: wall-clock minutes of training until a run's net scores at least
``--target`` against an anchor (default: 90% against pure MCTS with 1,000 playouts).

Each (config, seed) is a real run started as a user starts it (``zeroforge train --local``)
with a weight snapshot every ``--snapshot-every`` seconds. This process evaluates the
snapshots as they appear (the agent plays ``--sims`` simulations a move of the preset's
PUCT search, no noise, against the anchor, colours alternating) and stops the run cleanly
once the target is *held*: the median score of ``--hold`` (3) snapshots in a row reaches it,
and the last of them gives the run's time to strength (``tts_rule.held_minutes``; ``--hold
1``: the first snapshot at the target, a first crossing, as rows written before the flag
are). A run that never gets there counts as "more than ``--minutes``". The
headline is the median over seeds.

    # before/after a change: the same command with the change's settings, one label each
    python benchmarks/time_to_strength.py --config gomoku6 --config gomoku8 --seeds 0 1 2 \\
        --minutes 60 --label before --json runs/tts-before.json
    python benchmarks/time_to_strength.py --config gomoku6 --config gomoku8 --seeds 0 1 2 \\
        --minutes 60 --label after --json runs/tts-after.json \\
        --set search.full_search_prob=0.25 --set search.reuse_tree=true

On a 2-core machine give the run one core and the evaluation the other (``--train-cpus 1
--eval-cpus 0``): the evaluation then takes nothing from the run it measures. Or run two
seeds side by side, a core each, each judging its snapshots once its run has ended
(``--eval-after``; the run then lasts its whole ``--minutes``, and its time to strength is
still the first snapshot at the target):

    python benchmarks/time_to_strength.py --config go9 --seeds 0 --minutes 40 --eval-after \\
        --train-cpus 0 --json runs/tts-go9-seed0.json &
    python benchmarks/time_to_strength.py --config go9 --seeds 1 --minutes 40 --eval-after \\
        --train-cpus 1 --json runs/tts-go9-seed1.json

With ``--eval-after --stages 10 20`` the run pauses at 10 and 20 minutes of training (its
learner time), its snapshots so far are judged, and it goes on (``zeroforge train
--resume``) only if none reached the target: a run that gets there early costs its stage,
not the whole ``--minutes``.

Judging is the slow part of a staged run on Go (20 games against ``uct:1000`` take minutes a
snapshot); ``--judge-cpus 0 1`` scores several snapshots at once, a child process on each
core, when those cores are free (no other run on them): the scores are those of judging one
at a time (the same games: the run's seed, one thread each), recorded in snapshot order.

Rows already in the ``--json`` file (same measurement) are not run again, so an interrupted
table goes on where it stopped. A staged run keeps its progress (the stages trained, the
snapshots judged) in ``RUN_DIR/tts-progress.json``: stopped part way (Ctrl-C, SIGTERM, the
end of a sitting), the same command goes on with it from its checkpoint instead of starting
it again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from learn_vs_uct import (  # benchmarks/ (scripts run from here)
    earlier_rows,
    load_net,
    match_table,
)
from machine import load_averages, machine_line
from tts_rule import held_minutes, median_cell, minutes_cell

from zeroforge.deploy.config import TrainConfig, load_train_config
from zeroforge.learner.learner import CheckpointError, load_checkpoint
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import TorchEvaluator
from zeroforge.shared.run_files import SNAPSHOT_DIR, snapshot_files

POLL_S = 2.0
"""How often the run dir is looked at for new snapshots while nothing is left to evaluate."""
PROGRESS = "tts-progress.json"
"""A staged run's progress in its run dir (``save_progress``), for going on with it."""


@dataclass
class SeedResult:
    """One run: the snapshots it made, their scores, and when it first reached the target."""

    config: str
    seed: int
    minutes_to_target: float | None = None
    """Training minutes at which the target was held (``tts_rule.held_minutes``: the last
    snapshot of the first ``hold`` in a row whose median score reaches it); None: never."""
    hold: int = 1
    """Snapshots whose median must reach the target (``--hold``; rows written before it
    have 1: the first snapshot at the target)."""
    first_crossing: float | None = None
    """Training minutes of the first snapshot at or above the target; None: never."""
    points: list[dict] = field(default_factory=list)
    """``{"minutes", "score", "wins", "draws", "losses", "distinct_games", "effective_games"}``
    of each evaluated snapshot (rows written before 2026-12-05 have neither of the last two)."""
    run_minutes: float = 0.0
    """Wall-clock minutes the run was alive (it stops early when the target is reached)."""
    positions_per_s: float | None = None
    """Self-play positions per second over the whole run (its final status); None: unknown."""
    steps_per_s: float | None = None
    """Learner steps per second over the whole run (its final status); None: unknown."""
    samples_per_insert: dict | None = None
    """The learner's samples-per-insert ratio once it trained (``history.jsonl``): ``min``,
    ``median``, ``max``, ``final`` and ``below_floor`` (the share of samples under the
    target x (1 - tolerance)); None: no history."""
    started: str = ""
    """When the run started (UTC), so the load on the machine can be looked up."""
    machine: str = ""
    """``machine.machine_line()`` at the start: the CPU and the load averages then."""
    load_end: str = ""
    """The 1-, 5- and 15-minute load averages when the run and its judging ended."""
    resumed: list[str] = field(default_factory=list)
    """``machine_line()`` of each later sitting a staged run went on in (empty: it ran in
    one), so a run that changed hosts shows it."""


def run_counts(run_dir: Path) -> tuple[float, float, float] | None:
    """(self-play positions, learner steps, seconds) of a stopped run's last invocation,
    from its final ``status.json``; None if it wrote none. The positions and seconds are
    that invocation's; the learner steps are the run's (a resumed learner restores them)."""
    try:
        status = json.loads((run_dir / "status.json").read_text())
        return (float(status["positions"]), float(status["learner_steps"]),
                float(status["elapsed_s"]))
    except (OSError, ValueError, KeyError):
        return None


def run_rates(counts: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """(self-play positions/s, learner steps/s) over a run's invocations (their
    ``run_counts``, in order): positions and seconds add up, the learner's steps are the
    last invocation's (the run's); None if there are none or no time passed."""
    seconds = sum(c[2] for c in counts)
    if not counts or seconds <= 0:
        return None
    return sum(c[0] for c in counts) / seconds, counts[-1][1] / seconds


def ratio_summary(run_dir: Path) -> dict | None:
    """The samples-per-insert figures of ``SeedResult.samples_per_insert`` from the run's
    metric history (a sample every ``run.dashboard_interval_s``, changed values only)."""
    try:
        lines = (run_dir / "history.jsonl").read_text().splitlines()
    except OSError:
        return None
    current: dict = {}
    ratios, floor = [], None
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        current.update(row.get("v", {}))
        floor = current.get("learner_samples_per_insert_floor", floor)
        if current.get("learner_steps_total") and "learner_samples_per_insert" in current:
            ratios.append(float(current["learner_samples_per_insert"]))
    if not ratios:
        return None
    below = sum(r < floor for r in ratios) / len(ratios) if floor else None
    return {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios),
            "final": ratios[-1], "floor": floor, "below_floor": below}


def cells(result: SeedResult, limit: float) -> str:
    """``12.0`` or ``>60`` for the table."""
    return minutes_cell(result.minutes_to_target, limit)


def median_minutes(results: list[SeedResult], limit: float) -> str:
    """Median of the seeds' minutes (``tts_rule.median_cell``)."""
    return median_cell((r.minutes_to_target for r in results), limit)


def start_run(args, config_name: str, seed: int, run_dir: Path, minutes: float,
              resume: bool = False) -> subprocess.Popen:
    """``zeroforge train --local`` for one seed (``--distributed``: ``zeroforge train``, a
    Ray run of its own with its own Redis, no evaluator actor) for ``minutes``, its output
    in ``run_dir/train.log``; ``resume``: ``--resume`` the run from its checkpoint (the
    log goes on)."""
    mode = ["--set", "distributed.evaluator=false"] if args.distributed else ["--local"]
    cmd = [sys.executable, "-m", "zeroforge", "train", *mode, "--config", config_name,
           "--seed", str(seed), "--run-dir", str(run_dir), "--minutes", str(minutes),
           "--set", f"learner.snapshot_every_s={args.snapshot_every}",
           "--set", "evaluation.every_s=0", *(["--resume"] if resume else [])]
    for override in args.overrides:
        cmd += ["--set", override]
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(run_dir / "train.log", "a" if resume else "w")  # noqa: SIM115 - closed when the run ends
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cpus = args.train_cpus

    def pin() -> None:  # in the child, before exec: the run gets only its own cores
        if cpus:
            os.sched_setaffinity(0, cpus)

    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=pin, cwd=Path(__file__).resolve().parents[1])


def stop_run(proc: subprocess.Popen) -> None:
    """Ctrl-C for the run (final checkpoint), then wait; kill if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_limit(proc: subprocess.Popen, deadline: float) -> None:
    """Until the run ends by itself or ``deadline`` (``time.monotonic``) passes."""
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(POLL_S)


def agent_config(config_name: str, args: argparse.Namespace) -> TrainConfig:
    """The config the evaluated agent searches with: the preset's search as PUCT (Gumbel
    off, whatever the preset's self-play uses) plus ``--eval-set``. The run's
    ``--set search.*`` overrides change how self-play searches and do not reach the agent,
    so every variant of a config is judged by the same yardstick (the other overrides, e.g.
    of the net, do apply: the snapshot must load)."""
    kept = [o for o in args.overrides if not o.startswith("search.")]
    return load_train_config(config_name,
                             kept + ["search.gumbel=false"] + list(args.eval_overrides))


class SnapshotJudge:
    """Judges a run's snapshots in the order they were written, each once, into a
    ``SeedResult``, and says when one reached the target."""

    def __init__(self, args, config_name: str, seed: int, run_dir: Path,
                 result: SeedResult, on_judged=lambda: None) -> None:
        self.args, self.seed, self.run_dir, self.result = args, seed, run_dir, result
        self.on_judged = on_judged
        """Called after each snapshot's score is in ``result`` (saves the progress)."""
        self.config = load_train_config(config_name, list(args.overrides))
        self.judged = agent_config(config_name, args)
        self.game = make_game(self.config.game)
        self.seen: set[Path] = set()

    def fresh(self) -> list[tuple[float, Path]]:
        """The snapshots not judged yet, oldest first."""
        return [(s, p) for s, p in snapshot_files(self.run_dir) if p not in self.seen]

    def score(self, path: Path) -> dict:
        """The match of one snapshot against the anchor: ``{"score", "wins", "draws",
        "losses", "distinct_games", "effective_games"}``. The same games wherever it runs
        (the run's seed, one thread), unless the anchor draws on randomness of its own (a
        GTP engine such as GnuGo)."""
        a = self.args
        evaluator = TorchEvaluator(load_net(self.game, self.config, path, self.seed))
        match, _ = match_table(self.game, evaluator, self.judged, a.sims, a.anchor, a.games,
                               self.seed)
        return match.counts()

    def record(self, seconds: float, path: Path, match: dict) -> bool:
        """Add a snapshot's match to the result; True if it reached the target (then it
        is the run's time to strength)."""
        r = self.result
        self.seen.add(path)
        minutes = seconds / 60
        r.points.append({"minutes": minutes, **match})
        print(f"  {r.config} seed {self.seed}: {minutes:5.1f} min  score "
              f"{match['score']:.0%} (+{match['wins']} ={match['draws']} "
              f"-{match['losses']}; {match['distinct_games']} distinct games)", flush=True)
        if match["score"] >= self.args.target and r.first_crossing is None:
            r.first_crossing = minutes
        r.hold = self.args.hold
        r.minutes_to_target = held_minutes(r.points, self.args.target, self.args.hold)
        self.on_judged()
        return r.minutes_to_target is not None

    def judge(self, seconds: float, path: Path) -> bool:
        """Score one snapshot here and record it (``record``)."""
        return self.record(seconds, path, self.score(path))

    def judge_written(self) -> bool:
        """Judge every snapshot written so far, in order, up to the first at the target;
        with ``--judge-cpus`` several at once, a child process a core."""
        fresh = self.fresh()
        if self.args.judge_cpus and len(fresh) > 1:
            return self._judge_in_children(fresh, self.args.judge_cpus)
        return any(self.judge(seconds, path) for seconds, path in fresh)

    def _judge_in_children(self, fresh: list[tuple[float, Path]], cpus: list[int]) -> bool:
        """``judge_written`` with each snapshot scored by this script in a child
        (``--judge-snapshot``) pinned to a free core of ``cpus``; scores are recorded in
        snapshot order, so the result is the serial one, and at the first snapshot at the
        target the children still playing later ones are stopped, their games unused."""
        print(f"  {self.result.config} seed {self.seed}: judging {len(fresh)} snapshots, "
              f"a child on each of cores {' '.join(map(str, cpus))}", flush=True)
        queue = list(enumerate(fresh))
        running: dict[int, tuple[subprocess.Popen, int, Path]] = {}  # cpu: (child, i, out)
        scores: dict[int, dict] = {}
        done = 0
        try:
            while done < len(fresh):
                for cpu in cpus:
                    if queue and cpu not in running:
                        i, (_, path) = queue.pop(0)
                        child, out = self._start_child(path, cpu)
                        running[cpu] = (child, i, out)
                for cpu, (child, i, out) in list(running.items()):
                    if child.poll() is not None:
                        del running[cpu]
                        scores[i] = self._child_score(child, out, fresh[i][1])
                while done in scores:
                    if self.record(*fresh[done], scores.pop(done)):
                        return True
                    done += 1
                time.sleep(0.5)
            return False
        finally:
            for child, _, _ in running.values():
                child.kill()
                child.wait()

    def _start_child(self, path: Path, cpu: int) -> tuple[subprocess.Popen, Path]:
        """This script, with this run's flags, scoring ``path`` on core ``cpu``; its
        output (the score as the last line, JSON) goes to a file beside the snapshot."""
        out = path.with_name(path.name + ".judge.log")
        cmd = [sys.executable, str(Path(__file__).resolve()), *self.args.argv,
               "--judge-snapshot", self.result.config, str(self.seed), str(path)]
        with open(out, "w") as log:
            child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "OMP_NUM_THREADS": "1"},
                                     preexec_fn=lambda: os.sched_setaffinity(0, [cpu]))
        return child, out

    @staticmethod
    def _child_score(child: subprocess.Popen, out: Path, path: Path) -> dict:
        """The score a child printed; a child that failed ends this script in one line."""
        lines = out.read_text().splitlines()
        try:
            if child.returncode != 0:
                raise ValueError(f"exit {child.returncode}")
            score = json.loads(lines[-1])
        except (ValueError, IndexError) as err:
            raise SystemExit(f"time_to_strength: judging {path} failed ({err}); its "
                             f"output: {out}") from None
        out.unlink()
        return score


def stage_bounds(args) -> list[float]:
    """The learner minutes at which an ``--eval-after`` run pauses to be judged: each of
    ``--stages`` below ``--minutes``, then ``--minutes``."""
    return sorted(m for m in set(args.stages) if 0 < m < args.minutes) + [args.minutes]


def run_stages(args, config_name: str, seed: int, run_dir: Path, judge: SnapshotJudge,
               counts: list[tuple[float, float, float]],
               save: Callable[[], None]) -> subprocess.Popen | None:
    """``--eval-after --stages``: train to each bound in turn (``--resume`` once the run
    has a checkpoint), judging the snapshots after each; stops at the first snapshot at
    the target. A stage ends at its first snapshot within half a snapshot interval of its
    bound, so the pauses cost wall time but no learner time; a bound the run's snapshots
    already reach (a run going on from its progress) trains nothing. Appends each stage's
    ``run_counts`` and calls ``save`` after it; returns the last stage's process (stopped;
    None if none ran)."""
    proc = None
    if judge.result.minutes_to_target is None:
        judge.judge_written()  # a run going on: its last stage's snapshots not judged yet
    for bound in stage_bounds(args):
        if judge.result.minutes_to_target is not None:
            break
        due_s = bound * 60 - args.snapshot_every / 2
        written = [s for s, _ in snapshot_files(run_dir)]
        if not any(s >= due_s for s in written):
            # the run's own limit, a minute past the bound, is only a backstop
            proc = start_run(args, config_name, seed, run_dir,
                             bound - max(written, default=0) / 60 + 1,
                             resume=(run_dir / "checkpoint.pt").is_file())
            try:
                while proc.poll() is None and not any(s >= due_s for s, _ in judge.fresh()):
                    time.sleep(POLL_S)
            finally:  # SIGTERM or Ctrl-C to this script alone: the run must stop with it
                stop_run(proc)
            stage = run_counts(run_dir)
            if stage is not None:
                counts.append(stage)
            save()
            if proc.returncode not in (0, -signal.SIGINT, 130):
                break
        judge.judge_written()
    return proc


def save_progress(run_dir: Path, key: dict, result: SeedResult, judged: set[Path],
                  counts: list[tuple[float, float, float]], wall_s: float) -> None:
    """Write ``RUN_DIR/tts-progress.json`` (atomically): the measurement it belongs to, the
    result so far, the snapshots judged, the stages' counts and the wall seconds spent."""
    doc = {"key": key, "result": result.__dict__, "judged": sorted(p.name for p in judged),
           "counts": counts, "wall_s": wall_s}
    tmp = run_dir / (PROGRESS + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(run_dir / PROGRESS)


def restore_progress(run_dir: Path, key: dict, result: SeedResult, judged: set[Path],
                     counts: list[tuple[float, float, float]]) -> float:
    """Go on with a staged run from its progress file: fills ``result``, ``judged`` and
    ``counts`` and returns the wall seconds already spent. Snapshots written after the
    run's checkpoint (a run killed mid-stage) are deleted: the resumed learner trains that
    time again. A run dir without a progress file is set aside (``-set-aside-TIME``) and
    the run starts afresh; one holding another measurement's progress is an error."""
    path = run_dir / PROGRESS
    if not path.is_file():
        if run_dir.exists():
            aside = run_dir.with_name(f"{run_dir.name}-set-aside-{int(time.time())}")
            run_dir.rename(aside)
            print(f"  {run_dir}: no {PROGRESS}, so not a staged run of this script to go "
                  f"on with: moved to {aside}, starting afresh", flush=True)
        return 0.0
    doc = json.loads(path.read_text())
    if doc.get("key") != key:
        raise SystemExit(f"time_to_strength: {path} belongs to another measurement (other "
                         f"flags or --set); give this one another --out or --label")
    now = result.machine
    for name, value in doc["result"].items():
        setattr(result, name, value)
    result.resumed = [*result.resumed, now]
    judged |= {run_dir / SNAPSHOT_DIR / name for name in doc["judged"]}
    counts.extend(tuple(c) for c in doc["counts"])
    try:
        trained_s = float(load_checkpoint(run_dir / "checkpoint.pt")["extra"]["trained_s"])
    except (CheckpointError, KeyError, TypeError, ValueError):
        trained_s = 0.0  # no usable checkpoint: the run starts its training again
    for seconds, snap in snapshot_files(run_dir):
        if seconds > trained_s + 1 and snap not in judged:
            snap.unlink()
            print(f"  {snap}: past the run's checkpoint ({trained_s:.0f} s), deleted",
                  flush=True)
    print(f"  {run_dir}: going on from {PROGRESS} ({len(result.points)} snapshots judged)",
          flush=True)
    return float(doc["wall_s"])


def measure_seed(args, config_name: str, seed: int, out_root: Path,
                 key: dict | None = None) -> SeedResult:
    """Run one seed, evaluating its snapshots as they come, until the target or the end.
    A staged run (``--eval-after --stages``) keeps its progress under ``key`` (the
    measurement: the ``--json`` header, config and seed) and goes on from it."""
    run_dir = out_root / f"{Path(config_name).stem}-seed{seed}"
    result = SeedResult(config_name, seed,
                        started=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        machine=machine_line())
    counts: list[tuple[float, float, float]] = []
    staged = bool(args.eval_after and args.stages)
    judged: set[Path] = set()
    earlier_s = 0.0
    if staged:
        key = {**(key or {}), "config": config_name, "seed": seed}
        earlier_s = restore_progress(run_dir, key, result, judged, counts)
        run_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    def save() -> None:
        if staged:
            save_progress(run_dir, key, result, judge.seen, counts,
                          earlier_s + time.monotonic() - start)

    judge = SnapshotJudge(args, config_name, seed, run_dir, result, on_judged=save)
    judge.seen |= judged
    proc = None
    try:
        if staged:
            save()
            proc = run_stages(args, config_name, seed, run_dir, judge, counts, save)
        else:
            # --eval-after stops the run itself at --minutes (Ctrl-C: no final
            # evaluation); the run's own limit, a little later, is only a backstop
            proc = start_run(args, config_name, seed, run_dir,
                             args.minutes + (1 if args.eval_after else 0))
            if args.eval_after:
                # the whole run first, its snapshots judged afterwards on the same cores
                # (or on --judge-cpus)
                wait_for_limit(proc, start + args.minutes * 60)
                stop_run(proc)
                judge.judge_written()
            else:
                while True:
                    alive = proc.poll() is None  # first: a run that ended has written all
                    fresh = judge.fresh()
                    if fresh:
                        if judge.judge(*fresh[0]):
                            break
                    elif not alive:
                        break
                    else:
                        time.sleep(POLL_S)
    finally:
        if proc is not None:
            stop_run(proc)
        result.run_minutes = (earlier_s + time.monotonic() - start) / 60
        result.load_end = load_averages()
    result.samples_per_insert = ratio_summary(run_dir)
    if result.samples_per_insert:
        r = result.samples_per_insert
        print(f"  {config_name} seed {seed}: samples per insert min {r['min']:.1f} median "
              f"{r['median']:.1f} max {r['max']:.1f} final {r['final']:.1f}", flush=True)
    if not counts and (last := run_counts(run_dir)) is not None:
        counts.append(last)
    rates = run_rates(counts)
    if rates is not None:
        result.positions_per_s, result.steps_per_s = rates
        print(f"  {config_name} seed {seed}: the run made {result.positions_per_s:.0f} "
              f"self-play positions/s and {result.steps_per_s:.1f} learner steps/s",
              flush=True)
    if proc is not None and proc.returncode not in (0, -signal.SIGINT, 130):
        raise SystemExit(f"time_to_strength: the run {run_dir} failed (exit "
                         f"{proc.returncode}); its log: {run_dir / 'train.log'}")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", dest="configs", action="append", required=True,
                        help="preset name or config file (repeatable)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--minutes", type=float, default=60.0, help="longest run")
    parser.add_argument("--snapshot-every", type=float, default=120.0, metavar="SECONDS")
    parser.add_argument("--anchor", default="uct:1000", help="a player spec")
    parser.add_argument("--games", type=int, default=20, help="games per snapshot")
    parser.add_argument("--sims", type=int, default=400, help="agent simulations a move")
    parser.add_argument("--target", type=float, default=0.9, help="score to reach")
    parser.add_argument("--hold", type=int, default=3, metavar="N",
                        help="the target is held when the median of N snapshots in a row "
                             "reaches it (1: the first snapshot at it)")
    parser.add_argument("--label", default="", help="name of this variant in the table")
    parser.add_argument("--out", default="runs/time-to-strength", help="where runs go")
    parser.add_argument("--json", default=None, help="rows also here (and resumed from)")
    parser.add_argument("--distributed", action="store_true",
                        help="a distributed run (Ray, Redis) instead of --local; the times "
                        "count from the learner's start, after Ray and the actors are up")
    parser.add_argument("--train-cpus", type=int, nargs="*", default=None)
    parser.add_argument("--eval-cpus", type=int, nargs="*", default=None)
    parser.add_argument("--judge-cpus", type=int, nargs="+", default=None,
                        help="with --eval-after: judge several snapshots at once, a child "
                        "process on each of these cores (the same scores as one at a "
                        "time, recorded in order), e.g. the cores of runs that are done")
    parser.add_argument("--judge-snapshot", nargs=3, metavar=("CONFIG", "SEED", "PATH"),
                        default=None, help=argparse.SUPPRESS)  # a --judge-cpus child
    parser.add_argument("--eval-after", action="store_true",
                        help="judge the snapshots after the run's --minutes instead of "
                        "while it runs: the run and its judging then share --train-cpus "
                        "in turn, so two seeds can run side by side, a core each")
    parser.add_argument("--stages", type=float, nargs="+", default=[], metavar="MINUTES",
                        help="with --eval-after: pause the run at these minutes of "
                        "training, judge its snapshots so far, and go on (--resume) only "
                        "if none reached the target; a run that gets there early then "
                        "costs its stage, not the whole --minutes")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="KEY=VALUE override of the run's config (repeatable)")
    parser.add_argument("--eval-set", dest="eval_overrides", action="append", default=[],
                        help="KEY=VALUE override of the evaluated agent's config only, e.g. "
                        "search.gumbel=true; the run's search.* overrides never reach it")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.judge_snapshot:
        torch.set_num_threads(1)
        config_name, seed, path = args.judge_snapshot
        snapshot = Path(path)
        judge = SnapshotJudge(args, config_name, int(seed), snapshot.parents[1],
                              SeedResult(config_name, int(seed)))
        print(json.dumps(judge.score(snapshot)), flush=True)
        return
    if args.judge_cpus and not args.eval_after:
        parser.error("--judge-cpus needs --eval-after (the run's cores are free then)")
    # SIGTERM (a sitting's end) unwinds like Ctrl-C: the run gets its clean stop and a
    # staged run keeps its progress
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not 0 < args.target <= 1:
        parser.error("--target must be in (0, 1]")
    if args.hold < 1:
        parser.error("--hold must be >= 1")
    if args.stages and not args.eval_after:
        parser.error("--stages needs --eval-after")
    if args.eval_after and args.eval_cpus is None:
        args.eval_cpus = args.train_cpus
    if args.eval_cpus:
        os.sched_setaffinity(0, args.eval_cpus)
    torch.set_num_threads(1)
    print(machine_line())
    header = {"anchor": args.anchor, "games": args.games, "sims": args.sims,
              "target": args.target, "minutes": args.minutes,
              "snapshot_every": args.snapshot_every, "overrides": args.overrides,
              "eval_overrides": args.eval_overrides,
              **({"eval_after": True} if args.eval_after else {}),
              **({"stages": stage_bounds(args)[:-1]} if args.stages else {}),
              # only when set: files measured before the flag existed stay comparable
              **({"distributed": True} if args.distributed else {}),
              # a level held (median of N): rows of first crossings (no "hold") differ
              **({"hold": args.hold} if args.hold != 1 else {})}
    rows = earlier_rows(args.json, header, prog="time_to_strength")
    out_root = Path(args.out) / (args.label or "run")
    for config_name in args.configs:
        for seed in args.seeds:
            if any(r["config"] == config_name and r["seed"] == seed for r in rows):
                continue
            r = measure_seed(args, config_name, seed, out_root, header)
            rows.append(r.__dict__)
            if args.json:
                Path(args.json).write_text(json.dumps({**header, "rows": rows}, indent=1)
                                           + "\n")
    label = f" ({args.label})" if args.label else ""
    held = f"held (median of {args.hold} snapshots in a row) " if args.hold > 1 else ""
    print(f"\nminutes of training until {held}>= {args.target:.0%} against {args.anchor}"
          f"{label}, "
          f"{args.games} games a snapshot, agent {args.sims} simulations")
    print("| config | " + " | ".join(f"seed {s}" for s in args.seeds) + " | median |")
    print("|---|" + "---:|" * (len(args.seeds) + 1))
    for config_name in args.configs:
        mine = [SeedResult(**r) for r in rows if r["config"] == config_name]
        by_seed = {r.seed: r for r in mine}
        row = [cells(by_seed[s], args.minutes) if s in by_seed else "-" for s in args.seeds]
        print(f"| {config_name} | " + " | ".join(row) + f" | "
              f"{median_minutes(mine, args.minutes)} |")


if __name__ == "__main__":
    main()
