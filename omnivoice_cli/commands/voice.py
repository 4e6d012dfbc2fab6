"""`omnivoice voice add|import|export|list|show|rm`: the saved voices (voices.py is the store).

The app layer is imported inside the functions that run it: `omnivoice voice --help` and each
subcommand's read only the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..engine.errors import InvalidRequest
from ..media.formats import BY_EXTENSION
from ..ui.helpfmt import HelpCommand, HelpGroup, click_exceptions
from ..ui.messages import echo, warn
from ..ui.options import NO_FLAGS, QUIET_OPTION, with_settings
from ..ui.text import columns, wrap_row

if TYPE_CHECKING:  # engine.voice imports torch
    from ..engine.sound.voice import VoicePrompt

# Other names people type for a subcommand: they run it (hidden from the list of commands).
ALIASES = {"remove": "rm", "delete": "rm", "del": "rm", "ls": "list", "info": "show", "new": "add", "save": "add"}


class VoiceGroup(HelpGroup):
    """`omnivoice voice remove alice` is `voice rm alice` (ALIASES); a typo gets click's
    did-you-mean, and a name that is neither gets the list of subcommands."""

    def get_command(self, ctx, cmd_name):
        return super().get_command(ctx, ALIASES.get(cmd_name, cmd_name))

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click_exceptions.UsageError as e:
            if "Did you mean" in e.message or not args:
                raise
            import difflib

            close = difflib.get_close_matches(str(args[0]), list(ALIASES), n=1, cutoff=0.6)
            if close:
                raise click_exceptions.UsageError(f"{e.message} Did you mean {ALIASES[close[0]]!r}?", ctx) from None
            names = ", ".join(self.list_commands(ctx))
            raise click_exceptions.UsageError(f"{e.message.rstrip('.')}: the voice commands are {names}", ctx) from None


app = typer.Typer(
    cls=VoiceGroup,
    help=(
        "Saved voices: add one from a recording, list, show, remove, import a reference .pt prompt or a "
        "voice file, or export one to take elsewhere. "
        "`omnivoice say --voice NAME` speaks in a saved voice, or in a built-in one: OpenAI's voice names "
        "(alloy, ash, ...) designed from voice-design items. A saved voice of the same name wins.\n\n"
        "Voices live in $OMNIVOICE_HOME/voices when OMNIVOICE_HOME is set, else "
        "$XDG_DATA_HOME/omnivoice/voices (~/.local/share/omnivoice/voices), one .safetensors file each."
    ),
    no_args_is_help=True,
    add_completion=False,
)


def _saved(name: str, prompt: VoicePrompt, saved: Path, quiet: bool) -> None:
    from ..app.voices import voices

    if not quiet:
        seconds = prompt.codes.shape[-1] / voices.FRAME_RATE
        echo(f"voice {name!r}: {seconds:.2f} s of audio, transcript {prompt.text!r} -> {saved}")
        if name.lower() in voices.builtin_voices():
            echo(f"the saved voice {name!r} is used instead of the built-in voice of that name")


@app.command(
    "add",
    cls=HelpCommand,
    no_args_is_help=True,
    epilog='\nomnivoice voice add alice --ref alice.flac --ref-text "Transcript of alice.flac."\n'
    'omnivoice voice add dora --instruct "female, low pitch, british accent" --seed 3\n',
)
@with_settings("model", "device", "dtype", "threads", "asr_model", "lang", "instruct", "seed")
def voice_add(
    name: str = typer.Argument(..., metavar="NAME", help="The voice's name: letters, digits, '-', '_', '.'."),
    ref: Optional[str] = typer.Option(
        None,
        "--ref",
        metavar="AUDIO",
        show_default=False,
        rich_help_panel="Voice",
        help="The recording (3-10 s is best). Or --instruct: a designed voice.",
    ),
    ref_text: Optional[str] = typer.Option(
        None,
        "--ref-text",
        metavar="TEXT",
        show_default=False,
        rich_help_panel="Voice",
        help="The words spoken in it. Default: the .txt file beside it (alice.txt for alice.flac), else what "
        "the speech recogniser hears (the asr extra).",
    ),
    sample: Optional[str] = typer.Option(
        None,
        "--sample",
        metavar="TEXT",
        show_default=False,
        rich_help_panel="Voice",
        help="With --instruct: what the designed voice says once, to be kept (a sentence). Default: a sentence "
        "in --lang (English without one).",
    ),
    force: bool = typer.Option(False, "--force", rich_help_panel="Output", help="Replace a saved voice of that name."),
    json_out: bool = typer.Option(False, "--json", rich_help_panel="Output", help="Print what was saved as JSON."),
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Save a voice: a recording and its transcript encoded (needs the model's audio encoder), or a
    voice designed by --instruct rendered once (its --sample, --seed and --lang), kept and cloned
    by every request that names it."""
    from ..app.voices import voices
    from .common import run_settings

    _, settings = run_settings(None, flags)
    voices.check_new_name(name, force)
    if settings["instruct"] is not None or sample is not None:
        if ref is not None or ref_text is not None:
            raise InvalidRequest("give either --ref (a recording) or --instruct (a designed voice), not both")
        saved, prompt = _add_designed(name, settings, sample, force, quiet)
    elif ref is None:
        raise InvalidRequest(
            'voice add needs --ref AUDIO (a recording) or --instruct "ITEMS" (a designed voice, e.g. female, low pitch)'
        )
    else:
        saved, prompt = _add_recording(name, settings, ref, ref_text, force, quiet)
    if json_out:
        from ..app.voices.design import voice_prompt

        info = {"name": name, "path": str(saved), "voice_prompt": voice_prompt(prompt), "text": prompt.text}
        typer.echo(json.dumps(info, ensure_ascii=False))
    _saved(name, prompt, saved, quiet or json_out)


