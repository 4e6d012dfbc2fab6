"""`omnivoice cache [list | clear]`: the weight cache (engine/fast/weightcache.py), the int8 body's codes
kept on disk so that a second `--quantize int8` load skips coding them, and beside it the phrase
cache (app/phrases/: `serve --phrase-cache`, `say --cache`), replies kept by content.

The cache's module is imported inside the functions that use it: `--help` reads only the texts here.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from ..ui.helpfmt import HelpCommand, HelpGroup
from ..ui.messages import echo
from .models import size_text

app = typer.Typer(
    cls=HelpGroup,
    help=(
        "The weight cache (the int8 body's coded weights) and the phrase cache (replies kept by "
        "serve --phrase-cache and say --cache). `cache list` shows their files, `cache clear` deletes them."
    ),
    no_args_is_help=False,
    add_completion=False,
)


def _where() -> str:
    from ..engine.fast import weightcache

    folder = weightcache.cache_dir()
    return f"{weightcache.ENV}=off: no weight cache" if folder is None else f"weight cache: {folder}"


@app.callback(invoke_without_command=True)
def cache(ctx: typer.Context) -> None:
    """List the caches' files (as `cache list`)."""
    if ctx.invoked_subcommand is None:
        list_files()


@app.command("list", cls=HelpCommand)
def list_files() -> None:
    """List the caches' files: the weight cache's (size, last used, the CPU class and torch they were
    made for, the checkpoint), then the phrase cache's totals."""
    from ..engine.fast import weightcache

    out = typer.get_text_stream("stdout")
    found = weightcache.entries()
    for e in reversed(found):  # the most recently used first
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.used))
        out.write(f"{size_text(e.size):>9}  {used}  {e.cpu}  torch {e.torch}  {e.checkpoint}\n")
    total = sum(e.size for e in found)
    echo(
        f"{_where()} ({len(found)} file{'s' * (len(found) != 1)}, {size_text(total)}, cap {size_text(weightcache.CAP_BYTES)})"
    )
    folder, phrases = _phrases()
    latest = max((e.used for e in phrases), default=None)
    last = "" if latest is None else f", last used {time.strftime('%Y-%m-%d %H:%M', time.localtime(latest))}"
    echo(
        f"phrase cache: {folder} ({len(phrases)} entr{'ies' if len(phrases) != 1 else 'y'}, "
        f"{size_text(sum(e.size for e in phrases))}{last})"
    )


def _phrases() -> tuple[Path, list]:
    """The phrase cache's folder and its entries (least recently used first)."""
    from ..app.phrases.phrasecache import phrase_dir
    from ..media.phrasestore import PhraseStore

    folder = phrase_dir()
    return folder, PhraseStore(folder, 0).entries()


@app.command("clear", cls=HelpCommand)
def clear_files() -> None:
    """Delete every file of the weight cache (the next int8 load codes the weights again) and every
    entry of the phrase cache (the next request is rendered)."""
    from ..app.phrases.phrasecache import phrase_dir
    from ..engine.fast import weightcache
    from ..media.phrasestore import PhraseStore

    files, size = weightcache.clear()
    echo(f"{_where()}: deleted {files} file{'s' * (files != 1)} ({size_text(size)})")
    folder = phrase_dir()
    files, size = PhraseStore(folder, 0).clear()
    echo(f"phrase cache: {folder}: deleted {files} file{'s' * (files != 1)} ({size_text(size)})")
