"""engine/fast/kernels.py (kernels.c) against the torch ops they replace (narrow.py, int8pack.py),
on every target this CPU runs, and the built library's cache as untrusted state."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from omnivoice_cli.engine.fast import cpu, kernels, narrow
from omnivoice_cli.engine.fast.int8pack import quantize_activations

pytestmark = pytest.mark.skipif(kernels.compiler() is None, reason="no C compiler on this machine")


def _runs(name: str) -> bool:
    """Whether this CPU runs target `name` (kernels.TARGETS)."""
    order = ["baseline", "avx2", "avx512", "avx512-bf16"]
    return cpu.info().x86 and order.index(name) <= order.index(kernels.target())


TARGETS = [t for t in ("avx512-bf16", "avx512", "avx2", "baseline") if _runs(t)] or ["baseline"]


@pytest.fixture(scope="module", params=TARGETS)
def k8(request):
    got = kernels.load(request.param)
    assert got is not None, kernels.why_not(request.param)  # a compiler exists: the build must succeed
    return got


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("half", [127, 63])
def test_quantize_is_quantize_activations_bit_for_bit(k8, half):
    x = torch.randn(37, 300, generator=_gen()) * 5
    x[3, 7] = 40.0  # one large value sets the scale
    codes, scale = k8.quantize(x, half)
    want, want_scale = quantize_activations(x, half)
    assert scale == want_scale and torch.equal(codes, want)
    wide = torch.randn(37, 400, generator=_gen(1))[:, 50:350]  # rows 400 apart
    assert torch.equal(k8.quantize(wide, half)[0], quantize_activations(wide.contiguous(), half)[0])


def test_quantize_reads_bf16_as_its_values(k8):
    x = (torch.randn(21, 256, generator=_gen()) * 3).bfloat16()
    codes, scale = k8.quantize(x, 127)
    want, want_scale = quantize_activations(x.float(), 127)
    assert scale == want_scale and torch.equal(codes, want)


def test_mul_quantize_is_the_product_coded(k8):
    g, u = torch.randn(2, 33, 500, generator=_gen())
    codes, scale = k8.mul_quantize(g, u, 127)
    want, want_scale = quantize_activations(g * u, 127)
    assert scale == want_scale and torch.equal(codes, want)


def test_all_zero_input_codes_the_zero_point(k8):
    codes, scale = k8.quantize(torch.zeros(4, 64), 127)
    assert scale == 1e-30 / 127 and bool((codes == 128).all())


def test_rms_norm_quantize_with_torchs_rms_is_the_torch_ops_bit_for_bit(k8):
    h = torch.randn(53, 1024, generator=_gen()) * 4
    w = torch.rand(1024, generator=_gen(1)) + 0.5
    codes, scale = k8.rms_norm_quantize(h, w, 1e-6, 127)
    want, want_scale = quantize_activations(narrow.lean_rms_norm(h, w, 1e-6), 127)
    assert scale == want_scale and torch.equal(codes, want)


def test_rms_norm_quantize_is_the_norm_coded(k8):
    h = torch.randn(53, 1024, generator=_gen()) * 4
    w = torch.rand(1024, generator=_gen(1)) + 0.5
    codes, scale = k8.rms_norm_quantize(h, w, 1e-6, 127)
    want, want_scale = quantize_activations(narrow.lean_rms_norm(h, w, 1e-6), 127)
    assert abs(scale - want_scale) <= 1e-6 * want_scale  # the sums of squares: another order
    diff = (codes.int() - want.int()).abs()
    assert int(diff.max()) <= 1 and int((diff > 0).sum()) <= codes.numel() // 1000


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norm_rope_is_narrows(k8, dtype):
    n, heads, d = 29, 4, 128
    qkv = torch.randn(n, 3 * heads * d, generator=_gen()) * 2
    x = qkv[:, : heads * d].view(n, heads, d)  # a view into the product, as the layer reads it
    cos_sin = torch.randn(2, n, d, generator=_gen(1))
    weights = narrow.rope_weights(torch.rand(d, generator=_gen(2)) + 0.5)
    got = k8.norm_rope(x, cos_sin, weights, 1e-6, dtype)
    want = narrow.norm_rope(x, narrow.rope_tables(weights, cos_sin), 1e-6, dtype)
    assert got.shape == want.shape and got.dtype == dtype and got.transpose(0, 1).is_contiguous()
    g, w = got.float(), want.float()
    rel = 1e-5 if dtype == torch.float32 else 2**-8  # bf16: one step of its 8 bits, at most
    assert bool(((g - w).abs() <= rel * w.abs() + 1e-5 * float(w.abs().max())).all())


def test_qkv_rows_are_norm_rope_and_vs_rounding_in_each_rows_blocks(k8):
    heads, kv, d, lens = 4, 2, 64, [7, 5, 9]
    n = sum(lens)
    y = torch.randn(n, (heads + 2 * kv) * d, generator=_gen()) * 2
    y[2, -3] = 1e-39  # a denormal v: rounded as torch rounds it, not flushed
    cs = torch.randn(2, n, d, generator=_gen(1))
    qw, kw = (narrow.rope_weights(torch.rand(d, generator=_gen(i)) + 0.5) for i in (2, 3))
    q, k, v = k8.qkv_rows(y, heads, cs, (qw, 1e-6), (kw, 1e-5), lens)
    qh = k8.norm_rope(y[:, : heads * d].view(n, heads, d), cs, qw, 1e-6, torch.bfloat16).transpose(0, 1)
    kh = k8.norm_rope(y[:, heads * d : (heads + kv) * d].view(n, kv, d), cs, kw, 1e-5, torch.bfloat16).transpose(0, 1)
    vh = y[:, (heads + kv) * d :].view(n, kv, d).transpose(0, 1)
    blocks = (kernels.row_blocks(x, m, d, lens) for x, m in ((q, heads), (k, kv), (v, kv)))
    start = 0
    for length, qr, kr, vr in zip(lens, *blocks):
        s = slice(start, start + length)
        assert torch.equal(qr, qh[:, s]) and torch.equal(kr, kh[:, s]) and torch.equal(vr, vh[:, s].bfloat16())
        start += length
    with pytest.raises(ValueError, match="qkv_rows"):
        k8.qkv_rows(y[:, :-1], heads, cs, (qw, 1e-6), (kw, 1e-5), lens)


def test_quantize_rows_is_quantize_of_the_result_in_position_order(k8):
    heads, d, lens = 4, 32, [6, 1, 10]
    o = (torch.randn(sum(lens) * heads * d, generator=_gen()) * 3).bfloat16()
    codes, scale = k8.quantize_rows(o, heads, d, lens, 127)
    rows = [b.transpose(0, 1).reshape(-1, heads * d) for b in kernels.row_blocks(o, heads, d, lens)]
    want, want_scale = k8.quantize(torch.cat(rows), 127)
    assert scale == want_scale and torch.equal(codes, want)


def test_targets_agree():
    """Every target this CPU runs gives the same codes (the norms within their last bit)."""
    outs = []
    h, w = torch.randn(40, 512, generator=_gen()), torch.rand(512, generator=_gen(1)) + 0.5
    for name in TARGETS:
        k = kernels.load(name)
        assert k is not None
        outs.append((k.quantize(h, 127), k.rms_norm_quantize(h, w, 1e-6, 127)))
    for q, r in outs[1:]:
        assert q[1] == outs[0][0][1] and torch.equal(q[0], outs[0][0][0])
        assert int((r[0].int() - outs[0][1][0].int()).abs().max()) <= 1


def test_bad_layouts_are_refused(k8):
    with pytest.raises(ValueError, match="dense rows"):
        k8.quantize(torch.randn(8, 16).t(), 127)
    with pytest.raises(ValueError, match="fp32 or bf16"):
        k8.quantize(torch.randn(4, 8).double(), 127)
    with pytest.raises(ValueError, match="shapes"):
        k8.mul_quantize(torch.randn(4, 8), torch.randn(4, 9), 127)


# ------------------------------------------------------------------------------ the built library


def _fresh_load(folder, env=None) -> subprocess.CompletedProcess:
    """kernels.load() in a new process with its folder at `folder`: prints why_not() or "ok"."""
    code = (
        "from omnivoice_cli.engine.fast import kernels; k = kernels.load(); "
        "print('ok' if k is not None else kernels.why_not())"
    )
    full = {**os.environ, "OMNIVOICE_KERNELS": str(folder), **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)


def _library(folder):
    [lib] = sorted(folder.glob("kernels-*.so"))
    return lib


def test_built_once_then_reused(tmp_path):
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    lib = _library(tmp_path)
    first = lib.stat()
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    again = lib.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # not rebuilt
    assert oct(first.st_mode & 0o022) == "0o0"


def test_a_damaged_library_is_rebuilt(tmp_path):
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    lib = _library(tmp_path)
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    lib.write_bytes(bytes(data))
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    assert lib.read_bytes() != bytes(data)  # replaced by a fresh build


def test_a_link_in_the_librarys_place_is_never_followed(tmp_path):
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    lib = _library(tmp_path)
    theirs = tmp_path / "theirs.so"
    theirs.write_bytes(b"not ours")
    lib.unlink()
    lib.symlink_to(theirs)
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    assert theirs.read_bytes() == b"not ours" and not lib.is_symlink()  # rebuilt beside it, never written through


def test_no_compiler_falls_back_with_the_reason(tmp_path):
    out = _fresh_load(tmp_path, {"CC": str(tmp_path / "no-such-cc"), "PATH": str(tmp_path)})
    assert "no C compiler" in out.stdout
    assert not list(tmp_path.glob("kernels-*.so"))


def test_off_means_off(tmp_path):
    assert "off" in _fresh_load("off").stdout


def test_softmax_is_torchs_in_bf16(k8):
    scores = (torch.randn(3, 40, 297, generator=_gen()) * 6).bfloat16()
    scores[0, 0, :5] = -1e30  # far below the row's max: 0
    want = scores.float().softmax(-1)
    got = k8.softmax_(scores.clone())
    assert got.dtype == torch.bfloat16
    assert bool(((got.float() - want).abs() <= 2**-8 * want + 1e-6).all())  # one bf16 step
    assert float((got.float() == scores.softmax(-1).float()).float().mean()) > 0.999  # torch's own, nearly always
    assert bool((got.float()[0, 0, :5] == 0).all())


def test_softmax_of_long_rows(k8):
    scores = (torch.randn(2, 9000, generator=_gen()) * 3).bfloat16()  # past the kernel's 8192-column buffer
    want = scores.float().softmax(-1)
    got = k8.softmax_(scores.clone()).float()
    assert bool(((got - want).abs() <= 2**-8 * want + 1e-7).all())


def test_norm_rope_of_bf16_rows(k8):
    n, heads, d = 31, 4, 64
    x = (torch.randn(n, 3 * heads * d, generator=_gen()) * 2).bfloat16()[:, : heads * d].view(n, heads, d)
    cos_sin = torch.randn(2, n, d, generator=_gen(1))
    weights = narrow.rope_weights(torch.rand(d, generator=_gen(2)) + 0.5)
    got = k8.norm_rope(x, cos_sin, weights, 1e-6, torch.bfloat16).float()
    want = narrow.norm_rope(x, narrow.rope_tables(weights, cos_sin), 1e-6, torch.float32)  # widened once, fp32
    assert bool(((got - want).abs() <= 2**-8 * want.abs() + 1e-5 * float(want.abs().max())).all())


def test_rms_norm_of_bf16_rows(k8):
    x = (torch.randn(23, 1024, generator=_gen()) * 3).bfloat16()
    w = (torch.rand(1024, generator=_gen(1)) + 0.5).bfloat16()
    got = k8.rms_norm_bf16(x, w, 1e-6).float()
    want = narrow.lean_rms_norm(x.float(), w.float(), 1e-6)
    assert bool(((got - want).abs() <= 2**-8 * want.abs() + 1e-6).all())
    assert float((got == want.bfloat16().float()).float().mean()) > 0.99  # rounded as torch rounds, nearly always


def test_a_prebuilt_library_needs_no_compiler(tmp_path):
    """build_all (a container image's build stage) into a folder: a machine without a compiler loads them."""
    assert set(kernels.build_all(tmp_path)) == set(kernels.TARGETS)
    out = _fresh_load(tmp_path, {"CC": str(tmp_path / "no-such-cc"), "PATH": str(tmp_path)})
    assert out.stdout.strip() == "ok"


def test_status_says_what_info_shows(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_KERNELS", str(tmp_path))
    assert kernels.state_in_words().startswith("to be built for ")  # not built yet: when it will be
    kernels.build_all(tmp_path)
    assert kernels.state_in_words() == f"built for {kernels.target()} ({tmp_path})"
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert kernels.state_in_words().startswith("built for")  # there already: no compiler needed
    for lib in tmp_path.glob("kernels-*.so"):
        lib.unlink()
    assert "no C compiler" in kernels.state_in_words()
    monkeypatch.setenv("OMNIVOICE_KERNELS", "off")
    assert kernels.state_in_words().startswith("off")


def test_only_our_or_roots_unshared_files_are_trusted():
    def st(mode: int, uid: int) -> os.stat_result:
        return os.stat_result((mode, 1, 1, 1, uid, 0, 10, 0, 0, 0))

    reg = 0o100000
    assert kernels._ours(st(reg | 0o755, os.getuid())) and kernels._ours(
        st(reg | 0o755, 0)
    )  # an image's prebuilt: root's
    assert not kernels._ours(st(reg | 0o775, os.getuid()))  # its group may write it
    assert not kernels._ours(st(reg | 0o757, 0))
    assert not kernels._ours(st(0o120777, os.getuid()))  # a link
    assert os.getuid() == 0 or not kernels._ours(st(reg | 0o755, os.getuid() + 1))  # another user's


def test_a_fifo_in_the_librarys_place_is_not_waited_on(tmp_path):
    assert _fresh_load(tmp_path).stdout.strip() == "ok"
    lib = _library(tmp_path)
    lib.unlink()
    os.mkfifo(lib)
    assert _fresh_load(tmp_path).stdout.strip() == "ok"  # not blocked on the FIFO: rebuilt in its place
    assert lib.is_file()
