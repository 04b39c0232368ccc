"""Checks ``zeroforge train`` makes before it starts, moves or writes anything.

A run whose Redis refuses us, whose Ray cluster is not there, whose game spec or checkpoint
is broken would otherwise start actors that crash and get replaced over and over. Each
check here fails with ``PreflightError``: one line that says what is wrong and where, which
the CLI prints with exit code 1 (no traceback). No ``ray`` import here (the probe of a Ray
address is a plain TCP connect), so a failed check costs well under a second.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from zeroforge.deploy.config import TrainConfig
from zeroforge.shared.games import GAMES, make_game, parse_spec
from zeroforge.shared.nets import BackendError, check_backend

REDIS_TIMEOUT_S = 3.0
"""Longest wait for Redis to accept a connection and answer PING."""
CHECKPOINT_FILE = "checkpoint.pt"
"""``zeroforge.learner.learner.CHECKPOINT_NAME`` (not imported: that imports torch)."""
class PreflightError(ValueError):
    """A run that cannot work, found before anything started; the message is one line."""


def check_train(config: TrainConfig, *, local: bool, resume: bool,
                address: str | None = None, redis_url: str | None = None) -> None:
    """Every check for ``zeroforge train``: game spec, checkpoint (``resume``), and for a
    distributed run the Ray address and the Redis URL (when given)."""
    check_no_live_driver(config.run.run_dir)
    check_game(config.game)
    check_backends(config)
    if resume:
        check_checkpoint(config)
    if local:
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if address and address != "auto":
        check_ray_address(address)
    if redis_url:
        check_redis(redis_url)


def resume_plan(config: TrainConfig, mode: str | None) -> tuple[TrainConfig, bool]:
    """Whether ``zeroforge train`` resumes, and the config it runs (``mode``: None, "yes"
    for ``--resume``, "auto" for ``--resume auto``).

    Resuming continues the checkpoint's run: without a ``run.run_id`` of its own, the
    config takes the checkpoint's, so the run's stream, weights and metrics keys are the
    ones its workers and checkpoint know. ``auto`` resumes when ``RUN_DIR`` holds this
    run's checkpoint, starts fresh when it holds none, and refuses (one line) a checkpoint
    of another run id rather than move it aside: running the same command again is safe.
    Without a checkpoint, ``auto`` still continues the run ``RUN_DIR/run.json`` records
    (a driver killed before its first checkpoint): its run id, so a new driver finds the
    run's live actors and its stream."""
    if mode is None:
        return config, False
    path = Path(config.run.run_dir) / CHECKPOINT_FILE
    if not path.exists():
        recorded = _recorded_run_id(config.run.run_dir) if mode == "auto" else None
        if recorded and not config.run.run_id:
            config = dataclasses.replace(config, run=dataclasses.replace(
                config.run, run_id=recorded))
        return config, mode == "yes"  # nothing to resume: a fresh start either way
    from zeroforge.learner.learner import CheckpointError, load_checkpoint

    try:
        held = (load_checkpoint(path).get("extra") or {}).get("run_id") or None
    except CheckpointError as err:
        raise PreflightError(f"--resume: {err}") from None
    wanted = config.run.run_id
    if mode == "auto" and held and wanted and held != wanted:
        raise PreflightError(f"--resume auto: {path} is the checkpoint of run {held!r}, "
                             f"not of {wanted!r}; give the run its own --run-dir (nothing "
                             f"was moved)")
    if held and not wanted:
        config = dataclasses.replace(config, run=dataclasses.replace(config.run,
                                                                     run_id=held))
    return config, True


def _recorded_run_id(run_dir: str) -> str | None:
    """The run id ``RUN_DIR/run.json`` records, if it is there and readable."""
    from zeroforge.deploy.runtime import run_registry

    entry = run_registry.recorded(run_dir)
    return entry.run_id if entry is not None and entry.run_id else None


