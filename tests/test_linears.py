"""The CPU's narrow paths: bf16 and int8 linear layers against a float64 product, fused projections,
the grouped bf16 attention, and the engine's bf16 / int8 bodies (structure, closeness to fp32,
packed batches, what it says on CPUs and devices that do not fit)."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from omnivoice_cli.engine import loading
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.fast import cpu, fusedpath, kernels, linears, narrow
from omnivoice_cli.engine.fast.int8pack import int8_weight, quantize_activations
from omnivoice_cli.engine.fast.linears import (
    BF16Linear,
    FbgemmInt8Linear,
    Fused,
    FusedPart,
    Int8Linear,
    LegacyInt8Linear,
)
from omnivoice_cli.engine.fast.narrow import (
    LeanRMSNorm,
    grouped_attention,
    lean_rms_norm,
    norm_rope,
    rope_tables,
    rope_weights,
)
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.model.backbone import (
    RMSNorm,
    apply_rope,
    rms_norm,
    rope_cos_sin,
    rope_inv_freq,
)
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request

TINY = Path(__file__).parent / "fixtures" / "tiny" / "ckpt"
# oneDNN's bf16 kernels where this CPU runs them; elsewhere (AVX2 only) the engine loads float32
# instead, tested on every machine with the class forced (test_cpu.py)
needs_onednn_bf16 = pytest.mark.skipif(
    not (linears.onednn_linear_available() and cpu.bf16_runs()),
    reason=f"oneDNN cannot run bf16 on this CPU ({cpu.info().describe()}): the float32 fallback is tested instead (test_cpu.py)",
)
needs_onednn_int8 = pytest.mark.skipif(
    not linears.onednn_int8_available(), reason="this torch build has no oneDNN int8 linear"
)
needs_fbgemm = pytest.mark.skipif(not linears.fbgemm_available(), reason="this torch build has no FBGEMM")
FBGEMM = pytest.param(FbgemmInt8Linear, marks=needs_fbgemm)
BF16_EPS = torch.finfo(
    torch.bfloat16
).eps  # 2**-7: a rounding to bf16 moves a value by at most half of this, relatively


def _case(rows: int, n_in: int, n_out: int, bias: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, n_in, generator=g)
    w = torch.randn(n_out, n_in, generator=g) * torch.linspace(0.05, 2, n_out)[:, None]  # channels of unequal size
    b = torch.randn(n_out, generator=g) if bias else None
    return x, w, b


def _product64(x, w, b):
    y = x.double() @ w.double().T
    return y if b is None else y + b.double()


# ------------------------------------------------------------------------------------------ bf16


@needs_onednn_bf16
@pytest.mark.parametrize("rows,n_in,n_out,bias", [(1, 64, 48, True), (7, 96, 40, False), (130, 256, 72, True)])
def test_bf16_linear_against_a_float64_product(rows, n_in, n_out, bias):
    x, w, b = _case(rows, n_in, n_out, bias)
    y = BF16Linear(w, b)(x.to(torch.bfloat16))
    assert y.dtype == torch.bfloat16 and y.shape == (rows, n_out)
    # on the bf16-rounded inputs the product is exact up to fp32 accumulation and one bf16 rounding of the output
    bf = lambda t: None if t is None else t.to(torch.bfloat16)  # noqa: E731
    exact = _product64(bf(x), bf(w), bf(b))
    scale = x.abs().double() @ w.abs().double().T + (0 if b is None else b.abs().double())  # sum |x_i w_i| + |b|
    err = (y.double() - exact).abs()
    assert (err <= BF16_EPS / 2 * exact.abs() + 1e-5 * scale).all()
    # against the true product: the inputs' rounding adds at most about one bf16 epsilon of |x||w|
    err_true = (y.double() - _product64(x, w, b)).abs()
    assert (err_true <= 1.5 * BF16_EPS * scale).all()
    assert err_true.max() > 0  # it is bf16 arithmetic, not fp32


@needs_onednn_bf16
def test_bf16_linear_rows_do_not_depend_on_their_neighbours():
    """A packed batch gives each request what it gets alone, bit for bit."""
    x, w, _ = _case(300, 128, 96, False)
    layer = BF16Linear(w)
    xb = x.to(torch.bfloat16)
    full = layer(xb)
    for a, b in [(5, 231), (100, 299), (0, 1), (7, 8)]:
        assert torch.equal(layer(xb[a:b]), full[a:b])


# ------------------------------------------------------------------------------------------ int8


@needs_onednn_int8
@pytest.mark.parametrize("rows,n_in,n_out,bias", [(1, 64, 48, True), (9, 96, 40, False), (130, 256, 72, True)])
def test_int8_linear_is_the_float64_product_of_its_codes(rows, n_in, n_out, bias):
    x, w, b = _case(rows, n_in, n_out, bias, seed=2)
    y = Int8Linear(w, b)(x)
    codes, s_w = int8_weight(w)
    xq, s_x = quantize_activations(x, Int8Linear.half)
    assert xq.dtype == torch.uint8 and 1 <= xq.min() and xq.max() <= 2 * Int8Linear.half + 1
    dequant = (xq.double() - Int8Linear.half - 1) * s_x
    assert (dequant - x.double()).abs().max() <= s_x / 2 * (1 + 1e-6)  # each input on its nearest step
    want = _product64(dequant, codes.double() * s_w.double()[:, None], b)
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


@pytest.mark.parametrize("kind", [pytest.param(Int8Linear, marks=needs_onednn_int8), LegacyInt8Linear, FBGEMM])
@pytest.mark.parametrize("rows,n_in,n_out,bias", [(1, 64, 48, True), (9, 96, 40, False), (130, 256, 72, True)])
def test_int8_linear_against_a_float64_product(kind, rows, n_in, n_out, bias):
    x, w, b = _case(rows, n_in, n_out, bias, seed=1)
    y = kind(w, b)(x)
    assert y.dtype == torch.float32 and y.shape == (rows, n_out)
    want = _product64(x, w, b)
    # weights: per output channel, |dw| <= s_w / 2; inputs: per tensor on 7 bits, |dx| <= s_x / 2
    _, s_w = int8_weight(w)
    # (legacy: 7 bits over [min, max] with a nudged zero point, 1% margin; oneDNN: max|x| / half)
    s_x = (x.max().clamp_min(0) - x.min().clamp_max(0)).item() / 127 * 1.01
    if kind is Int8Linear:
        s_x = x.abs().max().item() / Int8Linear.half
    dw = s_w.double()[None, :] / 2  # [1, out]
    from_x = s_x / 2 * w.abs().double().sum(1)[None, :]  # sum_i |dx_i| |w_i|
    from_w = dw * x.abs().double().sum(1)[:, None]  # sum_i |x_i| |dw_i|
    bound = from_x + from_w + n_in * s_x / 2 * dw + 1e-5 * (want.abs() + 1)
    err = (y.double() - want).abs()
    assert (err <= bound).all()
    rel = (err.norm() / want.norm()).item()
    assert 0 < rel < 0.03  # quantised, and close


# ----------------------------------------------------------------------------------------- fused


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(Int8Linear, marks=needs_onednn_int8),
        LegacyInt8Linear,
        FBGEMM,
        pytest.param(BF16Linear, marks=needs_onednn_bf16),
    ],
)
def test_fused_projections_equal_the_separate_layers(kind):
    torch.manual_seed(0)
    parts = [nn.Linear(96, n, bias=True) for n in (64, 32, 48)]
    x = torch.randn(300, 96)
    xin = x.to(torch.bfloat16) if kind is BF16Linear else x
    fused = Fused(kind, parts)
    outs = fused(xin)
    assert [o.shape[1] for o in outs] == [64, 32, 48]
    for part, out in zip(parts, outs):
        assert torch.equal(out, kind(part.weight, part.bias)(xin))  # same inputs, same quantisation, same sums
    for i, out in enumerate(outs):
        assert torch.equal(FusedPart(fused, i)(xin), out)  # what stands in the module tree computes its part


# ------------------------------------------------------------------------------------- attention


@pytest.mark.parametrize("heads,kv", [(4, 2), (4, 4), (6, 2)])
def test_grouped_attention_is_attention(heads, kv):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(n, 37, 16, generator=g, dtype=torch.float64) for n in (heads, kv, kv))
    want = F.scaled_dot_product_attention(q[None], k[None], v[None], enable_gqa=heads != kv)[0]
    got = grouped_attention(q, k, v, torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    got16 = grouped_attention(q.float(), k.float(), v.float(), torch.bfloat16)
    assert got16.dtype == torch.bfloat16
    assert ((got16.double() - want).norm() / want.norm()).item() < 2e-2


# ------------------------------------------------------------------------------- narrow forward


def narrow_installed(model) -> bool:
    """narrow.py's layer forward, or fusedpath.py's (the int8 one with its kernels fused)."""
    return model.layer_path == narrow.NARROW or fusedpath.installed(model)


def _rms64(x, w, eps):
    x = x.double()
    return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt() * w.double()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_lean_rms_norm_against_float64(dtype):
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(33, 64, generator=g) * 3).to(dtype)
    w = torch.randn(64, generator=g).to(dtype)
    got = lean_rms_norm(x, w, 1e-6)
    assert got.dtype == dtype and got.is_contiguous()
    # bf16: computed in fp32, rounded once (half a bf16 step at most, relatively)
    tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 0.51 * BF16_EPS}[dtype]
    torch.testing.assert_close(got.double(), _rms64(x, w, 1e-6), rtol=tol, atol=tol)
    if dtype == torch.float32:  # the engine's fp32 RMSNorm, to fp32 rounding
        torch.testing.assert_close(got, rms_norm(x, w, 1e-6), rtol=1e-6, atol=1e-6)
    view = x.view(33, 4, 16)[:, 1:3]  # a strided view, as q and k are of the fused product
    torch.testing.assert_close(
        lean_rms_norm(view, w[:16], 1e-6).double(), _rms64(view, w[:16], 1e-6), rtol=tol, atol=tol
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norm_rope_is_rope_of_the_norm(dtype):
    g = torch.Generator().manual_seed(5)
    joint = torch.randn(21, 3 * 32, generator=g, dtype=torch.float64)
    x = joint[:, 32:].reshape(21, 4, 16)[:, :2]  # [N, heads, D], a view
    norm = RMSNorm(16, 1e-6).double().requires_grad_(False)
    norm.weight.data = torch.randn(16, generator=g, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(21), rope_inv_freq(16, 1e4), torch.float64)
    want = apply_rope(norm(x).transpose(0, 1), cos, sin).transpose(0, 1)  # the reference's arithmetic, float64
    got = norm_rope(x, rope_tables(rope_weights(norm.weight), torch.stack([cos, sin])), norm.eps, dtype)
    assert got.dtype == dtype and got.shape == x.shape
    assert got.transpose(0, 1).is_contiguous()  # head-major: what the attention's products read
    tol = 1e-6 if dtype == torch.float32 else 0.51 * BF16_EPS  # bf16: rounded once, at the end
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)


def _norm_rope_of_a_dense_copy(x, tables, eps, dtype):
    """norm_rope's arithmetic on a dense head-major fp32 copy of x (what it computed before reading
    the int8 path's fp32 product in place)."""
    y = x.transpose(0, 1).contiguous()
    inv = torch.linalg.vector_norm(y, dim=-1, keepdim=True).square_().div_(y.shape[-1]).add_(eps).rsqrt_()
    half = y.shape[-1] // 2
    z = y * tables[0]
    z[..., :half].addcmul_(y[..., half:], tables[1][:, :half])
    z[..., half:].addcmul_(y[..., :half], tables[1][:, half:])
    return z.mul_(inv).to(dtype).transpose(0, 1)


