"""The capacity model against the load simulator: ``scale_sim_bare.py`` (the
transport-only one, whose figures the model was checked against) at a few sizes, and
beside each measurement what ``deploy/plan.py`` predicts for the same settings.

    python benchmarks/plan_vs_sim.py --sizes 100 300 1000 --minutes 2

Prints a markdown table (model, measured, measured / model) of positions/s and of the run's
Redis bytes out per publish, and writes the simulator's documents with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from zeroforge.deploy.plan import predict_simulation  # noqa: E402


def simulate(workers: int, minutes: float, extra: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        proc = subprocess.run([sys.executable, str(HERE / "scale_sim_bare.py"), "--workers",
                               str(workers), "--minutes", str(minutes), "--json", out.name,
                               *extra], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"scale_sim_bare.py --workers {workers} failed:\n"
                             f"{proc.stderr[-2000:]}")
        return json.loads(Path(out.name).read_text())


def calibrate(calls: int = 2000) -> tuple[float, float]:
    """Bytes the run's Redis sends for one poll (the latest version) and for one read of a
    version's record, measured on a real server: the model's two per-call figures."""
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import NetConfig, build_net
    from zeroforge.shared.transport import RedisServer, WeightStore, connect

    with RedisServer() as server:
        store = WeightStore(connect(server.url), "calibrate")
        store.publish(build_net(NetConfig.preset("tiny"), make_game("tictactoe").spec), 7)
        monitor = connect(server.url)

        def sent(call) -> float:
            before = int(monitor.info("stats")["total_net_output_bytes"])
            for _ in range(calls):
                call()
            after = int(monitor.info("stats")["total_net_output_bytes"])
            return (after - before) / calls  # (one INFO reply over many calls: noise)

        return sent(store.latest_version), sent(lambda: store.info(7))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--json", default=None, help="the simulator's documents, as a list")
    args, extra = p.parse_known_args(argv)
    poll_bytes, info_bytes = calibrate()
    print(f"calibrated on a real Redis: a poll {poll_bytes:.1f} B, a version's record "
          f"{info_bytes:.1f} B", file=sys.stderr)
    docs, rows = [], []
    for workers in args.sizes:
        doc = simulate(workers, args.minutes, extra)
        docs.append(doc)
        model = predict_simulation(doc["workers"], doc["nodes"],
                                   doc["games_per_min_per_worker"], doc["positions_per_game"],
                                   doc["blob_bytes"], doc["poll_s"], doc["publish_every_s"],
                                   poll_bytes, info_bytes)
        for what, predicted, measured in (
                ("positions/s received", model["positions_per_s"],
                 doc["positions_per_s_received"]),
                ("Redis bytes out per publish", model["redis_bytes_per_publish"],
                 doc["redis_bytes_per_publish"])):
            rows.append((workers, what, predicted, measured))
        print(f"{workers} workers: lost {doc['lost_games']}, weights p99 "
              f"{doc['weights_p99_s']} s, simulator {doc['simulator_cores']} cores",
              file=sys.stderr)
    print("| workers | figure | model | measured | measured / model |")
    print("|---:|---|---:|---:|---:|")
    for workers, what, predicted, measured in rows:
        print(f"| {workers} | {what} | {predicted:,.0f} | {measured:,.0f} | "
              f"{measured / predicted:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(docs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
