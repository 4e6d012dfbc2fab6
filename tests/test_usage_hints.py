"""A newcomer's first mistakes at the command line: every usage error one line (the top level's
own options too, not typer's boxed panel), the other names people type for `voice rm` and
did-you-means, and the server flags' defaults in --help."""

from __future__ import annotations

import re

import pytest
from conftest import error_line

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
    from omnivoice_cli.app.voices import voices

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
                "--max-chars": "4096",
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


# ------------------------------------------------------------------------------ hints


def test_a_cast_of_voice_design_words_shows_the_instruct_form(invoke, fake_engine, home, tmp_path):
    script = tmp_path / "s.txt"
    script.write_text("BOB: Hi.\n")
    r = invoke("say", "-f", script, "--cast", "BOB=male, low pitch", "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    line = error_line(r)
    assert line == "Error: --cast BOB: 'male, low pitch' is not a voice but voice-design items: " + (
        'write --cast "BOB=instruct:male, low pitch"'
    )
    r = invoke("say", "-f", script, "--cast", "BOB=bobby", "-o", tmp_path / "x.wav")  # no design words: no hint
    assert r.exit_code == 2 and "unknown voice 'bobby'" in error_line(r) and "instruct:" not in error_line(r)
    assert fake_engine.loads == []


@pytest.mark.parametrize(
    "theirs,ours", [("--rate", "--speed"), ("--voice-file", "--voice"), ("--output-file", "--output")]
)
def test_an_option_named_as_other_tools_name_it_gets_ours(invoke, theirs, ours):
    r = invoke("say", "Hi", theirs, "x")
    assert r.exit_code == 2
    assert error_line(r) == f"Error: No such option: {theirs}. Did you mean {ours}? (see 'omnivoice say --help')"


def test_an_alias_is_offered_only_where_the_command_has_ours(invoke, home):
    r = invoke("voice", "list", "--rate", "1")  # voice list has no --speed
    assert r.exit_code == 2 and "--speed" not in error_line(r)


def test_every_alias_names_a_real_option_and_is_none_itself():
    import typer.main

    from omnivoice_cli.cli import app
    from omnivoice_cli.ui.hints import OPTION_ALIASES, option_names

    group = typer.main.get_command(app)
    real: set[str] = set()
    for name in group.list_commands(None):  # type: ignore[attr-defined]
        command = group.get_command(None, name)  # type: ignore[attr-defined]
        for sub in [command, *getattr(command, "commands", {}).values()]:
            real |= option_names(sub)
    assert set(OPTION_ALIASES.values()) <= real, set(OPTION_ALIASES.values()) - real
    assert not set(OPTION_ALIASES) & real, set(OPTION_ALIASES) & real


def test_words_given_as_a_command_are_offered_to_say(invoke):
    r = invoke("hello", "world")
    assert r.exit_code == 2
    assert error_line(r) == (
        "Error: No such command 'hello'. Did you mean omnivoice say \"hello world\"? (see 'omnivoice --help')"
    )


def test_bare_say_at_a_terminal_is_one_line_and_three_examples(invoke, monkeypatch):
    from omnivoice_cli.commands import say

    monkeypatch.setattr(say.say, "reads_stdin", lambda: False)  # stdin a terminal
    r = invoke("say")
    lines = r.stderr.splitlines()
    assert r.exit_code == 2 and r.stdout == "" and len(lines) == 4, r.stderr
    assert lines[0].startswith("Usage: omnivoice say TEXT [OPTIONS]") and "omnivoice say --help" in lines[0]
    assert [ln.strip() for ln in lines[1:]] == say.EXAMPLES.strip().splitlines()[:3]
    assert max(map(len, lines)) <= 80 and "╭" not in r.stderr


def test_a_missing_transcript_is_one_sentence(invoke, fake_engine, home, tmp_path, monkeypatch):
    import numpy as np
    import soundfile as sf

    from omnivoice_cli.app.listening import listen
    from omnivoice_cli.engine.errors import MissingExtra

    def no_recogniser(*args, **kwargs):
        raise MissingExtra("transcribing a reference", "faster-whisper", "asr")

    monkeypatch.setattr(listen, "transcribe_reference", no_recogniser)
    ref = tmp_path / "r.wav"
    sf.write(str(ref), (0.3 * np.sin(np.arange(48000) / 24000 * 2 * np.pi * 220)).astype(np.float32), 24000)
    r = invoke("say", "Hi", "--ref", ref, "-o", tmp_path / "x.wav")
    line = error_line(r, exit_code=2)
    assert line == (
        f'Error: --ref: no transcript for the reference audio {ref}: give --ref-text "the words spoken in it", '
        f"write them into {tmp_path / 'r.txt'}, or install a speech recogniser to hear them: "
        "pip install 'omnivoice-cli[asr]'"
    )


# ------------------------------------------------------------------------------ a first day's messages


def test_say_text_as_an_option_says_the_text_is_the_words(invoke):
    r = invoke("say", "--text", "hi")
    line = error_line(r, exit_code=2)
    assert "No such option: --text" in line and 'omnivoice say "Hello there" (or -f FILE)' in line


def test_a_model_folder_that_is_not_there_is_a_usage_error_before_loading(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hi", "--model", tmp_path / "no" / "such", "-o", tmp_path / "x.wav")
    line = error_line(r, exit_code=2)
    assert (
        line == f"Error: --model: {tmp_path / 'no' / 'such'}: no such folder, and not a hub id of the form owner/name"
    )
    assert fake_engine.loads == []


def test_a_missing_transcript_without_a_recogniser_is_one_short_line(invoke, fake_engine, home, tmp_path, monkeypatch):
    import numpy as np
    import soundfile as sf

    from omnivoice_cli.app.listening import listen
    from omnivoice_cli.engine.errors import ModelUnavailable

    def unavailable(*args, **kwargs):  # the recogniser's own message names --ref-text too
        raise ModelUnavailable("reference audio r.wav has no transcript, and ... " * 8 + 'or give --ref-text "..."')

    monkeypatch.setattr(listen, "transcribe_reference", unavailable)
    ref = tmp_path / "r.wav"
    sf.write(str(ref), (0.3 * np.sin(np.arange(96000) / 24000 * 2 * np.pi * 220)).astype(np.float32), 24000)
    r = invoke("voice", "add", "bob", "--ref", ref)
    line = error_line(r, exit_code=1)
    assert line.count("--ref-text") == 1 and len(line) < 300 + 2 * len(str(tmp_path)), line
    assert f"write them into {tmp_path / 'r.txt'}" in line and "--asr-model a local model folder" in line