@pytest.mark.parametrize("n", [1, 37, 297])
def test_norm_rope_of_fp32_in_place_is_bit_for_bit_a_dense_copys(n):
    """q and k read where they lie in the fused product: the same bits as worked on a dense copy."""
    g = torch.Generator().manual_seed(9)
    heads, kv, d = 16, 8, 128  # the full-size body's
    joint = torch.randn(n, (heads + 2 * kv) * d, generator=g) * 3  # q, k, v side by side
    q, k = joint[:, : heads * d].view(n, heads, d), joint[:, heads * d : (heads + kv) * d].view(n, kv, d)
    cos_sin = torch.stack(rope_cos_sin(torch.arange(n), rope_inv_freq(d, 1e4), torch.float32))
    for x in (q, k):
        tables = rope_tables(rope_weights(torch.randn(d, generator=g)), cos_sin)
        for dtype in (torch.float32, torch.bfloat16):
            got = norm_rope(x, tables, 1e-6, dtype)
            assert torch.equal(got, _norm_rope_of_a_dense_copy(x, tables, 1e-6, dtype))
            assert got.transpose(0, 1).is_contiguous()


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(Int8Linear, marks=needs_onednn_int8),
        LegacyInt8Linear,
        FBGEMM,
        pytest.param(BF16Linear, marks=needs_onednn_bf16),
    ],
)
def test_fused_epilogues_are_the_plain_products(kind):
    """add: x W^T + other; gated: silu(x Wg^T) * x Wu^T; as the kernel's own plain product gives."""
    x, w, _ = _case(40, 64, 48, False, seed=6)
    _, w2, _ = _case(40, 64, 48, False, seed=7)
    dt = torch.bfloat16 if kind is BF16Linear else torch.float32
    x, other = x.to(dt), torch.randn(40, 48).to(dt)
    a, b = kind(w), kind(w2)
    tol = 2 * BF16_EPS if dt == torch.bfloat16 else 1e-5
    torch.testing.assert_close(a.add(x, other).double(), (a(x).double() + other.double()), rtol=tol, atol=tol * 4)
    want = F.silu(a(x).double()) * b(x).double()
    torch.testing.assert_close(kind.gated(a, b, x).double(), want, rtol=tol * 2, atol=tol * 4)


