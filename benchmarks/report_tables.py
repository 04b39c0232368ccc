"""The tables ``report.py`` generates, one builder a marker name, each from the JSON the
benchmark writes (the time-to-strength ones in ``report_tts.py``, the before/after
rounds of ``compare_trees.py`` in ``report_compare.py``)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import judge_power
import report_compare
import report_tts
from report_layout import DataDir, Table, nbytes, sig2, thousands
from tts_rule import held_minutes

Builder = Callable[[DataDir], Table]


def learner_replicas(data: DataDir) -> Table:
    """Learner steps/s of R data-parallel replicas against one (``bench_learner_replicas``)."""
    doc = data.load("learner-replicas-cpu.json")
    batch = doc["args"]["batch"]
    first = doc["rows"][0]["median"]
    rows = [[str(r["replicas"]), f"{r['median']:.2f}", thousands(r["median"] * batch),
             f"{r['median'] / first:.2f}"] for r in doc["rows"]]
    return Table(("replicas", "steps/s (median of rounds)", "positions/s", "x R=1 (first)"),
                 rows, frozenset(range(4)))


GO9_SCREENS = ("go9-screen-round1.json", "go9-screen-round2.json")
"""The go9 preset's screening rounds (seed 100), in order."""


def _screen_cell(evaluation: dict, minutes: float) -> str:
    """``95% (+19 -1)`` of the judged point nearest ``minutes`` (within half a minute),
    or "—" where that snapshot was not judged."""
    for row in evaluation["rows"]:
        if abs(row["minutes"] - minutes) < 0.5:
            r = row["results"]["uct:1000"]
            return f"{r['score']:.0%} (+{r['wins']} ={r['draws']} −{r['losses']})"
    return "—"


def go9_screen(data: DataDir) -> Table:
    """Each screening run of the go9 preset: its settings, totals and judged snapshots."""
    rows = []
    for rnd, name in enumerate(GO9_SCREENS, start=1):
        for run in data.load(name)["runs"].values():
            t = run["totals"]
            rows.append([str(rnd), f"`{run['net']}`", run["precision"],
                         " + ".join(f"{n}×{n}" for n in run["board_sizes"]),
                         thousands(t["games"]), thousands(t["learner_steps"]),
                         _screen_cell(run["eval"], 7.5), _screen_cell(run["eval"], 15.0)])
    return Table(("round", "net", "precision", "board sizes", "games in 30 min",
                  "learner steps", "vs `uct:1000` at 7.5 min", "at 15 min"),
                 rows, frozenset({4, 5}))


GO9_GUMBEL_SCREEN = "go9-screen-gumbel.json"
"""The go9 preset's PUCT self-play (forced playouts) against Gumbel, side by side (seeds 100
and 101)."""


def go9_screen_gumbel(data: DataDir) -> Table:
    """The Gumbel screen: each run's search, totals and judged snapshots."""
    runs = data.load(GO9_GUMBEL_SCREEN)["runs"].values()
    points = sorted({round(row["minutes"]) for run in runs for row in run["eval"]["rows"]})
    rows = []
    for run in runs:
        t = run["totals"]
        rows.append([str(run["seed"]), run["search"], thousands(t["games"]),
                     thousands(t["positions"]), thousands(t["learner_steps"]),
                     *(_screen_cell(run["eval"], m) for m in points)])
    return Table(("seed", "self-play search", "games", "positions", "learner steps",
                  *(f"vs `uct:1000` at {m:g} min" for m in points)), rows,
                 frozenset({2, 3, 4}))


GO9_GNUGO = (("go9-gnugo1-seed0.json", "seed 0"), ("go9-gnugo1-seed1.json", "seed 1"),
             ("go9-gnugo1-seed2.json", "seed 2, Zen 3 host"),
             ("go9-gnugo1-seed2-amx.json", "seed 2, AMX host"))
"""The go9 preset's reported runs judged against GnuGo level 1: (file, column). Seeds 0
and 1 trained on the Zen 4 host (bfloat16), seed 2 once on a Zen 3 (float32, about a third
of the self-play rate) and once on an Intel host with AMX (bfloat16, about the Zen 4's
rate)."""

