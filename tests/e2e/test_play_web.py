"""The web board as a person meets it: ``zeroforge play --web`` in a subprocess, headless
Chromium clicking a whole tic-tac-toe game against ``random``, the result on the page, the
SGF downloaded through the page's link (read back and replayed: same result); five-stone
chess moved by two clicks and taken back with the undo button; a screenshot of each
(``tests/e2e/browser.py`` says where)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.e2e.browser import chromium, console_errors, output_dir
from tests.e2e.test_cli import ZF
from tests.web_board import play_board
from zeroforge.shared.formats import read_sgf, replay
from zeroforge.shared.games import make_game


@pytest.fixture
def board_url() -> Iterator[str]:
    with play_board(ZF) as url:
        yield url


def wait_for(driver, script: str, timeout: float = 30.0):
    """Poll ``script`` (JS returning a value) until it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        assert time.monotonic() < deadline, (
            f"page never got to {script!r}; errors: "
            + str(driver.execute_script("return window.zfBoard && window.zfBoard.errors")))
        time.sleep(0.1)


def state(driver) -> dict:
    """The state the page shows, once no request is in flight."""
    wait_for(driver, "return window.zfBoard && window.zfBoard.state && !window.zfBoard.busy")
    return driver.execute_script("return window.zfBoard.state")


def click_point(driver, point: int) -> dict:
    """Click a point and wait for the page to show the answer."""
    before = driver.execute_script("return window.zfBoard.requests")
    driver.find_element(By.ID, f"pt-{point}").click()
    wait_for(driver, f"return window.zfBoard.requests > {before} && !window.zfBoard.busy")
    return state(driver)


def test_a_whole_tictactoe_game_by_clicks_and_its_sgf(board_url: str, tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with chromium(900, 900) as driver:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": str(downloads)})
        driver.get(board_url)
        st = state(driver)
        assert st["game"] == "tictactoe" and st["players"] == ["human", "random"]
        assert driver.find_element(By.ID, "status").text.endswith("your move")
        assert not driver.find_element(By.ID, "pass").is_displayed()  # no pass in ttt
        clicks = 0
        while not st["over"]:
            point = st["legal"][len(st["legal"]) // 2]["to"]
            st = click_point(driver, point)
            clicks += 1
            # the stone is drawn where it was clicked, the reply is marked as the last move
            assert driver.find_elements(By.ID, f"stone-{point}")
            last = driver.find_element(By.ID, "last-move")  # the cell of the last move
            centre = 34 + 44 / 2 + 44 * (st["last"]["to"] % 3)  # board.js's MARGIN, CELL
            assert float(last.get_attribute("x")) == pytest.approx(centre - 22 + 3)
        assert 3 <= clicks <= 5 and len(st["moves"]) in (2 * clicks - 1, 2 * clicks)
        shown = driver.find_element(By.ID, "result").text
        assert shown == st["result"]["text"] and shown  # e.g. "first player (human) wins"
        assert driver.find_element(By.ID, "status").text == "game over"
        # a click after the end does nothing
        assert click_point_ignored(driver, st)
        driver.save_screenshot(str(output_dir() / "play-web-tictactoe.png"))
        driver.find_element(By.ID, "sgf").click()
        deadline = time.monotonic() + 20
        while not list(downloads.glob("*.sgf")) and time.monotonic() < deadline:
            time.sleep(0.2)
        [path] = list(downloads.glob("*.sgf"))
        assert path.name == "zeroforge-tictactoe-3x3.sgf"
        assert console_errors(driver) == []
    [record] = read_sgf(path.read_text(encoding="utf-8"))
    session = replay(record, make_game("tictactoe"))
    assert session.moves == [m["action"] for m in st["moves"]]
    assert session.outcome == st["result"]["outcome"] == record.result
    assert record.black == "human" and record.white == "random"


def click_point_ignored(driver, st: dict) -> bool:
    free = [p for p, v in enumerate(st["board"]) if v == 0]
    before = driver.execute_script("return window.zfBoard.requests")
    if free:
        driver.find_element(By.ID, f"pt-{free[0]}").click()
    time.sleep(0.3)
    return driver.execute_script("return window.zfBoard.requests") == before


def test_fivestone_by_two_clicks_undo_and_a_new_game_form(board_url: str) -> None:
    with chromium(900, 900) as driver:
        driver.get(board_url)
        state(driver)
        for field, value in (("game", "fivestone"), ("first", "human"), ("second", "random")):
            box = driver.find_element(By.ID, field)
            box.clear()
            box.send_keys(value)
        before = driver.execute_script("return window.zfBoard.requests")
        driver.find_element(By.ID, "new").click()
        wait_for(driver, f"return window.zfBoard.requests > {before} && !window.zfBoard.busy")
        st = state(driver)
        assert st["name"] == "5stone_chess" and st["moves"] == []
        # c1 (point 22) up to c2 (point 17): select the stone, then the destination
        driver.find_element(By.ID, "pt-22").click()
        assert driver.find_elements(By.CSS_SELECTOR, "circle.selected")
        assert driver.find_elements(By.CSS_SELECTOR, "circle.dest")
        st = click_point(driver, 17)
        assert st["moves"][0]["text"] == "c1-c2" and len(st["moves"]) == 2
        assert st["board"][17] == 1 and st["board"][22] == 0
        assert driver.find_elements(By.ID, "last-move")  # the reply, from-to marked
        assert driver.find_element(By.ID, "sgf").get_attribute("class") == "disabled"
        driver.save_screenshot(str(output_dir() / "play-web-fivestone.png"))
        before = driver.execute_script("return window.zfBoard.requests")
        driver.find_element(By.ID, "undo").click()
        wait_for(driver, f"return window.zfBoard.requests > {before} && !window.zfBoard.busy")
        st = state(driver)
        assert st["moves"] == [] and st["board"][22] == 1
        assert driver.find_element(By.ID, "message").text.startswith("took back c1-c2 ")
        # a bad player spec: the server's one line shows on the page
        box = driver.find_element(By.ID, "second")
        box.clear()
        box.send_keys("bogus")
        driver.find_element(By.ID, "new").click()
        wait_for(driver, "return window.zfBoard.errors.length > 0")
        assert "unknown player 'bogus'" in driver.find_element(By.ID, "error").text
        # the failed request is logged by Chromium as a 400: the only console error
        errors = console_errors(driver)
        assert all("400" in e for e in errors), errors


def test_go_click_pass_and_resign_buttons(board_url: str) -> None:
    with chromium(900, 900) as driver:
        driver.get(board_url)
        state(driver)
        box = driver.find_element(By.ID, "game")
        box.clear()
        box.send_keys("go9")
        before = driver.execute_script("return window.zfBoard.requests")
        driver.find_element(By.ID, "new").click()
        wait_for(driver, f"return window.zfBoard.requests > {before} && !window.zfBoard.busy")
        st = click_point(driver, 4 * 9 + 4)  # E5
        assert st["game"].startswith("go:size=9") and st["moves"][0]["text"] == "E5"
        for button in ("pass", "resign"):
            before = driver.execute_script("return window.zfBoard.requests")
            driver.find_element(By.ID, button).click()
            wait_for(driver, f"return window.zfBoard.requests > {before} && "
                             "!window.zfBoard.busy")
        st = state(driver)
        assert [m["text"] for m in st["moves"]][2] == "pass" and st["over"]
        assert driver.find_element(By.ID, "result").text == \
            "second player (random) wins by resignation"
        assert not driver.find_element(By.ID, "pass").is_enabled()
        driver.save_screenshot(str(output_dir() / "play-web-go9.png"))
        assert console_errors(driver) == []