# ---------------------------------------------------------------------------------------- engine


def _step0_logits(engine) -> torch.Tensor:
    from omnivoice_cli.engine.model.generation import pack

    job = engine.prepare(Request(text="Hello there, how are you?", lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    with torch.inference_mode():
        return engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])


@pytest.fixture(scope="module")
def fp32_logits():
    return _step0_logits(Engine.load(str(TINY), Hardware(device="cpu")))


@pytest.mark.slow
@needs_onednn_bf16
def test_bf16_engine_converts_the_body_and_keeps_the_text_table(fp32_logits):
    engine = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"))
    m = engine.model
    layer = m.llm.layers[0]
    assert isinstance(layer.self_attn.fused_qkv, Fused) and type(layer.self_attn.q_proj) is FusedPart
    assert {type(getattr(layer.mlp, n)) for n in ("gate_proj", "up_proj", "down_proj")} == {BF16Linear}
    assert type(layer.self_attn.o_proj) is BF16Linear and type(m.audio_heads) is BF16Linear
    assert layer.self_attn.math_dtype == torch.bfloat16 and narrow_installed(m)
    fused = fusedpath.installed(m)
    assert fused == (kernels.load() is not None)  # the norms, RoPE and softmax in kernels where they build
    norm = fusedpath.KernelRMSNorm if fused else LeanRMSNorm
    assert type(layer.input_layernorm) is norm and type(m.llm.norm) is norm
    assert layer.input_layernorm.weight.dtype == torch.bfloat16 and m.audio_embeddings.weight.dtype == torch.bfloat16
    assert m.llm.embed_tokens.weight.dtype == torch.float32  # a view of the file: a step reads a few rows
    assert m.audio_heads.weight.device.type == "cpu"  # callers read the heads' device
    logits = _step0_logits(engine)
    assert logits.dtype == torch.float32
    rel = ((logits - fp32_logits).norm() / fp32_logits.norm()).item()
    assert 0 < rel < 0.05


