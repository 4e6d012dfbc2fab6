"""`omnivoice say --cast NAME=VOICE ...`: a dialogue script spoken line by line, each line in its
speaker's voice, joined with --gap seconds of silence (dialogue.py parses the script and the cast).

Line i (from 0, counting the spoken lines) is its own request with seed S + i, so
`omnivoice say "<its text>" --voice <its voice> --seed <S + i>` makes exactly its audio; all
lines run in one packed `Engine.generate`. The file is line 0's audio, `gap` zero samples, line
1's audio, and so on (each line's audio keeps its own 0.1 s of padding at both ends).
"""

from __future__ import annotations

import json
import math
import secrets
import signal
import time
from typing import Any

import typer

from .. import settings as st
from ..engine.errors import InvalidRequest
from ..session import WarnOnce
from .common import echo, load_engine, run_settings, usage_error, warn

DEFAULT_GAP = 0.3  # seconds of silence between two lines
MAX_GAP = 60.0
MAX_GAPS_TOTAL = 3600.0  # seconds of silence all the gaps of a script may add up to


def raw_text(ctx: Any, words: list[str] | None, text_file: str | None, quiet: bool) -> tuple[str, str]:
    """(the script with its line breaks, how messages name it)."""
    from .say import read_stdin, read_text_file

    if words and text_file is not None:
        raise usage_error("give the text either as TEXT or with -f/--text-file, not both", ctx)
    if not words and text_file is None:
        raise usage_error("Missing argument 'TEXT': give the script, - to read stdin, or -f FILE", ctx)
    if text_file is not None:
        return read_text_file(text_file, quiet), ("stdin" if text_file == "-" else text_file)
    if words == ["-"]:
        return read_stdin(quiet), "stdin"
    return " ".join(words), "the text"


def check_gap(gap: float | None) -> float:
    if gap is None:
        return DEFAULT_GAP
    if not (math.isfinite(gap) and 0 <= gap <= MAX_GAP):
        raise InvalidRequest(f"--gap must be seconds in 0..{MAX_GAP:g}, got {gap!r}")
    return gap


def plan_lines(script: str, name: str, cast_specs: list[str], preset: Any, flags: dict) -> tuple[list, int, Any]:
    """(built requests of the lines, the base seed, the cast), all checked without the model."""
    from ..dialogue import Cast, PlaceSource, check_voices, parse_script
    from ..request import References, Voices, build_request

    cast = Cast.parse(cast_specs)
    lines = parse_script(script, cast, name)
    layers = [*([(preset.origin, preset.settings)] if preset else []),
              (st.FLAG_SOURCE, {k: v for k, v in flags.items() if k != "seed"})]  # fmt: skip
    refs, voices = References(), Voices()
    check_voices(cast, layers, refs, voices, default=False)
    base = int(flags["seed"]) if flags.get("seed") is not None else secrets.randbelow(2**31)
    if base + len(lines) - 1 > st.MAX_SEED:
        raise InvalidRequest(f"seed {base} + {len(lines) - 1} is more than {st.MAX_SEED}: give a smaller --seed")
    built = []
    for i, line in enumerate(lines):
        where = f"{name}: line {line.number}"
        settings = cast.settings(line.speaker, layers, {"seed": base + i}, PlaceSource("line", where))
        try:
            built.append((line, build_request(st.join_lines(line.text), settings, refs=refs, voices=voices)))
        except InvalidRequest as e:
            raise InvalidRequest(str(e) if str(e).startswith(where) else f"{where}: {e}") from None
    for member in cast.unused():
        warn(f"--cast {member.name} speaks no line")
    return built, base, cast


def _generate(built: list, target: Any, subtitles: Any, gap: float, quiet: bool, shown: WarnOnce,
              player: Any = None) -> dict:  # fmt: skip
    """Load, generate every line in one packed run, write subtitles then audio (a stop waits), and
    play the whole when there is a player."""
    from ..output import write_audio
    from ..progress import StepProgress
    from ..signals import HoldSignals
    from .say import _stopped

    timing: dict[str, Any] = {"written": False}
    with HoldSignals() as signals:
        try:
            engine, timing["load"] = load_engine(built[0][1].settings, quiet)
            t0 = time.perf_counter()
            with StepProgress(enabled=not quiet, label=f"generating {len(built)} lines") as progress:
                results = engine.generate([b.request for _, b in built], on_step=progress)
            for r in results:
                shown(r.warnings)
            audio, subs, starts = _join(built, results, gap, engine.sample_rate)
            with signals.protect():
                if subtitles is not None:
                    from ..cues import write_subtitles

                    write_subtitles(subtitles, subs)
                if target is not None:
                    write_audio(audio, engine.sample_rate, target, stdout=typer.get_binary_stream("stdout"))
                timing["written"] = target is not None
            if player is not None:
                player.play(audio)
                player.close()  # until it has played; a Ctrl-C stops it at once
        except KeyboardInterrupt as e:
            if player is not None:
                player.stop()
            _stopped(int(getattr(e, "signum", signal.SIGINT)), timing["written"], target)
    timing.update(generate=time.perf_counter() - t0, audio=audio, rate=engine.sample_rate, starts=starts,
                  results=results)  # fmt: skip
    return timing


