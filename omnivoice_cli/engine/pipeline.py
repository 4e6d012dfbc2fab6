"""From requests to audio: the public face of the engine.

    engine = Engine.load("k2-fsa/OmniVoice", device="auto", dtype="auto")
    [result] = engine.generate([Request(text="Hello", seed=7)], on_step=print)
    result.audio  # float32 [N] at engine.sample_rate

The engine never imports typer or rich; progress leaves it through `on_step(done, total)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .config import GenerationConfig, ModelConfig
from .errors import CheckpointError, InvalidRequest

StepCallback = Callable[[int, int], None]  # (steps done, steps in total) of the current forward loop


@dataclass(frozen=True)
class Request:
    """One text to speak and how."""

    text: str  # what to say
    lang: str | None = None  # language code or name; None = language-agnostic
    instruct: str | None = None  # voice-design items, e.g. "female, low pitch"
    duration: float | None = None  # fixed output length in seconds (overrides speed)
    speed: float | None = None  # speaking-rate factor (> 1 faster)
    seed: int = 0  # seeds this request's own torch.Generator
    ref: "VoicePrompt | None" = None  # voice to clone; None = auto voice / voice design
    generation: GenerationConfig = field(default_factory=GenerationConfig)  # decoding settings


@dataclass
class Result:
    """The audio of one request."""

    audio: "object"  # np.ndarray float32 [N] at sample_rate
    sample_rate: int  # Hz
    tokens: "object"  # torch.LongTensor [num_codebooks, target_len], the generated codes
    target_len: int  # frames generated
    seed: int  # the seed used
    warnings: list[str] = field(default_factory=list)  # e.g. an unknown language


def validate_request(req: Request, cfg: ModelConfig | None = None) -> list[str]:
    """Check a request without a model (no torch needed). Raise InvalidRequest; return warnings."""
    from . import text as textmod

    cfg = cfg or ModelConfig()
    if not isinstance(req.text, str) or not req.text.strip():
        raise InvalidRequest("text is empty: give some text to speak")
    if req.speed is not None and not req.speed > 0:
        raise InvalidRequest(f"speed {req.speed} is not allowed: use a number > 0 (1.0 is normal)")
    if req.duration is not None and not 0 < req.duration <= cfg.max_target_seconds:
        raise InvalidRequest(
            f"duration {req.duration} is not allowed: use seconds in (0, {cfg.max_target_seconds:g}]"
        )
    warnings = []
    if req.ref is not None and not req.ref.text.strip():
        raise InvalidRequest("the reference transcript is empty: give the words spoken in the reference audio")
    _, warning = textmod.resolve_language(req.lang)
    if warning:
        warnings.append(warning)
    textmod.resolve_instruct(req.instruct, use_zh=textmod.contains_chinese(req.text))
    ref_text, ref_len = (req.ref.text, req.ref.codes.shape[-1]) if req.ref is not None else (None, None)
    target, _ = textmod.resolve_target_len(req.text, ref_text, ref_len, req.speed, req.duration, cfg.frame_rate)
    if target > cfg.max_target_seconds * cfg.frame_rate:
        raise InvalidRequest(
            f"text is too long: about {target / cfg.frame_rate:.1f} s of speech, more than the "
            f"{cfg.max_target_seconds:g} s one generation allows; split it into shorter texts"
        )
    return warnings


@dataclass(frozen=True)
class VoicePrompt:
    """A reference voice, ready for the canvas."""

    codes: "object"  # torch.LongTensor [num_codebooks, T_ref]
    text: str  # the transcript, with its final punctuation
    rms: float | None  # RMS of the reference audio (sets the output level when < 0.1)


def resolve_device(device: str = "auto") -> "torch.device":
    import torch

    allowed = ("auto", "cpu", "cuda", "mps")
    if device not in allowed and not device.startswith("cuda:"):
        raise InvalidRequest(f"device {device!r} is not allowed: use one of {', '.join(allowed)}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidRequest(f"device {device!r} is not available: this torch build sees no CUDA GPU (use cpu)")
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidRequest("device 'mps' is not available on this machine (use cpu)")
    return torch.device(device)


def resolve_dtype(dtype: str, device: "torch.device", cfg: ModelConfig) -> "torch.dtype":
    import torch

    names = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if dtype == "auto":
        return torch.float32 if device.type == "cpu" else names[cfg.load_dtype]
    if dtype not in names:
        raise InvalidRequest(f"dtype {dtype!r} is not allowed: use auto, float32, float16 or bfloat16")
    return names[dtype]


class Engine:
    """A loaded checkpoint: text tokenizer, body and codec, on one device."""

    def __init__(self, root: Path, cfg: ModelConfig, tokenizer, model, codec, device, dtype):
        self.root, self.cfg, self.tokenizer, self.model, self.codec = root, cfg, tokenizer, model, codec
        self.device, self.dtype = device, dtype

    @property
    def sample_rate(self) -> int:
        return self.cfg.sample_rate

    @classmethod
    def load(
        cls,
        model: str | None = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        on_notice: Callable[[str], None] | None = None,
    ) -> "Engine":
        import torch

        from . import weights
        from .backbone import OmniVoiceModel
        from .codec import load_codec_decoder
        from .text import TextTokenizer

        dev = resolve_device(device)
        root = weights.resolve_checkpoint(model, on_notice)
        cfg = ModelConfig.from_checkpoint(root)
        dt = resolve_dtype(dtype, dev, cfg)
        tokenizer = TextTokenizer.from_file(root / "tokenizer.json")
        if tokenizer.vocab_size > cfg.backbone.vocab_size:
            raise CheckpointError(
                f"{root / 'tokenizer.json'} has {tokenizer.vocab_size} tokens but the model embeds "
                f"{cfg.backbone.vocab_size}"
            )
        with torch.device("meta"):
            net = OmniVoiceModel(cfg)
        weights.load_module(net, root / "model.safetensors", optional=["codebook_layer_offsets"], dtype=dt, device=dev)
        _check_offsets(net, cfg, root)
        net.eval()
        codec_device = torch.device("cpu") if dev.type == "mps" else dev  # MPS convs cap lengths at 65536
        codec = load_codec_decoder(root / "audio_tokenizer", cfg.codec, device=codec_device)
        return cls(root, cfg, tokenizer, net, codec, dev, dt)

    def prepare(self, req: Request):
        """Validate a request and build its job: canvas, schedule and generator."""
        from . import text
        from .canvas import build_canvas
        from .generation import make_job

        validate_request(req, self.cfg)
        lang, _ = text.resolve_language(req.lang)
        instruct = text.resolve_instruct(req.instruct, use_zh=text.contains_chinese(req.text))
        ref = req.ref
        target, _ = text.resolve_target_len(
            req.text,
            ref.text if ref else None,
            ref.codes.shape[-1] if ref else None,
            req.speed,
            req.duration,
            self.cfg.frame_rate,
        )
        canvas = build_canvas(
            self.tokenizer,
            req.text,
            target,
            ref_text=ref.text if ref else None,
            ref_codes=ref.codes if ref else None,
            lang=lang,
            instruct=instruct,
            denoise=req.generation.denoise,
            num_codebooks=self.cfg.num_audio_codebook,
            mask_id=self.cfg.audio_mask_id,
        )
        return make_job(canvas, req.generation, req.seed, self.cfg.audio_mask_id, self.device)

    def generate(
        self,
        requests: list[Request],
        on_step: StepCallback | None = None,
        on_result: Callable[[int, Result], None] | None = None,
    ) -> list[Result]:
        """Synthesise every request; the order of results follows the requests.

        Requests are packed into shared forwards and each leaves when its own steps are done;
        on_result(index, result) is called as soon as one is finished (so a caller can save it).
        """
        from .generation import run_jobs

        warnings = [validate_request(req, self.cfg) for req in requests]
        jobs = [self.prepare(req) for req in requests]
        results: list[Result | None] = [None] * len(requests)

        def finish(i: int, job) -> None:
            results[i] = self.render(requests[i], job, warnings[i])
            if on_result:
                on_result(i, results[i])

        run_jobs(
            self.model,
            jobs,
            mask_id=self.cfg.audio_mask_id,
            max_batch_size=self.cfg.max_batch_size,
            max_packed_tokens=self.cfg.max_packed_tokens,
            on_step=on_step,
            on_done=finish,
        )
        return results  # type: ignore[return-value]

    def render(self, req: Request, job, warnings: list[str] | None = None) -> Result:
        """Decode a finished job's tokens and post-process the waveform."""
        import torch

        from . import audio

        with torch.inference_mode():
            raw = self.codec.decode(job.tokens[None].to(self.codec.device))[0, 0].cpu().numpy()  # [N]
        g = req.generation
        wav = audio.post_process(
            raw,
            ref_rms=req.ref.rms if req.ref else None,
            sample_rate=self.sample_rate,
            postprocess_output=g.postprocess_output,
            pad_duration=g.pad_duration,
            fade_duration=g.fade_duration,
        )
        return Result(wav, self.sample_rate, job.tokens.cpu(), job.canvas.target_len, req.seed, warnings or [])


def _check_offsets(net, cfg: ModelConfig, root: Path) -> None:
    import torch

    expected = torch.arange(cfg.num_audio_codebook, dtype=torch.long) * cfg.audio_vocab_size
    offsets = net.codebook_layer_offsets
    if offsets.is_meta:  # absent from the file: derive it
        net.codebook_layer_offsets = expected.to(net.audio_heads.weight.device)
    elif not torch.equal(offsets.cpu(), expected):
        raise CheckpointError(f"{root / 'model.safetensors'}: codebook_layer_offsets {offsets.tolist()} != {expected.tolist()}")
    from .backbone import rope_inv_freq

    b = cfg.backbone
    net.inv_freq = rope_inv_freq(b.head_dim, b.rope_theta).to(net.audio_heads.weight.device)
