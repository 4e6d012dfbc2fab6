"""Reading (and writing) safetensors files: the one reader the engine uses.

A file's header is read and checked when it is opened (truncated or corrupt files fail at once,
naming the file). Tensors then come either as views of the memory-mapped file (`get`: read from
disk only when first touched, never copied when the dtype already matches; checkpoints) or as
plain copies (`read`: small tensors, e.g. a saved voice's codes, with no mapping kept open).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, cast

from ..errors import CheckpointError
from ..fast import memory

if TYPE_CHECKING:  # torch is imported when a tensor is made: reading a header (voice list) needs none
    import torch

# safetensors dtype -> (torch dtype name, bytes per element)
_DTYPES = {
    "F64": ("float64", 8),
    "F32": ("float32", 4),
    "F16": ("float16", 2),
    "BF16": ("bfloat16", 2),
    "I64": ("int64", 8),
    "I32": ("int32", 4),
    "I16": ("int16", 2),
    "I8": ("int8", 1),
    "U8": ("uint8", 1),
    "BOOL": ("bool", 1),
}


def _strides(shape: list[int]) -> list[int]:
    """The strides of a contiguous tensor of `shape` (what set_ takes without them)."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return out[::-1]


def _torch_dtype(name: str) -> "torch.dtype":
    import torch

    return getattr(torch, _DTYPES[name][0])


_MAX_HEADER = 100_000_000  # bytes; a larger header length means a corrupt file


class TensorFileError(CheckpointError):
    """A safetensors file that is missing or not valid. `detail` says what is wrong without the
    path, so that a caller can say what the file was meant to be (a voice file, ...)."""

    def __init__(self, path: Path, detail: str, message: str | None = None, missing: bool = False):
        self.path, self.detail, self.missing = path, detail, missing
        super().__init__(message or f"{path} is not a valid safetensors file ({detail})")


