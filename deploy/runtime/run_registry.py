"""Where each run can be found, so ``status``/``scale``/``stop``/``dashboard`` act on the
right one when several runs share a machine.

The driver of ``zeroforge train`` writes two private files (mode 0600) when its run has
started, and removes the second when the run ends:

- ``RUN_DIR/run.json``: the run's record (``RunEntry``): run id, the Ray GCS address ("" for
  a ``train --local`` run), the path of the Ray token file, the metrics URL, the dashboard
  URL (without its token) and its token file's path, the driver's pid and the run dir.
  ``--run-dir`` reads it.
- ``~/.zeroforge/runs/<run-id>.json`` (folder 0700; ``$ZEROFORGE_HOME`` replaces
  ``~/.zeroforge``): the same record, the per-user index of live runs that ``--run-id``
  and the no-option case read. An entry whose driver is gone (killed with SIGKILL, the
  machine rebooted) is stale: ignored and removed.

No secret is written here: the Ray token stays in its own file (only its path is
recorded) and the Redis URL, which holds a password, is not recorded at all. No ``ray``
import.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RUN_FILE = "run.json"
"""The run record's name in the run dir."""


class RegistryError(ValueError):
    """A run record that cannot be used (missing, unreadable, its driver gone)."""


@dataclass(frozen=True)
class RunEntry:
    run_id: str
    address: str
    """The Ray GCS address (host:port) the run's driver is connected to."""
    token_path: str
    """The Ray token file ("" when the cluster does not use token authentication)."""
    metrics_url: str
    driver_pid: int
    run_dir: str
    started: float = 0.0
    dashboard_url: str = ""
    """The run server's URL (dashboard, ``/api/status``), without its token; "" for runs
    from before the dashboard."""
    dashboard_token_path: str = ""
    """The dashboard's token file when the server is not on loopback ("" otherwise)."""

    @property
    def local(self) -> bool:
        """A ``train --local`` run: no Ray cluster (``scale``/``stop`` do not apply)."""
        return not self.address

    def alive(self) -> bool:
        """The driver process still runs (it removes the index entry when it ends)."""
        return pid_alive(self.driver_pid)

    def describe(self) -> str:
        return f"{self.run_id} ({self.run_dir})"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not a live driver
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def home() -> Path:
    return Path(os.environ.get("ZEROFORGE_HOME") or Path.home() / ".zeroforge")


def index_dir() -> Path:
    return home() / "runs"


def write_private(path: Path, data: dict) -> None:
    """Write JSON readable by its owner only (0600), atomically (no half-written file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def register(entry: RunEntry) -> None:
    """The driver's record of its run: ``RUN_DIR/run.json`` and the per-user index."""
    data = asdict(entry) | {"started": entry.started or time.time()}
    write_private(Path(entry.run_dir) / RUN_FILE, data)
    folder = index_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)
    write_private(folder / f"{entry.run_id}.json", data)


def unregister(entry: RunEntry) -> None:
    """The run has ended: remove its index entry (``run.json`` stays, with a dead pid)."""
    path = index_dir() / f"{entry.run_id}.json"
    with contextlib.suppress(OSError, RegistryError):
        if _load(path).driver_pid == entry.driver_pid:
            path.unlink()


def _load(path: Path) -> RunEntry:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return RunEntry(**{k: data[k] for k in RunEntry.__dataclass_fields__ if k in data})
    except FileNotFoundError:
        raise RegistryError(f"no run record {path}") from None
    except (OSError, ValueError, TypeError) as err:
        raise RegistryError(f"unreadable run record {path}: {err}") from None


def recorded(run_dir: str) -> RunEntry | None:
    """The run ``RUN_DIR/run.json`` records, live or ended; None without a readable one."""
    try:
        return _load(Path(run_dir).resolve() / RUN_FILE)
    except RegistryError:
        return None


def from_run_dir(run_dir: str) -> RunEntry:
    """The live run whose run dir is ``run_dir``; RegistryError says why not."""
    path = Path(run_dir).resolve() / RUN_FILE
    if not path.exists():
        raise RegistryError(f"no run record in {path.parent} (no run was "
                            "started there, or it is still starting)")
    entry = _load(path)
    if not entry.alive():
        raise RegistryError(f"run {entry.run_id} in {entry.run_dir} has ended (its driver, "
                            f"pid {entry.driver_pid}, is gone)")
    return entry


def live_runs() -> list[RunEntry]:
    """The live runs of this user, oldest first; stale entries are removed."""
    entries = []
    for path in sorted(index_dir().glob("*.json")):
        try:
            entry = _load(path)
        except RegistryError:
            continue
        if entry.alive():
            entries.append(entry)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(entries, key=lambda e: e.started)


def lookup(run_id: str) -> RunEntry | None:
    """The live run named ``run_id`` in the index, or None."""
    return next((e for e in live_runs() if e.run_id == run_id), None)
