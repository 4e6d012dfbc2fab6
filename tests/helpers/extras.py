"""Running `omnivoice` where an extra's packages do not import: BLOCKER is a sitecustomize (the
`blocker` fixture of conftest.py puts it first on PYTHONPATH) whose finder hides the packages named in
OMNIVOICE_TEST_BLOCK. test_extras.py, test_book_hostile.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from omnivoice_cli.engine.errors import install_hint

BLOCKER = """
import os, sys
_BLOCKED = frozenset(filter(None, os.environ.get("OMNIVOICE_TEST_BLOCK", "").split(",")))

class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
"""


def omnivoice(blocker: Path, blocked: str, *args, cwd: Path, path: str | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)]),
        "OMNIVOICE_TEST_BLOCK": blocked,
        "OMNIVOICE_HOME": str(cwd / "home"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    env.pop("OMNIVOICE_MODEL", None)
    env.pop("OMNIVOICE_PLAYER", None)
    if path is not None:
        env["PATH"] = path
    code = "from omnivoice_cli.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=180
    )


def one_line(proc: subprocess.CompletedProcess, extra: str, code: int = 2) -> str:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "───" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    assert install_hint(extra) in lines[0] and install_hint(extra) == f"pip install 'omnivoice-cli[{extra}]'"
    return lines[0]
