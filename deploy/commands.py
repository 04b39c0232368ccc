"""Implementations of the CLI subcommands (parsing lives in cli.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from zeroforge.deploy.signals import sigterm_as_interrupt

if TYPE_CHECKING:
    from zeroforge.deploy.runtime.status import RunStatus


class CommandError(Exception):
    """A failure the CLI reports in one line with exit code 1."""


def cmd_games(args: argparse.Namespace) -> int:
    from zeroforge.shared.games import GAMES, PRESETS

    print("games:   " + ", ".join(sorted(GAMES)))
    print("presets:")
    for short, spec in PRESETS.items():
        print(f"  {short:10s} {spec}")
    print('spec strings: NAME[:key=value,...], e.g. "go:size=13,komi=6.5,ko=simple"')
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """``zeroforge play``: the terminal game (deploy/play/terminal.py) or, with ``--web``,
    the browser board (deploy/play/web.py)."""
    if getattr(args, "web", False):
        from zeroforge.deploy.play.web import serve

        # serves until interrupted: also when started in the background by a script,
        # which leaves SIGINT ignored (deploy/signals.py)
        with sigterm_as_interrupt():
            return serve(args)
    from zeroforge.deploy.play.terminal import play_in_terminal

    return play_in_terminal(args)


def keep_earlier_checkpoint(run_dir: Path) -> Path | None:
    """A fresh run (no ``--resume``) in a folder that holds an earlier run's checkpoint
    would overwrite it at its first save: move it aside (timestamped) and say where."""
    from zeroforge.learner.learner import CHECKPOINT_NAME
    from zeroforge.shared.run_files import keep_aside

    earlier = run_dir / CHECKPOINT_NAME
    kept = keep_aside(earlier)
    if kept is not None:
        print(f"{earlier} is an earlier run's checkpoint (no --resume): kept as {kept}")
    return kept


def cmd_train(args: argparse.Namespace) -> int:
    from zeroforge.deploy import preflight
    from zeroforge.deploy.config import TRAIN_FLAGS, flag_overrides, load_train_config

    # with no config, the preset that shows learning within minutes on a laptop; the
    # flags (--workers 8) are overrides too (selfplay.workers=8), after the --set ones
    config = load_train_config(args.config or "tictactoe",
                               [*args.overrides, *flag_overrides(args, TRAIN_FLAGS)])
    # Everything that can be checked is checked before anything is started or moved: a
    # run that fails here leaves the run directory (and an earlier checkpoint) as it was.
    config, resume = preflight.resume_plan(config, args.resume)
    preflight.check_train(config, local=args.local, resume=resume,
                          address=args.address, redis_url=args.redis_url)
    if not resume:
        keep_earlier_checkpoint(Path(config.run.run_dir))
    with sigterm_as_interrupt():
        if args.local:
            from zeroforge.deploy.local_run import LocalRun

            status = LocalRun(config, resume=resume).run()
        else:
            from zeroforge.deploy import distributed

            status = distributed.train(config, address=args.address,
                                       redis_url=args.redis_url, resume=resume,
                                       continuing=args.resume is not None)
    if status.error:
        raise CommandError(status.error)
    if status.learner_steps == 0:
        # nothing to resume from or to play: a job that "succeeded" this way hides a
        # cluster that never ran its workers, or limits too short to reach min_replay.
        # A stop the user asked for (`zeroforge stop`, Ctrl-C) did what was asked: said.
        line = trained_nothing_line(status, config.learner.min_replay)
        if status.stopped_by not in USER_STOPS:
            raise CommandError(line)
        print(f"zeroforge train: warning: {line}", file=sys.stderr, flush=True)
    return 0


USER_STOPS = ("command", "interrupt")
"""``RunStatus.stopped_by`` values of a stop the user asked for: such a run exits 0 even
without a learner step (with a warning line)."""


def trained_nothing_line(status: RunStatus, min_replay: int) -> str:
    """Why a run that ended without one learner step is a failure, in one line."""
    waited = status.waiting.get("selfplay", "")
    why = (f"its self-play workers never started ({waited})" if waited and not status.games
           else f"its {status.games:.0f} games did not fill the replay window to "
                f"learner.min_replay={min_replay} positions ({status.positions:.0f} played)")
    by = f" (stopped by {status.stopped_by})" if status.stopped_by else ""
    return (f"the run {status.state}{by} after {status.elapsed_s:.0f} s without one learner "
            f"step: {why}")


def cmd_pretrain(args: argparse.Namespace) -> int:
    from zeroforge.deploy.config import PRETRAIN_FLAGS, flag_overrides, load_train_config
    from zeroforge.learner.pretrain import pretrain

    if not 0 <= args.holdout < 1:
        raise CommandError(f"--holdout must be in [0, 1), got {args.holdout}")
    config = load_train_config(args.config, [
        *args.overrides, *flag_overrides(args, PRETRAIN_FLAGS, skip=(None, ""))])
    report = pretrain(config.context(), config.net, config.learner, args.sgf, args.steps,
                      args.holdout, args.limit)
    print(f"pretrain: {report.games_used} games, {report.positions} positions, "
          f"held-out move accuracy {report.holdout_accuracy:.1%} on "
          f"{report.holdout_positions} positions, {report.games_skipped} games skipped, "
          f"{report.seconds:.0f}s")
    return 0


def _registered(args: argparse.Namespace):
    """The run's registry entry from --run-dir / --run-id / the only live run (None when
    the registry cannot say: then Ray is asked, as before the run server)."""
    from zeroforge.deploy.runtime import run_registry

    address = getattr(args, "address", None)
    if address and args.run_id and not args.run_dir:
        # the run's driver on this machine, on that cluster: its own server answers,
        # with no Ray driver to start (seconds on a busy machine)
        entry = run_registry.lookup(args.run_id)
        return entry if entry is not None and same_cluster(entry.address, address) else None
    if address or (not args.run_dir and not args.run_id and os.environ.get("RAY_ADDRESS")):
        return None
    try:
        if args.run_dir:
            return run_registry.from_run_dir(args.run_dir)
        if args.run_id:
            return run_registry.lookup(args.run_id)
        live = run_registry.live_runs()
    except run_registry.RegistryError as err:
        raise CommandError(str(err)) from None
    if len(live) > 1:
        raise CommandError("several runs are live: " + ", ".join(e.describe() for e in live)
                           + "; pass --run-dir or --run-id")
    return live[0] if live else None


def same_cluster(recorded: str, given: str) -> bool:
    """Whether two Ray GCS addresses (``host:port``) name one cluster: same port, and
    hosts that resolve to the same address."""
    import socket

    def key(address: str) -> tuple[str, str] | None:
        if "://" in address or ":" not in address:
            return None
        host, port = address.rsplit(":", 1)
        try:
            return socket.gethostbyname(host.strip("[]")), port
        except OSError:
            return None

    mine = key(recorded)
    return mine is not None and mine == key(given)


def _client(entry):
    """A RunClient for the entry's run server (with its token when it has one)."""
    from zeroforge.deploy.dashboard.client import RunClient
    from zeroforge.deploy.dashboard.server import read_token

    token = None
    if entry.dashboard_token_path:
        try:
            token = read_token(entry.dashboard_token_path)
        except OSError as err:
            raise CommandError(f"cannot read the dashboard token of run {entry.run_id}: "
                               f"{err.strerror} ({entry.dashboard_token_path})") from None
    return RunClient(entry.dashboard_url, token)


