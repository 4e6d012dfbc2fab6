"""`omnivoice edit`'s run: the take encoded, its changed stretches filled by the model with the
whole new transcript on the canvas and every other code kept, the new codes decoded and joined
to the take's own codec reconstruction (the plan: editplan.py; the method: docs/edit.md).

    run = EditRun(plan, settings, session)      # settings: the one schema's, resolved
    report = run.run(target)                    # the output written (the take's rate and level)

The audio: the edited codes decoded (E) and the take's own codes decoded (R); the output is R
(moved by the changes before it) wherever a known stretch lies more than JOIN_FRAMES from a join,
E in every filled stretch, and across the JOIN_FRAMES of a known stretch next to a join a linear
cross-fade between the two (the same codes there, decoded with other neighbours).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...engine.errors import OmniVoiceError
from ...engine.sound.voice import RMS_TARGET
from ..deliver import Outputs, Take, deliver
from ..request import References, Voices, build_request
from ..session import Session, hardware_from_settings
from .editplan import HOP, EditPlan

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ...engine.pipeline import Engine
    from ...media.output import OutputTarget
    from ..settings.layers import Resolved

JOIN_FRAMES = 2  # frames of a known stretch cross-faded at each join (80 ms)


@dataclass
class EditReport:
    """What a run did."""

    seed: int = 0
    seconds: float = 0.0  # the output's length
    generate_seconds: float = 0.0
    load_seconds: float = 0.0
    codes: torch.Tensor | None = None  # [C, T'] the edited codes (the known ones the take's, bit for bit)
    warnings: list[str] = field(default_factory=list)


def decode(engine: Engine, codes: torch.Tensor) -> np.ndarray:
    """Codes [C, T] -> float32 [T * hop] at the engine's rate."""
    import torch

    with torch.inference_mode():
        return engine.codec.decode(codes[None].to(engine.codec.device))[0, 0].float().cpu().numpy()


def join(plan: EditPlan, edited: np.ndarray, own: np.ndarray, fade: int = JOIN_FRAMES) -> np.ndarray:
    """The output from the edited codes' audio `edited` ([T' hop]) and the take's own codec
    reconstruction `own` ([T hop]): see the module doc. A known stretch shorter than two fades
    fades over half its length."""
    import numpy as np

    out = edited.astype(np.float32, copy=True)
    frames = plan.target_frames
    for kind, s, e, t in plan.layout():
        if kind != "known":
            continue
        a, b, n = s * HOP, e * HOP, (e - s) * HOP
        w = np.ones(n, dtype=np.float32)
        f = min(fade * HOP, n // 2)
        ramp = (np.arange(f, dtype=np.float32) + 0.5) / max(f, 1)
        if s > 0 and f:
            w[:f] = ramp  # a join before it: from the new audio into the take's
        if e < frames and f:
            w[n - f :] = np.minimum(w[n - f :], ramp[::-1])
        take = own[t * HOP : t * HOP + n]
        out[a:b] = np.where(w >= 1.0, take, w * take + (1.0 - w) * out[a:b])
    return out


class EditRun:
    """One edit: encode, fill the changed stretches, decode, join, level, deliver."""

    def __init__(self, plan: EditPlan, settings: Resolved, session: Session | None = None) -> None:
        self.plan, self.settings = plan, settings
        self.session = session or Session()
        # the request of the whole new transcript: its text as the model reads it, its settings
        self.built = build_request(plan.text, settings, refs=References(), voices=Voices())
        self.report = EditReport(seed=self.built.request.seed, warnings=list(self.built.warnings))

    def fill(self, engine: Engine) -> tuple[torch.Tensor, torch.Tensor]:
        """(the take's codes [C, T], the edited codes [C, T']): the model fills the masked frames."""
        from ...engine.model.generation import run_jobs

        cfg = engine.cfg
        own = engine.voice_from_audio(self.plan.take.prepared, None, preprocess=False).codes.cpu()
        known = self.plan.target(own, cfg.audio_mask_id)
        job = engine.prepare(self.built.request, known=known)
        with self.session.steps("editing", len(job.schedule)) as on_step:
            run_jobs(
                engine.model,
                [job],
                mask_id=cfg.audio_mask_id,
                max_batch_size=1,
                max_packed_tokens=cfg.max_packed_tokens,
                forward=engine.forward,
                on_step=on_step,
            )
        codes = job.tokens.cpu()
        pinned = known != cfg.audio_mask_id
        if not bool((codes[pinned] == known[pinned]).all()):  # the loop's promise, checked
            raise OmniVoiceError("the edit changed a code outside its spans")
        return own, codes

    def run(self, target: OutputTarget, stdout=None) -> EditReport:
        """Load the model, edit, write the output at the take's rate and level."""
        values = self.settings.values
        engine, self.report.load_seconds = self.session.load_engine(
            str(values["model"]), hardware_from_settings(values), encoder=True
        )
        t0 = time.perf_counter()
        own, codes = self.fill(engine)
        audio = join(self.plan, decode(engine, codes), decode(engine, own))
        rms = self.plan.take.prepared.rms
        if 0 < rms < RMS_TARGET:  # the take was levelled up to be encoded: back to its own level
            audio *= rms / RMS_TARGET
        self.report.generate_seconds = time.perf_counter() - t0
        self.report.codes = codes
        self.report.seconds = len(audio) / engine.sample_rate
        outputs = Outputs(
            target=target,
            sample_rate=self.plan.take.sample_rate,
            stdout=None if stdout is None else (lambda: stdout),
        )
        deliver(Take(audio, engine.sample_rate, self.plan.text), outputs, warn=self.session.warn)
        return self.report
