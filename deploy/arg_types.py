"""Argument types the CLI's parsers share: each turns a bad value into one argparse line.

Only argparse here: every subcommand's parser is built on each start (``zeroforge status``
must start fast).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def nonneg(text: str) -> int:
    """An integer ≥ 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def positive(text: str) -> int:
    """An integer ≥ 1."""
    value = nonneg(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def seconds_between(low: float, high: float) -> Callable[[str], float]:
    """A type for a number of seconds in [low, high]."""

    def seconds(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{value:g} is not between {low:g} and {high:g} seconds")
        return value

    return seconds
