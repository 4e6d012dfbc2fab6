"""Typed errors raised by the engine. The CLI maps them once to exit codes."""

from __future__ import annotations

# What a terminal must never be sent raw, as a regular-expression character class: C0 (U+0000..U+001F)
# and DEL, C1 (U+0080..U+009F: U+009B is CSI), the line and paragraph separators (a new line to
# some terminals), the bidi embeddings, overrides and isolates, and lone surrogates (no UTF-8 for
# them). ui/text.py escapes them; a fine-tune's declarations refuse them (checkpoint/finetune.py).
UNSAFE_CHARACTERS = "\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"


class OmniVoiceError(Exception):
    """Base class: a runtime failure (exit code 1)."""


class InvalidRequest(OmniVoiceError, ValueError):
    """A request's value is outside what is allowed (a usage error, exit code 2).

    `setting` names the request setting the message is about (e.g. "instruct"), when there is one:
    the message then reads after that name ("instruct: unsupported item ..."), and a caller names
    the setting its own way (a flag, a JSON field) in front of it. "text" marks an error about the
    text to speak itself, whose message names it already ("text is empty: ...", a pause tag)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class CheckpointError(OmniVoiceError):
    """The checkpoint is missing, incomplete, corrupt, or contradicts the engine."""


class ModelUnavailable(OmniVoiceError):
    """The checkpoint is not cached and cannot be downloaded (offline).

    `problem`, when set, is the message without its advice (what cannot be had and why, e.g.
    "k2-fsa/OmniVoice (about 3.2 GB) is not in the Hugging Face cache and cannot be downloaded
    (offline: HF_HUB_OFFLINE is set)"): a local checkpoint folder would do instead, and a caller
    may word that advice its own way (the CLI names --model and OMNIVOICE_MODEL)."""

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem


def install_hint(extra: str) -> str:
    """The command that installs one of the package's extras (pyproject.toml)."""
    return f"pip install 'omnivoice-cli[{extra}]'"


class MissingExtra(InvalidRequest):
    """An optional package is not installed (a usage error, exit code 2): one line that says
    what needs it and the pip command of the extra that brings it."""

    def __init__(self, what: str, package: str, extra: str) -> None:
        super().__init__(f"{what} needs {package}, which is not installed: {install_hint(extra)}")
        self.package, self.extra = package, extra


def one_line(e: BaseException) -> str:
    """An error as one line: its message with every run of whitespace (line breaks too) one space,
    else its type's name (an error without a message)."""
    return " ".join(str(e).split()) or type(e).__name__
