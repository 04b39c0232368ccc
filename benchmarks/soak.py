"""The soak: a training run on the multi-host bed (``tests/netbed``, as root) with a fault
every two minutes for an hour, and the account of it.

    python benchmarks/soak.py --minutes 60 --seed 1 --out docs/data/soak-bed-1.json

The bed runs with Ray's GCS fault tolerance (the GCS's tables in a Redis of its own). The
run is ``zeroforge train --resume auto`` on the bed's ``head``, four self-play workers on
``node1``/``node2``, its Redis on the ``redis`` host. Every ``--every-s`` seconds one fault,
the kinds taken in seeded shuffled rounds so that each comes as often:

- ``worker``: SIGKILL of a self-play worker's process;
- ``learner``: SIGKILL of the learner's process;
- ``controller``: SIGKILL of the run's controller (the driver starts a successor);
- ``driver``: SIGKILL of ``zeroforge train``; the same command is started again at once
  (it re-attaches to the run's live actors);
- ``redis``: SIGKILL of the run's redis-server, started again 5 s later on its AOF;
- ``node``: every process of a worker node killed, the node started again 5 s later;
- ``link``: a worker node's link cut for 10 s (a node the GCS declared dead meanwhile is
  started again, as a supervisor would);
- ``sigstop``: the learner stopped (SIGSTOP) for 30 s, then continued;
- ``head``: every process of the head killed (GCS, raylet, driver, controller, learner),
  the head started again as docs/cluster.md says and the same command with it.

Measured: each fault's recovery (seconds from the fault until the learner has trained
``RECOVERED_STEPS`` steps past its high-water mark over the ``SETTLE_S`` after the fault,
and games have been received since: a fault that stalls nothing reads as about
``SETTLE_S``), the counters (``games``,
``games_received``, ``learner_steps``, ``weights_version``) never going back between two
status reads, and at the end the per-game ledger (every game appended trained exactly
once, or named lost with its reason) and whether the run was still learning: its last
weight snapshot against its first, each playing ``--anchor`` (the perfect player) with
``--sims`` simulations (1: the net's own move choice).
Prints one JSON document (``--out`` writes it too); exits 1 when the ledger has a problem,
a counter went back, or the last snapshot did not score higher than the first.
"""

from __future__ import annotations

import argparse
import contextlib
import lzma
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from benchmarks.record import print_and_keep  # noqa: E402

FAULTS = ("worker", "learner", "controller", "driver", "redis", "node", "link", "sigstop",
          "head")
COUNTERS = ("games", "games_received", "learner_steps", "weights_version")
SETTINGS = ("selfplay.workers=4", "learner.snapshot_every_s=120", "run.minutes=0",
            "learner.checkpoint_every_s=5")
"""On top of the bed's tiny tic-tac-toe run (``tests/multihost/bed_run.SETTINGS``)."""
RECOVERED_STEPS = 10
"""Learner steps past the high-water mark that count as training again."""
SETTLE_S = 5.0
"""Seconds after a fault over which the high-water marks are taken (and 3 s at least after
the run first answers again): the resolution of the recovery figures (a fault that stalls
nothing reads as recovered in about this)."""


