"""The controller's state saver (``deploy/ray/saved_state.py``) against the in-memory
transport: it claims the store before its first save, and once a newer controller of the
run has claimed it, it says so in one line and saves (and clears) nothing more."""

from __future__ import annotations

import logging
import uuid

from zeroforge.deploy.ray.saved_state import StateSaver, load_saved_state
from zeroforge.shared.run_context import RunContext


def _ctx() -> RunContext:
    return RunContext(run_id=f"saver-{uuid.uuid4().hex[:8]}", run_dir="/nonexistent",
                      transport=f"memory://saver-{uuid.uuid4().hex[:8]}", game="tictactoe")


def test_an_older_controller_saves_nothing_once_a_newer_one_has_claimed(caplog):
    ctx = _ctx()
    old, new = StateSaver(ctx, every_s=0.0), StateSaver(ctx, every_s=0.0)
    old.tick(lambda: {"by": "old", "seq": 1})
    assert load_saved_state(ctx).state == {"by": "old", "seq": 1}
    new.tick(lambda: {"by": "new", "seq": 1})
    with caplog.at_level(logging.ERROR):
        old.tick(lambda: {"by": "old", "seq": 2})
        old.tick(lambda: {"by": "old", "seq": 3})
    assert old.fenced_by is not None and old.saves == 1
    lines = [r.getMessage() for r in caplog.records if "saves nothing more" in r.getMessage()]
    assert len(lines) == 1 and "a newer controller of the run took epoch" in lines[0]
    assert load_saved_state(ctx).state == {"by": "new", "seq": 1}
    old.clear()  # the run's end as the old controller sees it: the newer state stays
    assert load_saved_state(ctx).state == {"by": "new", "seq": 1}
    new.tick(lambda: {"by": "new", "seq": 2})
    assert load_saved_state(ctx).state == {"by": "new", "seq": 2} and new.fenced_by is None
    new.clear()
    assert load_saved_state(ctx) is None
