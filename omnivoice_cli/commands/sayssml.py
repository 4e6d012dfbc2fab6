"""`omnivoice say` given SSML (text that starts with <speak>, or --ssml): its parts
(app/ssml/spoken.py) built here; one part is spoken as any text is (say.py goes on with it),
several as a dialogue (speakdialogue.DialogueRun): part i a request with seed S + i, in its
voice, language and speed, the parts joined with the breaks between them.

`--dry-run --json` prints one record of the pieces (app/ssml/spoken.describe_parts): each with
its voice, language, speed and the pause before it.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from ..engine.errors import InvalidRequest
from ..ui.text import visible


def ssml_parts(text: str, settings: Any, refs: Any, cast: list[str] | None, remote: bool = False) -> Any:
    """The document's parts, each built by request.build_request (spoken.Parts). `cast`: --cast
    members a <voice name> may name; `remote`: through --server (the server reads the voices)."""
    from ..app.request import Voices, build_request
    from ..app.say.dialogue import Cast
    from ..app.ssml.spoken import as_ssml, build_parts, cast_voice

    voices = Voices()

    def build(part: str, own: Any) -> Any:
        return build_request(part, own, refs=refs, voices=voices)

    def keep(settings: Any, name: str, source: Any) -> Any:  # --server: the server reads the voice
        return settings

    hook = keep if remote else cast_voice(Cast.parse(cast))
    parts = build_parts(as_ssml(text), settings, hook, build)
    if remote and len(parts.built) > 1:
        raise InvalidRequest(
            "--server speaks SSML of one voice, language and rate: this document changes them "
            f"(line {parts.parts[1].line}); leave out --server to speak each part in its own"
        )
    return parts


def ssml_built(
    text: str,
    settings: Any,
    refs: Any,
    cast: list[str] | None,
    remote: bool,
    dry: bool,
    json_out: bool,
    stream: bool,
    output: str | None,
    subtitles: str | None,
    quiet: bool,
    t_start: float,
    play: bool,
) -> Any:
    """The request of a document of one part, for `say` to speak as any text (request.Built); None
    when done here: its --dry-run printed, or its several parts spoken as a dialogue."""
    parts = ssml_parts(text, settings, refs, cast, remote=remote)
    if dry:
        from ..app.session import WarnOnce
        from ..ui.messages import warn

        shown = WarnOnce(warn)
        for b in parts.built:
            shown(b.warnings)
        dry_run(parts, json_out, stream)
        return None
    if len(parts.built) > 1:
        if stream:
            raise InvalidRequest(
                f"--stream sends one request piece by piece: this SSML changes the voice, language or rate "
                f"(line {parts.parts[1].line}), so its parts are spoken whole: leave out --stream"
            )
        say_parts(parts, settings, output, subtitles, json_out, quiet, t_start, play)
        return None
    return parts.built[0]


def dry_run(parts: Any, json_out: bool, streamed: bool) -> None:
    """--dry-run of a document: its pieces, each with voice, language, speed and pause."""
    from ..app.dryrun import describe, dry_run_text
    from ..app.ssml.spoken import describe_parts

    report = describe_parts(parts, [describe(b, streamed) for b in parts.built])
    out = typer.get_text_stream("stdout")
    if json_out:
        out.write(json.dumps(report, ensure_ascii=False) + "\n")
        return
    lines = [dry_run_text(report).rstrip("\n"), "SSML pieces:"]
    for i, p in enumerate(report["pieces"], start=1):
        pause = f"{p['pause']:g} s pause, " if p["pause"] else ""
        lines.append(
            f"  {i:>3}. {pause}voice {p['voice']}, lang {p['lang'] or 'any'}, speed {p['speed']:g}: {p['text']}"
        )
    out.write(visible("\n".join(lines) + "\n", lines=True))


def say_parts(
    parts: Any,
    settings: Any,
    output: str | None,
    subtitles: str | None,
    json_out: bool,
    quiet: bool,
    t_start: float,
    play: bool,
) -> None:
    """Speak a document of several parts as a dialogue: each part a line, the breaks its gaps."""
    from ..app.say.dialogue import Cast, Member, Script, ScriptLine
    from ..app.ssml.spoken import voice_shown
    from .dialogue import speak_script

    lines = []
    for i, (part, b) in enumerate(zip(parts.parts, parts.built)):
        shown = voice_shown(b.settings)
        kind, _, value = shown.partition(":") if shown.startswith("instruct:") else ("voice", "", shown)
        member = Member(part.voice or "default", "auto" if shown == "auto" else kind, value or None)
        lines.append((ScriptLine(part.line, member, b.request.text), b))
    script = Script(tuple(lines), int(parts.seed), Cast())
    gap = list(parts.pauses[1:])
    speak_script(script, settings, output, subtitles, gap, play=play, json_out=json_out, quiet=quiet, t_start=t_start)
