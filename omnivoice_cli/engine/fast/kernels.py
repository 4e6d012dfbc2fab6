"""kernels.c, built once and called through ctypes: the int8 and bf16 bodies' work between their
products in one or two passes each (fusedpath.py's layer forward uses them).

Built with the C compiler the machine has ($CC, else cc, gcc or clang), for this CPU's target
(AVX-512 with or without BF16, AVX2 or the architecture's baseline: `target()`), into the user's data folder
(`kernels/`, beside the weight cache; $OMNIVOICE_KERNELS names another folder, or `off`), keyed by
the source, the target and the flags: a build costs about a second, once; where a library of the
key is there already (a container image ships them: `build_all`), no compiler is needed.
Read back as our own state, untrusted: a regular file (never a link, a FIFO never waited on) of
our user's or root's (an image's), not writable by others, whose sha256 matches the digest written beside it, opened once and loaded from that
descriptor (what was checked is what is loaded); anything else is rebuilt. Where no compiler
exists or a build fails, `load()` returns None with the reason in `why_not()`, and the body runs
narrow.py's torch ops (the same arithmetic but for q and k's norms' summation order and the
softmax's exponential, a polynomial).

Why not torch.compile: it generates such loops (the issue asked for it first), but a process pays
its tracing and the import of its compiler on every start, warm cache or not (3.5 s measured for
one function: benchmarks/speed-log.md), more than the whole forward pass saves.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import torch

from ..checkpoint import hub
from . import cpu
from .narrow import inv_rms

ENV = "OMNIVOICE_KERNELS"  # a folder for the built library, or "off"
SOURCE = Path(__file__).with_name("kernels.c")
FLAGS = ("-O3", "-fopenmp", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC", "-std=c11")
TARGETS = {  # the instructions a build may use: the names target() gives
    "avx512-bf16": ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512bf16", "-mavx2", "-mfma", "-mf16c"),
    "avx512": ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c"),
    "avx2": ("-mavx2", "-mfma", "-mf16c"),
    "baseline": (),
}
_MAX_LIBRARY = 16 << 20  # bytes of a built library at most (kernels.c's: tens of kB)

_lock = threading.Lock()
_loaded: dict[str, "Kernels | None"] = {}
_why: dict[str, str] = {}


def target(info: cpu.CpuInfo | None = None) -> str:
    """The widest of TARGETS this CPU runs (after the caps): avx512-bf16, avx512, avx2 or baseline."""
    info = info or cpu.info()
    if info.x86 and info.avx512_bf16:
        return "avx512-bf16"
    if info.x86 and info.avx512:
        return "avx512"
    if info.x86 and info.avx2 and "f16c" in info.features:
        return "avx2"
    return "baseline"


def folder() -> Path | None:
    """Where built libraries are kept; None where $OMNIVOICE_KERNELS is `off` (no fused kernels)."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() in ("off", "0", "no", "false"):
        return None
    return Path(env).expanduser() if env else hub.user_home() / "kernels"


def compiler() -> str | None:
    """The C compiler's path: $CC, else cc, gcc or clang on PATH; None where there is none."""
    names = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def build_key(name: str) -> str:
    """32 hex digits naming a build: the source, the target and the flags. Not the compiler: any
    compiler's build of them is the same functions (a library built elsewhere, e.g. in a container
    image's build stage, is used where no compiler is; `python -m omnivoice_cli.engine.fast.kernels`)."""
    h = hashlib.sha256()
    for part in (SOURCE.read_bytes(), name.encode(), " ".join((*FLAGS, *TARGETS[name])).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:32]


def paths(where: Path, name: str) -> tuple[Path, Path]:
    """The library of target `name` in `where` and the file holding its sha256."""
    key = build_key(name)
    return where / f"kernels-{key}.so", where / f"kernels-{key}.sha256"


def state_in_words(name: str | None = None) -> str:
    """In words, for `omnivoice info`: whether the kernels of target `name` (default this CPU's) are
    built, will be, or cannot be (and why). Builds nothing."""
    name = name or target()
    where = folder()
    if where is None:
        return f"off (${ENV})"
    fd = _open_verified(*paths(where, name))
    if fd is not None:
        os.close(fd)
        return f"built for {name} ({where})"
    cc = compiler()
    if cc is None:
        return "not built: no C compiler (cc, gcc or clang; or $CC): the int8 and bf16 bodies run torch's ops"
    return f"to be built for {name} at the first int8 or bf16 load ({Path(cc).name}, about a second)"


