"""Names by role: a public class or function (top-level, not starting with `_`) is defined in one
module of the package, so a name says which thing it is and "go to definition" has one answer."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "omnivoice_cli"

# name -> why two modules define it: only where both truly play the same role (none today)
SAME_ROLE: dict[str, str] = {}


def doubled(modules: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Public top-level class and function names defined in more than one module -> those modules."""
    homes: dict[str, set[str]] = defaultdict(set)
    for module, tree in modules.items():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith(
                "_"
            ):
                homes[node.name].add(module)
    return {name: sorted(where) for name, where in sorted(homes.items()) if len(where) > 1}


def test_each_public_name_is_defined_in_one_module():
    modules = {
        str(p.relative_to(PACKAGE)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))
    }
    found = doubled(modules)
    assert {name: where for name, where in found.items() if name not in SAME_ROLE} == {}
    assert sorted(SAME_ROLE) == sorted(name for name in SAME_ROLE if name in found)  # no stale allowance


def test_the_finder_finds_a_doubled_name_and_leaves_the_rest():
    one = ast.parse("class Player:\n    pass\n\ndef render(): ...\n\ndef _own(): ...\n")
    two = ast.parse("from typing import Protocol\n\nclass Player(Protocol): ...\n\ndef _own(): ...\n")
    three = ast.parse("def speak():\n    def render(): ...\n\nif True:\n    def player(): ...\n")
    assert doubled({"a.py": one, "b.py": two, "c.py": three}) == {"Player": ["a.py", "b.py"]}
