"""docs/design.md is the one map of the package: every module named there, every path named there
real, and each package's __init__.py one line that points to it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "omnivoice_cli"
DESIGN = ROOT / "docs" / "design.md"
# A path in backticks: a module ("engine/model/canvas.py") or a folder ("app/say/"), relative to
# omnivoice_cli/ (an "omnivoice_cli/" in front allowed), or to the repository for tests/ and tools/.
PATH = re.compile(r"`((?:[\w.-]+/)*(?:[\w.-]+\.py|[\w.-]+/))`")


def named_paths(text: str) -> set[str]:
    """The paths a page names, relative to the package ("" the package itself)."""
    found = set()
    for m in PATH.finditer(text):
        path = m.group(1)
        found.add(path[len("omnivoice_cli/") :] if path.startswith("omnivoice_cli/") else path)
    return found


def modules() -> list[str]:
    """Every module of the package as the map names it: a file, a package's __init__.py as its folder."""
    found = []
    for p in sorted(PACKAGE.rglob("*.py")):
        path = p.relative_to(PACKAGE)
        found.append(f"{path.parent.as_posix()}/" if path.name == "__init__.py" else path.as_posix())
    return ["" if m == "./" else m for m in found]


def exists(path: str) -> bool:
    return (PACKAGE / path).exists() or (ROOT / path).exists()


def test_the_map_reader_reads_paths_and_only_paths():
    text = "`omnivoice_cli/app/say/` and `engine/model/canvas.py`, `cli.py`, `omnivoice_cli/`; not `data/*.json`, `--help`, `a b.py`"
    assert named_paths(text) == {"app/say/", "engine/model/canvas.py", "cli.py", ""}
    assert "app/say/" in modules() and "" in modules() and "engine/model/canvas.py" in modules()


def test_every_module_is_named_in_the_design_map():
    named = named_paths(DESIGN.read_text(encoding="utf-8"))
    missing = [m or "omnivoice_cli/" for m in modules() if m not in named]
    assert not missing, f"modules docs/design.md does not name (a row in its map): {missing}"


def test_every_path_the_design_map_names_exists():
    named = named_paths(DESIGN.read_text(encoding="utf-8"))
    gone = sorted(p for p in named if not exists(p))
    assert not gone, f"docs/design.md names paths that are not there: {gone}"


def test_each_package_docstring_is_one_line_that_points_to_the_map():
    """The map is docs/design.md alone: a package's __init__.py says what the folder is in one line."""
    bad = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if "\n" in doc.strip() or "docs/design.md" not in doc:
            bad.append(f"{init.relative_to(ROOT)}: {doc.strip()[:80]!r}")
    assert not bad, "package docstrings not one line pointing to docs/design.md:\n" + "\n".join(bad)
