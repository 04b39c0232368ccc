"""The Elo ladder of a run: every snapshot, evaluated version and fixed anchor on one scale.

Model (Bradley–Terry on the Elo scale): player i beats player j with probability
``1 / (1 + 10^((r_j - r_i) / 400))``. A draw counts as half a win for each side. The ratings
are the maximum of the log-likelihood of every game played (Newton's method on the
natural-log strengths ``theta = r ln(10) / 400``, with a backtracking step so it cannot
overshoot), with one fixed anchor (``random`` by default) held at 0 to set the scale.

Prior: every pair that has played gets ``prior_draws`` extra virtual games drawn (default
1: half a win each side). Without it a clean sweep puts a rating at infinity; with it a
20-0 sweep is about +650 Elo and the prior's weight fades as real games accumulate. So the
fit is the posterior mode under that prior, not the plain MLE.

Intervals: the covariance of the ratings is the inverse of the observed Fisher information
(the negative Hessian of that log-likelihood, prior games included) at the fit, on the
players other than the anchor; an interval is ``rating ± z sd`` (z = 1.96 for 95 %). They
are intervals *relative to the anchor*: the anchor has none. A player with no chain of
games to the anchor is unrated (no rating, no interval) until it plays one.

Replayed games: a deterministic net against a deterministic engine (a GTP anchor) plays
the same few lines again and again, and a game played again is no new evidence. Each pair
keeps its *effective* games beside its record (the sum of its matches'
``MatchResult.effective_games``, Kish's effective sample size) and enters the fit as that
many games at its score: 40 games in 12 effective give the information of 12, not 40. The
ratings barely move (the score is the same); the intervals widen to what the games show.

Next pair (``next_pair``): of the pairs that can still be played (both sides have a player
spec), the one whose next ``k`` games shrink the summed variance of all ratings the most,
computed exactly from a rank-one update of the covariance (``k p (1 - p)`` of Fisher
information along ``e_i - e_j``). ``p (1 - p)`` is largest for players close in rating, so
neighbours are preferred, and the variance terms prefer players rated from few games.
An unrated player plays first (against the nearest rated player by order, else the anchor).

Persistence: ``RUN_DIR/ladder.json`` (players, results per pair, the last fit), written
atomically (temp file + rename) under a lock file, so the in-run evaluator and ``zeroforge
rate`` can both add games. A file that does not parse is renamed aside
(``ladder-corrupt-<time>.json``) and ``LadderError`` says so in one line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

LADDER_NAME = "ladder.json"
"""The ladder's file in a run dir."""
FORMAT = 1
"""Version of the file's layout."""
ELO_PER_NAT = 400.0 / math.log(10.0)
"""Elo points per unit of natural-log strength."""
DEFAULT_ANCHOR = "random"
"""The player held at 0 unless the ladder names another."""
PRIOR_DRAWS = 1.0
"""Virtual drawn games per pair that has played (keeps a clean sweep finite)."""


class LadderError(ValueError):
    """A ladder file that cannot be used; the message is one line."""


@dataclass
class LadderPlayer:
    """One player on the ladder."""

    name: str
    """Unique name: the spec for anchors (``random``, ``uct:100``), ``weights-000060s`` for
    a snapshot, ``v12`` for a weights version the in-run evaluator played."""
    kind: str
    """``anchor``, ``snapshot`` or ``version``."""
    spec: str | None = None
    """``make_player`` spec to play it again (``net:`` paths relative to the run dir);
    None where it cannot be (a version's weights are gone from the weight store)."""
    order: float = 0.0
    """Where it sits in the run: seconds for a snapshot, the version for a version."""


@dataclass
class Fit:
    """Ratings fitted to a ladder's results."""

    anchor: str
    names: list[str]
    """Every player, in the ladder's order."""
    elo: dict[str, float]
    """Rating of every rated player (the anchor: 0)."""
    sd: dict[str, float]
    """Standard deviation of each rating (relative to the anchor), in Elo."""
    games: dict[str, float]
    """Real games each player played (prior games not counted)."""
    effective: dict[str, float] = field(default_factory=dict)
    """Effective games of each player (its pairs' effective games summed; the module doc):
    what its interval rests on."""
    cov: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    """Covariance (natural-log units) of the rated players other than the anchor, in the
    order of ``free``."""
    free: list[str] = field(default_factory=list)
    iterations: int = 0

    def interval(self, name: str, confidence: float = 0.95) -> tuple[float, float]:
        """(low, high) Elo of ``name`` at ``confidence``; KeyError if unrated."""
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        r, s = self.elo[name], self.sd[name]
        return r - z * s, r + z * s

    def rated(self, name: str) -> bool:
        return name in self.elo


