"""Finding the checkpoint and reading its safetensors files.

The checkpoint is a folder (local, or the hub's cache of `k2-fsa/OmniVoice`) holding
`config.json`, `model.safetensors`, `tokenizer.json` and `audio_tokenizer/{config.json,
model.safetensors}`. Safetensors files are memory-mapped: a tensor is a view into the file's pages,
read from disk only when first touched, and never copied when the dtype already matches.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Callable, Iterable

import torch

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

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


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


# --------------------------------------------------------------------------- safetensors


class SafetensorsFile:
    """A safetensors file opened by memory map; tensors are views, made on request."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise ValueError("file shorter than its 8-byte header length")
                (n,) = struct.unpack("<Q", head)
                if n > size - 8 or n > 100_000_000:
                    raise ValueError(f"header length {n} exceeds the file size {size}")
                header = json.loads(f.read(n))
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint file missing: {self.path}") from None
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{self.path} is not a valid safetensors file ({e})") from None
        header.pop("__metadata__", None)
        self.data_start = 8 + n
        self.entries: dict[str, tuple[torch.dtype, list[int], int, int]] = {}
        end_max = 0
        for name, info in header.items():
            try:
                dtype = _DTYPES[info["dtype"]]
                begin, end = (int(x) for x in info["data_offsets"])
                shape = [int(s) for s in info["shape"]]
            except (KeyError, TypeError, ValueError):
                raise CheckpointError(f"{self.path}: bad header entry for tensor {name!r}") from None
            numel = 1
            for s in shape:
                numel *= s
            if end - begin != numel * dtype.itemsize or begin < 0:
                raise CheckpointError(f"{self.path}: tensor {name!r} has inconsistent offsets")
            self.entries[name] = (dtype, shape, begin, end)
            end_max = max(end_max, end)
        if self.data_start + end_max > size:
            raise CheckpointError(
                f"{self.path} is truncated: {size} bytes, its header needs {self.data_start + end_max}"
            )
        self._storage: torch.UntypedStorage | None = None

    def keys(self) -> list[str]:
        return list(self.entries)

    def shape(self, name: str) -> list[int]:
        return self.entries[name][1]

    def _mapped(self) -> torch.UntypedStorage:
        if self._storage is None:
            nbytes = self.path.stat().st_size
            self._storage = torch.UntypedStorage.from_file(str(self.path), shared=False, nbytes=nbytes)
            _FILE_MAPS.append((self._storage.data_ptr(), self._storage.data_ptr() + nbytes, self._storage))
        return self._storage

    def prefetch(self, skip: Iterable[str] = ()) -> None:
        """Ask the kernel to read the pages of every tensor but `skip` ahead, in the background
        (madvise WILLNEED: no thread of ours, no CPU taken from the first forward; on a cold page
        cache the file streams in while start-up goes on). Skip tables that are only looked up a
        few rows at a time. A no-op where madvise is not available."""
        import mmap

        lib = libc()
        if not lib:
            return
        storage = self._mapped()
        base, skip = storage.data_ptr(), set(skip)
        for name, (_, _, begin, end) in self.entries.items():
            if name in skip:
                continue
            first = (base + self.data_start + begin) // mmap.PAGESIZE * mmap.PAGESIZE
            lib.madvise(first, base + self.data_start + end - first, 3)  # 3 = MADV_WILLNEED

    def get(self, name: str) -> torch.Tensor:
        """The tensor as a view into the mapped file (copied only if misaligned)."""
        dtype, shape, begin, end = self.entries[name]
        storage = self._mapped()
        offset = self.data_start + begin
        if offset % dtype.itemsize == 0:
            t = torch.empty(0, dtype=dtype)
            t.set_(storage, offset // dtype.itemsize, shape)
            return t
        raw = torch.empty(0, dtype=torch.uint8).set_(storage, offset, (end - begin,))
        return raw.clone().view(dtype).view(shape)


_FILE_MAPS: list[tuple[int, int, torch.UntypedStorage]] = []  # (start, end, storage) of every file mapped


def release_pages(t: torch.Tensor) -> bool:
    """Let the kernel drop the resident pages of a tensor that is a view of a mapped checkpoint
    (for weights whose data now lives elsewhere, e.g. repacked). They are clean private file pages,
    so a later read faults them back in from the file: nothing is lost. Any other tensor (heap
    memory, where dropping pages would zero them) is left alone. Linux only; returns whether it
    released."""
    import mmap

    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    if not any(a <= start and end <= b for a, b, _ in _FILE_MAPS):
        return False
    page = mmap.PAGESIZE
    first, last = -(-start // page) * page, end // page * page  # whole pages inside the tensor only
    if last <= first:
        return False
    lib = libc()
    return bool(lib) and lib.madvise(first, last - first, 4) == 0  # 4 = MADV_DONTNEED


_LIBC = None


def libc():
    """glibc through ctypes (madvise, malloc_trim, mallopt), loaded once; False where there is
    none (another OS or C library): the memory hints that use it are then skipped."""
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        import sys

        if sys.platform.startswith("linux"):
            import ctypes

            try:
                lib = ctypes.CDLL("libc.so.6", use_errno=True)
                lib.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                lib.malloc_trim, lib.mallopt  # glibc only
                _LIBC = lib
            except (OSError, AttributeError):
                _LIBC = False
    return _LIBC


def check_tensors(
    path: Path, file: SafetensorsFile, expected: dict[str, tuple[int, ...]], optional: Iterable[str] = (), allow_extra: bool = False
) -> None:
    """One CheckpointError listing every missing, unexpected or mis-shaped tensor."""
    optional = set(optional)
    problems = []
    for name, shape in expected.items():
        if name not in file.entries:
            if name not in optional:
                problems.append(f"missing {name} {list(shape)}")
        elif tuple(file.shape(name)) != tuple(shape):
            problems.append(f"mis-shaped {name}: {file.shape(name)} in the file, expected {list(shape)}")
    if not allow_extra:
        problems += [f"unexpected {name}" for name in file.entries if name not in expected]
    if problems:
        shown = problems[:12] + ([f"... and {len(problems) - 12} more"] if len(problems) > 12 else [])
        raise CheckpointError(f"{path} does not match the model ({len(problems)} problems): " + "; ".join(shown))


def load_module(
    module: torch.nn.Module, path: Path, *, optional: Iterable[str] = (), dtype=None, device="cpu",
    prefetch=False, prefetch_skip: Iterable[str] = (),
) -> None:
    """Strictly load a safetensors file into a module built on the meta device. prefetch: when
    the tensors stay views of the file (CPU, same dtype), have the kernel read the pages of all
    but `prefetch_skip` ahead in the background."""
    file = SafetensorsFile(path)
    state = module.state_dict()
    expected = {k: tuple(v.shape) for k, v in state.items()}
    check_tensors(path, file, expected, optional=optional)
    tensors = {}
    for name in expected:
        if name not in file.entries:
            continue
        t = file.get(name)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        tensors[name] = t.to(device)
    module.load_state_dict(tensors, strict=False, assign=True)
    if prefetch and torch.device(device).type == "cpu" and dtype in (None, torch.float32):
        file.prefetch(skip=prefetch_skip)