GO9_GNUGO_COSINE = (("go9-gnugo1-cosine-seed0-raw.json", "seed 0, raw"),
                    ("go9-gnugo1-cosine-seed0-average.json", "seed 0, averaged"),
                    ("go9-gnugo1-cosine-seed1-raw.json", "seed 1, raw"),
                    ("go9-gnugo1-cosine-seed1-average.json", "seed 1, averaged"),
                    ("go9-gnugo1-cosine-seed2-raw.json", "seed 2, raw"),
                    ("go9-gnugo1-cosine-seed2-average.json", "seed 2, averaged"),
                    ("go9-gnugo1-cosine-seed3-raw.json", "seed 3, raw"),
                    ("go9-gnugo1-cosine-seed3-average.json", "seed 3, averaged"),
                    ("go9-gnugo1-cosine-seed4-raw.json", "seed 4, raw"))
"""The go9 preset with its cosine learning rate, 150 minutes on a Zen 3 core (float32),
with an average of the weights (horizon 50,000 samples) kept apart from self-play: the
raw snapshots are what the preset itself would have kept, the averaged ones what item 1
of issue 44 would publish (seed 4's were not judged along its curve)."""
GO9_GNUGO_COSINE_CURVES = (*GO9_GNUGO_COSINE, ("go9-gnugo1-paired1-seed4-raw.json",
                                               "seed 4, raw, paired 1-ply openings"))
"""The curve table's columns: the runs above, and seed 4's raw snapshots judged again with
paired openings (some points only: they were judged beside the run, niced)."""


def go9_gnugo(data: DataDir, runs: tuple[tuple[str, str], ...] = GO9_GNUGO) -> Table:
    """Go9 runs' snapshots against GnuGo 3.8 level 1 (``learn_vs_uct.py --curve``, 40
    games a snapshot): one column a run of ``runs``, one row a point of training."""
    by_seed = {column: {round(r["minutes"]): next(iter(r["results"].values()))
                        for r in data.load(name)["rows"]} for name, column in runs}
    minutes = sorted({m for points in by_seed.values() for m in points})
    rows = []
    for m in minutes:
        cells = []
        for points in by_seed.values():
            r = points.get(m)
            cells.append("—" if r is None else
                         f"{r['score']:.0%} (+{r['wins']} ={r['draws']} −{r['losses']})")
        rows.append([f"{m} min", *cells])
    return Table(("training", *by_seed), rows, frozenset({0}))


GO9_GNUGO_HOSTS = {"seed 0": "Zen 4, bfloat16", "seed 1": "Zen 4, bfloat16",
                   "seed 2, Zen 3 host": "Zen 3, float32",
                   "seed 2, AMX host": "Xeon AMX, bfloat16"}
"""The host of each column of ``GO9_GNUGO``, for the held-level table."""
GO9_GNUGO_HOSTS.update({column: "Zen 3, float32" for _, column in GO9_GNUGO_COSINE})


GO9_GNUGO_REJUDGE = (("raw", "go9-gnugo1-cosine-seed3-raw.json",
                      "go9-gnugo1-rejudge-seed3-raw.json", "go9-gnugo1-openings2-seed3-raw.json"),
                     ("averaged", "go9-gnugo1-cosine-seed3-average.json",
                      "go9-gnugo1-rejudge-seed3-average.json",
                      "go9-gnugo1-openings2-seed3-average.json"))
"""Seed 3's points judged again (weights, first judging, the same again, the same with
two sampled opening plies a side): how far a 40-game point against GnuGo moves."""


def go9_gnugo_rejudge(data: DataDir) -> Table:
    """The same weights judged against GnuGo level 1 more than once: a row a point, the
    score of each judging with its distinct and effective games where recorded."""
    rows = []
    for weights, *names in GO9_GNUGO_REJUDGE:
        judgings = [{r["label"]: next(iter(r["results"].values()))
                     for r in data.load(name)["rows"]} for name in names]
        for label in judgings[-1]:
            cells = []
            for points in judgings:
                cells.append(_pct_counted(points[label]))
            rows.append([f"{weights}, {label}", *cells])
    return Table(("seed 3 weights, point", "first judging", "judged again",
                  "again, 2 opening plies sampled a side"), rows, frozenset())


