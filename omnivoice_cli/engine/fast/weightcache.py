"""The weight cache: the int8 body's coded weights kept on disk, so that coding is paid once.

`--quantize int8` codes every linear of the body (int8 codes per output channel, their scales and
row sums: int8pack.int8_codes). The packed weights themselves are oneDNN's opaque tensors, in a
layout of this CPU's instruction set, so what is kept is the codes, scales and sums: a second load
reads them memory-mapped and only packs them (a copy), never touching the fp32 weights.

One safetensors file per key: the checkpoint's stamp (engine/checkpoint/stamp.py: its files'
paths, sizes, times and safetensors headers' hashes, the one stamp the designed voices and the
phrase cache key by too), the body file's path (what `cache list` shows), the CPU's class
(cpu.py), torch's version and this format's version; a different key is another file (a miss).
FORMAT 2 keys by the stamp: a file of FORMAT 1 (keyed by the body file's own size, time and
header) is a miss once, still the cache's own (listed, evicted and cleared), never read. The cache is untrusted input: a file is used only when
its header, its key, every tensor's name, dtype and shape and a CRC-32 of all its data agree, and
its scales are finite and positive; else it is deleted and rebuilt (with one notice). Files are
written through a temporary file and a rename, and the folder is kept under a cap, the least
recently used files evicted first. The folder may hold what is not the cache's (a checkpoint, a
voice, a link, a FIFO): only its own files, named as it names them (int8-<32 hex>.safetensors,
their temporary files) whose header holds a cache key, are listed, evicted or deleted, and only
regular files are opened (never through a link, never blocking); an entry's name that holds
anything else is left alone and the load goes on without the cache (one notice). A write that
fails (a full disk) says so once and leaves no temporary file. Where: $OMNIVOICE_WEIGHT_CACHE (a folder, or `off`), else
`weights/` in the user's data folder (hub.user_home). `omnivoice cache list` / `clear`.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import stat
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypedDict

from ..checkpoint import hub
from ..checkpoint.hub import entry_stat, open_same, unlink_same
from ..checkpoint.stamp import checkpoint_stamp
from ..checkpoint.tensorfile import SafetensorsFile, TensorFileError
from . import cpu
from .memory import release_pages

if TYPE_CHECKING:  # torch only when a body is converted: `cache list` needs none
    import torch
    from torch import nn

    from .linears import KernelLinear, Make

FORMAT = "2"  # the codes' layout and coding (int8pack.int8_codes) and the key's; a change bumps it
CAP_BYTES = 4 << 30  # the folder's bound: the least recently used files go past it
ENV = "OMNIVOICE_WEIGHT_CACHE"
_SUFFIX = ".safetensors"
_CHUNK = 64 << 20
_TORCH = {"I8": "torch.int8", "F32": "torch.float32", "I32": "torch.int32"}
_ENTRY_NAME = re.compile(r"int8-[0-9a-f]{32}\.safetensors")  # file_for's names
_TMP_NAME = re.compile(r"\.int8-[0-9a-f]{32}\.safetensors\.[0-9]+\.tmp")  # _Writer's
# what a header of the cache's own holds: the fields every FORMAT's key has (FORMAT 1's files too)
_KEY_FIELDS = ("format", "checkpoint", "cpu", "torch")
_MAX_HEADER = 16 << 20  # bytes of a cache file's header at most (a real one: tens of kB)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def cache_dir() -> Path | None:
    """The cache folder; None where $OMNIVOICE_WEIGHT_CACHE is `off` (or `0`)."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() in ("off", "0", "no", "false"):
        return None
    return Path(env).expanduser() if env else hub.user_home() / "weights"


@dataclass(frozen=True)
class Entry:
    """A file of the cache, as `omnivoice cache list` shows it."""

    path: Path
    size: int
    used: float  # last used (mtime), seconds since the epoch
    checkpoint: str  # its key's checkpoint file ("?" where its header is unreadable)
    cpu: str
    torch: str
    identity: tuple[int, int] = (0, 0)  # (device, inode): deleted only while it is still this file


