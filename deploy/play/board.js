// The zeroforge board (deploy/play/web.py serves it and the JSON API it calls).
// Draws the position as SVG from /api/state; a click on a point plays there (five-stone
// chess: a click on an own stone selects it, a click on a destination moves it).
"use strict";

(function () {
  const QS = window.zfQS || "";
  const CELL = 44;
  const MARGIN = 34;
  const SVG = "http://www.w3.org/2000/svg";
  const board = { state: null, errors: [], requests: 0, busy: false, selected: null,
                  hints: null };
  window.zfBoard = board;  // for people debugging and for the browser test

  const $ = (id) => document.getElementById(id);

  async function api(path, body) {
    board.busy = true;
    board.requests += 1;
    try {
      const init = body === undefined ? {} : {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) };
      const response = await fetch(path + QS, init);
      const data = await response.json();
      if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
      return data;
    } finally {
      board.busy = false;
    }
  }

  function svg(tag, attrs, text) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function centre(st, point) {
    const r = Math.floor(point / st.width), c = point % st.width;
    return [MARGIN + CELL / 2 + c * CELL, MARGIN + CELL / 2 + r * CELL];
  }

  function draw(st) {
    const el = $("board");
    while (el.firstChild) el.removeChild(el.firstChild);
    const w = st.width * CELL + 2 * MARGIN, h = st.height * CELL + 2 * MARGIN;
    el.setAttribute("width", w);
    el.setAttribute("height", h);
    el.appendChild(svg("rect", { x: MARGIN - 6, y: MARGIN - 6, width: w - 2 * MARGIN + 12,
      height: h - 2 * MARGIN + 12, fill: st.marks ? "#ffffff" : "#e3b96b", rx: 4 }));
    const cells = Boolean(st.marks);  // tic-tac-toe: marks in cells, others: intersections
    const lineAttrs = { stroke: "#5b4a2e", "stroke-width": 1 };
    if (cells) {
      for (let i = 1; i < st.width; i++) {
        const x = MARGIN + i * CELL;
        el.appendChild(svg("line", { ...lineAttrs, x1: x, y1: MARGIN, x2: x,
                                     y2: MARGIN + st.height * CELL, "stroke-width": 2 }));
      }
      for (let i = 1; i < st.height; i++) {
        const y = MARGIN + i * CELL;
        el.appendChild(svg("line", { ...lineAttrs, x1: MARGIN, y1: y,
                                     x2: MARGIN + st.width * CELL, y2: y, "stroke-width": 2 }));
      }
    } else {
      const [x0, y0] = centre(st, 0), [x1, y1] = centre(st, st.width * st.height - 1);
      for (let c = 0; c < st.width; c++) {
        const x = x0 + c * CELL;
        el.appendChild(svg("line", { ...lineAttrs, x1: x, y1: y0, x2: x, y2: y1 }));
      }
      for (let r = 0; r < st.height; r++) {
        const y = y0 + r * CELL;
        el.appendChild(svg("line", { ...lineAttrs, x1: x0, y1: y, x2: x1, y2: y }));
      }
    }
    for (let c = 0; c < st.width; c++) {
      const [x] = centre(st, c);
      el.appendChild(svg("text", { x, y: MARGIN / 2, class: "coord" }, st.columns[c]));
      el.appendChild(svg("text", { x, y: h - MARGIN / 2, class: "coord" }, st.columns[c]));
    }
    for (let r = 0; r < st.height; r++) {
      const [, y] = centre(st, r * st.width);
      el.appendChild(svg("text", { x: MARGIN / 2, y, class: "coord" }, st.height - r));
      el.appendChild(svg("text", { x: w - MARGIN / 2, y, class: "coord" }, st.height - r));
    }
    // tic-tac-toe's last move: its cell shaded, under the mark
    if (cells && st.last && st.last.to !== null) {
      const [x, y] = centre(st, st.last.to);
      el.appendChild(svg("rect", { x: x - CELL / 2 + 3, y: y - CELL / 2 + 3, width: CELL - 6,
        height: CELL - 6, class: "last-cell", id: "last-move" }));
    }
    // stones (board codes: 1 first player, 2 second)
    st.board.forEach((v, p) => {
      if (!v) return;
      const [x, y] = centre(st, p);
      if (cells) {
        el.appendChild(svg("text", { x, y, class: "mark", id: "stone-" + p,
          fill: v === 1 ? "#1d2330" : "#c0392b" }, st.marks[v - 1]));
      } else {
        const colour = st.colours[v - 1];
        el.appendChild(svg("circle", { cx: x, cy: y, r: CELL * 0.43, id: "stone-" + p,
          fill: colour === "black" ? "#15171c" : "#fafafa", stroke: "#15171c",
          "stroke-width": 1 }));
      }
    });
    // the last move: a red ring on where it went (and a dashed one where it came from)
    if (!cells && st.last && st.last.to !== null) {
      const [x, y] = centre(st, st.last.to);
      el.appendChild(svg("circle", { cx: x, cy: y, r: CELL * 0.2, class: "last",
                                     id: "last-move" }));
      if (st.last.from !== null) {
        const [fx, fy] = centre(st, st.last.from);
        el.appendChild(svg("circle", { cx: fx, cy: fy, r: CELL * 0.3, class: "from" }));
      }
    }
    if (board.selected !== null) {
      const [x, y] = centre(st, board.selected);
      el.appendChild(svg("circle", { cx: x, cy: y, r: CELL * 0.47, class: "selected" }));
      for (const m of st.legal) {
        if (m.from === board.selected && m.to !== null) {
          const [dx, dy] = centre(st, m.to);
          el.appendChild(svg("circle", { cx: dx, cy: dy, r: CELL * 0.15, class: "dest" }));
        }
      }
    }
    if (board.hints) {
      board.hints.moves.forEach((m, i) => {
        if (m.to === null) return;
        const [x, y] = centre(st, m.to);
        el.appendChild(svg("text", { x, y, class: "hint" }, String(i + 1)));
      });
    }
    for (let p = 0; p < st.width * st.height; p++) {
      const [x, y] = centre(st, p);
      const t = svg("rect", { x: x - CELL / 2, y: y - CELL / 2, width: CELL, height: CELL,
                              class: "target", id: "pt-" + p, "data-point": p });
      t.addEventListener("click", () => clicked(p));
      el.appendChild(t);
    }
  }

  function show(st) {
    board.state = st;
    const who = (i) => `${i === 0 ? "first" : "second"} (${st.players[i]}, ` +
      `${st.marks ? st.marks[i] : st.colours[i]})`;
    $("status").textContent = st.over ? "game over" :
      `${who(st.to_play)} to move` + (st.people[st.to_play] ? ": your move" : "");
    $("result").textContent = st.result ? st.result.text : "";
    $("message").textContent = st.message || "";
    $("undo").disabled = !st.can_undo;
    $("pass").style.display = st.pass_action === null ? "none" : "";
    $("pass").disabled = st.over || !st.people[st.to_play];
    $("resign").disabled = st.over || !st.people[st.to_play];
    $("hint").disabled = st.over || !st.people[st.to_play];
    $("sgf").className = st.can_sgf ? "" : "disabled";
    $("sgf").title = st.can_sgf ? "" : "SGF has no game type for this game";
    const lines = [];
    for (let i = 0; i < st.moves.length; i += 2) {
      const a = st.moves[i].text, b = st.moves[i + 1] ? st.moves[i + 1].text : "";
      lines.push(`${String(i / 2 + 1).padStart(3)}. ${a.padEnd(8)} ${b}`);
    }
    $("moves").textContent = lines.join("\n");
    $("hints").textContent = board.hints ? board.hints.text : "";
    draw(st);
  }

  function fail(err) {
    board.errors.push(String(err.message || err));
    $("error").textContent = String(err.message || err);
  }

  async function act(path, body) {
    $("error").textContent = "";
    board.hints = null;
    try {
      show(await api(path, body));
    } catch (err) {
      fail(err);
    }
  }

  function clicked(point) {
    const st = board.state;
    if (!st || st.over || !st.people[st.to_play] || board.busy) return;
    const fromStone = st.legal.some((m) => m.from === point);
    if (st.legal.length && st.legal[0].from !== null) {  // a game that moves stones
      if (fromStone) {
        board.selected = point;
        draw(st);
        return;
      }
      const move = st.legal.find((m) => m.from === board.selected && m.to === point);
      board.selected = null;
      if (!move) { draw(st); return; }
      act("/api/move", { action: move.action });
      return;
    }
    const move = st.legal.find((m) => m.to === point);
    if (!move) { fail(new Error("that point is not a legal move")); return; }
    act("/api/move", { action: move.action });
  }

  async function start() {
    try {
      const opts = await api("/api/options");
      for (const [label, spec] of Object.entries(opts.games)) {
        $("games").appendChild(Object.assign(document.createElement("option"),
                                             { value: spec, label }));
      }
      for (const spec of opts.players) {
        $("players").appendChild(Object.assign(document.createElement("option"),
                                               { value: spec }));
      }
      const st = await api("/api/state");
      $("game").value = st.game;
      $("first").value = st.players[0];
      $("second").value = st.players[1];
      show(st);
    } catch (err) {
      fail(err);
    }
  }

  $("new").addEventListener("click", () => {
    board.selected = null;
    act("/api/new", { game: $("game").value, first: $("first").value,
                      second: $("second").value });
  });
  $("undo").addEventListener("click", () => { board.selected = null; act("/api/undo", {}); });
  $("pass").addEventListener("click", () => act("/api/pass", {}));
  $("resign").addEventListener("click", () => act("/api/resign", {}));
  $("hint").addEventListener("click", async () => {
    try {
      board.hints = await api("/api/hint");
      show(board.state);
    } catch (err) {
      fail(err);
    }
  });
  start();
})();