def _run(args: argparse.Namespace):
    from zeroforge.deploy.ray.handle import RunNotFound, find_run

    entry = _registered(args)
    if entry is not None and entry.local:
        raise CommandError(f"run {entry.run_id} is a local run (train --local): "
                           f"{args.command} needs a distributed run; stop it with Ctrl-C in "
                           "its terminal")
    try:
        return find_run(args.address, args.run_id, args.run_dir)
    except RunNotFound as err:
        raise CommandError(str(err)) from None


def cmd_status(args: argparse.Namespace) -> int:
    """From the run's own server over HTTP (well under a second); Ray only for runs
    found by --address / $RAY_ADDRESS or recorded without a dashboard URL."""
    from zeroforge.deploy.dashboard.run import LEGEND

    entry = _registered(args)
    if args.workers is not None:
        page = (_client(entry).workers(args.workers) if entry is not None
                and entry.dashboard_url else _run(args).worker_rows(args.workers))
        print(json.dumps(page, sort_keys=True) if args.json else worker_page_text(page))
        return 0
    if entry is not None and entry.dashboard_url:
        data = _client(entry).status_json()
        from zeroforge.deploy.runtime.status import RunStatus

        st = RunStatus.from_json(data)
        url = data.get("dashboard_url", entry.dashboard_url)
        if args.json:
            print(json.dumps(data, sort_keys=True))
        else:
            print(st.text() + f"\ndashboard: {url}\n{LEGEND}")
        return 0
    st = _run(args).status()
    print(st.json_text() if args.json else st.text())
    return 0


