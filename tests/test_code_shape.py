"""The package's shape: no function over about 80 lines, `cli.py` only assembles, imports flow one way."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "omnivoice_cli"
MAX_FUNCTION_LINES = 80


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_is_longer_than_about_80_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in _functions(tree):
            # its body, docstring included: a signature is declarations (a command's typer options,
            # which the formatter lays out one argument a line), not logic
            lines = fn.end_lineno - fn.body[0].lineno + 1
            if lines > MAX_FUNCTION_LINES:
                long.append(f"{path.relative_to(PACKAGE)}:{fn.lineno} {fn.name} ({lines} lines)")
    assert long == []


def test_cli_only_assembles_the_app():
    assert len((PACKAGE / "cli.py").read_text().splitlines()) < 600


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names.add("." * node.level + mod)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_engine_never_imports_the_cli_side_or_a_ui_library():
    forbidden = ("typer", "rich", "click", "starlette", "fastapi", "uvicorn")
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        for name in _imports(path):
            assert not name.startswith(forbidden), (path.name, name)
            assert not name.startswith(".."), (path.name, name)  # nothing above the engine package
