"""``zeroforge replay FILE.sgf``: a recorded game move by move in the terminal.

Every move is played through a ``GameSession`` (so an illegal one stops the replay with
its number and reason), the board drawn by the game's own ``render``. At the end the
result of the position on the board is compared with the recorded ``RE``: a game that
ended on the board must agree with it; one that did not (resignation, time) shows the
recorded result as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import TextIO

from zeroforge.shared.formats import (
    GameRecord,
    SgfError,
    parse_result,
    read_sgf_file,
    record_from_session,
    replay,
)
from zeroforge.shared.games import Game, IllegalMoveError, make_game


class ReplayError(ValueError):
    """A record that does not replay; the message is one line."""


def replay_record(record: GameRecord, game: Game, *, where: str = "", delay: float = 0.0,
                  show_move: int | None = None, out: TextIO | None = None) -> str:
    """Print the game move by move (only the position after ``show_move`` if given);
    returns the result text of the position reached. ReplayError on an illegal move or a
    result that disagrees with the recorded one."""
    out = out or sys.stdout
    if show_move is not None and show_move > len(record.moves):
        raise ReplayError(f"{where}--move {show_move}: the game has only "
                          f"{len(record.moves)} moves")
    try:
        session = replay(dataclasses.replace(record, moves=[]), game)
    except ValueError as err:
        raise ReplayError(f"{where}{err}") from None
    black, white = record.black or "?", record.white or "?"
    print(f"{game.spec.spec_string}: {black} (black) vs {white} (white), "
          f"{len(record.moves)} moves, recorded result {record.result_text or '?'}", file=out)
    if show_move in (None, 0):
        print(session.render(), file=out)
    for i, action in enumerate(record.moves):
        colour = "BW"[(record.first_player + i) % 2]
        name = game.format_action(action) if 0 <= action < game.spec.num_actions \
            else str(action)
        try:
            session.play(action)
        except IllegalMoveError as err:
            raise ReplayError(f"{where}move {i + 1} ({colour} {name}): {err}") from None
        if show_move is None or show_move == i + 1:
            print(f"\nmove {i + 1}: {colour} {name}", file=out)
            print(session.render(), file=out)
            if delay and show_move is None:
                out.flush()
                time.sleep(delay)
    if not session.over:
        shown = record.result_text or "none"
        print(f"\nnot over on the board after {len(record.moves)} moves; recorded result: "
              f"{shown}", file=out)
        return ""
    reached = record_from_session(session).result_text
    recorded = parse_result(record.result_text) if record.result_text else None
    if recorded is not None and recorded != session.outcome:
        raise ReplayError(f"{where}the game ends {reached} on the board but the record "
                          f"says {record.result_text}")
    agrees = " (as recorded)" if recorded is not None else " (the record gives none)"
    print(f"\nresult: {reached}{agrees}", file=out)
    return reached


def cmd_replay(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise ReplayError(f"{path}: no such file")
    try:
        records = read_sgf_file(path)
    except SgfError as err:
        raise ReplayError(f"{path}: {err}") from None
    if not records:
        raise ReplayError(f"{path}: no game in the file")
    for k, record in enumerate(records):
        where = f"{path}: " if len(records) == 1 else f"{path}: game {k + 1}: "
        try:
            game = make_game(args.game) if args.game else make_game(record.game)
        except ValueError as err:
            raise ReplayError(f"{where}{err}") from None
        if k:
            print()
        replay_record(record, game, where=where, delay=args.delay, show_move=args.move)
    return 0
