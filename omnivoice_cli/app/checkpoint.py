"""The checkpoint a run names, read without its weights: its sizes and what a fine-tune declares.

A request is checked before the model loads (app/request.py); a fine-tuned checkpoint's own
instruct items, languages and voices (engine/checkpoint/finetune.py, docs/finetunes.md) must be known by
then. `model_config(settings["model"])` reads the checkpoint's small config files: a local
folder, else the hub cache's snapshot (never the network), else the base model's defaults (a
model still to download is the base model's layout until it is there). Read once per folder
and change of its files.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..engine.checkpoint.hub import DEFAULT_MODEL, cached_snapshot, hub_cache_dir, missing_files
from ..engine.model.config import ModelConfig

_FILES = ("config.json", "instructs.json", "languages.json", "references.json")
_read: dict[tuple, ModelConfig] = {}


def checkpoint_folder(model: str | None) -> Path | None:
    """The folder of a checkpoint that is here (a local folder, a cached snapshot), or None."""
    model = model or DEFAULT_MODEL
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.exists() or model.startswith((".", "/", "~")) or model.count("/") != 1:
        return None
    if not (hub_cache_dir() / f"models--{model.replace('/', '--')}").is_dir():
        return None  # never fetched: no need to import the hub library to say so
    try:
        return cached_snapshot(model)
    except Exception:  # a hub library that cannot say: treated as not cached
        return None


def _stamp(folder: Path) -> tuple:
    """What keys a folder's config read: the time and size of the files ModelConfig reads (_FILES).
    Not engine/checkpoint/stamp.py's checkpoint_stamp: that one covers REQUIRED_FILES, so not a
    fine-tune's instructs.json, languages.json or references.json (an edit of them would go
    unseen), and it opens the weights and hashes their safetensors headers, while model_config runs
    on every request built (each line of a batch, each HTTP request): about 14 times this one's
    cost on the tiny checkpoint, more on a real one's larger headers."""
    out: list[tuple[str, int | None, int | None]] = []
    for name in _FILES:
        try:
            st = os.stat(folder / name)
            out.append((name, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((name, None, None))
    return tuple(out)


def model_config(model: str | None) -> ModelConfig:
    """The ModelConfig of the checkpoint `model` names (see the module doc). A declaration that
    breaks its rules is a CheckpointError naming the file."""
    folder = checkpoint_folder(model)
    if folder is None or missing_files(folder):
        return ModelConfig()
    key = (str(folder.resolve()), _stamp(folder))
    if key not in _read:
        if len(_read) > 16:
            _read.clear()
        _read[key] = ModelConfig.from_checkpoint(folder)
    return _read[key]
