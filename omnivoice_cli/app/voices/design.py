"""A designed voice, rendered once and cloned after that.

A voice designed from voice-design items (`--instruct`, an OpenAI voice name, a `--voice-map`
entry, a `--cast NAME=instruct:...` member) is a new random voice at every generation: its
seed, its text and its line number change what it sounds like. A `Design` (items, seed, sample
text, language) is rendered once, as one piece, and its codes and words (`VoicePrompt`) are the
voice every later request clones, as piece 0 of a long text voices its other pieces
(engine/pieces.py), across lines and requests:

    design = Design("female, low pitch", seed=3, sample=default_sample("en"), lang="en")
    prompt = render(engine, design)                      # VoicePrompt: codes + the sample's words
    voice_prompt(prompt)                                 # its sha256: what `voice_prompt` names

`voice add NAME --instruct ...` keeps the prompt in the saved voice file (with the instruct,
seed, sample and model in its metadata). The built-in names (alloy ... cedar) and `--voice-map`
entries are rendered once per checkpoint with BUILTIN_SEED and the sample of DEFAULT_SAMPLES,
and kept in `designed/` of the user's data folder (designcache.py), keyed by the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...engine.errors import InvalidRequest
from ...engine.planning import Plan, Request, plan_request, validate_request
from ...engine.sound.voicefile import prompt_checksum

if TYPE_CHECKING:
    from ...engine.pipeline import Engine
    from ...engine.planning import Result
    from ...engine.sound.voice import VoicePrompt

BUILTIN_SEED = 1234  # the seed every built-in name and voice-map entry is rendered with
# the sentence a designed voice says when no sample is given, by language (others: English's)
DEFAULT_SAMPLES = {
    "en": "The quick brown fox jumps over the lazy dog, and then it rests in the warm sun.",
    "zh": "今天天气很好，我们一起去公园散步吧。",
    "de": "Der schnelle braune Fuchs springt über den faulen Hund und ruht dann in der Sonne.",
    "fr": "Le renard brun rapide saute par-dessus le chien paresseux, puis se repose au soleil.",
    "es": "El rápido zorro marrón salta sobre el perro perezoso y luego descansa al sol.",
    "it": "La veloce volpe marrone salta sopra il cane pigro e poi riposa al sole.",
    "pt": "A rápida raposa marrom pula sobre o cão preguiçoso e depois descansa ao sol.",
    "ja": "今日はとても良い天気なので、公園を散歩しましょう。",
    "ko": "오늘은 날씨가 좋아서 공원에서 산책을 하고 싶어요.",
    "ru": "Быстрая коричневая лиса прыгает через ленивую собаку и отдыхает на солнце.",
}
MAX_SAMPLE_CHARS = 300  # a sample is one piece: a sentence or two


@dataclass(frozen=True)
class Design:
    """What a designed voice is rendered from: the same design on the same checkpoint is the same
    voice (on the same device and dtype)."""

    instruct: str | None  # voice-design items (None: the model's own choice, seeded)
    seed: int
    sample: str  # what the rendered voice says
    lang: str | None = None
    instruct_text: str | None = None  # a fine-tune's verbatim instruct (its speaker name)

    def fields(self) -> dict[str, str]:
        """The design as a voice file's metadata records it."""
        return {
            "instruct": self.instruct or "",
            "instruct_text": self.instruct_text or "",
            "seed": str(self.seed),
            "sample": self.sample,
            "lang": self.lang or "",
        }

    def request(self) -> Request:
        return Request(
            text=self.sample, lang=self.lang, instruct=self.instruct, instruct_text=self.instruct_text, seed=self.seed
        )


def default_sample(lang: str | None) -> str:
    """The sentence a designed voice says when none is given: its language's, else English's."""
    from ...engine.text.languages import resolve_language

    code = None
    if lang:
        try:
            code = resolve_language(lang)[0]
        except InvalidRequest:
            code = None
    return DEFAULT_SAMPLES.get((code or "en").split("-")[0].lower(), DEFAULT_SAMPLES["en"])


def check_sample(text: str, where: str = "--sample") -> str:
    """A sample: non-empty, at most MAX_SAMPLE_CHARS characters (InvalidRequest otherwise)."""
    text = " ".join(text.split()) if isinstance(text, str) else ""
    if not text:
        raise InvalidRequest(f"{where} is empty: give a sentence for the voice to say")
    if len(text) > MAX_SAMPLE_CHARS:
        raise InvalidRequest(f"{where} is {len(text)} characters long: at most {MAX_SAMPLE_CHARS} (a sentence or two)")
    return text


