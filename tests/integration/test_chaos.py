"""Chaos: kill -9 a self-play worker, the learner, the run's controller or the
redis-server at random (seeded) moments of a real distributed run, then prove with a
ledger where every game went.

A killed controller is replaced by the run's handle (as the driver does: it polls the
controller's state every half second and, finding it dead, starts a successor that adopts
the live, detached actors); its actors keep playing and training meanwhile.

The ledger compares two records kept apart from the processes that get killed:

- **appended**: every entry ever added to the run's sample stream, read by an *auditor*
  (this test's own consumer group ``audit`` on the stream, created before the run; the
  stream trims an entry only once every group has acknowledged it, and the group lives in
  Redis' append-only file, so it survives the redis-server's deaths). A killed worker's
  in-memory list of game ids dies with it; the stream's copy does not.
- **received**: the learner's final checkpoint (every game id the run's learners received,
  ``received_games``, and its ``games_received`` counter): the games in the replay
  window's lineage that survived
  every learner death (a dead learner's games after its last checkpoint were not
  acknowledged, so the stream delivered them again to its successor).

What a passing ledger proves: every game id appended to the stream is in the final
learner's replay lineage exactly once (no id twice, and the counter equals the number of
distinct ids, so no game was added twice under one id), or is named as lost with its
reason; nothing was received that no worker appended; the live workers' own lists of
appended ids are all in the audit (the audit sees what workers see); copies of one game in
the stream (a pipeline resent after Redis died mid-append) are counted and were dropped.
What it cannot prove: games a worker had *finished but not yet appended* when it was
killed existed only in its memory and are invisible to everyone (at most
``selfplay.games_in_parallel`` per worker kill); "trained" means "added to the replay
window once", not how often SGD sampled it. Every id is compared as a set, over the whole
run (before 2026-12-02 the learner kept only its last 10,000 ids and older games were
accounted by count).

Also checked all along: Prometheus counters (the controller's merged snapshot) and the
status counters never decrease, across controller restarts too, and status ``games`` is at
least ``games_received``.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
import redis

from tests.fault_report import report
from tests.integration.test_distributed import SETTINGS as DISTRIBUTED_SETTINGS
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.handle import RunHandle, start_run
from zeroforge.deploy.ray.naming import run_actor_names
from zeroforge.learner.learner import load_checkpoint
from zeroforge.learner.received_games import ReceivedGames
from zeroforge.shared.samples import GameSamples, decode
from zeroforge.shared.transport import FIELD, RedisServer, RedisServerConfig, connect, stream_key

SETTINGS = [*DISTRIBUTED_SETTINGS, "search.num_simulations=8", "selfplay.workers=2"]
"""The distributed tests' tiny run (later overrides win), with two workers."""
TARGETS = (("selfplay", 0.35), ("learner", 0.25), ("redis", 0.2), ("controller", 0.2))
"""What the loop kills, with the odds of each."""


