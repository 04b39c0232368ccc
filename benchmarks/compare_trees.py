"""Run one benchmark in two source trees, interleaved, and keep every round's output.

For before/after figures of a change: ``--before`` is another checkout of the project (a
``git worktree`` of the commit before the change), run with that tree first on
``PYTHONPATH`` so its modules win over the installed ones (a tree from before the
``zeroforge`` namespace imports its top-level folders from there); ``after`` is this
checkout as installed. Rounds alternate the order (before, after; after, before; ...) so
that a drift in the machine's state hits both sides alike.

    git worktree add /tmp/zf-before <commit>
    python benchmarks/compare_trees.py --before /tmp/zf-before --rounds 3 \\
        --out docs/data/namespace-selfplay.json -- bench_selfplay.py --quick --games gomoku6

Prints each round's output as it comes and writes a JSON document with the machine line,
the command and every round's stdout, per side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine_line  # benchmarks/machine.py (scripts run from here)

HERE = Path(__file__).resolve().parent


NAMESPACE_PARTS = ("shared", "actors", "learner", "deploy")
"""The folders that ``pyproject.toml``'s package-dir maps into ``zeroforge``."""


def import_root(tree: Path, scratch: Path) -> Path:
    """The folder to put first on ``PYTHONPATH`` so that ``tree``'s modules win over the
    installed ones. A tree from before the ``zeroforge`` namespace imports its top-level
    folders: the tree itself. A later tree keeps ``zeroforge.shared`` & co. in top-level
    folders that only an install maps in, so on ``PYTHONPATH`` alone ``zeroforge.shared``
    would still come from this checkout: ``scratch/zeroforge`` gets the tree's
    ``zeroforge`` files plus a link per mapped folder, and ``scratch`` is the root."""
    if not (tree / "zeroforge" / "__init__.py").is_file():
        return tree
    package = scratch / "zeroforge"
    package.mkdir(parents=True, exist_ok=True)
    for item in (tree / "zeroforge").iterdir():
        if item.suffix == ".py" and not (package / item.name).exists():
            (package / item.name).symlink_to(item.resolve())
    for part in NAMESPACE_PARTS:
        if (tree / part).is_dir() and not (package / part).exists():
            (package / part).symlink_to((tree / part).resolve())
    return scratch


def run_side(tree: Path | None, command: list[str], cpus: str | None,
             scratch: Path | None = None) -> str:
    """One run of ``command`` (a benchmarks/ script and its flags) in ``tree`` (None: this
    checkout as installed); returns its stdout. A failing run stops the comparison."""
    env = dict(os.environ)
    bench_dir = HERE if tree is None else tree / "benchmarks"
    if tree is not None:
        root = import_root(tree, scratch or Path(tempfile.mkdtemp(prefix="zf-tree-")))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    argv = [sys.executable, *command]
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    proc = subprocess.run(argv, cwd=bench_dir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"compare_trees: {' '.join(command)} in {bench_dir} exited "
                         f"{proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="the other checkout (the 'before' side)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus", default=None, help="taskset CPU list for both sides")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the rounds")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- SCRIPT [FLAGS]: a script of benchmarks/ and its flags")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no benchmark command after --")
    if not (args.before / "benchmarks" / command[0]).is_file():
        parser.error(f"{args.before}/benchmarks/{command[0]} does not exist")
    print(machine_line())
    scratch = Path(tempfile.mkdtemp(prefix="zf-tree-"))
    rounds: dict[str, list[dict]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for side in order:
            start = time.time()
            out = run_side(args.before if side == "before" else None, command, args.cpus,
                           scratch)
            rounds[side].append({"round": r, "started": start, "load_avg": os.getloadavg()[0],
                                 "stdout": out})
            print(f"--- round {r} {side} (load {os.getloadavg()[0]:.2f})\n{out}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"machine": machine_line(), "command": command,
                                        "cpus": args.cpus, "rounds": rounds}, indent=1) + "\n")


if __name__ == "__main__":
    main()
