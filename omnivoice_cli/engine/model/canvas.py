"""The conditional canvas of one request (the reference's `_prepare_inference_inputs`).

    positions:  [ style | text | ref audio (cloning only) | target: T frames of MASK ]
    (an edit, `target_codes`: the target holds the take's known codes, MASK only where the model
    is to fill; the step loop reveals the MASK positions alone: generation.make_job)
    input_ids:  [num_codebooks, L]; text positions repeat one id on every row
    audio_mask: [L], True from the first ref-audio position (or the first target position) on

style = "<|denoise|>" (only if denoise and there is a reference) + "<|lang_start|>{lang or None}
<|lang_end|>" + "<|instruct_start|>{instruct or None}<|instruct_end|>", tokenized as one string;
text = "<|text_start|>" + combine_text(text, ref_text) + "<|text_end|>", tokenized around the
non-verbal tags.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from ..errors import InvalidRequest
from ..text.canvastext import combine_text, tokenize_with_nonverbal_tags
from ..text.tokenizer import TextTokenizer

__all__ = ["Canvas", "build_canvas", "style_text"]


@dataclass(frozen=True, eq=False)
class Canvas:
    """One request's conditional canvas.

    input_ids:    LongTensor [num_codebooks, L]
    audio_mask:   BoolTensor [L]
    target_start: first target position (the target is input_ids[:, target_start:])
    target_len:   T, number of target frames (L = target_start + T)
    ref_len:      number of reference-audio frames just before the target (0 without a reference)
    """

    input_ids: torch.Tensor
    audio_mask: torch.Tensor
    target_start: int
    target_len: int
    ref_len: int = 0

    @property
    def length(self) -> int:
        """L, the number of canvas positions."""
        return int(self.input_ids.shape[-1])

    @property
    def audio_start(self) -> int:
        """First audio position (ref audio if any, else the target)."""
        return self.target_start - self.ref_len


def style_text(lang: str | None, instruct: str | None, denoise: bool, has_ref: bool) -> str:
    """The style prefix string of the canvas (before tokenization)."""
    s = "<|denoise|>" if denoise and has_ref else ""
    s += f"<|lang_start|>{lang if lang else 'None'}<|lang_end|>"
    s += f"<|instruct_start|>{instruct if instruct else 'None'}<|instruct_end|>"
    return s


def build_canvas(
    tokenizer: TextTokenizer,
    text: str,
    target_len: int,
    *,
    ref_text: str | None = None,
    ref_codes: torch.Tensor | None = None,
    lang: str | None = None,
    instruct: str | None = None,
    denoise: bool = True,
    num_codebooks: int = 8,
    mask_id: int = 1024,
    target_codes: torch.Tensor | None = None,
) -> Canvas:
    """Build the conditional canvas of one request.

    text:       the target text (raw; combined and cleaned here)
    target_len: T >= 1 target frames
    ref_text:   the reference transcript, already punctuated (`add_punctuation`)
    ref_codes:  LongTensor [num_codebooks, T_ref] of codec codes (cloning), or None
    lang, instruct: already resolved (`resolve_language`, `resolve_instruct`)
    target_codes: LongTensor [num_codebooks, target_len] of known codes, mask_id where the model
                is to fill (an edit); None: all MASK (every other request)
    """
    try:
        if isinstance(target_len, bool):
            raise TypeError
        target_len = operator.index(target_len)
    except TypeError:
        raise InvalidRequest(f"target length must be an integer number of frames, got {target_len!r}") from None
    if target_len < 1:
        raise InvalidRequest(f"target length must be >= 1 frame, got {target_len}")
    if ref_codes is not None:
        if ref_codes.dim() != 2 or ref_codes.shape[0] != num_codebooks or ref_codes.shape[1] < 1:
            raise InvalidRequest(
                f"reference audio codes must have shape [{num_codebooks}, T_ref>=1], got {list(ref_codes.shape)}"
            )
        if ref_codes.is_floating_point() or ref_codes.is_complex():
            raise InvalidRequest(f"reference audio codes must be integers, got {ref_codes.dtype}")
        if ref_codes.numel() and (int(ref_codes.min()) < 0 or int(ref_codes.max()) >= mask_id):
            raise InvalidRequest(f"reference audio codes must lie in 0..{mask_id - 1}")
    if target_codes is not None:
        if list(target_codes.shape) != [num_codebooks, target_len] or target_codes.is_floating_point():
            raise InvalidRequest(
                f"known target codes must be integers of shape [{num_codebooks}, {target_len}], "
                f"got {target_codes.dtype} {list(target_codes.shape)}"
            )
        if int(target_codes.min()) < 0 or int(target_codes.max()) > mask_id:
            raise InvalidRequest(f"known target codes must lie in 0..{mask_id} ({mask_id}: to fill)")

    style_ids = tokenizer.encode(style_text(lang, instruct, denoise, ref_codes is not None))
    wrapped = "<|text_start|>" + combine_text(text, ref_text) + "<|text_end|>"
    text_ids = tokenize_with_nonverbal_tags(tokenizer, wrapped)
    prefix = torch.tensor(style_ids + text_ids, dtype=torch.long)  # [N1 + N2]

    parts = [prefix.unsqueeze(0).expand(num_codebooks, -1)]  # [C, N1 + N2]
    ref_len = 0
    if ref_codes is not None:
        ref_len = int(ref_codes.shape[1])
        parts.append(ref_codes.to(device="cpu", dtype=torch.long))  # [C, T_ref]
    if target_codes is None:
        parts.append(torch.full((num_codebooks, target_len), mask_id, dtype=torch.long))  # [C, T]
    else:
        parts.append(target_codes.to(device="cpu", dtype=torch.long))  # [C, T], MASK where to fill
    input_ids = torch.cat(parts, dim=1).contiguous()  # [C, L]

    length = input_ids.shape[1]
    target_start = length - target_len
    audio_mask = torch.zeros(length, dtype=torch.bool)
    audio_mask[target_start - ref_len :] = True
    return Canvas(
        input_ids=input_ids, audio_mask=audio_mask, target_start=target_start, target_len=target_len, ref_len=ref_len
    )
