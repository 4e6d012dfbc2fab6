"""Hints for a newcomer's first mistakes at the command line: the names other tools give an
option (`--rate` for `--speed`), words given as a command (`omnivoice hello world`: say them?),
and `say` with nothing to say (one line and three examples, not the whole help)."""

from __future__ import annotations

import shlex
from typing import Any

# An option's name elsewhere (other TTS tools, habits) -> ours. Suggested only where the command
# has that option (tests/test_usage_hints.py checks each against the real options).
OPTION_ALIASES = {
    "--rate": "--speed",
    "--speed-factor": "--speed",
    "--voice-file": "--voice",
    "--speaker": "--voice",
    "--output-file": "--output",
    "--out": "--output",
    "--outfile": "--output",
    "--file": "--text-file",
    "--input": "--text-file",
    "--input-file": "--text-file",
    "--language": "--lang",
    "--steps": "--num-step",
    "--num-steps": "--num-step",
    "--reference": "--ref",
    "--ref-audio": "--ref",
    "--reference-audio": "--ref",
    "--transcript": "--ref-text",
    "--ref-transcript": "--ref-text",
    "--prompt": "--instruct",
    "--style": "--instruct",
    "--description": "--instruct",
    "--length": "--duration",
    "--sr": "--sample-rate",
    "--sampling-rate": "--sample-rate",
    "--cfg": "--guidance-scale",
    "--cfg-scale": "--guidance-scale",
    "--gpu": "--device",
    "--checkpoint": "--model",
    "--model-path": "--model",
}


def option_names(command: Any) -> set[str]:
    """Every option name of a click command ('--speed', '-o', '--no-normalize', ...)."""
    return {name for p in getattr(command, "params", ()) for name in (*p.opts, *p.secondary_opts)}


def option_instead(option: str, command: Any) -> str | None:
    """Our name for an option named as other tools name it, when `command` has it."""
    ours = OPTION_ALIASES.get(option.partition("=")[0])
    return ours if ours is not None and ours in option_names(command) else None


TEXT_OPTIONS = ("--text", "--say", "--sentence", "--words", "-t")  # the text as an option elsewhere


def text_instead(option: str, command: Any) -> str | None:
    """`say --text hi`: where the command takes its text as words (a TEXT argument), how to give it."""
    name = option.partition("=")[0]
    if name not in TEXT_OPTIONS or name in option_names(command):  # (dub's --words is a file of its own)
        return None
    if not any(p.param_type_name == "argument" and p.name == "text" for p in getattr(command, "params", ())):
        return None
    return 'the text is the words after the command, as they are: omnivoice say "Hello there" (or -f FILE)'


def say_instead(args: list[str]) -> str:
    """`omnivoice say "WORDS"`: what words given as a command most likely meant."""
    text = " ".join(args)
    quoted = f'"{text}"' if not any(c in text for c in '"$`\\!') else shlex.quote(text)
    return f"omnivoice say {quoted}"


def bare_usage(command_path: str, examples: str) -> str:
    """`say` with no text at a terminal: one line, then the first three examples."""
    shown = [line for line in examples.strip().splitlines() if line.strip()][:3]
    head = f"Usage: {command_path} TEXT [OPTIONS] (every option: {command_path} --help), e.g."
    return "\n".join([head, *(f"  {line}" for line in shown)])
