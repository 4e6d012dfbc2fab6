"""`omnivoice download [MODEL]` and `omnivoice models`: the checkpoints in the Hugging Face cache.

The hub's module is imported inside the functions that use it: `--help` reads only the texts here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..app.settings.schema import DEFAULT_MODEL
from ..engine.errors import ModelUnavailable
from ..ui.messages import echo, notice
from ..ui.progress import DownloadProgress


def size_text(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def download(
    model: Optional[str] = typer.Argument(
        None,
        metavar="MODEL",
        show_default=False,
        help=f"A hub id. Default: $OMNIVOICE_MODEL (the model `say` uses), else {DEFAULT_MODEL}.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Download a model into the Hugging Face cache (with a progress bar), so `say` needs no network."""
    from ..engine.checkpoint import hub

    repo = model or _default_model()
    if model is None and Path(repo).expanduser().is_dir():  # OMNIVOICE_MODEL names a local folder
        hub.check_checkpoint_dir(Path(repo).expanduser())
        if not quiet:
            echo(f"{repo}: a local checkpoint folder (OMNIVOICE_MODEL), nothing to download")
        return
    with DownloadProgress(repo, enabled=not quiet) as progress:
        try:
            path = hub.download_checkpoint(repo, on_progress=progress, on_notice=notice(quiet))
        except ModelUnavailable as e:
            if e.problem is None:
                raise
            raise ModelUnavailable(f"{e.problem}. {_retry_advice()}.") from None
    if not quiet:
        echo(f"{repo}: ready in {path}")


def _default_model() -> str:
    """The model `say` would load without --model or a preset: $OMNIVOICE_MODEL, else the default."""
    from ..app.settings.layers import environment_defaults

    found = environment_defaults().get("model")
    return DEFAULT_MODEL if found is None else str(found[0])  # a str setting


def _retry_advice() -> str:
    """What to do when `download` cannot reach the hub."""
    from ..engine.checkpoint import hub

    reason = hub.offline_reason()
    if reason is not None and reason.endswith(" is set"):
        return f"Unset {reason.split()[0]} and run `omnivoice download` again with the network on"
    if reason is not None:
        return "Leave huggingface_hub's offline mode and run `omnivoice download` again"
    return "Check the network connection (or HTTPS_PROXY) and run `omnivoice download` again"


def models() -> None:
    """List the OmniVoice checkpoints in the Hugging Face cache: hub id, size, complete or not, where."""
    from ..engine.checkpoint import hub

    found = hub.cached_models()
    out = typer.get_text_stream("stdout")
    width = max([len(m.repo_id) for m in found] + [5])
    for m in found:
        state = "complete" if m.complete else "incomplete (run `omnivoice download` again)"
        out.write(f"{m.repo_id:<{width}}  {size_text(m.size_bytes):>9}  {state}  {m.path}\n")
    if not found:
        echo(f"no OmniVoice model in the Hugging Face cache yet (`omnivoice download` fetches {DEFAULT_MODEL})")