GO9_GNUGO_PROTOCOLS = (
    ("40 games, nothing varied (the curve's judging)", "go9-gnugo1-cosine-seed{seed}-{w}.json"),
    ("40 games, judged again", "go9-gnugo1-rejudge-seed{seed}-{w}.json"),
    ("120 games, nothing varied", "go9-gnugo1-games120-seed{seed}-{w}.json"),
    ("40 games, the agent samples its first 2 plies by visits",
     "go9-gnugo1-openings2-seed{seed}-{w}.json"),
    ("40 games, paired random openings of 1 ply", "go9-gnugo1-paired1-seed{seed}-{w}.json"),
    ("40 games, paired random openings of 2 plies", "go9-gnugo1-paired2-seed{seed}-{w}.json"))
"""How a go9 final checkpoint was judged against GnuGo level 1 (a row each) and the
file of each judging (``seed``, ``w``: raw or average)."""
GO9_GNUGO_FINALS = (("seed 3, raw", 3, "raw"), ("seed 3, averaged", 3, "average"),
                    ("seed 4, raw", 4, "raw"), ("seed 4, averaged", 4, "average"))
"""The final checkpoints judged more than one way (a column each)."""


def go9_gnugo_protocols(data: DataDir) -> Table:
    """Each final checkpoint of ``GO9_GNUGO_FINALS`` under each judging of
    ``GO9_GNUGO_PROTOCOLS``: its score with its distinct and effective games; "—" where
    it was not judged that way."""
    rows = []
    for protocol, pattern in GO9_GNUGO_PROTOCOLS:
        cells = []
        for _, seed, weights in GO9_GNUGO_FINALS:
            name = pattern.format(seed=seed, w=weights)
            final = [] if not (data.root / name).is_file() else [
                next(iter(r["results"].values())) for r in data.load(name)["rows"]
                if r["label"].endswith("(final)")]
            cells.append(_pct_counted(final[0]) if final else "—")
        rows.append([protocol, *cells])
    return Table(("judging of the final checkpoint", *(c for c, _, _ in GO9_GNUGO_FINALS)),
                 rows, frozenset())


def _pct(r: dict, more: str = "") -> str:
    """A judged point's score and its wins and losses, ``more`` inside the brackets."""
    return f"{r['score']:.0%} (+{r['wins']} −{r['losses']}{more})"


def _pct_counted(r: dict) -> str:
    """``_pct`` with the match's distinct and effective games where its row recorded them
    (rows written before they were counted have none)."""
    return _pct(r, f"; {r['distinct_games']} distinct, {r['effective_games']:.1f} effective"
                if "distinct_games" in r else "")


def go9_gnugo_held(data: DataDir,
                   runs: tuple[tuple[str, str], ...] = GO9_GNUGO) -> Table:
    """Each go9 run of ``runs`` against GnuGo level 1 as the goal reads it: the minute 50% is
    *held* (the median of three consecutive judged points, ``tts_rule.held_minutes``; the
    first crossing beside it), the best point and the final checkpoint's score with its
    distance from the best, in points. A run whose last point is a snapshot, not its final
    checkpoint, says so."""
    rows = []
    for name, column in runs:
        points = [{"minutes": r["minutes"], "label": r["label"],
                   **next(iter(r["results"].values()))} for r in data.load(name)["rows"]]
        held, first = held_minutes(points, 0.5, 3), held_minutes(points, 0.5, 1)
        best = max(points, key=lambda p: p["score"])
        last = points[-1]
        gap = round((best["score"] - last["score"]) * 100)
        final = (f"{_pct(last)} at {last['minutes']:.0f} min, {gap} below the best"
                 if last["label"].endswith("(final)") else
                 f"not judged (last snapshot, {last['minutes']:.0f} min: {_pct(last)}, "
                 f"{gap} below the best)")
        rows.append([column, GO9_GNUGO_HOSTS[column], f"{last['minutes']:.0f}",
                     "never" if held is None else f"**{held:.0f}**",
                     "never" if first is None else f"{first:.0f}",
                     f"{_pct(best)} at {best['minutes']:.0f} min", final])
    return Table(("run", "host", "minutes trained", "≥ 50% held from (min)",
                  "first crossing (min)", "best point", "final checkpoint"), rows,
                 frozenset({2, 3, 4}))


def judge_power_table(data: DataDir, name: str = "judge-power.json") -> Table:
    """How often a curve of known true level holds the target and ends near its best point
    by chance (``judge_power.py``'s rows, its own columns)."""
    doc = data.load(name)
    return Table(judge_power.header(doc), [judge_power.cells(r) for r in doc["rows"]],
                 frozenset(range(6)))


