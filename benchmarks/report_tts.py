"""The time-to-strength tables of docs/lab/*.md, from ``time_to_strength.py --json``
documents: minutes to the first snapshot at the target, each snapshot's score, the medians
and the runs' rates."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from report_layout import DataDir, Table, span
from tts_rule import held_minutes, median_cell, minutes_cell

SEEDS = (0, 1, 2)
NOT_KEPT = "not kept"


@dataclass(frozen=True)
class Seed:
    """One seed's run: minutes to the target (None: never within ``limit``), the score of
    every snapshot in percent, and the run's rates where its row kept them."""

    minutes: float | None
    limit: float
    scores: tuple[int, ...]
    positions_per_s: float | None
    steps_per_s: float | None

    def cell(self, scores: bool = True) -> str:
        m = minutes_cell(self.minutes, self.limit)
        return f"{m} [{', '.join(map(str, self.scores))}]" if scores else m


def _seed(row: dict[str, Any], limit: float) -> Seed:
    return Seed(row["minutes_to_target"], limit,
                tuple(round(p["score"] * 100) for p in row["points"]),
                row.get("positions_per_s"), row.get("steps_per_s"))  # older rows lack them


def seeds(data: DataDir, name: str, config: str | None = None) -> dict[int, Seed]:
    """A ``time_to_strength.py --json`` file's runs by seed (of one config when it holds
    several)."""
    doc = data.load(name)
    return {r["seed"]: _seed(r, doc["minutes"]) for r in doc["rows"]
            if config is None or r["config"] == config}


def median(runs: Iterable[Seed]) -> str:
    """The seeds' median by ``time_to_strength``'s rule (``tts_rule.median_cell``), under
    the longest of their limits."""
    runs = list(runs)
    return median_cell((s.minutes for s in runs), max(s.limit for s in runs))


def versus(figure: str, base: str) -> str:
    """``1.5 (×0.48)``: the ratio of the two medians as the table shows them, so a reader
    gets it back from the table's own figures."""
    return f"{figure} (×{float(figure) / float(base):.2f})"


def rates(runs: Sequence[Seed]) -> list[str]:
    """The positions/s and learner steps/s cells: each a range over the seeds; where only
    some rows kept their rates, which seeds the range is of."""
    kept = [(i, s) for i, s in enumerate(runs) if s.positions_per_s is not None]
    if not kept:
        return [NOT_KEPT, NOT_KEPT]
    pos = span([s.positions_per_s for _, s in kept if s.positions_per_s is not None], "{:.0f}")
    steps = span([s.steps_per_s for _, s in kept if s.steps_per_s is not None], "{:.1f}")
    if len(kept) < len(runs):
        which = ", ".join(str(i) for i, _ in kept)
        note = f" (seed{'s' if len(kept) > 1 else ''} {which} only)"
        pos, steps = pos + note, steps + note
    return [pos, steps]


def bold(text: str) -> str:
    return f"**{text}**"


def _row(label: Sequence[str], runs: dict[int, Seed], scores: bool = True,
         strong: bool = True) -> list[str]:
    picked = [runs[s] for s in SEEDS]
    med = median(picked)
    return [*label, *(s.cell(scores) for s in picked), bold(med) if strong else med,
            *rates(picked)]


TTS_HEADER = ("config", "variant", "seed 0", "seed 1", "seed 2", "median", "positions/s",
              "learner steps/s")
TTS_RIGHT = frozenset(range(2, 8))


def _gumbel_runs(data: DataDir) -> dict[tuple[str, str], dict[int, Seed]]:
    runs = {("gomoku 6×6", "before"): seeds(data, "tts-gumbel-6-before.json"),
            ("gomoku 6×6", "after"): seeds(data, "tts-gumbel-6-after.json"),
            ("gomoku 8×8", "before"): seeds(data, "tts-gumbel-8-before.json")}
    # 8×8 before's seed 2 ran after the presets changed, from its own file.
    runs[("gomoku 8×8", "before")] |= seeds(data, "tts-gumbel-8-before-seed2.json")
    runs[("gomoku 8×8", "after")] = seeds(data, "tts-gumbel-8-after.json")
    return runs


def gumbel(data: DataDir) -> Table:
    """Gumbel self-play against PUCT, gomoku 6×6 and 8×8 (2026-11-27)."""
    rows = [_row(label, runs) for label, runs in _gumbel_runs(data).items()]
    return Table(TTS_HEADER, rows, TTS_RIGHT)


def bf16(data: DataDir) -> Table:
    """bfloat16 on the CPU against the Gumbel table's before and Gumbel rows."""
    g = _gumbel_runs(data)
    rows: list[list[str]] = []
    for config, name in (("gomoku 6×6", "tts-bf16-6.json"), ("gomoku 8×8", "tts-bf16-8.json")):
        before = _row((config, "before"), g[(config, "before")], scores=False, strong=False)
        rows.append(before)
        rows.append(_row((config, "Gumbel"), g[(config, "after")], scores=False, strong=False))
        row = _row((config, "Gumbel + bf16"), seeds(data, name))
        row[5] = bold(versus(median([seeds(data, name)[s] for s in SEEDS]), before[5]))
        rows.append(row)
    return Table(TTS_HEADER, rows, TTS_RIGHT)


