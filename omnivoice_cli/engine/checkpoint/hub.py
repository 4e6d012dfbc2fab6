"""Finding the checkpoint: a local folder, or a hub id found in (or fetched into) the Hugging
Face hub cache; downloading into that cache, and listing what it holds.

    root = resolve_checkpoint("k2-fsa/OmniVoice", on_notice=print_line)   # what Engine.load does
    path = download("k2-fsa/OmniVoice", on_progress=bar, on_notice=print_line)
    for m in cached_models(): print(m.repo_id, m.path, m.size_bytes, m.complete)

The checkpoint is a folder holding `config.json`, `model.safetensors`, `tokenizer.json` and
`audio_tokenizer/{config.json, model.safetensors}` (REQUIRED_FILES). Reading its safetensors
files is tensorfile.py's job.

Downloads go into the normal hub cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/
hub), read from the environment at each call. Progress leaves through on_progress(done_bytes,
total_bytes) and messages through on_notice(line): no typer, no rich. No torch either.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import CheckpointError, InvalidRequest, ModelUnavailable

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes in total) of the files to fetch
NoticeCallback = Callable[[str], None]  # one line for the user

LICENCE_NOTICE = (
    "OmniVoice weights are licensed CC-BY-NC 4.0 (non-commercial use only); its audio codec "
    "(Higgs Audio v2 tokenizer) is under the Boson Higgs Audio 2 Community License."
)
_TRUE = ("1", "true", "yes", "on")
DEFAULT_MODEL = "k2-fsa/OmniVoice"
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "audio_tokenizer/config.json",
    "audio_tokenizer/model.safetensors",
)


@dataclass(frozen=True)
class CachedModel:
    """An OmniVoice checkpoint found in the hub cache."""

    repo_id: str  # owner/name on the hub
    path: Path  # the newest snapshot folder (what --model would load)
    size_bytes: int  # bytes on disk, every cached revision's files counted once
    complete: bool  # every REQUIRED_FILES present in that snapshot


# --------------------------------------------------------------------------- where


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


def model_problem(model: str) -> str | None:
    """Why `model` can name no checkpoint, read without the network (a folder that is not there
    and no hub id: "./ckpt", "/no/such", "a/b/c"), or None."""
    path = Path(model).expanduser()
    if path.exists():
        return None if path.is_dir() else f"{model}: not a folder (give a checkpoint folder or a hub id)"
    if model.startswith((".", "/", "~")) or model.count("/") != 1:
        return f"{model}: no such folder, and not a hub id of the form owner/name"
    return None


def resolve_checkpoint(
    model: str | None = None,
    on_notice: NoticeCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> Path:
    """A local folder as is; otherwise a hub repo id, fetched into the normal hub cache
    (`download_checkpoint`: the licence notice and progress go to on_notice and on_progress). None is
    DEFAULT_MODEL (the CLI reads $OMNIVOICE_MODEL in its settings schema, not here)."""
    model = model or DEFAULT_MODEL
    problem = model_problem(model)
    if problem is not None:
        raise CheckpointError(f"model {problem}")
    path = Path(model).expanduser()
    if path.exists():
        return check_checkpoint_dir(path)
    return download_checkpoint(model, on_progress=on_progress, on_notice=on_notice)


def hub_cache_dir() -> Path:
    """The hub cache folder, by huggingface_hub's rules, read now (it reads them once, at import)."""
    env = os.environ
    path = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not path:
        home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
        path = os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(path)))


def offline_reason() -> str | None:
    """Why the hub must not be reached ("HF_HUB_OFFLINE is set"), or None when it may be."""
    from huggingface_hub import constants

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return f"{name} is set"
    return "huggingface_hub is in offline mode" if constants.HF_HUB_OFFLINE else None


def check_repo_id(repo_id: str) -> None:
    """InvalidRequest unless `repo_id` has the form owner/name."""
    if not isinstance(repo_id, str) or repo_id.startswith((".", "/", "~")) or repo_id.count("/") != 1:
        raise InvalidRequest(f"model {repo_id!r} is not a hub id of the form owner/name")