def _join(built: list, results: list, gap: float, rate: int) -> tuple[Any, list, list[int]]:
    """The lines' audio joined with gaps, their subtitle cues, where each line starts."""
    from ..cues import finish_subtitles, subtitles_from_pieces
    from ..tracks import join_with_gaps

    audio, starts = join_with_gaps([r.audio for r in results], round(gap * rate))
    subs = []
    for (line, b), r, start in zip(built, results, starts):
        pieces = r.pieces or [(b.request.text, 0, len(r.audio))]
        subs += subtitles_from_pieces(pieces, rate, offset=start, speaker=line.speaker.name)
    return audio, finish_subtitles(subs, round(len(audio) * 1000 / rate)), starts


def _report(built: list, base: int, target: Any, subtitles: Any, timing: dict, t_start: float, json_out: bool,
            quiet: bool, shown: WarnOnce) -> None:  # fmt: skip
    rate, audio = timing["rate"], timing["audio"]
    seconds = len(audio) / rate
    where = "the player" if target is None else "stdout" if target.to_stdout else str(target)
    if json_out:
        lines = [
            {"line": line.number, "speaker": line.speaker.name, "voice": line.speaker.spec, "text": b.request.text,
             "seed": b.request.seed, "start_seconds": round(s / rate, 4), "end_seconds": round((s + len(r.audio)) / rate, 4)}
            for (line, b), r, s in zip(built, timing["results"], timing["starts"])
        ]  # fmt: skip
        report = {
            "path": None if target is None else str(target), "format": None if target is None else target.audio_format.name,
            "sample_rate": rate, "audio_seconds": round(seconds, 4),
            "seconds": round(timing["generate"], 4), "load_seconds": round(timing["load"], 4),
            "total_seconds": round(time.perf_counter() - t_start, 4), "seed": base, "lines": lines,
            "subtitles": None if subtitles is None else str(subtitles), "warnings": shown.shown,
        }  # fmt: skip
        typer.echo(json.dumps(report, ensure_ascii=False), err=target is not None and target.to_stdout)
    elif not quiet:
        echo(f"{where}: {seconds:.2f} s of audio, {len(built)} lines in {timing['generate']:.2f} s "
             f"(model loaded in {timing['load']:.1f} s), seed {base}")  # fmt: skip


def _dry_run(built: list, json_out: bool) -> None:
    """--dry-run: what each line would speak (one JSON object a line with --json), no model."""
    from ..dryrun import describe, render

    out = typer.get_text_stream("stdout")
    for line, b in built:
        report = {"line": line.number, "speaker": line.speaker.name, "voice": line.speaker.spec, **describe(b)}
        out.write(json.dumps(report, ensure_ascii=False) + "\n" if json_out
                  else f"line {line.number} ({line.speaker.name}):\n{render(report)}")  # fmt: skip


def say_dialogue(ctx: Any, words: list[str] | None, text_file: str | None, preset: str | None, flags: dict,
                 cast: list[str], gap: float | None, output: str | None, subtitles: str | None, json_out: bool,
                 quiet: bool, dry_run: bool = False, play: bool = False) -> None:  # fmt: skip
    """`say --cast ...`: check everything, then speak the script (see the module doc)."""
    from ..cues import check_subtitles_path
    from .say import _target

    t_start = time.perf_counter()
    script, name = raw_text(ctx, words, text_file, quiet)
    chosen, settings = run_settings(preset, flags)
    gap_s = check_gap(gap)
    if flags.get("ref") is not None:
        warn("--ref is not used: every line's voice comes from --cast")
    built, base, _ = plan_lines(script, name, cast, chosen, flags)
    if gap_s * (len(built) - 1) > MAX_GAPS_TOTAL:
        raise InvalidRequest(f"--gap {gap_s:g} between {len(built)} lines is more than {MAX_GAPS_TOTAL / 3600:g} h "
                             "of silence: give a shorter --gap")  # fmt: skip
    if dry_run:
        return _dry_run(built, json_out)
    target = _target(output, settings)
    for _, b in built:
        b.settings.values["format"] = settings["format"]
    subs_path = check_subtitles_path(subtitles) if subtitles else None
    shown = WarnOnce(warn)
    for _, b in built:
        shown(b.warnings)
    from .stream import open_the_player

    timing = _generate(built, target, subs_path, gap_s, quiet, shown, open_the_player(play))
    _report(built, base, target, subs_path, timing, t_start, json_out, quiet, shown)
