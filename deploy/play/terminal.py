"""One game in the terminal: people type moves (or commands), players from
``zeroforge.shared.players.factory.make_player`` answer.

At a person's turn the input is a move in the game's notation or one of the commands in
``COMMANDS``: ``undo`` (take back your last move and the replies to it), ``hint`` / ``help``
(a suggested move from the net if a net plays, else from a quick UCT search), ``resign``
and ``quit``. A bad line is answered in one line and asked again. With ``hints`` every
turn of a person starts with the searching player's top moves and value.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from zeroforge.shared.games import Game, GameSession, IllegalMoveError
from zeroforge.shared.players import (
    Analyst,
    HumanPlayer,
    MCTSPlayer,
    Player,
    SearchAnalysis,
    UCTPlayer,
)

COMMANDS = ("undo", "hint", "help", "resign", "quit")
"""Words a person can type instead of a move."""

HINT_PLAYOUTS = 400
"""Playouts of the UCT search that suggests moves when no net plays."""

HINT_MOVES = 5
"""Candidate moves a hint lists."""

LABELS = ("first", "second")


@dataclass(frozen=True)
class Ending:
    """How a terminal game ended."""

    moves: int
    """Moves played (after any undo)."""
    outcome: int | None
    """+1 first player won, -1 second won, 0 draw; None if abandoned (``quit``)."""
    how: str
    """``"rules"`` (the game ended on the board), ``"resignation"`` or ``"quit"``."""
    sgf_result: str
    """SGF ``RE`` text the board cannot tell: ``B+R`` / ``W+R`` for a resignation; else ""
    (a finished game's record derives its result; an abandoned one has none)."""


def example_move(session: GameSession) -> str:
    """A legal move of the position, written in the game's notation (from the middle of
    the legal moves, so it is on this board and not a pass)."""
    legal = session.legal_actions()
    return session.game.format_action(legal[len(legal) // 2]) if legal else "-"


def hint_player(players: Sequence[Player]) -> Analyst:
    """Who suggests moves: the first player with a net, else a quick UCT search."""
    for player in players:
        if isinstance(player, MCTSPlayer):
            return player
    from zeroforge.shared.search import UCTConfig

    return UCTPlayer(UCTConfig(playouts=HINT_PLAYOUTS), name=f"uct{HINT_PLAYOUTS}")


def describe_analysis(game: Game, session: GameSession, analyst: Analyst,
                      rng: np.random.Generator, moves: int = HINT_MOVES
                      ) -> tuple[SearchAnalysis, str]:
    """``analyst``'s search of the position and one line saying what it found: value for
    the player to move and the top moves with visit shares and, with a net, priors."""
    analysis = analyst.analyse(game, session.state, rng)
    parts = []
    for m in analysis.top(0, moves):
        prior = "" if m.prior is None else f" prior {m.prior:.0%}"
        parts.append(f"{game.format_action(m.action)} {m.share:.0%}{prior}")
    value = float(analysis.value[0])
    line = (f"{analyst.name}: value {value:+.2f} for the player to move; top moves "
            f"(visit share{', net prior' if analysis.prior is not None else ''}): "
            + ", ".join(parts))
    return analysis, line


class TerminalGame:
    """A game between ``players`` (first, second), people among them reading ``read``."""

    def __init__(self, game: Game, players: Sequence[Player], *,
                 read: Callable[[], str] = input, out: TextIO | None = None,
                 rng: np.random.Generator | None = None, hints: bool = False,
                 quiet: bool = False, names: Sequence[str] | None = None) -> None:
        self.game = game
        self.players = list(players)
        self.names = list(names) if names is not None else [p.name for p in players]
        self.read = read
        self.out = out or sys.stdout
        self.rng = rng or np.random.default_rng()
        self.hints = hints
        self.quiet = quiet
        self.session = GameSession(game)
        self._analyst: Analyst | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    @property
    def analyst(self) -> Analyst:
        if self._analyst is None:
            self._analyst = hint_player(self.players)
        return self._analyst

    def run(self) -> Ending:
        """Play until the game ends, a person resigns or quits. IllegalMoveError if the
        input ends first."""
        session = self.session
        while not session.over:
            mover = session.to_play
            player = self.players[mover]
            if isinstance(player, HumanPlayer):
                ending = self._human_turn(mover)
                if ending is not None:
                    return ending
                continue
            if not self.quiet:
                self.say(session.render())
            action = int(player.select(self.game, session.state, self.rng)[0])
            session.play(action)
            if not self.quiet:
                self.say(f"{LABELS[mover]} ({self.names[mover]}) plays "
                         f"{self.game.format_action(action)}")
        self.say(session.render())
        result = {1: "first player wins", -1: "second player wins", 0: "draw"}[session.outcome]
        self.say(f"result: {result} after {len(session.moves)} moves")
        return Ending(len(session.moves), session.outcome, "rules", "")

    def _human_turn(self, mover: int) -> Ending | None:
        """One move (or command) of the person ``mover``; an Ending if they stop the game."""
        session = self.session
        self.say(session.render())
        if self.hints:
            self.say("hint " + describe_analysis(self.game, session, self.analyst, self.rng)[1])
        self.say(f"your move ({LABELS[mover]} player), e.g. {example_move(session)}; "
                 f"or {', '.join(COMMANDS)}:")
        while True:
            try:
                text = self.read().strip()
            except EOFError:
                raise IllegalMoveError("input ended before the game did") from None
            word = text.lower()
            if not word:
                continue
            if word in ("undo", "hint", "help", "?"):
                if self._command(word, mover):
                    return None  # the position changed: show it again
                continue
            if word in ("resign", "quit"):
                return self._stop(word, mover)
            try:
                action = session.play(text)
            except IllegalMoveError as err:
                self.say(f"{err}; try again (e.g. {example_move(session)}, or help):")
                continue
            if not self.quiet:
                self.say(f"{LABELS[mover]} ({self.names[mover]}) plays "
                         f"{self.game.format_action(action)}")
            return None

    def _command(self, word: str, mover: int) -> bool:
        """Run ``undo`` / ``hint`` / ``help``; True if the position changed."""
        if word == "undo":
            taken = undo_turn(self.session, mover)
            if not taken:
                self.say("nothing to undo: you have not moved yet; your move:")
                return False
            self.say(f"took back {len(taken)} move{'s' if len(taken) > 1 else ''}: "
                     + " ".join(self.game.format_action(a) for a in taken))
            return True
        if word in ("help", "?"):
            self.say(f"type a move like {example_move(self.session)}, or: undo (take back "
                     "your last move and the reply), hint (suggest a move), resign, quit")
        analysis, line = describe_analysis(self.game, self.session, self.analyst, self.rng)
        self.say(f"suggested: {self.game.format_action(int(analysis.action[0]))} ({line}); "
                 "your move:")
        return False

    def _stop(self, word: str, mover: int) -> Ending:
        moves = len(self.session.moves)
        if word == "quit":
            self.say(f"result: none, game abandoned after {moves} moves")
            return Ending(moves, None, "quit", "")
        winner = 1 - mover
        self.say(f"result: {LABELS[winner]} player wins by resignation after {moves} moves")
        return Ending(moves, 1 if winner == 0 else -1, "resignation", "BW"[winner] + "+R")


def undo_turn(session: GameSession, mover: int) -> list[int]:
    """Take back ``mover``'s last move and every move after it; the moves taken back, in
    the order they were played ([] if ``mover`` has not moved)."""
    movers = [int(s.to_play[0]) for s in session.history]
    if mover not in movers:
        return []
    count = len(movers) - max(i for i, m in enumerate(movers) if m == mover)
    return [session.undo() for _ in range(count)][::-1]


def play_in_terminal(args: argparse.Namespace) -> int:
    """``zeroforge play`` without ``--web``."""
    from zeroforge.shared.games import make_game
    from zeroforge.shared.players import make_player

    game = make_game(args.game)
    players = [make_player(args.first, game), make_player(args.second, game)]
    terminal = TerminalGame(game, players, rng=np.random.default_rng(args.seed),
                            hints=args.hints, quiet=args.quiet)
    ending = terminal.run()
    if args.sgf:
        write_record(terminal.session, ending, args.first, args.second, args.sgf)
        print(f"wrote {args.sgf}")
    return 0


def write_record(session: GameSession, ending: Ending, first: str, second: str,
                 path: str) -> None:
    """The game as SGF (first player Black); a resignation is ``B+R`` / ``W+R``."""
    from zeroforge.shared.formats import record_from_session, write_sgf

    record = record_from_session(session, black=first, white=second,
                                 result_text=ending.sgf_result or None)
    with open(path, "w", encoding="utf-8") as f:
        f.write(write_sgf(record))
