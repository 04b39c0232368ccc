"""Every subcommand of ``zeroforge --help`` is registered one way: a register function of
``cli.SUBCOMMANDS`` calls ``add_command(sub, "NAME", HANDLER, ...)`` with the handler
written out, so that a reader (or this test) goes from the name to the code it runs."""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from zeroforge.deploy import cli


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action


def listed_in_help() -> list[str]:
    """The subcommands ``zeroforge --help`` lists, in its order."""
    text = cli.build_parser().format_help()
    commands = text.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^ {4}([a-z][\w-]*)", commands, flags=re.MULTILINE)


def resolve(node: ast.expr, namespace: dict[str, Any]) -> Any:
    """The object a name (``cmd_x``) or dotted name (``commands.cmd_x``) stands for."""
    if isinstance(node, ast.Name):
        return namespace[node.id]
    if isinstance(node, ast.Attribute):
        return getattr(resolve(node.value, namespace), node.attr)
    raise AssertionError(f"handler {ast.unparse(node)} is not named")


def registrations() -> Iterator[tuple[str, Callable]]:
    """(name, handler) as written in each register function's ``add_command`` call."""
    for register in cli.SUBCOMMANDS:
        tree = ast.parse(textwrap.dedent(inspect.getsource(register)))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "add_command"]
        assert len(calls) == 1, f"{register.__qualname__}: {len(calls)} add_command calls"
        name, handler = calls[0].args[1:3]
        assert isinstance(name, ast.Constant), register.__qualname__
        yield name.value, resolve(handler, register.__globals__)


def test_every_subcommand_runs_the_handler_its_registration_names():
    named = dict(registrations())
    listed = listed_in_help()
    assert {"games", "play", "train", "status", "top", "gtp", "rate"} <= set(listed)
    assert listed == list(named)
    choices = subparsers(cli.build_parser()).choices
    for name in listed:
        handler = choices[name].get_default("handler")
        assert callable(handler), name
        assert handler is named[name], (name, handler)


def test_parsed_arguments_carry_the_handler():
    args = cli.build_parser().parse_args(["status", "--json"])
    assert args.handler is cli.commands.cmd_status and args.command == "status"