def cached_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot of the repo's main revision, complete or not; None when there is none.
    Never reaches the network."""
    import huggingface_hub as hf

    try:
        return Path(hf.snapshot_download(repo_id, cache_dir=hub_cache_dir(), local_files_only=True))
    except (FileNotFoundError, OSError, ValueError):  # LocalEntryNotFoundError and its kin
        return None


# --------------------------------------------------------------------------- download


def download_checkpoint(
    repo_id: str = DEFAULT_MODEL, on_progress: ProgressCallback | None = None, on_notice: NoticeCallback | None = None
) -> Path:
    """Fetch a checkpoint's whole snapshot into the hub cache; -> its snapshot folder.

    Already cached with every REQUIRED_FILES: returned at once, without the network. Otherwise the
    licence notice goes to on_notice (once per user: counted as shown only when a download
    succeeded), then a line saying what is fetched, and on_progress(done, total) follows the bytes
    (without on_progress, huggingface_hub draws its own bars). ModelUnavailable (one line: what,
    why, what to do) when offline, unreachable, or stopped; InvalidRequest for a malformed id;
    CheckpointError when the downloaded repo lacks a required file."""
    check_repo_id(repo_id)
    root = cached_snapshot(repo_id)
    missing = missing_files(root) if root is not None else list(REQUIRED_FILES)
    if root is not None and not missing:
        return root
    reason = offline_reason()
    if reason is not None:
        raise _not_fetched(repo_id, None if root is None else missing, f"offline: {reason}")
    files = _remote_files(repo_id, None if root is None else missing)
    shown = _show_licence(on_notice)
    todo = [f for f in files if f.will_download]
    total = sum(f.file_size or 0 for f in todo)
    if on_notice is not None and todo:
        on_notice(f"downloading {repo_id} ({len(todo)} files, {_size(total)}) into the Hugging Face cache ...")
    try:
        _fetch(repo_id, todo, total, on_progress)
        root = _finish_snapshot(repo_id)
    except Exception as e:  # network and disk errors come in many classes; the line says which
        raise ModelUnavailable(
            f"{repo_id}: the download stopped ({_why(e)}); run it again to resume where it stopped"
        ) from None
    if shown:
        _count_licence_shown()
    return check_checkpoint_dir(root)


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _not_fetched(repo_id: str, missing: list[str] | None, why: str) -> ModelUnavailable:
    """Not cached (or partly) and not downloadable: the problem, and the engine's own advice
    (ModelUnavailable.problem lets a caller word the advice for its users)."""
    size = " (about 3.2 GB)" if repo_id == DEFAULT_MODEL else ""
    where = (
        "is not in the Hugging Face cache"
        if missing is None
        else (f"is only partly in the Hugging Face cache (missing {', '.join(missing)})")
    )
    problem = f"{repo_id}{size} {where} and cannot be downloaded ({why})"
    advice = "Connect once to fetch it, or give the model as the path of a local checkpoint folder."
    return ModelUnavailable(f"{problem}. {advice}", problem=problem)


def _remote_files(repo_id: str, missing: list[str] | None) -> list:
    """The repo's files as huggingface_hub's dry run sees them (size, whether cached)."""
    import huggingface_hub as hf

    try:
        return list(
            hf.snapshot_download(repo_id, cache_dir=hub_cache_dir(), dry_run=True, tqdm_class=_silent_bar_class())
        )
    except Exception as e:  # unreachable hub, unknown repo: huggingface_hub wraps both in a DryRunError
        if _not_found(e):
            raise ModelUnavailable(
                f"{repo_id}: no such model on the Hugging Face hub, or it is private or gated: check the "
                "name, or log in (HF_TOKEN) with access to it"
            ) from None
        raise _not_fetched(repo_id, missing, _why(e, False)) from None


def _causes(e: BaseException | None):
    """e and the exceptions it was raised from, outermost first."""
    while e is not None:
        yield e
        e = e.__cause__


def _not_found(e: BaseException) -> bool:
    """A missing, private or gated repo (huggingface_hub may wrap it in a DryRunError)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    return any(
        isinstance(c, RepositoryNotFoundError) or getattr(getattr(c, "response", None), "status_code", None) == 401
        for c in _causes(e)
    )


def _why(e: BaseException, message: bool = True) -> str:
    """The innermost cause's class (and with `message` the first line of its message, shortened)."""
    root = list(_causes(e))[-1]
    text = str(root).strip().splitlines()[0][:120] if message and str(root).strip() else ""
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


def _fetch(repo_id: str, files: list, total: int, on_progress: ProgressCallback | None) -> None:
    """Download the files one after another at the dry run's commit, reporting bytes."""
    import huggingface_hub as hf

    bar_class, file_done = (None, None) if on_progress is None else _byte_counter(on_progress, total)
    for f in files:
        hf.hf_hub_download(repo_id, f.filename, revision=f.commit_hash, cache_dir=hub_cache_dir(), tqdm_class=bar_class)
        if file_done is not None:
            file_done(f.file_size or 0)