def fault_rounds(seed: int, count: int) -> list[str]:
    """``count`` fault kinds: shuffled rounds of every kind (seeded)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        kinds = list(FAULTS)
        rng.shuffle(kinds)
        out += kinds
    return out[:count]


class Soak:
    """The run on the bed, its driver restarted when a fault took it, and the status reads
    (``watch``) that check the counters."""

    def __init__(self, bed, run_dir: Path, run_id: str, log: Callable[[str], None]) -> None:
        from tests.multihost.bed_run import BedRun

        self.bed, self.run_dir, self.run_id, self.log = bed, run_dir, run_id, log
        self._make = lambda auditors=None: BedRun(
            bed, run_dir, run_id, *SETTINGS, args=("--resume", "auto"), auditors=auditors)
        self.run = self._make()
        self.drivers = 1
        self.driver_lines: list[str] = []
        """What the drivers that ended said."""
        self.last: dict[str, float] = {}
        self.went_back: list[str] = []
        self.reads = 0

    def restart_driver(self) -> None:
        """The same command again (the job resubmitted), reading with the same auditors."""
        with contextlib.suppress(Exception):
            self.run.proc.wait(timeout=30)
        self.driver_lines += self.run.lines
        self.run = self._make(self.run.auditors)
        self.drivers += 1

    def said(self, words: str) -> list[str]:
        """The drivers' lines so far that contain ``words``."""
        return [x.rstrip() for x in (*self.driver_lines, *self.run.lines) if words in x]

    def status(self) -> dict | None:
        """The run's status, or None while it cannot answer (a fault in progress); each
        answer's counters are checked against the last one's."""
        if self.run.proc.poll() is not None:
            return None
        try:
            st = self.run.status()
        except (AssertionError, ValueError, OSError):
            return None
        self.reads += 1
        for key in COUNTERS:
            if st[key] < self.last.get(key, 0.0):
                self.went_back.append(f"{key} {self.last[key]:.0f} -> {st[key]:.0f} "
                                      f"(status read {self.reads})")
            self.last[key] = max(self.last.get(key, 0.0), st[key])
        return st

    def watch(self, seconds: float, until: Callable[[dict], bool] | None = None
              ) -> float | None:
        """Read the status every 2 s for ``seconds``; returns the seconds until ``until``
        first held (None if it did not)."""
        began = time.monotonic()
        held = None
        while time.monotonic() - began < seconds:
            st = self.status()
            if held is None and st is not None and until is not None and until(st):
                held = time.monotonic() - began
            time.sleep(2)
        return held

    def settle(self, seconds: float, limit: float) -> float:
        """Read the status until ``seconds`` have passed and the run has answered for
        3 s (a new driver's first answers carry the counters' floors, not training);
        returns the seconds spent (at most ``limit``)."""
        began = time.monotonic()
        answered = None
        while (now := time.monotonic()) - began < limit:
            if self.status() is not None and answered is None:
                answered = now
            if now - began >= seconds and answered is not None and now - answered >= 3:
                break
            time.sleep(1)
        return time.monotonic() - began

    def row_pid(self, kind: str, rng: random.Random) -> int:
        st = self.status() or {}
        rows = [r for r in st.get("actors", []) if r["kind"] == kind and r["state"] == "alive"
                and r.get("pid")]
        if not rows:
            raise RuntimeError(f"no live {kind} to fault")
        return int(rng.choice(rows)["pid"])


def _raylet_alive(bed, host: str) -> bool:
    from tests.netbed import namespace_pids

    for pid in namespace_pids(bed.ns(host)):
        with contextlib.suppress(OSError):
            if b"raylet" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
    return False


RETRY_S = (5.0, 10.0, 20.0)
"""Waits before each new try of a fault that could not be caused (no live learner to
fault while the previous fault's successor starts, ...)."""


def inject_with_retries(soak: Soak, kind: str, rng: random.Random,
                        log: Callable[[str], None]) -> tuple[str, bool]:
    """``inject``, tried again after each of ``RETRY_S`` while it cannot be caused; returns
    what was done and whether the fault happened. A fault never caused is reported apart
    and counts in no recovery figure (``report_tables.soak``)."""
    for wait in (*RETRY_S, None):
        try:
            return inject(soak, kind, rng), True
        except Exception as err:
            if wait is None:
                return f"not caused: {err}", False
            log(f"         {kind:<10} not caused yet ({err}); again in {wait:g} s")
            time.sleep(wait)
    raise AssertionError("unreachable")