def _add_recording(
    name: str, settings: Any, ref: str, ref_text: str | None, force: bool, quiet: bool
) -> tuple[Path, VoicePrompt]:
    from ..app.request import References
    from ..app.session import WarnOnce
    from ..app.voices import voices
    from .common import load_model

    path = voices.check_reference_file(ref)
    refs = References()
    if ref_text is None and not voices.transcript_file(path).is_file():  # the recogniser's words
        reference = refs.transcribed(path, settings["lang"], settings["asr_model"], settings["device"])
        if not quiet:
            echo(f"--ref: transcribed as {json.dumps(reference.transcript, ensure_ascii=False)}")
    else:
        reference = refs.prepare(path, voices.reference_transcript(path, ref_text))
    shown = WarnOnce(warn)
    shown(reference.warnings)
    engine, _ = load_model(settings, quiet, encoder=True)
    prompt = refs.encode(engine, reference)
    meta = {"source": str(path.resolve()), "model": settings["model"], "lang": settings["lang"]}
    return voices.save(name, prompt, force=force, **meta), prompt


def _add_designed(name: str, settings: Any, sample: str | None, force: bool, quiet: bool) -> tuple[Path, VoicePrompt]:
    from ..app.checkpoint import model_config
    from ..app.session import random_seed
    from ..app.voices import voices
    from ..app.voices.design import design_of, render
    from .common import load_model

    if settings["instruct"] is None:
        raise InvalidRequest('--sample is for a designed voice: give --instruct "ITEMS" too (e.g. female, low pitch)')
    seed = random_seed() if settings["seed"] is None else int(settings["seed"])
    design = design_of(settings, sample, model_config(settings["model"]), seed)  # checked before the model loads
    if settings["seed"] is None and not quiet:
        echo(f"voice {name!r}: designed with seed {design.seed} (give --seed to choose it)")
    engine, _ = load_model(settings, quiet)
    prompt = render(engine, design)
    meta = {"source": "designed", "model": settings["model"], **design.fields()}
    return voices.save(name, prompt, force=force, **meta), prompt


@app.command("import", cls=HelpCommand, no_args_is_help=True)
def voice_import(
    file: str = typer.Argument(..., metavar="FILE", help="A reference .pt prompt, or a .safetensors voice file."),
    name: Optional[str] = typer.Option(
        None, "--name", metavar="NAME", show_default=False, help="The voice's name. Default: the file's name."
    ),
    force: bool = typer.Option(False, "--force", help="Replace a saved voice of the same name."),
    quiet: bool = QUIET_OPTION,
) -> None:
    """Save a reference .pt prompt or a .safetensors voice file as a saved voice.

    A .pt prompt is one saved by the reference implementation's Python API (VoiceClonePrompt.save);
    it is read with torch.load(weights_only=True), which loads tensors and plain values only.
    """
    from ..app.voices import voiceexport, voices

    p = Path(file).expanduser()
    if p.suffix.lower() in BY_EXTENSION:  # an audio file
        raise InvalidRequest(
            f"'{file}' is a recording, not a voice file: `omnivoice voice add NAME --ref {file}` makes a voice of it"
        )
    if name is None:
        name = p.stem if p.suffix.lower() in (voices.VOICE_SUFFIX, voices.PROMPT_SUFFIX) else p.name
        try:
            voices.check_name(name)
        except InvalidRequest:
            raise InvalidRequest(f"{file}: the file's name {name!r} cannot name a voice: give --name NAME") from None
    voices.check_new_name(name, force, another="--name NAME to import it under another name")
    if not p.exists():
        raise InvalidRequest(f"voice file '{file}' does not exist")
    if not p.is_file():
        raise InvalidRequest(f"voice file '{file}' is a folder, not a voice file")
    if p.suffix.lower() not in (voices.VOICE_SUFFIX, voices.PROMPT_SUFFIX):
        raise InvalidRequest(f"voice file '{file}' must end in .pt (a reference prompt) or .safetensors")
    if p.suffix.lower() == voices.VOICE_SUFFIX:
        voiceexport.verify_voice_file(p, file)  # bounded, its checksum verified: before anything is written
    prompt = voices.load_voice_file(p)
    meta = voices.import_metadata(p)
    _saved(name, prompt, voices.save(name, prompt, force=force, **meta), quiet)


