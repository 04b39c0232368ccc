"""A run's weights, small enough to take elsewhere: its config, its last ``--snapshots``
weight snapshots and its final checkpoint's weights, as a run directory of its own.

A checkpoint holds the replay window and the optimizer beside the weights (on a GPU preset
that is hundreds of MB; the weights of ``resnet10x128`` are 11.5 MiB), and a lent machine
sends back only small files. So the final checkpoint's ``model`` is written as one more
snapshot, named by the learner time it was saved at (after every other snapshot), and
``DEST`` reads like a run directory to everything that judges one::

    python benchmarks/run_weights.py runs/go9-gpu out/go9-gpu --snapshots 2
    python benchmarks/learn_vs_uct.py --config go9-gpu --curve out/go9-gpu --no-untrained \\
        --no-final --games 40 --sims 400 --anchor "gtp:gnugo --mode gtp --level 1 ..."

Prints one line naming what it wrote; a run without a checkpoint or config is one line on
stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from zeroforge.learner.learner import CHECKPOINT_NAME
from zeroforge.shared.formats import save_weights
from zeroforge.shared.players import read_checkpoint
from zeroforge.shared.run_files import CONFIG_NAME, snapshot_files, snapshot_path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path, help="the run's directory")
    p.add_argument("dest", type=Path, help="where the small run directory goes")
    p.add_argument("--snapshots", type=int, default=0, metavar="K",
                   help="also copy the run's last K weight snapshots (default: none)")
    args = p.parse_args(argv)
    if args.snapshots < 0:
        p.error("--snapshots must be >= 0")
    return args


def final_seconds(checkpoint: dict) -> float:
    """The learner time a checkpoint was saved at: a learner service's ``trained_s`` (which
    names its snapshots), else the local loop's own ``run_seconds``."""
    extra = checkpoint.get("extra") or {}
    if "trained_s" in extra:
        return float(extra["trained_s"])
    return float((checkpoint.get("counters") or {}).get("run_seconds", 0.0))


def export(run_dir: Path, dest: Path, snapshots: int) -> list[Path]:
    """Copy ``run_dir``'s config and last ``snapshots`` snapshots into ``dest`` and write its
    final checkpoint's weights as the last snapshot there; the files written, in order.
    ValueError in one line if the run has no config or no readable checkpoint."""
    config, checkpoint_path = run_dir / CONFIG_NAME, run_dir / CHECKPOINT_NAME
    for needed in (config, checkpoint_path):
        if not needed.is_file():
            raise ValueError(f"{needed}: not there (is {run_dir} a run directory?)")
    checkpoint = read_checkpoint(checkpoint_path)
    if checkpoint is None:
        raise ValueError(f"{checkpoint_path}: not a learner checkpoint")
    dest.mkdir(parents=True, exist_ok=True)
    written = [dest / CONFIG_NAME]
    shutil.copyfile(config, written[0])
    every = snapshot_files(run_dir)
    kept = every[-snapshots:] if snapshots else []
    for seconds, path in kept:
        target = snapshot_path(dest, seconds).with_suffix(path.suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        written.append(target)
    # after every snapshot of the run, even one written in the final checkpoint's second
    seconds = max(final_seconds(checkpoint),
                  max((s + 1 for s, _ in every), default=0))
    final = snapshot_path(dest, seconds)
    final.parent.mkdir(parents=True, exist_ok=True)
    save_weights(checkpoint["model"], final)
    written.append(final)
    return written


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        written = export(args.run_dir, args.dest, args.snapshots)
    except (OSError, ValueError) as err:
        print(f"run_weights: {err}", file=sys.stderr)
        return 1
    sizes = sum(p.stat().st_size for p in written) / 2**20
    print(f"run_weights: {args.dest}: {', '.join(p.name for p in written)} "
          f"({sizes:.1f} MiB; the last is the final checkpoint's weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