def _cache_meta(path: Path, st: os.stat_result) -> dict[str, str] | None:
    """The metadata of one of the cache's own files, or None where `path` is not one: opened without
    following a link or blocking, only while it is the regular file `st`, its header read bounded
    and holding every field of a cache key."""
    fd = open_same(path, st)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            (n,) = struct.unpack("<Q", head) if len(head) == 8 else (-1,)
            if not 0 < n <= min(size - 8, _MAX_HEADER):
                return None
            header = json.loads(f.read(n))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), str) for k in _KEY_FIELDS):
        return None
    return meta


def _own(folder: Path, name: re.Pattern) -> list[tuple[Path, os.stat_result, dict[str, str]]]:
    """The cache's own files in `folder` whose names match `name`: (path, lstat, metadata)."""
    try:
        paths = [p for p in folder.iterdir() if name.fullmatch(p.name)]
    except OSError:
        return []
    found = []
    for path in paths:
        st = entry_stat(path)
        meta = None if st is None else _cache_meta(path, st)
        if st is not None and meta is not None:
            found.append((path, st, meta))
    return found


class CacheKey(TypedDict):
    """What a cached body was made from, kept as its file's safetensors metadata (all strings)."""

    format: str  # FORMAT
    checkpoint: str  # the body's file (model.safetensors), links resolved: what `cache list` shows
    stamp: str  # the checkpoint's stamp (engine/checkpoint/stamp.py: CheckpointStamp.digest)
    cpu: str  # cpu.cpu_class()
    torch: str  # torch.__version__


def key_of(folder: Path) -> CacheKey | None:
    """What a body of the checkpoint in `folder` is cached by: its stamp, this CPU's class, torch,
    FORMAT. None where the checkpoint has no stamp (a file unreadable): nothing is cached."""
    import torch

    stamp = checkpoint_stamp(folder)
    if stamp is None:
        return None
    return {
        "format": FORMAT,
        "checkpoint": stamp.file("model.safetensors").path,
        "stamp": stamp.digest,
        "cpu": cpu.cpu_class(),
        "torch": str(torch.__version__),
    }


def file_for(folder: Path, key: CacheKey) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return folder / f"int8-{digest}{_SUFFIX}"


def entries(folder: Path | None = None) -> list[Entry]:
    """The cache's own files (the module doc), least recently used first."""
    folder = folder or cache_dir()
    if folder is None or not folder.is_dir():
        return []
    found = [
        Entry(path, st.st_size, st.st_mtime, meta["checkpoint"], meta["cpu"], meta["torch"], (st.st_dev, st.st_ino))
        for path, st, meta in _own(folder, _ENTRY_NAME)
    ]
    return sorted(found, key=lambda e: e.used)


def clear(folder: Path | None = None) -> tuple[int, int]:
    """Delete the cache's own files (temporary ones included); -> (files, bytes) deleted."""
    folder = folder or cache_dir()
    if folder is None or not folder.is_dir():
        return 0, 0
    files = n = 0
    temporary = [(path, st.st_size, (st.st_dev, st.st_ino)) for path, st, _ in _own(folder, _TMP_NAME)]
    for path, size, identity in [*((e.path, e.size, e.identity) for e in entries(folder)), *temporary]:
        if unlink_same(path, identity):
            files, n = files + 1, n + size
    return files, n


def evict(folder: Path, cap: int = CAP_BYTES, keep: Path | None = None) -> None:
    """Delete the least recently used of the cache's own files until they hold at most `cap` bytes
    (never `keep`); what else the folder holds is neither counted nor touched."""
    found = entries(folder)
    total = sum(e.size for e in found)
    for e in found:
        if total <= cap:
            break
        if e.path != keep and unlink_same(e.path, e.identity):
            total -= e.size