@pytest.mark.slow
def test_int8_engine_fuses_and_stays_close(fp32_logits):
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    layer = engine.model.llm.layers[0]
    kind = linears.int8_kind()  # the CPU class's kernel (cpu.CHOICES): FBGEMM's on AVX2, else oneDNN's or torch's
    assert kind in (Int8Linear, FbgemmInt8Linear, LegacyInt8Linear)
    assert kind is not FbgemmInt8Linear or cpu.choice().int8 == "fbgemm"
    assert type(layer.self_attn.fused_qkv.linear) is kind and type(layer.mlp.down_proj) is kind
    assert narrow_installed(engine.model)
    bf16 = linears.use_bf16_heads()  # where the CPU has bf16 natively (cpu.py)
    assert bf16 == (cpu.has_native_bf16() and cpu.bf16_runs() and linears.onednn_linear_available())
    assert type(engine.model.audio_heads) is (BF16Linear if bf16 else linears.OneDNNLinear)
    assert layer.self_attn.math_dtype == (torch.bfloat16 if bf16 else None)
    fused = fusedpath.installed(engine.model)
    assert fused == (kind is Int8Linear and kernels.load() is not None)  # its kernels where they build
    # what o_proj's quantisation reads: fp32 (narrow.py), or the attention's own dtype (the kernels read bf16)
    assert layer.self_attn.out_dtype == (layer.self_attn.math_dtype or torch.float32 if fused else torch.float32)
    rel = ((_step0_logits(engine) - fp32_logits).norm() / fp32_logits.norm()).item()
    assert 0 < rel < 0.1


