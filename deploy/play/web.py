"""The browser board: ``zeroforge play --web`` serves a page where a person plays any game
against any player spec (``zeroforge.shared.players.factory.PLAYER_SPECS``), or another person.

``PlayService`` holds the one game on the board and answers the JSON API; the computer's
moves are computed here, inside the request that made it the computer's turn. Routes:

- ``GET /`` the page (``board.html``), ``GET /board.js`` its script;
- ``GET /api/options``: game presets, player specs and the defaults from the command line;
- ``GET /api/state``: the position, the moves, the last move, legal moves, the result;
- ``POST /api/new`` ``{"game": SPEC, "first": PLAYER, "second": PLAYER}`` (``human`` for a
  person; at least one side is a person); ``POST /api/move`` ``{"move": "E5"}`` or
  ``{"action": 40}``; ``POST /api/undo`` (your last move and the replies to it);
  ``POST /api/pass`` (games with a pass: Go); ``POST /api/resign``;
- ``GET /api/hint``: the net's (else a quick UCT search's) top moves and value;
- ``GET /api/sgf``: the game as SGF (Go and gomoku-type games; 400 for five-stone chess).

Every answer is JSON but the page, the script and the SGF; a bad request is a 400 with
``{"error": one line}``. Loopback by default; bound to another address every request needs
the token (as the run dashboard: ``deploy.dashboard.server.token_ok``), which is written to
a 0600 file whose path is printed, never the token itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import numpy as np

from zeroforge.deploy.dashboard.server import is_loopback, page_url, token_ok, write_token
from zeroforge.deploy.play.terminal import LABELS, describe_analysis, hint_player, undo_turn
from zeroforge.shared.games import (
    COLUMN_LETTERS,
    PRESETS,
    Game,
    GameSession,
    IllegalMoveError,
    make_game,
)
from zeroforge.shared.players import PLAYER_SPECS, HumanPlayer, Player, make_player

MAX_BODY = 64 * 1024
"""Largest request body read (the API's bodies are a few dozen bytes)."""

_HERE = Path(__file__).resolve().parent
_FIVESTONE = "5stone_chess"


class BadRequest(ValueError):
    """A request the board refuses: HTTP 400 with this one-line message."""


class NotFound(Exception):
    """No such route: HTTP 404."""


def _colours(game: Game) -> list[str]:
    """Stone colour of the first and the second player."""
    colour_of = getattr(game, "colour_of", None)
    if colour_of is not None:  # five-stone chess: either colour may move first
        return [str(colour_of(0)), str(colour_of(1))]
    return ["black", "white"]


def _points(game: Game, action: int) -> tuple[int | None, int | None]:
    """(from point, to point) of an action on the board; (None, None) for a pass.

    Five-stone chess moves a stone: action = from_point * 4 + direction (up, down, left,
    right; its module docstring); the other games put a stone on point = action."""
    height, width = game.spec.board_shape
    if game.spec.name == _FIVESTONE:
        src, d = divmod(action, 4)
        r, c = divmod(src, width)
        r, c = r + (-1, 1, 0, 0)[d], c + (0, 0, -1, 1)[d]
        return src, (r * width + c if 0 <= r < height and 0 <= c < width else None)
    return (None, action) if action < height * width else (None, None)


class PlayService:
    """The game on the board and everything the API does to it (thread-safe)."""

    def __init__(self, game: str = "tictactoe", first: str = "human",
                 second: str = "random", seed: int | None = None) -> None:
        self.defaults = {"game": game, "first": first, "second": second}
        self.rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._players: dict[tuple[str, str], Player] = {}
        self.message = ""
        self.new(game, first, second)

    # --- the API -------------------------------------------------------------------------
    def options(self) -> dict[str, Any]:
        return {"games": {**{"tictactoe": "tictactoe", "fivestone": _FIVESTONE}, **PRESETS},
                "players": list(PLAYER_SPECS), "defaults": self.defaults}

    def new(self, game: str, first: str, second: str) -> dict[str, Any]:
        for what, value in (("game", game), ("first", first), ("second", second)):
            if not isinstance(value, str) or not value.strip():
                raise BadRequest(f"new game: {what} must be a non-empty string")
        try:
            built = make_game(game.strip())
            players = [self._player(spec.strip(), built) for spec in (first, second)]
        except (ValueError, OSError) as err:
            raise BadRequest(f"new game: {err}") from None
        if not any(isinstance(p, HumanPlayer) for p in players):
            raise BadRequest("new game: one side must be human (first or second)")
        with self._lock:
            self.game = built
            self.specs = [first.strip(), second.strip()]
            self.players = players
            self.session = GameSession(built)
            self.resigned: int | None = None
            self.message = ""
            self._reply()
            return self._state()

    def state(self) -> dict[str, Any]:
        with self._lock:
            return self._state()

    def move(self, move: Any) -> dict[str, Any]:
        if isinstance(move, bool) or not isinstance(move, str | int):
            raise BadRequest("move: give \"move\" as text (e.g. E5) or \"action\" as a number")
        with self._lock:
            self._person_to_move("move")
            try:
                action = self.session.play(move)
            except IllegalMoveError as err:
                raise BadRequest(str(err)) from None
            self.message = ""
            self._say_played(1 - self.session.to_play, action)
            self._reply()
            return self._state()

    def pass_move(self) -> dict[str, Any]:
        with self._lock:
            try:
                action = self.game.parse_action("pass")
            except IllegalMoveError:
                raise BadRequest(f"{self.game.spec.name} has no pass") from None
        return self.move(action)

    def undo(self) -> dict[str, Any]:
        with self._lock:
            if self.resigned is not None:
                raise BadRequest("undo: the game ended by resignation; start a new game")
            people = [i for i, p in enumerate(self.players) if isinstance(p, HumanPlayer)]
            if len(people) == 2:  # two people at one board: one move back
                taken = [self.session.undo()] if self.session.moves else []
            else:
                taken = undo_turn(self.session, people[0])
            if not taken:
                raise BadRequest("undo: nothing to undo")
            self.message = "took back " + " ".join(self.game.format_action(a) for a in taken)
            return self._state()

    def resign(self) -> dict[str, Any]:
        with self._lock:
            self._person_to_move("resign")
            self.resigned = self.session.to_play
            self.message = ""
            return self._state()

    def hint(self) -> dict[str, Any]:
        with self._lock:
            self._person_to_move("hint")
            analyst = hint_player(self.players)
            analysis, line = describe_analysis(self.game, self.session, analyst, self.rng)
            return {"by": analyst.name, "value": float(analysis.value[0]), "text": line,
                    "moves": [{"action": m.action, "text": self.game.format_action(m.action),
                               "share": m.share, "prior": m.prior,
                               "to": _points(self.game, m.action)[1]}
                              for m in analysis.top(0)]}

    def sgf(self) -> tuple[str, str]:
        """(SGF text, a file name for it)."""
        from zeroforge.shared.formats import record_from_session, write_sgf

        with self._lock:
            try:
                record = record_from_session(self.session, black=self.specs[0],
                                             white=self.specs[1],
                                             result_text=self._resign_text() or None)
                text = write_sgf(record)
            except ValueError as err:
                raise BadRequest(f"sgf: {err}") from None
            height, width = self.game.spec.board_shape
            return text, f"zeroforge-{self.game.spec.name}-{width}x{height}.sgf"

    # --- inside the lock -----------------------------------------------------------------
    def _player(self, spec: str, game: Game) -> Player:
        """``make_player(spec)``, kept per game (minimax keeps its solved positions) except
        nets: a new game loads the checkpoint again, which a run may have replaced."""
        if spec.startswith("net:"):
            return make_player(spec, game)
        key = (game.spec.spec_string, spec)
        if key not in self._players:
            self._players[key] = make_player(spec, game)
        return self._players[key]

    @property
    def _over(self) -> bool:
        return self.session.over or self.resigned is not None

    def _person_to_move(self, what: str) -> None:
        if self._over:
            raise BadRequest(f"{what}: the game is over; start a new game")
        if not isinstance(self.players[self.session.to_play], HumanPlayer):
            raise BadRequest(f"{what}: it is not a person's turn")

    def _reply(self) -> None:
        """The computer's moves until a person is to move or the game ends."""
        while not self.session.over:
            mover = self.session.to_play
            player = self.players[mover]
            if isinstance(player, HumanPlayer):
                return
            action = int(player.select(self.game, self.session.state, self.rng)[0])
            self.session.play(action)
            self._say_played(mover, action)

    def _say_played(self, mover: int, action: int) -> None:
        self.message = f"{LABELS[mover]} ({self.specs[mover]}) played " \
                       f"{self.game.format_action(action)}"

    def _resign_text(self) -> str:
        return "" if self.resigned is None else "BW"[1 - self.resigned] + "+R"

    def _result(self) -> dict[str, Any] | None:
        if self.resigned is not None:
            winner = 1 - self.resigned
            return {"outcome": 1 if winner == 0 else -1, "sgf": self._resign_text(),
                    "text": f"{LABELS[winner]} player ({self.specs[winner]}) wins by "
                            "resignation"}
        if not self.session.over:
            return None
        outcome = self.session.outcome
        text = "draw" if outcome == 0 else \
            f"{LABELS[0 if outcome > 0 else 1]} player " \
            f"({self.specs[0 if outcome > 0 else 1]}) wins"
        sgf = ""
        if self.game.spec.name == "go":
            from zeroforge.shared.formats import record_from_session

            sgf = record_from_session(self.session).result_text
            text += f" ({sgf})"
        return {"outcome": outcome, "text": text, "sgf": sgf}

    def _state(self) -> dict[str, Any]:
        game, session = self.game, self.session
        height, width = game.spec.board_shape
        board = getattr(session.state, "board", None)
        cells = [] if board is None else [int(v) for v in np.asarray(board[0]).reshape(-1)]
        moves = []
        for i, action in enumerate(session.moves):
            src, dst = _points(game, action)
            moves.append({"action": action, "text": game.format_action(action),
                          "player": int(session.history[i].to_play[0]), "from": src,
                          "to": dst})
        legal = []
        if not self._over and isinstance(self.players[session.to_play], HumanPlayer):
            for action in session.legal_actions():
                src, dst = _points(game, action)
                legal.append({"action": action, "text": game.format_action(action),
                              "from": src, "to": dst})
        try:
            pass_action: int | None = game.parse_action("pass")
        except IllegalMoveError:
            pass_action = None
        people = [isinstance(p, HumanPlayer) for p in self.players]
        return {
            "game": game.spec.spec_string, "name": game.spec.name, "width": width,
            "height": height, "board": cells, "colours": _colours(game),
            "marks": ["X", "O"] if game.spec.name == "tictactoe" else None,
            # the notation's column names: five-stone chess writes a-e, the others A-T
            "columns": list(("abcde" if game.spec.name == _FIVESTONE
                             else COLUMN_LETTERS)[:width]),
            "players": self.specs, "people": people, "to_play": session.to_play,
            "moves": moves, "last": moves[-1] if moves else None, "legal": legal,
            "pass_action": pass_action, "over": self._over, "result": self._result(),
            "can_undo": self.resigned is None and bool(session.moves)
            and (all(people) or any(m["player"] == people.index(True) for m in moves)),
            "can_sgf": game.spec.name in ("go", "gomoku", "tictactoe"),
            "message": self.message,
        }


class BoardServer:
    """The HTTP side: ``PlayService`` behind the routes of the module docstring."""

    def __init__(self, service: PlayService, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None) -> None:
        self.service = service
        self.token_path: Path | None = None
        if token is None and not is_loopback(host):
            # a private folder (0700) of its own: the token never lands in a shared place
            token, self.token_path = write_token(tempfile.mkdtemp(prefix="zeroforge-play-"))
        self.token = token
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self.url = page_url(host, self._httpd.server_port)
        """The page's URL, without the token."""
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_port)

    def start(self) -> BoardServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.1,),
                                        name="play-board", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever(0.1)

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
        self._httpd.server_close()

    def page(self, token: str | None) -> bytes:
        qs = f"?token={quote(token)}" if token else ""
        return (_HERE / "board.html").read_text(encoding="utf-8").replace("{{QS}}", qs).encode()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        s = self.service
        if path == "/api/new":
            d = s.defaults
            return s.new(body.get("game", d["game"]), body.get("first", d["first"]),
                         body.get("second", d["second"]))
        if path == "/api/move":
            if "action" in body:
                return s.move(body["action"])
            return s.move(body.get("move"))
        if path == "/api/undo":
            return s.undo()
        if path == "/api/pass":
            return s.pass_move()
        if path == "/api/resign":
            return s.resign()
        raise NotFound(path)