def expected_tensors(model: "nn.Module") -> dict[str, tuple[str, list[int]]]:
    """name -> (safetensors dtype, shape) of every tensor a cached int8 body holds, in file order."""
    out: dict[str, tuple[str, list[int]]] = {}
    for i, layer in enumerate(model.llm.layers):  # type: ignore[union-attr, arg-type]  # an nn.Module's attributes are untyped
        a, m = layer.self_attn, layer.mlp
        qkv = (a.q_proj, a.k_proj, a.v_proj)
        out.update(_entry_shapes(f"{i}.qkv", sum(x.out_features for x in qkv), a.q_proj.in_features))
        for name, x in (
            ("o_proj", a.o_proj),
            ("gate_proj", m.gate_proj),
            ("up_proj", m.up_proj),
            ("down_proj", m.down_proj),
        ):
            out.update(_entry_shapes(f"{i}.{name}", x.out_features, x.in_features))
    return out


def _entry_shapes(name: str, n: int, k: int) -> dict[str, tuple[str, list[int]]]:
    return {f"{name}.codes": ("I8", [n, k]), f"{name}.scales": ("F32", [n]), f"{name}.sums": ("I32", [n])}


class _Writer:
    """A cache file written as the body is coded, one tensor after another (never all in memory):
    the header first, with a CRC placeholder filled in at the end; then renamed into place."""

    def __init__(self, path: Path, key: CacheKey, layout: dict[str, tuple[str, list[int]]]):
        self.path, self.tmp = path, path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.layout, self.crc, self.failed = layout, 0, False
        self.meta: dict[str, object] = {**key, "crc32": "0" * 8}  # the CRC filled in by close
        header: dict[str, object] = {"__metadata__": self.meta}
        at = 0
        for name, (dtype, shape) in layout.items():
            n = {"I8": 1, "F32": 4, "I32": 4}[dtype]
            for s in shape:
                n *= s
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
            at += n
        self.size = at
        self.header = header
        path.parent.mkdir(parents=True, exist_ok=True)
        try:  # a new file of ours, never through a link
            fd = os.open(self.tmp, _WRITE_FLAGS, 0o644)
        except FileExistsError:  # a killed run's of this process id: ours when it is a regular file
            st = entry_stat(self.tmp)
            if st is None or not unlink_same(self.tmp, (st.st_dev, st.st_ino)):
                raise
            fd = os.open(self.tmp, _WRITE_FLAGS, 0o644)
        self.file = os.fdopen(fd, "wb")
        self._write_header()

    def _write_header(self) -> None:
        raw = json.dumps(self.header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        self.file.seek(0)
        self.file.write(struct.pack("<Q", len(raw)) + raw)

    def put(self, name: str, tensor: "torch.Tensor") -> None:
        import torch

        data = tensor.contiguous().view(-1).view(torch.uint8).numpy().data  # a memoryview: no copy
        dtype, shape = self.layout[name]
        if list(tensor.shape) != shape or str(tensor.dtype) != _TORCH[dtype]:
            raise OSError(f"{name} is {list(tensor.shape)} {tensor.dtype}, its file expects {shape} {dtype}")
        self.crc = zlib.crc32(data, self.crc)
        self.file.write(data)

    def close(self, ok: bool) -> bool:
        """Finish (the CRC in the header, the rename) when `ok`; else drop the temporary file. An
        OSError of finishing is raised, the temporary file gone all the same."""
        renamed = False
        try:
            if ok:
                self.meta["crc32"] = f"{self.crc:08x}"
                self._write_header()
                self.file.close()
                self.tmp.replace(self.path)
                renamed = True
        finally:
            try:
                self.file.close()  # what it still buffers cannot be written (a full disk): dropped
            except OSError:
                pass
            if not renamed:
                try:
                    self.tmp.unlink(missing_ok=True)
                except OSError:
                    pass
        return renamed


def _data_crc(path: Path, start: int) -> int:
    crc = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            for at in range(start, len(mm), _CHUNK):
                crc = zlib.crc32(view[at : at + _CHUNK], crc)
        finally:
            view.release()
    return crc


def _open(path: Path, key: CacheKey, layout: dict[str, tuple[str, list[int]]]) -> SafetensorsFile:
    """The cache file, checked whole (ValueError saying what is off; TensorFileError, OSError)."""
    import torch

    file = SafetensorsFile(path)
    meta = dict(file.metadata)
    crc = meta.pop("crc32", "")
    if meta != key:
        raise ValueError("made for another key")
    if {n: (e[0], e[1]) for n, e in file.entries.items()} != layout:
        raise ValueError("its tensors are not this body's")
    if path.stat().st_size != file.data_start + sum(e[3] - e[2] for e in file.entries.values()):
        raise ValueError("its size is wrong")
    if f"{_data_crc(path, file.data_start):08x}" != crc:
        raise ValueError("its checksum does not match")
    for name in layout:
        if name.endswith(".scales"):
            s = file.get(name)
            if not (torch.isfinite(s).all() and (s > 0).all()):
                raise ValueError(f"{name} holds scales that are not finite and positive")
    return file


def int8_maker(
    model: "nn.Module", checkpoint: Path, kind: "type[KernelLinear]", notice: Callable[[str], None]
) -> "tuple[Make | None, Callable[[bool], None]]":
    """For quantize_int8 of the checkpoint in the folder `checkpoint`: (make, done). A hit: make
    packs the cached codes; a miss: make codes the weights and writes them to a new cache file,
    done(ok) finishes it. (None, no-op) where the cache is off, its folder cannot be written or
    the checkpoint has no stamp."""
    from .int8pack import int8_codes

    folder = cache_dir()
    if folder is None or not hasattr(kind, "from_codes"):
        return None, lambda ok: None
    layout, key = expected_tensors(model), key_of(checkpoint)
    if key is None:
        return None, lambda ok: None
    path = file_for(folder, key)
    st = entry_stat(path)
    if st is not None and not stat.S_ISREG(st.st_mode):  # a link, a FIFO, a folder: not ours, never opened
        notice(f"weight cache: {path} is not a regular file: loading without the cache")
        return None, lambda ok: None
    if st is not None:
        try:
            if _cache_meta(path, st) is None:  # opened safely first: what follows opens it by name
                raise ValueError("not a file of the cache")
            file = _open(path, key, layout)
            os.utime(path)  # used now: the last to be evicted

            def read(name: str, weights: "list[torch.Tensor]", bias: "torch.Tensor | None") -> "KernelLinear":
                codes, scales, sums = (file.get(f"{name}.{x}") for x in ("codes", "scales", "sums"))
                linear = kind.from_codes(codes, scales, sums, bias)
                release_pages(codes)  # packed (copied): the mapped pages go back to the page cache
                return linear

            return read, lambda ok: None
        except (ValueError, OSError, TensorFileError) as e:
            notice(f"weight cache: {path.name} is not usable ({getattr(e, 'detail', e)}): rebuilding it")
            unlink_same(path, (st.st_dev, st.st_ino))
    try:
        writer = _Writer(path, key, layout)
    except OSError as e:
        notice(f"weight cache: cannot write {folder} ({e.strerror or e}): loading without it")
        return None, lambda ok: None

    def code(name: str, weights: "list[torch.Tensor]", bias: "torch.Tensor | None") -> "KernelLinear":
        codes, scales, sums = int8_codes(weights)
        if not writer.failed:
            try:
                for part, t in (("codes", codes), ("scales", scales), ("sums", sums)):
                    writer.put(f"{name}.{part}", t)
            except OSError as e:
                writer.failed = True
                notice(f"weight cache: cannot write {folder} ({e.strerror or e}): loading without it")
                writer.close(False)  # its temporary file gone at once, its space with it
        return kind.from_codes(codes, scales, sums, bias)

    def done(ok: bool) -> None:
        if writer.failed:  # said so, and dropped, when it failed
            return
        try:
            if writer.close(ok):
                evict(folder, keep=path)
        except OSError as e:
            notice(f"weight cache: cannot write {folder} ({e.strerror or e})")

    return code, done
