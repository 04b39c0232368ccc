"""The one way a subcommand joins the CLI: ``add_command(sub, name, handler, ...)``.

Each subcommand has a ``register_<name>(sub)`` function, next to its arguments, that
calls ``add_command`` with the handler written out (``zeroforge.deploy.cli.SUBCOMMANDS``
lists every register function, in the order of ``zeroforge --help``). The handler gets
the parsed arguments and returns the exit code; it imports what it needs when it runs:
only argparse here, so that ``zeroforge status`` and ``top`` start fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Handler = Callable[[argparse.Namespace], int]
Subparsers = argparse._SubParsersAction
Register = Callable[[Subparsers], None]
"""A subcommand's register function: adds its parser to the CLI's subparsers."""


def add_command(sub: Subparsers, name: str, handler: Handler,
                **parser_options: Any) -> argparse.ArgumentParser:
    """Adds subcommand ``name`` (``parser_options`` as for ``add_parser``: help,
    description) run by ``handler``; returns its parser for the arguments."""
    parser = sub.add_parser(name, **parser_options)
    parser.set_defaults(handler=handler)
    return parser