class Auditor:
    """Reads every entry of the run's stream through its own consumer group and keeps
    the game ids (a Counter: a game appended twice shows as 2). Rides out Redis' deaths."""

    GROUP = "audit"

    def __init__(self, url: str, run_id: str, shard: int = 0) -> None:
        self.url, self.key = url, stream_key(run_id, shard)
        self.appended: collections.Counter[str] = collections.Counter()
        self.undecodable = 0
        self.entry_of: dict[str, bytes] = {}
        """Game id -> its first stream entry id (milliseconds since the epoch: when)."""
        self.entry_ms: list[int] = []
        """When each entry was appended (Redis' clock, in its id), in reading order."""
        self._entries: set[bytes] = set()
        self._client = connect(url)
        try:
            self._client.xgroup_create(self.key, self.GROUP, id="0", mkstream=True)
        except redis.ResponseError as err:  # a resumed run's auditor takes its group over
            if "BUSYGROUP" not in str(err):
                raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _read(self, start: str) -> int:
        block = 200 if start == ">" else None
        resp = self._client.xreadgroup(self.GROUP, "auditor", {self.key: start}, count=500,
                                       block=block)
        ids = []
        for _, entries in resp or []:
            for entry_id, fields in entries:
                ids.append(entry_id)
                if entry_id in self._entries:
                    continue
                self._entries.add(entry_id)
                self.entry_ms.append(_ms(entry_id))
                try:
                    game = decode(fields[FIELD])
                except Exception:
                    self.undecodable += 1
                    continue
                self.appended[game.game_id] += 1
                self.entry_of.setdefault(game.game_id, entry_id)
                self.note(game)
        if ids:
            self._client.xack(self.key, self.GROUP, *ids)
        return len(ids)

    def note(self, game: GameSamples) -> None:
        """Called once for each game entry read (a subclass keeps more of it)."""

    def _loop(self) -> None:
        while True:
            try:
                got = self._read("0") + self._read(">")
            except (redis.RedisError, OSError):
                time.sleep(0.2)
                continue
            if self._stop.is_set() and not got:
                return

    def first_append_after(self, wall: float) -> float | None:
        """Seconds from ``wall`` (``time.time()``) to the first entry appended after it,
        as Redis timed it (the entry's id); None while there is none."""
        after = [m for m in list(self.entry_ms) if m > wall * 1000]
        return min(after) / 1000 - wall if after else None

    def finish(self, timeout: float = 30.0) -> None:
        """Read to the end of the stream, then stop."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "auditor did not finish"
        self._client.close()


def checkpoint_received(extra: dict) -> list[str]:
    """Every game id in a learner checkpoint's lineage, for the whole run (its
    ``received_games``, ``learner.received_games``), from the checkpoint's ``extra``."""
    return list(ReceivedGames.from_state(dict(extra["received_games"])))


@dataclasses.dataclass
class Ledger:
    appended: collections.Counter[str]
    """Game id -> stream entries that carried it (the audit)."""
    received: list[str]
    """The final checkpoint's game ids (``checkpoint_received``: the whole run's)."""
    games_received: int
    """The final checkpoint's counter."""
    worker_ids: set[str]
    """Ids the live workers say they appended."""
    rejected: dict[str, int]

    def outcomes(self) -> dict[str, str]:
        """Each appended game id -> ``trained once``, or ``lost: REASON``."""
        got = collections.Counter(self.received)
        beyond_window = len(self.received) < self.games_received
        named = {r: n for r, n in self.rejected.items() if r != "duplicate" and n}
        out = {}
        for game_id in self.appended:
            n = got[game_id]
            if n == 1:
                out[game_id] = "trained once"
            elif n > 1:
                out[game_id] = f"trained {n} times"
            elif beyond_window:
                out[game_id] = "trained once (older than the id window: by count)"
            elif named:
                out[game_id] = f"lost: rejected by the learner ({named})"
            else:
                out[game_id] = "unaccounted"
        return out

    def problems(self) -> list[str]:
        found = []
        twice = [i for i, n in collections.Counter(self.received).items() if n > 1]
        if twice:
            found.append(f"received twice: {twice[:5]}")
        if len(self.received) > self.games_received:
            found.append(f"{len(self.received)} ids but games_received {self.games_received}")
        if len(self.received) == self.games_received and len(set(self.received)) != len(
                self.received):
            found.append("games_received counts a game twice")
        strangers = set(self.received) - set(self.appended)
        if strangers:
            found.append(f"received but never appended: {sorted(strangers)[:5]}")
        unseen = self.worker_ids - set(self.appended)
        if unseen:
            found.append(f"workers appended ids the audit never saw: {sorted(unseen)[:5]}")
        if len(self.received) < self.games_received and self.games_received != len(
                self.appended):
            found.append(f"by count: {len(self.appended)} appended, {self.games_received} "
                         "received")
        bad = collections.Counter(v for v in self.outcomes().values()
                                  if not v.startswith("trained once"))
        if bad:
            found.append(f"outcomes: {dict(bad)}")
        return found

    def figures(self) -> dict[str, int]:
        """The ledger in the fault table's words (``tests/fault_report.py``): games
        ``appended`` (distinct ids in the stream), ``trained`` (once), ``doubled``
        (trained more than once), ``lost`` (the rest: rejected or unaccounted), and the
        ``copies_dropped`` (entries of a game appended twice that the learner dropped)."""
        outcomes = collections.Counter(self.outcomes().values())
        trained = sum(n for k, n in outcomes.items() if k.startswith("trained once"))
        doubled = sum(n for k, n in outcomes.items() if k.endswith(" times"))
        return {"appended": len(self.appended), "trained": trained, "doubled": doubled,
                "lost": len(self.appended) - trained - doubled,
                "copies_dropped": int(self.rejected.get("duplicate", 0))}

    def table(self) -> str:
        rows = collections.Counter(self.outcomes().values())
        copies = sum(n - 1 for n in self.appended.values())
        lines = [f"{'games appended (distinct ids in the stream)':48} {len(self.appended):>8}",
                 f"{'  of which appended more than once (copies)':48} {copies:>8}",
                 f"{'games received (final checkpoint counter)':48} {self.games_received:>8}",
                 f"{'ids in the final checkpoint':48} {len(self.received):>8}",
                 f"{'duplicates dropped by the learner':48} "
                 f"{self.rejected.get('duplicate', 0):>8}"]
        lines += [f"{'outcome: ' + k:48} {n:>8}" for k, n in sorted(rows.items())]
        return "\n".join(lines)