def _digest_of(fd: int) -> str | None:
    """sha256 of an open file's bytes, read bounded; None past _MAX_LIBRARY."""
    h, total = hashlib.sha256(), 0
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        total += len(chunk)
        if total > _MAX_LIBRARY:
            return None
        h.update(chunk)
    return h.hexdigest()


def _ours(st: os.stat_result) -> bool:
    """A regular file of this user's (or root's: a container image's prebuilt ones) that no one else
    may write."""
    mine = not hasattr(os, "getuid") or st.st_uid in (os.getuid(), 0)
    return stat.S_ISREG(st.st_mode) and mine and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read_digest(path: Path) -> str | None:
    """The digest file's 64 hex digits (bounded read, never through a link), or None."""
    try:
        fd = os.open(path, hub.READ_FLAGS)
    except OSError:
        return None
    try:
        if not _ours(os.fstat(fd)):
            return None
        text = os.read(fd, 128).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def _open_verified(lib: Path, digest: Path) -> int | None:
    """An open descriptor of `lib` when it is ours and matches its digest, else None."""
    want = _read_digest(digest)
    if want is None:
        return None
    try:
        fd = os.open(lib, hub.READ_FLAGS)
    except OSError:
        return None
    if _ours(os.fstat(fd)) and _digest_of(fd) == want:
        return fd
    os.close(fd)
    return None


