"""Commands registered lazily (cli.COMMANDS): `omnivoice --help` and every command's `--help` import
no heavy module (torch never) and few of the package's own (the app is imported inside the command
functions), the top level's summaries are the commands' own, and `say --help` fits in 70 lines at
80 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer.main
from conftest import ROOT

# what a help screen must never import: the model's stack, audio, servers, clusters, recognisers
HEAVY = (
    "torch",
    "numpy",
    "scipy",
    "soundfile",
    "safetensors",
    "tokenizers",
    "huggingface_hub",
    "httpx",
    "starlette",
    "uvicorn",
    "av",
    "sounddevice",
    "ray",
    "mcp",
    "wyoming",
    "faster_whisper",
)

SHOW_MODULES = """
import contextlib, io, json, sys
from omnivoice_cli.cli import main
sys.argv = ["omnivoice", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


# The package modules (omnivoice_cli.*) `omnivoice COMMAND --help` may import: what each imported
# when the commands took say's style (the app imported inside the command functions), plus 2. say's
# 30 are cli.py and ui/ (helpfmt, options, messages, text, progress, hints), the settings' schema and
# the engine's config it reads its defaults from, the media formats its help names, and the command's
# own module; the listings read the text front end's tables; the top level's --help imports 13.
HELP_IMPORTS = {
    **dict.fromkeys(("say", "batch", "dub", "book", "serve", "wyoming", "mcp", "voice", "edit", "revoice"), 30 + 2),
    **dict.fromkeys(("download", "models", "presets"), 28 + 2),
    "cache": 29 + 2,
    **dict.fromkeys(("languages", "instructs", "tags", "info"), 21 + 2),
}


def imported_by(*args: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    out = subprocess.run(
        [sys.executable, "-c", SHOW_MODULES, *args], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_every_command_has_a_help_import_bound():
    from omnivoice_cli.cli import COMMANDS

    assert set(HELP_IMPORTS) == set(COMMANDS)


@pytest.mark.slow
@pytest.mark.parametrize("command", list(HELP_IMPORTS))
def test_a_commands_help_imports_few_of_the_package_and_no_heavy_module(command):
    modules = imported_by(command, "--help")
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, heavy
    own = sorted(m for m in modules if m.startswith("omnivoice_cli."))
    assert len(own) <= HELP_IMPORTS[command], own


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["say", "--help"]], ids=["top", "say"])
def test_help_imports_no_heavy_module(args):
    modules = imported_by(*args)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, heavy
    assert len([m for m in modules if m.startswith("omnivoice_cli.")]) <= (13 + 2 if args == ["--help"] else 32)
    commands = {m for m in modules if m.startswith("omnivoice_cli.commands.")}
    if args == ["--help"]:  # the listing reads the summaries only: no command's module
        assert not commands, commands
    else:
        assert "omnivoice_cli.commands.say" in commands and "omnivoice_cli.commands.serve" not in commands
    runs = ("app.say.speak", "app.request", "app.batch.batch", "app.deliver", "engine.pipeline", "server.state")
    assert not [m for m in runs if f"omnivoice_cli.{m}" in modules]  # what runs a command: not its help


def test_the_listed_summaries_are_the_commands_own():
    from omnivoice_cli.cli import COMMANDS, app

    group = typer.main.get_command(app)
    assert group.list_commands(None) == list(COMMANDS)  # type: ignore[attr-defined]
    for name, lazy in COMMANDS.items():
        command = group.get_command(None, name)  # type: ignore[attr-defined]
        assert command.name == name and command.get_short_help_str(limit=200) == lazy.summary, name
        assert command.no_args_is_help == lazy.no_args_is_help, name


def test_a_command_is_imported_only_when_used(invoke):
    from omnivoice_cli import cli

    before = set(cli.app.registered_commands)
    assert before == set() and "say" in cli.COMMANDS  # nothing registered at import time: all lazy
    r = invoke("languages")
    assert r.exit_code == 0 and "en\t" in r.stdout


def test_say_help_fits_in_70_lines_at_80_columns(runner):
    from omnivoice_cli.cli import app

    r = runner.invoke(app, ["say", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    lines = r.stdout.splitlines()
    assert r.exit_code == 0 and len(lines) <= 70 and max(map(len, lines)) <= 80, len(lines)
    assert any("--help-all shows" in line for line in lines[-3:])