@dataclasses.dataclass
class ChaosResult:
    kills: list[tuple[float, str, int]]
    """(seconds into the chaos, target, pid)."""
    ledger: Ledger
    final: dict
    decreases: list[str]
    """Counter series seen going back, with before/after (must stay empty)."""
    games_below_received: list[tuple[float, float]]
    seconds: float
    controller_restarts: int
    """Successor controllers the handle started."""


def _pid(handles: list, rng: random.Random) -> int | None:
    """The pid of one of ``handles`` (picked with ``rng``) that answers within 1 s."""
    if not handles:
        return None
    handle = rng.choice(handles)
    try:
        return int(ray.get(handle.pid.remote(), timeout=1.0))
    except Exception:  # not started yet, or already dead
        return None


class AuditedRun:
    """A real distributed run (local Ray must be up) on its own supervised redis-server,
    its stream audited from before the first game and its counters watched as the driver
    polls them: what the chaos test and the fault-table rows share. ``finish`` stops the
    run and returns its ledger; ``close`` (or leaving the ``with``) ends everything."""

    def __init__(self, run_dir: Path, run_id: str, settings: list[str] | None = None,
                 redis_dir: Path | None = None) -> None:
        """``redis_dir``: where Redis keeps its AOF (``zeroforge train`` uses
        ``RUN_DIR/redis``); a private temp directory by default."""
        self.run_dir, self.run_id = run_dir, run_id
        self.server = RedisServer(RedisServerConfig(
            max_restarts=10_000, data_dir=str(redis_dir) if redis_dir else None)).start()
        try:
            config = load_train_config(None, settings or SETTINGS)
            ctx = dataclasses.replace(config.context(run_id, self.server.url),
                                      run_dir=str(run_dir))
            self.auditor = Auditor(self.server.url, run_id)
            self.handle: RunHandle = start_run(
                config, ctx, max_crashes={"learner": 10_000, "selfplay": 10_000},
                max_controller_deaths=10_000)
        except BaseException:
            self.close()
            raise
        self.watch = _Watch(self.handle)
        self.start_wall = time.time()

    def pid(self, target: str, rng: random.Random) -> int | None:
        """The pid of ``target``: ``redis``, ``controller`` or one actor of that kind."""
        if target == "redis":
            return self.server.pid
        if target == "controller":
            return self.handle.controller_pid()
        return _pid(self.handle.actor_handles(target), rng)

    def settle(self) -> None:
        """Wait until every slot holds a live actor and Redis runs (a few monitor ticks:
        a slot whose actor was just killed still reads "alive" at first)."""
        self.watch.sleep(2.0)
        self.watch.until(lambda st: all(st["alive"][k] == st["desired"][k]
                                        for k in ("learner", "selfplay"))
                         and self.server.running
                         and all(row["state"] == "alive" for row in st["actors"]), 120)
        self.watch.sleep(1.0)

    def finish(self, log: Callable[[str], None] = lambda line: None,
               settle: bool = True) -> tuple[Ledger, dict]:
        """Stop the run (after ``settle``), read the stream to its end, return the ledger
        and the final status."""
        if settle:
            self.settle()
        workers = self.handle.actor_handles("selfplay")
        stop_at = time.time() - self.start_wall
        final = self.handle.stop().to_json()
        self.watch.record(final)
        self.auditor.finish()
        worker_ids = {i for ids in ray.get([w.game_ids.remote() for w in workers])
                      for i in ids}
        saved = load_checkpoint(self.run_dir / "checkpoint.pt")["extra"]
        ledger = Ledger(self.auditor.appended, checkpoint_received(saved),
                        int(saved["games_received"]), worker_ids,
                        {str(k): int(v) for k, v in saved.get("rejected", {}).items()})
        assert self.auditor.undecodable == 0
        lost = [g for g, o in ledger.outcomes().items() if o == "unaccounted"]
        if lost:  # when were they appended (entry ids are milliseconds since the epoch)?
            at = sorted(_ms(self.auditor.entry_of[g]) / 1000 - self.start_wall for g in lost)
            log(f"{len(lost)} unaccounted games appended at {at[0]:.1f}..{at[-1]:.1f} s; "
                f"stop began at {stop_at:.1f} s; final error {final['error']!r}, lost "
                f"{final['lost']}, restarts {final['restarts']}")
        return ledger, final

    def close(self) -> None:
        handle = getattr(self, "handle", None)  # None when the start failed
        if handle is not None:
            with _suppress():
                handle.shutdown()
        self.server.stop()

    def __enter__(self) -> AuditedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chaos_run(run_dir: Path, run_id: str, *, seed: int, kills: int, max_s: float,
              gap_s: tuple[float, float] = (1.0, 3.0), settings: list[str] | None = None,
              targets: tuple[tuple[str, float], ...] = TARGETS, then_s: float = 0.0,
              then_steps: int = 0, then_until: Callable[[dict], bool] | None = None,
              then_timeout_s: float = 600.0,
              log: Callable[[str], None] = lambda line: None) -> ChaosResult:
    """Start a run (local Ray must be up) on its own supervised redis-server, kill
    ``kills`` processes at seeded random moments (or until ``max_s``), stop, audit.
    ``targets``: what to kill, with the odds of each (a kind picks one of its actors);
    ``then_s``: seconds the run goes on after the last kill, before the stop;
    ``then_steps``: and at least until the learner took this many steps after the last
    kill (a quiet tail measured in training, not in the machine's speed), and then until
    ``then_until(status)`` holds, all within ``then_timeout_s``."""
    rng = random.Random(seed)
    with AuditedRun(run_dir, run_id, settings) as run:
        watch = run.watch
        watch.until(lambda st: st["learner_steps"] > 0, 120)
        start = time.monotonic()
        done: list[tuple[float, str, int]] = []
        names, odds = zip(*targets, strict=True)
        while len(done) < kills and time.monotonic() - start < max_s:
            watch.sleep(rng.uniform(*gap_s))
            target = rng.choices(names, odds)[0]
            pid = run.pid(target, rng)
            if pid is None:
                continue
            os.kill(pid, signal.SIGKILL)
            done.append((round(time.monotonic() - start, 1), target, pid))
            log(f"[{done[-1][0]:6.1f}s] kill -9 {target} (pid {pid})")
        for line in run.handle.takeovers:
            log(line)
        steps_at_last_kill = watch.poll()["learner_steps"]
        watch.sleep(then_s)
        watch.until(lambda st: st["learner_steps"] >= steps_at_last_kill + then_steps
                    and (then_until is None or then_until(st)), then_timeout_s)
        ledger, final = run.finish(log)
        return ChaosResult(done, ledger, final, watch.decreases, watch.games_below,
                           round(time.monotonic() - start, 1), run.handle.controller_restarts)


