"""From requests to audio: the public face of the engine.

    engine = Engine.load("k2-fsa/OmniVoice", device="auto", dtype="auto")
    [result] = engine.generate([Request(text="Hello", seed=7)], on_step=print)
    result.audio  # float32 [N] at engine.sample_rate

The engine never imports typer or rich; progress leaves it through `on_step(done, total)`.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from .config import GenerationConfig, ModelConfig, value_rule
from .errors import InvalidRequest
from .pieces import Piece, RequestPieces, speed_against

if TYPE_CHECKING:  # annotations only: importing torch here would slow `--help` and validation
    from .voice import VoicePrompt

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
    # (text, start, end) of each piece (a chunk of a long text, a part between pauses) in `audio`'s
    # samples, in order: where what came of it lies after cross-fades and silence removal (its
    # kept samples, from the first to one past the last; the padding, pauses and the silence
    # between chunks belong to no piece). Empty when unknown.
    pieces: list[tuple[str, int, int]] = field(default_factory=list)


def validate_request(req: Request, cfg: ModelConfig | None = None) -> list[str]:
    """Check a request without a model (no torch needed). Raise InvalidRequest; return warnings.

    An error about one setting carries its name in `InvalidRequest.setting` and reads after it
    ("instruct: unsupported instruct item ...")."""
    from . import text as textmod

    cfg = cfg or ModelConfig()
    textmod.check_text(req.text)
    speed, duration = value_rule("speed"), replace(value_rule("duration"), high=cfg.max_target_seconds)
    if req.speed is not None and not speed.ok(req.speed):
        raise InvalidRequest(f"{req.speed} is not allowed: use {speed.allowed}", "speed")
    if req.duration is not None and not duration.ok(req.duration):
        raise InvalidRequest(f"{req.duration} is not allowed: use {duration.allowed}", "duration")
    if req.ref is not None:
        _check_voice(req.ref, cfg)
    warnings = []
    _, warning = textmod.resolve_language(req.lang)
    if warning:
        warnings.append(warning)
    try:
        textmod.resolve_instruct(req.instruct, use_zh=textmod.contains_chinese(req.text))
    except InvalidRequest as e:
        raise InvalidRequest(str(e), "instruct") from None
    parts, _ = textmod.split_pauses(req.text)
    if not parts:
        raise InvalidRequest("text has nothing to speak besides pause tags", "text")
    wordless = textmod.wordless_warning(" ".join(parts))
    if wordless:
        warnings.append(wordless)
    if req.duration is not None and len(parts) > 1:
        raise InvalidRequest("a fixed duration cannot be combined with [pause] tags; set a speed instead", "duration")
    return warnings


def _check_voice(ref: "VoicePrompt", cfg: ModelConfig) -> None:
    """A voice's transcript and codes fit this model and its bounds (InvalidRequest about the
    setting "voice"): codes [codebooks, 1..max_ref_seconds of frames], a transcript that reads
    at most 4x as long as that."""
    if not (ref.text or "").strip():
        raise InvalidRequest("the reference transcript is empty: give the words spoken in the reference audio", "voice")
    codes = ref.codes
    if codes.ndim != 2 or codes.shape[0] != cfg.num_audio_codebook or codes.shape[-1] == 0:
        raise InvalidRequest(
            f"the voice's codes have shape {list(codes.shape)}; this model needs "
            f"[{cfg.num_audio_codebook}, frames] (was the voice made for another model?)",
            "voice",
        )
    if codes.shape[-1] > cfg.max_ref_seconds * cfg.frame_rate:
        raise InvalidRequest(
            f"the voice holds {codes.shape[-1] / cfg.frame_rate:.1f} s of audio: at most {cfg.max_ref_seconds:g} s "
            "(3-10 s is best)",
            "voice",
        )
    if codes.dtype.is_floating_point or int(codes.min()) < 0 or int(codes.max()) >= cfg.audio_mask_id:
        raise InvalidRequest(
            f"the voice's codes are out of range: this model's codes are integers in 0..{cfg.audio_mask_id - 1}",
            "voice",
        )
    check_transcript(ref.text, cfg, "voice")


def check_transcript(text: str, cfg: ModelConfig | None = None, setting: str | None = None) -> None:
    """A reference transcript reads at most 4x as long as the longest reference (InvalidRequest)."""
    from .text import speech_seconds

    cfg = cfg or ModelConfig()
    if len(text) > 100_000 or speech_seconds(text) > 4 * cfg.max_ref_seconds:
        raise InvalidRequest(
            f"the reference transcript is too long for a reference of at most {cfg.max_ref_seconds:g} s: "
            "give only the words spoken in the recording",
            setting,
        )


@dataclass(frozen=True)
class VoiceShape:
    """What planning needs of a voice: its transcript as the model reads it and its length in
    frames (a VoicePrompt's, or a recording's still to encode: `of_recording`)."""

    text: str | None  # the transcript, punctuated as the voice holds it
    frames: int  # codec frames of its audio
    rate: float | None = None  # the rate its codes already speak at (VoicePrompt.rate; None: a recording)

    @classmethod
    def of(cls, voice: "VoicePrompt") -> "VoiceShape":
        # planning takes any voice-like object (codes and text; a rate if it has one)
        return cls(voice.text, int(voice.codes.shape[-1]), getattr(voice, "rate", None))

    @classmethod
    def of_recording(cls, samples: int, transcript: str, cfg: ModelConfig | None = None) -> "VoiceShape":
        """A recording not encoded yet: `samples` of prepared audio at the codec's rate, and the
        transcript as the encoded voice will hold it."""
        from .text import add_punctuation

        cfg = cfg or ModelConfig()
        return cls(add_punctuation(transcript), samples // cfg.codec.hop_length)


@dataclass
class Plan:
    """A request cut into pieces, and what has come back of them."""

    req: Request
    pieces: list[Piece]
    gaps: list[float]  # seconds of silence before, between and after the parts
    n_parts: int
    tokens: list = field(default_factory=list)  # codes of each piece, None until it is done
    frames: list[int] = field(default_factory=list)  # frames each piece will generate (plan_request)
    cfg: ModelConfig | None = None  # the config it was planned with (Engine.generate replans under another)

    def __post_init__(self) -> None:
        self.tokens = [None] * len(self.pieces)

    @property
    def steps(self) -> int:
        """The steps its pieces take, one job each (a progress bar's total): num_step a piece."""
        return len(self.pieces) * self.req.generation.num_step

    def fresh(self) -> "Plan":
        """The same plan, nothing of it done yet (a plan handed to Engine.generate is not changed)."""
        return Plan(self.req, self.pieces, self.gaps, self.n_parts, frames=self.frames, cfg=self.cfg)

    def is_for(self, req: Request) -> bool:
        """Made for `req`: the same fields (its voice the very same object)."""
        for f in fields(Request):
            a, b = getattr(self.req, f.name), getattr(req, f.name)
            if a is not b and (f.name == "ref" or a != b):
                return False
        return True

    def planned_as(self, cfg: ModelConfig) -> bool:
        """Planned under `cfg`'s bounds and frame rate (so planning again under it gives this plan)."""
        mine = self.cfg or ModelConfig()
        return _planning(mine) == _planning(cfg)


@dataclass(frozen=True)
class Planned(Request):
    """A request with the plan made for it (plan_request), carried from where it was built (the
    size check, the dry run, the progress bar's total) to Engine.generate, so it is made once. A
    copy with other fields (dataclasses.replace: e.g. its recording encoded) is planned again."""

    plan: "Plan | None" = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, req: Request, plan: "Plan") -> "Planned":
        return cls(**{f.name: getattr(req, f.name) for f in fields(Request)}, plan=plan)

    def own_plan(self) -> "Plan | None":
        """Its plan, when it is still this request's."""
        return self.plan if self.plan is not None and self.plan.is_for(self) else None


