"""Finding the checkpoint: a local folder, or a hub id found in (or fetched into) the hub cache.

The checkpoint is a folder holding `config.json`, `model.safetensors`, `tokenizer.json` and
`audio_tokenizer/{config.json, model.safetensors}`. Reading its safetensors files is
tensorfile.py's job; downloading and listing the hub cache is hub.py's. No torch here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from .errors import CheckpointError

DEFAULT_MODEL = "k2-fsa/OmniVoice"
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "audio_tokenizer/config.json",
    "audio_tokenizer/model.safetensors",
)


def user_home() -> Path:
    """The user's data folder (OMNIVOICE_HOME overrides it)."""
    if os.environ.get("OMNIVOICE_HOME"):
        return Path(os.environ["OMNIVOICE_HOME"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "omnivoice"


def missing_files(root: Path) -> list[str]:
    """The REQUIRED_FILES that `root` lacks."""
    return [f for f in REQUIRED_FILES if not (Path(root) / f).is_file()]


def check_checkpoint_dir(root: Path) -> Path:
    missing = missing_files(root)
    if missing:
        raise CheckpointError(f"checkpoint folder {root} is missing {', '.join(missing)}")
    return root


def resolve_checkpoint(
    model: str | None = None,
    on_notice: Callable[[str], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Path:
    """A local folder as is; otherwise a hub repo id, fetched into the normal hub cache
    (hub.download: the licence notice and progress go to on_notice and on_progress). None is
    DEFAULT_MODEL (the CLI reads $OMNIVOICE_MODEL in its settings schema, not here)."""
    model = model or DEFAULT_MODEL
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise CheckpointError(f"model {model}: not a folder (give a checkpoint folder or a hub id)")
        return check_checkpoint_dir(path)
    if model.startswith((".", "/", "~")) or model.count("/") != 1:
        raise CheckpointError(f"model {model}: no such folder, and not a hub id of the form owner/name")
    from .hub import download

    return download(model, on_progress=on_progress, on_notice=on_notice)
