"""`omnivoice download [MODEL]` and `omnivoice models`: the checkpoints in the Hugging Face cache."""

from __future__ import annotations

from typing import Optional

import typer

from .. import settings as st
from .common import echo, notice


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def download(
    model: Optional[str] = typer.Argument(None, metavar="MODEL", help=f"A hub id. Default: {st.DEFAULT_MODEL}."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Download a model into the Hugging Face cache (with a progress bar), so `say` needs no network."""
    from ..engine import hub
    from ..progress import DownloadProgress

    repo = model or st.DEFAULT_MODEL
    with DownloadProgress(repo, enabled=not quiet) as progress:
        path = hub.download(repo, on_progress=progress, on_notice=notice(quiet))
    if not quiet:
        echo(f"{repo}: ready in {path}")


def models() -> None:
    """List the OmniVoice checkpoints in the Hugging Face cache: hub id, size, complete or not, where."""
    from ..engine import hub

    found = hub.cached_models()
    out = typer.get_text_stream("stdout")
    width = max([len(m.repo_id) for m in found] + [5])
    for m in found:
        state = "complete" if m.complete else "incomplete (run `omnivoice download` again)"
        out.write(f"{m.repo_id:<{width}}  {_size(m.size_bytes):>9}  {state}  {m.path}\n")
    if not found:
        echo(f"no OmniVoice model in the Hugging Face cache yet (`omnivoice download` fetches {st.DEFAULT_MODEL})")