def _ms(entry_id: bytes | str) -> int:
    """The milliseconds part of a stream entry id."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-")[0])


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return True


class _Watch:
    """Polls status and the merged metrics; notes any counter that goes back."""

    def __init__(self, handle: RunHandle) -> None:
        self.handle = handle
        self.last: dict[tuple, float] = {}
        self.decreases: list[str] = []
        self.games_below: list[tuple[float, float]] = []
        self.values: dict = {}
        """The last merged metrics snapshot's values (name -> [[labels, value], ...])."""

    def total(self, name: str, **labels: str) -> float:
        """A metric of the last poll, summed over the series that carry ``labels``."""
        want = set(labels.items())
        return float(sum(v for series_labels, v in self.values.get(name, [])
                         if want <= {tuple(x) for x in series_labels}))

    def record(self, st: dict) -> None:
        if st["games"] < st["games_received"]:
            self.games_below.append((st["games"], st["games_received"]))
        for key in ("games", "games_received", "learner_steps", "positions"):
            self._check(("status", key), st[key])

    def _check(self, key: tuple, value: float) -> None:
        before = self.last.get(key, 0.0)
        if value < before:
            self.decreases.append(f"{key}: {before} -> {value}")
        self.last[key] = max(before, value)

    def poll(self) -> dict:
        self.handle.keep_alive()  # as the driver: a dead controller is replaced here
        st = self.handle.status_json()
        self.record(st)
        values = self.values = self.handle.metrics_snapshot()["values"]
        from zeroforge.shared.metrics import CATALOGUE

        for name, series in values.items():
            if CATALOGUE[name].kind == "counter":
                for labels, v in series:
                    self._check((name, str(labels)), v)
        return st

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.poll()
            time.sleep(min(0.25, max(end - time.monotonic(), 0)))

    def until(self, check: Callable[[dict], bool], timeout: float) -> dict:
        """Poll until ``check(status)`` holds; returns that status."""
        end = time.monotonic() + timeout
        st: dict = {}
        while time.monotonic() < end:
            if check(st := self.poll()):
                return st
            time.sleep(0.25)
        raise AssertionError(  # what the run looked like, so a CI log says why
            f"condition not met within {timeout} s; last status: alive {st.get('alive')}, "
            f"learner steps {st.get('learner_steps')}, games {st.get('games')}, restarts "
            f"{st.get('restarts')}, error {st.get('error')!r}")