def inject(soak: Soak, kind: str, rng: random.Random) -> str:
    """Cause one fault of ``kind``; returns what was done, in a few words."""
    from scale_sim_bed import _controller_pid

    bed = soak.bed
    if kind in ("worker", "learner"):
        pid = soak.row_pid("selfplay" if kind == "worker" else "learner", rng)
        os.kill(pid, signal.SIGKILL)
        return f"SIGKILL pid {pid}"
    if kind == "controller":
        pid = _controller_pid(bed)
        os.kill(pid, signal.SIGKILL)
        return f"SIGKILL pid {pid}"
    if kind == "driver":
        os.kill(soak.run.proc.pid, signal.SIGKILL)
        soak.restart_driver()
        return "SIGKILL of zeroforge train; the same command again"
    if kind == "redis":
        pid = bed.redis_pid()
        os.kill(pid, signal.SIGKILL)
        time.sleep(5)
        bed.start_redis()
        return f"SIGKILL of redis-server pid {pid}; restarted after 5 s on its AOF"
    if kind == "node":
        host = rng.choice(("node1", "node2"))
        killed = bed.kill_host(host)
        time.sleep(5)
        bed.start_worker_node(host)
        return f"{len(killed)} processes of {host} killed; node restarted after 5 s"
    if kind == "link":
        host = rng.choice(("node1", "node2"))
        with bed.partition(host):
            time.sleep(10)
        time.sleep(3)
        if not _raylet_alive(bed, host):  # the GCS declared it dead: its raylet quit
            bed.kill_host(host)
            bed.start_worker_node(host)
            return f"{host}'s link down 10 s; declared dead, restarted"
        return f"{host}'s link down 10 s"
    if kind == "sigstop":
        pid = soak.row_pid("learner", rng)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(30)
        os.kill(pid, signal.SIGCONT)
        return f"SIGSTOP of the learner (pid {pid}) for 30 s"
    if kind == "head":
        killed = bed.kill_host("head")
        bed.start_head()
        soak.restart_driver()
        return f"{len(killed)} processes of the head killed; head and job restarted"
    raise ValueError(f"unknown fault {kind!r}")


def score_snapshot(path: Path, anchor: str, games: int, sims: int, seed: int) -> float:
    """The snapshot's score (wins + draws / 2 per game) against ``anchor``."""
    import numpy as np

    from zeroforge.shared.games import make_game
    from zeroforge.shared.players import make_player, play_match

    game = make_game("tictactoe")
    net = make_player(f"net:{path}:{sims}", game)
    return play_match(game, net, make_player(anchor, game), games,
                      np.random.default_rng(seed)).score


def write_ids(path: Path, ids: set[str]) -> None:
    """``ids`` sorted, one a line, xz-compressed (a soak's ledger side, kept to compare
    again; sorted ids share long prefixes: ~0.4 bytes an id)."""
    with lzma.open(path, "wt") as out:
        out.writelines(f"{game_id}\n" for game_id in sorted(ids))