def plan_of(req: Request, cfg: ModelConfig | None = None) -> "Plan":
    """The plan of a request: the one it carries (a Planned request's, made under the same bounds),
    else made now (plan_request)."""
    cfg = cfg or ModelConfig()
    own = req.own_plan() if isinstance(req, Planned) else None
    return own if own is not None and own.planned_as(cfg) else plan_request(req, cfg)


def _planning(cfg: ModelConfig) -> tuple:
    """What plan_request reads of a config."""
    return (cfg.frame_rate, cfg.max_target_seconds, cfg.max_request_seconds, cfg.max_pieces, cfg.codec.hop_length)


def plan_request(req: Request, cfg: ModelConfig | None = None, voice: VoiceShape | None = None) -> Plan:
    """Cut a request into pieces: the parts between pause tags, and chunks of parts estimated
    longer than audio_chunk_threshold. Needs no model and no torch (only the text tables and the
    frame rate), so a dry run or an up-front size check can call it; the request should have
    passed validate_request. `voice`: the shape of the request's voice (by default req.ref's; a
    recording still to encode stands in by `VoiceShape.of_recording`).

    Bounds (InvalidRequest, before anything is generated): no piece generates more than
    max_target_seconds (a chunk estimated longer, e.g. text without sentence punctuation, is cut
    at words, else characters: `text.cut_to_length`); at most max_pieces pieces; at most
    max_request_seconds of audio, pauses included.

    Every piece carries the rate it is spoken at (Piece.speed: the request's speed, or a fixed
    duration's effective speed); a chunk is estimated against its voice at that rate relative
    to the voice's own (pieces.speed_against): without a voice, the chunks after piece 0 are
    estimated against piece 0 at speed 1, since piece 0 already speaks at that rate (a
    deliberate difference from the reference, which divides by the speed again:
    docs/correctness.md)."""
    from . import text

    cfg = cfg or ModelConfig()
    g = req.generation
    parts, gaps = text.split_pauses(req.text)
    if len(parts) > cfg.max_pieces:
        raise InvalidRequest(f"the text has {len(parts)} parts between pause tags: at most {cfg.max_pieces}")
    if voice is None and req.ref is not None:
        voice = VoiceShape.of(req.ref)
    ref_text, ref_len, ref_rate = (voice.text, voice.frames, voice.rate) if voice is not None else (None, None, None)
    threshold = g.audio_chunk_threshold * cfg.frame_rate
    speed = speed_against(req.speed, ref_rate)
    targets = [text.resolve_target_len(part, ref_text, ref_len, speed, req.duration, cfg.frame_rate) for part in parts]
    _check_length(sum(t for t, _ in targets), gaps, cfg)
    pieces: list[Piece] = []
    for p, (part, (target, eff_speed)) in enumerate(zip(parts, targets)):
        # the rate it is spoken at: the speed, or the duration's (eff_speed is relative to the voice)
        rate = req.speed if req.duration is None else eff_speed * (1.0 if ref_rate is None else ref_rate)
        if target <= threshold:
            pieces.append(Piece(p, 0, part, target, rate))
            continue
        chunk_len = text.chunk_len_for(part, target, g.audio_chunk_duration, cfg.frame_rate)
        pieces += [Piece(p, c, chunk, None, rate) for c, chunk in enumerate(text.chunk_text(part, chunk_len))]
    shape = (ref_text, ref_len, ref_rate) if voice is not None else None
    pieces, frames = _fit_pieces(pieces, shape, cfg, g.audio_chunk_duration * cfg.frame_rate)
    _check_length(sum(frames), gaps, cfg)
    return Plan(req, pieces, gaps, len(parts), frames=frames, cfg=cfg)


