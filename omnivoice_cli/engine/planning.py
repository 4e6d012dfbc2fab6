"""A request and its plan, without the model: what to say and how (Request), what comes back
(Result), the checks before anything runs (validate_request, check_transcript), and the cut
into pieces (plan_request -> Plan; a Planned request carries its plan to Engine.generate, so it
is made once). No torch: a dry run, a size check and the progress bar's total use it as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from .errors import InvalidRequest
from .model.config import GenerationConfig, ModelConfig, value_rule
from .pieces import Piece, speed_against
from .text.canvastext import add_punctuation
from .text.chunking import chunk_len_for, chunk_text, cut_to_length
from .text.duration import resolve_target_len, share_frames, speech_seconds
from .text.instructs import check_instruct_text, resolve_instruct
from .text.languages import resolve_language
from .text.pauses import split_pauses
from .text.tags import cut_at_tags
from .text.textcheck import check_text, wordless_warning
from .text.vocabulary import contains_chinese

if TYPE_CHECKING:  # annotations only: importing torch here would slow `--help` and validation
    import numpy as np
    import torch

    from .sound.voice import VoicePrompt

MIN_CUT_CHARS = 8  # a piece cut shorter than this to fit means the speed or voice is absurd: refused


@dataclass(frozen=True)
class Request:
    """One text to speak and how."""

    text: str  # what to say
    lang: str | None = None  # language code or name; None = language-agnostic
    instruct: str | None = None  # voice-design items, e.g. "female, low pitch"
    instruct_text: str | None = None  # an instruct given to the model verbatim (a fine-tune's speaker name)
    duration: float | None = None  # fixed output length in seconds (overrides speed)
    speed: float | None = None  # speaking-rate factor (> 1 faster)
    seed: int = 0  # seeds this request's own torch.Generator
    ref: "VoicePrompt | None" = None  # voice to clone; None = auto voice / voice design
    generation: GenerationConfig = field(default_factory=GenerationConfig)  # decoding settings


@dataclass
class Result:
    """The audio of one request."""

    audio: np.ndarray  # float32 [N] at sample_rate
    sample_rate: int  # Hz
    tokens: (
        torch.Tensor | None
    )  # long [num_codebooks, target_len], the generated codes (None: dropped, e.g. by a Ray worker)
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
    cfg = cfg or ModelConfig()
    check_text(req.text)
    speed, duration = value_rule("speed"), replace(value_rule("duration"), high=cfg.max_target_seconds)
    if req.speed is not None and not speed.ok(req.speed):
        raise InvalidRequest(f"{req.speed} is not allowed: use {speed.allowed}", "speed")
    if req.duration is not None and not duration.ok(req.duration):
        raise InvalidRequest(f"{req.duration} is not allowed: use {duration.allowed}", "duration")
    if req.ref is not None:
        _check_voice(req.ref, cfg)
    warnings = []
    _, warning = resolve_language(req.lang, cfg.own)
    if warning:
        warnings.append(warning)
    try:
        resolve_instruct(req.instruct, use_zh=contains_chinese(req.text), own=cfg.own)
    except InvalidRequest as e:
        raise InvalidRequest(str(e), "instruct") from None
    verbatim, warning = check_instruct_text(req.instruct_text, cfg.own)
    if verbatim is not None and req.instruct and req.instruct.strip():
        raise InvalidRequest("give either instruct items or an instruct text, not both", "instruct_text")
    if warning:
        warnings.append(warning)
    parts, _ = split_pauses(req.text)
    if not parts:
        raise InvalidRequest("text has nothing to speak besides pause tags", "text")
    wordless = wordless_warning(" ".join(parts))
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
    if ref.text is not None:  # a voice without a transcript has none to check
        check_transcript(ref.text, cfg, "voice")


def check_transcript(text: str, cfg: ModelConfig | None = None, setting: str | None = None) -> None:
    """A reference transcript reads at most 4x as long as the longest reference (InvalidRequest)."""
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
    cfg = cfg or ModelConfig()
    g = req.generation
    parts, gaps = split_pauses(req.text)
    if len(parts) > cfg.max_pieces:
        raise InvalidRequest(f"the text has {len(parts)} parts between pause tags: at most {cfg.max_pieces}")
    if voice is None and req.ref is not None:
        voice = VoiceShape.of(req.ref)
    ref_text, ref_len, ref_rate = (voice.text, voice.frames, voice.rate) if voice is not None else (None, None, None)
    threshold = g.audio_chunk_threshold * cfg.frame_rate
    speed = speed_against(req.speed, ref_rate)
    targets = [resolve_target_len(part, ref_text, ref_len, speed, req.duration, cfg.frame_rate) for part in parts]
    _check_length(sum(t for t, _ in targets), gaps, cfg)
    pieces: list[Piece] = []
    for p, (part, (target, eff_speed)) in enumerate(zip(parts, targets)):
        # the rate it is spoken at: the speed, or the duration's (eff_speed is relative to the voice)
        rate = (
            req.speed
            if req.duration is None or eff_speed is None
            else eff_speed * (1.0 if ref_rate is None else ref_rate)
        )
        if target <= threshold:
            pieces.append(Piece(p, 0, part, target, rate))
            continue
        chunk_len = chunk_len_for(part, target, g.audio_chunk_duration, cfg.frame_rate)
        longest = int(chunk_len * cfg.max_target_seconds / g.audio_chunk_duration)  # a sentence one generation holds
        chunks = chunk_text(part, chunk_len, longest=longest)  # a longer one cut at clauses, words, else characters
        pieces += [Piece(p, c, chunk, None, rate) for c, chunk in enumerate(chunks)]
    pieces = _one_tag_each(pieces, fixed=req.duration is not None)
    shape = (ref_text, ref_len, ref_rate) if voice is not None else None
    pieces, frames = _fit_pieces(pieces, shape, cfg, g.audio_chunk_duration * cfg.frame_rate)
    _check_length(sum(frames), gaps, cfg)
    return Plan(req, pieces, gaps, len(parts), frames=frames, cfg=cfg)


def _one_tag_each(pieces: list[Piece], fixed: bool = False) -> list[Piece]:
    """Every piece with more than one non-verbal tag cut so each holds one (tags.cut_at_tags: a
    deliberate difference from the reference, docs/correctness.md); each cut estimated on its own,
    but for a fixed duration (`fixed`): a piece's frames then shared among its cuts
    (duration.share_frames), so that the request still lasts its duration."""
    out: list[Piece] = []
    for piece in pieces:
        cuts = cut_at_tags(piece.text)
        if len(cuts) < 2:
            out.append(piece)
        elif fixed and piece.target_len is not None:
            out += [replace(piece, text=t, target_len=n) for t, n in zip(cuts, share_frames(piece.target_len, cuts))]
        else:
            out += [replace(piece, text=t, target_len=None) for t in cuts]
    return out


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
    if piece.target_len is not None:
        return piece.target_len
    speed = speed_against(piece.speed, ref_rate)
    return resolve_target_len(piece.text, ref_text, ref_len, speed, None, frame_rate)[0]


def _fit_pieces(pieces: list[Piece], ref: tuple | None, cfg: ModelConfig, preferred: float):
    """(pieces, frames of each): every piece cut until it generates at most max_target_seconds.

    `ref`: (transcript, frames, rate) of the request's voice. Without one, piece 0 is the voice of
    the others (as Engine.generate runs them), so it is fitted first and the others are estimated
    against it, at its rate (RequestPieces.first_voice). A piece too long is cut
    (`text.cut_to_length`) into pieces of about `preferred` frames (the chunk duration); one that
    would have to be cut under MIN_CUT_CHARS characters (a speed or a voice that makes a few
    letters last many seconds) is an InvalidRequest."""
    limit = int(cfg.max_target_seconds * cfg.frame_rate)
    queue, out, frames = list(reversed(pieces)), list[Piece](), list[int]()
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
        cut = cut_at_words(piece.text, n, min(0.9 * limit, max(preferred, 0.2 * limit)))
        if len(cut) == 1:  # no place to cut it: one bracketed tag (or one character with its marks) that long
            raise InvalidRequest(
                f"{piece.text[:40]!r} would take {n / cfg.frame_rate:.0f} s to say and has no space or mark to cut it "
                f"at: one generation is at most {cfg.max_target_seconds:g} s (a bracketed tag is never cut)"
            )
        if not cut:
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


def cut_at_words(text: str, frames: int, size: float) -> list[str]:
    """The one rule for a stretch too long for one generation (the plan's max_target_seconds,
    the server's max_packed_tokens): `text`, estimated at `frames` frames, cut at words (else
    characters: `text.cut_to_length`) into pieces of about `size` frames, by the characters per
    frame of that estimate. [] when the pieces would be under MIN_CUT_CHARS characters (a speed or
    a voice that makes a few letters last many seconds): the caller refuses it."""
    max_chars = int(len(text) * size / max(frames, 1))
    return cut_to_length(text, max_chars) if max_chars >= MIN_CUT_CHARS else []


def piece_spans(
    parts: list[int], extents: list[tuple[int, int]], placed: list[tuple[int, list]]
) -> list[tuple[int, int]]:
    """Where each piece lies in the post-processed audio: [start, end) in its samples.

    parts[k]: the part piece k belongs to; extents[k]: its samples [a, b) in that part as decoded;
    placed[p]: (offset, layout) of part p in the output (postprocess.post_process_parts)."""
    from .sound.audio import map_span

    spans = []
    for p, (a, b) in zip(parts, extents):
        offset, layout = placed[p]
        s, e = map_span(layout, a, b)
        spans.append((offset + s, offset + e))
    return spans