def _finish_snapshot(repo_id: str) -> Path:
    """The snapshot folder, by huggingface_hub's own call (files already there are not fetched
    again; it records which revision `main` is, for later calls without the network)."""
    import huggingface_hub as hf

    return Path(hf.snapshot_download(repo_id, cache_dir=hub_cache_dir(), tqdm_class=_silent_bar_class()))


def _silent_bar_class():
    from tqdm.std import tqdm

    class SilentBar(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return SilentBar


def _byte_counter(on_progress: ProgressCallback, total: int):
    """-> (a tqdm class for hf_hub_download that draws nothing and reports on_progress(done,
    total) across files, file_done(size) to call when a file is complete). A file counts as far
    as the furthest of its bars (huggingface_hub may keep one for the network, one for the disk)."""
    state = {"done": 0, "current": 0}

    class ByteBar(_silent_bar_class()):  # type: ignore[misc]  # tqdm, imported when a download starts
        def update(self, n=1):
            self.n += n or 0  # a disabled tqdm counts nothing itself
            state["current"] = max(state["current"], self.n)
            on_progress(min(state["done"] + state["current"], total), total)

        def update_transfer(self, n=1):  # network bytes: the bytes written are the ones counted
            pass

        def set_transfer_postfix_str(self, *args, **kwargs):
            pass

    def file_done(size: int) -> None:
        state["done"], state["current"] = state["done"] + size, 0
        on_progress(min(state["done"], total), total)

    return ByteBar, file_done


# --------------------------------------------------------------------------- licence notice


def _licence_marker() -> Path:
    return user_home() / "licence-notice-shown"


def _show_licence(on_notice: NoticeCallback | None) -> bool:
    """Show the licence notice unless a download already succeeded after showing it."""
    if on_notice is None or _licence_marker().exists():
        return False
    on_notice(LICENCE_NOTICE)
    return True


def _count_licence_shown() -> None:
    try:
        _licence_marker().parent.mkdir(parents=True, exist_ok=True)
        _licence_marker().touch()
    except OSError:
        pass


# --------------------------------------------------------------------------- listing


def cached_models() -> list[CachedModel]:
    """The OmniVoice checkpoints in the hub cache (config.json's model_type is omnivoice, or the
    snapshot holds every REQUIRED_FILES), sorted by repo id. Never reaches the network."""
    from huggingface_hub import scan_cache_dir

    try:
        info = scan_cache_dir(hub_cache_dir())
    except Exception:  # CacheNotFound (no cache yet), or a cache path that is a file
        return []
    found = []
    for repo in info.repos:
        if repo.repo_type != "model" or not repo.revisions:
            continue
        newest = max(repo.revisions, key=lambda r: r.last_modified)
        path = Path(newest.snapshot_path)
        missing = missing_files(path)
        if _is_omnivoice(path) or not missing:
            found.append(CachedModel(repo.repo_id, path, int(repo.size_on_disk), not missing))
    return sorted(found, key=lambda m: m.repo_id)


def _is_omnivoice(snapshot: Path) -> bool:
    try:
        return json.loads((snapshot / "config.json").read_text(encoding="utf-8")).get("model_type") == "omnivoice"
    except (OSError, ValueError, AttributeError):
        return False


# --- our own files in the user's folders (the weight cache, the phrase cache) ------------------------

# to read one: never through a link, never waiting on a FIFO or a device
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_same(path: Path, st: os.stat_result) -> int | None:
    """`path` opened to read (READ_FLAGS) only while it is the regular file `st` (its entry_stat):
    the descriptor, the caller's to close; None where it is not (any more) or cannot be opened."""
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        now = os.fstat(fd)
        if stat.S_ISREG(now.st_mode) and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def entry_stat(path: Path) -> os.stat_result | None:
    """The entry itself (a link is not followed), or None where there is none."""
    try:
        return os.lstat(path)
    except OSError:
        return None


def unlink_same(path: Path, identity: tuple[int, int]) -> bool:
    """Delete `path` only while it is still the regular file `identity` (device, inode): never a
    link, nor a file put in its place since it was looked at."""
    st = entry_stat(path)
    if st is None or not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != identity:
        return False
    try:
        path.unlink()
    except OSError:
        return False
    return True