def _check_length(frames: int, gaps: list[float], cfg: ModelConfig) -> None:
    seconds = frames / cfg.frame_rate + sum(gaps)
    if seconds > cfg.max_request_seconds:
        raise InvalidRequest(
            f"the text would take about {seconds / 3600:.1f} h to say: at most {cfg.max_request_seconds / 3600:g} h "
            "of audio in one request (split the text)"
        )


def piece_frames(
    piece: Piece, ref_text: str | None, ref_len: int | None, frame_rate: float, ref_rate: float | None = None
) -> int:
    """Frames a piece generates (as Engine.prepare computes them): its own target, or a chunk's
    estimate against its voice (`ref_text` spoken in `ref_len` frames at rate `ref_rate`; None:
    the yardstick) at its speed relative to that rate (pieces.speed_against)."""
    from .text import resolve_target_len

    if piece.target_len is not None:
        return piece.target_len
    speed = speed_against(piece.speed, ref_rate)
    return resolve_target_len(piece.text, ref_text, ref_len, speed, None, frame_rate)[0]


MIN_CUT_CHARS = 8  # a piece cut shorter than this to fit means the speed or voice is absurd: refused


def _fit_pieces(pieces: list[Piece], ref: tuple | None, cfg: ModelConfig, preferred: float):
    """(pieces, frames of each): every piece cut until it generates at most max_target_seconds.

    `ref`: (transcript, frames, rate) of the request's voice. Without one, piece 0 is the voice of
    the others (as Engine.generate runs them), so it is fitted first and the others are estimated
    against it, at its rate (RequestPieces.first_voice). A piece too long is cut
    (`text.cut_to_length`) into pieces of about `preferred` frames (the chunk duration); one that
    would have to be cut under MIN_CUT_CHARS characters (a speed or a voice that makes a few
    letters last many seconds) is an InvalidRequest."""
    from .text import cut_to_length

    limit = int(cfg.max_target_seconds * cfg.frame_rate)
    queue, out, frames = list(reversed(pieces)), [], []
    while queue:
        piece = queue.pop()
        voice = ref if ref is not None else (out[0].text, frames[0], out[0].speed) if out else (None, None, None)
        n = piece_frames(piece, voice[0], voice[1], cfg.frame_rate, voice[2])
        if n <= limit:
            out.append(piece)
            frames.append(n)
            if len(out) > cfg.max_pieces:
                raise InvalidRequest(f"the text is cut into more than {cfg.max_pieces} pieces: split the text")
            continue
        max_chars = int(len(piece.text) * min(0.9 * limit, max(preferred, 0.2 * limit)) / n)
        cut = cut_to_length(piece.text, max_chars) if max_chars >= MIN_CUT_CHARS else []
        if len(cut) < 2:
            raise InvalidRequest(
                f"{piece.text[:40]!r} would take {n / cfg.frame_rate:.0f} s to say at this speed and voice: one "
                f"generation is at most {cfg.max_target_seconds:g} s (a higher speed, or a voice whose transcript "
                "matches its recording)"
            )
        queue += [replace(piece, text=t) for t in reversed(cut)]
    chunks: dict[int, int] = {}
    for k, piece in enumerate(out):  # number the chunks of each part again, in order
        out[k] = replace(piece, chunk=chunks.setdefault(piece.part, 0))
        chunks[piece.part] += 1
    return out, frames