def _write_private(path: Path, data: bytes) -> None:
    """`data` into `path` through a fresh temporary file renamed over it (never writing through a link)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def build(cc: str, name: str, out: Path) -> None:
    """Compile kernels.c for target `name` into `out` (through a temporary file renamed over it)."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [cc, *FLAGS, *TARGETS[name], str(SOURCE), "-o", str(tmp), "-lm"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise OSError(f"{Path(cc).name} failed: {(done.stderr or done.stdout).strip()[-400:]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()


def load(name: str | None = None) -> "Kernels | None":
    """The kernels for target `name` (default this CPU's), built the first time; None where they
    cannot be had here (why_not says why). Once per process and target."""
    name = name or target()
    with _lock:
        if name not in _loaded:
            _loaded[name] = _load(name)
        return _loaded[name]


def why_not(name: str | None = None) -> str | None:
    """Why load(name) gave None (None where it did not, or was not asked)."""
    return _why.get(name or target())


def _load(name: str) -> "Kernels | None":
    where = folder()
    if where is None:
        _why[name] = f"${ENV} is off"
        return None
    try:
        lib, digest = paths(where, name)
        fd = _open_verified(lib, digest)
        if fd is None:
            cc = compiler()
            if cc is None:
                _why[name] = "no C compiler (cc, gcc or clang; or $CC)"
                return None
            where.mkdir(parents=True, exist_ok=True)
            fd = _build_verified(cc, name, lib, digest)
        try:
            handle = ctypes.CDLL(f"/proc/self/fd/{fd}" if sys.platform == "linux" else str(lib))
        finally:
            os.close(fd)
        return Kernels(handle)
    except (OSError, subprocess.SubprocessError, AttributeError) as e:
        _why[name] = f"the fused kernels could not be built or loaded: {e}"
        return None


def _build_verified(cc: str, name: str, lib: Path, digest: Path) -> int:
    """Build target `name` into `lib`, write its digest; an open descriptor of what was built."""
    build(cc, name, lib)
    fd = os.open(lib, hub.READ_FLAGS)
    digest_now = _digest_of(fd)
    if digest_now is None or not _ours(os.fstat(fd)):
        os.close(fd)
        raise OSError(f"the built library {lib} is not a plain file of ours under {_MAX_LIBRARY} bytes")
    _write_private(digest, digest_now.encode())
    return fd


def build_all(where: Path) -> list[str]:
    """Every target's library into `where` (a container image's build stage: its runs need no
    compiler); returns the targets built. Fails where there is no compiler."""
    cc = compiler()
    if cc is None:
        raise OSError("no C compiler (cc, gcc or clang; or $CC)")
    where.mkdir(parents=True, exist_ok=True)
    for name in TARGETS:
        os.close(_build_verified(cc, name, *paths(where, name)))
    return list(TARGETS)


_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_F = ctypes.c_float
_INT = ctypes.c_int
_DP = ctypes.POINTER(ctypes.c_double)
_WIDTHS = (torch.float32, torch.bfloat16)


def _rows(x: torch.Tensor) -> tuple[int, int, int]:
    """x [n, d] with unit stride along d -> (n, d, the rows' stride)."""
    if x.dim() != 2 or x.stride(1) != 1 or x.device.type != "cpu":
        raise ValueError(f"kernels: a CPU matrix with dense rows expected, not {tuple(x.shape)} strides {x.stride()}")
    return x.shape[0], x.shape[1], x.stride(0)


class Kernels:
    """kernels.c's functions on tensors. Each returns new tensors; its inputs are only read.
    The codes are int8pack.quantize_activations': (uint8 [n, d], scale)."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        lib.ov_version.restype = _INT
        lib.ov_rms_norm_quantize.argtypes = [_P, _I64, _I64, _I64, _P, _INT, _P, _P, _DP, _INT]
        lib.ov_quantize.argtypes = [_P, _INT, _I64, _I64, _I64, _INT, _P, _DP, _INT]
        lib.ov_mul_quantize.argtypes = [_P, _I64, _P, _I64, _I64, _I64, _INT, _P, _DP, _INT]
        lib.ov_norm_rope.argtypes = [_P, _INT, _I64, _I64, _I64, _I64, _P, _P, _P, _F, _P, _INT, _INT]
        lib.ov_rms_norm_bf16.argtypes = [_P, _I64, _I64, _I64, _P, _F, _P, _INT]
        lib.ov_softmax_bf16.argtypes = [_P, _I64, _I64, _INT]
        lib.ov_qkv_rows.argtypes = [_P, *[_I64] * 5, _P, _P, _P, _F, _P, _P, _F, _P, _I64, _P, _P, _P, _INT]
        lib.ov_quantize_rows.argtypes = [_P, _I64, _I64, _I64, _P, _I64, _INT, _P, _DP, _INT]
        kernels = ("rms_norm_quantize", "quantize", "mul_quantize", "norm_rope", "softmax_bf16", "rms_norm_bf16")
        for f in (*kernels, "qkv_rows", "quantize_rows"):
            getattr(lib, f"ov_{f}").restype = None

    def rms_norm_quantize(
        self, x: torch.Tensor, weight: torch.Tensor, eps: float, half: int
    ) -> tuple[torch.Tensor, float]:
        """RMSNorm(x) * weight, coded: x [n, d] fp32 -> (codes uint8 [n, d], scale), the codes of
        int8pack.quantize_activations(narrow.lean_rms_norm(x)) bit for bit: the rows' 1 / rms by
        torch's own reduction (narrow.inv_rms: one read of x), the scaling and the codes here."""
        n, d, ld = _rows(x)
        w = _fp32_vector(weight, d)
        inv = inv_rms(_fp32(x), eps).reshape(n).contiguous()
        codes = torch.empty(n, d, dtype=torch.uint8)
        scale = ctypes.c_double()
        self.lib.ov_rms_norm_quantize(
            x.data_ptr(), n, d, ld, w.data_ptr(), half, codes.data_ptr(), inv.data_ptr(), ctypes.byref(scale),
            torch.get_num_threads(),
        )  # fmt: skip
        return codes, scale.value

    def quantize(self, x: torch.Tensor, half: int) -> tuple[torch.Tensor, float]:
        """x [n, d] fp32 or bf16 -> (codes uint8 [n, d], scale): int8pack.quantize_activations, bit for bit."""
        n, d, ld = _rows(x)
        if x.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"kernels.quantize: fp32 or bf16, not {x.dtype}")
        codes = torch.empty(n, d, dtype=torch.uint8)
        scale = ctypes.c_double()
        self.lib.ov_quantize(
            x.data_ptr(),
            int(x.dtype == torch.bfloat16),
            n,
            d,
            ld,
            half,
            codes.data_ptr(),
            ctypes.byref(scale),
            torch.get_num_threads(),
        )
        return codes, scale.value

    def mul_quantize(self, g: torch.Tensor, u: torch.Tensor, half: int) -> tuple[torch.Tensor, float]:
        """g * u coded: g, u [n, d] fp32 -> (codes uint8 [n, d], scale), without the product's tensor."""
        n, d, ldg = _rows(_fp32(g))
        if tuple(u.shape) != (n, d):
            raise ValueError(f"kernels.mul_quantize: shapes {tuple(g.shape)} and {tuple(u.shape)} differ")
        _, _, ldu = _rows(_fp32(u))
        codes = torch.empty(n, d, dtype=torch.uint8)
        scale = ctypes.c_double()
        self.lib.ov_mul_quantize(
            g.data_ptr(),
            ldg,
            u.data_ptr(),
            ldu,
            n,
            d,
            half,
            codes.data_ptr(),
            ctypes.byref(scale),
            torch.get_num_threads(),
        )
        return codes, scale.value

    def norm_rope(
        self, x: torch.Tensor, cos_sin: torch.Tensor, weights: torch.Tensor, eps: float, dtype: torch.dtype
    ) -> torch.Tensor:
        """narrow.norm_rope in one pass: x [n, heads, d] fp32 or bf16 (heads dense, rows strided),
        cos_sin [2, n, d] fp32, weights [2, 1, d] (narrow.rope_weights) -> [n, heads, d] in `dtype`
        (fp32 or bf16), a transposed view of a dense [heads, n, d]."""
        n, heads, d = x.shape
        if x.dtype not in _WIDTHS or x.stride(2) != 1 or x.stride(1) != d or d > 512 or d % 2:
            raise ValueError(
                f"kernels.norm_rope: fp32 or bf16 [n, heads, d] with dense heads, d even <= 512, not {x.dtype} strides {x.stride()}"
            )
        if dtype not in _WIDTHS:
            raise ValueError(f"kernels.norm_rope: out fp32 or bf16, not {dtype}")
        cs = _fp32(cos_sin).contiguous()
        if tuple(cs.shape) != (2, n, d):
            raise ValueError(f"kernels.norm_rope: cos_sin [2, {n}, {d}] expected, not {tuple(cs.shape)}")
        w = _fp32(weights).reshape(2, d).contiguous()
        out = torch.empty(heads, n, d, dtype=dtype)
        self.lib.ov_norm_rope(
            x.data_ptr(), int(x.dtype == torch.bfloat16), n, heads, d, x.stride(0), cs.data_ptr(), w[0].data_ptr(),
            w[1].data_ptr(), eps, out.data_ptr(), int(dtype == torch.bfloat16), torch.get_num_threads(),
        )  # fmt: skip
        return out.transpose(0, 1)

    def rms_norm_bf16(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """narrow.lean_rms_norm of bf16 rows in one pass: x [n, d] bf16 -> [n, d] bf16 (d <= 8192)."""
        n, d, ld = _rows(x)
        if x.dtype != torch.bfloat16 or d > 8192:
            raise ValueError(f"kernels.rms_norm_bf16: bf16 rows of at most 8192, not {x.dtype} [{n}, {d}]")
        w = _fp32_vector(weight, d)
        out = torch.empty(n, d, dtype=torch.bfloat16)
        self.lib.ov_rms_norm_bf16(x.data_ptr(), n, d, ld, w.data_ptr(), eps, out.data_ptr(), torch.get_num_threads())
        return out

    def qkv_rows(
        self, y: torch.Tensor, heads: int, cos_sin: torch.Tensor, q_norm: tuple[torch.Tensor, float],
        k_norm: tuple[torch.Tensor, float], seq_lens: list[int],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """The attention's inputs in each packed row's own dense blocks, from the qkv product in
        one pass: y [n, (heads + 2 kv) * d] fp32 (q | k | v, dense rows), cos_sin [2, n, d], the q
        and k norms' (narrow.rope_weights [2, 1, d], eps) -> q, k, v flat bf16 (row_blocks views
        each row's [heads or kv, L, d]): q and k as norm_rope's, v rounded as torch rounds."""
        n, width, ld = _rows(_fp32(y))
        d = int(cos_sin.shape[-1])
        kv = (width // d - heads) // 2
        if d > 512 or d % 2 or (heads + 2 * kv) * d != width or sum(seq_lens) != n:
            raise ValueError(f"kernels.qkv_rows: [{n}, (heads + 2 kv) * d] with d even <= 512, not {tuple(y.shape)}")
        cs = _fp32(cos_sin).contiguous()
        (qw, qe), (kw, ke) = q_norm, k_norm
        qw, kw = _fp32(qw).reshape(2, d).contiguous(), _fp32(kw).reshape(2, d).contiguous()
        starts = _starts(seq_lens)
        q, k, v = (torch.empty(n * m * d, dtype=torch.bfloat16) for m in (heads, kv, kv))
        self.lib.ov_qkv_rows(
            y.data_ptr(), n, ld, heads, kv, d, cs.data_ptr(), qw[0].data_ptr(), qw[1].data_ptr(), qe, kw[0].data_ptr(),
            kw[1].data_ptr(), ke, starts.data_ptr(), len(seq_lens), q.data_ptr(), k.data_ptr(), v.data_ptr(),
            torch.get_num_threads(),
        )  # fmt: skip
        return q, k, v

    def quantize_rows(
        self, o: torch.Tensor, heads: int, d: int, seq_lens: list[int], half: int
    ) -> tuple[torch.Tensor, float]:
        """The attention's result coded for o_proj without laying it out by position first: o
        flat bf16 in qkv_rows' q blocks (row_blocks) -> (codes uint8 [n, heads * d], scale), as
        quantize's of the result [n, heads * d] bit for bit."""
        n = sum(seq_lens)
        if o.dtype != torch.bfloat16 or not o.is_contiguous() or o.numel() != n * heads * d:
            raise ValueError(
                f"kernels.quantize_rows: dense bf16 of {n * heads * d} values, not {o.dtype} {tuple(o.shape)}"
            )
        starts = _starts(seq_lens)
        codes = torch.empty(n, heads * d, dtype=torch.uint8)
        scale = ctypes.c_double()
        self.lib.ov_quantize_rows(
            o.data_ptr(), n, heads, d, starts.data_ptr(), len(seq_lens), half, codes.data_ptr(), ctypes.byref(scale),
            torch.get_num_threads(),
        )  # fmt: skip
        return codes, scale.value

    def softmax_(self, x: torch.Tensor) -> torch.Tensor:
        """x.softmax(-1) into x itself: x bf16, dense (computed in fp32, rounded once; the
        exponentials by a polynomial within 3e-6 of exp's)."""
        if x.dtype != torch.bfloat16 or not x.is_contiguous() or x.device.type != "cpu":
            raise ValueError(f"kernels.softmax_: a dense CPU bf16 tensor expected, not {x.dtype} strides {x.stride()}")
        s = x.shape[-1]
        self.lib.ov_softmax_bf16(x.data_ptr(), x.numel() // max(s, 1), s, torch.get_num_threads())
        return x


def _starts(seq_lens: list[int]) -> torch.Tensor:
    """The packed rows' first positions and then N (int64 [rows + 1]), as the row kernels read them."""
    return torch.tensor([0, *itertools.accumulate(seq_lens)], dtype=torch.int64)


def row_blocks(flat: torch.Tensor, heads: int, d: int, seq_lens: list[int]) -> list[torch.Tensor]:
    """Each packed row's [heads, L, d] block of a flat buffer laid out as Kernels.qkv_rows' (views)."""
    out, start = [], 0
    for length in seq_lens:
        out.append(flat[start * heads * d : (start + length) * heads * d].view(heads, length, d))
        start += length
    return out


def _fp32(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.float32 or x.device.type != "cpu":
        raise ValueError(f"kernels: a CPU fp32 tensor expected, not {x.dtype} on {x.device}")
    return x


def _fp32_vector(w: torch.Tensor, d: int) -> torch.Tensor:
    w = w.detach().to(torch.float32).contiguous()
    if tuple(w.shape) != (d,):
        raise ValueError(f"kernels: a weight of {d} expected, not {tuple(w.shape)}")
    return w


if __name__ == "__main__":  # python -m omnivoice_cli.engine.fast.kernels [FOLDER]: every target, prebuilt
    built = build_all(Path(sys.argv[1]) if len(sys.argv) > 1 else folder() or hub.user_home() / "kernels")
    print("built:", " ".join(built))
