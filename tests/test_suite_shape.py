"""The test suite's own shape: no test module imports another (what several share lives in conftest.py
or the tests/helpers package), and a helper (a module-level function or class that is neither a test
nor a fixture nor private) is defined in one file, so a fix to it reaches every test that uses it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _files() -> list[Path]:
    return sorted([*TESTS.glob("*.py"), *(TESTS / "helpers").glob("*.py")])


def _imported(tree: ast.AST) -> list[str]:
    """Every module an import names, inside functions too (`from x import y`: x; `import x.y`: x.y)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def _test_modules_imported(tree: ast.AST) -> list[str]:
    """The test modules among them: test_x, or tests.test_x."""
    found = []
    for name in _imported(tree):
        parts = name.split(".")
        if parts[0].startswith("test_") or (parts[0] == "tests" and len(parts) > 1 and parts[1].startswith("test_")):
            found.append(name)
    return found


def test_no_test_module_imports_another():
    bad = [f"{p.relative_to(TESTS)}: {m}" for p in _files() for m in _test_modules_imported(ast.parse(p.read_text()))]
    assert bad == []


def test_the_import_finder_finds_test_modules_only():
    tree = ast.parse(
        "import test_ray\nfrom tests.test_book import X\nfrom test_hub import put\n"
        "from conftest import ROOT\nfrom helpers.audio import tone\nimport testfixtures\n"
        "def f():\n    from test_parity import CASES\n"
    )
    assert _test_modules_imported(tree) == ["test_ray", "tests.test_book", "test_hub", "test_parity"]


def _is_fixture(node: ast.AST) -> bool:
    return any("fixture" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def _helpers(tree: ast.Module) -> list[str]:
    """The module-level functions and classes of a file that are neither tests, fixtures nor private."""
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not node.name.startswith(("test_", "_"))
        and not _is_fixture(node)
    ]


def _is_script(tree: ast.Module) -> bool:
    """A file run as a program of its own (`if __name__ == "__main__":`), whose `main` is its own."""
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def test_each_helper_is_defined_in_one_file():
    """A helper several test modules need is shared, not copied (errors_of was in four, tone in five);
    two helpers that do different things have different names."""
    where = defaultdict(list)
    for path in _files():
        tree = ast.parse(path.read_text())
        if _is_script(tree):
            continue
        for name in _helpers(tree):
            where[name].append(str(path.relative_to(TESTS)))
    assert {name: files for name, files in where.items() if len(files) > 1} == {}


def test_the_helper_finder_leaves_tests_fixtures_and_private_names_out():
    tree = ast.parse(
        "import pytest\n\ndef tone(): pass\n\nclass FakeRay: pass\n\ndef test_x(): pass\n\n"
        "def _private(): pass\n\n@pytest.fixture\ndef home(): pass\n\n"
        "@pytest.fixture(scope='module')\ndef engine(): pass\n\nasync def speak(): pass\n"
    )
    assert _helpers(tree) == ["tone", "FakeRay", "speak"]