def uct_playouts(data: DataDir, name: str) -> Table:
    """Pure UCT's playouts a second before and after a game's compiled playouts (``name``:
    the rows of ``bench_uct.py --compare`` or the like): the median of the interleaved
    rounds a batch size (and playouts a move, where the rows name them), and the ratio of
    the medians."""
    rows_in = data.load(name)["rows"]
    named = any("playouts" in r for r in rows_in)
    rows = []
    for playouts, batch in sorted({(r.get("playouts", 0), r["batch"]) for r in rows_in}):
        rounds = {v: [r["playouts_per_s"] for r in rows_in if r["batch"] == batch
                      and r.get("playouts", 0) == playouts and r["variant"] == v]
                  for v in ("before", "after")}
        med = {v: statistics.median(runs) for v, runs in rounds.items()}
        cells = [f"{med[v]:,.0f} ({', '.join(f'{x:,}' for x in runs)})"
                 for v, runs in rounds.items()]
        rows.append([*([f"{playouts:,}"] if named else []), str(batch), *cells,
                     f"×{med['after'] / med['before']:.1f}"])
    head = ("roots searched together", "before: playouts/s (rounds)",
            "after: playouts/s (rounds)", "after / before")
    return Table((*(("playouts a move",) if named else ()), *head), rows,
                 frozenset({0, 1, 4} if named else {0, 3}))


GPU_RUNS = (("gpu-run-go9.json", None), ("gpu-run-gomoku15.json", None),
            ("gpu-run-go9-one-server.json", "go9-gpu, one server (0.8 GPU)"))


GPU_HOSTS = (("gpu-run-go9-thread-hosts.json",
              "go9-gpu, node hosts (workers as threads of one process)"),
             ("gpu-run-go9-actor-workers.json",
              "go9-gpu, an actor a worker (workers_per_host 1)"))


def gpu_runs(data: DataDir, runs: tuple[tuple[str, str | None], ...] = GPU_RUNS) -> Table:
    """The whole job on a lent H200 (``gpu_run.sh``), in ``gpu_run_report``'s own columns."""
    import gpu_run_report  # the script's own row, so the two tables cannot drift apart

    rows = []
    for name, label in runs:
        row = gpu_run_report.row(data.load(name))
        rows.append([label or row[0], *row[1:]])
    cols = gpu_run_report.COLUMNS
    return Table(cols, rows, frozenset(range(4, len(cols))))


def gpu_hosts(data: DataDir) -> Table:
    """go9-gpu with node hosts (the default) against an actor a worker, the same day."""
    return gpu_runs(data, GPU_HOSTS)


def _games(doc: dict[str, Any]) -> str:
    return (f"{thousands(doc['games_appended'])} / {thousands(doc['games_received'])} / "
            f"{thousands(doc['lost_games'])}")


def _publish(doc: dict[str, Any]) -> str:
    blobs = doc["redis_bytes_per_publish_in_blobs"]
    shown = thousands(blobs) if blobs >= 100 else f"{blobs:.2f}"
    return f"{nbytes(doc['redis_bytes_per_publish'])} ({shown} blobs)"


def scale_sim_bare(data: DataDir) -> Table:
    """A thousand virtual workers, transport only (``scale_sim_bare.py``)."""
    rows = []
    for name in ("scale-sim-100.json", "scale-sim-1000.json", "scale-sim-1000-direct.json"):
        d = data.load(name)
        rows.append([thousands(d["workers"]),
                     "per node" if d["node_cache"] else "each worker from Redis",
                     _games(d), thousands(d["positions_per_s_received"]), _publish(d),
                     f"{d['weights_p50_s']:.2f} / {d['weights_p99_s']:.2f} / "
                     f"{d['weights_all_workers_max_s']:.2f} s",
                     sig2(d["simulator_cores"]), sig2(d["learner_and_publisher_cores"])])
    header = ("workers", "weights", "games appended / received / lost",
              "positions/s received", "Redis bytes out a publish",
              "weights p50 / p99 / all workers", "simulator cores",
              "learner + publisher cores")
    return Table(header, rows, frozenset({0, 2, 3, 4, 6, 7}))


