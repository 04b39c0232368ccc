"""The web board's JSON API (deploy/play/web.py) over real HTTP on loopback: new game,
moves with the computer's replies, undo, pass and resign (Go), state, SGF, hints; bad
requests get a 400 with one line; off loopback every request needs the token."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from zeroforge.deploy.play.web import BoardServer, PlayService
from zeroforge.shared.formats import read_sgf, replay
from zeroforge.shared.games import make_game


class Client:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.token = token

    def call(self, path: str, body: dict | str | None = None) -> tuple[int, dict | str]:
        data = None
        if body is not None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
        req = urllib.request.Request(self.url + path.lstrip("/"), data=data,
                                     method="POST" if body is not None else "GET")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw, code, ctype = r.read().decode(), r.status, r.headers["Content-Type"]
        except urllib.error.HTTPError as err:
            raw, code, ctype = err.read().decode(), err.code, err.headers["Content-Type"]
        return code, json.loads(raw) if ctype == "application/json" else raw

    def ok(self, path: str, body: dict | None = None) -> dict:
        code, data = self.call(path, body)
        assert code == 200, (path, data)
        assert isinstance(data, dict)
        return data

    def bad(self, path: str, body: dict | str | None = None, code: int = 400) -> str:
        got, data = self.call(path, body)
        assert got == code and isinstance(data, dict), (path, got, data)
        assert "\n" not in data["error"] and data["error"]
        return data["error"]


@pytest.fixture
def board() -> Iterator[Client]:
    server = BoardServer(PlayService("tictactoe", "human", "random", seed=5)).start()
    try:
        yield Client(server.url)
    finally:
        server.close()


def test_a_game_against_random_through_the_api(board: Client) -> None:
    page = board.call("/")[1]
    assert isinstance(page, str) and "board.js" in page and "{{QS}}" not in page
    assert "zfBoard" in board.call("/board.js")[1]
    opts = board.ok("/api/options")
    assert "net:PATH[:SIMULATIONS]" in opts["players"] and opts["games"]["go9"] == "go:size=9"
    st = board.ok("/api/state")
    assert st["people"] == [True, False] and st["to_play"] == 0 and len(st["legal"]) == 9
    while not st["over"]:
        st = board.ok("/api/move", {"action": st["legal"][0]["action"]})
        assert st["last"] is not None
    game = make_game("tictactoe")
    sgf = board.call("/api/sgf")[1]
    [record] = read_sgf(sgf)
    session = replay(record, game)
    assert session.outcome == st["result"]["outcome"] and record.result == session.outcome
    assert [m["action"] for m in st["moves"]] == session.moves
    assert record.black == "human" and record.white == "random"
    assert "game is over" in board.bad("/api/move", {"move": "A1"})


def test_undo_takes_back_the_persons_move_and_the_reply(board: Client) -> None:
    assert "nothing to undo" in board.bad("/api/undo", {})
    hint = board.ok("/api/hint")  # no net plays: a quick UCT search suggests
    assert hint["by"] == "uct400" and -1 <= hint["value"] <= 1
    assert 1 <= len(hint["moves"]) <= 5 and hint["moves"][0]["text"] in "A1 A2 A3 B1 B2 B3 C1 C2 C3"
    st = board.ok("/api/move", {"move": "B2"})
    assert len(st["moves"]) == 2 and st["can_undo"] and st["last"]["player"] == 1
    st = board.ok("/api/undo", {})
    assert st["moves"] == [] and st["message"].startswith("took back B2 ")
    # the computer moves first: a new game answers with its move already played
    st = board.ok("/api/new", {"game": "gomoku6", "first": "uct:20", "second": "human"})
    assert len(st["moves"]) == 1 and st["to_play"] == 1 and st["width"] == 6


@pytest.mark.parametrize("body, error", [
    ({"move": "Z9"}, "'Z9' is not a coordinate like B2"),
    ({"move": "B2", "x": 1}, None),  # unknown keys are ignored, the move is played
    ({"move": None}, "give \"move\" as text"),
    ({"action": 99}, "out of range"),
    ("not json", "not JSON"),
    ("[1, 2]", "must be a JSON object"),
])
def test_bad_moves_are_400_with_one_line(board: Client, body, error) -> None:
    if error is None:
        board.ok("/api/move", body)
    else:
        assert error in board.bad("/api/move", body)


def test_bad_new_games_and_routes(board: Client) -> None:
    assert "unknown game 'chess'" in board.bad("/api/new", {"game": "chess"})
    assert "unknown player 'bogus'" in board.bad("/api/new", {"second": "bogus"})
    assert "no such checkpoint" in board.bad("/api/new", {"second": "net:/no/such.pt"})
    assert "one side must be human" in board.bad(
        "/api/new", {"first": "random", "second": "random"})
    assert "first must be a non-empty string" in board.bad("/api/new", {"first": 3})
    assert "tictactoe has no pass" in board.bad("/api/pass", {})
    board.bad("/api/nothing", code=404)
    board.bad("/api/nothing", {}, code=404)
    code, _ = board.call("/api/move", "x" * 70_000)
    assert code == 400
    assert board.ok("/api/state")["game"] == "tictactoe"  # the game is still there


def test_go_pass_resign_and_sgf(board: Client) -> None:
    st = board.ok("/api/new", {"game": "go9", "first": "human", "second": "random"})
    assert st["pass_action"] == 81 and st["columns"][-1] == "J"
    st = board.ok("/api/pass", {})
    assert st["moves"][0]["text"] == "pass" and len(st["moves"]) == 2
    st = board.ok("/api/resign", {})
    assert st["over"] and st["result"] == {
        "outcome": -1, "sgf": "W+R", "text": "second player (random) wins by resignation"}
    assert "resignation" in board.bad("/api/undo", {})
    assert "game is over" in board.bad("/api/pass", {})
    [record] = read_sgf(board.call("/api/sgf")[1])
    assert record.result_text == "W+R" and record.moves[0] == 81 and record.komi == 7.5
    assert replay(record).moves == [m["action"] for m in st["moves"]]
    # two people: two passes end the game, counted (komi 7.5 on an empty board: W+7.5)
    board.ok("/api/new", {"game": "go9", "first": "human", "second": "human"})
    board.ok("/api/pass", {})
    st = board.ok("/api/undo", {})  # one move back between two people
    assert st["moves"] == [] and st["to_play"] == 0
    board.ok("/api/pass", {})
    st = board.ok("/api/pass", {})
    assert st["over"] and st["result"]["sgf"] == "W+7.5" and st["result"]["outcome"] == -1
    [record] = read_sgf(board.call("/api/sgf")[1])
    assert record.result_text == "W+7.5" and replay(record).outcome == -1


def test_fivestone_moves_are_from_to_pairs_and_have_no_sgf(board: Client) -> None:
    st = board.ok("/api/new", {"game": "fivestone", "first": "human", "second": "random"})
    assert st["name"] == "5stone_chess" and st["colours"] == ["black", "white"]
    move = next(m for m in st["legal"] if m["text"] == "c1-c2")
    assert (move["from"], move["to"]) == (22, 17)
    st = board.ok("/api/move", {"action": move["action"]})
    assert st["moves"][0]["from"] == 22 and st["board"][17] == 1 and st["board"][22] == 0
    assert not st["can_sgf"]
    assert "SGF has no game type" in board.bad("/api/sgf")


def test_off_loopback_every_request_needs_the_token() -> None:
    server = BoardServer(PlayService(), host="0.0.0.0").start()
    try:
        assert server.token and server.token_path is not None
        assert oct(server.token_path.stat().st_mode & 0o777) == "0o600"
        assert oct(os.stat(server.token_path.parent).st_mode & 0o777) == "0o700"
        local = f"http://127.0.0.1:{server.port}/"
        assert "needs its token" in Client(local).bad("/api/state", code=401)
        assert "needs its token" in Client(local).bad("/api/undo", {}, code=401)
        assert "needs its token" in Client(local, "wrong").bad("/", code=401)
        st = Client(local, server.token).ok("/api/state")
        assert st["game"] == "tictactoe"
        code, page = Client(local).call(f"?token={server.token}")
        assert code == 200 and f"/board.js?token={server.token}" in page
    finally:
        server.close()
