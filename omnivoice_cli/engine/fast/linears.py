"""The CPU linears of the body: oneDNN fp32 (a weight repacked once into oneDNN's blocked layout),
oneDNN bf16 (the weight converted and packed once) and dynamic int8 (oneDNN's u8 x s8 kernel, or
FBGEMM's where the CPU's class runs it faster (cpu.CHOICES); torch's quantised ops where a build
lacks oneDNN's). The module tree keeps the checkpoint's names; on the bf16 and int8 paths q, k and
v run as one product (`Fused`, narrow.NarrowAttention's `fused_qkv`), and the layer forward is
narrow.py's, which fuses the residual adds and the MLP's gate into the products.
The int8 codes and their packing are int8pack.py's. The network itself (backbone.py) knows nothing
of the kernels: loading.py picks one, and its modules are put in the plain ones' places (taking
over their parameters: the state dict keeps its keys).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, cast

import torch
import torch.nn.functional as F
from torch import nn

from .. import torchprivate as tp
from ..model.backbone import RMSNorm
from . import cpu, fusedpath, narrow
from .int8pack import PACK_ROWS, int8_weight, pack_codes, pack_int8_rows, quantize_activations
from .memory import release_pages

if TYPE_CHECKING:  # annotations only
    from ..model.backbone import DecoderLayer, OmniVoiceModel


class OneDNNLinear(nn.Linear):
    """nn.Linear whose fp32 GEMM runs in oneDNN (the op torch's own CPU compiler uses) on a weight
    repacked into oneDNN's blocked layout at its first call: faster than the default BLAS and than
    oneDNN on the unpacked weight, which it repacks internally at every call (the figures:
    benchmarks/speed-log.md). Packing at the first
    call costs what that first call would have spent anyway; the packed copy replaces the mmap'd
    weight's pages (released to the page cache, they fault back in if ever read)."""

    @classmethod
    def of(cls, linear: nn.Linear) -> "OneDNNLinear":
        """One in `linear`'s place: its weight and bias (the same parameters)."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)  # not nn.Linear's: it would draw a random weight
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.weight = linear.weight
        new.register_parameter("bias", linear.bias)
        return new.train(linear.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self.__dict__.get("packed")
        if packed is None:
            packed = self.__dict__["packed"] = tp.reorder_linear_weight(self.weight)
            release_pages(self.weight)
        return tp.linear(x, packed, self.bias)


_onednn_ok: bool | None = None


def onednn_linear_available() -> bool:
    """Whether this torch build has oneDNN's linear and it agrees with F.linear (checked once)."""
    global _onednn_ok
    if _onednn_ok is None:
        try:
            g = torch.Generator().manual_seed(0)
            x, w, b = torch.randn(37, 64, generator=g), torch.randn(48, 64, generator=g), torch.randn(48, generator=g)
            y = tp.linear(x, tp.reorder_linear_weight(w), b)
            _onednn_ok = bool(torch.backends.mkldnn.is_available()) and torch.allclose(y, F.linear(x, w, b), atol=1e-4)
        except tp.ABSENT:  # absent or changed
            _onednn_ok = False
    return _onednn_ok


def use_onednn_linears(model: nn.Module) -> int:
    """Compute every fp32 CPU nn.Linear under `model` with oneDNN: a OneDNNLinear in its place;
    returns how many were switched (0 where the build lacks it). The modules put in place keep the
    weights and state-dict keys."""
    if not onednn_linear_available():
        return 0
    n = 0
    for parent in list(model.modules()):
        for name, m in list(parent.named_children()):
            if type(m) is nn.Linear and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32:
                setattr(parent, name, OneDNNLinear.of(m))
                n += 1
    return n


class KernelLinear(nn.Module):
    """A linear layer with its weight packed for a kernel. Besides `forward`, the products the
    narrow layer forward (narrow.py) asks for: `add` (x W^T + other: the residual adds) and
    `gated(gate, up, x)` (silu(x Wg^T) * x Wu^T: the MLP). Here as plain compositions; the kernels
    that can fuse them into the product's epilogue override them."""

    # how many layers convert_layers packs at once: 2 (on Python threads) where packing runs on one
    # core (oneDNN's bf16 reorder), else 1 (in the calling thread: torch's own multi-threaded ops)
    layers_at_once = 1

    @classmethod
    def stacked(cls, weights: list[torch.Tensor], bias: torch.Tensor | None) -> "KernelLinear":
        """One layer of weights [out_i, in] stacked along the outputs (Fused)."""
        return cls(torch.cat(weights), bias)

    def add(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self(x).add_(other)

    @staticmethod
    def gated(gate: nn.Module, up: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return F.silu(gate(x), inplace=True).mul_(up(x))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.kind}"


class BF16Linear(KernelLinear):
    """A linear layer computed by oneDNN in bf16 (inputs and outputs bf16, fp32 accumulation) on a
    weight converted to bf16 and packed into oneDNN's blocked layout once, at construction, in the
    layout a forward's product reads (for PACK_ROWS rows at the calling thread's thread count: for
    oneDNN's default batch, AMX's products reordered every weight at every call). The
    residual add, the SiLU and the gate's product run in the product's epilogue (oneDNN post-ops)."""

    kind = "bf16"
    layers_at_once = 2  # oneDNN's reorder runs on one core: see convert_layers

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.packed = tp.reorder_linear_weight(weight.detach().to(torch.bfloat16).contiguous(), PACK_ROWS)
        self.bias = None if bias is None else bias.detach().to(torch.bfloat16)

    @classmethod
    def stacked(cls, weights: list[torch.Tensor], bias: torch.Tensor | None) -> "BF16Linear":
        return cls(torch.cat([w.to(torch.bfloat16) for w in weights]), bias)  # stacked in bf16: half the bytes

    def forward(self, x: torch.Tensor, post: str = "none") -> torch.Tensor:
        x = x if x.dtype == torch.bfloat16 else x.to(torch.bfloat16)
        return tp.linear(x, self.packed, self.bias, post)

    def binary(self, x: torch.Tensor, other: torch.Tensor, op: str) -> torch.Tensor:
        """x W^T (+ b) `op` other ("add" or "mul"), other bf16 [N, out] (or [N, 1])."""
        return tp.linear_binary(x, other, self.packed, self.bias, op)

    def add(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self.binary(x, other, "add")

    @staticmethod
    def gated(gate: nn.Module, up: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """gate and up: BF16Linears (the layer's own)."""
        return cast(BF16Linear, up).binary(x, gate(x, "swish"), "mul")  # two products, no pass of their own


_int8_ok: bool | None = None


def onednn_int8_available() -> bool:
    """Whether this torch build has oneDNN's quantised linear (torchprivate.qlinear, the kernel torch's
    own CPU compiler emits for int8) and it agrees with a plain product of the codes (checked once)."""
    global _int8_ok
    if _int8_ok is None:
        try:
            g = torch.Generator().manual_seed(0)
            x, w = torch.randn(9, 64, generator=g), torch.randn(24, 64, generator=g)
            y = Int8Linear(w)(x)
            codes, scale = int8_weight(w)
            xq, xs = quantize_activations(x, Int8Linear.half)
            want = ((xq.float() - Int8Linear.half - 1) * xs) @ (codes.float() * scale[:, None]).T
            _int8_ok = torch.allclose(y, want, rtol=1e-4, atol=1e-4)
        except tp.ABSENT:  # absent or changed
            _int8_ok = False
    return _int8_ok


class Int8Linear(KernelLinear):
    """A dynamic int8 linear layer (CPU, oneDNN): the weight int8 per output channel, packed once;
    the input quantised per tensor on the fly at each call (8 bits with VNNI, 7 without);
    accumulation int32, output fp32 (the scales, the residual add and the SiLU applied by the
    kernel's epilogue)."""

    kind = "int8"
    half = 127 if cpu.has_vnni() else 63  # type: ignore[assignment]  # the activations' codes: zero point half + 1 (not Module.half)

    def __init__(self, weight: torch.Tensor | list[torch.Tensor], bias: torch.Tensor | None = None):
        super().__init__()
        parts = [w.detach() for w in weight] if isinstance(weight, list) else [weight.detach()]
        self.out_features, self.in_features = sum(w.shape[0] for w in parts), parts[0].shape[1]
        self.packed, self.w_scale = pack_int8_rows(parts)
        self.bias = None if bias is None else bias.detach().float()

    @classmethod
    def stacked(cls, weights: list[torch.Tensor], bias: torch.Tensor | None) -> "Int8Linear":
        return cls(weights, bias)  # coded part by part, no fp32 concatenation

    @classmethod
    def from_codes(
        cls, codes: torch.Tensor, scales: torch.Tensor, sums: torch.Tensor, bias: torch.Tensor | None
    ) -> "Int8Linear":
        """The layer of codes already made (int8_codes': the weight cache's), packed, not coded."""
        self = cls.__new__(cls)
        KernelLinear.__init__(self)
        self.out_features, self.in_features = codes.shape
        self.packed, self.w_scale = pack_codes(codes, sums), scales.float().clone()
        self.bias = None if bias is None else bias.detach().float()
        return self

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, float]:
        return quantize_activations(x, self.half)

    def run(self, q: tuple[torch.Tensor, float], post: str = "none", other: torch.Tensor | None = None) -> torch.Tensor:
        """The product on quantised inputs `q` (so that two layers can share one quantisation), with
        a unary post-op ("none", "swish") and, given `other` (fp32 [N, out]), + other."""
        codes, scale = q
        zero = self.half + 1
        if other is None:
            return tp.qlinear(codes, scale, zero, self.packed, self.w_scale, self.bias, post)
        return tp.qlinear_add(codes, scale, zero, self.packed, self.w_scale, other, self.bias, post)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(self.quantize(x))

    def add(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self.run(self.quantize(x), other=other)

    @staticmethod
    def gated(gate: nn.Module, up: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """gate and up: Int8Linears (the layer's own)."""
        g, u = cast(Int8Linear, gate), cast(Int8Linear, up)
        q = g.quantize(x)  # one quantisation for both products
        return g.run(q, "swish").mul_(u.run(q))


_ENGINE_LOCK = threading.Lock()


class LegacyInt8Linear(KernelLinear):
    """The dynamic int8 linear layer of torch's quantised ops (fbgemm on x86, qnnpack on ARM), for
    torch builds without oneDNN's: 7-bit inputs per tensor, int8 weights per output channel. It needs
    torch's quantised tensor types, which torch marks deprecated."""

    kind = "int8 (torch quantized)"
    engine: str | None = None  # torch's quantised engine to pack for (None: the one in force)

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self._pack(*int8_weight(weight.detach()), bias)

    @classmethod
    def from_codes(
        cls, codes: torch.Tensor, scales: torch.Tensor, sums: torch.Tensor, bias: torch.Tensor | None
    ) -> "LegacyInt8Linear":
        """The layer of codes already made (the weight cache's); the sums are not needed here."""
        self = cls.__new__(cls)
        KernelLinear.__init__(self)
        self.out_features, self.in_features = codes.shape
        self._pack(codes.clone(), scales.float().clone(), bias)
        return self

    def _pack(self, codes: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        import warnings

        zero = torch.zeros(len(scale), dtype=torch.long)
        with warnings.catch_warnings():  # torch marks its quantised tensor types deprecated
            warnings.simplefilter("ignore")
            qweight = tp.per_channel_quantized(codes, scale.double(), zero, 0)
        bias = None if bias is None else bias.detach().float()
        with _ENGINE_LOCK:  # the engine is process-wide, and convert_layers packs two layers at a time
            engines = torch.backends.quantized
            was = engines.engine
            if self.engine and self.engine != was:
                engines.engine = self.engine  # the engine packs (and so picks the kernel of) the weight
            try:
                self.packed = tp.quantized_linear_prepack(qweight, bias)
            finally:
                if engines.engine != was:
                    engines.engine = was

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tp.quantized_linear_dynamic(x.float(), self.packed, True)  # True: 7-bit inputs, as fbgemm needs


class FbgemmInt8Linear(LegacyInt8Linear):
    """LegacyInt8Linear packed for FBGEMM's kernels whatever torch's quantised engine is (its default
    "x86" picks a backend by its own rules; qnnpack elsewhere): 7-bit activations per tensor,
    quantised inside the op; the residual add and the gate composed after it. The int8 kernel of the
    classes where it beats oneDNN's u8 x s8 (cpu.CHOICES: AVX2 without VNNI, where both add byte
    pairs in int16). FBGEMM picks its instructions itself and reads none of oneDNN's or ATen's caps
    (its own: FBGEMM_ENABLE_INSTRUCTIONS=AVX2, AVX512, ...)."""

    kind = "int8 (fbgemm)"
    engine = "fbgemm"


def fbgemm_available() -> bool:
    return "fbgemm" in torch.backends.quantized.supported_engines


# how convert_layers makes a layer's linear when told: (name, weights [out_i, in] stacked, bias) -> the
# linear; its names: f"{layer}.qkv", f"{layer}.o_proj", ... (the weight cache's: weightcache.py)
Make = Callable[[str, list[torch.Tensor], "torch.Tensor | None"], KernelLinear]


class Fused:
    """Linear layers that read the same input, computed as one product of their stacked weights
    (one pass over the input; for int8 one quantisation of it): a call returns each layer's output
    as a view of the joint one. A plain object, not a module: the module tree stays the checkpoint's."""

    def __init__(self, kind: type[KernelLinear], linears: list[nn.Linear], make: "Make | None" = None):
        self.sizes = [m.out_features for m in linears]
        biases = [m.bias for m in linears]
        bias = None if biases[0] is None else torch.cat([b.detach() for b in biases])
        weights = [m.weight.detach() for m in linears]
        self.linear = make("qkv", weights, bias) if make else kind.stacked(weights, bias)  # [sum(out), in]

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.linear(x).split(self.sizes, dim=-1)

    def __repr__(self) -> str:
        return f"Fused({self.linear!r}, sizes={self.sizes})"


class FusedPart(nn.Module):
    """What stands in a fused layer's place in the module tree (q_proj, ...): called alone it runs the
    joint product and returns its own part (the network calls the joint product once instead)."""

    def __init__(self, fused: Fused, index: int):
        super().__init__()
        self.fused, self.index = fused, index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fused(x)[self.index]

    def extra_repr(self) -> str:
        return f"part {self.index} of {self.fused!r}"


def _decoder_layer(m: nn.Module) -> "DecoderLayer":
    """A body's layer as its type (nn.ModuleList holds plain modules)."""
    return cast("DecoderLayer", m)


def convert_layers(model: OmniVoiceModel, kind: type[KernelLinear], make: "Make | None" = None) -> int:
    """Every decoder layer's linears as `kind` (BF16Linear, Int8Linear, ...): q/k/v fused into one
    product (a narrow.NarrowAttention in the attention's place, its q_proj, k_proj and v_proj
    FusedParts of the product), o_proj, gate_proj, up_proj and
    down_proj converted, `kind.layers_at_once` layers at a time (bf16, whose reorder runs on one core, two at a
    time; int8, coded by torch's multi-threaded ops, one by one: benchmarks/speed-log.md); each fp32 weight's mapped pages released
    once packed, so memory never holds the whole fp32 body. `make`: how to make each linear instead
    of `kind` (the weight cache's coding, or its codes read back), called one layer at a time in
    the layers' order. Returns the number of linear layers converted."""
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import nullcontext

    threads = torch.get_num_threads()  # the engine's: a packed layout is chosen for a thread count

    def convert(item):
        i, layer = item
        if torch.get_num_threads() != threads:  # a pool's thread starts with OpenMP's default count
            torch.set_num_threads(threads)
        a, m = layer.self_attn, layer.mlp
        olds = [a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj]
        named = None if make is None else (lambda name, w, b: make(f"{i}.{name}", w, b))
        qkv = Fused(kind, olds[:3], named)
        if named is None:
            rest = [kind(old.weight, old.bias) for old in olds[3:]]
        else:
            names = ("o_proj", "gate_proj", "up_proj", "down_proj")
            rest = [named(name, [old.weight.detach()], old.bias) for name, old in zip(names, olds[3:])]
        for old in olds:
            release_pages(old.weight)
        return layer, qkv, rest

    layers = [
        (i, x)
        for i, x in enumerate(map(_decoder_layer, model.llm.layers))
        if not isinstance(x.self_attn, narrow.NarrowAttention)
    ]
    at_once = kind.layers_at_once if make is None else 1
    with ThreadPoolExecutor(at_once) if at_once > 1 else nullcontext() as pool:
        # one at a time in this thread: torch's ops on another thread run several times slower
        converted = pool.map(convert, layers) if pool else map(convert, layers)
        for layer, qkv, (o, gate, up, down) in converted:
            a, m = narrow.NarrowAttention(layer.self_attn, qkv), layer.mlp
            a.o_proj, m.gate_proj, m.up_proj, m.down_proj = o, gate, up, down
            parts = (FusedPart(qkv, i) for i in range(3))  # called as the nn.Linears were
            a.q_proj, a.k_proj, a.v_proj = parts  # type: ignore[assignment]
            layer.self_attn = a
    return 7 * len(layers)


def _heads_to_bf16(model: OmniVoiceModel) -> None:
    heads = model.audio_heads
    if not isinstance(heads, BF16Linear):  # bf16 logits: the error against fp32 is the body's (measured)
        model.audio_heads = BF16Linear(heads.weight, heads.bias)  # type: ignore[assignment]  # called as the nn.Linear was
        model.audio_heads.weight = heads.weight  # the file's view, pages released: its key and device stay
        release_pages(heads.weight)


def quantize_int8(model: OmniVoiceModel, make: "Make | None" = None, kind: type | None = None) -> int:
    """Dynamic int8 linear layers for the body on CPU (the kernel of this CPU's class: int8_kind):
    weights int8 per output channel, activations quantised per tensor on the fly; the layer forward
    of narrow.py (activations fp32 between the products). Where the CPU has bf16 natively (cpu.py),
    attention and the audio heads run in bf16 (their error is small beside int8's); else they stay
    fp32. Embeddings and norms stay fp32. With oneDNN's layers, fusedpath.py's layer forward where
    its kernels build here (else narrow.py's). `make`: convert_layers'; `kind`: the int8 layer
    (default int8_kind()). Returns the number of linear layers quantised."""

    kind = kind or int8_kind()
    n = convert_layers(model, kind, make)
    bf16 = use_bf16_heads()
    if bf16:
        _heads_to_bf16(model)
    narrow.install_narrow(
        model, torch.bfloat16 if bf16 else torch.float32, output=torch.float32
    )  # fp32: quantised at once
    if kind is Int8Linear:
        fusedpath.install(model)  # the work between the products fused, where its kernels build here
    return n


def int8_kind(kernel: str | None = None) -> type:
    """The int8 layer of `kernel` ("onednn", "fbgemm"; default this CPU class's, cpu.decide: FBGEMM's
    where it beats oneDNN's u8 x s8, measured), or what this torch build has: oneDNN's, else torch's
    quantised ops."""
    if (kernel or cpu.decide().kernel) == "fbgemm" and fbgemm_available():
        return FbgemmInt8Linear
    return Int8Linear if onednn_int8_available() else LegacyInt8Linear


def use_bf16_heads() -> bool:
    """Whether quantize_int8 runs attention and the audio heads in bf16: where the CPU multiplies bf16
    natively and oneDNN runs it (cpu.py, caps included), with this build's oneDNN linear."""
    return cpu.has_native_bf16() and cpu.bf16_runs() and onednn_linear_available()


def _to_bf16(param: nn.Parameter) -> nn.Parameter:
    """A bf16 copy of a parameter; the fp32 one's mapped pages released."""
    out = nn.Parameter(param.detach().to(torch.bfloat16), requires_grad=False)
    release_pages(param)
    return out


def to_bfloat16(model: OmniVoiceModel) -> int:
    """The body in bf16 on the CPU, from the fp32 weights of the mapped file: linears converted and
    packed for oneDNN (q/k/v fused), norms, audio embeddings and heads in bf16, each fp32 source's
    pages released; the layer forward of narrow.py. The text-embedding table stays a fp32 view of
    the file (a step reads a few of its rows, cast by `embed`). Returns the number of linear layers
    converted."""

    n = convert_layers(model, BF16Linear)
    narrow.install_narrow(model, torch.bfloat16)  # first: the q/k norms' weights are folded into RoPE in fp32
    for m in model.modules():
        if isinstance(m, RMSNorm) and m.weight.dtype != torch.bfloat16:
            m.weight = _to_bf16(m.weight)
    model.audio_embeddings.weight = _to_bf16(model.audio_embeddings.weight)
    _heads_to_bf16(model)
    fusedpath.install(model)  # the norms, RoPE and softmax in kernels, where they build here
    return n
