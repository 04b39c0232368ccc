"""docs/reliability.md, "Faults the suite induces": every row names a test that exists,
and the counts the section states are the table's. Pure file parsing (no zeroforge
import), so it is fast and runs in the unit lane."""

from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
SECTION = "## Faults the suite induces"
KINDS = ("SIGKILL", "SIGSTOP", "Redis", "network", "disk", "other")
"""The fault kinds, in the table's order: each row's fault cell starts ``KIND:``."""


def section(doc: str) -> str:
    """The section's text, from its heading to the next ``## `` heading ("" if none)."""
    start = doc.find(SECTION + "\n")
    if start < 0:
        return ""
    end = doc.find("\n## ", start + len(SECTION))
    return doc[start:] if end < 0 else doc[start:end]


def rows(text: str) -> list[tuple[str, str]]:
    """(fault cell, node id) of each table row (header and separator left out)."""
    found = []
    for line in text.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[1].startswith("test (pytest"):
            continue
        found.append((cells[0], cells[1].strip("`")))
    return found


def _test_names(path: Path) -> set[str]:
    """``name`` and ``Class::name`` of every function in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{f.name}" for f in node.body
                      if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    return names


def node_problem(node_id: str, root: Path) -> str | None:
    """Why ``node_id`` names no test under ``root`` (None when it does): the file must
    exist, the function must be defined in it, a ``[param]`` must appear in its source."""
    match = re.fullmatch(r"([\w/.-]+\.py)::([\w:]+?)(?:\[(.+)\])?", node_id)
    if not match:
        return f"{node_id}: not a pytest node id"
    file, name, param = match.groups()
    path = root / file
    if not path.is_file():
        return f"{node_id}: no file {file}"
    if name not in _test_names(path):
        return f"{node_id}: no test {name} in {file}"
    if param is not None and param not in path.read_text():
        return f"{node_id}: parameter {param!r} not in {file}"
    return None


def problems(doc: str, root: Path = ROOT) -> list[str]:
    """Everything wrong with the section of ``doc``: missing section or total, a row that
    names no test or no known kind, a row given twice, counts that disagree."""
    text = section(doc)
    if not text:
        return [f"no {SECTION!r} section"]
    table = rows(text)
    found = [p for _, node_id in table if (p := node_problem(node_id, root))]
    twice = [n for n, k in collections.Counter(i for _, i in table).items() if k > 1]
    found += [f"{node_id}: listed twice" for node_id in twice]
    kinds = collections.Counter(fault.split(":", 1)[0].strip() for fault, _ in table)
    found += [f"unknown fault kind {k!r} (one of {KINDS})" for k in kinds if k not in KINDS]
    total = re.search(r"^Total:\s*\**(\d+)\**\s+tests\s*\(([^)]*)\)", text, re.M)
    if not total:
        return [*found, "no 'Total: **N** tests (KIND n, ...)' line"]
    if int(total.group(1)) != len(table):
        found.append(f"Total says {total.group(1)}, the table has {len(table)} rows")
    stated = {k: int(n) for k, n in re.findall(r"(\w+) (\d+)", total.group(2))}
    if stated != {k: n for k, n in kinds.items() if k in KINDS}:
        found.append(f"Total's breakdown {stated} is not the table's {dict(kinds)}")
    if sum(stated.values()) != int(total.group(1)):
        found.append(f"Total's breakdown adds up to {sum(stated.values())}, not "
                     f"{total.group(1)}")
    return found


def test_every_listed_fault_test_exists_and_the_counts_match():
    doc = DOC.read_text()
    assert problems(doc) == []
    assert len(rows(section(doc))) >= 30  # the table was found, not an empty one


def test_a_bad_row_and_a_wrong_count_are_reported():
    real = "tests/integration/test_faults_in_a_run.py::test_kill_9_of_the_learner_process"
    fake = "tests/integration/test_faults_in_a_run.py::test_no_such_fault"
    doc = "\n".join([
        "# doc", "", SECTION, "", "Total: **3** tests (SIGKILL 2, disk 1).", "",
        "| fault | test (pytest node id) | what it checks |", "|---|---|---|",
        f"| SIGKILL: learner | `{real}` | resumes |",
        f"| SIGKILL: nothing | `{fake}` | planted |",
        "| SIGSTOP: replica | `tests/integration/test_learner_replicas.py::"
        "test_a_lost_replica_fails_the_next_step_in_one_line[SIGHUP]` | planted |",
        "", "## Next", "| x | `tests/nowhere.py::test_x` | after the section: not read |"])
    found = problems(doc)
    assert any(fake in p and "no test test_no_such_fault" in p for p in found), found
    assert any("parameter 'SIGHUP'" in p for p in found), found
    assert any("breakdown" in p for p in found), found  # SIGSTOP 1 not stated, disk 0
    assert not any("nowhere" in p for p in found), found
    assert problems(doc.replace(fake, real)) != []  # now listed twice
    good = doc.replace(f"| SIGKILL: nothing | `{fake}` | planted |\n", "").replace(
        "[SIGHUP]", "[SIGSTOP]").replace("(SIGKILL 2, disk 1)", "(SIGKILL 1, SIGSTOP 1)")
    assert problems(good) == ["Total says 3, the table has 2 rows",
                              "Total's breakdown adds up to 2, not 3"]
    assert problems(good.replace("**3**", "**2**")) == []
    assert problems("# doc without the section") == [f"no {SECTION!r} section"]