def check_no_live_driver(run_dir: str) -> None:
    """A run whose driver is alive on this machine is not started twice in one run
    directory (the second would fight the first for its Redis port and checkpoint)."""
    from zeroforge.deploy.runtime import run_registry

    entry = run_registry.recorded(run_dir)
    if entry is None or entry.driver_pid == os.getpid() or not entry.alive():
        return
    try:  # a reused pid is some other program, not a driver
        if b"zeroforge" not in Path(f"/proc/{entry.driver_pid}/cmdline").read_bytes():
            return
    except OSError:
        return
    raise PreflightError(f"run {entry.run_id} is running in {entry.run_dir} (driver pid "
                         f"{entry.driver_pid}); `zeroforge status --run-dir {entry.run_dir}`, "
                         "or give this run its own --run-dir")


def check_game(spec: str) -> None:
    """``make_game(spec)`` works; otherwise say which option of the spec is wrong."""
    try:
        make_game(spec)
    except ValueError as err:
        raise PreflightError(f"game {spec!r}: {_game_problem(spec, err)}") from None


def check_backends(config: TrainConfig) -> None:
    """The packages of the backends the workers (``selfplay.backend``) and the inference
    servers (``inference.backend``) run their nets with are installed: otherwise every
    worker would fail the same way as it starts."""
    for key, backend in (("selfplay.backend", config.selfplay.backend),
                         ("inference.backend", config.inference.backend)):
        try:
            check_backend(backend)
        except BackendError as err:
            raise PreflightError(f"{key}: {err}") from None


def _game_problem(spec: str, err: ValueError) -> str:
    """The game's own message, and when it names none of the spec's options (a bare
    ``int('abc')``), the option without which the spec works."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    try:
        name, options = parse_spec(spec)
    except ValueError:
        return text
    if name not in GAMES or any(key in text for key in options):
        return text
    for key, value in options.items():
        rest = {k: v for k, v in options.items() if k != key}
        try:
            make_game(name, **rest)
        except (ValueError, TypeError):
            continue
        return f"option {key}={value!r}: {text}"
    return text


def check_checkpoint(config: TrainConfig) -> None:
    """With ``--resume``: ``RUN_DIR/checkpoint.pt``, if there is one, loads and fits this
    run's game and net (a missing one is a fresh start, as the learner treats it)."""
    from zeroforge.learner.learner import CHECKPOINT_NAME, CheckpointError, load_checkpoint
    from zeroforge.shared.nets import build_net

    path = Path(config.run.run_dir) / CHECKPOINT_NAME
    if not path.exists():
        return
    try:
        blob = load_checkpoint(path)
        spec = make_game(config.game).spec
        if blob.get("game") != spec.spec_string:
            raise CheckpointError(f"{path}: checkpoint is for game {blob.get('game')!r}, "
                                  f"not {spec.spec_string!r}")
        try:
            build_net(config.net, spec).load_state_dict(blob["model"])
        except (RuntimeError, ValueError, KeyError, TypeError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise CheckpointError(f"{path}: weights do not fit this run's net "
                                  f"({type(err).__name__}: {first[:200]})") from None
    except CheckpointError as err:
        raise PreflightError(f"--resume: {err}") from None


def check_redis(url: str) -> None:
    """Redis at ``url`` accepts a connection and our password (PING), within seconds: the
    driver's own (the controller role's where ``$ZEROFORGE_REDIS_AUTH_DIR`` has one)."""
    from zeroforge.shared.transport import RedisConfig, TransportError, connect

    try:
        client = connect(RedisConfig(url=url, connect_timeout_s=REDIS_TIMEOUT_S,
                                     socket_timeout_s=REDIS_TIMEOUT_S, retries=0),
                         role="controller")
    except TransportError as err:
        raise PreflightError(f"--redis-url: {err}") from None
    client.close()


def check_ray_address(address: str) -> None:
    """Something listens at the Ray address (a TCP connect with a short timeout), so a
    missing cluster is one line within seconds, not minutes of Ray's GCS retries."""
    from zeroforge.deploy.ray.cluster import address_problem

    problem = address_problem(address)
    if problem:
        raise PreflightError(f"{problem} (start one with `ray start --head`, or leave out "
                             "--address for a local one)")