def ledger_by_sets(appended: set[str], trained: set[str], games_received: int) -> dict:
    """The soak's ledger from the two id sets: ``lost`` = appended - trained; ``doubled``:
    games the learner counted beyond the distinct ids of its checkpoint (each accepted game
    adds one to ``games_received``; the lineage keeps ids as a set, so a game trained twice
    shows only there); ``strangers``: trained but never appended."""
    return {"appended": len(appended), "trained": len(trained & appended),
            "lost": len(appended - trained), "doubled": games_received - len(trained),
            "strangers": len(trained - appended)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--every-s", type=float, default=120.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--anchor", default="minimax",
                        help="the player the first and last snapshots are scored against")
    parser.add_argument("--sims", type=int, default=1,
                        help="simulations of the snapshots' moves (1: the net's own choice; "
                        "in tic-tac-toe a search of 16 already hides most of what the net "
                        "learned)")
    parser.add_argument("--games", type=int, default=100, help="games of each snapshot")
    parser.add_argument("--out", type=Path,
                        help="the JSON document; beside it OUT-appended.txt.xz and "
                        "OUT-trained.txt.xz, the ledger's two id sets")
    args = parser.parse_args()
    from tests.netbed import Bed, BedConfig

    rng = random.Random(args.seed)
    kinds = fault_rounds(args.seed, max(1, int(args.minutes * 60 // args.every_s) - 1))
    log_lines: list[str] = []

    def log(line: str) -> None:
        log_lines.append(line)
        print(line, flush=True)

    faults: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="zf-soak-"))
    with Bed(BedConfig(worker_slots=3, gcs_ft=True)) as bed:
        soak = Soak(bed, work / "run", f"soak-{uuid.uuid4().hex[:8]}", log)
        try:
            soak.run.status_when(lambda s: s["learner_steps"] > 0 and s["alive"]["selfplay"]
                                 == 4, 300, "the run up")
            began = time.monotonic()
            for index, kind in enumerate(kinds):
                t = time.monotonic() - began
                done, caused = inject_with_retries(soak, kind, rng, log)
                spent = time.monotonic() - began - t  # the fault itself (a SIGSTOP's 30 s)
                # The high-water marks over SETTLE_S after the fault: a status read is up
                # to a couple of seconds old (the mirror, the monitor tick), and the tiny
                # net trains ~80 steps/s, so a mark taken at once would be passed by the
                # steps a killed learner took before its death.
                settled = soak.settle(SETTLE_S, args.every_s - spent)
                steps, received = (soak.last.get("learner_steps", 0.0),
                                   soak.last.get("games_received", 0.0))
                held = soak.watch(args.every_s - spent - settled,
                                  lambda st, a=steps, b=received: st["learner_steps"]
                                  >= a + RECOVERED_STEPS and st["games_received"] > b)
                held = None if held is None else settled + held
                recovery = None if held is None else spent + held
                faults.append({"index": index, "at_s": round(t, 1), "fault": kind,
                               "done": done, "caused": caused,
                               "recovery_s": None if recovery is None or not caused
                               else round(recovery, 1)})
                log(f"{t:7.1f} s  {kind:<10} {done}; recovered "
                    + ("not within the interval" if recovery is None
                       else f"in {recovery:.1f} s"))
            final_status = soak.status() or {}
            stop_said = soak.run.stop(timeout=300)
            ledger = soak.run.ledger()
        finally:
            soak.run.close()
        # by time written: a learner restarted from its checkpoint counts its seconds anew
        snaps = sorted((work / "run" / "snapshots").glob("weights-*s.safetensors"),
                       key=lambda p: p.stat().st_mtime)
        first = last = None
        if len(snaps) >= 2:
            first = score_snapshot(snaps[0], args.anchor, args.games, args.sims, args.seed)
            last = score_snapshot(snaps[-1], args.anchor, args.games, args.sims, args.seed)
    outcomes = ledger.outcomes()
    lost = {g: o for g, o in outcomes.items() if not o.startswith("trained once")}
    appended, trained = set(ledger.appended), set(ledger.received)
    by_sets = ledger_by_sets(appended, trained, ledger.games_received)
    if args.out:
        stem = args.out.with_suffix("")
        write_ids(Path(f"{stem}-appended.txt.xz"), appended)
        write_ids(Path(f"{stem}-trained.txt.xz"), trained)
    doc = {
        "minutes": args.minutes, "every_s": args.every_s, "seed": args.seed,
        "faults": faults, "drivers": soak.drivers, "reattached": soak.said("re-attached"),
        "driver_warnings": soak.said("warning")[-20:],
        "games_appended": len(ledger.appended), "trained_once": len(outcomes) - len(lost),
        "lost": lost, "ledger_by_sets": by_sets, "ledger_problems": ledger.problems(),
        "counters_went_back": soak.went_back, "status_reads": soak.reads, "final_status": {
            k: final_status.get(k) for k in (*COUNTERS, "restarts")},
        "stop": stop_said.strip().splitlines()[-1:] if stop_said else [],
        "snapshots": [p.name for p in snaps], "anchor": args.anchor, "sims": args.sims,
        "first_snapshot_score": first, "last_snapshot_score": last,
    }
    print_and_keep(doc, args.out)
    learning = first is not None and last is not None and last > first
    exact = by_sets["lost"] == by_sets["doubled"] == by_sets["strangers"] == 0
    return 0 if exact and not doc["ledger_problems"] and not soak.went_back and learning else 1


if __name__ == "__main__":
    sys.exit(main())
