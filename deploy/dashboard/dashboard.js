// zeroforge run dashboard: polls this run's /api/history and /api/status and draws the
// charts with plotly.js. Every chart is built from series keys (name{label="v",...});
// a chart whose metrics this run does not have says so instead of drawing nothing.
"use strict";

(function () {
  const params = new URLSearchParams(window.location.search);
  const token = params.get("token");
  const RATE_WINDOW_S = 10;
  const state = {
    history: { t: [], series: {}, interval_s: 2, run_id: "", started: 0 },
    status: null, charts: {}, polls: 0, errors: 0, lastError: "",
  };
  window.zfDashboard = state; // for people poking around and for the browser test

  // ---- fetching ----------------------------------------------------------------------
  async function getJSON(path) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    const reply = await fetch(path, { headers: headers, cache: "no-store" });
    if (!reply.ok) throw new Error(path + ": HTTP " + reply.status);
    return reply.json();
  }

  function lastT() {
    const t = state.history.t;
    return t.length ? t[t.length - 1] : 0;
  }

  async function poll() {
    try {
      const h = state.history;
      // the server thins old samples; a page open for long re-reads the whole run
      const full = h.t.length === 0 || h.t.length > 4000;
      const since = full ? 0 : lastT();
      const [hist, status] = await Promise.all([
        getJSON("/api/history" + (since > 0 ? "?since=" + since : "")),
        getJSON("/api/status"),
      ]);
      merge(hist, full);
      state.status = status;
      state.polls += 1;
      banner("");
      render();
    } catch (err) {
      state.errors += 1;
      state.lastError = String(err);
      banner("cannot reach this run's server (" + String(err.message || err) +
             "); the run may have ended. Showing the data so far.");
    }
    window.setTimeout(poll, Math.max(1000, 1000 * (state.history.interval_s || 2)));
  }

  function merge(hist, full) {
    const h = state.history;
    h.interval_s = hist.interval_s; h.run_id = hist.run_id; h.started = hist.started;
    if (full) { h.t = []; h.series = {}; }
    const n = h.t.length;
    for (const key of Object.keys(hist.series)) {
      if (!(key in h.series)) h.series[key] = new Array(n).fill(null);
    }
    for (const key of Object.keys(h.series)) {
      const add = hist.series[key] || new Array(hist.t.length).fill(null);
      for (const v of add) h.series[key].push(v);
    }
    for (const t of hist.t) h.t.push(t);
  }

  function banner(text) {
    const el = document.getElementById("banner");
    el.textContent = text;
    el.style.display = text ? "block" : "none";
  }

  // ---- series helpers ----------------------------------------------------------------
  function parseKey(key) {
    const i = key.indexOf("{");
    if (i < 0) return { name: key, labels: {} };
    const labels = {};
    const re = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    let m;
    while ((m = re.exec(key.slice(i))) !== null) labels[m[1]] = m[2];
    return { name: key.slice(0, i), labels: labels };
  }

  // keys of metric `name` whose labels include `want` (all of them)
  function find(name, want) {
    const out = [];
    for (const key of Object.keys(state.history.series)) {
      const p = parseKey(key);
      if (p.name !== name) continue;
      let ok = true;
      for (const k of Object.keys(want || {})) if (p.labels[k] !== want[k]) ok = false;
      if (ok) out.push({ key: key, labels: p.labels });
    }
    out.sort((a, b) => a.key.localeCompare(b.key, undefined, { numeric: true }));
    return out;
  }

  function firstName(names) {
    for (const n of names) if (find(n).length) return n;
    return names[0];
  }

  function minutes() { return state.history.t.map((t) => t / 60); }

  function values(key, scale) {
    const col = state.history.series[key] || [];
    return col.map((v) => (v === null || v === undefined ? null : v * (scale || 1)));
  }

  // per-second rate of a cumulative series over the last RATE_WINDOW_S seconds
  function rateOf(col) {
    const t = state.history.t;
    const out = new Array(t.length).fill(null);
    let j = 0;
    for (let i = 1; i < t.length; i++) {
      while (j < i - 1 && t[i] - t[j + 1] >= RATE_WINDOW_S) j++;
      let k = j; // the window's first sample that has a value (a series starts late)
      while (k < i && (col[k] === null || col[k] === undefined)) k++;
      const a = col[k], b = col[i], dt = t[i] - t[k];
      if (a === null || b === null || a === undefined || b === undefined || dt <= 0) continue;
      out[i] = b >= a ? (b - a) / dt : null; // a reset (restart) is no negative rate
    }
    return out;
  }

  function sumCols(cols) {
    const n = state.history.t.length;
    const out = new Array(n).fill(null);
    for (const col of cols) {
      for (let i = 0; i < n; i++) {
        if (col[i] === null || col[i] === undefined) continue;
        out[i] = (out[i] || 0) + col[i];
      }
    }
    return out;
  }

  function ratio(num, den) {
    return num.map((v, i) => (v === null || !den[i] ? null : v / den[i]));
  }

  function line(name, y, extra) {
    return Object.assign({ type: "scatter", mode: "lines", name: name, x: minutes(), y: y,
                           connectgaps: false, line: { width: 1.5 } }, extra || {});
  }

  function labelText(labels, skip) {
    return Object.keys(labels).filter((k) => !(skip || []).includes(k))
      .map((k) => labels[k]).join(" ");
  }

  function perSeries(name, want, fn, prefix, skip) {
    return find(name, want).map((s) => line(
      ((prefix || "") + labelText(s.labels, skip)).trim() || name, fn(values(s.key))));
  }

  const ident = (c) => c;
  const bold = { line: { width: 3, color: "#1d2330" } };
  const dashed = { line: { width: 1.5, dash: "dash" } };
  const dotted = { line: { width: 1.5, dash: "dot" } };

  // ---- the charts --------------------------------------------------------------------
  function selfplayRate(metric) {
    const rows = find(metric, { worker_kind: "selfplay" });
    const rates = rows.map((s) => rateOf(values(s.key)));
    if (!rows.length) return [];
    const traces = [line("total", sumCols(rates), bold)];
    if (rows.length > 1) {
      rows.forEach((s, i) => traces.push(line("worker " + (s.labels.worker ?? i), rates[i])));
    }
    return traces;
  }

  function histMean(name, want, scale) {
    return find(name + "_count", want).map((s) => {
      const sumKey = s.key.replace(name + "_count", name + "_sum");
      const mean = ratio(rateOf(values(sumKey)), rateOf(values(s.key)));
      return { labels: s.labels, y: mean.map((v) => (v === null ? null : v * (scale || 1))) };
    });
  }

  const SECTIONS = [
    ["Actors", [
      { id: "actors", title: "Actors alive / desired", unit: "actors",
        help: "actors_alive (solid) and actors_desired (dashed) per kind.",
        traces: () => [...perSeries("actors_alive", {}, ident, "alive "),
                       ...perSeries("actors_desired", {}, ident, "desired ")
                         .map((t) => Object.assign(t, dashed))] },
      { id: "restarts", title: "Actor restarts", unit: "restarts",
        help: "actor_restarts_total per kind: actors replaced after they died.",
        traces: () => perSeries("actor_restarts_total", {}, ident) },
      { id: "placement", title: "Actors and their nodes", table: true,
        help: "RunStatus.actors: one row per live actor (state, node, pid, own counters)." },
    ]],
    ["Self-play", [
      { id: "selfplay-positions", title: "Self-play positions/s", unit: "positions/s",
        help: "rate of selfplay_positions_total: total (bold) and per worker.",
        traces: () => selfplayRate("selfplay_positions_total") },
      { id: "selfplay-games", title: "Self-play games/s", unit: "games/s",
        help: "rate of selfplay_games_total: total (bold) and per worker.",
        traces: () => selfplayRate("selfplay_games_total") },
      { id: "simulations", title: "MCTS simulations/s", unit: "simulations/s",
        help: "rate of selfplay_simulations_total: total (bold) and per worker.",
        traces: () => selfplayRate("selfplay_simulations_total") },
    ]],
    ["Inference", [
      { id: "evaluations", title: "Network evaluations/s", unit: "positions/s",
        help: "rate of nn_evaluations_total by source (local: each worker's own net; " +
              "server: inference servers), and per server from inference_batch_size_sum.",
        traces: () => [
          ...perSeries("nn_evaluations_total", {}, rateOf, "source "),
          ...find("inference_batch_size_sum").map((s) =>
            line("server " + labelText(s.labels), rateOf(values(s.key)))),
        ] },
      { id: "batch-fill", title: "Batch fill", unit: "% of max batch",
        // the mean (_sum/_count) is exact; quantiles of this histogram would only say
        // which of its coarse buckets the batches fell in
        help: "inference_batch_fill_ratio: mean over ~10 s per server, positions per " +
              "network call over the server's max batch.",
        traces: () => histMean("inference_batch_fill_ratio", {}, 100).map((m) =>
          line(("server " + labelText(m.labels)).trim(), m.y)) },
      { id: "per-call", title: "Requests per network call", unit: "per call",
        help: "inference_requests_total / inference_batch_size_count (requests merged " +
              "into one call) and mean positions per call (dashed), per server.",
        traces: () => [
          ...find("inference_requests_total").map((s) => {
            const calls = find("inference_batch_size_count", s.labels)[0];
            return line("requests " + labelText(s.labels), calls ?
              ratio(rateOf(values(s.key)), rateOf(values(calls.key))) : []);
          }),
          ...histMean("inference_batch_size", {}).map((m) =>
            Object.assign(line("positions " + labelText(m.labels), m.y), dashed)),
        ] },
      { id: "latency", title: "Request latency p50 / p99", unit: "ms (log scale)", log: true,
        help: "inference_request_latency_seconds (arrival to answer) per server, over each " +
              "sample interval; p99 dashed.",
        traces: () => [
          ...perSeries("inference_request_latency_seconds_p50", {}, (c) => c.map((v) =>
            (v === null ? null : 1000 * v)), "p50 "),
          ...perSeries("inference_request_latency_seconds_p99", {}, (c) => c.map((v) =>
            (v === null ? null : 1000 * v)), "p99 ").map((t) => Object.assign(t, dashed)),
        ] },
    ]],
    ["Learner", [
      { id: "learner-steps", title: "Learner steps/s", unit: "steps/s",
        help: "rate of learner_steps_total.",
        traces: () => perSeries("learner_steps_total", {}, rateOf).map((t) =>
          Object.assign(t, { name: "steps/s" })) },
      { id: "spi", title: "Samples per insert", unit: "ratio",
        help: "learner_samples_per_insert (actual), learner_samples_per_insert_target " +
              "(dashed) and learner_samples_per_insert_floor (dotted: below it self-play " +
              "waits for the learner): positions trained per position inserted.",
        traces: () => [
          ...perSeries("learner_samples_per_insert", {}, ident).map((t) =>
            Object.assign(t, { name: "actual" })),
          ...perSeries("learner_samples_per_insert_target", {}, ident).map((t) =>
            Object.assign(t, dashed, { name: "target" })),
          ...perSeries("learner_samples_per_insert_floor", {}, ident).map((t) =>
            Object.assign(t, dotted, { name: "floor" })),
        ] },
      { id: "throttled", title: "Time throttled per side", unit: "% of time",
        help: "rate of selfplay_throttled_seconds_total per worker (waiting while the " +
              "learner's samples per insert is below its floor), of " +
              "selfplay_backpressure_seconds_total (dashed: appends waiting for room in " +
              "a full stream) and of learner_throttled_seconds_total (waiting for data " +
              "at its target).",
        traces: () => {
          const pct = (c) => rateOf(c).map((v) => (v === null ? null : 100 * v));
          return [
            ...find("selfplay_throttled_seconds_total", { worker_kind: "selfplay" }).map((s) =>
              line("worker " + (s.labels.worker ?? ""), pct(values(s.key)))),
            ...find("selfplay_backpressure_seconds_total", { worker_kind: "selfplay" }).map(
              (s) => Object.assign(line("worker " + (s.labels.worker ?? "") + ", stream full",
                                        pct(values(s.key))), dashed)),
            ...perSeries("learner_throttled_seconds_total", {}, pct).map((t) =>
              Object.assign(t, bold, { name: "learner" })),
          ];
        } },
      { id: "loss", title: "Loss", unit: "loss",
        help: "learner_loss by part: policy (cross-entropy to the search's visit counts), " +
              "value (squared error to the outcome), total; with a Go net's auxiliary " +
              "heads also ownership (cross-entropy per point to the final ownership) and " +
              "score (Huber, points of final margin).",
        traces: () => perSeries("learner_loss", {}, ident) },
      { id: "replay", title: "Replay window", unit: "positions",
        help: "replay_window_positions: positions the learner samples from.",
        traces: () => perSeries("replay_window_positions", {}, ident).map((t) =>
          Object.assign(t, { name: "positions" })) },
      { id: "backlog", title: "Stream backlog", unit: "entries",
        help: "stream_lag_entries: written, not yet acknowledged (saw-tooths: acks come " +
              "after each checkpoint).",
        traces: () => perSeries("stream_lag_entries", {}, ident).map((t) =>
          Object.assign(t, { name: "entries" })) },
      { id: "rejected", title: "Rejected entries", unit: "entries (cumulative)",
        help: "rejected_entries_total by reason (only reasons seen in this run).",
        empty: () => (find("rejected_entries_total").length ? "no entry rejected so far" : ""),
        traces: () => find("rejected_entries_total").filter((s) =>
          values(s.key).some((v) => v > 0)).map((s) =>
          line(labelText(s.labels), values(s.key))) },
      { id: "weights", title: "Weights version", unit: "version",
        help: "weights_version per component: the learner publishes, workers fetch.",
        traces: () => perSeries("weights_version", {}, ident) },
      { id: "policy-lag", title: "Policy lag", unit: "versions behind",
        help: "learner_policy_lag_versions: learner version minus the version that played " +
              "each game arriving; mean, p50 and p99 (dashed) per interval.",
        traces: () => {
          const name = firstName(["learner_policy_lag_versions", "policy_lag_versions"]);
          return [
            ...histMean(name, {}).map((m) => line("mean", m.y)),
            ...perSeries(name + "_p50", {}, ident, "p50 "),
            ...perSeries(name + "_p99", {}, ident, "p99 ").map((t) => Object.assign(t, dashed)),
          ];
        } },
    ]],
    ["Strength", [
      { id: "scores", title: "Score against each anchor", unit: "score (0..1)",
        help: "evaluator_score_ratio per anchor: (wins + draws/2) / games of the newest " +
              "weights. 0.5 vs minimax in tic-tac-toe is perfect play.",
        traces: () => perSeries(firstName(["evaluator_score_ratio", "evaluator_score"]), {},
                                ident).map((t) => Object.assign(t, { line:
                                { shape: "hv", width: 2 } })) },
      { id: "rating", title: "Rating (Elo vs anchor)", unit: "Elo",
        help: "evaluator_elo_vs_anchor: the Elo difference implied by the latest score " +
              "against each anchor (clipped to ±800): the learning curve.",
        traces: () => perSeries(firstName(["evaluator_elo_vs_anchor", "evaluator_elo"]), {},
                                ident).map((t) => Object.assign(t, { line:
                                { shape: "hv", width: 2 } })) },
      { id: "ladder", title: "Ladder rating (Elo, random = 0)", unit: "Elo",
        help: "evaluator_ladder_elo: the run ladder's Bradley-Terry rating of the newest " +
              "evaluated weights (bold; dashed: its 95% interval) and of each anchor, " +
              "refitted over every evaluation so far. zeroforge rate shows the whole ladder.",
        traces: () => {
          const skip = ["player", "bound"];
          const band = { line: { width: 1.5, dash: "dash", color: "#1d2330" } };
          const latest = (bound, label, style) => perSeries(
            "evaluator_ladder_elo", { player: "latest", bound: bound }, ident, label, skip)
            .map((t) => Object.assign(t, style));
          return [
            ...latest("estimate", "latest", bold),
            ...latest("low", "latest 95% low", band),
            ...latest("high", "latest 95% high", band),
            ...perSeries("evaluator_ladder_elo", { bound: "estimate" }, ident, "", ["bound"])
              .filter((t) => t.name !== "latest"),
          ];
        } },
    ]],
    ["Machines", [
      { id: "cpu", title: "CPU / GPU utilisation per node", unit: "%",
        help: "node_cpu_utilisation_ratio per node; node_gpu_utilisation_ratio (dashed) " +
              "where a GPU is present.",
        traces: () => [
          ...perSeries("node_cpu_utilisation_ratio", {}, (c) => c.map((v) =>
            (v === null ? null : 100 * v)), "cpu "),
          ...perSeries("node_gpu_utilisation_ratio", {}, (c) => c.map((v) =>
            (v === null ? null : 100 * v)), "gpu ").map((t) => Object.assign(t, dashed)),
        ] },
      { id: "memory", title: "Memory per node", unit: "GiB",
        help: "node_memory_used_bytes (solid) of node_memory_total_bytes (dashed); GPU " +
              "memory (node_gpu_memory_used_bytes) where present.",
        traces: () => {
          const gib = (c) => c.map((v) => (v === null ? null : v / 2 ** 30));
          return [
            ...perSeries("node_memory_used_bytes", {}, gib, "used "),
            ...perSeries("node_memory_total_bytes", {}, gib, "total ")
              .map((t) => Object.assign(t, dashed)),
            ...perSeries("node_gpu_memory_used_bytes", {}, gib, "gpu "),
          ];
        } },
      { id: "actor-cpu", title: "CPU per actor", unit: "cores",
        help: "rate of actor_cpu_seconds_total: cores each actor keeps busy.",
        traces: () => find("actor_cpu_seconds_total").map((s) =>
          line(s.labels.kind + " " + s.labels.actor, rateOf(values(s.key)))) },
    ]],
  ];

  // ---- drawing -----------------------------------------------------------------------
  function build() {
    const root = document.getElementById("sections");
    for (const [section, charts] of SECTIONS) {
      const h2 = document.createElement("h2");
      h2.textContent = section;
      root.appendChild(h2);
      const grid = document.createElement("div");
      grid.className = "grid";
      root.appendChild(grid);
      for (const c of charts) {
        const card = document.createElement("div");
        card.className = c.table ? "card wide" : "card";
        card.innerHTML = "<h3></h3><p class='help'></p>";
        card.querySelector("h3").textContent = c.title;
        card.querySelector("p").textContent = c.help;
        const body = document.createElement("div");
        body.id = c.table ? "actors-wrap" : "chart-" + c.id;
        if (!c.table) body.className = "chart";
        card.appendChild(body);
        const nodata = document.createElement("div");
        nodata.className = "nodata";
        nodata.id = "nodata-" + c.id;
        nodata.textContent = "waiting for data…";
        card.appendChild(nodata);
        grid.appendChild(card);
        state.charts[c.id] = { def: c, hasData: false };
      }
    }
  }

  function hasPoints(traces) {
    return traces.some((t) => (t.y || []).some((v) => v !== null && v !== undefined));
  }

  function render() {
    renderHeader();
    for (const [, charts] of SECTIONS) {
      for (const c of charts) {
        if (c.table) { renderActors(c); continue; }
        let traces = [];
        try { traces = c.traces(); } catch (err) { traces = []; console.warn(c.id, err); }
        const ok = hasPoints(traces);
        state.charts[c.id].hasData = ok;
        const note = document.getElementById("nodata-" + c.id);
        note.textContent = ok ? "" : (state.history.t.length > 2
          ? (c.empty && c.empty() ? c.empty() : "no data in this run") : "waiting for data…");
        const layout = {
          margin: { l: 52, r: 10, t: 12, b: 32 }, height: 240,
          xaxis: { title: { text: "minutes since start", font: { size: 10 } },
                   zeroline: false, visible: ok },
          yaxis: { title: { text: c.unit, font: { size: 10 } }, rangemode: "tozero",
                   visible: ok },
          legend: { orientation: "h", y: -0.25, font: { size: 10 } },
          showlegend: traces.length > 1, font: { size: 10 },
          paper_bgcolor: "#fff", plot_bgcolor: "#fff",
        };
        if (c.id === "scores") layout.yaxis.range = [0, 1.02];
        if (c.log) { layout.yaxis.type = "log"; delete layout.yaxis.rangemode; }
        Plotly.react("chart-" + c.id, ok ? traces : [], layout,
                     { displaylogo: false, responsive: true, displayModeBar: false });
      }
    }
  }

  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "-";
    return Number(v).toLocaleString(undefined, { maximumFractionDigits: digits || 0 });
  }

  function renderHeader() {
    const s = state.status;
    if (!s) return;
    document.title = "zeroforge " + s.run_id + " (" + s.state + ")";
    document.getElementById("title").textContent =
      "zeroforge run " + s.run_id + ": " + s.state;
    const scores = Object.entries(s.scores || {}).map(([k, v]) =>
      k + " " + Math.round(100 * v) + "%").join(", ") || "-";
    const loss = s.losses && s.losses.total !== undefined && s.losses.total !== null
      ? fmt(s.losses.total, 3) + " (policy " + fmt(s.losses.policy, 3) + ", value " +
        fmt(s.losses.value, 3) + ")" : "-";
    const el = Math.max(s.elapsed_s, 1e-9);
    document.getElementById("summary").textContent =
      fmt(s.elapsed_s) + " s, inference " + s.inference + " | games " + fmt(s.games) +
      " (" + fmt(s.games / el, 1) + "/s) | positions " + fmt(s.positions) +
      " | learner steps " + fmt(s.learner_steps) + " | loss " + loss + " | weights v" +
      fmt(s.weights_version) + " | score " + scores + (s.error ? " | error: " + s.error : "");
  }

  function renderActors(c) {
    const rows = (state.status && state.status.actors) || [];
    const wrap = document.getElementById("actors-wrap");
    document.getElementById("nodata-" + c.id).textContent =
      rows.length ? "" : "no actor rows in this run's status";
    state.charts[c.id].hasData = rows.length > 0;
    const cols = ["kind", "index", "state", "node", "pid", "games", "positions", "steps",
                  "evaluations"];
    const table = document.createElement("table");
    const head = table.insertRow();
    for (const col of cols) {
      const th = document.createElement("th");
      th.textContent = col;
      head.appendChild(th);
    }
    for (const r of rows) {
      const tr = table.insertRow();
      for (const col of cols) {
        const v = r[col];
        tr.insertCell().textContent = typeof v === "number" && col !== "index" &&
          col !== "pid" ? fmt(v) : String(v ?? "");
      }
    }
    wrap.replaceChildren(table);
  }

  build();
  poll();
})();
