"""The package's shape: no function over about 80 lines, `cli.py` only assembles, imports flow one way;
issue 35's measures (module size, one `load_engine`, own imports at module tops, few `Any`); tests named
by module or behaviour, the shared fixtures in conftest."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "omnivoice_cli"
MAX_FUNCTION_LINES = 80


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    """A file parsed once for all the tests of this module."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_is_longer_than_about_80_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = _tree(path)
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
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names.add("." * node.level + mod)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_engine_never_imports_the_cli_side_or_a_ui_library():
    forbidden = ("typer", "rich", "click", "starlette", "fastapi", "uvicorn")
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        depth = len(path.relative_to(PACKAGE / "engine").parts) - 1  # a subpackage's module may go up to engine/
        for name in _imports(path):
            assert not name.startswith(forbidden), (path.name, name)
            assert not name.startswith("." * (depth + 2)), (path.name, name)  # nothing above the engine package


# ------------------------------------------------------------------------------------ issue 35's measures

MAX_MODULE_LINES = 700


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def test_no_module_is_over_700_lines():
    long = [f"{p.relative_to(PACKAGE)} ({len(s.splitlines())})" for p, s in _modules() if len(s.splitlines()) > 700]
    assert long == []


def test_there_is_one_load_engine():
    found = [
        f"{p.relative_to(PACKAGE)}:{fn.lineno}"
        for p, _ in _modules()
        for fn in _functions(_tree(p))
        if fn.name == "load_engine"
    ]
    assert len(found) == 1, found


def _own_imports_in_functions(tree: ast.AST) -> int:
    """Imports of the package's own modules inside function bodies (a module's dependencies belong at
    its top, but for those that would pull torch or an extra into `--help`)."""
    count = 0
    for fn in _functions(tree):
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("omnivoice_cli")):
                count += 1
            elif isinstance(node, ast.Import) and any(a.name.startswith("omnivoice_cli") for a in node.names):
                count += 1
    return count


def _anys(source: str) -> int:
    """`Any` in annotations and expressions (not in the import lines that bring it in)."""
    lines = (ln for ln in source.splitlines() if not ln.lstrip().startswith(("from ", "import ")))
    return sum(len(re.findall(r"\bAny\b", ln)) for ln in lines)


def test_few_imports_of_the_package_inside_functions():
    assert sum(_own_imports_in_functions(_tree(p)) for p, _ in _modules()) <= 100


def test_few_any_in_app_and_server():
    paths = [*(PACKAGE / "app").rglob("*.py"), *(PACKAGE / "server").rglob("*.py")]
    assert sum(_anys(p.read_text(encoding="utf-8")) for p in paths) <= 80


# ------------------------------------------------------------------------------------ the tests' own shape


def test_tests_are_named_by_module_or_behaviour():
    """Test files are named by module or behaviour (test_<module>.py), tests by what they show."""
    tests = Path(__file__).resolve().parent
    by_issue = re.compile(r"(^|_)(issues?|frictions?\d*|check\d+|round\d+)(_|\.|$)")
    bad = [p.name for p in tests.glob("test_*.py") if by_issue.search(p.name)]
    for path in tests.glob("test_*.py"):
        for fn in _functions(_tree(path)):
            if fn.name.startswith("test_") and by_issue.search(fn.name):
                bad.append(f"{path.name}::{fn.name}")
    assert bad == []


def test_the_home_fixture_is_defined_once_in_conftest():
    """`home` (an empty OMNIVOICE_HOME) lives in tests/conftest.py; a module that needs more has a fixture
    of another name."""
    tests = Path(__file__).resolve().parent
    defined = [
        p.name
        for p in sorted(tests.glob("*.py"))
        for fn in _functions(_tree(p))
        if fn.name == "home" and fn.col_offset == 0
    ]
    assert defined == ["conftest.py"]
