"""``zeroforge match``: games between any two players, one at a time, with results, a score
summary and SGF records.

Players are ``make_player`` specs, so a trained net (``net:PATH``), the baselines and any
GTP engine (``gtp:"gnugo --mode gtp --level 1"``, ``gtp:"zeroforge gtp --checkpoint ..."``)
meet on equal terms. A GTP engine that resigns loses (``B+R``/``W+R``); a player that makes
an illegal move forfeits the game (``B+F``/``W+F``) and the match goes on.

For Go games that end with two passes the runner also asks a GTP engine's own
``final_score`` (the ``--referee`` engine, else a GTP player of the game) after sending it
the whole game, and says whether it agrees with zeroforge's area score. Engines judge dead
stones, zeroforge's Tromp-Taylor count does not: the two agree when the game was played
out until every dead stone was captured (e.g. GnuGo with ``--capture-all-dead``), and
GnuGo counts area only with ``--chinese-rules``. A seki can still part them (an eye inside
one is area for Tromp-Taylor, GnuGo leaves it out), so a differing count asks the engine for
its seki stones and says so.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from zeroforge.shared.games import Game, GameSession, IllegalMoveError, make_game
from zeroforge.shared.players import Player, make_player


@dataclass
class GameResult:
    """One finished game of a match."""

    black: str
    """Label of the player with Black (the first player): ``A`` or ``B``."""
    outcome: int
    """+1 Black won, -1 White won, 0 draw."""
    result_text: str
    """SGF-style: ``B+3.5``, ``W+R`` (resignation), ``B+F`` (forfeit), ``0``."""
    moves: list[int]
    """Actions in order."""
    ended_by: str
    """``passes``, ``rules`` (a win, a full board, the move cap), ``resign`` or ``forfeit``."""
    engine_score: str | None = None
    """A GTP engine's ``final_score`` for Go games ended by two passes, else None."""
    engine_seki: int = 0
    """Stones the engine calls alive in seki, asked only when its score differs."""
    note: str = ""


@dataclass
class MatchTally:
    """Points of player A (the ``--black`` spec) and B over the games so far."""

    names: dict[str, str]
    games: list[GameResult] = field(default_factory=list)

    def points(self, label: str) -> tuple[int, int, int]:
        """(wins, draws, losses) of ``label``."""
        w = d = lost = 0
        for g in self.games:
            mine = g.outcome if g.black == label else -g.outcome
            w, d, lost = w + (mine > 0), d + (mine == 0), lost + (mine < 0)
        return w, d, lost

    def summary(self) -> list[str]:
        from zeroforge.shared.players import elo_difference, repeats

        n = len(self.games)
        lines = []
        for label in ("A", "B"):
            w, d, lost = self.points(label)
            score = (w + 0.5 * d) / max(n, 1)
            lines.append(f"{label} {self.names[label]}: +{w} ={d} -{lost} of {n}, "
                         f"score {score:.3f}")
        w, d, _ = self.points("A")
        # a game played again is no new evidence: the interval is that of the effective games
        distinct, effective = repeats((g.black, tuple(g.moves)) for g in self.games)
        e = elo_difference((w + 0.5 * d) / max(n, 1), effective, d / max(n, 1))
        lines.append(f"Elo A - B: {e.elo:+.0f} [{e.low:+.0f}, {e.high:+.0f}] over {distinct} "
                     f"distinct games ({effective:.1f} effective)")
        black = sum(g.outcome > 0 for g in self.games)
        white = sum(g.outcome < 0 for g in self.games)
        lines.append(f"Black won {black}, White won {white}, drawn {n - black - white}")
        checked = [g for g in self.games if g.engine_score is not None]
        if checked:
            agree = sum(black_lead(g.engine_score) == black_lead(g.result_text) for g in checked)
            seki = sum(g.engine_seki > 0 for g in checked)
            lines.append(f"engine final_score agreed with zeroforge's score in {agree} of "
                         f"{len(checked)} games ended by two passes"
                         + (f"; {seki} of the others had a seki" if seki else ""))
        return lines


def black_lead(text: str | None) -> float | None:
    """Black's lead in an SGF-style score (``B+3.5`` -> 3.5, ``W+2`` -> -2, ``0`` -> 0);
    None for resignations, forfeits and anything else."""
    if text is None:
        return None
    t = text.strip().upper()
    if t in ("0", "DRAW", "JIGO"):
        return 0.0
    if len(t) > 2 and t[0] in "BW" and t[1] == "+":
        try:
            value = float(t[2:])
        except ValueError:
            return None
        return value if t[0] == "B" else -value
    return None


def _scorer(referee: Player | None, players: tuple[Player, Player]) -> Player | None:
    from zeroforge.shared.players import GtpPlayer

    for p in (referee, *players):
        if isinstance(p, GtpPlayer):
            return p
    return None