@app.command("export", cls=HelpCommand, no_args_is_help=True)
def voice_export(
    name: str = typer.Argument(..., metavar="NAME", help="A saved voice's name."),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        metavar="FILE.safetensors",
        show_default=False,
        help="The file to write. Default: NAME.safetensors in the current folder.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace the file if it exists."),
    quiet: bool = QUIET_OPTION,
) -> None:
    """Write a saved voice as one file to take elsewhere: its prepared prompt, transcript, language,
    the model it was made with and a checksum that `voice import` verifies."""
    from ..app.voices import voiceexport

    out = voiceexport.export_voice(name, Path(f"{name}.safetensors") if output is None else output.expanduser(), force)
    if not quiet:
        echo(f"exported voice {name!r} to {out}")


@app.command("list", cls=HelpCommand)
def voice_list() -> None:
    """List the voices: saved ones (name, seconds of audio, date added, transcript), then the built-in
    ones (OpenAI's voice names: their voice-design items)."""
    from ..app.voices import voices

    entries = voices.saved_voices()
    out = typer.get_text_stream("stdout")
    saved = {e.name.casefold() for e in entries}
    builtin = {n: items for n, items in voices.builtin_voices().items() if n.casefold() not in saved}
    width = max([len(e.name) for e in entries] + [len(n) for n in builtin] + [4])
    for e in entries:
        if e.meta is None:
            broken = e.error or "unreadable"  # read_entry gives every broken file its reason
            out.write(f"{e.name:<{width}}  (broken: {broken})\n")
            warn(broken)
            continue
        seconds = e.meta.get("seconds") or "?"
        created = (e.meta.get("created") or "").replace("T", " ").rstrip("Z")[:16] or "-"
        text = e.meta.get("text", "")
        if len(text) > 50:
            text = text[:47].rsplit(" ", 1)[0] + " ..."  # cut at a space
        out.write(wrap_row(f"{e.name:<{width}}  {seconds:>6} s  {created:<16}  ", text, columns(out)) + "\n")
    for name, items in builtin.items():
        out.write(wrap_row(f"{name:<{width}}  {'built-in':<26}  ", items, columns(out)) + "\n")
    if not entries:
        echo(f"no saved voices yet ({voices.ADD_HINT})")
    hidden = sorted(n for n in voices.builtin_voices() if n.casefold() in saved)
    if hidden:
        echo(f"saved voices replace the built-in {', '.join(hidden)}")
    echo(f"voices: {voices.voice_dir()}")


@app.command("show", cls=HelpCommand, no_args_is_help=True)
def voice_show(
    spec: str = typer.Argument(..., metavar="NAME|FILE", help="A saved voice's name or a voice file."),
    json_out: bool = typer.Option(False, "--json", help="Print it as one JSON object."),
) -> None:
    """Print what a saved voice holds: transcript, length, source recording (or the instruct, seed
    and sample it was designed from), model, date, and `voice_prompt` (the sha256 of its codes and
    words, what a reply's voice_prompt names; control characters shown as escapes)."""
    from ..app.voices import voices

    items = voices.builtin_instruct(spec)
    info: dict[str, str | None]
    if items is not None:
        info = {"name": spec.strip().lower(), "kind": "built-in (an OpenAI voice name)", "instruct": items}
    else:
        path = voices.resolve_voice(spec)
        info = {**voices.describe_voice(path), "voice_prompt": voices.voice_prompt_of(path)}
    out = typer.get_text_stream("stdout")
    if json_out:
        out.write(json.dumps(info, ensure_ascii=False) + "\n")
        return
    shown = {voices.printable(k): voices.printable(str(v)) for k, v in info.items()}  # a file's words, escaped
    width = max(len(k) for k in shown)
    for key, value in shown.items():
        out.write(f"{key + ':':<{width + 1}} {value}\n")


@app.command("rm", cls=HelpCommand, no_args_is_help=True)
def voice_rm(
    names: list[str] = typer.Argument(..., metavar="NAME...", help="Saved voices to delete."),
    quiet: bool = QUIET_OPTION,
) -> None:
    """Delete saved voices (every name must exist; nothing is deleted otherwise)."""
    from ..app.voices import voices

    for name in names:
        if voices.builtin_instruct(name) is not None:
            raise InvalidRequest(
                f"voice {name!r} is built in (an OpenAI voice name), not a saved voice: there is nothing to remove"
            )
    paths = [voices.find_saved(name) for name in names]  # all known, before deleting any
    for name, path in zip(names, paths):
        path.unlink(missing_ok=True)
        if not quiet:
            echo(f"removed voice {name!r} ({path})")
