"""Memory hints to the C library and the kernel: glibc through ctypes, the registry of
memory-mapped checkpoint files, dropping a mapped tensor's pages, trimming the heap.

Every helper is a no-op where glibc is not available (another OS or C library).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only
    import ctypes

    import torch

_LIBC: ctypes.CDLL | Literal[False] | None = None  # None: not looked for yet
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters
MADV_WILLNEED, MADV_DONTNEED = 3, 4  # madvise advice values (Linux)

_FILE_MAPS: list[tuple[int, int, object]] = []  # (start, end, a weak pointer to its storage) of every file mapped


def libc() -> ctypes.CDLL | Literal[False]:
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


def register_file_map(start: int, end: int, storage: object) -> None:
    """Record a file mapped at [start, end) while its storage lives: release_pages may drop its
    pages. The storage is held weakly (torch's own weak pointer to the storage, which every tensor
    viewing it keeps alive), so an unloaded model's maps go with it (serve --idle-unload); a map
    whose storage is gone is forgotten."""
    for entry in [m for m in _FILE_MAPS if not _alive(m[2])]:
        _FILE_MAPS.remove(entry)
        _free(entry[2])
    from .. import torchprivate

    weak = torchprivate.storage_weak_ref(storage)
    _FILE_MAPS.append((start, end, weak if weak is not None else storage))


def _alive(ref: object) -> bool:
    if not isinstance(ref, int):  # a storage without weak pointers, held
        return True
    from .. import torchprivate

    return not torchprivate.weak_ref_expired(ref)


def _free(ref: object) -> None:
    if isinstance(ref, int):
        from .. import torchprivate

        torchprivate.free_weak_ref(ref)


def advise(start: int, length: int, advice: int) -> bool:
    """madvise over [start, start + length) rounded out to whole pages at the start; whether it ran."""
    import mmap

    lib = libc()
    if not lib:
        return False
    first = start // mmap.PAGESIZE * mmap.PAGESIZE
    return lib.madvise(first, start + length - first, advice) == 0


def release_pages(t: "torch.Tensor") -> bool:
    """Let the kernel drop the resident pages of a tensor that is a view of a mapped checkpoint
    (for weights whose data now lives elsewhere, e.g. repacked). They are clean private file pages,
    so a later read faults them back in from the file: nothing is lost. Any other tensor (heap
    memory, where dropping pages would zero them) is left alone. Linux only; returns whether it
    released."""
    import mmap

    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    if not any(a <= start and end <= b and _alive(ref) for a, b, ref in _FILE_MAPS):
        return False
    page = mmap.PAGESIZE
    first, last = -(-start // page) * page, end // page * page  # whole pages inside the tensor only
    if last <= first:
        return False
    lib = libc()
    return bool(lib and lib.madvise(first, last - first, MADV_DONTNEED) == 0)


def keep_heap() -> None:
    """Let the step loop reuse its memory: blocks up to 32 MiB come from the heap (glibc otherwise
    maps each large block afresh until it has seen one freed) and the heap's free top is not handed
    back on every free (only past 1 GiB). Each step's tensors then land in the pages the step before
    used, instead of faulting fresh zeroed pages in (the page faults saved: benchmarks/speed-log.md).
    Memory still goes back after
    each request (release_free_memory). A no-op without glibc."""
    lib = libc()
    if lib:
        lib.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        lib.mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def release_free_memory() -> None:
    """Give freed heap memory back to the system (glibc's malloc_trim; a no-op elsewhere)."""
    lib = libc()
    if lib:
        lib.malloc_trim(0)


@contextmanager
def lean_heap():
    """While joining a long text's audio: large arrays get their own memory maps, so that freeing
    one gives its memory back at once (glibc otherwise keeps up to 32 MiB blocks in a fragmented
    heap, and a long text's many chunk-sized arrays would make the process grow with the text).
    Outside, the usual threshold is restored: the step loop reuses heap blocks without page faults."""
    lib = libc()
    if lib:
        lib.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        release_free_memory()
    try:
        yield
    finally:
        if lib:
            lib.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
            release_free_memory()