@needs_fbgemm
def test_fbgemm_is_fbgemm_whatever_the_engine(monkeypatch):
    """FbgemmInt8Linear packs for FBGEMM even where torch's default engine ("x86") would pack for
    oneDNN, and leaves the engine as it was; its products are the ones of the layer packed under
    fbgemm itself (under "x86" on a VNNI CPU they would not be: oneDNN quantises the inputs on 8 bits)."""
    x, w, b = _case(33, 128, 64, True, seed=8)
    was = torch.backends.quantized.engine
    layer = FbgemmInt8Linear(w, b)
    assert torch.backends.quantized.engine == was
    monkeypatch.setattr(torch.backends.quantized, "engine", "fbgemm")
    assert torch.equal(layer(x), LegacyInt8Linear(w, b)(x))  # the same layer, packed under fbgemm itself


@pytest.mark.slow
@needs_fbgemm
def test_int8_engine_on_an_avx2_cpu_runs_fbgemm_and_stays_close(monkeypatch, fp32_logits):
    """The avx2 class's int8 kernel (cpu.CHOICES): FBGEMM's, within int8's fidelity of fp32."""
    monkeypatch.setattr(cpu, "_INFO", cpu.detect({"avx", "avx2", "fma", "f16c"}, "x86_64", env={}))
    assert cpu.choice().int8 == "fbgemm"
    was = torch.backends.quantized.engine
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    assert torch.backends.quantized.engine == was  # packed two layers at a time, the engine switched under a lock
    layer = engine.model.llm.layers[0]
    assert type(layer.self_attn.fused_qkv.linear) is FbgemmInt8Linear and type(layer.mlp.down_proj) is FbgemmInt8Linear
    assert type(layer.self_attn.o_proj) is FbgemmInt8Linear and narrow_installed(engine.model)
    assert type(engine.model.audio_heads) is not BF16Linear  # no native bf16 there
    rel = ((_step0_logits(engine) - fp32_logits).norm() / fp32_logits.norm()).item()
    assert 0 < rel < 0.1


