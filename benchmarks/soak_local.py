"""Soak: the chaos test's loop (``tests/integration/test_chaos.py``) for longer, with more
kills, printing the kill log and the end-of-run ledger table.

    python benchmarks/soak_local.py --kills 200 --minutes 15 --seed 7

A real local Ray (``--cpus`` logical CPUs) and a supervised redis-server of its own; kill -9
of a self-play worker, the learner, the run's controller (replaced by a successor that
adopts the live actors) or the redis-server at seeded random moments. Exits 1
when the ledger finds a problem (a game received twice, one never accounted for, a
counter that went back), 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray  # noqa: E402

from tests.integration.test_chaos import SETTINGS, chaos_run  # noqa: E402
from zeroforge.deploy.ray.naming import NAMESPACE  # noqa: E402
from zeroforge.deploy.ray.private_api import init_on_node_ip  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=10.0, help="longest chaos phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap", type=float, nargs=2, default=(1.0, 4.0),
                        metavar=("MIN_S", "MAX_S"), help="seconds between kills")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="more config settings (as `zeroforge train --set`)")
    args = parser.parse_args()
    settings = [*SETTINGS, f"selfplay.workers={args.workers}", *args.set]
    init_on_node_ip("127.0.0.1", num_cpus=args.cpus, include_dashboard=False,
                    namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="zeroforge-soak-") as run_dir:
            result = chaos_run(Path(run_dir), f"soak-{uuid.uuid4().hex[:8]}", seed=args.seed,
                               kills=args.kills, max_s=args.minutes * 60,
                               gap_s=tuple(args.gap), settings=settings,
                               log=lambda line: print(line, flush=True))
    finally:
        ray.shutdown()
    kinds = collections.Counter(t for _, t, _ in result.kills)
    print(f"\n{len(result.kills)} kills in {result.seconds:.0f} s of chaos "
          f"({time.monotonic() - started:.0f} s in all): "
          + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(f"final status: games {result.final['games']:.0f}, games_received "
          f"{result.final['games_received']:.0f}, learner steps "
          f"{result.final['learner_steps']:.0f}, restarts {result.final['restarts']}, "
          f"controller restarts {result.controller_restarts}")
    print(result.ledger.table())
    problems = [*result.ledger.problems(), *result.decreases,
                *([f"{result.controller_restarts} controller restarts for {kinds['controller']} "
                   "controller kills"]
                  if result.controller_restarts != kinds["controller"] else []),
                *(f"status games {g} below games_received {r}"
                  for g, r in result.games_below_received)]
    for problem in problems:
        print("PROBLEM:", problem)
    print("ledger: OK" if not problems else f"ledger: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
