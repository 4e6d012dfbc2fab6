"""A newcomer's first mistakes at the command line: every usage error one line (the top level's
own options too, not typer's boxed panel), the other names people type for `voice rm` and
did-you-means, and the server flags' defaults in --help."""

from __future__ import annotations

import re

import pytest

ONE_LINE = [
    (["--bogus"], "Error: No such option: --bogus (see 'omnivoice --help')"),
    (["sya", "Hi"], "Error: No such command 'sya'. Did you mean 'say'? (see 'omnivoice --help')"),
    (["voice", "delet", "x"], "Error: No such command 'delet'. Did you mean 'rm'? (see 'omnivoice voice --help')"),
    (
        ["voice", "frob"],
        "Error: No such command 'frob': the voice commands are add, import, export, list, show, rm "
        "(see 'omnivoice voice --help')",
    ),
]


@pytest.mark.parametrize("args,line", ONE_LINE, ids=[" ".join(a) for a, _ in ONE_LINE])
def test_usage_errors_are_one_line_at_every_level(invoke, args, line):
    r = invoke(*args)
    assert r.exit_code == 2 and r.stderr.strip() == line, r.stderr
    assert "╭" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("alias", ["remove", "delete", "rm"])
def test_voice_remove_and_delete_are_rm(invoke, home, alias):
    from omnivoice_cli.app import voices

    saved = voices.voice_dir() / "alice.safetensors"
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_bytes(b"not read: only deleted")
    r = invoke("voice", alias, "alice")
    assert r.exit_code == 0 and "removed voice 'alice'" in r.stderr, r.stderr
    assert not saved.exists()


def test_voice_ls_is_list_and_aliases_stay_out_of_the_help(invoke, home):
    assert invoke("voice", "ls").exit_code == 0
    shown = invoke("voice", "--help").stdout
    assert " rm " in shown and not re.search(r"\b(remove|delete)\s{2,}", shown)


@pytest.mark.parametrize(
    "command,flags",
    [
        (
            "serve",
            {
                "--host": "127.0.0.1",
                "--port": "8000",
                "--max-queue": "64",
                "--max-input-chars": "4096",
                "--grace": "30",
                "--socket-idle-timeout": "300",
                "--socket-max-per-peer": "32",
            },
        ),
        (
            "wyoming",
            {"--uri": "tcp://127.0.0.1:10200", "--idle-timeout": "60", "--max-per-peer": "32", "--max-queue": "64"},
        ),
    ],
)
def test_server_help_shows_the_defaults(invoke, command, flags, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    shown = " ".join(invoke(command, "--help").stdout.replace("│", " ").split())  # wrapped rows joined
    for flag, default in flags.items():
        row = re.search(re.escape(flag) + r" [A-Z]+ (.*?)(?= --[a-z]|╰)", shown)
        assert row and f"Default: {default}." in row.group(1), (flag, row and row.group(1))