def play_game(game: Game, black: Player, white: Player, rng: np.random.Generator,
              referee: Player | None = None, black_label: str = "A") -> GameResult:
    """One game, Black first; Go games ended by two passes get the engine's score."""
    from zeroforge.shared.formats import record_from_session
    from zeroforge.shared.players import GtpPlayer, Resigned

    session = GameSession(game)
    players = (black, white)
    for player in players:  # one game at a time, so a resignation can be scored here
        if isinstance(player, GtpPlayer):
            player.on_resign = "raise"
    while not session.over:
        colour = session.to_play
        player = players[colour]
        try:
            action = int(np.asarray(player.select(game, session.state, rng)).reshape(-1)[0])
        except Resigned:
            text = f"{'WB'[colour]}+R"
            return GameResult(black_label, 1 if colour else -1, text, list(session.moves),
                              "resign", note=f"{player.name} resigned")
        try:
            session.play(action)
        except IllegalMoveError as err:
            text = f"{'WB'[colour]}+F"
            return GameResult(black_label, 1 if colour else -1, text, list(session.moves),
                              "forfeit", note=f"{player.name} played an illegal move: {err}")
    record = record_from_session(session)
    go = game.spec.name == "go"
    pass_action = game.spec.num_actions - 1
    by_passes = go and session.moves[-2:] == [pass_action, pass_action]
    result = GameResult(black_label, session.outcome, record.result_text, list(session.moves),
                        "passes" if by_passes else "rules")
    scorer = _scorer(referee, players) if by_passes else None
    if scorer is not None:
        result.engine_score = scorer.final_score(game, session.moves)  # type: ignore[attr-defined]
        agree = black_lead(result.engine_score) == black_lead(result.result_text)
        result.note = (f"{scorer.name} final_score {result.engine_score}: "
                       + ("agrees" if agree else f"differs from {result.result_text}"))
        if not agree:
            result.engine_seki = len(scorer.seki_stones())  # type: ignore[attr-defined]
            if result.engine_seki:
                result.note += (f" (the engine sees {result.engine_seki} stones in seki; "
                                "zeroforge's area count gives a seki's eyes to their colour)")
    return result


def run_match(game_spec: str, black_spec: str, white_spec: str, games: int = 1,
              alternate: bool = False, sgf_dir: str | None = None, referee: str | None = None,
              simulations: int | None = None, seed: int = 0,
              out: TextIO | None = None) -> MatchTally:
    """``zeroforge match``: plays ``games`` games, printing each result and a summary."""
    from zeroforge.shared.formats import GameRecord, write_sgf
    from zeroforge.shared.search import SearchConfig

    out = out or sys.stdout
    if games < 1:
        raise ValueError("--games must be at least 1")
    game = make_game(game_spec)
    search = SearchConfig(num_simulations=simulations) if simulations else None
    made: list[Player] = []
    try:
        for spec in (black_spec, white_spec):
            made.append(make_player(spec, game, search=search))
        ref = make_player(referee, game) if referee else None
        if ref is not None:
            made.append(ref)
        a, b = made[0], made[1]
        tally = MatchTally({"A": a.name, "B": b.name})
        rng = np.random.default_rng(seed)
        folder = Path(sgf_dir) if sgf_dir else None
        if folder is not None:
            if game.spec.name not in ("go", "gomoku", "tictactoe"):
                raise ValueError(f"--sgf-dir: SGF records Go and gomoku games, not "
                                 f"{game.spec.spec_string}")
            folder.mkdir(parents=True, exist_ok=True)
        for i in range(games):
            swap = alternate and i % 2 == 1
            black, white = (b, a) if swap else (a, b)
            try:
                result = play_game(game, black, white, rng, ref, "B" if swap else "A")
            except ValueError:  # a GTP engine died or hung: say what was played, then stop
                if tally.games:
                    for line in tally.summary():
                        print(line, file=out, flush=True)
                raise
            tally.games.append(result)
            line = (f"game {i + 1}: black {black.name}, white {white.name}: "
                    f"{result.result_text} ({result.ended_by}, {len(result.moves)} moves)")
            print(line + (f"; {result.note}" if result.note else ""), file=out, flush=True)
            if folder is not None:
                record = GameRecord(game=game.spec.spec_string, moves=result.moves,
                                    result_text=result.result_text, black=black.name,
                                    white=white.name, comment=result.note)
                (folder / f"game-{i + 1:03d}.sgf").write_text(write_sgf(record),
                                                              encoding="utf-8")
        for line in tally.summary():
            print(line, file=out, flush=True)
        return tally
    finally:
        for p in made:
            close = getattr(p, "close", None)
            if close is not None:
                close()