def _pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass
class Ladder:
    """Players, results per pair and (after ``refit``) the fit."""

    players: dict[str, LadderPlayer] = field(default_factory=dict)
    results: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """Per pair ``(a, b)`` with ``a < b``: [wins of a, draws, wins of b]."""
    effective: dict[tuple[str, str], float] = field(default_factory=dict)
    """Per pair: its effective games (see the module doc); a pair not here counts every
    game (a ladder file written before effective games were kept)."""
    anchor: str = DEFAULT_ANCHOR
    run_id: str = ""
    """The run whose ladder this is ("" when not known)."""
    prior_draws: float = PRIOR_DRAWS
    fit: Fit | None = None

    # --- players and games ---------------------------------------------------------------
    def add_player(self, name: str, kind: str, spec: str | None = None,
                   order: float = 0.0) -> LadderPlayer:
        """The player ``name``, added if new (an existing one keeps its entry, but gains a
        spec it lacked)."""
        if kind not in ("anchor", "snapshot", "version"):
            raise ValueError(f"ladder player {name!r}: unknown kind {kind!r}")
        player = self.players.get(name)
        if player is None:
            player = self.players[name] = LadderPlayer(name, kind, spec, float(order))
        elif player.spec is None and spec is not None:
            player.spec = spec
        return player

    def add_games(self, a: str, b: str, wins: int, draws: int, losses: int,
                  effective: float | None = None) -> None:
        """Record ``wins``/``draws``/``losses`` of ``a`` against ``b`` (both added first),
        ``effective`` of them independent (default: all; ``MatchResult.effective_games``)."""
        for name in (a, b):
            if name not in self.players:
                raise ValueError(f"ladder: unknown player {name!r}")
        if a == b:
            raise ValueError(f"ladder: {a!r} cannot play itself")
        if min(wins, draws, losses) < 0:
            raise ValueError("ladder: game counts must be >= 0")
        games = wins + draws + losses
        effective = float(games if effective is None else effective)
        if not min(games, 1) <= effective <= games:  # Kish's size: 1 to the games played
            raise ValueError(f"ladder: {effective:g} effective games of {games} "
                             f"between {a!r} and {b!r}")
        key = _pair_key(a, b)
        cell = self.results.setdefault(key, [0.0, 0.0, 0.0])
        self.effective[key] = self.effective.get(key, sum(cell)) + effective
        first, second = (wins, losses) if key[0] == a else (losses, wins)
        cell[0] += first
        cell[1] += draws
        cell[2] += second

    def record(self, a: str, b: str) -> tuple[int, int, int]:
        """(wins, draws, losses) of ``a`` against ``b`` so far."""
        key = _pair_key(a, b)
        w, d, l_ = self.results.get(key, [0.0, 0.0, 0.0])
        return (int(w), int(d), int(l_)) if key[0] == a else (int(l_), int(d), int(w))

    def refit(self) -> Fit:
        """Fit the ratings to every result so far (``fit_ratings``) and keep the fit."""
        anchor = self.anchor if self.anchor in self.players else next(
            (p.name for p in self.players.values() if p.kind == "anchor"), self.anchor)
        self.fit = fit_ratings(list(self.players), self.results, anchor, self.prior_draws,
                               effective=self.effective)
        return self.fit

    def next_pair(self, games: int = 10) -> tuple[str, str] | None:
        """The pair whose next ``games`` games inform the ratings most (see the module
        doc); None when fewer than two players can be played."""
        fit = self.fit or self.refit()
        return next_pair(fit, [p for p in self.players.values() if p.spec], games)

    # --- file ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        fit = self.fit
        out: dict[str, Any] = {
            "format": FORMAT, "run_id": self.run_id, "anchor": self.anchor,
            "prior_draws": self.prior_draws, "updated": time.time(),
            "players": [asdict(p) for p in self.players.values()],
            "results": [{"a": a, "b": b, "a_wins": w, "draws": d, "b_wins": l_,
                         "effective": round(self.effective.get((a, b), w + d + l_), 3)}
                        for (a, b), (w, d, l_) in sorted(self.results.items())],
        }
        if fit is not None:
            out["fit"] = {"anchor": fit.anchor, "interval": "95% from the observed Fisher "
                          "information, relative to the anchor", "ratings": [
                              {"name": n, "elo": round(fit.elo[n], 2),
                               "sd": round(fit.sd[n], 2),
                               "low": round(fit.interval(n)[0], 2),
                               "high": round(fit.interval(n)[1], 2),
                               "games": fit.games.get(n, 0.0),
                               "effective_games": round(fit.effective.get(n, 0.0), 3)}
                              for n in fit.names if fit.rated(n)]}
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = LADDER_NAME) -> Ladder:
        """A ladder from its JSON form; LadderError (one line) if it is not one."""
        try:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise LadderError(f"{where}: not a ladder file of format {FORMAT}")
            ladder = cls(anchor=str(data.get("anchor", DEFAULT_ANCHOR)),
                         run_id=str(data.get("run_id", "")),
                         prior_draws=float(data.get("prior_draws", PRIOR_DRAWS)))
            for p in data["players"]:
                ladder.add_player(str(p["name"]), str(p["kind"]),
                                  None if p.get("spec") is None else str(p["spec"]),
                                  float(p.get("order", 0.0)))
            for r in data["results"]:
                ladder.add_games(str(r["a"]), str(r["b"]), int(r["a_wins"]), int(r["draws"]),
                                 int(r["b_wins"]), r.get("effective"))
        except LadderError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise LadderError(f"{where}: not a valid ladder ({type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''})") from None
        return ladder