def design_of(settings, sample: str | None, cfg, seed: int) -> Design:
    """`voice add --instruct`'s design from its settings (instruct, lang), --sample (the language's
    default sentence when none) and `seed`, checked as a request is (the instruct's items under
    the checkpoint's config `cfg`, the language) before the model loads (InvalidRequest)."""
    text = default_sample(settings["lang"]) if sample is None else check_sample(sample)
    design = Design(settings["instruct"], seed, text, settings["lang"])
    try:
        validate_request(design.request(), cfg)
    except InvalidRequest as e:
        raise InvalidRequest(f"--{(e.setting or 'instruct').replace('_', '-')}: {e}") from None
    if not one_piece(design, cfg):
        raise InvalidRequest(
            f"--sample {text[:40]!r} is more than one piece: give a sentence or two, without pause tags"
        )
    return design


def one_piece(design: Design, cfg=None) -> bool:
    """The design's sample is spoken as one piece (what a voice prompt is made of)."""
    try:
        return len(plan_request(design.request(), cfg).pieces) == 1
    except InvalidRequest:
        return False


def line_sample(request: Request, cfg=None) -> str:
    """The sample of the voice a line designs (`request`, without a voice): its words when it is one
    piece, else its first piece's (what render_line keeps of it); its language's default sentence
    when the line fails its checks (they name it when it is built)."""
    try:
        validate_request(request, cfg)
        pieces = plan_request(request, cfg).pieces
    except InvalidRequest:
        return default_sample(request.lang)
    return request.text if len(pieces) == 1 else pieces[0].text


def render(engine: Engine, design: Design) -> VoicePrompt:
    """The designed voice: its sample generated as one piece, its codes and words as a prompt
    (engine.pieces.RequestPieces.first_voice: what piece 0 gives the pieces after it)."""
    from ...engine.sound.voice import VoicePrompt

    plan = engine.plan(design.request())
    if len(plan.pieces) != 1:
        raise InvalidRequest(
            f"the sample {design.sample[:40]!r} is spoken in {len(plan.pieces)} pieces: a designed voice's sample "
            "is one piece (a sentence or two, without pause tags)"
        )
    [result] = engine.generate([plan])
    assert result.tokens is not None  # Engine.generate keeps them
    return VoicePrompt(result.tokens.clone(), plan.pieces[0].text, None)


def render_line(
    engine: Engine,
    request: Request,
    sample: str | None = None,
    check=None,
    first_only: bool = False,
    seed: int | None = None,
    on_step=None,
) -> tuple[VoicePrompt, Result] | None:
    """A line that designs the voice it speaks in (a `--cast` member's first line, whose seed is its
    design's seed and whose first piece its sample), generated once as itself with no voice: its
    first piece's codes and words are the voice (as piece 0 of a text without a voice voices the
    pieces after it: engine/pieces.py, with the rate it speaks at) and its result is the line's
    audio (its later pieces cloning piece 0, joined as Engine.generate joins them), so that it is
    not generated again as a clone. `sample`: the design's sample (None: the line's text);
    None is returned where neither the line's text nor its first piece is that sample (not the
    designing line). `check`: the line's per-piece check (--verify: piece 0's kept take is the
    voice); `first_only`: only piece 0 generated (the voice of a line spoken before: its result
    is piece 0's alone); `seed`: piece 0's seed (a take --verify kept; None: the line's);
    `on_step`: Engine.generate's (a steps bar fed as by any other line)."""
    import dataclasses

    from ...engine.sound.voice import VoicePrompt

    plan = engine.plan(dataclasses.replace(request, ref=None, seed=request.seed if seed is None else seed))
    first = plan.pieces[0]
    if sample is not None and sample not in (request.text, first.text):
        return None
    if first_only and len(plan.pieces) > 1:  # piece 0 alone: its job is the same as in the whole plan
        plan = Plan(plan.req, [first], [0.0, 0.0], 1, frames=plan.frames[:1], cfg=plan.cfg)
    checks = None if check is None else [check]
    [result] = engine.generate([plan], on_step=on_step, checks=checks)
    assert result.tokens is not None  # Engine.generate keeps them
    codes = result.tokens[:, : plan.frames[0]] if len(plan.pieces) > 1 else result.tokens
    return VoicePrompt(codes.clone(), first.text, None, rate=first.speed), result  # its rate: pieces.first_voice's


def voice_prompt(prompt: VoicePrompt | None) -> str | None:
    """`voice_prompt` of a request's voice (the sha256 of its codes and words), None without one."""
    if prompt is None:
        return None
    return prompt_checksum(prompt.codes, prompt.text)


def request_voice_prompt(request: object) -> str | None:
    """`voice_prompt` of an engine request's voice (None: no voice prompt, a fresh design)."""
    return voice_prompt(getattr(request, "ref", None))
