"""From requests to audio: the public face of the engine.

    engine = Engine.load("k2-fsa/OmniVoice", Hardware(device="auto", dtype="auto"))  # hardware.py
    [result] = engine.generate([Request(text="Hello", seed=7)], on_step=print)
    result.audio  # float32 [N] at engine.sample_rate
    with engine.stream(Request(text="Hello. And more.")) as run:  # the same, piece by piece
        for piece in run:                                          # StreamPiece, strictly in order
            play(piece.audio)

A request, its checks and its plan (cut into pieces, no model) are in planning.py; generate
takes a request, a Planned one (its plan carried from where it was built) or a Plan.

The engine never imports typer or rich; progress leaves it through `on_step(done, total)`.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from .errors import InvalidRequest
from .fast import memory
from .hardware import Hardware
from .model.config import ModelConfig
from .pieces import Piece, RequestPieces, speed_against
from .planning import (  # the request and its plan (re-exported: the engine's public face)
    Plan,
    Request,
    Result,
    piece_spans,
    plan_of,
    plan_request,
    validate_request,
)
from .text.duration import resolve_target_len
from .text.instructs import check_instruct_text, resolve_instruct
from .text.languages import resolve_language
from .text.vocabulary import contains_chinese

if TYPE_CHECKING:  # annotations only: importing torch here would slow `--help` and validation
    from .model.encoder import HiggsEncoder
    from .stream.cut import StreamConfig
    from .stream.run import StreamRun

__all__ = ["Engine", "JoinedPieces"]  # its own names

StepCallback = Callable[[int, int], None]  # (steps done, steps in total) of the current forward loop


class Engine:
    """A loaded checkpoint: text tokenizer, body and codec, on one device."""

    def __init__(self, root: Path, cfg: ModelConfig, tokenizer, model, codec, device, dtype):
        self.root, self.cfg, self.tokenizer, self.model, self.codec = root, cfg, tokenizer, model, codec
        self.device, self.dtype = device, dtype
        self.forward = model  # what runs the body each step (a GraphedForward on CUDA)
        self._encoder: HiggsEncoder | None = None  # loaded on the first voice clone
        self.threads: int | None = None  # torch CPU threads it runs with (set by load; None: whatever torch has)
        self.quantize: str | None = None  # "int8": the int8 body (set by load: what --quantize auto chose); None: none

    @property
    def sample_rate(self) -> int:
        return self.cfg.sample_rate

    @classmethod
    def load(
        cls,
        model: str | None = None,
        hardware: Hardware | None = None,
        *,
        on_notice: Callable[[str], None] | None = None,
        on_download: Callable[[int, int], None] | None = None,
    ) -> "Engine":
        """Load a checkpoint (a hub id or a folder; None: the default) on `hardware` (the record of
        device, dtype, quantize, compile, threads, CUDA graphs and int8 kernel: hardware.py; default
        all auto) through loading.load_checkpoint. on_notice(line): the licence notice, download and
        hardware messages; on_download(done, total): bytes of a download from the hub, if one is
        needed."""
        from . import (
            loading,
        )  # imports torch: not at the top (a dry run, --help and the server's checks use this module)

        return loading.load_checkpoint(cls, model, hardware, on_notice=on_notice, on_download=on_download)

    def use_threads(self) -> None:
        """Run torch in the calling thread on this engine's CPU threads (loading.use_threads): the
        first thing each entry that runs torch does, so its audio is the same in any thread."""
        from . import loading

        loading.use_threads(self.threads)

    def load_encoder(self) -> None:
        """Load the codec's encoder (HuBERT and the acoustic encoder), which cloning needs; done by
        the first voice_from_audio otherwise. Loading it up front lets a caller time model loading."""
        if self._encoder is None:
            from .model.encoder import load_codec_encoder

            self._encoder = load_codec_encoder(self.root / "audio_tokenizer", device=self.codec.device)

    def voice_from_audio(self, ref_audio, ref_text: str | None, *, preprocess: bool = True):
        """Encode a reference recording (a path, (waveform, sample_rate), or a PreparedReference)
        into a VoicePrompt."""
        from .sound.voice import encode_reference

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

    def prepare(self, req: Request, piece: "Piece | None" = None, ref=None, seed: int | None = None, known=None):
        """Build the job of one piece of a request (by default: the whole request, uncut). known:
        an edit's target, codes [C, T] with the mask id where to fill (app/edit/): T is its length."""
        from .model.canvas import build_canvas
        from .model.generation import make_job

        ref = ref or req.ref
        if known is not None:
            piece = Piece(0, 0, req.text, int(known.shape[-1]))
        rate = ref.rate if ref else None  # what its codes already speak at (piece 0's, for the pieces it voices)
        if piece is None:
            whole, _ = resolve_target_len(
                req.text,
                ref.text if ref else None,
                ref.codes.shape[-1] if ref else None,
                speed_against(req.speed, rate),
                req.duration,
                self.cfg.frame_rate,
            )
            piece = Piece(0, 0, req.text, whole)
        lang, _ = resolve_language(req.lang, self.cfg.own)
        instruct = check_instruct_text(req.instruct_text, self.cfg.own)[0] or resolve_instruct(
            req.instruct, use_zh=contains_chinese(req.text), own=self.cfg.own
        )
        target: int | None = piece.target_len
        if target is None:  # a chunk: re-estimated against its voice, at its speed relative to the voice's
            target, _ = resolve_target_len(
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
            target_codes=known,
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
        steady: bool = False,
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

        `steady`: the requests leave one by one, in a steady stream, rather than a whole forward's
        worth together at the end (admission.Stagger.steady: a batch or a book, whose finished lines
        a stop keeps); the same tokens per request, in about the same time where a forward costs
        in proportion to its tokens (a CPU).

        A request that fails on its own (its checks, its size, preparing or decoding one of its
        pieces) fails alone: with `on_error`, on_error(index, error) is called, its result is None
        and the others go on; without it, a request that fails its checks raises before anything
        runs, and one failing later raises once the others are finished.
        """
        from .model.admission import Stagger
        from .model.generation import run_jobs

        self.use_threads()
        run = _GenerateRun(self, requests, on_step, on_result, on_error, checks)
        first = run.start()
        pieces = sum(len(p) for p in run.runs if p is not None)
        may_join = Stagger.steady(pieces, self.cfg.max_batch_size) if steady else None
        if first:
            run_jobs(
                self.model,
                first,
                mask_id=self.cfg.audio_mask_id,
                max_batch_size=self.cfg.max_batch_size,
                max_packed_tokens=self.cfg.max_packed_tokens,
                on_advance=run.advance,
                on_done=run.done,
                on_step=run.report,
                forward=self.forward,
                may_join=may_join,
            )
        if run.errors and on_error is None:
            raise next(iter(run.errors.values()))
        return run.results  # type: ignore[return-value]

    def stream(
        self,
        req: Request,
        *,
        on_step: StepCallback | None = None,
        on_progress: StepCallback | None = None,
        on_warning: Callable[[str], None] | None = None,
        config: "StreamConfig | None" = None,
        on_idle: Callable[[], None] | None = None,
        idle_seconds: float = 0.25,
        check=None,
    ) -> "StreamRun":
        """Speak one request piece by piece, generated in a worker thread (engine/stream/): iterate
        the returned StreamRun for its pieces (StreamPiece), strictly in order, each as soon as it
        and all before it are ready; leave its `with` block to cancel what is left. A text of one
        piece is exactly what generate gives; the pieces of any text, joined, are the streamed
        render's (stream.render.stream, in the caller's thread). on_step(forwards done, planned),
        on_progress(steps done, steps in all), on_warning(message) and on_idle() (every
        `idle_seconds` while no piece comes) are called in the iterating thread; `config`: how the
        text is cut (StreamConfig); `check`: a per-piece check (pieces.PieceCheck)."""
        from .stream.run import StreamRun

        return StreamRun(
            self,
            req,
            on_step=on_step,
            on_progress=on_progress,
            on_warning=on_warning,
            config=config,
            on_idle=on_idle,
            idle_seconds=idle_seconds,
            check=check,
        )

    def warm_up(self) -> None:
        """Run one short forward, so that a torch.compile'd body compiles now rather than in the
        first request (Engine.load does this with compile=True: it counts as loading)."""
        import torch

        from .model.generation import forward_step

        job = self.prepare(Request(text="Warm up."))
        with torch.inference_mode():
            forward_step(self.model, [job], mask_id=self.cfg.audio_mask_id, forward=self.forward, device=self.device)

    def _decode(self, tokens):
        import torch

        with torch.inference_mode():
            return self.codec.decode(tokens[None].to(self.codec.device))[0, 0].cpu().numpy()  # [N]

    def _finish(self, plan: "Plan", warnings: list[str]) -> Result:
        """Decode a request's pieces and join them (a long text with a lean heap)."""
        with memory.lean_heap() if len(plan.pieces) > 1 else nullcontext():
            return self._join(plan, warnings)

    def _decode_parts(self, plan: "Plan") -> tuple[list, list[tuple[int, int]]]:
        """Decode a request's pieces into its raw parts (chunks cross-faded), and where each piece
        lies in its part: [start, end) in the part's samples.

        Each chunk is decoded, faded and (when post-processing will quantise anyway) turned into
        int16 straight into its part's buffer, so a long text costs 2 bytes a sample, plus one
        chunk's decoding, plus the float32 result."""
        import numpy as np

        from .sound import audio, postprocess

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
                wav = postprocess.fade_chunk(self._decode(plan.tokens[k]), i == 0, i == len(ks) - 1, sr)
                part[pos : pos + n] = audio.to_int16(wav) if dtype == np.int16 else wav
                extents[k] = (pos, pos + n)
                pos += n + gap
            raw_parts.append(part)
        return raw_parts, extents

    def _join(self, plan: "Plan", warnings: list[str]) -> Result:
        """Decode a request's pieces and join them: chunks cross-faded, parts post-processed and
        spaced by pauses; where each piece landed goes into Result.pieces."""
        import torch

        from .sound import postprocess

        req, g = plan.req, plan.req.generation
        raw_parts, extents = self._decode_parts(plan)
        wav, placed = postprocess.post_process_parts(
            raw_parts,
            [round(s * self.sample_rate) for s in plan.gaps],
            ref_rms=req.ref.rms if req.ref else None,
            sample_rate=self.sample_rate,
            postprocess_output=g.postprocess_output,
            pad_duration=g.pad_duration,
            fade_duration=g.fade_duration,
            release=memory.release_free_memory,
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

    def _pieces(self, i: int) -> "JoinedPieces":
        pieces = self.runs[i]
        assert pieces is not None  # planned (a request that failed its plan has no jobs)
        return pieces

    def _jobs(self, i: int, ks: list[int]) -> list | None:
        """The jobs of request i's pieces ks (None when preparing one fails: the request fails)."""
        try:
            jobs = [self._pieces(i).job(k) for k in ks]
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
        pieces = self._pieces(i)
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

    def report(self, forwards: int, planned: int) -> None:
        """After a forward and the callbacks of the jobs it finished (so a retake they queued is in
        the total first: the bar is full at the last step only): the steps done, of all."""
        if self.on_step:
            self.on_step(self.steps_done, max(self.steps_total, self.steps_done))
