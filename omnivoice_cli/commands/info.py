"""Listings: `omnivoice languages`, `instructs` and `tags` (no model, no torch), and `omnivoice
info` (this machine: the CPU's class and what `auto` chooses on it; imports torch; with --model,
what a fine-tuned checkpoint declares: its own instruct items, languages and voices)."""

from __future__ import annotations

from typing import Optional

import typer

from ..engine.text.canvastext import nonverbal_tags
from ..engine.text.languages import language_regions, list_languages
from ..engine.text.vocabulary import instruct_vocabulary
from ..ui.text import columns, wrap_row


def languages(
    word: Optional[str] = typer.Argument(None, metavar="WORD", help="Only languages whose code or name contains it."),
    regions: bool = typer.Option(
        False,
        "--regions",
        help="List the regional tags that go to a variety instead, one 'tag<TAB>code<TAB>name<TAB>source' per line "
        "(ar-EG -> arz Egyptian Arabic).",
    ),
) -> None:
    """List the accepted languages, one 'code<TAB>name' per line (--lang takes either)."""
    out = typer.get_text_stream("stdout")
    if regions:
        names = dict(list_languages())
        word_cf = (word or "").strip().casefold()
        for tag, code, source in language_regions():
            if word_cf in f"{tag}\t{code}\t{names[code]}".casefold():
                out.write(f"{tag}\t{code}\t{names[code]}\t{source}\n")
        return
    found = list_languages(word)
    for code, name in found:
        out.write(f"{code}\t{name}\n")
    if word and not found:
        typer.echo(f"no language matches {word!r} (`omnivoice languages` lists all)", err=True)


def instructs() -> None:
    """List the voice-design items accepted by --instruct, by category (at most one item per category)."""
    out = typer.get_text_stream("stdout")
    for cat in instruct_vocabulary():
        out.write(f"{cat.name}:\n")
        for en, zh in cat.pairs:
            out.write(f"  {en} ({zh})\n" if en and zh else f"  {en or zh}\n")


def tags() -> None:
    """List the tags a text may hold: non-verbal sounds such as [laughter], and [pause] silences."""
    out = typer.get_text_stream("stdout")
    out.write("sounds (spoken by the model):\n")
    for tag in nonverbal_tags():
        out.write(f"  {tag}\n")
    out.write("pauses (exact silences):\n  [pause]  0.5 s\n  [pause 1.5s]\n  [pause 500ms]\n")


def system(
    model: Optional[str] = typer.Option(
        None,
        "--model",
        metavar="DIR|ID",
        help="Show what this checkpoint declares (a fine-tune's own instruct items, languages and voices) instead.",
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also the measurements behind what --quantize auto chooses here."
    ),
) -> None:
    """Show this machine: the CPU's class and flags, and the paths --dtype auto and --quantize auto take on it."""
    if model is not None:
        _checkpoint(model)
        return
    from ..engine.loading import cpu_paths  # imports torch: only when the paths are listed

    rows = cpu_paths(verbose)
    width = max(len(label) for label, _ in rows)
    out = typer.get_text_stream("stdout")
    for label, value in rows:
        out.write(wrap_row(f"{label + ':':<{width + 1}} ", str(value), columns(out)) + "\n")


def _checkpoint(model: str) -> None:
    """What the checkpoint `model` declares beyond the base model (docs/finetunes.md)."""
    from ..app.checkpoint import checkpoint_folder, model_config
    from ..engine.errors import CheckpointError
    from ..engine.text.languages import resolve_language

    folder = checkpoint_folder(model)
    if folder is None:
        raise CheckpointError(f"model {model}: no such folder here (and not in the hub cache)")
    own = model_config(model).own
    out = typer.get_text_stream("stdout")
    out.write(f"checkpoint: {folder}\n")
    if not own:
        out.write("its own: nothing beyond the base model (no instruct items, languages or voices declared)\n")
        return
    out.write(f"instruct items (its own, for --instruct): {', '.join(own.instructs) or 'none'}\n")
    out.write("languages (its own, for --lang):" + ("" if own.languages else " none") + "\n")
    for code, name in own.languages:
        base, _ = resolve_language(code)
        note = f"  (wins over the base model's {dict(list_languages()).get(base, base)})" if base else ""
        out.write(f"  {code:<12} {name}{note}\n")
    out.write("voices (its own, for --voice):" + ("" if own.voices else " none") + "\n")
    for v in own.voices:
        out.write(f"  {v.name:<12} {v.lang or '-':<6} {v.text[:60]}\n")