def _ms(x: float) -> str:
    """12.0, 409: a tenth of a millisecond below 100 ms."""
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def _upto(x: float) -> str:
    return f"≤ {x:g}"  # the upper bound of a histogram bucket


CONTROLLER_RUNS = ((1000, 1), (100, 1), (1000, 2), (100, 2))  # the order they ran in


def scale_sim_controller(data: DataDir) -> Table:
    """The controller at a thousand virtual workers (``scale_sim.py``)."""
    rows = []
    for workers, seed in CONTROLLER_RUNS:
        d = data.load(f"scale-sim-controller-{workers}-seed{seed}.json")
        rows.append([
            f"{thousands(d['workers'])}, {seed}", _games(d),
            thousands(d["positions_per_s_received"]),
            f"**{d['controller_cores']:.3f}** ({d['controller_only_cores']:.3f} / "
            f"{d['driver_cores']:.3f})",
            f"{_ms(d['status_ms_p50'])} / {_ms(d['status_ms_max'])} ms",
            f"{_ms(d['api_status_ms_p50'])} / {_ms(d['api_status_ms_max'])} ms",
            f"{d['metrics_scrape_ms_p50']:.1f} ms, {nbytes(d['metrics_scrape_bytes'])}",
            _publish(d),
            f"{_upto(d['weights_p50_s'])} / {_upto(d['weights_p99_s'])} / "
            f"{_upto(d['weights_max_s'])} s"])
    header = ("workers, seed", "games appended / received / lost", "positions/s received",
              "controller + driver cores (controller / driver)", "status call p50 / max",
              "dashboard `/api/status` p50 / max", "`/metrics` scrape", "Redis out a publish",
              "weights delivered p50 / p99 / max")
    return Table(header, rows, frozenset({1, 2}))


def scale_sim_bed(data: DataDir) -> Table:
    """A thousand virtual workers on the multi-host bed (``scale_sim_bed.py``)."""
    d = data.load("scale-sim-bed-1000-seed1.json")
    ledger = "the auditors' ledger over both shards" if not d["ledger_problems"] else (
        f"ledger problems: {len(d['ledger_problems'])}")
    fetches = d["weight_fetches"]
    row = [f"{_games(d)} ({ledger})", str(d["publishes"]), nbytes(d["blob_bytes"]),
           f"{nbytes(d['redis_bytes_per_publish'])} "
           f"(**{d['redis_bytes_per_publish_in_blobs']:.2f} blobs** on {d['nodes']} nodes)",
           f"{thousands(fetches['node_cache'])} / {thousands(fetches['redis'])}",
           f"{_upto(d['weights_p50_s'])} / {_upto(d['weights_p99_s'])} s",
           f"{d['controller_cores']:.3f}",
           f"{d['api_status_ms_p50']:.0f} / {d['api_status_ms_max']:.0f} ms"]
    header = ("games appended / trained / lost", "publishes", "blob",
              "run's Redis out a publish", "fetches from the node cache / from Redis",
              "delivery p50 / p99", "controller + driver cores",
              "dashboard `/api/status` p50 / max")
    return Table(header, [row], frozenset({1, 2}))


def _recoveries(times: list[float | None], cap: float) -> str:
    """``15.7, 13.9``, with ``over 120`` for a fault not recovered from before the next."""
    shown = [f"over {cap:g}" if t is None else f"{t:.1f}" for t in times]
    if len(set(shown)) == 1 and len(shown) > 1 and times[0] is None:
        return f"{shown[0]} ({['', 'once', 'twice', 'three times'][len(shown)]})"
    return ", ".join(shown)


SOAK_FAULTS = {"worker": "worker", "node": "node (all of its processes)",
               "link": "link cut 10 s", "redis": "redis-server", "learner": "learner",
               "sigstop": "SIGSTOP of the learner, 30 s", "controller": "controller",
               "driver": "driver", "head": "head"}