def piece_spans(
    parts: list[int], extents: list[tuple[int, int]], placed: list[tuple[int, list]]
) -> list[tuple[int, int]]:
    """Where each piece lies in the post-processed audio: [start, end) in its samples.

    parts[k]: the part piece k belongs to; extents[k]: its samples [a, b) in that part as decoded;
    placed[p]: (offset, layout) of part p in the output (audio.post_process_parts_mapped)."""
    from .audio import map_span

    spans = []
    for p, (a, b) in zip(parts, extents):
        offset, layout = placed[p]
        s, e = map_span(layout, a, b)
        spans.append((offset + s, offset + e))
    return spans


class Engine:
    """A loaded checkpoint: text tokenizer, body and codec, on one device."""

    def __init__(self, root: Path, cfg: ModelConfig, tokenizer, model, codec, device, dtype):
        self.root, self.cfg, self.tokenizer, self.model, self.codec = root, cfg, tokenizer, model, codec
        self.device, self.dtype = device, dtype
        self.forward = model  # what runs the body each step (a GraphedForward on CUDA)
        self._encoder = None  # loaded on the first voice clone
        self.threads: int | None = None  # torch CPU threads it runs with (set by load; None: whatever torch has)

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
        quantize: str | None = None,
        compile: bool = False,
        threads: int | None = None,
        cuda_graphs: bool = True,
        on_download: Callable[[int, int], None] | None = None,
    ) -> "Engine":
        """Load a checkpoint (loading.load_checkpoint). quantize="int8": dynamic int8 body on CPU;
        compile: torch.compile the position-wise halves of each layer (compiled by a first forward
        before it returns); threads: torch CPU threads
        (default: torch's); cuda_graphs: on CUDA, replay each packed layout's forward as a CUDA
        graph; on_notice(line): the licence notice and download messages; on_download(done,
        total): bytes of a download from the hub, if one is needed."""
        from .loading import load_checkpoint

        return load_checkpoint(
            cls,
            model,
            device=device,
            dtype=dtype,
            on_notice=on_notice,
            quantize=quantize,
            compile=compile,
            threads=threads,
            cuda_graphs=cuda_graphs,
            on_download=on_download,
        )

    def use_threads(self) -> None:
        """Run torch in the calling thread on this engine's CPU threads (loading.use_threads): the
        first thing each entry that runs torch does, so its audio is the same in any thread."""
        from .loading import use_threads

        use_threads(self.threads)

    def load_encoder(self) -> None:
        """Load the codec's encoder (HuBERT and the acoustic encoder), which cloning needs; done by
        the first voice_from_audio otherwise. Loading it up front lets a caller time model loading."""
        if self._encoder is None:
            from .encoder import load_codec_encoder

            self._encoder = load_codec_encoder(self.root / "audio_tokenizer", device=self.codec.device)

    def voice_from_audio(self, ref_audio, ref_text: str | None, *, preprocess: bool = True):
        """Encode a reference recording (a path, (waveform, sample_rate), or a PreparedReference)
        into a VoicePrompt."""
        from .voice import encode_reference

        if ref_text is not None and not ref_text.strip():
            raise InvalidRequest("the reference transcript is empty: give the words spoken in the reference audio")
        self.use_threads()
        self.load_encoder()
        return encode_reference(self._encoder, ref_audio, ref_text, preprocess=preprocess)

    def plan(self, req: Request) -> "Plan":
        """Cut a request into pieces (plan_request with this checkpoint's config)."""
        return plan_request(req, self.cfg)

    def plan_of(self, item: "Request | Plan") -> "Plan":
        """A request's plan for generate: the one given (a Plan, or a Planned request's), when it
        was made under this checkpoint's bounds, as a fresh copy (the given one is not filled in);
        else made now."""
        if isinstance(item, Plan):
            return item.fresh() if item.planned_as(self.cfg) else self.plan(item.req)
        plan = plan_of(item, self.cfg)
        return plan if plan.req is item else plan.fresh()

    def prepare(self, req: Request, piece: "Piece | None" = None, ref=None, seed: int | None = None):
        """Build the job of one piece of a request (by default: the whole request, uncut)."""
        from . import text
        from .canvas import build_canvas
        from .generation import make_job

        ref = ref or req.ref
        rate = ref.rate if ref else None  # what its codes already speak at (piece 0's, for the pieces it voices)
        if piece is None:
            target, _ = text.resolve_target_len(
                req.text,
                ref.text if ref else None,
                ref.codes.shape[-1] if ref else None,
                speed_against(req.speed, rate),
                req.duration,
                self.cfg.frame_rate,
            )
            piece = Piece(0, 0, req.text, target)
        lang, _ = text.resolve_language(req.lang)
        instruct = text.resolve_instruct(req.instruct, use_zh=text.contains_chinese(req.text))
        target = piece.target_len
        if target is None:  # a chunk: re-estimated against its voice, at its speed relative to the voice's
            target, _ = text.resolve_target_len(
                piece.text,
                ref.text if ref else None,
                ref.codes.shape[-1] if ref else None,
                speed_against(piece.speed, rate),
                None,
                self.cfg.frame_rate,
            )
        if target > self.cfg.max_target_seconds * self.cfg.frame_rate:
            raise InvalidRequest(
                f"one generation would be {target / self.cfg.frame_rate:.1f} s long: at most "
                f"{self.cfg.max_target_seconds:g} s (a longer text is cut into pieces by Engine.generate)"
            )
        canvas = build_canvas(
            self.tokenizer,
            piece.text,
            target,
            ref_text=ref.text if ref else None,
            ref_codes=ref.codes if ref else None,
            lang=lang,
            instruct=instruct,
            denoise=req.generation.denoise,
            num_codebooks=self.cfg.num_audio_codebook,
            mask_id=self.cfg.audio_mask_id,
        )
        positions = canvas.length + (target if req.generation.guidance_scale != 0 else 0)
        if positions > self.cfg.max_packed_tokens:
            raise InvalidRequest(
                f"one generation needs {positions} canvas positions (text, reference and audio): at most "
                f"{self.cfg.max_packed_tokens} (a shorter text piece or reference)"
            )
        return make_job(canvas, req.generation, req.seed if seed is None else seed, self.cfg.audio_mask_id, self.device)

    def generate(
        self,
        requests: "Sequence[Request | Plan]",
        on_step: StepCallback | None = None,
        on_result: Callable[[int, Result], None] | None = None,
        on_error: Callable[[int, Exception], None] | None = None,
        checks: "list | None" = None,
    ) -> list[Result]:
        """Synthesise every request; the order of results follows the requests.

        `requests`: each a Request, or its Plan when the caller planned it already (plan_request:
        the plan made once per request, reused here; one made under other bounds is made again).
        on_step(steps done, steps in all) after each forward: the steps of every piece's job
        (Plan.steps: num_step a piece, from the plans), a forward advancing each job it packs by
        one; a retake (`checks`) adds its steps to the total when it is queued.

        `checks`: a per-piece check (pieces.PieceCheck) for each request, or None: each piece's
        take is shown to it, and retaken with another seed while it asks (pieces.py).

        Requests are packed into shared forwards and each leaves when its own steps are done;
        on_result(index, result) is called as soon as one is finished (so a caller can save it).
        A long text is cut into chunks (and at pause tags): with a reference voice every chunk uses
        it; without one, the first chunk is generated first and is the reference of the others
        (estimated against it at speed 1: it already speaks at the request's speed).

        A request that fails on its own (its checks, its size, preparing or decoding one of its
        pieces) fails alone: with `on_error`, on_error(index, error) is called, its result is None
        and the others go on; without it, a request that fails its checks raises before anything
        runs, and one failing later raises once the others are finished.
        """
        from .generation import run_jobs

        self.use_threads()
        run = _GenerateRun(self, requests, on_step, on_result, on_error, checks)
        first = run.start()
        if first:
            run_jobs(
                self.model,
                first,
                mask_id=self.cfg.audio_mask_id,
                max_batch_size=self.cfg.max_batch_size,
                max_packed_tokens=self.cfg.max_packed_tokens,
                on_advance=run.advance,
                on_done=run.done,
                forward=self.forward,
            )
        if run.errors and on_error is None:
            raise next(iter(run.errors.values()))
        return run.results  # type: ignore[return-value]

    def warm_up(self) -> None:
        """Run one short forward, so that a torch.compile'd body compiles now rather than in the
        first request (Engine.load does this with compile=True: it counts as loading)."""
        import torch

        from .generation import forward_step

        job = self.prepare(Request(text="Warm up."))
        with torch.inference_mode():
            forward_step(self.model, [job], mask_id=self.cfg.audio_mask_id, forward=self.forward, device=self.device)

    def _decode(self, tokens):
        import torch

        with torch.inference_mode():
            return self.codec.decode(tokens[None].to(self.codec.device))[0, 0].cpu().numpy()  # [N]

    def _finish(self, plan: "Plan", warnings: list[str]) -> Result:
        """Decode a request's pieces and join them (a long text with a lean heap)."""
        from .memory import lean_heap

        with lean_heap() if len(plan.pieces) > 1 else nullcontext():
            return self._join(plan, warnings)

    def _decode_parts(self, plan: "Plan") -> tuple[list, list[tuple[int, int]]]:
        """Decode a request's pieces into its raw parts (chunks cross-faded), and where each piece
        lies in its part: [start, end) in the part's samples.

        Each chunk is decoded, faded and (when post-processing will quantise anyway) turned into
        int16 straight into its part's buffer, so a long text costs 2 bytes a sample, plus one
        chunk's decoding, plus the float32 result."""
        import numpy as np

        from . import audio

        g, hop, sr = plan.req.generation, self.cfg.codec.hop_length, self.sample_rate
        gap = int(0.3 * sr) // 3  # the reference's cross-fade: 0.1 s fade out, 0.1 s silence, 0.1 s fade in
        raw_parts, extents = [], [(0, 0)] * len(plan.pieces)
        for p in range(plan.n_parts):
            ks = [k for k, piece in enumerate(plan.pieces) if piece.part == p]
            if len(ks) == 1:
                raw_parts.append(self._decode(plan.tokens[ks[0]]))
                extents[ks[0]] = (0, len(raw_parts[-1]))
                continue
            lengths = [plan.tokens[k].shape[1] * hop for k in ks]
            dtype = np.int16 if g.postprocess_output else np.float32
            part = np.zeros(sum(lengths) + gap * (len(ks) - 1), dtype=dtype)
            pos = 0
            for i, (k, n) in enumerate(zip(ks, lengths)):
                wav = audio.fade_chunk(self._decode(plan.tokens[k]), i == 0, i == len(ks) - 1, sr)
                part[pos : pos + n] = audio.to_int16(wav) if dtype == np.int16 else wav
                extents[k] = (pos, pos + n)
                pos += n + gap
            raw_parts.append(part)
        return raw_parts, extents

    def _join(self, plan: "Plan", warnings: list[str]) -> Result:
        """Decode a request's pieces and join them: chunks cross-faded, parts post-processed and
        spaced by pauses; where each piece landed goes into Result.pieces."""
        import torch

        from . import audio
        from .memory import release_free_memory

        req, g = plan.req, plan.req.generation
        raw_parts, extents = self._decode_parts(plan)
        wav, placed = audio.post_process_parts_mapped(
            raw_parts,
            [round(s * self.sample_rate) for s in plan.gaps],
            ref_rms=req.ref.rms if req.ref else None,
            sample_rate=self.sample_rate,
            postprocess_output=g.postprocess_output,
            pad_duration=g.pad_duration,
            fade_duration=g.fade_duration,
            release=release_free_memory,
        )
        tokens = torch.cat(plan.tokens, dim=1)
        spans = piece_spans([piece.part for piece in plan.pieces], extents, placed)
        pieces = [(piece.text, s, e) for piece, (s, e) in zip(plan.pieces, spans)]
        return Result(wav, self.sample_rate, tokens, tokens.shape[1], req.seed, warnings, pieces)

    def render(self, req: Request, job, warnings: list[str] | None = None) -> Result:
        """Decode and post-process a finished job of a whole (uncut) request, as generate() does."""
        plan = Plan(req, [Piece(0, 0, req.text, job.canvas.target_len)], [0.0, 0.0], 1)
        plan.tokens[0] = job.tokens.cpu()
        return self._finish(plan, warnings or [])


