"""Finding the checkpoint: a local folder, or a hub id found in (or fetched into) the hub cache.

The checkpoint is a folder (local, or the hub's cache of `k2-fsa/OmniVoice`) holding
`config.json`, `model.safetensors`, `tokenizer.json` and `audio_tokenizer/{config.json,
model.safetensors}`. Reading its safetensors files is tensorfile.py's job. No torch here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from .errors import CheckpointError, ModelUnavailable

DEFAULT_MODEL = "k2-fsa/OmniVoice"
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "audio_tokenizer/config.json",
    "audio_tokenizer/model.safetensors",
)
LICENCE_NOTICE = (
    "OmniVoice weights are licensed CC-BY-NC 4.0 (non-commercial use only); its audio codec "
    "(Higgs Audio v2 tokenizer) is under the Boson Higgs Audio 2 Community License."
)

# --------------------------------------------------------------------------- locating


def user_home() -> Path:
    """The user's data folder (OMNIVOICE_HOME overrides it)."""
    if os.environ.get("OMNIVOICE_HOME"):
        return Path(os.environ["OMNIVOICE_HOME"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "omnivoice"


def check_checkpoint_dir(root: Path) -> Path:
    missing = [f for f in REQUIRED_FILES if not (root / f).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint folder {root} is missing {', '.join(missing)}")
    return root


def resolve_checkpoint(model: str | None = None, on_notice: Callable[[str], None] | None = None) -> Path:
    """A local folder as is; otherwise a hub repo id, fetched into the normal hub cache."""
    model = model or os.environ.get("OMNIVOICE_MODEL") or DEFAULT_MODEL
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise CheckpointError(f"--model {model}: not a folder (give a checkpoint folder or a hub id)")
        return check_checkpoint_dir(path)
    if model.startswith((".", "/", "~")) or model.count("/") != 1:
        raise CheckpointError(f"--model {model}: no such folder, and not a hub id of the form owner/name")
    return check_checkpoint_dir(_fetch_from_hub(model, on_notice))


def _fetch_from_hub(repo_id: str, on_notice: Callable[[str], None] | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:  # already cached: no network, no notice
        return Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError):
        pass
    offline_help = (
        f"{repo_id} is not in the Hugging Face cache and cannot be downloaded "
        "(offline). Connect once to fetch it (about 3.2 GB), or pass --model PATH to a local "
        "checkpoint folder."
    )
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise ModelUnavailable(offline_help)
    _licence_notice_once(on_notice)
    if on_notice:
        on_notice(f"downloading {repo_id} into the Hugging Face cache ...")
    try:
        return Path(snapshot_download(repo_id))
    except Exception as e:  # network errors come in many classes; the message says what happened
        if "401" in str(e) or "404" in str(e) or "RepositoryNotFound" in type(e).__name__:
            raise ModelUnavailable(f"{repo_id}: no such model on the Hugging Face hub ({type(e).__name__})") from None
        raise ModelUnavailable(f"{offline_help} ({type(e).__name__})") from None


def _licence_notice_once(on_notice: Callable[[str], None] | None) -> None:
    marker = user_home() / "licence-notice-shown"
    if marker.exists() or on_notice is None:
        return
    on_notice(LICENCE_NOTICE)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