def soak(data: DataDir, name: str, order: tuple[str, ...]) -> Table:
    """Recovery after each kind of fault in an hour's soak (``soak.py``), in ``order``. A
    fault that was not caused (its ``done`` says ``not caused: WHY``; newer files also say
    ``caused``) counts in no recovery figure: its row says how often and why apart."""
    doc = data.load(name)
    cap = doc["every_s"]  # a recovery not seen before the next fault is recorded as None
    by_kind: dict[str, list[float | None]] = {}
    missed: dict[str, list[str]] = {}
    for f in doc["faults"]:
        by_kind.setdefault(f["fault"], [])
        if not f.get("caused", True) or f["done"].startswith("not caused"):
            missed.setdefault(f["fault"], []).append(f["done"].removeprefix("not caused: "))
        else:
            by_kind[f["fault"]].append(f["recovery_s"])
    unknown = set(by_kind) - set(order)
    if unknown:
        raise ValueError(f"fault kinds the table does not list: {sorted(unknown)}")
    rows = [[SOAK_FAULTS[k], _recoveries(by_kind[k], cap) or "none",
             _not_caused(missed.get(k, []))] for k in order]
    return Table(("fault", "recovery, s (each time)", "not caused"), rows)


def _not_caused(reasons: list[str]) -> str:
    """``3 (no live learner to fault)`` for faults that could not be caused; ``0``."""
    if not reasons:
        return "0"
    return f"{len(reasons)} ({'; '.join(sorted(set(reasons)))})"


TABLES: dict[str, Builder] = {
    "tts-rate-limit": report_tts.rate_limit,
    "tts-bf16": report_tts.bf16,
    "tts-bf16-extra": report_tts.bf16_extra,
    "tts-gumbel": report_tts.gumbel,
    "tts-playout-cap": report_tts.playout_cap,
    "gpu-runs": gpu_runs,
    "gpu-hosts": gpu_hosts,
    "go9-screen": go9_screen,
    "go9-screen-gumbel": go9_screen_gumbel,
    "go9-gnugo": go9_gnugo,
    "go9-gnugo-held": go9_gnugo_held,
    "go9-gnugo-cosine": partial(go9_gnugo, runs=GO9_GNUGO_COSINE_CURVES),
    "go9-gnugo-cosine-held": partial(go9_gnugo_held, runs=GO9_GNUGO_COSINE),
    "go9-gnugo-rejudge": go9_gnugo_rejudge,
    "judge-power": judge_power_table,
    "go9-gnugo-protocols": go9_gnugo_protocols,
    "uct-go9": partial(uct_playouts, name="uct-go9-playouts.json"),
    "uct-gomoku6": partial(uct_playouts, name="uct-gomoku6-playouts.json"),
    "uct-fivestone": partial(uct_playouts, name="uct-fivestone-playouts.json"),
    "tts-go9": report_tts.go9,
    "tts-go9-held": report_tts.held,
    "tts-gomoku6-held": partial(report_tts.held, variants=report_tts.GOMOKU_HELD["gomoku6"]),
    "tts-gomoku8-held": partial(report_tts.held, variants=report_tts.GOMOKU_HELD["gomoku8"]),
    "tts-gomoku6-uct10000": partial(report_tts.held, variants=report_tts.GOMOKU6_UCT10000),
    "ablation-go9": report_tts.ablation_go9,  # the Zen 4 host's runs
    "ablation-go9-zen3": partial(report_tts.ablation_go9, prefix="ablation-go9-zen3"),
    # the AMX host's pair: global pooling (item 2) against the preset, side by side
    "ablation-go9-amx": partial(report_tts.ablation_go9, prefix="ablation-go9-amx",
                                variants=("full", "no-global-pooling")),
    "learner-replicas": learner_replicas,
    "scale-sim-bare": scale_sim_bare,
    "scale-sim-controller": scale_sim_controller,
    "scale-sim-bed": scale_sim_bed,
    "namespace-selfplay": partial(report_compare.selfplay_by_batch,
                                  name="namespace-selfplay.json"),
    "selfplay-bf16-zen4": partial(report_compare.selfplay_by_batch,
                                  name="selfplay-bf16-zen4.json"),
    "selfplay-amx": partial(report_compare.selfplay_by_batch, name="selfplay-amx.json"),
    "namespace-learner": report_compare.namespace_learner,
    # docs/reliability.md, "An hour of faults on the bed": each in the order its doc lists
    "soak-heavy": partial(soak, name="soak-bed-1.json", order=(
        "worker", "node", "link", "redis", "learner", "sigstop", "controller", "driver",
        "head")),
    "soak-light": partial(soak, name="soak-bed-1-light.json", order=(
        "worker", "controller", "driver", "redis", "learner", "node", "head", "link",
        "sigstop")),
}
"""Marker name -> builder; ``report.py --list`` prints each with its data files."""