@pytest.mark.slow
def test_int8_without_onednn_uses_torchs_quantised_ops(monkeypatch, fp32_logits):
    monkeypatch.setattr(linears, "_int8_ok", False)  # as if the probe had failed
    monkeypatch.setattr(linears, "fbgemm_available", lambda: False)  # and no FBGEMM (the AVX2 class's choice)
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    assert type(engine.model.llm.layers[0].mlp.down_proj) is LegacyInt8Linear
    rel = ((_step0_logits(engine) - fp32_logits).norm() / fp32_logits.norm()).item()
    assert 0 < rel < 0.1


@needs_onednn_bf16
def test_bf16_packed_batch_gives_each_request_its_solo_tokens():
    engine = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"))
    reqs = [Request(text=t, lang="en", seed=5) for t in ("Good morning to you.", "A second, longer line of text here.")]
    alone = [engine.generate([r])[0].tokens for r in reqs]
    together = [r.tokens for r in engine.generate(reqs)]
    assert all(torch.equal(a, b) for a, b in zip(alone, together))


@needs_onednn_bf16
def test_emulated_bf16_is_said(monkeypatch):
    """On AVX-512 without AVX512-BF16 or AMX (forced) bf16 still runs, in oneDNN's emulation: said."""
    monkeypatch.setattr(
        cpu,
        "_INFO",
        cpu.detect({"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}, "x86_64", env={}),
    )
    notices = []
    engine = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"), on_notice=notices.append)
    assert engine.dtype == torch.bfloat16 and type(engine.model.llm.layers[0].mlp.down_proj) is BF16Linear
    assert [n for n in notices if "bfloat16" in n] == [
        "bfloat16 is emulated on this CPU (avx512: no AVX512-BF16 or AMX): expect it slower than float32"
    ]
    notices.clear()
    Engine.load(str(TINY), Hardware(device="cpu"), on_notice=notices.append)
    assert not any("bfloat16" in n for n in notices)  # only when bf16 is asked for


def test_int8_on_a_gpu_falls_back_only_when_the_device_was_auto(monkeypatch):
    monkeypatch.setattr(loading, "resolve_device", lambda device: torch.device("cuda"))
    notices = []
    dev, quantize = loading._resolve_hardware(Hardware(quantize="int8"), notices.append)
    assert (dev.type, quantize) == ("cuda", None)
    assert notices == ["quantize int8 is for the CPU: running on cuda without it"]
    with pytest.raises(InvalidRequest, match="int8 runs on the CPU only, not on cuda"):
        loading._resolve_hardware(Hardware(device="cuda", quantize="int8"), notices.append)


@pytest.mark.slow
@pytest.mark.skipif(kernels.compiler() is None or linears.int8_kind() is not Int8Linear, reason="no fused kernels here")
def test_int8_fused_forward_is_narrows_and_deterministic(monkeypatch, fp32_logits):
    """fusedpath.py's layer forward against narrow.py's on the same codes: the same logits but for
    the norms' last bits (their sums in another order), bit for bit run to run; its error against
    fp32 no larger than narrow's."""
    fused = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    assert fusedpath.installed(fused.model)
    monkeypatch.setenv("OMNIVOICE_KERNELS", "off")
    monkeypatch.setattr(kernels, "_loaded", {})
    plain = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    assert not fusedpath.installed(plain.model) and plain.model.layer_path == narrow.NARROW
    a, b, p = _step0_logits(fused), _step0_logits(fused), _step0_logits(plain)
    assert torch.equal(a, b)
    assert ((a - p).norm() / p.norm()).item() < 1e-4
    err = lambda x: ((x - fp32_logits).norm() / fp32_logits.norm()).item()  # noqa: E731
    assert err(a) <= err(p) * 1.01


@pytest.mark.slow
@needs_onednn_bf16
@pytest.mark.skipif(kernels.compiler() is None, reason="no fused kernels here")
def test_bf16_fused_forward_is_narrows(monkeypatch, fp32_logits):
    """The bf16 body with its norms, RoPE and softmax in kernels against narrow.py's torch ops: the
    same logits within bf16's rounding of the norms (their sums in another order), bit for bit run to
    run, as far from fp32."""
    fused = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"))
    assert fusedpath.installed(fused.model)
    monkeypatch.setenv("OMNIVOICE_KERNELS", "off")
    monkeypatch.setattr(kernels, "_loaded", {})
    plain = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"))
    assert plain.model.layer_path == narrow.NARROW
    a, b, p = _step0_logits(fused), _step0_logits(fused), _step0_logits(plain)
    assert torch.equal(a, b)
    assert ((a - p).norm() / p.norm()).item() < 0.01
    err = lambda x: ((x - fp32_logits).norm() / fp32_logits.norm()).item()  # noqa: E731
    assert err(a) <= err(p) * 1.05


@pytest.mark.slow
@pytest.mark.skipif(
    kernels.compiler() is None or linears.int8_kind() is not Int8Linear or not linears.use_bf16_heads(),
    reason="the whole-layer kernels run where the int8 body's attention is bf16",
)
def test_int8_whole_layer_is_its_three_parts_bit_for_bit(ref_voice):
    """fusedpath.fused_layer (q, k, v and the attention's result in each packed row's own blocks)
    against the same body's inputs, attend and outputs: the same logits, and the same tokens over a
    whole generation of two packed requests with the step cache's stored prompts, bit for bit."""
    from dataclasses import replace

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.model.generation import run_jobs

    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    whole = engine.model.layer_path
    assert whole.layer is not None
    gen = GenerationConfig(num_step=8, position_temperature=0.0, step_cache=True)
    reqs = [
        Request(text="Hello there, how are you?", lang="en", generation=gen),
        Request(text="A reply.", ref=ref_voice, generation=gen),
    ]

    def run():
        jobs = [engine.prepare(r, seed=3) for r in reqs]
        run_jobs(
            engine.model,
            jobs,
            mask_id=engine.cfg.audio_mask_id,
            max_batch_size=16,
            max_packed_tokens=engine.cfg.max_packed_tokens,
        )
        return _step0_logits(engine), [j.tokens.clone() for j in jobs]

    (a, tokens_a) = run()
    engine.model.use_layer_path(replace(whole, layer=None))
    (b, tokens_b) = run()
    assert torch.equal(a, b) and all(torch.equal(x, y) for x, y in zip(tokens_a, tokens_b))


@pytest.mark.slow
@pytest.mark.skipif(kernels.compiler() is None or linears.int8_kind() is not Int8Linear, reason="no fused kernels here")
def test_int8_fused_forward_without_native_bf16_keeps_the_three_parts(monkeypatch, fp32_logits):
    """Where the CPU has no native bf16 (AVX2, AVX-512 without BF16: forced here) the int8 body's
    attention stays fp32, so the fused path runs its three parts (no whole layer: its kernels write
    bf16 blocks), its logits narrow.py's on the same codes but for the norms' last bits (which fp32
    attention carries into a code or two), no farther from fp32."""
    monkeypatch.setattr(
        cpu,
        "_INFO",
        cpu.detect({"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}, "x86_64", env={}),
    )
    assert not linears.use_bf16_heads()
    fused = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    assert fusedpath.installed(fused.model) and fused.model.layer_path.layer is None
    assert fused.model.llm.layers[0].self_attn.math_dtype is None
    monkeypatch.setenv("OMNIVOICE_KERNELS", "off")
    monkeypatch.setattr(kernels, "_loaded", {})
    plain = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    a, p = _step0_logits(fused), _step0_logits(plain)
    assert ((a - p).norm() / p.norm()).item() < 1e-3  # fp32 attention keeps the norms' last bits
    err = lambda x: ((x - fp32_logits).norm() / fp32_logits.norm()).item()  # noqa: E731
    assert err(a) <= err(p) * 1.01