def bf16_extra(data: DataDir) -> Table:
    """Seeds 3 and 4 of gomoku 6×6 before and bf16, and ``min_replay`` 500 on seeds 0–4."""
    g6 = seeds(data, "tts-gumbel-6-before.json")
    # (label, seeds shown without scores: those of the tables above, the new seeds, bold)
    variants: tuple[tuple[str, dict[int, Seed], dict[int, Seed], bool], ...] = (
        ("before", g6, seeds(data, "tts-bf16-6-extra-before.json"), False),
        ("Gumbel + bf16, `min_replay` 2000", seeds(data, "tts-bf16-6.json"),
         seeds(data, "tts-bf16-6-extra-after.json"), False),
        ("Gumbel + bf16, `min_replay` 500 (**the preset**)", {},
         seeds(data, "tts-bf16-6-minreplay500.json"), True))
    rows: list[list[str]] = []
    base: tuple[str, str] | None = None
    for label, first, extra, preset in variants:
        # Seeds 0–2 of the first two rows are the tables above, shown without their scores.
        runs = {**extra, **first}
        cells = [runs[s].cell(scores=s not in first) for s in range(5)]
        three = median(runs[s] for s in SEEDS)
        five = median(runs[s] for s in range(5))
        if base is None:
            base, meds = (three, five), [three, five]
        else:
            meds = [versus(three, base[0]), versus(five, base[1])]
        rows.append([label, *cells, *(bold(m) if preset else m for m in meds)])
    header = ("gomoku 6×6", *(f"seed {s}" for s in range(5)), "median of 0–2",
              "median of 0–4")
    return Table(header, rows, frozenset(range(1, 8)))


def playout_cap(data: DataDir) -> Table:
    """Playout-cap randomisation and tree reuse (2026-11-26, the presets of that day)."""
    rows = []
    for config, name in (("gomoku6", "gomoku 6×6"), ("gomoku8", "gomoku 8×8")):
        for variant in ("before", "after"):
            rows.append(_row((name, variant), seeds(data, f"tts-{variant}.json", config)))
    return Table(TTS_HEADER, rows, TTS_RIGHT)


RATE_LIMIT_VARIANTS = (("before-dist", "distributed, before"),
                       ("after-dist", "distributed, after (rate limiting)"),
                       ("local", "local"))


def rate_limit(data: DataDir) -> Table:
    """The distributed run before and after rate limiting, and the local loop (issue 24)."""
    doc = data.load("tts-rate-limit-gomoku8.json")
    limit = float(doc["command"].split("--minutes ")[1].split()[0])
    rows: list[list[str]] = []
    base = ""
    for key, label in RATE_LIMIT_VARIANTS:
        rows_of = {r["seed"]: r for r in doc["variants"][key]}
        runs = [_seed(rows_of[s], limit) for s in SEEDS]
        med = median(runs)
        if key == "before-dist":
            base = med
        elif key == "after-dist":
            med = bold(versus(med, base))
        after2 = [rows_of[s]["samples_per_insert_after_2_min"] for s in SEEDS]
        ratio = (span([a["min"] for a in after2] + [a["max"] for a in after2], "{:.1f}")
                 + f", {statistics.median(a['median'] for a in after2):.1f}")
        rows.append([label, *(s.cell(scores=False) for s in runs), med, *rates(runs), ratio])
    header = ("variant", "seed 0", "seed 1", "seed 2", "median", "positions/s",
              "learner steps/s", "samples per insert after 2 min (min–max, median)")
    return Table(header, rows, frozenset(range(1, 7)))


GO9_SEEDS = tuple(f"tts-go9-seed{s}.json" for s in SEEDS)
"""The go9 preset's reported runs, one file a seed (two ran side by side, a core each)."""


def go9(data: DataDir) -> Table:
    """The go9 preset from scratch to 90% against ``uct:1000`` (issue 26's goal: a median
    within 40 minutes), seeds 0–2, each snapshot judged until the first at the target."""
    runs: dict[int, Seed] = {}
    for name in GO9_SEEDS:
        runs |= seeds(data, name)
    return Table(TTS_HEADER, [_row(("go 9×9", "`go9` preset"), runs)], TTS_RIGHT)


NOT_IN_PLAN = "not run"
"""A seed a variant was never meant to run (a one-seed control), unlike ``NOT_RUN``."""


GO9_HELD = (("`go9` preset (cosine schedule)",
             tuple(f"tts44-go9-uct1000-seed{s}.json" for s in SEEDS)),
            ("constant rate (`learner.lr_schedule=constant`), after",
             ("tts44-go9-uct1000-constant-seed1.json",)))