def worker_page_text(page: dict) -> str:
    """A page of ``/api/workers`` as lines: one per worker, then where the page is."""
    lines = [f"  worker {r['index']} (host {r['host']}): {r['state']} on {r['node'] or '?'}, "
             f"{r['games']:.0f} games, {r['positions']:.0f} positions" for r in page["rows"]]
    lines.append(f"page {page['page']} of 0..{page['pages'] - 1} ({page['workers']} workers)")
    return "\n".join(lines)


def cmd_dashboard(args: argparse.Namespace) -> int:
    """A live run's URL (printed, --open: opened); a finished run's history served from
    its RUN_DIR on loopback until Ctrl-C."""
    entry = None
    try:
        entry = _registered(args)
    except CommandError:
        if not args.run_dir:
            raise
    if entry is not None:
        if not entry.dashboard_url:
            raise CommandError(f"run {entry.run_id} has no dashboard (started by an older "
                               "zeroforge)")
        url = entry.dashboard_url
        if entry.dashboard_token_path:
            from urllib.parse import quote

            url += "?token=" + quote(_client(entry).token or "")
        print(url)
        _open(args, url)
        return 0
    if not args.run_dir:
        raise CommandError("no live run: give the --run-dir of a finished run to see its "
                           "recorded history")
    with sigterm_as_interrupt():  # serves until interrupted, as `play --web` does
        return _serve_finished(args.run_dir, args.port, args)


def _open(args: argparse.Namespace, url: str) -> None:
    if args.open:
        import webbrowser

        if not webbrowser.open(url):
            print("zeroforge dashboard: no web browser to open here; open the URL above",
                  file=sys.stderr)