def _read_header(path: Path) -> tuple[dict, int, int]:
    """-> (header, offset of the data, file size); TensorFileError when missing or unreadable."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("file shorter than its 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > _MAX_HEADER:
                raise ValueError(f"header length {n} exceeds the file size {size}")
            header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
    except FileNotFoundError:
        raise TensorFileError(path, "no such file", f"checkpoint file missing: {path}", missing=True) from None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise TensorFileError(path, str(e)[:200] or type(e).__name__) from None
    return header, 8 + n, size


def _entry(path: Path, name: str, info) -> tuple[str, list[int], int, int]:
    """One header entry -> (safetensors dtype, shape, begin, end), its offsets checked against its size."""
    try:
        dtype = info["dtype"]
        itemsize = _DTYPES[dtype][1]
        begin, end = (int(x) for x in info["data_offsets"])
        shape = [int(s) for s in info["shape"]]
    except (KeyError, TypeError, ValueError):
        raise TensorFileError(path, f"bad header entry for tensor {name!r}") from None
    if any(s < 0 for s in shape) or len(shape) > 8:
        raise TensorFileError(path, f"bad shape {shape[:9]} for tensor {name!r}")
    numel = 1
    for s in shape:
        numel *= s
    if end - begin != numel * itemsize or begin < 0:
        raise TensorFileError(path, f"inconsistent offsets for tensor {name!r}")
    return dtype, shape, begin, end


class SafetensorsFile:
    """A safetensors file, its header checked on opening; tensors are made on request."""

    def __init__(self, path: Path):
        self.path = Path(path)
        header, self.data_start, size = _read_header(self.path)
        meta = header.pop("__metadata__", None)
        if meta is not None and (not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values())):
            raise TensorFileError(self.path, "its __metadata__ is not a map of strings")
        self.metadata: dict[str, str] = dict(meta) if meta else {}
        self.entries = {name: _entry(self.path, name, info) for name, info in header.items()}
        end_max = max((e[3] for e in self.entries.values()), default=0)
        if self.data_start + end_max > size:
            detail = f"truncated: {size} bytes, its header needs {self.data_start + end_max}"
            raise TensorFileError(self.path, detail, f"{self.path} is {detail}")
        self._storage: "torch.UntypedStorage | None" = None

    def keys(self) -> list[str]:
        return list(self.entries)

    def shape(self, name: str) -> list[int]:
        return self.entries[name][1]

    def dtype(self, name: str) -> "torch.dtype":
        return _torch_dtype(self.entries[name][0])

    def _mapped(self) -> "torch.UntypedStorage":
        import torch

        if self._storage is None:
            nbytes = self.path.stat().st_size
            mapped = cast(  # the stubs give any storage; an UntypedStorage's from_file makes its own kind
                torch.UntypedStorage, torch.UntypedStorage.from_file(str(self.path), shared=False, nbytes=nbytes)
            )
            self._storage = mapped
            memory.register_file_map(mapped.data_ptr(), mapped.data_ptr() + nbytes, mapped)
        return self._storage

    def prefetch(self, skip: Iterable[str] = ()) -> None:
        """Ask the kernel to read the pages of every tensor but `skip` ahead, in the background
        (madvise WILLNEED: no thread of ours, no CPU taken from the first forward; on a cold page
        cache the file streams in while start-up goes on). Skip tables that are only looked up a
        few rows at a time. A no-op where madvise is not available."""
        if not memory.libc():
            return
        base, skip = self._mapped().data_ptr() + self.data_start, set(skip)
        for name, (_, _, begin, end) in self.entries.items():
            if name not in skip:
                memory.advise(base + begin, end - begin, memory.MADV_WILLNEED)

    def get(self, name: str) -> "torch.Tensor":
        """The tensor as a view into the mapped file (copied only if misaligned)."""
        import torch

        code, shape, begin, end = self.entries[name]
        dtype = _torch_dtype(code)
        storage = self._mapped()
        offset = self.data_start + begin
        if offset % dtype.itemsize == 0:
            t = torch.empty(0, dtype=dtype)
            t.set_(storage, offset // dtype.itemsize, shape, _strides(shape))
            return t
        raw = torch.empty(0, dtype=torch.uint8).set_(storage, offset, (end - begin,), (1,))
        return raw.clone().view(dtype).view(shape)

    def read(self, name: str) -> "torch.Tensor":
        """The tensor copied into memory by a plain read (no mapping kept: small tensors)."""
        import torch

        code, shape, begin, end = self.entries[name]
        dtype = _torch_dtype(code)
        if end == begin:
            return torch.empty(shape, dtype=dtype)
        with open(self.path, "rb") as f:
            f.seek(self.data_start + begin)
            raw = bytearray(f.read(end - begin))
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)


def check_tensors(
    path: Path,
    file: SafetensorsFile,
    expected: dict[str, tuple[int, ...]],
    optional: Iterable[str] = (),
    allow_extra: bool = False,
    floating: bool = False,
    what: str = "the model",
) -> None:
    """One CheckpointError listing every missing, unexpected or mis-shaped tensor (and, with
    `floating`, every one that is not floating point)."""
    optional = set(optional)
    problems = []
    for name, shape in expected.items():
        if name not in file.entries:
            if name not in optional:
                problems.append(f"missing {name} {list(shape)}")
        elif tuple(file.shape(name)) != tuple(shape):
            problems.append(f"{name} has shape {file.shape(name)}, expected {list(shape)}")
        elif floating and not file.dtype(name).is_floating_point:
            problems.append(f"{name} has dtype {file.dtype(name)}, expected a float type")
    if not allow_extra:
        problems += [f"unexpected {name}" for name in file.entries if name not in expected]
    if problems:
        shown = problems[:12] + ([f"... and {len(problems) - 12} more"] if len(problems) > 12 else [])
        raise CheckpointError(f"{path} does not match {what} ({len(problems)} problems): " + "; ".join(shown))


def load_module(
    module: "torch.nn.Module",
    path: Path,
    *,
    optional: Iterable[str] = (),
    dtype=None,
    device="cpu",
    prefetch=False,
    prefetch_skip: Iterable[str] = (),
) -> None:
    """Strictly load a safetensors file into a module built on the meta device. prefetch: when
    the tensors stay views of the file (CPU, same dtype), have the kernel read the pages of all
    but `prefetch_skip` ahead in the background."""
    import torch

    file = SafetensorsFile(path)
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
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


def read_floats(path: Path, expected: dict[str, tuple[int, ...]], what: str, device="cpu") -> "dict[str, torch.Tensor]":
    """The `expected` tensors of a file as float32 on `device` (views of the mapped file where
    they already are float32 on the CPU); other tensors in the file are never read. One
    CheckpointError lists every missing, mis-shaped or non-float tensor."""
    import torch

    file = SafetensorsFile(path)
    check_tensors(path, file, expected, allow_extra=True, floating=True, what=what)
    return {name: file.get(name).to(device=torch.device(device), dtype=torch.float32) for name in expected}


def write_file(path: Path, tensors: "dict[str, torch.Tensor]", metadata: dict[str, str]) -> None:
    """Write tensors and string metadata as safetensors, through a temporary file and a rename,
    so the file is never seen partial. The file gets a new file's usual mode, 0666 less the umask
    (safetensors itself writes 0600, which another user, a container's, cannot read)."""
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        save_file(tensors, str(tmp), metadata=metadata)
        os.chmod(tmp, new_file_mode())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def new_file_mode() -> int:
    """The mode a new file gets from open(): 0666 less the process's umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