"""Issue 44's go9 runs against ``uct:1000``, 20 minutes each, judged until the level is
held: (variant, its files, one a seed). The preset's seeds 0 and 1 trained side by side and
seed 2 after; the constant-rate control (seed 1 only) after seed 2, each on a core to itself
while others were judged on the other."""


GOMOKU_HELD = {
    size: (("the preset (cosine schedule)", (f"tts44-{size}-cosine.json",)),
           ("constant rate (`learner.lr_schedule=constant`)", (f"tts44-{size}-constant.json",)))
    for size in ("gomoku6", "gomoku8")}
"""Issue 44's gomoku runs against ``uct:1000`` judged until the level is held, the preset
and the constant rate interleaved seed by seed (one file a variant, a row a seed)."""

GOMOKU6_UCT10000 = (("the preset (cosine schedule)", ("tts44-gomoku6-uct10000.json",)),)
"""Issue 44's 6×6 anchor: the preset judged against ``uct:10000`` until 90% is held."""


def held(data: DataDir, variants: Sequence[tuple[str, Sequence[str]]] = GO9_HELD) -> Table:
    """A target *held* (the median of three snapshots in a row, ``tts_rule.held_minutes``),
    median of seeds 0–2, per variant (issue 44's rule; the go9 runs by default).
    Held and first-crossing minutes are both worked out here from each run's judged points,
    so the table does not trust which rule a file's row was written under; a seed a variant
    did not run says so, and its medians wait for all three."""
    docs = {name: data.load(name) for _, names in variants for name in names}
    targets = {doc["target"] for doc in docs.values()}
    if len(targets) != 1:
        raise ValueError(f"the held runs {sorted(docs)} were judged against different "
                         f"targets: {targets}")
    level = targets.pop()
    limit = max(doc["minutes"] for doc in docs.values())
    rows = []
    for label, names in variants:
        by_seed = {r["seed"]: r for name in names for r in docs[name]["rows"]}
        # each run's Seed with its minutes the held level's, not the row's own figure
        runs = {s: dataclasses.replace(_seed(r, limit),
                                       minutes=held_minutes(r["points"], level, 3))
                for s, r in by_seed.items()}
        first = [held_minutes(by_seed[s]["points"], level, 1) for s in SEEDS if s in by_seed]
        cells = [runs[s].cell() if s in runs else NOT_IN_PLAN for s in SEEDS]
        whole = all(s in runs for s in SEEDS)
        picked = [runs[s] for s in SEEDS if s in runs]
        rows.append([label, *cells, bold(median(picked)) if whole else "—",
                     median_cell(first, limit) if whole else "—", *rates(picked)])
    return Table(("variant", *(f"seed {s}" for s in SEEDS), "median held",
                  "median first crossing", "positions/s", "learner steps/s"), rows,
                 frozenset(range(1, 8)))


ABLATION_SEEDS = (0, 1)
ABLATION = (("full", "the `go9` preset"),
            ("no-aux-targets", "no ownership and score targets (item 1)"),
            ("no-global-pooling", "no global pooling (item 2)"),
            ("no-go-features", "no Go input features (item 3)"),
            ("no-mixed-sizes", "9×9 only, no 7×7 games (item 4)"),
            ("no-forced-playouts", "no forced playouts (item 5)"))
"""The go9 ablation's variants in the order they run (label, what it removes); each
seed's run is ``docs/data/PREFIX-LABEL-seedS.json``, one prefix per host type."""
NOT_RUN = "not run yet"


def ablation_go9(data: DataDir, prefix: str = "ablation-go9",
                 variants: tuple[str, ...] | None = None) -> Table:
    """Time to 50% against ``uct:1000`` with one of issue 26's levers removed at a time,
    two seeds each, runs capped at 40 minutes; a run whose file is not there yet shows as
    such, and a variant gets its median once both seeds ran. ``prefix`` picks the host
    type's runs (the twelve share one: self-play rates differ ~3x between hosts);
    ``variants`` (labels) keeps only those rows, for a host that ran a few of them."""
    rows: list[list[str]] = []
    for label, removed in ABLATION:
        if variants is not None and label not in variants:
            continue
        runs: dict[int, Seed] = {}
        for s in ABLATION_SEEDS:
            name = f"{prefix}-{label}-seed{s}.json"
            if (data.root / name).is_file():
                runs |= seeds(data, name)
        cells = [runs[s].cell() if s in runs else NOT_RUN for s in ABLATION_SEEDS]
        done = [runs[s] for s in ABLATION_SEEDS if s in runs]
        med = median(done) if len(done) == len(ABLATION_SEEDS) else "—"
        rows.append([removed, *cells, med, *(rates(done) if done else ["—", "—"])])
    header = ("variant", *(f"seed {s}" for s in ABLATION_SEEDS), "median", "positions/s",
              "learner steps/s")
    return Table(header, rows, frozenset(range(1, 6)))
