"""A ``zeroforge train`` on the netns test bed, driven from its ``head`` host as a user
would (``zeroforge status`` / ``scale`` / ``stop`` there too), and the audit of where its
games went (the chaos test's ledger, with the auditor inside the ``redis`` host)."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.test_chaos import Auditor, Ledger, checkpoint_received
from tests.netbed import Bed
from tests.processes import read_lines
from zeroforge.learner.learner import load_checkpoint
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.transport import connect

ZEROFORGE = str(Path(sys.executable).with_name("zeroforge"))
SETTINGS = [
    "net=tiny", "search.num_simulations=8", "selfplay.games_in_parallel=8",
    "learner.min_replay=64", "learner.batch_size=32", "learner.publish_every_steps=5",
    "learner.checkpoint_every_s=1", "run.progress_every_s=2", "distributed.evaluator=false",
    "distributed.inference=local", "distributed.monitor_interval_s=0.5",
    # workers only on the nodes (their zf_selfplay slots), one per node where they fit;
    # the learner on the head (the only CPUs of the bed)
    "distributed.worker_cpus=0", "distributed.learner_cpus=1",
    "distributed.worker_resource=zf_selfplay", "distributed.worker_spread=true",
    "selfplay.cpu_share=0.25",  # the bed runs beside other tests: a quarter core a worker
    # every bed test ends its run itself (``stop``): the preset's 3 minutes ended one on a
    # slow CI host while it was still scaling (test_scale_2_6_1: "train ended early")
    "run.minutes=0",
]
"""The bed's tiny tic-tac-toe run."""


class BedAuditor(Auditor):
    """The chaos test's auditor, also noting the newest weights version each worker's
    games were played with (weights that came back across the network)."""

    def __init__(self, url: str, run_id: str, shard: int = 0) -> None:
        self.weights_by_worker: dict[str, int] = collections.defaultdict(int)
        super().__init__(url, run_id, shard)

    def note(self, game: GameSamples) -> None:
        w = self.weights_by_worker
        w[game.worker_id] = max(w[game.worker_id], game.weights_version)


class BedRun:
    """``zeroforge train --address HEAD --redis-url redis://redis:PORT/0`` on ``head``."""

    def __init__(self, bed: Bed, run_dir: Path, run_id: str, *settings: str,
                 redis_url: str | None = None, args: tuple[str, ...] = (),
                 shards: tuple[tuple[int, int], ...] = (),
                 auditors: list[BedAuditor] | None = None) -> None:
        """``shards``: ``(redis port, shard)`` of each stream shard to audit (default: the
        one stream, on the bed's redis-server); ``auditors``: those of an earlier driver
        of this run that are still reading (a driver that died mid-run)."""
        self.bed, self.run_dir, self.run_id = bed, run_dir, run_id
        url = redis_url or bed.redis_url
        # the auditors read the streams from inside the redis host (before the run starts:
        # they see every entry); straight to redis-server, never through a relay
        self.auditors = auditors or [bed.call_in("redis", lambda p=port, k=shard: BedAuditor(
            bed.admin_url(p), run_id, k))
            for port, shard in (shards or ((bed.config.redis_port, 0),))]
        self.auditor = self.auditors[0]
        sets = [a for s in (*SETTINGS, *settings) for a in ("--set", s)]
        self.proc = bed.popen("head", [
            ZEROFORGE, "train", "--config", "tictactoe", "--address", bed.ray_address,
            "--redis-url", url, "--run-dir", str(run_dir), "--run-id", run_id, *args, *sets],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines, self._reader = read_lines(self.proc)
        self.killed = False
        """The driver had to be killed (its detached actors may be left on the bed)."""

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A ``zeroforge`` command on ``head`` about this run."""
        return self.bed.run("head", [ZEROFORGE, *args, "--run-id", self.run_id, "--address",
                                     self.bed.ray_address], timeout=timeout)

    def status(self) -> dict:
        r = self.cli("status", "--json")
        assert r.returncode == 0, f"status: {r.stderr[-2000:]}\n{self.output[-3000:]}"
        return dict(json.loads(r.stdout))

    def status_when(self, check: Callable[[dict], bool], timeout: float = 180,
                    what: str = "") -> dict:
        """Poll status until ``check`` holds; fail after ``timeout`` with the last one."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"train ended early:\n{self.output[-3000:]}"
            with contextlib.suppress(AssertionError, json.JSONDecodeError):
                st = self.status()
                if check(st):
                    return st
            assert time.monotonic() < deadline, (
                f"{what or 'condition'} not met in {timeout} s; last status "
                f"{json.dumps(st) if 'st' in locals() else '-'}\n{self.output[-3000:]}")
            time.sleep(1.0)

    def scale(self, workers: int) -> None:
        r = self.cli("scale", "--workers", str(workers))
        assert r.returncode == 0, r.stderr

    def stop(self, timeout: float = 180) -> str:
        """``zeroforge stop``; waits for the driver to end; returns the stop's output."""
        r = self.cli("stop", timeout=timeout)
        assert r.returncode == 0, f"stop: {r.stderr}\n{self.output[-3000:]}"
        code = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        assert code == 0, f"train exited {code}:\n{self.output[-3000:]}"
        return r.stdout

    def ledger(self) -> Ledger:
        """After ``stop``: every appended game id against the learner's final checkpoint
        (the workers' own id lists are not read: that needs a Ray driver in the bed)."""
        appended: collections.Counter[str] = collections.Counter()
        for auditor in self.auditors:
            auditor.finish()
            assert auditor.undecodable == 0
            appended += auditor.appended
        saved = load_checkpoint(self.run_dir / "checkpoint.pt")["extra"]
        return Ledger(appended, checkpoint_received(saved),
                      int(saved["games_received"]), set(),
                      {str(k): int(v) for k, v in saved.get("rejected", {}).items()})

    def where(self, game_id: str) -> str:
        """Which shard's audit saw ``game_id``, its entry id (Redis' clock, epoch ms) and
        whether that shard's stream still holds the entry (for a ledger's problems)."""
        for shard, auditor in enumerate(self.auditors):
            entry = auditor.entry_of.get(game_id)
            if entry is None:
                continue
            try:
                held = bool(self.bed.call_in("redis", lambda a=auditor, e=entry: connect(
                    a.url).xrange(a.key, e, e)))
            except Exception as err:  # noqa: BLE001 (a diagnostic: say what went wrong)
                held = f"unknown ({err})"
            return f"shard {shard}, entry {entry.decode()}, still in the stream: {held}"
        return "no audit saw it"

    def close(self) -> None:
        """End the driver if the test did not: SIGTERM (it stops the run and kills its
        actors), then SIGKILL."""
        for auditor in self.auditors:
            with contextlib.suppress(Exception):
                auditor.finish(5)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.killed = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._reader.join(10)


def assert_exactly_once(run: BedRun) -> Ledger:
    """After ``run.stop()``: the ledger, printed, with games in it and no problem."""
    ledger = run.ledger()
    print(ledger.table())
    for game_id, outcome in ledger.outcomes().items():
        if not outcome.startswith("trained once"):
            print(f"{game_id}: {outcome}; {run.where(game_id)}")
    assert len(ledger.appended) > 0
    assert ledger.problems() == []
    return ledger


def ips(st: dict, kind: str = "selfplay") -> list[str]:
    """Node IPs of the alive workers of ``kind``, by actor index: an actor's IP once for
    each worker it runs (a node host's row counts its workers)."""
    return [row["ip"] for row in sorted(st["actors"], key=lambda r: r["index"])
            if row["kind"] == kind and row["state"] == "alive"
            for _ in range(int(row.get("workers", 1)))]