class JoinedPieces(RequestPieces):
    """A request as Engine.generate runs it (pieces.py has the policy): cut by plan_request, the
    codes of its pieces kept and, once all are done, decoded and joined into one Result."""

    def __init__(self, engine: Engine, plan: Plan, warnings: list[str] | None = None, check=None) -> None:
        req = plan.req
        super().__init__(
            plan.pieces,
            ref=req.ref,
            seed=req.seed,
            voice_text=plan.pieces[0].text if plan.pieces else "",
            prepare=lambda piece, voice, seed: engine.prepare(req, piece, ref=voice, seed=seed),
            check=check,
        )
        self.engine, self.plan, self.warnings = engine, plan, warnings or []

    def take_audio(self, k: int, job) -> tuple:
        return self.engine._decode(job.tokens.cpu()), self.engine.sample_rate

    def accept(self, k: int, job) -> None:
        self.plan.tokens[k] = job.tokens.cpu()  # decoded when the whole text is done, one chunk at a time

    def result(self) -> Result:
        """The joined audio, once every piece is done."""
        return self.engine._finish(self.plan, self.warnings)


class _GenerateRun:
    """The state of one Engine.generate call: each request's pieces, its jobs and its result, a
    failure kept to its request. Admission: every ready job at once (run_jobs packs them)."""

    def __init__(
        self, engine: Engine, requests: "Sequence[Request | Plan]", on_step, on_result, on_error, checks=None
    ) -> None:
        self.engine, self.requests = engine, requests
        self.checks = list(checks) if checks is not None else [None] * len(requests)
        self.on_step, self.on_result, self.on_error = on_step, on_result, on_error
        self.runs: list[JoinedPieces | None] = [None] * len(requests)
        self.results: list[Result | None] = [None] * len(requests)
        self.errors: dict[int, Exception] = {}
        self.owner: dict[int, tuple[int, int]] = {}  # id(job) -> (request index, piece index)
        self.started: set[tuple[int, int]] = set()  # (request, piece) whose first take is queued
        self.steps_done, self.steps_total = 0, 0  # the bar: job steps, from the plans (Plan.steps)
        self.planned = [0] * len(requests)  # each request's steps (its plan's, and its retakes')
        self.stepped = [0] * len(requests)  # each request's steps run

    def fail(self, i: int, error: Exception) -> None:
        """Request i failed: report it (once); its jobs still in the loop are ignored when done."""
        if i in self.errors:
            return
        self.errors[i] = error
        self.steps_total -= self.planned[i] - self.stepped[i]  # its steps left will not run
        self.planned[i] = self.stepped[i]
        if self.on_error is not None:
            self.on_error(i, error)

    def start(self) -> list:
        """Check and plan every request; the jobs that can start now."""
        for i, item in enumerate(self.requests):
            try:
                req = item.req if isinstance(item, Plan) else item
                warnings = validate_request(req, self.engine.cfg)
                plan = self.engine.plan_of(item)
                self.runs[i] = JoinedPieces(self.engine, plan, warnings, self.checks[i])
                self.planned[i] = plan.steps
                self.steps_total += plan.steps
            except Exception as e:  # this request only
                if self.on_error is None:
                    raise
                self.fail(i, e)
        first = []
        for i, pieces in enumerate(self.runs):
            if pieces is not None:
                first += self._jobs(i, pieces.first()) or []
        return first

    def _jobs(self, i: int, ks: list[int]) -> list | None:
        """The jobs of request i's pieces ks (None when preparing one fails: the request fails)."""
        try:
            jobs = [self.runs[i].job(k) for k in ks]
        except Exception as e:
            self.fail(i, e)
            return None
        for k, job in zip(ks, jobs):
            self.owner[id(job)] = (i, k)
            if (i, k) in self.started:  # a retake: its steps are new to the total
                self.planned[i] += len(job.schedule)
                self.steps_total += len(job.schedule)
            self.started.add((i, k))
        return jobs

    def done(self, job) -> list:
        """A job finished: its piece is accepted; queue what it unlocks; finish its request when complete."""
        i, k = self.owner.pop(id(job))
        if i in self.errors:
            return []
        pieces = self.runs[i]
        new = self._jobs(i, pieces.done(k, job)) or []
        if pieces.complete:
            try:
                self.results[i] = pieces.result()
            except Exception as e:  # decoding this request only
                self.fail(i, e)
                return new
            if self.on_result:
                self.on_result(i, self.results[i])
        return new

    def advance(self, jobs: list) -> None:
        """A forward ran, each of its `jobs` one step on (those of a failed request count as run)."""
        for job in jobs:
            owner = self.owner.get(id(job))
            if owner is not None:
                self.stepped[owner[0]] += 1
                if owner[0] in self.errors:
                    self.planned[owner[0]] += 1
                    self.steps_total += 1
        self.steps_done += len(jobs)
        if self.on_step:
            self.on_step(self.steps_done, max(self.steps_total, self.steps_done))