def test_kill_9_at_random_loses_no_game_and_no_counter_goes_back(local_ray, run_id, tmp_path):
    # ~2 min on 2 idle cores; a successor controller needs a fresh Ray worker process that
    # imports torch (10-25 s each on a loaded machine), hence the long bound
    result = chaos_run(tmp_path, run_id, seed=20240611, kills=20, max_s=300, log=print)
    print(f"\n{len(result.kills)} kills in {result.seconds} s: "
          f"{collections.Counter(t for _, t, _ in result.kills)}\n{result.ledger.table()}")
    assert len(result.kills) >= 20
    assert {t for _, t, _ in result.kills} == {"selfplay", "learner", "redis", "controller"}
    assert result.ledger.problems() == []
    assert result.decreases == []
    assert result.games_below_received == []
    assert result.final["state"] == "stopped"
    assert result.final["games_received"] == result.ledger.games_received
    assert result.final["restarts"]["learner"] == sum(t == "learner" for _, t, _ in result.kills)
    assert result.controller_restarts == sum(t == "controller" for _, t, _ in result.kills)
    report(**result.ledger.figures(), kills=len(result.kills), chaos_s=result.seconds,
           **{f"{t}_kills": n for t, n in collections.Counter(
               t for _, t, _ in result.kills).items()})
    # the run's detached actors went with its shutdown
    assert run_actor_names(run_id) == []