def _serve_finished(run_dir: str, port: int, args: argparse.Namespace) -> int:
    from zeroforge.deploy.dashboard import history as hist
    from zeroforge.deploy.dashboard.run import FINAL_STATUS
    from zeroforge.deploy.dashboard.server import RunServer
    from zeroforge.deploy.runtime.status import RunStatus

    path = Path(run_dir) / hist.HISTORY_FILE
    if not path.exists():
        raise CommandError(f"no dashboard history in {run_dir} ({path.name} missing: not a "
                           "run dir, or a run from before the dashboard)")
    history = hist.load(path)
    final = Path(run_dir) / FINAL_STATUS
    try:
        status = RunStatus.from_json(json.loads(final.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        status = RunStatus(run_id=history.run_id, state="ended",
                           elapsed_s=history.t[-1] if history.t else 0.0)
    server = RunServer(lambda: status, history, "127.0.0.1", port).start()
    try:  # a Ctrl-C just after the URL is printed is still a clean stop
        print(f"run {history.run_id} (finished): dashboard at {server.url} (Ctrl-C to stop)",
              flush=True)
        _open(args, server.url)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def cmd_scale(args: argparse.Namespace) -> int:
    if args.workers is None and args.inference_servers is None and args.learners is None:
        raise CommandError("nothing to change: give --workers, --inference-servers "
                           "and/or --learners")
    run = _run(args)
    desired = run.scale(args.workers, args.inference_servers, args.learners)
    print(f"run {run.run_id}: desired " + ", ".join(f"{k} {v}" for k, v in desired.items()))
    if run.warning:
        print(f"zeroforge scale: warning: {run.warning}", file=sys.stderr)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    run = _run(args)
    st = run.stop()
    print(f"run {run.run_id}: {st.state} after {st.games:.0f} games, "
          f"{st.learner_steps:.0f} learner steps, weights v{st.weights_version:.0f}")
    if st.error:
        raise CommandError(st.error)
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    """The live terminal view of a run, from its run server (``deploy/top``)."""
    from zeroforge.deploy.dashboard.run import FINAL_STATUS
    from zeroforge.deploy.runtime.status import RunStatus
    from zeroforge.deploy.top.app import Top, TopError

    entry = _registered(args)
    if entry is None:
        raise CommandError("no live run to watch (start one with `zeroforge train`, or pass "
                           "--run-dir / --run-id of a running one)")
    if not entry.dashboard_url:
        raise CommandError(f"run {entry.run_id} has no run server (started by an older "
                           "zeroforge): use `zeroforge status`")

    def final_status() -> RunStatus | None:
        try:
            path = Path(entry.run_dir) / FINAL_STATUS
            return RunStatus.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    top = Top(_client(entry), entry.run_id, entry.alive, final_status, args.interval)
    try:
        return top.run()
    except TopError as err:
        raise CommandError(f"run {entry.run_id}: {err}") from None


def cmd_curve(args: argparse.Namespace) -> int:
    from zeroforge.deploy import curve

    drawn = curve.read_eval_log(args.run_dir)
    out = curve.write(drawn, args.out or Path(args.run_dir) / "curve.png", args.x_axis)
    print(f"wrote {out}: {curve.summary(drawn)}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """``zeroforge plan``: the capacity model (deploy/plan.py) for a config and N workers."""
    from zeroforge.deploy import plan
    from zeroforge.deploy.config import load_train_config

    config = load_train_config(args.config, args.overrides)
    nodes = args.nodes or plan.default_nodes(args.workers)
    if args.k8s:
        # the Redis sizing only: it needs the game's and the net's bytes, no throughput
        _, per_game, blob = plan.game_figures(config)
        command = " ".join(["zeroforge plan", *([f"--config {args.config}"] if args.config
                                                 else []),
                            *(f"--set {o}" for o in args.overrides),
                            f"--workers {args.workers}", f"--nodes {nodes}", "--k8s"])
        print(plan.k8s_conf(plan.redis_sizing(config, args.workers, nodes, per_game, blob),
                            command), end="")
        return 0
    if args.measure:
        figures = plan.measure(config)
    else:
        if args.worker_positions_per_s is None or args.learner_steps_per_s is None:
            raise CommandError("give --worker-positions-per-s and --learner-steps-per-s, or "
                               "--measure to measure them on this machine")
        per_position, per_game, blob = plan.game_figures(config)
        figures = plan.UnitFigures(
            positions_per_s_per_worker=args.worker_positions_per_s,
            bytes_per_position=per_position, blob_bytes=blob,
            learner_steps_per_s=args.learner_steps_per_s, bytes_per_game=per_game)
    if args.shard_mb_s is not None:
        figures = dataclasses.replace(figures, shard_bytes_per_s=args.shard_mb_s * 1e6)
    figures = dataclasses.replace(figures,
                                  redis_network_bytes_per_s=args.network_gbit * 1.25e8)
    if args.json:
        import json

        print(json.dumps(plan.plan_json(config, args.workers, nodes, figures,
                                         measured=args.measure), indent=2))
        return 0
    print(plan.report(config, args.workers, nodes, figures, measured=args.measure))
    return 0
