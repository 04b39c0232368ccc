"""How a run's actors fail, in words and counts: ``error_line`` (one line for Ray's
multi-line errors), ``CrashWindows`` (each kind's recent crashes against its crash-loop
limit, and its last error) and ``stop_losses`` (what a final stop could not save).
"""

from __future__ import annotations

import collections
import contextlib
import re

from ray.exceptions import RayActorError, RayTaskError

from zeroforge.deploy.ray import ray_calls
from zeroforge.deploy.ray.kinds import KINDS

_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt)): (.+)$")


def error_line(err: BaseException) -> str:
    """One line for an actor's failure: the innermost ``SomeError: message`` of Ray's
    multi-line text (it wraps the real error in a traceback), else its first line."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, RayActorError | RayTaskError):
        text = str(cause).strip().splitlines()
        return f"{type(cause).__name__}: {text[0] if text else ''}"[:300]
    lines = str(err).strip().splitlines()
    found = [m.group(1).rsplit(".", 1)[-1] + ": " + m.group(3)
             for m in map(_ERROR_LINE.match, lines) if m]
    return (found[-1] if found else lines[0] if lines else type(err).__name__)[:300]


class CrashWindows:
    """Per kind, the monotonic times of its crashes within ``ActorKind.crash_window_s``
    and its last error line (the controller's crash-loop limit)."""

    def __init__(self, max_crashes: dict[str, int] | None = None) -> None:
        """``max_crashes``: per kind, a limit other than ``ActorKind.max_crashes``."""
        self.max_crashes = {k: kind.max_crashes for k, kind in KINDS.items()}
        self.max_crashes.update(max_crashes or {})
        self.times: dict[str, collections.deque[float]] = {k: collections.deque()
                                                           for k in KINDS}
        self.last_error: dict[str, str] = {}

    def record(self, name: str, now: float, desired: int) -> bool:
        """Count a crash of kind ``name`` at ``now``; True when the crashes within the
        window reach the limit (the kind's, but at least twice its ``desired`` count)."""
        crashes = self.times[name]
        crashes.append(now)
        while crashes and now - crashes[0] > KINDS[name].crash_window_s:
            crashes.popleft()
        return len(crashes) >= max(self.max_crashes[name], 2 * desired)

    def give_up_line(self, name: str) -> str:
        """Why the run fails after ``record`` said the limit is reached."""
        return (f"{name} actors crashed {len(self.times[name])} times within "
                f"{KINDS[name].crash_window_s:.0f} s; giving up. Last error: "
                f"{self.last_error.get(name, '?')}")

    def state(self, now: float, wall: float) -> dict:
        """Plain data for a successor controller (crash times as wall-clock times)."""
        return {"crashes": {k: [wall - (now - t) for t in q] for k, q in self.times.items()},
                "last_error": self.last_error}

    def load(self, st: dict, now: float, wall: float) -> None:
        """Take over a predecessor's ``state``."""
        for k, times in st["crashes"].items():
            self.times[k].extend(now - (wall - t) for t in times)
        self.last_error.update(st["last_error"])


def stop_losses(report: dict, lost: dict[str, float],
                learner_error: str) -> tuple[dict[str, float], list[str]]:
    """What the learner's final ``report`` says it could not save: the amounts to add to
    the run's ``lost`` (``unacked``, ``unpublished_steps``, ``final_checkpoint``), and the
    same in words. ``lost`` is read only: ``crashed_while_stopping`` there was set by
    whoever saw the learner crash, with its error ``learner_error``."""
    found = {key: float(report[key]) for key in ("unacked", "unpublished_steps")
             if report.get(key)}
    words = []
    if lost.get("crashed_while_stopping"):
        words.append("the learner crashed while stopping ("
                     f"{learner_error}); its last checkpoint "
                     "is the periodic one")
    if report.get("checkpoint_error"):
        # a full or read-only run directory: the entries since the last good checkpoint
        # are unacked, not "in the checkpoint" as the words below would say
        found["final_checkpoint"] = 1.0
        words.append(f"the final checkpoint was not written ({report['checkpoint_error']}); "
                     "the last good one stays, and the "
                     f"{found.get('unacked', 0):.0f} stream entries received since are "
                     "unacknowledged: `--resume` receives them again")
        return found, words
    if found.get("unpublished_steps"):
        words.append(f"the final publish failed: {found['unpublished_steps']:.0f} "
                     "learner steps are in the checkpoint but not in Redis")
    if found.get("unacked"):
        words.append(f"{found['unacked']:.0f} stream entries were not acknowledged "
                     "(Redis failed); they are in the checkpoint, and `--resume` skips "
                     "them when they come back")
    return found, words


def stop_problems(report: dict, lost: dict[str, float], learner_error: str, undrained: bool,
                  unfinished: list[str], timeout_s: float) -> tuple[dict[str, float], list[str]]:
    """Everything a stop lost: ``stop_losses``, then the stop's own (no learner left to
    drain, ``undrained``, an amount too; actors ``unfinished`` within ``timeout_s``).
    Returns the amounts to add to ``lost`` and the words."""
    found, words = stop_losses(report, lost, learner_error)
    if undrained:
        found["undrained"] = 1.0
        words.append("no learner ran at the stop (its replacement was still waiting to be "
                     "scheduled), so the games appended since the last checkpoint are not "
                     "in it: they stay in the stream, and `--resume` trains them")
    if unfinished:
        words.append(f"{', '.join(unfinished)} did not finish within {timeout_s:.0f} s "
                     "(no final checkpoint from them)")
    return found, words


def drop_errors(refs: list) -> None:
    """Wait for ``refs`` (runs of actors just killed) and drop what they raised."""
    for ref in refs:
        with contextlib.suppress(Exception):
            ray_calls.get(ref, timeout=60)