def fit_ratings(names: Sequence[str], results: dict[tuple[str, str], list[float]],
                anchor: str, prior_draws: float = PRIOR_DRAWS, max_iter: int = 200,
                effective: dict[tuple[str, str], float] | None = None) -> Fit:
    """Bradley–Terry ratings (Elo, ``anchor`` = 0) of ``names`` from ``results``
    ([a wins, draws, b wins] per pair) with ``prior_draws`` virtual draws per pair played;
    a pair in ``effective`` counts as that many games at its score (the module doc).

    Players with no chain of games to the anchor are left unrated. Newton's method on the
    concave log-likelihood, each step halved until the likelihood rises."""
    index = {n: i for i, n in enumerate(names)}
    games = {n: 0.0 for n in names}
    independent = {n: 0.0 for n in names}
    pairs = []
    for (a, b), (w, d, l_) in results.items():
        n = w + d + l_
        if n <= 0 or a not in index or b not in index:
            continue
        games[a] += n
        games[b] += n
        share = min((effective or {}).get((a, b), n), n) / n
        independent[a] += n * share
        independent[b] += n * share
        pairs.append((a, b, (w + d / 2) * share + prior_draws / 2, n * share + prior_draws))
    # Rated: the anchor's connected component over pairs that played.
    linked: dict[str, set[str]] = {n: set() for n in names}
    for a, b, _, _ in pairs:
        linked[a].add(b)
        linked[b].add(a)
    rated = {anchor} if anchor in index else set()
    frontier = list(rated)
    while frontier:
        for other in linked[frontier.pop()]:
            if other not in rated:
                rated.add(other)
                frontier.append(other)
    free = [n for n in names if n in rated and n != anchor]
    pos = {n: k for k, n in enumerate(free)}
    use = [(pos.get(a, -1), pos.get(b, -1), s, n) for a, b, s, n in pairs
           if a in rated and b in rated]
    ia = np.array([u[0] for u in use], np.int64)
    ib = np.array([u[1] for u in use], np.int64)
    score = np.array([u[2] for u in use], np.float64)
    count = np.array([u[3] for u in use], np.float64)
    m = len(free)
    theta = np.zeros(m)

    def value(th: np.ndarray) -> float:
        d = _diff(th, ia, ib)
        # log sigma(d) = -log(1 + e^-d), computed stably
        return float(np.sum(-score * np.logaddexp(0.0, -d) - (count - score)
                            * np.logaddexp(0.0, d)))

    def info(th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = _diff(th, ia, ib)
        p = 1.0 / (1.0 + np.exp(-d))
        resid = score - count * p
        weight = count * p * (1.0 - p)
        # Index m is the anchor (fixed): accumulate into m+1 slots, then drop it.
        a_ix, b_ix = np.where(ia < 0, m, ia), np.where(ib < 0, m, ib)
        grad = (np.bincount(a_ix, resid, m + 1) - np.bincount(b_ix, resid, m + 1))[:m]
        hess = np.zeros((m + 1, m + 1))  # the observed information: minus the Hessian
        np.add.at(hess, (a_ix, a_ix), weight)
        np.add.at(hess, (b_ix, b_ix), weight)
        np.add.at(hess, (a_ix, b_ix), -weight)
        np.add.at(hess, (b_ix, a_ix), -weight)
        return grad, hess[:m, :m]

    iterations = 0
    if m:
        current = value(theta)
        for iterations in range(1, max_iter + 1):  # noqa: B007 - reported in the fit
            grad, hess = info(theta)
            step = np.linalg.solve(hess, grad)
            t = 1.0
            while True:
                trial = theta + t * step
                new = value(trial)
                if new >= current - 1e-12 or t < 1e-6:
                    break
                t /= 2.0
            theta, current = trial, new
            if np.max(np.abs(t * step)) < 1e-10:
                break
        _, hess = info(theta)
        cov = np.linalg.inv(hess)
    else:
        cov = np.zeros((0, 0))
    elo = {n: ELO_PER_NAT * float(theta[pos[n]]) for n in free}
    sd = {n: ELO_PER_NAT * math.sqrt(max(float(cov[pos[n], pos[n]]), 0.0)) for n in free}
    if anchor in rated:
        elo[anchor], sd[anchor] = 0.0, 0.0
    return Fit(anchor=anchor, names=list(names), elo=elo, sd=sd, games=games, cov=cov,
               free=free, iterations=iterations, effective=independent)


def _diff(theta: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """theta_a - theta_b per pair; index -1 is the anchor (0)."""
    ext = np.append(theta, 0.0)
    return ext[ia] - ext[ib]


def expected_score(fit: Fit, a: str, b: str) -> float:
    """``a``'s expected score against ``b`` from the fitted ratings."""
    return 1.0 / (1.0 + 10.0 ** ((fit.elo[b] - fit.elo[a]) / 400.0))


def variance_drop(fit: Fit, a: str, b: str, games: int) -> float:
    """How much ``games`` more games between ``a`` and ``b`` (both rated) shrink the summed
    variance of all ratings (natural-log units), expected under the fit."""
    pos = {n: k for k, n in enumerate(fit.free)}
    u = np.zeros(len(fit.free))
    if a in pos:
        u[pos[a]] += 1.0
    if b in pos:
        u[pos[b]] -= 1.0
    p = expected_score(fit, a, b)
    q = games * p * (1.0 - p)
    su = fit.cov @ u
    return float(q * (su @ su) / (1.0 + q * (u @ su)))


def next_pair(fit: Fit, playable: Iterable[LadderPlayer], games: int = 10
              ) -> tuple[str, str] | None:
    """The most informative pair of ``playable`` players to play ``games`` games next."""
    players = list(playable)
    rated = [p for p in players if fit.rated(p.name)]
    unrated = [p for p in players if not fit.rated(p.name)]
    if unrated:
        newcomer = unrated[0]
        # A chain to the anchor first: the rated player nearest in the run, else the anchor.
        same_kind = [p for p in rated if p.kind == newcomer.kind]
        if same_kind:
            partner = min(same_kind, key=lambda p: abs(p.order - newcomer.order)).name
            return newcomer.name, partner
        anchors = [p for p in rated if p.name == fit.anchor] or rated
        if anchors:
            return newcomer.name, anchors[0].name
        if len(unrated) > 1:
            return unrated[0].name, unrated[1].name
        return None
    if len(rated) < 2:
        return None
    # variance_drop for every pair at once: with S the covariance (a zero row and column
    # for the anchor), u = e_a - e_b gives u'Su = S_aa + S_bb - 2 S_ab and |Su|^2 the same
    # in S^2.
    pos = {n: k for k, n in enumerate(fit.free)}
    cov = np.zeros((len(fit.free) + 1,) * 2)
    cov[:-1, :-1] = fit.cov
    idx = np.array([pos.get(p.name, len(fit.free)) for p in rated])
    s1 = cov[np.ix_(idx, idx)]
    s2 = (cov @ cov)[np.ix_(idx, idx)]
    quad1 = np.diag(s1)[:, None] + np.diag(s1)[None, :] - 2 * s1
    quad2 = np.diag(s2)[:, None] + np.diag(s2)[None, :] - 2 * s2
    elo = np.array([fit.elo[p.name] for p in rated])
    p_win = 1.0 / (1.0 + 10.0 ** ((elo[None, :] - elo[:, None]) / 400.0))
    q = games * p_win * (1.0 - p_win)
    gain = q * quad2 / (1.0 + q * quad1)
    gain[np.tril_indices(len(rated))] = -1.0  # each pair once, never a player with itself
    i, j = np.unravel_index(int(np.argmax(gain)), gain.shape)
    return rated[i].name, rated[j].name


# --- the file in a run dir -----------------------------------------------------------------
def ladder_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / LADDER_NAME


def load_ladder(run_dir: str | Path) -> Ladder:
    """The run's ladder (an empty one if it has none). A file that is not a ladder is
    renamed aside and LadderError says so in one line, naming where it went."""
    path = ladder_path(run_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Ladder()
    except OSError as err:
        raise LadderError(f"{path}: cannot read ({err.strerror})") from None
    try:
        return Ladder.from_json(json.loads(text), str(path))
    except (json.JSONDecodeError, UnicodeDecodeError, LadderError) as err:
        kept = path.with_name(f"ladder-corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
                              f"-{os.getpid()}.json")
        path.rename(kept)
        reason = str(err) if isinstance(err, LadderError) else \
            f"{path}: not JSON ({str(err).splitlines()[0]})"
        raise LadderError(f"{reason}; kept aside as {kept.name}, a new ladder starts next "
                          "time") from None


def save_ladder(run_dir: str | Path, ladder: Ladder) -> Path:
    """Write the ladder atomically (a reader sees the old file or the new one)."""
    path = ladder_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(ladder.to_json(), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


@contextlib.contextmanager
def locked(run_dir: str | Path) -> Iterator[None]:
    """Hold the run's ladder lock (``RUN_DIR/.ladder.lock``): one read-change-write at a
    time between the evaluator and ``zeroforge rate``."""
    lock = Path(run_dir) / f".{LADDER_NAME}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def format_table(fit: Fit, ladder: Ladder, confidence: float = 0.95) -> str:
    """The ratings as a table (best first; unrated players last). ``eff.``: the effective
    games the interval rests on (fewer than ``games`` where lines were played again)."""
    pct = f"±{confidence:.0%}"
    w = max([28, *(len(n) for n in fit.names)])
    lines = [f"{'player':<{w}} {'kind':<8} {'Elo':>7} {pct:>7} {'games':>6} {'eff.':>7}"]
    order = sorted(fit.names, key=lambda n: (not fit.rated(n), -fit.elo.get(n, 0.0), n))
    for n in order:
        kind = ladder.players[n].kind if n in ladder.players else "?"
        games = f"{int(fit.games.get(n, 0)):>6} {fit.effective.get(n, 0.0):>7.1f}"
        if fit.rated(n):
            low, high = fit.interval(n, confidence)
            half = "anchor" if n == fit.anchor else f"{(high - low) / 2:.0f}"
            lines.append(f"{n:<{w}} {kind:<8} {fit.elo[n]:>7.0f} {half:>7} {games}")
        else:
            lines.append(f"{n:<{w}} {kind:<8} {'-':>7} {'-':>7} {games}")
    return "\n".join(lines)