def _handler(server: BoardServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no access log: a ?token= in a request line must not end up anywhere

        def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def _json(self, code: int, data: Any) -> None:
            self._send(code, json.dumps(data, allow_nan=False).encode(), "application/json")

        def _allowed(self, query: dict[str, list[str]]) -> bool:
            if token_ok(server.token, self.headers, query):
                return True
            self._json(401, {"error": "this board needs its token (Authorization: Bearer "
                                      "TOKEN or ?token=TOKEN)"})
            return False

        def _answer(self, work: Any) -> None:
            try:
                self._json(200, work())
            except BadRequest as err:
                self._json(400, {"error": str(err).splitlines()[0]})
            except NotFound:
                self._json(404, {"error": f"no such page {urlsplit(self.path).path}"})
            except Exception as err:  # one bad request must not end the server
                self._json(500, {"error": f"{type(err).__name__}: {err}"})

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if not self._allowed(query):
                return
            token = query.get("token", [None])[0] if server.token else None
            path = parts.path
            if path in ("/", "/index.html"):
                self._send(200, server.page(token), "text/html; charset=utf-8")
            elif path == "/board.js":
                self._send(200, (_HERE / "board.js").read_bytes(),
                           "text/javascript; charset=utf-8")
            elif path == "/favicon.ico":
                self._send(204, b"", "image/x-icon")
            elif path == "/api/sgf":
                try:
                    text, name = server.service.sgf()
                except BadRequest as err:
                    self._json(400, {"error": str(err).splitlines()[0]})
                    return
                self._send(200, text.encode(), "application/x-go-sgf; charset=utf-8",
                           {"Content-Disposition": f'attachment; filename="{name}"'})
            else:
                routes = {"/api/state": server.service.state,
                          "/api/options": server.service.options,
                          "/api/hint": server.service.hint}
                if path not in routes:
                    self._json(404, {"error": f"no such page {path}"})
                    return
                self._answer(routes[path])

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            parts = urlsplit(self.path)
            if not self._allowed(parse_qs(parts.query)):
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True
                self._json(400, {"error": f"request body must be 0..{MAX_BODY} bytes"})
                return
            raw = self.rfile.read(length) if length else b""

            def work() -> dict[str, Any]:
                try:
                    body = json.loads(raw) if raw.strip() else {}
                except (ValueError, UnicodeDecodeError):
                    raise BadRequest("request body is not JSON") from None
                if not isinstance(body, dict):
                    raise BadRequest("request body must be a JSON object")
                return server.post(parts.path, body)

            self._answer(work)

    return Handler


def serve(args: argparse.Namespace) -> int:
    """``zeroforge play --web``: serve until Ctrl-C."""
    service = PlayService(args.game, args.first, args.second, seed=args.seed)
    server = BoardServer(service, host=args.host, port=args.port)
    # The URL is printed inside the try: a Ctrl-C that lands just after it (a script
    # reads the line and signals at once) is still a clean stop, not an error exit.
    try:
        if server.token_path is not None:
            print(f"board at {server.url} (needs its token: open {server.url}?token=TOKEN "
                  f"with TOKEN from {server.token_path})", flush=True)
        else:
            print(f"board at {server.url}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("board closed")
    finally:
        server.close()
    return 0
